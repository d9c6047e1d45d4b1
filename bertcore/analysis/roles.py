"""What each head does: where its attention goes, by kind of key, and how spread out it is (Clark et al. 2019).

Clark, Khandelwal, Levy & Manning 2019, "What Does BERT Look At? An Analysis of BERT's Attention", sections
3.1–3.3: heads that attend to the previous or the next token, heads that park their attention on [SEP] (a
no-op when a head's function does not apply) or [CLS], heads on punctuation, and broad heads with high row
entropy. Per head this module measures the share of attention on each kind of key and the mean row entropy,
averaged over real query rows (padding excluded), on one input or on many (weighted by query rows).

Every key position gets exactly one category, by priority
    [CLS] > [SEP] > self > previous > next > punctuation > other
(the [SEP] right before a token counts as [SEP], not as "previous"), so a head's shares sum to 1 over its real
keys (attention on padding is 0) and never exceed 1.

The role label: the structural category (all but "other") with the largest share, if that share is at least
`threshold` (default 0.5: a majority of the head's attention, the one cut at which no other category can be as
large, so the label never depends on the priority order or on ties). Otherwise the head has no positional or
special-token role, and its row entropy tells the two remaining kinds apart, as Clark et al. do (section 3.3):
"broad" if its mean normalised entropy (row entropy / log of the row's real keys, 0 = one key, 1 = uniform) is
at least `broad_entropy` (default 0.5: it spreads over at least √n keys' worth, e^H ≥ √n), else "content" (it
picks a few other words by what they are, like the syntactic heads of their section 4).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode, is_int_at_least
from bertcore.analysis.inspection import Inspection
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.data.batches import PretrainingData, collate_pairs, step_rng
from bertcore.tokenization.wordpiece import BertTokenizer

CATEGORIES = ("cls", "sep", "self", "previous", "next", "punctuation", "other")  # in priority order
ROLE_LABELS = {"cls": "[CLS]", "sep": "[SEP]", "self": "self", "previous": "previous token", "next": "next token",
               "punctuation": "punctuation"}  # "other" names no role: such heads are "broad" or "content"
BROAD, CONTENT = "broad", "content"
DEFAULT_THRESHOLD = 0.5
DEFAULT_BROAD_ENTROPY = 0.5
_PADDING = -1  # category of a padding key: no category, no share


def is_punctuation(token: str) -> bool:
    """A token made only of punctuation, by BERT's definition (every non-alphanumeric ASCII character, e.g. '$'
    and '`', plus Unicode category P*); the families' word marks (WordPiece's '##', byte-level BPE's 'Ġ',
    SentencePiece's '▁') are ignored."""
    text = token.removeprefix("##").removeprefix("\u0120").removeprefix("\u2581")
    return bool(text) and all(_is_punctuation_char(char) for char in text)


