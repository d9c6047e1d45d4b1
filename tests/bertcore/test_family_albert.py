"""ALBERT against the reference implementation: transformers' AlbertForPreTraining and AlbertForMaskedLM, eager
attention, on odd distinct sizes (vocab 99, hidden 60, embeddings 36, 5 heads, 3 layers, padded sentence pairs),
with one shared group and with two groups of two layers each, so that a wrong group schedule fails loudly."""

import json

import pytest
import torch

from bertcore.models.albert import (
    AlbertConfig,
    AlbertForMaskedLM,
    AlbertForPreTraining,
    AlbertForSequenceClassification,
)
from bertcore.models.bert import IGNORE_INDEX

BASE = dict(vocab_size=99, hidden_size=60, embedding_size=36, num_hidden_layers=3, num_attention_heads=5,
            intermediate_size=37, max_position_embeddings=19, hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1)
CONFIGS = {
    "one group": AlbertConfig(**BASE, num_hidden_groups=1, inner_group_num=1),
    # 3 depths over 2 groups: depths 0 and 1 run group 0, depth 2 runs group 1; each group holds 2 layers.
    "two groups of two": AlbertConfig(**BASE, num_hidden_groups=2, inner_group_num=2),
    "relu, 3 segments": AlbertConfig(**{**BASE, "hidden_act": "relu", "type_vocab_size": 3, "layer_norm_eps": 1e-7},
                                     num_hidden_groups=1, inner_group_num=2),
}
TOLERANCE = dict(rtol=0, atol=1e-5)
BATCH, SEQ = 3, 7


def reference_model(transformers, ours):
    """The transformers class of the same name, holding our model's weights (strict: every name matches)."""
    hf_config = transformers.AlbertConfig(**ours.config.to_dict(), attn_implementation="eager")
    reference = getattr(transformers, type(ours).__name__)(hf_config).eval()
    reference.load_state_dict(ours.state_dict(), strict=True)
    return reference


def padded_pairs(config, seed):
    """Three sentence pairs of 7, 5 and 3 real tokens, MLM labels on ~40% of the real ones, SOP labels."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (BATCH, SEQ), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, SEQ // 2:] = 1
    attention_mask = (torch.arange(SEQ)[None, :] < torch.tensor([SEQ, SEQ - 2, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    token_type_ids = token_type_ids.masked_fill(attention_mask == 0, 0)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    picked = (torch.rand(input_ids.shape, generator=generator) < 0.4) & (attention_mask == 1)
    picked[:, 1] = True
    labels[picked] = input_ids[picked]
    sentence_order_label = torch.randint(0, 2, (BATCH,), generator=generator)
    return input_ids, token_type_ids, attention_mask, labels, sentence_order_label


def assert_same_states(ours, theirs, config):
    assert len(ours.hidden_states) == config.num_attention_layers + 1  # one after every layer a group runs
    for got, want in zip(ours.hidden_states, theirs.hidden_states, strict=True):
        assert got.shape == (BATCH, SEQ, config.hidden_size)
        torch.testing.assert_close(got, want, **TOLERANCE)
    assert len(ours.attentions) == config.num_attention_layers
    for got, want in zip(ours.attentions, theirs.attentions, strict=True):
        assert got.shape == (BATCH, config.num_attention_heads, SEQ, SEQ)
        torch.testing.assert_close(got, want, **TOLERANCE)


@pytest.mark.parametrize("name", CONFIGS)
def test_pretraining_model_matches_transformers(name, transformers):
    config = CONFIGS[name]
    torch.manual_seed(0)
    ours = AlbertForPreTraining(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, labels, order = padded_pairs(config, seed=1)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                         sentence_order_label=order, output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, labels=labels, sentence_order_label=order,
                   output_attentions=True, output_hidden_states=True)
        fast = ours(input_ids, token_type_ids, attention_mask)  # the fused SDPA path
    assert_same_states(got, want, config)
    for output in (got, fast):
        torch.testing.assert_close(output.prediction_logits, want.prediction_logits, **TOLERANCE)
        torch.testing.assert_close(output.sop_logits, want.sop_logits, **TOLERANCE)
    assert fast.hidden_states is None and fast.attentions is None and fast.loss is None
    torch.testing.assert_close(got.loss, want.loss, **TOLERANCE)
    torch.testing.assert_close(got.loss, got.mlm_loss + got.sop_loss)


@pytest.mark.parametrize("name", CONFIGS)
def test_masked_lm_matches_transformers(name, transformers):
    config = CONFIGS[name]
    torch.manual_seed(1)
    ours = AlbertForMaskedLM(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, labels, _ = padded_pairs(config, seed=2)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                         output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, labels=labels, output_attentions=True,
                   output_hidden_states=True)
    assert got.logits.shape == (BATCH, SEQ, config.vocab_size)
    assert_same_states(got, want, config)
    torch.testing.assert_close(got.logits, want.logits, **TOLERANCE)
    torch.testing.assert_close(got.loss, want.loss, **TOLERANCE)


def test_each_loss_alone():
    """transformers gives a loss only for both label kinds; ours gives each one's own, and their sum for both."""
    config = CONFIGS["one group"]
    model = AlbertForPreTraining(config).eval()
    input_ids, token_type_ids, attention_mask, labels, order = padded_pairs(config, seed=3)
    with torch.no_grad():
        both = model(input_ids, token_type_ids, attention_mask, labels=labels, sentence_order_label=order)
        mlm = model(input_ids, token_type_ids, attention_mask, labels=labels)
        sop = model(input_ids, token_type_ids, attention_mask, sentence_order_label=order)
    assert mlm.sop_loss is None and sop.mlm_loss is None
    torch.testing.assert_close(mlm.loss, mlm.mlm_loss)
    torch.testing.assert_close(both.loss, mlm.loss + sop.loss)


