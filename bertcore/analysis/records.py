"""One record of what a model has learned, for a training run to write every N steps (metrics.jsonl, kind
"analysis"), and for a finished run's checkpoints analysed afterwards: the same function on the same weights gives
the same record.

    treebank, test_treebank, pairs = shipped_analysis_data()
    record = bertcore.analysis_record(model, tokenizer, treebank, pairs, test_treebank=test_treebank)
    record["uas"]          # (layers × heads) nested lists: each head's UAS, the better direction
    record["probe"]        # UPOS probe accuracy, control accuracy and selectivity per layer (embeddings first)
    record["blimp"]        # BLiMP accuracy and pseudo-perplexity, or None (record["blimp_unavailable"] says why)
    record["health"]       # anisotropy, effective rank, attention entropy, outlier dimensions

What it runs, all on the model's current weights in eval mode without gradients:
- one forward over the first `sentences` sentences of the treebank, returning attentions and hidden states, which
  serve three measurements: the syntax scores (bertcore.analysis.syntax), the probes' training words, and the
  health measures (bertcore.analysis.health, over the real tokens of those sentences: the words joined by spaces);
- one forward over the first `test_sentences` of the test treebank (by default the treebank's next sentences), for
  the probes' test words; the linear probe with its control task (bertcore.analysis.probes), and the structural
  probe when `structural_steps` > 0;
- the pseudo-log-likelihoods of BLiMP's pairs, the first `pairs_per_paradigm` of each paradigm (when the model
  has a masked-LM head), on every `blimp_every`-th record of a run: BLiMP costs several times the rest (67 pairs
  are ~1,800 masked copies, ~34,000 positions through the model with the shipped vocabulary, against ~3,100 for
  48 + 48 treebank sentences), so a run spreads it out. A record given no `index` (one analysed on its own)
  always has it.

The defaults (RecordSettings) are sized for a record every ~100 steps of the Train tab's default run (batch 16 ×
64 positions) to cost under 5% of its time: 100 such steps push ~300,000 positions through the model, forward and
backward; a record pushes ~3,100 (48 treebank sentences with attentions, ~1,100 words scored; 48 test sentences)
and works on them (the syntax, health and probe sums, ~half the forward's time again), plus, on every 10th record,
BLiMP's ~34,000. Interleaved with training on 2 quiet cores, 64 + 64 sentences cost a mini model 5.0% and a tiny
one 4.8%; BLiMP on every 5th record, 6% (benchmarks/analysis_speed.py measures it). `seconds` in the record says
what each part cost.

The record (plain JSON: ints, floats, strings, lists, dicts and None; L layers, H heads; the training loop adds
"step" and "kind"):

    index, sentences, test_sentences, settings       the record's number in its run; the data used; RecordSettings
    skipped_sentences, words                          treebank sentences left out (too long); words scored
    uas (L × H), uas_by_direction (2 × L × H)         each head's UAS: the better direction; both
    best_head {layer, head, direction, uas}           the best head over all scored words
    offset_baselines {"-3" … "+3"}                    Clark's baselines ("+1": the next word is the head)
    relations {deprel: {layer, head, direction, accuracy, words, offset, offset_accuracy}}
                                                      the best head of each relation with relation_min_count words
    health {tokens, anisotropy (L + 1), effective_rank (L + 1), attention_entropy (L × H),
            outlier_dimensions (L + 1 lists), outlier_std}
    probe {task, train_words, test_words, accuracy, control_accuracy, selectivity (L + 1 each),
           majority_baseline, best_layer}
    structural {uuas, spearman (L + 1 each), rank, steps}              only with structural_steps > 0
    blimp None or {pairs, accuracy, fields {…}, phenomena {…}, pseudo_perplexity}
    blimp_unavailable                                 why not, when this record would score BLiMP but cannot
    seconds {treebank, test, probe, structural, blimp, total}          what each part took (the parts it ran)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from torch import nn

from bertcore.analysis.health import HealthSums, RepresentationHealth
from bertcore.analysis.likelihood import MinimalPair, blimp, check_has_pll, shipped_blimp
from bertcore.analysis.probes import (
    TASKS,
    WordRepresentations,
    add_word_vectors,
    fit_layer_probes,
    fit_structural_probes,
    word_representations,
)
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.analysis.syntax import OFFSET_NAMES, OFFSETS, SyntacticAttention, SyntaxScorer
from bertcore.analysis.treebank import Sentence, shipped_treebank
from bertcore.analysis.word_inputs import encoded_batches, layout_words, measuring
from bertcore.errors import AnalysisError

RECORD_KIND = "analysis"  # the `kind` a training run gives these records in metrics.jsonl


@dataclass(frozen=True)
class RecordSettings:
    """What one analysis record measures, and on how much data. Fixed for a run, so that its records compare."""

    # The first n sentences of the treebank: the syntax scores, the probes' training words and the health measures.
    sentences: int = 48
    # The first n sentences of the test treebank (default: the treebank's sentences after the first `sentences`).
    test_sentences: int = 48
    probe_task: str = "upos"  # what the linear probe predicts: "upos", "xpos" or "deprel"
    pairs_per_paradigm: int = 1  # BLiMP pairs of each paradigm scored (67 paradigms); 0 = no BLiMP
    blimp_every: int = 10  # BLiMP on the run's records 0, 10, 20, … (its cost spread over several records)
    structural_steps: int = 0  # Adam steps of the structural probe per layer; 0 = no structural probe
    relation_min_count: int = 10  # relations with fewer scored words get no best head in the record
    seed: int = 0  # the control task's labels and the structural probe's start

    def __post_init__(self) -> None:
        for name, minimum in (("sentences", 1), ("test_sentences", 1), ("pairs_per_paradigm", 0),
                              ("blimp_every", 1), ("structural_steps", 0), ("relation_min_count", 1), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} is {value!r}; it must be a whole number of at least {minimum}")
        if self.probe_task not in TASKS:
            raise ValueError(f"probe_task is {self.probe_task!r}; a probe predicts one of {', '.join(TASKS)}")

    def to_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def has_blimp(self, index: int | None) -> bool:
        """Whether the run's record number `index` (0, 1, 2, …; None: a record on its own) scores BLiMP."""
        return self.pairs_per_paradigm > 0 and (index is None or index % self.blimp_every == 0)


