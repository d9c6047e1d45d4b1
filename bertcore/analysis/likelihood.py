"""How likely a masked LM finds a sentence, and whether it prefers the grammatical one of a minimal pair (BLiMP).

Pseudo-log-likelihood (Salazar, Liang, Nguyen & Kirchhoff 2020, "Masked Language Model Scoring"): mask each piece
of the sentence in turn and sum the log-probability the model gives the original piece there,

    PLL(S) = Σ_t log p(s_t | S with s_t masked),

over every piece of the sentence (the family's special tokens are context, never scored). One masked copy of the
sentence per piece; many copies go through the model in one forward, copies of one length together (no
padding). Only the
masked position's vector goes through the vocabulary projection (and, for BERT's encoder, through the last layer's
queries and feed-forward: exact, since no other position's output is read).

BLiMP (Warstadt et al. 2020, "The Benchmark of Linguistic Minimal Pairs"): 67 paradigms of pairs that differ in one
grammatical point; a pair is right when PLL(good) > PLL(bad) (a tie is wrong). `blimp` gives the accuracy over all
pairs, per paradigm (UID), per field (morphology, syntax, semantics, syntax-semantics) and per phenomenon
(linguistics_term). With the shipped cut, as with BLiMP itself, every paradigm has the same number of pairs, so
the accuracy over pairs is also the mean over paradigms that the paper reports.

Only a model with a trained masked-LM head has a PLL: ELECTRA's discriminator (ElectraForPreTraining; its
generator, ElectraForMaskedLM, has one), a bare encoder (MiniLM as shipped) and a fine-tuned classifier do not,
and say so (AnalysisError).
"""

from __future__ import annotations

import inspect
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bertcore.analysis.inspection import max_input_length
from bertcore.analysis.word_inputs import MAX_BATCH_TOKENS, measuring, model_device
from bertcore.errors import AnalysisError, LinguisticDataError, TokenizerError
from bertcore.files.resources import assets_dir
from bertcore.models.families import base_model_name

SHIPPED_BLIMP = "blimp-20-per-paradigm.jsonl"
MAX_LOGITS = 32 * 2**20  # vocabulary scores one batch of masked copies may hold (128 MB of float32)
BLIMP_FIELDS = ("sentence_good", "sentence_bad", "UID", "field", "linguistics_term")  # what each line must hold


@dataclass(frozen=True)
class MinimalPair:
    """One BLiMP pair: a grammatical sentence and an ungrammatical one that differ minimally."""

    good: str
    bad: str
    uid: str  # the paradigm ("adjunct_island")
    field: str  # "morphology", "syntax", "semantics" or "syntax_semantics"
    phenomenon: str  # linguistics_term ("island_effects")
    pair_id: str | None = None


@dataclass(frozen=True)
class BlimpResult:
    """Accuracy on minimal pairs: a pair is right when its good sentence has the higher PLL."""

    accuracy: float  # over all pairs
    by_paradigm: dict[str, float]  # UID -> accuracy, paradigms in the order first met
    by_field: dict[str, float]
    by_phenomenon: dict[str, float]
    pairs_per_paradigm: dict[str, int]
    good_pll: np.ndarray  # (N,) float64
    bad_pll: np.ndarray  # (N,) float64
    correct: np.ndarray  # (N,) bool
    pseudo_perplexity: float | None = None  # exp(−Σ PLL / Σ pieces) over both sentences of every pair

    @property
    def num_pairs(self) -> int:
        return len(self.correct)


def pseudo_log_likelihood(model: nn.Module, tokenizer, sentences: Sequence[str], *,
                          max_tokens: int = MAX_BATCH_TOKENS) -> np.ndarray:
    """(N,) float64: each sentence's pseudo-log-likelihood in nats, the sum over its pieces of log p(piece | the
    sentence with that piece masked). Batched (max_tokens positions a forward), in eval mode without gradients.
    AnalysisError for a model without a trained masked-LM head, or a sentence longer than it takes."""
    return scored_sentences(model, tokenizer, sentences, max_tokens=max_tokens)[0]