def test_layers_share_weights_by_group():
    """The group a depth runs is transformers' (int(depth / (layers / groups))): 3 depths, 2 groups -> 0, 0, 1."""
    model = AlbertForPreTraining(CONFIGS["two groups of two"])
    groups = model.albert.encoder.albert_layer_groups
    run = list(model.albert.encoder.layers_in_order())
    expected = [*groups[0].albert_layers, *groups[0].albert_layers, *groups[1].albert_layers]
    assert [id(layer) for layer in run] == [id(layer) for layer in expected]
    unique = {id(parameter) for parameter in model.parameters()}
    assert model.num_parameters() == sum(parameter.numel() for parameter in model.parameters())
    assert len(unique) == len(list(model.parameters()))


def test_decoder_is_tied_to_word_embeddings():
    for model in (AlbertForPreTraining(CONFIGS["one group"]), AlbertForMaskedLM(CONFIGS["one group"])):
        predictions = model.predictions
        assert predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight
        assert predictions.decoder.bias is predictions.bias
    assert model.albert.pooler is None  # the masked-LM model has no pooler, as in transformers


@pytest.mark.parametrize("model_class", [AlbertForPreTraining, AlbertForMaskedLM])
@pytest.mark.parametrize("name", CONFIGS)
def test_state_dict_names_are_transformers_names_both_ways(model_class, name, transformers):
    config = CONFIGS[name]
    ours = model_class(config)
    theirs = getattr(transformers, model_class.__name__)(
        transformers.AlbertConfig(**config.to_dict(), attn_implementation="eager"))
    assert list(ours.state_dict()) == list(theirs.state_dict())  # the same names, in the same order
    ours.load_state_dict(theirs.state_dict(), strict=True)
    theirs.load_state_dict(ours.state_dict(), strict=True)


def mask_heads_with_hooks(reference, head_mask, head_dim):
    """transformers 5 has no head_mask: scale each head's slice of the concatenated attention output (the input of
    the attention's output projection `dense`) by its multiplier, which is what a head mask does. A shared layer
    runs several times per forward pass, so the calls are counted: the k-th call is attention layer k."""
    calls = []

    def scale(module, inputs):
        multipliers = head_mask[len(calls) % len(head_mask)].repeat_interleave(head_dim)  # (D,)
        calls.append(module)
        return (inputs[0] * multipliers,)

    for group in reference.albert.encoder.albert_layer_groups:
        for layer in group.albert_layers:
            layer.attention.dense.register_forward_pre_hook(scale)
    return calls


@pytest.mark.parametrize("name", ["one group", "two groups of two"])
@pytest.mark.parametrize("output_attentions", [False, True])
def test_head_mask_equals_transformers_with_those_heads_scaled(name, output_attentions, transformers):
    config = CONFIGS[name]
    torch.manual_seed(2)
    ours = AlbertForPreTraining(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, *_ = padded_pairs(config, seed=4)
    head_mask = torch.ones(config.num_attention_layers, config.num_attention_heads)
    head_mask[0, 4] = 0
    head_mask[1, 1] = 0  # with one shared group: the same weights as layer 0, masked differently
    head_mask[-1, 2] = 0.5
    calls = mask_heads_with_hooks(reference, head_mask, config.head_dim)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                         output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, head_mask=head_mask,
                   output_attentions=output_attentions, output_hidden_states=True)
        plain = ours(input_ids, token_type_ids, attention_mask)
    assert len(calls) == config.num_attention_layers
    for got_state, want_state in zip(got.hidden_states, want.hidden_states, strict=True):
        torch.testing.assert_close(got_state, want_state, **TOLERANCE)
    torch.testing.assert_close(got.prediction_logits, want.prediction_logits, **TOLERANCE)
    torch.testing.assert_close(got.sop_logits, want.sop_logits, **TOLERANCE)
    assert not torch.allclose(got.prediction_logits, plain.prediction_logits, atol=1e-4)
    if output_attentions:  # the probabilities reported are those the masked heads contributed
        for index, (got_probs, want_probs) in enumerate(zip(got.attentions, want.attentions, strict=True)):
            torch.testing.assert_close(got_probs, want_probs * head_mask[index].view(1, -1, 1, 1), **TOLERANCE)