def shipped_analysis_data() -> tuple[list[Sentence], list[Sentence], list[MinimalPair]]:
    """The shipped treebank (UD English EWT dev cut), test treebank (test cut) and BLiMP pairs (assets/data)."""
    return shipped_treebank("dev"), shipped_treebank("test"), shipped_blimp()


def analysis_record(model: nn.Module, tokenizer, treebank: Sequence[Sentence], pairs: Sequence[MinimalPair] = (), *,
                    test_treebank: Sequence[Sentence] | None = None, settings: RecordSettings | None = None,
                    index: int | None = None) -> dict[str, Any]:
    """The analyses of `settings` on the model's current weights, as one JSON-ready dict (see the module's
    docstring); `index` is the record's number in its run (0 for the first), which decides whether it scores BLiMP.
    Deterministic: the same weights, data, settings and index give the same record."""
    progress = run_to_end(iter_analysis_record(model, tokenizer, treebank, pairs, test_treebank=test_treebank,
                                               settings=settings, index=index))
    return progress.result


def iter_analysis_record(model: nn.Module, tokenizer, treebank: Sequence[Sentence],
                         pairs: Sequence[MinimalPair] = (), *, test_treebank: Sequence[Sentence] | None = None,
                         settings: RecordSettings | None = None,
                         index: int | None = None) -> Iterator[Progress[dict[str, Any]]]:
    """`analysis_record` a part at a time: yields Progress(parts done, parts in all, the record so far). The model
    is back in its own mode at every yield; stop iterating to cancel."""
    settings = settings or RecordSettings()
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise ValueError(f"index is {index!r}; a record's number in its run is a whole number from 0 (or None)")
    sentences = list(treebank[: settings.sentences])
    if not sentences:
        raise AnalysisError("the treebank holds no sentence; pass a treebank's sentences (bertcore.read_conllu)")
    test = list((treebank[settings.sentences :] if test_treebank is None else test_treebank)[: settings.test_sentences])
    if not test:
        raise AnalysisError(f"no test sentences for the probe: the treebank has only {len(treebank)} sentences and "
                            "no test treebank was given; pass test_treebank or use fewer `sentences`")
    chosen_pairs = _first_of_each_paradigm(pairs, settings.pairs_per_paradigm) if settings.has_blimp(index) else []
    blimp_reason = None
    if chosen_pairs:
        try:
            check_has_pll(model)
        except AnalysisError as error:
            blimp_reason = str(error)
    total = 3 + bool(settings.structural_steps) + bool(chosen_pairs and blimp_reason is None)
    record: dict[str, Any] = {"index": index, "sentences": len(sentences), "test_sentences": len(test),
                              "settings": settings.to_dict(), "blimp": None}
    if blimp_reason is not None:
        record["blimp_unavailable"] = blimp_reason
    seconds: dict[str, float] = {}
    started = time.perf_counter()

    clock = time.perf_counter()
    syntax, health, train_words = _treebank_pass(model, tokenizer, sentences)
    record.update(_syntax_part(syntax, settings.relation_min_count))
    record["health"] = _health_part(health)
    seconds["treebank"] = time.perf_counter() - clock
    yield Progress(1, total, _with_seconds(record, seconds, started))

    clock = time.perf_counter()
    test_words = word_representations(model, tokenizer, test)
    seconds["test"] = time.perf_counter() - clock
    yield Progress(2, total, _with_seconds(record, seconds, started))

    clock = time.perf_counter()
    probes = fit_layer_probes(train_words, test_words, task=settings.probe_task, seed=settings.seed)
    record["probe"] = {"task": probes.task, "train_words": probes.num_train_words,
                       "test_words": probes.num_test_words, "accuracy": _floats(probes.accuracy),
                       "control_accuracy": _floats(probes.control_accuracy),
                       "selectivity": _floats(probes.selectivity),
                       "majority_baseline": _float(probes.majority_baseline), "best_layer": probes.best_layer}
    seconds["probe"] = time.perf_counter() - clock
    done = 3
    yield Progress(done, total, _with_seconds(record, seconds, started))

    if settings.structural_steps:
        clock = time.perf_counter()
        structural = fit_structural_probes(train_words, test_words, steps=settings.structural_steps,
                                           seed=settings.seed)
        record["structural"] = {"uuas": _floats(structural.uuas), "spearman": _floats(structural.spearman),
                                "rank": structural.rank, "steps": structural.steps}
        seconds["structural"] = time.perf_counter() - clock
        done += 1
        yield Progress(done, total, _with_seconds(record, seconds, started))

    if chosen_pairs and blimp_reason is None:
        clock = time.perf_counter()
        result = blimp(model, tokenizer, chosen_pairs)
        record["blimp"] = {"pairs": result.num_pairs, "accuracy": _float(result.accuracy),
                           "fields": {name: _float(value) for name, value in result.by_field.items()},
                           "phenomena": {name: _float(value) for name, value in result.by_phenomenon.items()},
                           "pseudo_perplexity": _float(result.pseudo_perplexity)}
        seconds["blimp"] = time.perf_counter() - clock
        done += 1
        yield Progress(done, total, _with_seconds(record, seconds, started))