def _is_punctuation_char(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


@dataclass(frozen=True)
class HeadRoles:
    """Per head: attention shares by kind of key, mean row entropy, and a role label (Clark et al. 2019)."""

    shares: np.ndarray  # (L, H, C) float64 mean share of a query row's attention per category; sums to ≤ 1
    entropy: np.ndarray  # (L, H) float64 mean row entropy in nats (a uniform row over n keys: log n)
    normalized_entropy: np.ndarray  # (L, H) float64 mean of row entropy / log(real keys of the row), in [0, 1]
    labels: np.ndarray  # (L, H) str: a ROLE_LABELS value, "broad" or "content"
    num_rows: int  # real query rows averaged over
    num_inputs: int  # inputs (sentences or pairs) they came from
    threshold: float  # the share a structural category needs to name the role
    broad_entropy: float  # the normalised entropy from which a head without such a role is "broad"
    categories: tuple[str, ...] = CATEGORIES  # (C,) the last axis of shares

    def share(self, category: str) -> np.ndarray:
        """(L, H) share of attention on one category ("cls", "sep", "self", "previous", ...)."""
        if category not in self.categories:
            raise ValueError(f"no category {category!r}; use one of {', '.join(self.categories)}")
        return self.shares[..., self.categories.index(category)]

    @property
    def dominant(self) -> np.ndarray:
        """(L, H) str the category with the largest share, whatever its size (ties: the higher priority)."""
        return np.asarray(self.categories)[self.shares.argmax(axis=-1)]


def head_roles(
    attentions: np.ndarray,
    tokens: Sequence[str],
    attention_mask: Sequence[int] | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    broad_entropy: float = DEFAULT_BROAD_ENTROPY,
    special_tokens_mask: Sequence[int] | None = None,
) -> HeadRoles:
    """Roles of every head on one input (Clark et al. 2019): attentions (L, H, T, T) with rows = queries,
    tokens (T,) the input's own tokens (the original ones where a masking replaced some: the category is about
    what stands at a position), attention_mask (T,) 1 = real, 0 = padding (default: all real).

    special_tokens_mask (T,) 1 where the tokenizer's layout added a token: the opening one takes the [CLS] role
    and the others the [SEP] role, whatever the family calls them (RoBERTa's <s> and </s>); without it the
    tokens named [CLS] and [SEP] do."""
    attentions = np.asarray(attentions)
    if attentions.ndim != 4 or attentions.shape[2] != attentions.shape[3]:
        raise ValueError(f"attentions must be (layers, heads, tokens, tokens), got shape {attentions.shape}")
    seq_len = attentions.shape[-1]
    if len(tokens) != seq_len:
        raise ValueError(f"{len(tokens)} tokens for attentions over {seq_len} positions; pass the input's tokens")
    real = np.ones(seq_len, bool) if attention_mask is None else np.asarray(attention_mask) == 1
    if real.shape != (seq_len,):
        raise ValueError(f"attention_mask has {real.size} entries for {seq_len} positions; one per position")
    if not real.any():
        raise ValueError("the attention_mask marks no position as real; there is no query row to average")
    thresholds = _checked_thresholds(threshold, broad_entropy)
    if special_tokens_mask is None:
        is_cls = np.array([token == "[CLS]" for token in tokens])
        is_sep = np.array([token == "[SEP]" for token in tokens])
    else:
        added = (np.asarray(special_tokens_mask) == 1) & real
        if added.shape != (seq_len,):
            raise ValueError(f"special_tokens_mask has {added.size} entries for {seq_len} positions; one per position")
        opening = np.array([token == tokens[0] for token in tokens]) if added[0] else np.zeros(seq_len, bool)
        is_cls, is_sep = added & opening, added & ~opening
    kinds = _KeyKinds(
        is_cls=is_cls[None],
        is_sep=is_sep[None],
        is_punctuation=np.array([is_punctuation(token) for token in tokens])[None],
        is_real=real[None],
    )
    sums = _RoleSums.zeros(*attentions.shape[:2])
    sums.add(torch.from_numpy(np.ascontiguousarray(attentions)).unsqueeze(1).unbind(0), kinds)  # L of (1, H, T, T)
    return sums.roles(*thresholds)


def inspection_head_roles(
    inspection: Inspection, *, threshold: float = DEFAULT_THRESHOLD, broad_entropy: float = DEFAULT_BROAD_ENTROPY
) -> HeadRoles:
    """`head_roles` of the input in an `Inspection` (its attentions, under its head mask; the encoding's tokens)."""
    encoding = inspection.encoding
    return head_roles(inspection.attentions, encoding.tokens, encoding.attention_mask, threshold=threshold,
                      broad_entropy=broad_entropy, special_tokens_mask=encoding.special_tokens_mask)


def corpus_head_roles(
    model: nn.Module,
    tokenizer: BertTokenizer,
    batches: Iterable[Mapping[str, Any]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    broad_entropy: float = DEFAULT_BROAD_ENTROPY,
) -> HeadRoles:
    """Roles averaged over many inputs, weighted by query rows (see `iter_corpus_head_roles`)."""
    progress = run_to_end(iter_corpus_head_roles(model, tokenizer, batches, threshold=threshold,
                                                 broad_entropy=broad_entropy))
    if progress is None:
        raise ValueError("no batches were given; pass at least one batch of inputs (see role_sample)")
    return progress.result


def iter_corpus_head_roles(
    model: nn.Module,
    tokenizer: BertTokenizer,
    batches: Iterable[Mapping[str, Any]],
    *,
    total: int | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    broad_entropy: float = DEFAULT_BROAD_ENTROPY,
) -> Iterator[Progress[HeadRoles]]:
    """Head roles over a sample, one batch at a time: yields Progress(done batches, total, roles so far).

    batches: dicts with input_ids (B, T) and optionally token_type_ids and attention_mask (other keys are
    ignored), e.g. `role_sample(data, 256)`; unmasked text is best, since a [MASK] is no punctuation. The model
    (bertcore's or transformers'; its encoder is `model.bert` when it has one) runs in eval mode without
    gradients, returning attention probabilities; its mode is restored between yields. Stop iterating to cancel.
    """
    thresholds = _checked_thresholds(threshold, broad_entropy)
    encoder = getattr(model, "bert", model)
    config = model.config
    sums = _RoleSums.zeros(config.num_hidden_layers, config.num_attention_heads)
    punctuation_ids = np.array([is_punctuation(token) for token in tokenizer.vocab])  # (V,)
    if total is None and isinstance(batches, Sized):
        total = len(batches)
    device = next(model.parameters()).device
    for index, batch in enumerate(batches):
        if not isinstance(batch, Mapping) or "input_ids" not in batch:
            raise ValueError(f"batch {index} is not a dict with input_ids; pass dicts of forward arguments")
        input_ids = torch.as_tensor(batch["input_ids"])
        attention_mask = torch.as_tensor(batch.get("attention_mask", torch.ones_like(input_ids)))
        token_type_ids = torch.as_tensor(batch.get("token_type_ids", torch.zeros_like(input_ids)))
        ids = input_ids.cpu().numpy()
        kinds = _KeyKinds(is_cls=ids == tokenizer.cls_token_id, is_sep=ids == tokenizer.sep_token_id,
                          is_punctuation=punctuation_ids[np.clip(ids, 0, len(punctuation_ids) - 1)],
                          is_real=attention_mask.cpu().numpy() == 1)
        with eval_mode(model), torch.inference_mode():
            output = encoder(input_ids=input_ids.to(device), token_type_ids=token_type_ids.to(device),
                             attention_mask=attention_mask.to(device), output_attentions=True)
            sums.add(output.attentions, kinds)
        yield Progress(done=index + 1, total=total, result=sums.roles(*thresholds))


def role_sample(data: PretrainingData, num_pairs: int, *, batch_size: int = 32, seed: int = 0) -> list[dict]:
    """num_pairs held-out sentence pairs (training pairs if the data has no held-out split), unmasked, as
    batches of input_ids, token_type_ids, attention_mask (B, T), padded to each batch's longest.

    Seeded and fixed like `pretraining_sample`, but without masking: roles are about the text as written.
    """
    if not is_int_at_least(num_pairs, 1):
        raise ValueError(f"num_pairs is {num_pairs!r}; ask for at least 1 pair (the app uses 256)")
    if not is_int_at_least(batch_size, 1):
        raise ValueError(f"batch_size is {batch_size!r}; it must be a positive integer (e.g. 32)")
    sampler = data.heldout if data.heldout is not None else data.train
    tokenizer = data.tokenizer
    batches = []
    for index, start in enumerate(range(0, num_pairs, batch_size)):
        examples = sampler.sample_batch(step_rng(seed, 0, index, "roles"), min(batch_size, num_pairs - start))
        columns = collate_pairs(examples, cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                                pad_token_id=tokenizer.pad_token_id)
        batches.append({name: columns[name] for name in ("input_ids", "token_type_ids", "attention_mask")})
    return batches


# ---- internals -----------------------------------------------------------------------------------------------


def _checked_thresholds(threshold: float, broad_entropy: float) -> tuple[float, float]:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold is {threshold}; it must be in (0, 1] (0.5 = a majority of the attention)")
    if not 0.0 <= broad_entropy <= 1.0:
        raise ValueError(f"broad_entropy is {broad_entropy}; it must be in [0, 1] (a share of the uniform entropy)")
    return float(threshold), float(broad_entropy)


@dataclass(frozen=True)
class _KeyKinds:
    """(B, T) bool arrays saying what stands at each position."""

    is_cls: np.ndarray
    is_sep: np.ndarray
    is_punctuation: np.ndarray
    is_real: np.ndarray

    def categories(self) -> np.ndarray:
        """(B, T, T) int8: the category index of key k for query q, lowest priority written first; -1 = padding."""
        batch_size, seq_len = self.is_real.shape
        query, key = np.arange(seq_len)[:, None], np.arange(seq_len)[None, :]
        categories = np.full((batch_size, seq_len, seq_len), CATEGORIES.index("other"), np.int8)
        for name, where in (
            ("punctuation", self.is_punctuation[:, None, :]),
            ("next", (key == query + 1)[None]),
            ("previous", (key == query - 1)[None]),
            ("self", (key == query)[None]),
            ("sep", self.is_sep[:, None, :]),
            ("cls", self.is_cls[:, None, :]),
        ):
            categories = np.where(where, np.int8(CATEGORIES.index(name)), categories)
        return np.where(self.is_real[:, None, :], categories, np.int8(_PADDING))


@dataclass
class _RoleSums:
    """Running sums over real query rows: shares (L, H, C), entropies and normalised entropies (L, H), rows."""

    shares: np.ndarray
    entropy: np.ndarray
    normalized_entropy: np.ndarray
    num_rows: int = 0
    num_inputs: int = 0

    @classmethod
    def zeros(cls, num_layers: int, num_heads: int) -> _RoleSums:
        grid = (num_layers, num_heads)
        return cls(np.zeros((*grid, len(CATEGORIES))), np.zeros(grid), np.zeros(grid))

    def add(self, attentions: Sequence[torch.Tensor], kinds: _KeyKinds) -> None:
        """attentions: one (B, H, T, T) tensor per layer, rows = queries."""
        if len(attentions) != self.shares.shape[0]:
            raise ValueError(f"attentions of {len(attentions)} layers for a model of {self.shares.shape[0]}")
        device = attentions[0].device
        categories = torch.from_numpy(kinds.categories()).to(device).long()  # (B, T, T)
        one_hot = torch.zeros(*categories.shape, len(CATEGORIES), device=device)
        one_hot.scatter_(-1, categories.clamp(min=0).unsqueeze(-1), (categories >= 0).unsqueeze(-1).float())
        batch_size, seq_len = categories.shape[:2]
        one_hot = one_hot.view(batch_size, seq_len * seq_len, len(CATEGORIES))  # (B, T·T, C)
        query_real = torch.from_numpy(kinds.is_real).to(device)  # (B, T)
        # Uniform entropy of a row, log(real keys); every input has >= 2 ([CLS] and [SEP]), a bare one 1.
        max_entropy = query_real.sum(dim=1).clamp(min=2).double().log()  # (B,)
        for layer, probabilities in enumerate(attentions):
            probabilities = probabilities.float() * query_real[:, None, :, None]  # (B, H, T, T), padded rows 0
            num_heads = probabilities.shape[1]
            shares = torch.bmm(probabilities.reshape(batch_size, num_heads, -1), one_hot)  # (B, H, C)
            entropy = -torch.xlogy(probabilities, probabilities).sum(dim=(-2, -1)).double()  # (B, H), padding: 0
            self.shares[layer] += shares.sum(0).double().cpu().numpy()
            self.entropy[layer] += entropy.sum(0).cpu().numpy()
            self.normalized_entropy[layer] += (entropy / max_entropy[:, None]).sum(0).cpu().numpy()
        self.num_rows += int(query_real.sum())
        self.num_inputs += batch_size

    def roles(self, threshold: float, broad_entropy: float) -> HeadRoles:
        rows = max(self.num_rows, 1)
        shares, entropy, normalized_entropy = self.shares / rows, self.entropy / rows, self.normalized_entropy / rows
        structural = shares[..., : CATEGORIES.index("other")]  # (L, H, C - 1)
        names = np.asarray([ROLE_LABELS[category] for category in CATEGORIES[:-1]])[structural.argmax(axis=-1)]
        unstructured = np.where(normalized_entropy >= broad_entropy, BROAD, CONTENT)
        labels = np.where(structural.max(axis=-1) >= threshold, names, unstructured)
        return HeadRoles(shares=shares, entropy=entropy, normalized_entropy=normalized_entropy, labels=labels,
                         num_rows=self.num_rows, num_inputs=self.num_inputs, threshold=threshold,
                         broad_entropy=broad_entropy)
