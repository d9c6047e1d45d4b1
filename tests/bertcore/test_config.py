import json

import pytest

from bertcore.models.config import PRESETS, BertConfig, preset
from bertcore.training.settings import TrainingConfig


def test_presets_are_the_published_miniatures():
    shapes = {name: (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size)
              for name, c in PRESETS.items()}
    assert shapes == {
        "tiny": (2, 128, 2, 512),
        "mini": (4, 256, 4, 1024),
        "small": (4, 512, 8, 2048),
        "medium": (8, 512, 8, 2048),
        "base": (12, 768, 12, 3072),
    }
    assert preset("mini", vocab_size=8000).vocab_size == 8000


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match="tiny, mini, small, medium, base"):
        preset("huge")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(hidden_size=100, num_attention_heads=3), "not divisible by num_attention_heads 3"),
        (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
        (dict(vocab_size=2.5), "vocab_size must be a positive integer"),
        (dict(hidden_act="swish2"), "hidden_act 'swish2' is not supported"),
        (dict(hidden_dropout_prob=1.0), r"hidden_dropout_prob must be in \[0, 1\)"),
        (dict(pad_token_id=50, vocab_size=10), "pad_token_id 50 is outside the vocabulary"),
    ],
)
def test_invalid_values_raise_readable_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**changes)


def test_json_round_trip_ignores_foreign_fields(tmp_path):
    config = preset("tiny", vocab_size=999, layer_norm_eps=1e-7)
    path = tmp_path / "config.json"
    config.to_json_file(path)
    values = json.loads(path.read_text())
    assert values["model_type"] == "bert" and values["vocab_size"] == 999
    values.update(transformers_version="4.8.2", gradient_checkpointing=False, use_cache=True)
    path.write_text(json.dumps(values))
    assert BertConfig.from_json_file(path) == config


def test_corrupt_or_foreign_config_files(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        BertConfig.from_json_file(path)
    path.write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="only BERT"):
        BertConfig.from_json_file(path)
    with pytest.raises(FileNotFoundError, match=r"needs a config\.json"):
        BertConfig.from_json_file(tmp_path / "missing.json")


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        PRESETS["tiny"].hidden_size = 3


@pytest.mark.parametrize(("changes", "message"), [
    (dict(initializer_range="x"), r"initializer_range must be a finite number \(float\), got 'x' \(str\)"),
    (dict(hidden_size=12.5), r"hidden_size must be a positive integer, got 12\.5 \(float\)"),
    (dict(vocab_size=True), r"vocab_size must be a positive integer, got True \(bool\)"),
    (dict(pad_token_id=None), r"pad_token_id must be an integer >= 0, got None \(NoneType\)"),
    (dict(hidden_dropout_prob="0.1"), r"hidden_dropout_prob must be a finite number \(float\), got '0\.1' \(str\)"),
    (dict(layer_norm_eps=float("nan")), r"layer_norm_eps must be a finite number"),
    (dict(hidden_act=["gelu"]), "hidden_act must be a string naming the activation"),
])
def test_wrong_types_name_the_field_and_the_type(changes, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**changes)
    with pytest.raises(ValueError, match=message):
        BertConfig.from_dict({**BertConfig().to_dict(), **changes})


def test_training_config_lives_beside_the_model_config():
    import bertcore.training.pretraining

    assert bertcore.training.pretraining.TrainingConfig is TrainingConfig  # the old import keeps working
    assert TrainingConfig().divergence_factor == 4.0 and TrainingConfig(divergence_factor=0).divergence_factor == 0
    for bad in (1.0, 0.5, -2, float("inf"), "4"):
        with pytest.raises(ValueError, match="divergence_factor must be"):
            TrainingConfig(divergence_factor=bad)
    with pytest.raises(ValueError, match=r"divergence_patience must be a positive integer, got 0"):
        TrainingConfig(divergence_patience=0)
    with pytest.raises(ValueError, match=r"steps must be a positive integer, got 2\.5 \(float\)"):
        TrainingConfig(steps=2.5)


def test_task_fields_default_as_transformers():
    config = BertConfig()
    assert config.num_labels == 2 and dict(config.id2label) == {0: "LABEL_0", 1: "LABEL_1"}
    assert dict(config.label2id) == {"LABEL_0": 0, "LABEL_1": 1}
    assert config.problem_type is None and config.classifier_dropout is None and config.architectures == ()
    assert dict(BertConfig(num_labels=3).id2label) == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}