def record_summary(record: dict[str, Any]) -> str:
    """A record in one line, as bert-train prints it: "step 100: best head L2·H1 UAS 0.312 (next word 0.288); POS
    probe best at layer 2 (0.881, selectivity 0.301); BLiMP 0.552". Layers and heads count from 1 (the probe's
    layer 0 is the embeddings' output); the offset baseline shown is the best of Clark's."""
    best = record["best_head"]
    parts = [f"best head L{best['layer'] + 1}·H{best['head'] + 1} UAS {_shown(best['uas'])}"]
    baselines = {offset: value for offset, value in record.get("offset_baselines", {}).items() if value is not None}
    if baselines:
        offset = max(baselines, key=baselines.get)
        name = OFFSET_NAMES[int(offset)].removeprefix("the ")
        parts[0] += f" ({name} {_shown(baselines[offset])})"
    probe = record.get("probe")
    if probe:
        layer = probe["best_layer"]
        where = "the embeddings" if layer == 0 else f"layer {layer}"
        parts.append(f"{PROBE_NAMES.get(probe['task'], probe['task'])} probe best at {where} "
                     f"({_shown(probe['accuracy'][layer])}, selectivity {_shown(probe['selectivity'][layer])})")
    if record.get("blimp"):
        parts.append(f"BLiMP {_shown(record['blimp']['accuracy'])}")
    late = f" (due at step {record['due_step']})" if "due_step" in record else ""
    return f"step {record['step']}{late}: " + "; ".join(parts)


