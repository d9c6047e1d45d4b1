"""Representation health (bertcore.analysis.health) against numpy formulas on transformers' own hidden states and
attention probabilities, for a tiny model of every family: anisotropy as a loop over all pairs of token vectors,
effective rank from numpy's SVD, attention entropy as a loop over the query rows, outlier dimensions by their
definition."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis.health import OUTLIER_STD, HealthSums, representation_health
from bertcore.analysis.treebank import shipped_treebank
from bertcore.errors import AnalysisError
from tests.bertcore.analysis_checkpoints import FAMILIES, family_checkpoints

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers):
    return family_checkpoints(tmp_path_factory, transformers)


def reference_health(model, tokenizer, texts):
    """(anisotropy, effective rank, attention entropy, outliers, tokens) from transformers' outputs, text by text."""
    layers_vectors, entropies = None, None
    rows = 0
    for text in texts:
        encoded = tokenizer(text)
        real = np.array([sequence is not None for sequence in encoded.sequence_ids()])
        with torch.no_grad():
            output = model(input_ids=torch.tensor([encoded["input_ids"]]), output_hidden_states=True,
                           output_attentions=True)
        states = [state[0].double().numpy()[real] for state in output.hidden_states]
        layers_vectors = states if layers_vectors is None else [
            np.concatenate([kept, new]) for kept, new in zip(layers_vectors, states, strict=True)]
        attentions = [attention[0].double().numpy() for attention in output.attentions]  # (H, T, T) each
        if entropies is None:
            entropies = np.zeros((len(attentions), attentions[0].shape[0]))
        for layer, attention in enumerate(attentions):
            for head in range(attention.shape[0]):
                for query in np.flatnonzero(real):
                    row = attention[head, query]
                    entropies[layer, head] -= sum(a * np.log(a) for a in row if a > 0)
        rows += int(real.sum())
    anisotropy, ranks, outliers = [], [], []
    for vectors in layers_vectors:
        count = len(vectors)
        units = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        total = 0.0
        for i in range(count):  # every distinct pair once
            total += float((units[i + 1 :] @ units[i]).sum())
        anisotropy.append(total / (count * (count - 1) / 2))
        singular = np.linalg.svd(vectors, compute_uv=False)
        shares = singular / singular.sum()
        ranks.append(np.exp(-np.sum(shares[shares > 0] * np.log(shares[shares > 0]))))
        mean_abs = np.abs(vectors).mean(axis=0)
        found = [d for d in range(len(mean_abs)) if mean_abs[d] > mean_abs.mean() + OUTLIER_STD * mean_abs.std()]
        outliers.append(tuple(sorted(found, key=lambda d: -mean_abs[d])))
    return np.array(anisotropy), np.array(ranks), entropies / rows, tuple(outliers), rows


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_health_matches_numpy_formulas_on_transformers_outputs(name, checkpoints):
    checkpoint = checkpoints[name]
    model, tokenizer = checkpoint.load()
    texts = [sentence.text for sentence in shipped_treebank("dev")[:8]]
    anisotropy, ranks, entropy, outliers, tokens = reference_health(checkpoint.reference,
                                                                    checkpoint.reference_tokenizer, texts)
    health = representation_health(model, tokenizer, texts)
    assert health.num_tokens == tokens and health.num_texts == 8 and health.truncated == ()
    np.testing.assert_allclose(health.anisotropy, anisotropy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(health.effective_rank, ranks, rtol=1e-5)
    np.testing.assert_allclose(health.attention_entropy, entropy, rtol=1e-5, atol=1e-6)
    assert health.outlier_dimensions == outliers
    assert health.anisotropy.shape == (model.config.num_hidden_layers + 1,)


def test_outlier_dimensions_stand_more_than_three_deviations_above_the_mean():
    config = bertcore.BertConfig(vocab_size=10, hidden_size=40, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=8)
    sums = HealthSums.zeros(config)
    generator = torch.Generator().manual_seed(0)
    states = torch.randn(2, 6, 40, generator=generator)  # (B, T, D)
    states[..., 7] *= 50.0
    states[..., 31] *= 40.0
    attention = torch.full((1, 2, 2, 6, 6), 1 / 6)[0]  # uniform rows: entropy ln 6
    real = torch.ones(2, 6, dtype=torch.bool)
    real[:, 0] = False
    sums.add([states, states * 2], [attention], real)
    health = sums.result(num_texts=2)
    assert health.outlier_dimensions == ((7, 31), (7, 31))
    np.testing.assert_allclose(health.attention_entropy, np.log(6))
    assert health.num_tokens == 10
    np.testing.assert_allclose(health.anisotropy[0], health.anisotropy[1])  # scaling changes no angle


def test_long_texts_are_cut_and_named_and_bad_input_is_refused():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                                            num_hidden_layers=1, num_attention_heads=2,
                                                            intermediate_size=8, max_position_embeddings=12))
    health = representation_health(model, tokenizer, ["the king is dead", "long live the king " * 5])
    assert health.truncated == (1,) and health.num_tokens == 4 + 10
    with pytest.raises(AnalysisError, match="pass a list of texts"):
        representation_health(model, tokenizer, "one text")
    with pytest.raises(AnalysisError, match=r"the texts hold 1 real token; .* at least 2"):
        representation_health(model, tokenizer, ["king"])
    assert bertcore.representation_health is representation_health
