"""Every family's task heads against transformers' own: RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT and
ModernBERT For{SequenceClassification,TokenClassification,QuestionAnswering}, eager attention, on odd distinct
sizes (vocab 99, 3 or 5 heads, padded sentence pairs, 3 or 5 labels). Weights are copied from transformers' model
into ours by name, strictly (no mapping table); logits, hidden states, attentions and losses agree to 1e-5
(ModernBERT 1e-4). Saved folders load in transformers' AutoModelFor* and back in bertcore as the same class."""

import inspect
import json

import pytest
import torch

from bertcore.models.albert import AlbertConfig
from bertcore.models.checkpoint import load_pretrained, read_checkpoint, save_pretrained
from bertcore.models.distilbert import DistilBertConfig
from bertcore.models.electra import ElectraConfig
from bertcore.models.modernbert import ModernBertConfig
from bertcore.models.roberta import RobertaConfig
from bertcore.models.task_heads import (
    TASK_HEAD_KINDS,
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    model_class_for,
    start_from_pretrained,
    task_model_class,
)
from bertcore.models.weights import BUFFER_SUFFIXES

BATCH, SEQ = 3, 7
MODERNBERT_IDS = dict(pad_token_id=0, bos_token_id=1, cls_token_id=1, eos_token_id=2, sep_token_id=2)


def family_config(name: str, vocab_size: int = 99):
    """Each family at its own odd sizes; the variants exercise what a family's head reads from its config."""
    return {
        "roberta": lambda: RobertaConfig(vocab_size=vocab_size, hidden_size=48, num_hidden_layers=2,
                                         num_attention_heads=3, intermediate_size=37, max_position_embeddings=21),
        "xlm-roberta": lambda: RobertaConfig(vocab_size=vocab_size, hidden_size=42, num_hidden_layers=2,
                                             num_attention_heads=7, intermediate_size=31, max_position_embeddings=23,
                                             model_type="xlm-roberta"),
        "distilbert": lambda: DistilBertConfig(vocab_size=vocab_size, hidden_size=60, num_hidden_layers=2,
                                               num_attention_heads=5, intermediate_size=37,
                                               max_position_embeddings=19, sinusoidal_pos_embds=True),
        "electra": lambda: ElectraConfig(vocab_size=vocab_size, hidden_size=60, embedding_size=36,
                                         num_hidden_layers=3, num_attention_heads=5, intermediate_size=37,
                                         max_position_embeddings=19),
        "albert": lambda: AlbertConfig(vocab_size=vocab_size, hidden_size=48, embedding_size=20, num_hidden_layers=3,
                                       num_hidden_groups=2, inner_group_num=2, num_attention_heads=3,
                                       intermediate_size=37, max_position_embeddings=19),
        "modernbert": lambda: ModernBertConfig(vocab_size=vocab_size, hidden_size=80, intermediate_size=37,
                                               num_hidden_layers=4, num_attention_heads=5, local_attention=4,
                                               max_position_embeddings=64, **MODERNBERT_IDS),
        "modernbert-mean": lambda: ModernBertConfig(vocab_size=vocab_size, hidden_size=48, intermediate_size=29,
                                                    num_hidden_layers=3, num_attention_heads=3, local_attention=4,
                                                    classifier_pooling="mean", classifier_bias=True,
                                                    max_position_embeddings=32, **MODERNBERT_IDS),
    }[name]()


FAMILIES = ["roberta", "xlm-roberta", "distilbert", "electra", "albert", "modernbert", "modernbert-mean"]
KINDS = {"sequence": EncoderForSequenceClassification, "token": EncoderForTokenClassification,
         "qa": EncoderForQuestionAnswering}
NUM_LABELS = {"sequence": 3, "token": 5, "qa": 2}


def tolerance(config) -> dict:
    return dict(rtol=0, atol=1e-4 if isinstance(config, ModernBertConfig) else 1e-5)


def task_config(family: str, kind: str, vocab_size: int = 99):
    return family_config(family, vocab_size).replace(num_labels=NUM_LABELS[kind])


def reference_config(transformers, config):
    values = config.to_dict()
    return transformers.AutoConfig.for_model(values.pop("model_type"), **values, attn_implementation="eager")


def without_buffers(state_dict: dict) -> dict:
    return {name: tensor for name, tensor in state_dict.items() if not name.endswith(BUFFER_SUFFIXES)}


def twin_models(transformers, family: str, kind: str):
    """transformers' task model (eager attention) with perturbed weights, and ours with the same weights."""
    config = task_config(family, kind)
    our_class = task_model_class(config, KINDS[kind])
    torch.manual_seed(0)
    ours = our_class(config).eval()
    reference = getattr(transformers, ours.config.architectures[0])(reference_config(transformers, ours.config))
    reference.eval()
    with torch.no_grad():
        for parameter in reference.parameters():  # zero biases and unit norms would hide a wrong copy
            parameter.add_(0.05 * torch.randn_like(parameter))
    ours.load_state_dict(without_buffers(reference.state_dict()), strict=True)  # same names, none left over
    return ours, reference