PROBE_NAMES = {"upos": "POS", "xpos": "XPOS", "deprel": "relation"}  # a probe's task as record_summary names it


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


# ---- the parts ----------------------------------------------------------------------------------------------


def _treebank_pass(model: nn.Module, tokenizer,
                   sentences: Sequence[Sentence]) -> tuple[SyntacticAttention, RepresentationHealth,
                                                           WordRepresentations]:
    """One forward over the sentences, with attentions and hidden states, for the syntax scores, the health
    measures and the probes' training words."""
    inputs, skipped = layout_words(model, tokenizer, [sentence.words for sentence in sentences])
    scorer = SyntaxScorer(sentences, inputs, skipped, model.config)
    sums = HealthSums.zeros(model.config)
    by_sentence: dict[int, np.ndarray] = {}
    with measuring(model):
        for batch, output in encoded_batches(model, tokenizer, inputs, attentions=True, hidden_states=True):
            scorer.add(batch, output.attentions)
            sums.add(output.hidden_states, output.attentions, batch.word_index >= 0)
            add_word_vectors(by_sentence, batch, output.hidden_states)
    order = sorted(by_sentence)
    words = WordRepresentations(np.concatenate([by_sentence[index] for index in order], axis=1),
                                tuple(sentences[index] for index in order), skipped)
    return scorer.result(), sums.result(num_texts=len(inputs)), words


def _syntax_part(syntax: SyntacticAttention, min_count: int) -> dict[str, Any]:
    best = syntax.best_head()
    return {
        "skipped_sentences": len(syntax.skipped),
        "words": syntax.num_words,
        "uas": _floats(syntax.uas),
        "uas_by_direction": _floats(syntax.uas_by_direction),
        "best_head": {"layer": best.layer, "head": best.head, "direction": best.direction,
                      "uas": _float(best.accuracy)},
        "offset_baselines": {f"{offset:+d}": _float(value) for offset, value in zip(OFFSETS, syntax.offset_accuracy,
                                                                                   strict=True)},
        "relations": {head.relation: {"layer": head.layer, "head": head.head, "direction": head.direction,
                                      "accuracy": _float(head.accuracy), "words": head.count,
                                      "offset": head.offset, "offset_accuracy": _float(head.offset_accuracy)}
                      for head in syntax.best_heads(min_count)},
    }


def _health_part(health: RepresentationHealth) -> dict[str, Any]:
    return {"tokens": health.num_tokens, "anisotropy": _floats(health.anisotropy),
            "effective_rank": _floats(health.effective_rank), "attention_entropy": _floats(health.attention_entropy),
            "outlier_dimensions": [list(dimensions) for dimensions in health.outlier_dimensions],
            "outlier_std": health.outlier_std}


def _first_of_each_paradigm(pairs: Sequence[MinimalPair], count: int) -> list[MinimalPair]:
    taken: dict[str, int] = {}
    chosen = []
    for pair in pairs:
        if taken.get(pair.uid, 0) < count:
            taken[pair.uid] = taken.get(pair.uid, 0) + 1
            chosen.append(pair)
    return chosen


def _with_seconds(record: dict[str, Any], seconds: dict[str, float], started: float) -> dict[str, Any]:
    record["seconds"] = {**{name: round(value, 4) for name, value in seconds.items()},
                         "total": round(time.perf_counter() - started, 4)}
    return record


def _float(value: float | None) -> float | None:
    """A JSON number: a float, or None for NaN and infinities (which JSON does not have)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _floats(values: np.ndarray) -> list:
    """Nested lists of JSON numbers."""
    if np.ndim(values) == 0:
        return _float(values)
    return [_floats(value) for value in values]
