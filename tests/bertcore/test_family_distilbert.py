"""DistilBERT: parity with transformers (DistilBERT's names, no segments, learned or sinusoidal positions) and
checkpoints both ways, with config.json in DistilBERT's own field names."""

import json

import pytest
import torch

from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM, DistilBertModel

TOLERANCE = dict(rtol=0, atol=1e-5)
CONFIGS = [
    DistilBertConfig(vocab_size=99, hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=37,
                     max_position_embeddings=19),
    DistilBertConfig(vocab_size=131, hidden_size=60, num_hidden_layers=3, num_attention_heads=5,
                     intermediate_size=71, max_position_embeddings=23, hidden_act="relu", sinusoidal_pos_embds=True),
]


def reference_for(transformers, ours):
    reference = transformers.DistilBertForMaskedLM(
        transformers.DistilBertConfig(**ours.config.to_dict(), attn_implementation="eager")).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all(key.endswith("position_ids") for key in missing), missing
    return reference


def padded_batch(config, seed: int):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (3, 7), generator=generator)
    attention_mask = (torch.arange(7)[None, :] < torch.tensor([7, 5, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    labels = torch.full_like(input_ids, -100)
    labels[:, 1] = input_ids[:, 1]
    return input_ids, attention_mask, labels


def test_config_json_uses_distilberts_names(transformers):
    values = CONFIGS[1].to_dict()
    assert values["model_type"] == "distilbert"
    assert (values["dim"], values["n_layers"], values["n_heads"], values["hidden_dim"]) == (60, 3, 5, 71)
    assert "hidden_size" not in values and "type_vocab_size" not in values
    assert DistilBertConfig.from_dict(values) == CONFIGS[1].replace(architectures=())
    theirs = transformers.DistilBertConfig(**values)
    assert (theirs.dim, theirs.n_layers, theirs.activation, theirs.sinusoidal_pos_embds) == (60, 3, "relu", True)


@pytest.mark.parametrize("config_index", range(len(CONFIGS)))
def test_masked_lm_matches_transformers(config_index, transformers):
    config = CONFIGS[config_index]
    torch.manual_seed(config_index)
    ours = DistilBertForMaskedLM(config).eval()
    with torch.no_grad():
        ours.vocab_projector.bias.normal_()
    reference = reference_for(transformers, ours)
    input_ids, attention_mask, labels = padded_batch(config, config_index)
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True,
                             output_hidden_states=True)
        full = ours(input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True,
                    output_hidden_states=True)
        fast = ours(input_ids, token_type_ids=torch.ones_like(input_ids), attention_mask=attention_mask)
    for output in (full, fast):  # token_type_ids: accepted and ignored
        torch.testing.assert_close(output.logits, expected.logits, **TOLERANCE)
    torch.testing.assert_close(full.loss, expected.loss, **TOLERANCE)
    assert len(full.hidden_states) == config.num_hidden_layers + 1
    for got, want in zip(full.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    for got, want in zip(full.attentions, expected.attentions, strict=True):
        assert got.shape == (3, config.num_attention_heads, 7, 7)
        torch.testing.assert_close(got, want, **TOLERANCE)
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[0, 2] = 0.0
    with torch.no_grad():
        masked = ours(input_ids, attention_mask=attention_mask, head_mask=head_mask, output_attentions=True)
        fused = ours(input_ids, attention_mask=attention_mask, head_mask=head_mask)
    assert masked.attentions[0][:, 2].abs().max() == 0
    torch.testing.assert_close(fused.logits, masked.logits, **TOLERANCE)


def test_sinusoidal_positions_are_transformers_and_fixed(transformers):
    torch.manual_seed(0)
    ours = DistilBertForMaskedLM(CONFIGS[1])
    theirs = transformers.DistilBertForMaskedLM(transformers.DistilBertConfig(**CONFIGS[1].to_dict()))
    table = ours.distilbert.embeddings.position_embeddings.weight
    torch.testing.assert_close(table, theirs.distilbert.embeddings.position_embeddings.weight, **TOLERANCE)
    assert not table.requires_grad


@pytest.fixture
def small(small_vocab_tokenizer):
    torch.manual_seed(13)
    config = DistilBertConfig(vocab_size=small_vocab_tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                              num_attention_heads=3, intermediate_size=40, max_position_embeddings=40)
    model = DistilBertForMaskedLM(config).eval()
    with torch.no_grad():
        model.vocab_projector.bias.normal_()
    return model


def test_round_trips_with_transformers(small, small_vocab_tokenizer, tmp_path, transformers):
    save_pretrained(small, small_vocab_tokenizer, tmp_path / "ours")
    written = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert (written["model_type"], written["architectures"]) == ("distilbert", ["DistilBertForMaskedLM"])
    reference = transformers.DistilBertForMaskedLM.from_pretrained(tmp_path / "ours",
                                                                   attn_implementation="eager").eval()
    input_ids = torch.tensor([[2, 5, 9, 12, 3, 0, 0]])
    mask = (input_ids != 0).long()
    with torch.no_grad():
        torch.testing.assert_close(small(input_ids, attention_mask=mask).logits,
                                   reference(input_ids, attention_mask=mask).logits, **TOLERANCE)
        reference.vocab_projector.bias.normal_()
        reference.save_pretrained(tmp_path / "theirs")
        want = reference(input_ids, attention_mask=mask).logits
    small_vocab_tokenizer.save(tmp_path / "theirs")
    model, _ = load_pretrained(tmp_path / "theirs")
    assert type(model) is DistilBertForMaskedLM and model.has_mlm_head and not model.has_nsp_head
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids, attention_mask=mask).logits, want, **TOLERANCE)


def test_bare_model_loads_without_a_head(small, small_vocab_tokenizer, tmp_path, transformers):
    reference = transformers.DistilBertModel(transformers.DistilBertConfig(**small.config.to_dict())).eval()
    reference.save_pretrained(tmp_path / "bare")
    small_vocab_tokenizer.save(tmp_path / "bare")
    model, _ = load_pretrained(tmp_path / "bare")
    assert type(model) is DistilBertForMaskedLM and not model.has_mlm_head
    assert isinstance(model.distilbert, DistilBertModel)
    input_ids = torch.tensor([[2, 5, 9, 12, 3]])
    with torch.no_grad():
        torch.testing.assert_close(model.distilbert(input_ids).last_hidden_state,
                                   reference(input_ids).last_hidden_state, **TOLERANCE)
