import json

import pytest

from bertcore.config import PRESETS, BertConfig, TrainingConfig, preset


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
    import bertcore.trainer

    assert bertcore.trainer.TrainingConfig is TrainingConfig  # the old import keeps working
    assert TrainingConfig().divergence_factor == 4.0 and TrainingConfig(divergence_factor=0).divergence_factor == 0
    for bad in (1.0, 0.5, -2, float("inf"), "4"):
        with pytest.raises(ValueError, match="divergence_factor must be"):
            TrainingConfig(divergence_factor=bad)
    with pytest.raises(ValueError, match=r"divergence_patience must be a positive integer, got 0"):
        TrainingConfig(divergence_patience=0)
    with pytest.raises(ValueError, match=r"steps must be a positive integer, got 2\.5 \(float\)"):
        TrainingConfig(steps=2.5)
