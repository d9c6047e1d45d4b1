"""What the embeddings learned: position similarity, the two segments, token neighbours, hidden-state projections.

- Learned positions (Devlin et al. 2019 learn them instead of the Transformer's sinusoids): the cosine
  similarity of every pair of position embeddings, a positions × positions image. Trained BERTs show a bright
  band around the diagonal (neighbours look alike) and, in Wang & Chen 2020 ("What Do Position Embeddings
  Learn?"), a smooth low-dimensional curve.
- The segment embeddings A and B compared: cosine, norms, and the norm of their difference relative to a
  word embedding's typical norm (how loudly the model marks "this is sentence B").
- Nearest neighbours of a token's input embedding by cosine (as in Mikolov et al. 2013's analogies).
- A 2-D projection of per-layer hidden states of a sample of sentences (Ethayarajh 2019, "How Contextual are
  Contextualized Word Representations?", and Reif et al. 2019 project BERT's token vectors this way): PCA by
  SVD with a deterministic sign, and per-point metadata to colour and hover.

    sample = sample_hidden_states(model, tokenizer, sentences, max_points=2000)  # one batched pass
    projection = project_hidden_states(sample, layer=2)                           # (N, 2) points
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode, is_int_at_least
from bertcore.analysis.inspection import max_input_length
from bertcore.analysis.roles import is_punctuation
from bertcore.data.corpus import Corpus
from bertcore.models.families import base_model_name, first_position_id
from bertcore.tokenization.pieces import continues_word
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding

TOKEN_KINDS = ("special", "word", "subword", "punctuation")
MAX_SAMPLE_POINTS = 100_000  # a guard against a sample that would not fit in memory at base size


# What each table is called, and in words: every family names them as BERT does but ModernBERT's token table.
TABLE_NAMES = {"word_embeddings": ("word_embeddings", "tok_embeddings"),
               "position_embeddings": ("position_embeddings",), "token_type_embeddings": ("token_type_embeddings",)}
TABLE_WORDS = {"word_embeddings": "token embeddings",
               "position_embeddings": "learned position embeddings (it places tokens otherwise, e.g. by rotating "
                                      "queries and keys)",
               "token_type_embeddings": "segment (token type) embeddings: it tells sentence A from B by its "
                                        "separators alone"}


def _embedding_weight(model: nn.Module, name: str) -> torch.Tensor:
    """A table of the encoder's embeddings, by its BERT name, for a model of any family bertcore loads."""
    try:
        embeddings = getattr(model, base_model_name(model)).embeddings
    except TypeError as error:
        raise ValueError(str(error)) from None
    for attribute in TABLE_NAMES[name]:
        table = getattr(embeddings, attribute, None)
        if isinstance(table, nn.Embedding):
            return table.weight.detach().float().cpu()
    raise ValueError(f"{type(model).__name__} has no {TABLE_WORDS[name]}")