def test_id2label_from_json_has_int_keys_and_sets_num_labels(tmp_path):
    values = {**preset("tiny").to_dict(), "id2label": {"0": "NEGATIVE", "1": "NEUTRAL", "2": "POSITIVE"}}
    del values["label2id"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    config = BertConfig.from_json_file(path)
    assert config.num_labels == 3 and config.id2label[2] == "POSITIVE" and config.label2id["NEUTRAL"] == 1
    config.to_json_file(path)
    written = json.loads(path.read_text())
    assert written["id2label"] == {"0": "NEGATIVE", "1": "NEUTRAL", "2": "POSITIVE"} and "num_labels" not in written
    assert BertConfig.from_json_file(path) == config


def test_config_with_labels_is_hashable_picklable_and_compares_by_value():
    import copy
    import pickle

    config = BertConfig(id2label={0: "no", 1: "yes"}, problem_type="single_label_classification")
    same = BertConfig(id2label={"0": "no", "1": "yes"}, problem_type="single_label_classification")
    assert config == same and hash(config) == hash(same) and len({config, same}) == 1
    assert pickle.loads(pickle.dumps(config)) == config and copy.deepcopy(config) == config
    assert config != config.replace(id2label={0: "no", 1: "maybe"})
    with pytest.raises(TypeError):
        config.id2label[0] = "changed"


def test_replace_keeps_the_label_fields_consistent():
    config = BertConfig(id2label={0: "a", 1: "b", 2: "c"})
    assert config.replace(num_labels=3) == config
    renumbered = config.replace(num_labels=2)
    assert dict(renumbered.id2label) == {0: "LABEL_0", 1: "LABEL_1"} and "a" not in renumbered.label2id
    relabelled = config.replace(id2label={0: "x", 1: "y"})
    assert relabelled.num_labels == 2 and dict(relabelled.label2id) == {"x": 0, "y": 1}
    assert config.replace(architectures=["BertForSequenceClassification"]).architectures == (
        "BertForSequenceClassification",)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(num_labels=3, id2label={0: "a", 1: "b"}), "num_labels is 3 but id2label names 2 labels"),
        (dict(id2label={0: "a", 2: "b"}), "number the labels from 0 without gaps"),
        (dict(id2label={"first": "a"}), "id2label must map class indices to names"),
        (dict(num_labels=0), "num_labels must be a positive integer"),
        (dict(problem_type="ranking"), "problem_type 'ranking' is not supported"),
        (dict(num_labels=1, problem_type="single_label_classification"), "use problem_type 'regression'"),
        (dict(classifier_dropout=1.5), r"classifier_dropout must be in \[0, 1\)"),
        (dict(label2id={"a": 7}), "label2id must map label names to class indices 0..1"),
        (dict(architectures=[3]), "architectures must be a list of class names"),
    ],
)
def test_invalid_task_fields_raise_readable_errors(changes, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**changes)


@pytest.mark.slow
def test_transformers_reads_our_config_and_we_read_theirs(tmp_path):
    transformers = pytest.importorskip("transformers")
    ours = preset("tiny", vocab_size=99).replace(
        id2label={0: "NEGATIVE", 1: "POSITIVE", 2: "MIXED"}, problem_type="single_label_classification",
        classifier_dropout=0.2, architectures=("BertForSequenceClassification",))
    ours.to_json_file(tmp_path / "config.json")
    theirs = transformers.BertConfig.from_pretrained(tmp_path)
    assert theirs.num_labels == 3 and theirs.id2label == {0: "NEGATIVE", 1: "POSITIVE", 2: "MIXED"}
    assert theirs.label2id == {"NEGATIVE": 0, "POSITIVE": 1, "MIXED": 2}
    assert theirs.problem_type == "single_label_classification" and theirs.classifier_dropout == 0.2
    assert theirs.architectures == ["BertForSequenceClassification"]
    written = tmp_path / "theirs"
    theirs.save_pretrained(written)
    assert BertConfig.from_json_file(written / "config.json") == ours
    # transformers writes label2id: null when only id2label was given; the inverse is derived
    only_names = transformers.BertConfig(vocab_size=99, id2label={"0": "O", "1": "B-PER", "2": "I-PER"})
    only_names.save_pretrained(tmp_path / "tagger")
    tagger = BertConfig.from_json_file(tmp_path / "tagger" / "config.json")
    assert tagger.num_labels == 3 and tagger.label2id == {"O": 0, "B-PER": 1, "I-PER": 2}


