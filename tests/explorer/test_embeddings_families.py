"""The Embeddings tab's views for every family bertcore opens, not BERT's alone: each view the model has a table for,
and a plain note for the one it has not (ModernBERT places tokens by rotary positions, DistilBERT has no segments)."""

import numpy as np
import pytest
import torch

from explorer.embeddings.requests import EmbeddingRequest, EmbeddingRunner

SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48)


def family_model(family: str, tokenizer) -> torch.nn.Module:
    from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
    from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
    from bertcore.models.electra import ElectraConfig, ElectraForPreTraining
    from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM

    torch.manual_seed(0)
    common = dict(vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id, **SIZES)
    specials = dict(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                    bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    return {
        "roberta": lambda: RobertaForMaskedLM(RobertaConfig(**common, max_position_embeddings=130, type_vocab_size=1)),
        "distilbert": lambda: DistilBertForMaskedLM(DistilBertConfig(**common, max_position_embeddings=128)),
        "electra": lambda: ElectraForPreTraining(ElectraConfig(**common, max_position_embeddings=128,
                                                               embedding_size=16)),
        "albert": lambda: AlbertForPreTraining(AlbertConfig(**common, max_position_embeddings=128, embedding_size=16,
                                                            num_hidden_groups=1, inner_group_num=1)),
        "modernbert": lambda: ModernBertForMaskedLM(ModernBertConfig(**common, **specials,
                                                                               max_position_embeddings=128)),
    }[family]().eval()


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "albert", "modernbert"])
def test_each_family_gets_its_projection_neighbours_and_positions_or_a_note(family, tokenizer):
    from bertcore.analysis.inspection import max_input_length

    model = family_model(family, tokenizer)
    request = EmbeddingRequest(1, model, tokenizer, num_positions=600, layer=2, num_points=200,
                               neighbour_token="king")
    result = EmbeddingRunner()(request)
    assert result.projection.points.shape == (200, 2) and result.projection.layer == 2
    segment = result.projection.sample.segment  # which sentence, also where the family's segment ids are all 0
    assert set(segment.tolist()) == {0, 1} and segment[0] == 0
    assert result.neighbours is not None and len(result.neighbours.tokens) == 10
    if family == "modernbert":
        assert result.position_similarity is None and "no learned position embeddings" in result.position_note
    else:
        size = max_input_length(model.config)  # RoBERTa's rows from its padding id on are no token's position
        assert size == (129 if family == "roberta" else 128)  # (its padding id is this vocabulary's, 0)
        assert result.position_similarity.shape == (size, size) and result.position_note == ""
        np.testing.assert_allclose(np.diag(result.position_similarity), 1.0, atol=1e-5)
    if family in ("roberta", "distilbert", "modernbert"):
        assert result.segments is None and result.segment_note
    else:
        assert result.segments is not None