def scored_sentences(model: nn.Module, tokenizer, sentences: Sequence[str], *,
                     max_tokens: int = MAX_BATCH_TOKENS) -> tuple[np.ndarray, np.ndarray]:
    """(PLL (N,) float64, pieces scored (N,) int64) of each sentence: `pseudo_log_likelihood` with the counts that
    a pseudo-perplexity, exp(−Σ PLL / Σ pieces), needs."""
    check_has_pll(model)
    if isinstance(sentences, str) or not sentences:
        raise AnalysisError("pass a list of sentences (at least one) to score")
    limit = max_input_length(model.config)
    encoded = []
    for index, sentence in enumerate(sentences):
        try:
            encoding = tokenizer.encode(sentence, max_length=limit)
        except TokenizerError as error:
            raise AnalysisError(f"sentence {index} cannot be scored: {error}") from None
        if encoding.truncation is not None:
            raise AnalysisError(f"sentence {index} has {len(encoding) + encoding.truncation.tokens_removed_a} "
                                f"positions; the model takes {limit}, and a cut sentence is another sentence: "
                                "shorten it")
        encoded.append((encoding.input_ids, encoding.segment_ids, encoding.special_tokens_mask))
    totals = np.zeros(len(sentences), np.float64)
    counts = np.array([len(special) - sum(special) for _, _, special in encoded], np.int64)
    device = model_device(model)
    encoder = getattr(model, base_model_name(model))
    reads_positions = "query_positions" in inspect.signature(encoder.forward).parameters
    with measuring(model):
        for copies in _masked_copies(encoded, tokenizer, max_tokens):
            log_probabilities = _scored_log_probabilities(model, encoder, copies, device, reads_positions)
            np.add.at(totals, copies.sentence, log_probabilities)
    return totals, counts


def check_has_pll(model: nn.Module) -> None:
    """AnalysisError unless the model carries a trained masked-LM head, saying why it has none."""
    if getattr(model, "has_mlm_head", False) and hasattr(model, "mlm_logits"):
        return
    name = type(model).__name__
    if getattr(model, "has_replaced_token_head", False) or name == "ElectraForPreTraining":
        raise AnalysisError(f"{name} is ELECTRA's discriminator: it says whether each token was replaced and has no "
                            "masked-LM head, so no pseudo-log-likelihood (and no BLiMP score); open its generator "
                            "(an ElectraForMaskedLM, the run's generator/ folder) to score sentences")
    if "mlm" in getattr(model, "PRETRAINING_HEADS", ()):
        raise AnalysisError(f"this {name} was loaded without a trained masked-LM head (its checkpoint holds the bare "
                            "encoder), so it has no pseudo-log-likelihood; open a checkpoint with its MLM head")
    raise AnalysisError(f"{name} has no masked-LM head (a task model or a bare encoder), so it has no "
                        "pseudo-log-likelihood; open a masked LM or a pretraining checkpoint to score sentences")


def blimp(model: nn.Module, tokenizer, pairs: Sequence[MinimalPair], *,
          max_tokens: int = MAX_BATCH_TOKENS) -> BlimpResult:
    """Accuracy of `model` on minimal pairs (`read_blimp`, `shipped_blimp`): per pair PLL(good) > PLL(bad)."""
    if not pairs:
        raise AnalysisError("no minimal pairs were given; pass BLiMP's pairs (bertcore.analysis.likelihood."
                            "shipped_blimp or read_blimp)")
    scores, pieces = scored_sentences(model, tokenizer, [text for pair in pairs for text in (pair.good, pair.bad)],
                                      max_tokens=max_tokens)
    pseudo_perplexity = float(np.exp(-scores.sum() / pieces.sum()))
    return blimp_result(pairs, scores[0::2], scores[1::2], pseudo_perplexity)