def test_head_mask_has_a_row_per_attention_layer():
    config = CONFIGS["two groups of two"]  # 3 depths × 2 layers per group = 6 attention layers
    model = AlbertForMaskedLM(config).eval()
    with pytest.raises(ValueError, match=r"head_mask has shape \(3, 5\).*\(6, 5\)"):
        model(torch.ones(1, 4, dtype=torch.long), head_mask=torch.ones(3, 5))


def test_config_json_is_what_transformers_writes(transformers):
    model = AlbertForPreTraining(CONFIGS["two groups of two"])
    values = model.config.to_dict()
    assert values["model_type"] == "albert" and values["architectures"] == ["AlbertForPreTraining"]
    # What transformers writes to config.json (JSON: the id2label keys are strings, as in ours).
    theirs = json.loads(transformers.AlbertConfig.from_dict(values).to_json_string(use_diff=False))
    for key, value in values.items():  # every field we write, transformers writes with the same value
        assert theirs[key] == value, key
    assert AlbertConfig.from_dict(theirs) == model.config  # and reads back from what it writes
    defaults = json.loads(transformers.AlbertConfig().to_json_string(use_diff=False))
    assert AlbertConfig.from_dict(defaults) == AlbertConfig()  # the same defaults


@pytest.mark.parametrize(("changes", "message"), [
    (dict(num_hidden_groups=0), r"num_hidden_groups must be a positive integer, got 0"),
    (dict(inner_group_num=1.5), r"inner_group_num must be a positive integer, got 1\.5"),
    (dict(embedding_size=-3), r"embedding_size must be a positive integer, got -3"),
    (dict(num_hidden_groups=4), r"num_hidden_groups is 4 but there are only 3 hidden layers.*at most 3 groups"),
    (dict(classifier_dropout_prob=1.0), r"classifier_dropout_prob must be in \[0, 1\), got 1\.0"),
    (dict(classifier_dropout_prob="x"), r"classifier_dropout_prob must be a finite number"),
])
def test_invalid_config_is_a_clear_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        CONFIGS["one group"].replace(**changes)


def test_an_electra_config_json_is_refused_by_name():
    with pytest.raises(ValueError, match=r"model_type is 'electra'; AlbertConfig reads 'albert' configs"):
        AlbertConfig.from_dict({"model_type": "electra", "hidden_size": 60})


@pytest.mark.parametrize(("architecture", "model_class"), [
    ("AlbertForPreTraining", AlbertForPreTraining),
    ("AlbertForMaskedLM", AlbertForMaskedLM),
    ("AlbertModel", AlbertForPreTraining),  # a bare encoder: its heads are then absent
    ("AlbertForSequenceClassification", AlbertForSequenceClassification),  # a fine-tuned one: its task head
    ("AlbertForMultipleChoice", AlbertForPreTraining),  # a head without a class here: its encoder
])
def test_the_family_registry_loads_albert_config_json_as_our_classes(architecture, model_class):
    from bertcore.models.families import resolve

    config = CONFIGS["two groups of two"].replace(architectures=(architecture,))
    family, resolved = resolve(config.to_dict())
    assert family.model_class(resolved) is model_class
    assert family.config_class().from_dict(config.to_dict()) == config
    assert resolve({key: value for key, value in config.to_dict().items() if key != "model_type"})[0] is family


def test_gradients_match_transformers(transformers):
    """Shared layers collect the gradient of every depth that runs them, and the tied decoder that of both uses."""
    config = CONFIGS["two groups of two"]
    torch.manual_seed(3)
    ours = AlbertForPreTraining(config).eval()  # eval: no dropout, so both are deterministic
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, labels, order = padded_pairs(config, seed=5)
    ours(input_ids, token_type_ids, attention_mask, labels=labels, sentence_order_label=order).loss.backward()
    reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
              sentence_order_label=order).loss.backward()
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, theirs[name].grad, rtol=1e-4, atol=1e-6, msg=name)
