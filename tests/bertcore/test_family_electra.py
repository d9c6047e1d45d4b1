"""ELECTRA against the reference implementation: transformers' ElectraForPreTraining (the discriminator) and
ElectraForMaskedLM (the generator), eager attention, on odd distinct sizes (vocab 99, hidden 60, embeddings 36,
5 heads, 3 layers, padded sentence pairs), so that a wrong transpose or a skipped projection fails loudly."""

import json

import pytest
import torch

from bertcore.models.bert import IGNORE_INDEX
from bertcore.models.electra import (
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraForSequenceClassification,
)

CONFIGS = {
    "projected": ElectraConfig(vocab_size=99, hidden_size=60, embedding_size=36, num_hidden_layers=3,
                               num_attention_heads=5, intermediate_size=37, max_position_embeddings=19),
    # Embeddings as wide as the encoder: no embeddings_project, as transformers builds it.
    "unprojected": ElectraConfig(vocab_size=57, hidden_size=42, embedding_size=42, num_hidden_layers=2,
                                 num_attention_heads=7, intermediate_size=45, max_position_embeddings=11,
                                 type_vocab_size=3, hidden_act="gelu_new", layer_norm_eps=1e-7),
}
TOLERANCE = dict(rtol=0, atol=1e-5)
BATCH, SEQ = 3, 7


def reference_model(transformers, ours):
    """The transformers class of the same name, holding our model's weights (strict: every name matches)."""
    hf_config = transformers.ElectraConfig(**ours.config.to_dict(), attn_implementation="eager")
    reference = getattr(transformers, type(ours).__name__)(hf_config).eval()
    reference.load_state_dict(ours.state_dict(), strict=True)
    return reference