# ---- numeric settings whose huge values overflow: refused up front, naming the field, the value and the range ----


@pytest.mark.parametrize(("changes", "message"), [
    (dict(weight_decay=1e30), r"weight_decay is 1e\+30, but AdamW multiplies every decayed weight by 1 - lr × "
                              r"weight_decay = -2e\+26 each step \(lr 0\.0002\), so the weights overflow; with this lr "
                              r"weight_decay must be in \[0, 5,000\)"),
    (dict(weight_decay=float("inf")), r"weight_decay must be a finite number"),
    (dict(weight_decay=-0.1), r"weight_decay must be >= 0, got -0\.1"),
    (dict(weight_decay=7000.0), r"weight_decay is 7000, .* = -0\.4 each step .* so the weights are zeroed or flip "
                                r"sign every step; with this lr weight_decay must be in \[0, 5,000\)"),
    (dict(max_grad_norm=float("inf")), r"max_grad_norm must be a finite number"),
    (dict(adam_betas=(1.0, 0.999)), r"adam_betas must be two numbers in \[0, 1\), .* got \(1\.0, 0\.999\)"),
    (dict(adam_betas=(0.9,)), r"adam_betas must be two numbers"),
    (dict(adam_eps=0.0), r"adam_eps is 0\.0; it must be at least 1\.18e-38 .* 0/0 = NaN"),
    (dict(adam_eps=1e-300), r"adam_eps is 1e-300; it must be at least"),
    (dict(seed=2**64), r"seed must be an integer from -2\*\*63 to 2\*\*64 - 1 .* got 18446744073709551616"),
    (dict(seed=1.5), r"seed must be an integer"),
    (dict(num_threads=10**30), r"num_threads is about 10\^30; it must be at most 1,024"),
    (dict(steps=10**400), r"steps is about 10\^400; it must be at most 1e\+12"),
    (dict(steps=None, warmup_steps=10**13), r"warmup_steps is 10000000000000; it must be at most 1e\+12"),
    (dict(epochs=1e308), r"epochs is 1e\+308; it must be at most 1e\+06"),
    (dict(task="qa", task_options={"doc_stride": 1e30}), r"doc_stride must be an integer >= 0, got 1e\+30"),
    (dict(task="qa", task_options={"null_score_diff_threshold": float("nan")}),
     r"null_score_diff_threshold must be a finite number"),
])
def test_finetune_settings_that_would_overflow_are_refused_by_name(changes, message):
    from bertcore.training.settings import FinetuneConfig

    with pytest.raises(ValueError, match=message):
        FinetuneConfig(**{"task": "sequence", "train": "train.csv", **changes})


def test_training_settings_that_would_overflow_are_refused_by_name():
    from bertcore.training.settings import FinetuneConfig

    for changes, message in [(dict(weight_decay=1e30), r"weight_decay is 1e\+30.*must be in \[0, 2,000\)"),
                             (dict(steps=10**400), r"steps is about 10\^400"),
                             (dict(vocab_size=10**30), r"vocab_size is about 10\^30; it must be at most 1e\+06"),
                             (dict(warmup_steps=2.5), r"warmup_steps must be an integer >= 0, got 2\.5"),
                             (dict(adam_eps=0.0), r"adam_eps is 0\.0")]:
        with pytest.raises(ValueError, match=message):
            TrainingConfig(**changes)
    with pytest.raises(ValueError, match=r"initializer_range is 1e\+30; .* must be in \[0, 1\] \(BERT uses 0\.02\)"):
        BertConfig(initializer_range=1e30)
    # what stays allowed: a decay of 1 or less whatever the lr (a huge lr is the loop's NaN/divergence message to
    # give, and its tests drive it with lr 1e6), strong decay that cannot flip a weight, negative seeds
    assert TrainingConfig(lr=1e6).weight_decay == 0.01
    assert FinetuneConfig(task="sequence", train="t.csv", weight_decay=1.0, lr=1e6).lr == 1e6
    assert FinetuneConfig(task="sequence", train="t.csv", weight_decay=50.0, lr=1e-3).weight_decay == 50.0
    assert TrainingConfig(seed=-1, adam_betas=[0.0, 0.5], max_grad_norm=0.0).adam_betas == (0.0, 0.5)
