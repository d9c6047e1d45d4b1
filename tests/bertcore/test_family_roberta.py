"""RoBERTa and XLM-RoBERTa: parity with transformers (positions from the padding offset, one segment type, the
lm_head tied to the word embeddings) and checkpoints both ways."""

import json

import pytest
import torch

from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel, position_ids_from_input_ids

TOLERANCE = dict(rtol=0, atol=1e-5)
CONFIGS = [
    RobertaConfig(vocab_size=99, hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=37,
                  max_position_embeddings=19),
    RobertaConfig(vocab_size=131, hidden_size=60, num_hidden_layers=3, num_attention_heads=5, intermediate_size=71,
                  max_position_embeddings=23, pad_token_id=3, hidden_act="gelu_new", layer_norm_eps=1e-7,
                  model_type="xlm-roberta"),
]


def padded_batch(config, seed: int):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(config.pad_token_id + 1, config.vocab_size, (3, 7), generator=generator)
    attention_mask = (torch.arange(7)[None, :] < torch.tensor([7, 5, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    labels = torch.full_like(input_ids, -100)
    labels[:, 1] = input_ids[:, 1]
    return input_ids, attention_mask, labels


def reference_for(transformers, ours: RobertaForMaskedLM):
    classes = {"roberta": (transformers.RobertaConfig, transformers.RobertaForMaskedLM),
               "xlm-roberta": (transformers.XLMRobertaConfig, transformers.XLMRobertaForMaskedLM)}
    config_class, model_class = classes[ours.config.model_type]
    reference = model_class(config_class(**ours.config.to_dict(), attn_implementation="eager")).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all(key.endswith(("position_ids", "token_type_ids")) for key in missing), missing
    return reference


def test_positions_start_after_the_padding_index():
    input_ids = torch.tensor([[5, 6, 7, 1, 1], [1, 5, 6, 1, 7]])
    assert position_ids_from_input_ids(input_ids, 1).tolist() == [[2, 3, 4, 1, 1], [1, 2, 3, 1, 4]]


@pytest.mark.parametrize("config_index", range(len(CONFIGS)))
def test_masked_lm_matches_transformers(config_index, transformers):
    config = CONFIGS[config_index]
    torch.manual_seed(config_index)
    ours = RobertaForMaskedLM(config).eval()
    with torch.no_grad():
        ours.lm_head.bias.normal_()
    reference = reference_for(transformers, ours)
    input_ids, attention_mask, labels = padded_batch(config, config_index)
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True,
                             output_hidden_states=True)
        full = ours(input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True,
                    output_hidden_states=True)
        fast = ours(input_ids, attention_mask=attention_mask)
        pair_segments = ours(input_ids, token_type_ids=(torch.arange(7) >= 4).long().expand(3, -1),
                             attention_mask=attention_mask)  # BERT-style segment ids: ignored, one type
    for output in (full, fast, pair_segments):
        torch.testing.assert_close(output.logits, expected.logits, **TOLERANCE)
    torch.testing.assert_close(full.loss, expected.loss, **TOLERANCE)
    assert len(full.hidden_states) == config.num_hidden_layers + 1
    for got, want in zip(full.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    for got, want in zip(full.attentions, expected.attentions, strict=True):
        assert got.shape == (3, config.num_attention_heads, 7, 7)
        torch.testing.assert_close(got, want, **TOLERANCE)
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[-1, 0] = 0.0
    with torch.no_grad():
        masked = ours(input_ids, attention_mask=attention_mask, head_mask=head_mask, output_attentions=True)
    assert masked.attentions[-1][:, 0].abs().max() == 0
    assert not torch.allclose(masked.logits, full.logits, atol=1e-4)


def test_bare_model_with_pooler_matches_transformers(transformers):
    config = CONFIGS[0]
    torch.manual_seed(7)
    ours = RobertaModel(config).eval()
    reference = transformers.RobertaModel(transformers.RobertaConfig(**config.to_dict(),
                                                                     attn_implementation="eager")).eval()
    reference.load_state_dict(ours.state_dict(), strict=False)
    input_ids, attention_mask, _ = padded_batch(config, 7)
    with torch.no_grad():
        got, want = ours(input_ids, attention_mask=attention_mask), reference(input_ids, attention_mask=attention_mask)
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, **TOLERANCE)
    torch.testing.assert_close(got.pooler_output, want.pooler_output, **TOLERANCE)


def test_too_long_an_input_names_the_limit():
    model = RobertaForMaskedLM(CONFIGS[0])  # 19 positions, pad 1: 17 usable
    with pytest.raises(ValueError, match="at most 17"):
        model(torch.full((1, 18), 5))


@pytest.fixture
def small(small_vocab_tokenizer):
    def build(model_type: str) -> RobertaForMaskedLM:
        torch.manual_seed(11)
        config = RobertaConfig(vocab_size=small_vocab_tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                               num_attention_heads=3, intermediate_size=40, max_position_embeddings=40,
                               model_type=model_type)
        model = RobertaForMaskedLM(config).eval()
        with torch.no_grad():
            model.lm_head.bias.normal_()
        return model
    return build


@pytest.mark.parametrize("model_type", ["roberta", "xlm-roberta"])
def test_round_trips_with_transformers(model_type, small, small_vocab_tokenizer, tmp_path, transformers):
    ours = small(model_type)
    save_pretrained(ours, small_vocab_tokenizer, tmp_path / "ours")
    written = json.loads((tmp_path / "ours" / "config.json").read_text())
    prefix = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta"}[model_type]
    assert (written["model_type"], written["architectures"]) == (model_type, [f"{prefix}ForMaskedLM"])
    reference = getattr(transformers, f"{prefix}ForMaskedLM").from_pretrained(
        tmp_path / "ours", attn_implementation="eager").eval()
    input_ids = torch.tensor([[0, 5, 9, 12, 2, 1, 1]])
    mask = (input_ids != 1).long()
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids, attention_mask=mask).logits,
                                   reference(input_ids, attention_mask=mask).logits, **TOLERANCE)
        reference.lm_head.bias.normal_()
        reference.save_pretrained(tmp_path / "theirs")
        want = reference(input_ids, attention_mask=mask).logits
    small_vocab_tokenizer.save(tmp_path / "theirs")
    model, _ = load_pretrained(tmp_path / "theirs")
    assert type(model) is RobertaForMaskedLM and model.config.model_type == model_type and model.has_mlm_head
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids, attention_mask=mask).logits, want, **TOLERANCE)