def padded_pairs(config, seed):
    """Three sentence pairs of 7, 5 and 3 real tokens, with pad ids and segment 0 on the padding."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (BATCH, SEQ), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, SEQ // 2:] = 1
    attention_mask = (torch.arange(SEQ)[None, :] < torch.tensor([SEQ, SEQ - 2, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    token_type_ids = token_type_ids.masked_fill(attention_mask == 0, 0)
    return input_ids, token_type_ids, attention_mask, generator


def assert_same_outputs(ours, theirs, config, layers):
    assert len(ours.hidden_states) == layers + 1
    for got, want in zip(ours.hidden_states, theirs.hidden_states, strict=True):
        assert got.shape == (BATCH, SEQ, config.hidden_size)
        torch.testing.assert_close(got, want, **TOLERANCE)
    assert len(ours.attentions) == layers
    for got, want in zip(ours.attentions, theirs.attentions, strict=True):
        assert got.shape == (BATCH, config.num_attention_heads, SEQ, SEQ)
        torch.testing.assert_close(got, want, **TOLERANCE)
    torch.testing.assert_close(ours.logits, theirs.logits, **TOLERANCE)


@pytest.mark.parametrize("name", CONFIGS)
def test_discriminator_matches_transformers(name, transformers):
    config = CONFIGS[name]
    torch.manual_seed(0)
    ours = ElectraForPreTraining(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, generator = padded_pairs(config, seed=1)
    replaced = torch.randint(0, 2, input_ids.shape, generator=generator)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=replaced,
                         output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, labels=replaced, output_attentions=True,
                   output_hidden_states=True)
        fast = ours(input_ids, token_type_ids, attention_mask, labels=replaced)  # the fused SDPA path
        unpadded = ours(input_ids[:1], labels=replaced[:1])
        want_unpadded = reference(input_ids[:1], labels=replaced[:1])
    assert got.logits.shape == (BATCH, SEQ)  # one logit per token: replaced or original
    assert_same_outputs(got, want, config, config.num_hidden_layers)
    torch.testing.assert_close(fast.logits, want.logits, **TOLERANCE)
    assert fast.hidden_states is None and fast.attentions is None
    for output in (got, fast):  # the loss leaves padding out, as transformers does with an attention_mask
        torch.testing.assert_close(output.loss, want.loss, **TOLERANCE)
    torch.testing.assert_close(unpadded.loss, want_unpadded.loss, **TOLERANCE)


@pytest.mark.parametrize("name", CONFIGS)
def test_generator_matches_transformers(name, transformers):
    config = CONFIGS[name]
    torch.manual_seed(1)
    ours = ElectraForMaskedLM(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, generator = padded_pairs(config, seed=2)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    picked = (torch.rand(input_ids.shape, generator=generator) < 0.4) & (attention_mask == 1)
    picked[:, 1] = True
    labels[picked] = input_ids[picked]
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                         output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, labels=labels, output_attentions=True,
                   output_hidden_states=True)
    assert got.logits.shape == (BATCH, SEQ, config.vocab_size)
    assert_same_outputs(got, want, config, config.num_hidden_layers)
    torch.testing.assert_close(got.loss, want.loss, **TOLERANCE)


def test_generator_decoder_is_the_word_embedding_matrix():
    model = ElectraForMaskedLM(CONFIGS["projected"])
    assert model.generator_lm_head.weight is model.electra.embeddings.word_embeddings.weight
    assert model.generator_lm_head.bias is not None  # its own output bias
    assert model.config.architectures == ("ElectraForMaskedLM",)


@pytest.mark.parametrize("model_class", [ElectraForPreTraining, ElectraForMaskedLM])
@pytest.mark.parametrize("name", CONFIGS)
def test_state_dict_names_are_transformers_names_both_ways(model_class, name, transformers):
    config = CONFIGS[name]
    ours = model_class(config)
    theirs = getattr(transformers, model_class.__name__)(
        transformers.ElectraConfig(**config.to_dict(), attn_implementation="eager"))
    assert list(ours.state_dict()) == list(theirs.state_dict())  # the same names, in the same order
    ours.load_state_dict(theirs.state_dict(), strict=True)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert ("electra.embeddings_project.weight" in ours.state_dict()) == (name == "projected")


def mask_heads_with_hooks(reference, head_mask, head_dim):
    """transformers 5 has no head_mask: scale each head's slice of the concatenated attention output (the input of
    each layer's attention output projection) by its multiplier, which is what a head mask does."""
    for index, layer in enumerate(reference.electra.encoder.layer):
        multipliers = head_mask[index].repeat_interleave(head_dim)  # (D,): head h's slice gets head_mask[index, h]

        def scale(module, inputs, multipliers=multipliers):
            return (inputs[0] * multipliers,)

        layer.attention.output.dense.register_forward_pre_hook(scale)


@pytest.mark.parametrize("output_attentions", [False, True])
def test_head_mask_equals_transformers_with_those_heads_scaled(output_attentions, transformers):
    config = CONFIGS["projected"]
    torch.manual_seed(2)
    ours = ElectraForPreTraining(config).eval()
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, _ = padded_pairs(config, seed=3)
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[0, 4] = 0
    head_mask[1, 1] = 0
    head_mask[2, 2] = 0.5
    mask_heads_with_hooks(reference, head_mask, config.head_dim)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                         output_attentions=True, output_hidden_states=True)
        got = ours(input_ids, token_type_ids, attention_mask, head_mask=head_mask,
                   output_attentions=output_attentions, output_hidden_states=True)
        plain = ours(input_ids, token_type_ids, attention_mask)
    for got_state, want_state in zip(got.hidden_states, want.hidden_states, strict=True):
        torch.testing.assert_close(got_state, want_state, **TOLERANCE)
    torch.testing.assert_close(got.logits, want.logits, **TOLERANCE)
    assert not torch.allclose(got.logits, plain.logits, atol=1e-4)
    if output_attentions:  # the probabilities reported are those the masked heads contributed
        for index, (got_probs, want_probs) in enumerate(zip(got.attentions, want.attentions, strict=True)):
            torch.testing.assert_close(got_probs, want_probs * head_mask[index].view(1, -1, 1, 1), **TOLERANCE)