def _cosine_matrix(rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """(R, C) cosine similarity; a zero vector's similarity to anything is 0."""
    rows = rows / rows.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    columns = columns / columns.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return rows @ columns.T


# ---- positions and segments -------------------------------------------------------------------------------------


def position_similarity(model: nn.Module, num_positions: int | None = None) -> np.ndarray:
    """(P, P) float32 cosine similarity of the learned position embeddings 0..P-1 (P = num_positions, default
    all the model uses). Symmetric, 1 on the diagonal (Devlin et al. 2019's learned
    positions; Wang & Chen 2020 study the same image)."""
    # RoBERTa's positions start after its padding id: rows 0 and 1 of its table are never a token's position
    positions = _embedding_weight(model, "position_embeddings")[first_position_id(model):]  # (max_positions, D)
    if num_positions is None:
        num_positions = len(positions)
    if not is_int_at_least(num_positions, 1):
        raise ValueError(f"num_positions is {num_positions!r}; ask for at least 1 position")
    if num_positions > len(positions):
        raise ValueError(f"num_positions is {num_positions} but the model has {len(positions)} position "
                         f"embeddings; ask for at most {len(positions)}")
    with torch.no_grad():
        return _cosine_matrix(positions[:num_positions], positions[:num_positions]).numpy().astype(np.float32)


@dataclass(frozen=True)
class SegmentComparison:
    """Segment (token type) embeddings A = 0 and B = 1 side by side."""

    cosine: float  # cos(A, B)
    norm_a: float  # ‖A‖
    norm_b: float  # ‖B‖
    difference_norm: float  # ‖A − B‖: what changes in every token vector of sentence B
    typical_word_norm: float  # median ‖word embedding‖ over the vocabulary (padding row excluded)
    relative_difference: float  # difference_norm / typical_word_norm


def segment_comparison(model: nn.Module) -> SegmentComparison:
    """Compare the two segment embeddings (Devlin et al. 2019, figure 2): their cosine, their norms, and how
    large their difference is beside a typical word embedding (0.1 = a tenth of a word's size)."""
    segments = _embedding_weight(model, "token_type_embeddings")  # (types, D)
    if len(segments) < 2:
        raise ValueError(f"the model has {len(segments)} segment embedding(s); a comparison needs 2 "
                         "(type_vocab_size = 2, as in BERT)")
    words = _embedding_weight(model, "word_embeddings")  # (V, D)
    norms = words.norm(dim=-1)
    pad_token_id = getattr(model.config, "pad_token_id", None)
    keep = torch.ones(len(words), dtype=torch.bool)
    if pad_token_id is not None and 0 <= pad_token_id < len(words):
        keep[pad_token_id] = False
    typical = float(norms[keep].median())
    segment_a, segment_b = segments[0], segments[1]
    difference = float((segment_a - segment_b).norm())
    return SegmentComparison(
        cosine=float(_cosine_matrix(segment_a[None], segment_b[None])[0, 0]),
        norm_a=float(segment_a.norm()),
        norm_b=float(segment_b.norm()),
        difference_norm=difference,
        typical_word_norm=typical,
        relative_difference=difference / typical if typical > 0 else float("inf"),
    )


# ---- token neighbours -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbours:
    """The tokens whose input embeddings point most nearly the same way as one token's."""

    token: str
    token_id: int
    ids: np.ndarray  # (k,) int64, nearest first
    tokens: list[str]  # (k,)
    similarities: np.ndarray  # (k,) float32 cosine


def nearest_neighbours(
    model: nn.Module, tokenizer: BertTokenizer, token: str | int, *, k: int = 10, exclude_specials: bool = True
) -> Neighbours:
    """The k nearest tokens to `token` (a vocabulary token or its id) by cosine of the input (word) embeddings,
    itself excluded, and [PAD]/[UNK]/[CLS]/[SEP]/[MASK] too unless exclude_specials is False."""
    if not is_int_at_least(k, 1):
        raise ValueError(f"k is {k!r}; ask for at least 1 neighbour")
    words = _embedding_weight(model, "word_embeddings")  # (V, D)
    if isinstance(token, str):
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            pieces = tokenizer.tokenize(token)
            raise ValueError(f"{token!r} is not one token of this vocabulary (it becomes {' '.join(pieces)}); "
                             "pick one of those pieces")
    else:
        token_id = int(token)
    if not 0 <= token_id < min(len(words), tokenizer.vocab_size):
        raise ValueError(f"token id {token_id} is outside the vocabulary (0..{tokenizer.vocab_size - 1})")
    with torch.no_grad():
        similarities = _cosine_matrix(words[token_id][None], words[: tokenizer.vocab_size])[0]  # (V,)
    excluded = {token_id} | (set(tokenizer.special_token_ids) if exclude_specials else set())
    similarities[list(excluded)] = -float("inf")
    k = min(k, tokenizer.vocab_size - len(excluded))
    values, ids = similarities.topk(k)
    return Neighbours(token=tokenizer.id_to_token(token_id), token_id=token_id, ids=ids.numpy().astype(np.int64),
                      tokens=tokenizer.convert_ids_to_tokens(ids.tolist()),
                      similarities=values.numpy().astype(np.float32))


# ---- hidden-state projections -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HiddenStateSample:
    """Hidden states of every layer at N token positions of a few sentences, with what each position is."""

    hidden_states: np.ndarray  # (L + 1, N, D) float32: embeddings output, then each layer
    sentence_index: np.ndarray  # (N,) int64 into texts
    position: np.ndarray  # (N,) int64 within its sentence's encoding
    tokens: np.ndarray  # (N,) str
    segment: np.ndarray  # (N,) int64, 0 = sentence A, 1 = B
    kind: np.ndarray  # (N,) str, one of TOKEN_KINDS
    labels: np.ndarray | None  # (N,) the task label of each point's sentence, when labels were given
    texts: list[str]  # (S,) each input as text ("A [SEP] B" for a pair), for hover
    piece_style: str = "wordpiece"  # the tokenizer's word marks (bertcore.tokenization.pieces), to join pieces

    @property
    def num_points(self) -> int:
        return len(self.position)


@dataclass(frozen=True)
class Projection:
    """One layer's hidden states of a sample, projected to 2-D."""

    points: np.ndarray  # (N, 2) float32
    explained_variance_ratio: np.ndarray  # (2,) float64 share of the variance on each axis
    layer: int  # 0 = embeddings output, l = after layer l
    sample: HiddenStateSample  # the per-point metadata (sentence, position, token, segment, kind, label)

    def describe(self, index: int) -> str:
        """Hover text of point `index`: the token, what it is, and its sentence."""
        sample = self.sample
        segment = "AB"[int(sample.segment[index])] if sample.segment[index] in (0, 1) else str(sample.segment[index])
        label = f", label {sample.labels[index]}" if sample.labels is not None else ""
        sentence = int(sample.sentence_index[index])
        return (f"{sample.tokens[index]} ({sample.kind[index]}, sentence {segment}, position "
                f"{int(sample.position[index])}{label})\n{sample.texts[sentence]}")


def sample_sentences(corpus: Corpus, num_sentences: int, *, seed: int = 0) -> list[str]:
    """num_sentences sentences drawn without replacement from a corpus, seeded (all if it has fewer)."""
    if not is_int_at_least(num_sentences, 1):
        raise ValueError(f"num_sentences is {num_sentences!r}; ask for at least 1")
    sentences = [sentence for document in corpus.documents for sentence in document]
    return random.Random(f"sentences-{seed}").sample(sentences, min(num_sentences, len(sentences)))


def sample_hidden_states(
    model: nn.Module,
    tokenizer: BertTokenizer,
    sentences: Sequence[str | tuple[str, str]],
    *,
    labels: Sequence[Any] | None = None,
    max_points: int = 2000,
    include_special: bool = True,
    max_length: int = 128,
    batch_size: int = 64,
) -> HiddenStateSample:
    """Every layer's hidden states at the tokens of `sentences` (a text, or a pair (A, B)), in order, until
    max_points tokens are collected (the last sentence may be cut short). Sentences run through the encoder in
    batches padded to their longest (the fused attention path, no attention maps, eval mode, no gradients).
    include_special=False leaves out [CLS]/[SEP], whose vectors often dominate a projection."""
    if not is_int_at_least(max_points, 2) or max_points > MAX_SAMPLE_POINTS:
        raise ValueError(f"max_points is {max_points!r}; a projection needs 2 to {MAX_SAMPLE_POINTS} points")
    if not is_int_at_least(batch_size, 1):
        raise ValueError(f"batch_size is {batch_size!r}; it must be a positive integer (e.g. 64)")
    if labels is not None and len(labels) != len(sentences):
        raise ValueError(f"{len(labels)} labels for {len(sentences)} sentences; give one label per sentence")
    max_length = min(max_length, max_input_length(model.config))
    encodings: list[Encoding] = []
    chosen: list[list[int]] = []  # positions taken from each encoding
    texts: list[str] = []
    total = 0
    for index, sentence in enumerate(sentences):
        text_a, text_b = (sentence, None) if isinstance(sentence, str) else sentence
        try:
            encoding = tokenizer.encode(text_a, text_b, max_length=max_length)
        except ValueError as error:
            raise ValueError(f"sentence {index} cannot be encoded: {error}") from None
        positions = [p for p in range(len(encoding)) if include_special or not encoding.special_tokens_mask[p]]
        positions = positions[: max_points - total]
        encodings.append(encoding)
        chosen.append(positions)
        texts.append(text_a if text_b is None else f"{text_a} [SEP] {text_b}")
        total += len(positions)
        if total >= max_points:
            break
    if total < 2:
        raise ValueError(f"the sentences give {total} token position(s); a projection needs at least 2")
    hidden_states = _batched_hidden_states(model, tokenizer, encodings, chosen, batch_size)  # (L + 1, N, D)
    sentence_index = np.concatenate([np.full(len(p), i, np.int64) for i, p in enumerate(chosen)])
    position = np.concatenate([np.asarray(p, np.int64) for p in chosen])
    tokens = [encodings[s].tokens[p] for s, p in zip(sentence_index.tolist(), position.tolist(), strict=True)]
    kinds = [_token_kind(encodings[s], p) for s, p in zip(sentence_index.tolist(), position.tolist(), strict=True)]
    return HiddenStateSample(
        hidden_states=hidden_states,
        sentence_index=sentence_index,
        position=position,
        tokens=np.asarray(tokens, dtype=str),
        segment=np.asarray([_sentence_of(encodings[s], p) for s, p in zip(sentence_index, position, strict=True)],
                           np.int64),
        kind=np.asarray(kinds, dtype=str),
        labels=None if labels is None else np.asarray(list(labels)[: len(encodings)])[sentence_index],
        texts=texts,
        piece_style=encodings[0].piece_style,
    )


def project_hidden_states(sample: HiddenStateSample, layer: int) -> Projection:
    """One layer of a sample projected to 2-D by PCA (`pca_2d`); layer 0 = embeddings output."""
    num_rows = sample.hidden_states.shape[0]
    if not is_int_at_least(layer, 0) or layer >= num_rows:
        raise ValueError(f"layer is {layer!r}; this sample has layers 0 (embeddings) to {num_rows - 1}")
    points, ratio = pca_2d(sample.hidden_states[layer])
    return Projection(points=points, explained_variance_ratio=ratio, layer=layer, sample=sample)


def pca_2d(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal component analysis to 2-D by SVD: (N, D) -> points (N, 2) float32 and the explained variance
    ratio of the two axes (2,) float64. Deterministic: each axis is flipped so that its largest loading is
    positive (scikit-learn's `svd_flip` convention, on the loadings).

    With more points than dimensions the SVD runs on the (D, D) scatter matrix XᵀX of the centred data, whose
    singular vectors are the principal axes and singular values the squared ones of X: the same axes for a
    fraction of the work. The linear algebra is torch's, in float64, not numpy's: numpy's OpenBLAS keeps its
    own thread pool, which on this busy 2-core machine made a 256 × 256 SVD take 300 ms instead of 20, while
    torch follows the calling thread's `torch.set_num_threads` as the app's workers set it.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or len(vectors) < 2:
        raise ValueError(f"PCA needs an (N, D) array with N >= 2, got shape {vectors.shape}")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("the vectors hold NaN or infinite values; a projection of them means nothing")
    centred = torch.from_numpy(vectors)
    centred = centred - centred.mean(dim=0)
    if len(centred) > centred.shape[1]:
        _, variances, components = torch.linalg.svd(centred.T @ centred)  # (D,), (D, D); variances = s² of X
    else:
        _, singular_values, components = torch.linalg.svd(centred, full_matrices=False)  # components (N, D)
        variances = singular_values**2
    components = components[:2]
    largest = components.abs().argmax(dim=1)
    components = components * components[torch.arange(len(components)), largest].sign()[:, None]
    points = torch.zeros(len(vectors), 2, dtype=torch.float64)
    points[:, : len(components)] = centred @ components.T
    total = float((centred**2).sum())
    ratio = np.zeros(2)
    if total > 0:
        ratio[: len(components)] = np.clip(variances[:2].numpy() / total, 0.0, 1.0)
    return points.numpy().astype(np.float32), ratio


def _sentence_of(encoding: Encoding, position: int) -> int:
    """0 for sentence A, 1 for B: the sentence a token was cut from, whatever the family's segment ids say (RoBERTa
    gives every token of a pair segment 0); a special token by its segment id."""
    sentence = encoding.sequence_ids[position]
    return encoding.segment_ids[position] if sentence is None else sentence


def _token_kind(encoding: Encoding, position: int) -> str:
    token = encoding.tokens[position]
    if encoding.special_tokens_mask[position]:
        return "special"
    if is_punctuation(token):
        return "punctuation"
    after_text = position > 0 and not encoding.special_tokens_mask[position - 1]  # a text's first piece is a word
    return "subword" if after_text and continues_word(token, encoding.piece_style) else "word"


def _batched_hidden_states(
    model: nn.Module, tokenizer: BertTokenizer, encodings: list[Encoding], chosen: list[list[int]], batch_size: int
) -> np.ndarray:
    """(L + 1, N, D) float32 at the chosen positions, N = all chosen positions in order."""
    encoder = getattr(model, base_model_name(model))  # model.bert, model.roberta, model.distilbert…
    device = next(model.parameters()).device
    # Similar lengths share a batch, so little of each is padding; results go back in the sentences' order.
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i]))
    per_sentence: list[np.ndarray | None] = [None] * len(encodings)
    with eval_mode(model), torch.inference_mode():
        for start in range(0, len(order), batch_size):
            group = order[start : start + batch_size]
            longest = max(len(encodings[i]) for i in group)
            columns = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
            for i in group:
                padding = longest - len(encodings[i])
                columns["input_ids"].append(encodings[i].input_ids + [tokenizer.pad_token_id] * padding)
                columns["token_type_ids"].append(encodings[i].segment_ids + [0] * padding)
                columns["attention_mask"].append(encodings[i].attention_mask + [0] * padding)
            inputs = {name: torch.tensor(rows, device=device) for name, rows in columns.items()}  # (B, T)
            output = encoder(**inputs, output_hidden_states=True)
            stacked = torch.stack(output.hidden_states, dim=1).float().cpu().numpy()  # (B, L + 1, T, D)
            for row, i in enumerate(group):
                per_sentence[i] = stacked[row][:, chosen[i]]  # (L + 1, n_i, D)
    return np.ascontiguousarray(np.concatenate(per_sentence, axis=1))