def blimp_result(pairs: Sequence[MinimalPair], good_pll: np.ndarray, bad_pll: np.ndarray,
                 pseudo_perplexity: float | None = None) -> BlimpResult:
    """The accuracies of pairs whose two PLLs are known."""
    correct = np.asarray(good_pll) > np.asarray(bad_pll)

    def accuracy_by(key) -> tuple[dict[str, float], dict[str, int]]:
        groups: dict[str, list[bool]] = defaultdict(list)
        for pair, right in zip(pairs, correct, strict=True):
            groups[key(pair)].append(bool(right))
        return ({name: float(np.mean(values)) for name, values in groups.items()},
                {name: len(values) for name, values in groups.items()})

    by_paradigm, counts = accuracy_by(lambda pair: pair.uid)
    return BlimpResult(accuracy=float(correct.mean()), by_paradigm=by_paradigm,
                       by_field=accuracy_by(lambda pair: pair.field)[0],
                       by_phenomenon=accuracy_by(lambda pair: pair.phenomenon)[0], pairs_per_paradigm=counts,
                       good_pll=np.asarray(good_pll, np.float64), bad_pll=np.asarray(bad_pll, np.float64),
                       correct=correct, pseudo_perplexity=pseudo_perplexity)


# ---- BLiMP's files ------------------------------------------------------------------------------------------


def read_blimp(path: str | Path, *, per_paradigm: int | None = None) -> list[MinimalPair]:
    """BLiMP's pairs from a .jsonl file (one of BLiMP's data/*.jsonl, or several concatenated): one JSON object a
    line with sentence_good, sentence_bad, UID, field and linguistics_term. per_paradigm: keep only the first n
    pairs of each paradigm. LinguisticDataError naming the file and the line for anything else."""
    path = Path(path)
    if per_paradigm is not None and (isinstance(per_paradigm, bool) or not isinstance(per_paradigm, int)
                                     or per_paradigm < 1):
        raise ValueError(f"per_paradigm is {per_paradigm!r}; ask for at least 1 pair, or None for all")
    pairs: list[MinimalPair] = []
    kept: dict[str, int] = defaultdict(int)
    try:
        lines = list(_lines(path))
    except FileNotFoundError:
        raise LinguisticDataError(f"{path} does not exist; give the path of a BLiMP .jsonl file", path) from None
    except IsADirectoryError:
        raise LinguisticDataError(f"{path} is a folder; give the path of a BLiMP .jsonl file in it", path) from None
    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise _fault(path, number, f"not a JSON object ({error.msg} at character {error.colno}); a BLiMP file "
                                       "has one pair a line") from None
        if not isinstance(record, dict):
            raise _fault(path, number, f"a JSON {type(record).__name__}, not an object with {', '.join(BLIMP_FIELDS)}")
        missing = [name for name in BLIMP_FIELDS if not isinstance(record.get(name), str) or not record[name].strip()]
        if missing:
            raise _fault(path, number, f"no text for {', '.join(missing)}; each BLiMP line names "
                                       f"{', '.join(BLIMP_FIELDS)}")
        uid = record["UID"]
        if per_paradigm is not None and kept[uid] >= per_paradigm:
            continue
        kept[uid] += 1
        pair_id = record.get("pairID")
        pairs.append(MinimalPair(good=record["sentence_good"], bad=record["sentence_bad"], uid=uid,
                                 field=record["field"], phenomenon=record["linguistics_term"],
                                 pair_id=None if pair_id is None else str(pair_id)))
    if not pairs:
        raise LinguisticDataError(f"{path} holds no pair; a BLiMP file has one JSON object a line with "
                                  f"{', '.join(BLIMP_FIELDS)}", path)
    return pairs


def shipped_blimp(per_paradigm: int | None = None) -> list[MinimalPair]:
    """The cut of BLiMP shipped in assets/data/blimp/ (its first 20 pairs of each of the 67 paradigms; CC BY 4.0):
    all of them, or the first `per_paradigm` of each."""
    return read_blimp(shipped_blimp_path(), per_paradigm=per_paradigm)