def test_bare_roberta_model_loads_without_a_head(small, small_vocab_tokenizer, tmp_path, transformers):
    config = small("roberta").config
    reference = transformers.RobertaModel(transformers.RobertaConfig(**config.to_dict())).eval()
    reference.save_pretrained(tmp_path / "bare")
    small_vocab_tokenizer.save(tmp_path / "bare")
    model, _ = load_pretrained(tmp_path / "bare")
    assert type(model) is RobertaForMaskedLM and not model.has_mlm_head and not model.has_pretraining_heads
    input_ids = torch.tensor([[0, 5, 9, 12, 2]])
    with torch.no_grad():
        torch.testing.assert_close(model.roberta(input_ids).last_hidden_state,
                                   reference(input_ids).last_hidden_state, **TOLERANCE)


def test_inspection_predicts_masked_tokens(small, small_vocab_tokenizer):
    from bertcore.analysis.inspection import inspect
    from bertcore.data.masking import mask_exactly

    model = small("roberta")
    encoding = small_vocab_tokenizer.encode("the cat sat on a mat", "the dog ran far away")
    masking = mask_exactly(encoding, small_vocab_tokenizer, [2, 4])
    inspection = inspect(model, small_vocab_tokenizer, "the cat sat on a mat", "the dog ran far away",
                         masking=masking, top_k=3)
    assert inspection.has_mlm_head and not inspection.has_nsp_head and inspection.is_next_probability is None
    assert inspection.attentions.shape[:2] == (2, 3) and inspection.hidden_states.shape[0] == 3
    with torch.no_grad():
        logits = model(torch.tensor([masking.masked_ids])).logits[0]  # pair segment ids play no part
    assert [p.top_ids[0] for p in inspection.predictions] == [int(logits[2].argmax()), int(logits[4].argmax())]
