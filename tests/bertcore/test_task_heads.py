"""Task heads against transformers' BertFor{SequenceClassification,TokenClassification,QuestionAnswering}.

Distinct odd sizes (vocab 99, hidden 48, 3 heads, 2 layers, intermediate 37, batch 3, seq 7, 3 or 5 labels) make
a wrong transpose fail loudly. Weights are copied from transformers' model into ours by name, strictly: the
state dicts must match with no mapping table.
"""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertcore.models.bert import IGNORE_INDEX, BertForPreTraining
from bertcore.models.config import BertConfig
from bertcore.models.task_heads import (
    ARCHITECTURES,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    model_class_for,
    start_from_pretrained,
)
from tests.tiny_configs import parity_bert

CONFIG = parity_bert()
BATCH, SEQ = 3, 7
TOLERANCE = dict(rtol=0, atol=1e-5)
GRADIENT_TOLERANCE = dict(rtol=1e-4, atol=1e-6)
INPUTS = [pytest.param(False, False, id="single-sentences"), pytest.param(True, True, id="padded-pairs")]


def batch(*, pair: bool, padded: bool, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, CONFIG.vocab_size, (BATCH, SEQ), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    if pair:
        token_type_ids[:, SEQ // 2:] = 1
    attention_mask = torch.ones_like(input_ids)
    if padded:
        lengths = torch.tensor([SEQ, SEQ - 2, 3])
        attention_mask = (torch.arange(SEQ)[None, :] < lengths[:, None]).long()
        input_ids = input_ids.masked_fill(attention_mask == 0, CONFIG.pad_token_id)
        token_type_ids = token_type_ids.masked_fill(attention_mask == 0, 0)
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def twin_models(our_class, config: BertConfig, seed: int = 0):
    """transformers' model (eager attention) with perturbed weights, and ours with the same weights."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="eager")
    reference = getattr(transformers, our_class.__name__)(hf_config).eval()
    with torch.no_grad():
        for parameter in reference.parameters():  # zero biases and unit LayerNorms would hide a wrong copy
            parameter.add_(0.05 * torch.randn_like(parameter))
    ours = our_class(config).eval()
    ours.load_state_dict(reference.state_dict(), strict=True)  # the same names, nothing missing or left over
    return ours, reference


def assert_same_internals(got, want):
    assert len(got.hidden_states) == CONFIG.num_hidden_layers + 1
    for ours, theirs in zip(got.hidden_states, want.hidden_states, strict=True):
        assert ours.shape == (BATCH, SEQ, CONFIG.hidden_size)
        torch.testing.assert_close(ours, theirs, **TOLERANCE)
    assert len(got.attentions) == CONFIG.num_hidden_layers
    for ours, theirs in zip(got.attentions, want.attentions, strict=True):
        assert ours.shape == (BATCH, CONFIG.num_attention_heads, SEQ, SEQ)
        torch.testing.assert_close(ours, theirs, **TOLERANCE)


def assert_same_gradients(ours, reference, our_loss, their_loss):
    our_loss.backward()
    their_loss.backward()
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, theirs[name].grad, **GRADIENT_TOLERANCE, msg=name)


# ---- sequence classification ---------------------------------------------------------------------------------

def classification_labels(problem: str, num_labels: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if problem == "single_label_classification":
        return torch.randint(0, num_labels, (BATCH,), generator=generator)
    if problem == "multi_label_classification":
        return torch.randint(0, 2, (BATCH, num_labels), generator=generator).float()
    return torch.randn(BATCH, num_labels, generator=generator).squeeze(-1)  # regression: (B,) for one output


@pytest.mark.parametrize(("pair", "padded"), INPUTS)
@pytest.mark.parametrize(("problem", "num_labels", "explicit"), [
    ("single_label_classification", 3, False),
    ("multi_label_classification", 5, False),
    ("regression", 1, False),
    ("regression", 3, True),
    ("multi_label_classification", 3, True),
])
@pytest.mark.slow
def test_sequence_classification_matches_transformers(pair, padded, problem, num_labels, explicit):
    config = CONFIG.replace(num_labels=num_labels, problem_type=problem if explicit else None)
    ours, reference = twin_models(BertForSequenceClassification, config)
    inputs = batch(pair=pair, padded=padded)
    labels = classification_labels(problem, num_labels)
    with torch.no_grad():
        full = ours(**inputs, output_attentions=True, output_hidden_states=True)
        want_full = reference(**inputs, output_attentions=True, output_hidden_states=True)
    assert full.logits.shape == (BATCH, num_labels)
    torch.testing.assert_close(full.logits, want_full.logits, **TOLERANCE)
    assert_same_internals(full, want_full)

    assert ours.problem_type_for(labels) == problem
    fast = ours(**inputs, labels=labels)  # [CLS] only in the last layer, padding skipped
    want = reference(**inputs, labels=labels)
    assert fast.hidden_states is None and fast.attentions is None
    torch.testing.assert_close(fast.logits, want.logits, **TOLERANCE)
    torch.testing.assert_close(fast.loss, want.loss, **TOLERANCE)
    assert reference.config.problem_type == problem  # the type transformers inferred is the one we inferred
    assert_same_gradients(ours, reference, fast.loss, want.loss)


@pytest.mark.slow
def test_sequence_classification_ignores_label_minus_100():
    ours, reference = twin_models(BertForSequenceClassification, CONFIG.replace(num_labels=3))
    inputs = batch(pair=True, padded=True)
    labels = torch.tensor([2, IGNORE_INDEX, 0])
    with torch.no_grad():
        torch.testing.assert_close(ours(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss,
                                   **TOLERANCE)


# ---- token classification ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("pair", "padded"), INPUTS)
def test_token_classification_matches_transformers(pair, padded):
    config = CONFIG.replace(id2label={0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"})
    ours, reference = twin_models(BertForTokenClassification, config)
    inputs = batch(pair=pair, padded=padded)
    generator = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 5, (BATCH, SEQ), generator=generator)
    labels = labels.masked_fill(inputs["attention_mask"] == 0, IGNORE_INDEX)
    labels[:, 0] = IGNORE_INDEX  # [CLS], as the data pipeline labels it
    labels[1, 2] = IGNORE_INDEX  # a later sub-token
    with torch.no_grad():
        full = ours(**inputs, output_attentions=True, output_hidden_states=True)
        want_full = reference(**inputs, output_attentions=True, output_hidden_states=True)
    assert full.logits.shape == (BATCH, SEQ, 5)
    torch.testing.assert_close(full.logits, want_full.logits, **TOLERANCE)
    assert_same_internals(full, want_full)

    fast = ours(**inputs, labels=labels)
    want = reference(**inputs, labels=labels)
    torch.testing.assert_close(fast.logits, want.logits, **TOLERANCE)  # every position, padding included
    torch.testing.assert_close(fast.loss, want.loss, **TOLERANCE)
    assert_same_gradients(ours, reference, fast.loss, want.loss)


# ---- question answering --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("pair", "padded"), INPUTS)
def test_question_answering_matches_transformers(pair, padded):
    ours, reference = twin_models(BertForQuestionAnswering, CONFIG)
    inputs = batch(pair=pair, padded=padded)
    # In range, beyond the input (clamped to T and ignored) and negative (clamped to 0, [CLS]), as transformers.
    start_positions = torch.tensor([2, 9, -3])
    end_positions = torch.tensor([4, SEQ, 1])
    with torch.no_grad():
        full = ours(**inputs, output_attentions=True, output_hidden_states=True)
        want_full = reference(**inputs, output_attentions=True, output_hidden_states=True)
    assert full.start_logits.shape == full.end_logits.shape == (BATCH, SEQ)
    torch.testing.assert_close(full.start_logits, want_full.start_logits, **TOLERANCE)
    torch.testing.assert_close(full.end_logits, want_full.end_logits, **TOLERANCE)
    assert_same_internals(full, want_full)

    fast = ours(**inputs, start_positions=start_positions, end_positions=end_positions)
    want = reference(**inputs, start_positions=start_positions, end_positions=end_positions)
    torch.testing.assert_close(fast.loss, want.loss, **TOLERANCE)
    assert_same_gradients(ours, reference, fast.loss, want.loss)


def test_question_answering_loss_ignores_answers_outside_the_input():
    torch.manual_seed(0)
    model = BertForQuestionAnswering(CONFIG).eval()
    inputs = batch(pair=True, padded=True)
    with torch.no_grad():
        out = model(**inputs, start_positions=torch.tensor([1, 2, 40]), end_positions=torch.tensor([3, 2, 40]))
    start_loss = torch.nn.functional.cross_entropy(out.start_logits[:2], torch.tensor([1, 2]))
    end_loss = torch.nn.functional.cross_entropy(out.end_logits[:2], torch.tensor([3, 2]))
    torch.testing.assert_close(out.loss, (start_loss + end_loss) / 2)


def test_question_answering_needs_two_outputs():
    with pytest.raises(ValueError, match=r"2 outputs \(start, end\) but num_labels is 3"):
        BertForQuestionAnswering(CONFIG.replace(num_labels=3))


# ---- head mask -----------------------------------------------------------------------------------------------

def head_mask_hooks(reference, head_mask):
    """transformers 5 dropped head_mask: scale each head's slice of attention.self's output (and its map)."""
    head_dim = CONFIG.head_dim

    def hook_for(layer_index):
        def scale(module, args, output):
            context, probs = output
            factors = head_mask[layer_index]
            context = (context.unflatten(-1, (-1, head_dim)) * factors[:, None]).flatten(-2)  # (B, T, nh, hs)
            return context, None if probs is None else probs * factors[None, :, None, None]
        return scale

    return [layer.attention.self.register_forward_hook(hook_for(index))
            for index, layer in enumerate(reference.bert.encoder.layer)]


@pytest.mark.slow
@pytest.mark.parametrize("our_class", [BertForSequenceClassification, BertForTokenClassification,
                                       BertForQuestionAnswering])
@pytest.mark.parametrize("output_attentions", [False, True])
def test_head_mask_matches_transformers_with_hooks(our_class, output_attentions):
    ours, reference = twin_models(our_class, CONFIG)
    inputs = batch(pair=True, padded=True)
    head_mask = torch.tensor([[1.0, 0.0, 1.0], [0.5, 1.0, 0.0]])  # (layers, heads)
    handles = head_mask_hooks(reference, head_mask)
    try:
        with torch.no_grad():
            got = ours(**inputs, head_mask=head_mask, output_attentions=output_attentions,
                       output_hidden_states=output_attentions)
            want = reference(**inputs, output_attentions=output_attentions, output_hidden_states=output_attentions)
            plain = ours(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    names = ("start_logits", "end_logits") if our_class is BertForQuestionAnswering else ("logits",)
    for name in names:
        torch.testing.assert_close(getattr(got, name), getattr(want, name), **TOLERANCE)
        assert not torch.allclose(getattr(got, name), getattr(plain, name), atol=1e-4)  # the mask did something
    if output_attentions:
        assert_same_internals(got, want)
        assert torch.all(got.attentions[0][:, 1] == 0)


# ---- what needs no reference ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_sequence_classification_fast_path_equals_the_full_computation():
    """[CLS]-only last layer and skipped padding must change neither logits nor gradients."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(CONFIG.replace(num_labels=3)).eval()
    inputs = batch(pair=True, padded=True)
    labels = torch.tensor([0, 2, 1])
    fast = model(**inputs, labels=labels)
    fast.loss.backward()
    fast_grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    model.zero_grad()
    full = model(**inputs, labels=labels, output_hidden_states=True)
    full.loss.backward()
    torch.testing.assert_close(fast.logits, full.logits, **TOLERANCE)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(fast_grads[name], parameter.grad, **GRADIENT_TOLERANCE, msg=name)


def test_padding_does_not_change_a_sequence_result():
    """A sequence scores the same alone and padded in a batch beside a longer one."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(CONFIG.replace(num_labels=3)).eval()
    inputs = batch(pair=True, padded=True)
    with torch.no_grad():
        batched = model(**inputs).logits
        alone = model(**{name: tensor[2:, :3] for name, tensor in inputs.items()}).logits
    torch.testing.assert_close(batched[2:], alone, **TOLERANCE)


def test_models_name_their_architecture_and_the_registry_finds_the_class():
    for name, our_class in [("BertForSequenceClassification", BertForSequenceClassification),
                            ("BertForTokenClassification", BertForTokenClassification),
                            ("BertForQuestionAnswering", BertForQuestionAnswering),
                            ("BertForPreTraining", BertForPreTraining)]:
        model = our_class(CONFIG)
        assert model.config.architectures == (name,) and model.config.to_dict()["architectures"] == [name]
        assert ARCHITECTURES[name] is our_class and model_class_for(model.config) is our_class
        assert model.num_parameters() == sum(p.numel() for p in model.parameters())
    for pretraining_name in ("BertModel", "BertForNextSentencePrediction"):  # BertForMaskedLM: its own class
        assert model_class_for(CONFIG.replace(architectures=(pretraining_name,))) is BertForPreTraining
    assert model_class_for(CONFIG) is BertForPreTraining  # a config.json without architectures


def test_pooler_only_where_transformers_has_one():
    assert any(name.startswith("bert.pooler.") for name in BertForSequenceClassification(CONFIG).state_dict())
    for our_class in (BertForTokenClassification, BertForQuestionAnswering):
        assert not any(name.startswith("bert.pooler.") for name in our_class(CONFIG).state_dict())


def test_classifier_dropout_defaults_to_hidden_dropout():
    assert BertForSequenceClassification(CONFIG.replace(hidden_dropout_prob=0.3)).dropout.p == 0.3
    assert BertForTokenClassification(CONFIG.replace(classifier_dropout=0.05)).dropout.p == 0.05


# ---- starting a task model from a pretraining checkpoint -----------------------------------------------------

def test_start_from_pretrained_keeps_encoder_and_pooler_and_reports_the_rest():
    torch.manual_seed(0)
    pretrained = BertForPreTraining(CONFIG)
    task_config = pretrained.config.replace(id2label={0: "negative", 1: "positive", 2: "neutral"})
    model, transfer = start_from_pretrained(BertForSequenceClassification, task_config, pretrained)
    source = pretrained.state_dict()
    for name, tensor in model.state_dict().items():
        if name.startswith("bert."):
            torch.testing.assert_close(tensor, source[name], rtol=0, atol=0, msg=name)
    assert transfer.initialised == ("classifier.bias", "classifier.weight")
    assert set(transfer.dropped) == {name for name in source if name.startswith("cls.")}
    assert set(transfer.loaded) == {name for name in source if name.startswith("bert.")}
    assert model.config.architectures == ("BertForSequenceClassification",) and model.config.num_labels == 3
    assert "newly initialised: classifier.bias, classifier.weight" in str(transfer)

    qa, transfer = start_from_pretrained(BertForQuestionAnswering, pretrained.config, pretrained.state_dict())
    assert qa.config.architectures == ("BertForQuestionAnswering",)
    assert transfer.initialised == ("qa_outputs.bias", "qa_outputs.weight")
    assert "bert.pooler.dense.weight" in transfer.dropped  # transformers' QA model has no pooler


def test_start_from_pretrained_refuses_an_incomplete_or_different_encoder():
    state_dict = BertForPreTraining(CONFIG).state_dict()
    del state_dict["bert.encoder.layer.1.output.dense.weight"]
    with pytest.raises(ValueError, match=r"lacks 1 encoder tensor.*layer\.1\.output\.dense\.weight"):
        start_from_pretrained(BertForTokenClassification, CONFIG, state_dict)
    wider = BertForPreTraining(CONFIG.replace(intermediate_size=40)).state_dict()
    with pytest.raises(ValueError, match=r"intermediate\.dense\.bias has shape \(40,\) in the source but \(37,\)"):
        start_from_pretrained(BertForTokenClassification, CONFIG, wider)


# ---- checkpoints: the folder transformers writes and reads ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("our_class", [BertForSequenceClassification, BertForTokenClassification,
                                       BertForQuestionAnswering])
def test_task_folders_load_in_transformers_as_the_same_class_and_back(our_class, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = CONFIG if our_class is BertForQuestionAnswering else CONFIG.replace(
        id2label={0: "no", 1: "yes", 2: "maybe"})
    ours = our_class(config).eval()
    ours.config.to_json_file(tmp_path / "config.json")
    save_file({name: tensor.contiguous() for name, tensor in ours.state_dict().items()},
              tmp_path / "model.safetensors", metadata={"format": "pt"})
    reference = getattr(transformers, our_class.__name__).from_pretrained(tmp_path, attn_implementation="eager")
    assert type(transformers.AutoConfig.from_pretrained(tmp_path)).__name__ == "BertConfig"
    inputs = batch(pair=True, padded=True)
    with torch.no_grad():
        got, want = ours(**inputs), reference.eval()(**inputs)
    for name in ("start_logits", "end_logits") if our_class is BertForQuestionAnswering else ("logits",):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), **TOLERANCE)

    folder = tmp_path / "theirs"
    reference.save_pretrained(folder)
    values = json.loads((folder / "config.json").read_text())
    assert values["architectures"] == [our_class.__name__]
    again_config = BertConfig.from_json_file(folder / "config.json")
    assert again_config == ours.config and model_class_for(again_config) is our_class
    again = our_class(again_config).eval()
    again.load_state_dict(load_file(folder / "model.safetensors"), strict=True)
    with torch.no_grad():
        for name in ("start_logits", "end_logits") if our_class is BertForQuestionAnswering else ("logits",):
            torch.testing.assert_close(getattr(again(**inputs), name), getattr(got, name), **TOLERANCE)
