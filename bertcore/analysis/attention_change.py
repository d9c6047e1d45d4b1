"""How far each attention head moved between two checkpoints of one architecture, on one input.

    change = attention_change(model_a, tokenizer_a, model_b, tokenizer_b, "who is there?", "nay, answer me")
    change.divergence          # (L, H) float64: Jensen–Shannon divergence in bits per head, mean over query rows
    change.attentions_a, _b    # (L, H, T, T) float32: each model's attention on the same encoding

What the number is. In one head, each query row is a probability distribution over the keys: P in checkpoint A,
Q in checkpoint B. Their Jensen–Shannon divergence

    JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M),   M = ½ (P + Q),   logarithms in base 2,

lies in [0, 1] bits: 0 when the row did not move, 1 when A and B attend to disjoint keys. It is symmetric and
finite even where one row puts exactly 0 on a key: a term with P = 0 adds nothing (0 · log 0 = 0, the limit) and
M > 0 wherever P > 0, so zeros are handled exactly, with no smoothing epsilon. A head's number is the mean of its
rows' divergences over the input's real query rows; padding ([PAD] positions, attention mask 0) is left out as
query rows and as key columns. Sums run in float64.

Any two checkpoints whose heads correspond can be compared: a pretrained model and its fine-tuned descendant,
step 1,000 and step 10,000 of one pretraining run. They must have the same layers, heads and hidden size and the
same vocabulary (so the input is the same tokens): `check_comparable` says which differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcore.tokenization.wordpiece import Encoding

LOG_BASE = 2.0  # bits: a divergence of 1 means "disjoint"


def js_divergence(p: np.ndarray, q: np.ndarray, base: float = LOG_BASE) -> np.ndarray:
    """Jensen–Shannon divergence between the distributions along the last axis of `p` and `q` (same shape,
    each row summing to 1), in the given logarithm base; shape (...). Exact at zeros (0 · log 0 = 0)."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    if p.shape != q.shape:
        raise ValueError(f"p has shape {p.shape} but q has {q.shape}; compare distributions over the same keys")
    m = 0.5 * (p + q)

    def kl_to_m(x: np.ndarray) -> np.ndarray:
        ratio = np.divide(x, m, out=np.ones_like(x), where=x > 0)  # where x = 0 the term is 0: log 1
        return np.sum(x * np.log(ratio), axis=-1)

    return 0.5 * (kl_to_m(p) + kl_to_m(q)) / np.log(base)


def head_divergence(attentions_a: np.ndarray, attentions_b: np.ndarray,
                    attention_mask: np.ndarray | None = None) -> np.ndarray:
    """(L, H) mean Jensen–Shannon divergence (bits) of each head's query rows between two (L, H, T, T) attention
    arrays of the same input; `attention_mask` (T,) 1 for real tokens, 0 for padding (None: all real)."""
    if attentions_a.shape != attentions_b.shape:
        raise ValueError(f"the attentions have shapes {attentions_a.shape} and {attentions_b.shape}; they must "
                         "come from the same input and architecture")
    length = attentions_a.shape[-1]
    real = np.ones(length, bool) if attention_mask is None else np.asarray(attention_mask).astype(bool)
    if real.shape != (length,) or not real.any():
        raise ValueError(f"attention_mask must be {length} flags with at least one real token, got {real.shape}")
    p = attentions_a[:, :, real][..., real]  # (L, H, t, t): real queries × real keys
    q = attentions_b[:, :, real][..., real]
    return js_divergence(p, q).mean(axis=-1)  # (L, H)


CASING_PROBE = "The Quick BROWN fox, naïve Café."  # what a cased and an uncased tokenizer split differently


def check_comparable(config_a, tokenizer_a, config_b, tokenizer_b, names: tuple[str, str] = ("A", "B")) -> None:
    """ValueError naming what differs when two checkpoints' heads cannot be compared one to one."""
    shape = ("num_hidden_layers", "num_attention_heads", "hidden_size")

    def describe(config) -> str:
        return f"L{config.num_hidden_layers}/H{config.hidden_size}/A{config.num_attention_heads}"

    if any(getattr(config_a, field) != getattr(config_b, field) for field in shape):
        raise ValueError(f"{names[0]} is {describe(config_a)} and {names[1]} is {describe(config_b)}: head by head "
                         "comparison needs two checkpoints of the same shape (layers, hidden size, heads), e.g. two "
                         "checkpoints of one run, or a model and the fine-tuned model made from it")
    if list(tokenizer_a.vocab) != list(tokenizer_b.vocab):
        raise ValueError(f"{names[0]} and {names[1]} have different vocabularies ({tokenizer_a.vocab_size:,} and "
                         f"{tokenizer_b.vocab_size:,} tokens): the same text would be different tokens, so their "
                         "heads cannot be compared on it")
    # Any family's tokenizer (WordPiece, byte-level BPE, SentencePiece): the same vocabulary may still split text
    # otherwise (one cased and one uncased, another normaliser); judged by what each makes of the same text.
    if tokenizer_a.tokenize(CASING_PROBE) != tokenizer_b.tokenize(CASING_PROBE):
        raise ValueError(f"{names[0]} and {names[1]} share a vocabulary but split text differently (one cased and "
                         "one uncased, or another normalisation): the same text would be different tokens, so their "
                         "heads cannot be compared on it")


@dataclass(frozen=True)
class AttentionChange:
    """Two checkpoints' attention on one input, and how far each head moved."""

    encoding: Encoding  # the input both models saw
    attentions_a: np.ndarray  # (L, H, T, T) float32, rows are queries
    attentions_b: np.ndarray  # (L, H, T, T) float32
    divergence: np.ndarray  # (L, H) float64: mean JS divergence in bits over the real query rows

    def ranked_heads(self, count: int | None = None) -> list[tuple[int, int, float]]:
        """The heads as (layer, head, bits), 0-based, the most moved first (ties in layer-then-head order);
        the first `count` of them, or all."""
        flat = self.divergence.reshape(-1)
        order = np.argsort(-flat, kind="stable")[:count]
        num_heads = self.divergence.shape[1]
        return [(int(index // num_heads), int(index % num_heads), float(flat[index])) for index in order]

    @property
    def most_changed(self) -> tuple[int, int]:
        """(layer, head), 0-based, of the head that moved most."""
        layer, head, _ = self.ranked_heads(1)[0]
        return layer, head


def attention_change(model_a, tokenizer_a, model_b, tokenizer_b, text_a: str, text_b: str | None = None,
                     *, names: tuple[str, str] = ("A", "B")) -> AttentionChange:
    """Both models' attention on the pair (encoded once), and the per-head divergence; ValueError when the two
    cannot be compared (`check_comparable`) or the text cannot be encoded."""
    from bertcore.analysis.inspection import inspect_encoding, max_input_length

    check_comparable(model_a.config, tokenizer_a, model_b.config, tokenizer_b, names)
    max_length = min(max_input_length(model_a.config), max_input_length(model_b.config))  # RoBERTa: 512 of 514
    encoding = tokenizer_a.encode(text_a, text_b or None, max_length=max_length)
    attentions_a = inspect_encoding(model_a, tokenizer_a, encoding).attentions
    attentions_b = inspect_encoding(model_b, tokenizer_b, encoding).attentions
    divergence = head_divergence(attentions_a, attentions_b, np.asarray(encoding.attention_mask))
    return AttentionChange(encoding, attentions_a, attentions_b, divergence)