def test_head_mask_of_the_wrong_shape_is_a_clear_error():
    config = CONFIGS["projected"]
    model = ElectraForPreTraining(config).eval()
    with pytest.raises(ValueError, match=r"head_mask has shape \(5, 3\).*\(3, 5\)"):
        model(torch.ones(1, 4, dtype=torch.long), head_mask=torch.ones(5, 3))


def test_config_json_is_what_transformers_writes(transformers):
    config = CONFIGS["projected"]
    model = ElectraForPreTraining(config)
    values = model.config.to_dict()
    assert values["model_type"] == "electra" and values["architectures"] == ["ElectraForPreTraining"]
    # What transformers writes to config.json (JSON: the id2label keys are strings, as in ours).
    theirs = json.loads(transformers.ElectraConfig.from_dict(values).to_json_string(use_diff=False))
    for key, value in values.items():  # every field we write, transformers writes with the same value
        assert theirs[key] == value, key
    assert ElectraConfig.from_dict(theirs) == model.config  # and reads back from what it writes
    defaults = json.loads(transformers.ElectraConfig().to_json_string(use_diff=False))
    assert ElectraConfig.from_dict(defaults) == ElectraConfig()  # the same defaults (electra-small)


@pytest.mark.parametrize(("changes", "message"), [
    (dict(embedding_size=0), r"embedding_size must be a positive integer, got 0"),
    (dict(embedding_size=12.5), r"embedding_size must be a positive integer, got 12\.5"),
    (dict(hidden_size=60, num_attention_heads=7), r"hidden_size 60 is not divisible by num_attention_heads 7"),
])
def test_invalid_config_is_a_clear_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        CONFIGS["projected"].replace(**changes)


def test_a_bert_config_json_is_refused_by_name():
    with pytest.raises(ValueError, match=r"model_type is 'bert'; ElectraConfig reads 'electra' configs"):
        ElectraConfig.from_dict({"model_type": "bert", "hidden_size": 60})


@pytest.mark.parametrize(("architecture", "model_class"), [
    ("ElectraForPreTraining", ElectraForPreTraining),
    ("ElectraForMaskedLM", ElectraForMaskedLM),
    ("ElectraModel", ElectraForPreTraining),  # a bare encoder: the discriminator, whose head is then absent
    ("ElectraForSequenceClassification", ElectraForSequenceClassification),  # a fine-tuned one: its task head
    ("ElectraForMultipleChoice", ElectraForPreTraining),  # a head without a class here: its encoder
])
def test_the_family_registry_loads_electra_config_json_as_our_classes(architecture, model_class):
    from bertcore.models.families import resolve

    values = CONFIGS["projected"].replace(architectures=(architecture,)).to_dict()
    family, resolved = resolve(values)
    assert family.model_class(resolved) is model_class
    assert family.config_class().from_dict(values) == CONFIGS["projected"].replace(architectures=(architecture,))
    assert resolve({key: value for key, value in values.items() if key != "model_type"})[0] is family


@pytest.mark.parametrize("model_class", [ElectraForPreTraining, ElectraForMaskedLM])
def test_gradients_match_transformers(model_class, transformers):
    config = CONFIGS["projected"]
    torch.manual_seed(3)
    ours = model_class(config).eval()  # eval: no dropout, so both are deterministic
    reference = reference_model(transformers, ours)
    input_ids, token_type_ids, attention_mask, generator = padded_pairs(config, seed=5)
    if model_class is ElectraForPreTraining:
        labels = torch.randint(0, 2, input_ids.shape, generator=generator)
    else:
        labels = input_ids.masked_fill(torch.rand(input_ids.shape, generator=generator) < 0.6, IGNORE_INDEX)
        labels[:, 0] = input_ids[:, 0]
    ours(input_ids, token_type_ids, attention_mask, labels=labels).loss.backward()
    reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels).loss.backward()
    theirs = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, theirs[name].grad, rtol=1e-4, atol=1e-6, msg=name)