def padded_pairs(config, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, config.vocab_size, (BATCH, SEQ), generator=generator)
    input_ids[:, 0] = 1
    attention_mask = (torch.arange(SEQ)[None, :] < torch.tensor([SEQ, SEQ - 2, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    token_type_ids = torch.zeros_like(input_ids)
    if getattr(config, "type_vocab_size", 1) > 1:
        token_type_ids[:, SEQ // 2:] = 1
        token_type_ids = token_type_ids.masked_fill(attention_mask == 0, 0)
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids), generator


def targets(kind: str, generator, num_labels: int) -> dict:
    if kind == "sequence":
        return {"labels": torch.randint(0, num_labels, (BATCH,), generator=generator)}
    if kind == "token":
        labels = torch.randint(0, num_labels, (BATCH, SEQ), generator=generator)
        labels[:, 0] = -100
        return {"labels": labels}
    return {"start_positions": torch.tensor([1, 2, 9]), "end_positions": torch.tensor([3, 2, 9])}  # 9: outside


def their_inputs(reference, inputs: dict) -> dict:
    """transformers' DistilBERT and ModernBERT take no token_type_ids."""
    if "token_type_ids" in inspect.signature(reference.forward).parameters:
        return inputs
    return {name: value for name, value in inputs.items() if name != "token_type_ids"}


def assert_same(ours, theirs, kind: str, config) -> None:
    close = tolerance(config)
    if kind == "qa":
        torch.testing.assert_close(ours.start_logits, theirs.start_logits, **close)
        torch.testing.assert_close(ours.end_logits, theirs.end_logits, **close)
    else:
        torch.testing.assert_close(ours.logits, theirs.logits, **close)
    if ours.loss is not None:
        torch.testing.assert_close(ours.loss, theirs.loss, **close)


@pytest.mark.slow  # 15-21 cases, each building two models (the whole set ~30 s on two busy cores)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_task_head_matches_transformers(family, kind, transformers):
    ours, reference = twin_models(transformers, family, kind)
    inputs, generator = padded_pairs(ours.config)
    labelled = {**inputs, **targets(kind, generator, ours.config.num_labels)}
    with torch.no_grad():
        want = reference(**their_inputs(reference, labelled), output_attentions=True, output_hidden_states=True)
        got = ours(**labelled, output_attentions=True, output_hidden_states=True)
        fast = ours(**labelled)  # the fused attention path, nothing but the head's output asked for
    assert_same(got, want, kind, ours.config)
    assert_same(fast, want, kind, ours.config)
    close = tolerance(ours.config)
    for name in ("hidden_states", "attentions"):
        assert len(getattr(got, name)) == len(getattr(want, name))
        for mine, theirs in zip(getattr(got, name), getattr(want, name), strict=True):
            torch.testing.assert_close(mine, theirs, **close)
    assert got.attentions[0].shape == (BATCH, ours.config.num_attention_heads, SEQ, SEQ)


FAMILY_HEADS = {  # the family's own sentence head, where it differs from BERT's pooler + classifier
    "roberta": ["classifier.dense.weight", "classifier.out_proj.weight"],
    "electra": ["classifier.dense.weight", "classifier.out_proj.weight"],
    "distilbert": ["pre_classifier.weight", "classifier.weight"],
    "albert": ["albert.pooler.weight", "classifier.weight"],
    "modernbert": ["head.dense.weight", "classifier.weight"],
}


@pytest.mark.parametrize("family", FAMILY_HEADS)
def test_each_family_has_its_own_sentence_head(family):
    model = task_model_class(family_config(family), EncoderForSequenceClassification)(family_config(family))
    assert set(FAMILY_HEADS[family]) <= model.state_dict().keys()
    assert not model.has_mlm_head and not model.has_nsp_head and not model.has_pretraining_heads


@pytest.mark.slow  # 15-21 cases, each building two models (the whole set ~30 s on two busy cores)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "distilbert", "electra", "albert", "modernbert"])
def test_saved_folder_loads_in_transformers_and_back(family, kind, small_vocab_tokenizer, tmp_path, transformers):
    config = task_config(family, kind, vocab_size=small_vocab_tokenizer.vocab_size)
    torch.manual_seed(3)
    ours = task_model_class(config, KINDS[kind])(config).eval()
    with torch.no_grad():
        for parameter in ours.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    save_pretrained(ours, small_vocab_tokenizer, tmp_path / "model")
    written = json.loads((tmp_path / "model" / "config.json").read_text())
    assert written["architectures"] == list(ours.config.architectures)
    auto = {"sequence": transformers.AutoModelForSequenceClassification,
            "token": transformers.AutoModelForTokenClassification,
            "qa": transformers.AutoModelForQuestionAnswering}[kind]
    theirs = auto.from_pretrained(tmp_path / "model", attn_implementation="eager").eval()
    assert type(theirs).__name__ == ours.config.architectures[0]
    loaded, _ = load_pretrained(tmp_path / "model")
    assert type(loaded) is type(ours) and read_checkpoint(tmp_path / "model").model_class is type(ours)
    inputs, _ = padded_pairs(config)
    with torch.no_grad():
        want = theirs(**their_inputs(theirs, inputs))
        for model in (ours, loaded):
            assert_same(model(**inputs), want, kind, config)
        # and the other way: what transformers saves (its weights changed) loads here as the same class
        for parameter in theirs.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
        theirs.save_pretrained(tmp_path / "theirs")
        want = theirs(**their_inputs(theirs, inputs))
    small_vocab_tokenizer.save(tmp_path / "theirs")
    again, _ = load_pretrained(tmp_path / "theirs")
    assert type(again) is type(ours)
    with torch.no_grad():
        assert_same(again(**inputs), want, kind, config)


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "albert", "modernbert"])
def test_a_task_model_starts_from_its_familys_pretraining_model(family):
    config = family_config(family)
    pretraining_class = model_class_for(config)
    torch.manual_seed(0)
    source = pretraining_class(config)
    for kind in TASK_HEAD_KINDS:
        task_class = task_model_class(config, kind)
        _, transfer = start_from_pretrained(task_class, config.replace(num_labels=2), source)
        prefix = task_class.base_model_prefix + "."
        # ModernBERT's task heads run the MLM head's `head` (dense, norm) first: it loads too, as in transformers.
        shared_head = ("head.",) if family == "modernbert" else ()
        assert transfer.loaded and all(name.startswith((prefix, *shared_head)) for name in transfer.loaded)
        assert not any(name.startswith(prefix) and ".pooler" not in name for name in transfer.initialised)
        assert transfer.initialised  # the head is new


def test_a_source_of_another_family_is_refused_by_name():
    roberta, electra = family_config("roberta"), family_config("electra")
    source = model_class_for(electra)(electra)
    with pytest.raises(ValueError, match=r"the source lacks \d+ encoder tensor\(s\), e\.g\. roberta\.embeddings"):
        start_from_pretrained(task_model_class(roberta, EncoderForTokenClassification), roberta, source)


def test_modernbert_config_keeps_its_labels_through_config_json(tmp_path):
    config = family_config("modernbert").replace(id2label={0: "neg", 1: "pos", 2: "mixed"},
                                                 problem_type="single_label_classification")
    config.to_json_file(tmp_path / "config.json")
    again = ModernBertConfig.from_json_file(tmp_path / "config.json")
    assert again == config and again.num_labels == 3 and again.label2id == {"neg": 0, "pos": 1, "mixed": 2}
    with pytest.raises(ValueError, match="a question-answering head has 2 outputs"):
        task_model_class(config, EncoderForQuestionAnswering)(config)


@pytest.mark.slow  # 15-21 cases, each building two models (the whole set ~30 s on two busy cores)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "albert", "modernbert-mean"])
def test_inspection_shows_each_familys_task_output_as_its_forward_computes_it(family, kind, small_vocab_tokenizer):
    from bertcore.analysis.inspection import inspect

    config = task_config(family, kind, vocab_size=small_vocab_tokenizer.vocab_size)
    torch.manual_seed(5)
    model = task_model_class(config, KINDS[kind])(config).eval()
    inspection = inspect(model, small_vocab_tokenizer, "the cat sat on a mat", "the dog ran far away")
    encoding = inspection.encoding
    with torch.no_grad():
        output = model(torch.tensor([encoding.input_ids]), token_type_ids=torch.tensor([encoding.segment_ids]))
    task = inspection.task_output
    assert task is not None and task.kind == kind
    close = tolerance(config)
    if kind == "qa":
        torch.testing.assert_close(torch.from_numpy(task.start_logits), output.start_logits[0], **close)
        torch.testing.assert_close(torch.from_numpy(task.end_logits), output.end_logits[0], **close)
    else:
        torch.testing.assert_close(torch.as_tensor(task.logits), output.logits[0], **close)


@pytest.mark.slow
@pytest.mark.parametrize(("family", "kind"), [("roberta", "sequence"), ("distilbert", "qa"), ("electra", "token"),
                                              ("albert", "sequence"), ("modernbert", "token")])
def test_gradients_match_transformers(family, kind, transformers):
    """What fine-tuning steps on: every parameter's gradient of the task loss, as transformers computes it. Padding
    carries no tag (-100), as the fine-tuning data gives it: a loss on a ModernBERT padding position whose whole
    window is padding sends gradient back through the masked scores here and not in transformers."""
    ours, reference = twin_models(transformers, family, kind)
    inputs, generator = padded_pairs(ours.config)
    labelled = {**inputs, **targets(kind, generator, ours.config.num_labels)}
    if kind == "token":
        labelled["labels"] = labelled["labels"].masked_fill(inputs["attention_mask"] == 0, -100)
    ours(**labelled).loss.backward()
    reference(**their_inputs(reference, labelled)).loss.backward()
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        if parameter.grad is not None:
            torch.testing.assert_close(parameter.grad, theirs[name].grad, rtol=1e-4, atol=1e-5, msg=name)