def shipped_blimp_path() -> Path:
    return assets_dir() / "data" / "blimp" / SHIPPED_BLIMP


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _fault(path, number, f"not UTF-8 text (byte {error.start + 1} of the line)") from None


def _fault(path: Path, line: int, what: str) -> LinguisticDataError:
    return LinguisticDataError(f"{path} line {line}: {what}", path, line)


# ---- the masked copies ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Copies:
    """Masked copies of sentences of one length: one per scored piece."""

    sentence: np.ndarray  # (N,) which sentence each copy is of
    input_ids: torch.Tensor  # (N, T) with the piece masked
    segment_ids: torch.Tensor  # (N, T)
    position: torch.Tensor  # (N,) the masked position
    original: torch.Tensor  # (N,) the piece that stood there


def _masked_copies(encoded: Sequence[tuple[list[int], list[int], list[int]]], tokenizer,
                   max_tokens: int) -> Iterator[_Copies]:
    """Every (sentence, scored position) as a masked copy, in batches of sentences of one length (so no position
    is padding and the model takes its unmasked path), longest first, at most max_tokens positions a batch."""
    by_length: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for index, (ids, _, special) in enumerate(encoded):
        by_length[len(ids)].extend((index, position) for position, flag in enumerate(special) if not flag)
    if not any(by_length.values()):
        raise AnalysisError("the sentences hold no piece to score (only special tokens)")
    for length in sorted(by_length, reverse=True):
        jobs = by_length[length]
        # a copy's scores over the vocabulary are V floats: XLM-R's 250,002 for 800 short copies would be 800 MB
        size = max(1, min(max_tokens // length, MAX_LOGITS // max(1, tokenizer.vocab_size)))
        for start in range(0, len(jobs), size):
            yield _collate(jobs[start : start + size], encoded, tokenizer, length)


def _collate(jobs: Sequence[tuple[int, int]], encoded, tokenizer, length: int) -> _Copies:
    rows = np.arange(len(jobs))
    sentence = np.array([index for index, _ in jobs], np.int64)
    positions = np.array([position for _, position in jobs], np.int64)
    input_ids = np.array([encoded[index][0] for index in sentence], np.int64).reshape(len(jobs), length)
    segment_ids = np.array([encoded[index][1] for index in sentence], np.int64).reshape(len(jobs), length)
    original = input_ids[rows, positions].copy()
    input_ids[rows, positions] = tokenizer.mask_token_id
    return _Copies(sentence=sentence, input_ids=torch.from_numpy(input_ids), segment_ids=torch.from_numpy(segment_ids),
                   position=torch.from_numpy(positions), original=torch.from_numpy(original))


def _scored_log_probabilities(model: nn.Module, encoder: nn.Module, copies: _Copies, device,
                              reads_positions: bool) -> np.ndarray:
    """(N,) log p(original piece) at each copy's masked position, in float32 and then float64."""
    inputs = dict(input_ids=copies.input_ids.to(device), token_type_ids=copies.segment_ids.to(device))
    position = copies.position.to(device)
    if reads_positions:
        # [CLS] first (the encoder's pooler reads it), then the masked position: the last layer runs there alone.
        query_positions = torch.stack([torch.zeros_like(position), position], dim=1)  # (N, 2)
        vectors = encoder(**inputs, query_positions=query_positions).last_hidden_state[:, 1]  # (N, D)
    else:
        hidden = encoder(**inputs).last_hidden_state  # (N, T, D)
        vectors = hidden[torch.arange(len(position), device=device), position]  # (N, D)
    log_probabilities = model.mlm_logits(vectors).float().log_softmax(dim=-1)  # (N, V)
    picked = log_probabilities.gather(1, copies.original.to(device)[:, None])[:, 0]
    return picked.double().cpu().numpy()
