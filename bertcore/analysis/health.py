"""Signs of a collapsing representation, per layer: anisotropy, effective rank, attention entropy, outlier dimensions.

A run going bad often shows in the geometry of its hidden states before it shows in the loss: every token's vector
pointing the same way (anisotropy near 1, Ethayarajh 2019), the vectors filling fewer and fewer directions
(falling effective rank; Garrido et al. 2023's RankMe), heads whose attention collapses onto one key (entropy near
0), and a few dimensions of huge magnitude that dominate every vector (outlier dimensions; Kovaleva et al. 2021).

All are taken over the real tokens of all the texts pooled: every position but the family's special tokens
([CLS], [SEP], <s>, </s>) and padding.

- anisotropy (L + 1): the mean cosine similarity over all distinct pairs of token vectors of a layer. With u_i the
  unit vectors and s = Σ u_i, Σ_{i≠j} u_i·u_j = |s|² − n, so the mean is (|s|² − n) / (n (n − 1)): exact, without an
  n × n matrix.
- effective_rank (L + 1): exp of the entropy of the singular values of the (n, D) matrix of token vectors
  (uncentred, as RankMe), normalised to sum 1: between 1 (one direction) and D (all equal). The singular values
  are the square roots of the eigenvalues of the D × D Gram matrix, summed batch by batch in float64.
- attention_entropy (L, H): per head, the mean over real query rows of −Σ a ln a over the row's keys (every
  non-padding position, the special tokens included, so that each row is a whole distribution and a head that parks
  everything on [SEP] shows as collapsed). In nats; a uniform row over n keys has ln n.
- outlier_dimensions (L + 1 lists): the dimensions whose mean |activation| over the tokens exceeds the mean of
  that statistic over all dimensions by more than OUTLIER_STD (3) standard deviations of it, largest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis.inspection import max_input_length
from bertcore.analysis.word_inputs import WordInput, batches, measuring, model_device, run_encoder
from bertcore.errors import AnalysisError

OUTLIER_STD = 3.0  # k: a dimension is an outlier when its mean |activation| is > k standard deviations above the mean


@dataclass(frozen=True)
class RepresentationHealth:
    """Per layer (embeddings first) and per head, over the real tokens of the texts pooled."""

    anisotropy: np.ndarray  # (L + 1,) float64 mean cosine similarity of distinct token pairs
    effective_rank: np.ndarray  # (L + 1,) float64 exp(entropy of the normalised singular values)
    attention_entropy: np.ndarray  # (L, H) float64 mean row entropy in nats over real query rows
    outlier_dimensions: tuple[tuple[int, ...], ...]  # (L + 1) of dimensions > OUTLIER_STD std out, largest first
    mean_abs_activation: np.ndarray  # (L + 1, D) float64 each dimension's mean |activation| (what outliers exceed)
    num_tokens: int  # real tokens pooled
    num_texts: int
    truncated: tuple[int, ...]  # texts longer than the model takes, cut to fit (indices)
    outlier_std: float = OUTLIER_STD


def representation_health(model: nn.Module, tokenizer, texts: Sequence[str]) -> RepresentationHealth:
    """Anisotropy, effective rank, attention entropy and outlier dimensions of `model` over the real tokens of
    `texts` (each encoded alone, as one sentence; a text longer than the model takes is cut to fit and named in
    `.truncated`). Batched, in eval mode without gradients."""
    if isinstance(texts, str) or not texts:
        raise AnalysisError("pass a list of texts (at least one); the measures pool the tokens of all of them")
    limit = max_input_length(model.config)
    inputs, truncated = [], []
    for index, text in enumerate(texts):
        encoding = tokenizer.encode(text, max_length=limit)
        if encoding.truncation is not None:
            truncated.append(index)
        # Laid out as a sentence of one "word" that every real token belongs to: word_index >= 0 marks them.
        word_index = tuple(-1 if special else 0 for special in encoding.special_tokens_mask)
        inputs.append(WordInput(index, tuple(encoding.input_ids), tuple(encoding.segment_ids), word_index, 1))
    sums = HealthSums.zeros(model.config)
    per_key = model.config.num_hidden_layers * model.config.num_attention_heads
    with measuring(model):
        for batch in batches(inputs, tokenizer, model_device(model), attention_values=per_key):
            output = run_encoder(model, batch, attentions=True, hidden_states=True)
            sums.add(output.hidden_states, output.attentions, batch.word_index >= 0)
    return sums.result(num_texts=len(texts), truncated=tuple(truncated))


@dataclass
class HealthSums:
    """What the health measures need, summed batch by batch (float64): per layer the sum of unit vectors, the Gram
    matrix and the sum of |activation|; per head the sum of row entropies; the token and row counts. The training
    record adds the batches it already runs for the syntax measurements (bertcore.analysis.records)."""

    unit_sum: np.ndarray  # (L + 1, D)
    gram: np.ndarray  # (L + 1, D, D)
    abs_sum: np.ndarray  # (L + 1, D)
    entropy_sum: np.ndarray  # (L, H)
    num_tokens: int = 0  # real tokens, which are also the query rows the entropies are summed over

    @classmethod
    def zeros(cls, config) -> HealthSums:
        layers, width, heads = config.num_hidden_layers + 1, config.hidden_size, config.num_attention_heads
        return cls(np.zeros((layers, width)), np.zeros((layers, width, width)), np.zeros((layers, width)),
                   np.zeros((layers - 1, heads)))

    def add(self, hidden_states: Sequence[torch.Tensor], attentions: Sequence[torch.Tensor],
            real: torch.Tensor) -> None:
        """hidden_states: L + 1 of (B, T, D); attentions: L of (B, H, T, T), whose padding keys hold 0 (the model
        masks them); real (B, T) bool: the tokens measured (no special token, no padding), also the query rows."""
        if len(hidden_states) != self.unit_sum.shape[0]:
            raise AnalysisError(f"{len(hidden_states)} hidden states for a model of {self.unit_sum.shape[0] - 1} "
                                "layers; pass every layer's, the embeddings first")
        for layer, states in enumerate(hidden_states):
            vectors = states[real].double()  # (N, D)
            norms = vectors.norm(dim=-1, keepdim=True)
            self.unit_sum[layer] += (vectors / norms.clamp(min=torch.finfo(torch.float64).tiny)).sum(0).cpu().numpy()
            self.gram[layer] += (vectors.T @ vectors).cpu().numpy()
            self.abs_sum[layer] += vectors.abs().sum(0).cpu().numpy()
        batch_rows, positions = real.nonzero(as_tuple=True)  # the query rows measured, (N,) each
        for layer, probabilities in enumerate(attentions):
            rows = probabilities[batch_rows, :, positions, :].double()  # (N, H, T); padding keys hold 0
            self.entropy_sum[layer] += (-torch.xlogy(rows, rows)).sum(dim=(0, 2)).cpu().numpy()  # 0 ln 0 = 0
        self.num_tokens += int(real.sum())

    def result(self, *, num_texts: int, truncated: tuple[int, ...] = ()) -> RepresentationHealth:
        count = self.num_tokens
        if count < 2:
            raise AnalysisError(f"the texts hold {count} real token{'s' if count != 1 else ''}; the measures "
                                "compare pairs of tokens, so give texts with at least 2 (special tokens do not count)")
        anisotropy = ((self.unit_sum ** 2).sum(-1) - count) / (count * (count - 1))
        effective_rank = np.array([_effective_rank(gram) for gram in self.gram])
        mean_abs = self.abs_sum / count
        outliers = tuple(_outliers(row) for row in mean_abs)
        return RepresentationHealth(anisotropy=anisotropy, effective_rank=effective_rank,
                                    attention_entropy=self.entropy_sum / count,
                                    outlier_dimensions=outliers, mean_abs_activation=mean_abs, num_tokens=count,
                                    num_texts=num_texts, truncated=truncated)


def _effective_rank(gram: np.ndarray) -> float:
    """exp(H(p)), p = σ / Σσ, from the Gram matrix XᵀX of the token vectors (σ² are its eigenvalues)."""
    # torch's, not numpy's: numpy's BLAS keeps a thread pool of its own, which on a busy machine spins against torch's
    # (7 s instead of 10 ms for five 256 × 256 matrices at a load of 10 on 2 cores).
    eigenvalues = np.clip(torch.linalg.eigvalsh(torch.from_numpy(gram)).numpy(), 0.0, None)
    singular = np.sqrt(eigenvalues)
    total = singular.sum()
    if total <= 0:
        return 0.0  # every vector is zero: no direction at all
    shares = singular[singular > 0] / total
    return float(np.exp(-(shares * np.log(shares)).sum()))


def _outliers(mean_abs: np.ndarray) -> tuple[int, ...]:
    threshold = mean_abs.mean() + OUTLIER_STD * mean_abs.std()
    found = np.flatnonzero(mean_abs > threshold)
    return tuple(int(index) for index in found[np.argsort(-mean_abs[found], kind="stable")])
