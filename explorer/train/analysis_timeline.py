"""A run's analysis records over its steps, for the Train tab's syntax, probe and health timelines. Qt-free.

A record is what `bertcore.analysis_record` returns, as a training run writes it to metrics.jsonl (kind "analysis",
with its "step"; a record analysed afterwards from a checkpoint also says "post_hoc": true), or as the training loop
hands it to the app with a step. `AnalysisTimeline` keeps one record per step, in step order (a later record of the
same step replaces the earlier: a resumed run measures its steps again), and gives the views their arrays: every
head's UAS, the best head's, the probe's accuracy and selectivity per layer, BLiMP, anisotropy, effective rank and
attention entropy, each as (steps, …) float64 with NaN where a record did not say.

Two judgements are made here, each by one stated rule (the views write the rule in their captions):

- **Structure onset** (`StructureOnset`): Chen et al. (ICLR 2024, "Sudden Drops in the Loss") see heads start to
  track dependency syntax abruptly, the "syntactic attention structure" forming just before the loss drops. The
  onset marked is the first record at which the best head's UAS has gained a quarter (ONSET_FRACTION) of its whole
  rise over the run, its highest value minus its first; it is marked only once that rise is at least MIN_RISE
  (0.05 UAS: well above the ~0.01–0.015 that the record's ~1,100 scored words let a UAS wander by chance). The
  first quarter of the rise, not its middle, because the onset is where the rise begins; a quarter, not less,
  because a smaller share of a small rise is within that noise.
- **Collapsed heads** (`CollapsedHead`): a head has collapsed when its attention entropy (the mean over query rows
  of −Σ a ln a, bertcore.analysis.health) is below COLLAPSE_FRACTION (5%) of ln n, n the mean number of keys a query
  row sees (a sentence's tokens with its two special tokens): ln n is what a head that spreads its attention evenly
  has, as a freshly initialised one nearly does; under 5% of it, about 98% of each row sits on one key. A trained
  model may have a few such heads (all-MiniLM-L6-v2 has one, layer 1 head 3, parking everything on one token);
  a run going bad collapses many, layer after layer (Zhai et al. 2023, "attention entropy collapse").
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.common.events import Event

RECORD_KIND = "analysis"  # bertcore.analysis.records.RECORD_KIND, without importing torch to know it
ONSET_FRACTION = 0.25  # the share of the best head's whole rise that marks the structure onset
MIN_RISE = 0.05  # UAS: a smaller rise is not called an onset (a record's ~1,100 words wander ~0.01–0.015)
COLLAPSE_FRACTION = 0.05  # attention entropy below this share of ln(keys per row): the head has collapsed
SPECIALS_PER_SENTENCE = 2  # [CLS] … [SEP] (<s> … </s>): keys every query row sees besides the sentence's tokens

ONSET_RULE = (f"Structure onset: the first record at which the best head's UAS has gained {ONSET_FRACTION:.0%} of "
              "its whole rise over the run (its highest value minus its first), marked once that rise is at least "
              f"{MIN_RISE:g} UAS (Chen et al. 2024 see this rise come just before the loss drops).")
COLLAPSE_RULE = (f"A head has collapsed when its attention entropy is below {COLLAPSE_FRACTION:.0%} of ln n, n the "
                 "mean number of keys a query row sees: about 98% of each row on one key (an even spread has ln n).")


def head_name(layer: int, head: int) -> str:
    """"L2·H1" for 0-based (1, 0): layers and heads counted from 1, as every grid in the window numbers them."""
    return f"L{layer + 1}·H{head + 1}"


def layer_name(layer: int) -> str:
    """Layer `layer` of a per-layer figure whose first entry is the embeddings: "embeddings", "layer 1", …"""
    return "embeddings" if layer == 0 else f"layer {layer}"


@dataclass(frozen=True)
class StructureOnset:
    """Where the best head's UAS began its rise (ONSET_RULE), or why no onset is marked."""

    step: int | None  # the onset's step; None when none is marked
    start_uas: float  # the best head's UAS at the first record
    peak_uas: float  # its highest UAS
    peak_step: int
    threshold: float  # start + ONSET_FRACTION × (peak − start): the UAS the onset crosses

    @property
    def rise(self) -> float:
        return self.peak_uas - self.start_uas

    @property
    def text(self) -> str:
        """One sentence for the view's caption."""
        if self.step is not None:
            return (f"structure onset at step {self.step:,}: the best head's UAS passed {self.threshold:.3f} on its "
                    f"way from {self.start_uas:.3f} to {self.peak_uas:.3f} (step {self.peak_step:,})")
        return (f"no structure onset yet: the best head's UAS rose {max(self.rise, 0.0):.3f} "
                f"({self.start_uas:.3f} → {self.peak_uas:.3f}), under the {MIN_RISE:g} an onset needs")


@dataclass(frozen=True)
class CollapsedHead:
    layer: int  # 0-based
    head: int
    entropy: float  # nats, at the newest record
    threshold: float  # nats: COLLAPSE_FRACTION × ln(keys per row) of that record
    since_step: int  # the first record of the run of records (up to the newest) in which it is collapsed

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)


def structure_onset(steps: Sequence[int], best_uas: Sequence[float]) -> StructureOnset | None:
    """ONSET_RULE over the best head's UAS at each record (steps increasing); None with fewer than two records."""
    steps = np.asarray(steps, np.int64)
    values = np.asarray(best_uas, np.float64)
    known = np.isfinite(values)
    steps, values = steps[known], values[known]
    if len(values) < 2:
        return None
    start = float(values[0])
    peak_index = int(values.argmax())  # the first highest
    peak = float(values[peak_index])
    threshold = start + ONSET_FRACTION * (peak - start)
    onset = None
    if peak - start >= MIN_RISE:
        onset = int(steps[int(np.argmax(values >= threshold))])  # reached at the peak at the latest
    return StructureOnset(onset, start, peak, int(steps[peak_index]), threshold)


def keys_per_row(record: dict) -> float | None:
    """The mean number of keys a query row of the record's health measure sees: its real tokens per scored sentence,
    plus the two special tokens (None when the record does not say)."""
    health = record.get("health") or {}
    tokens, sentences = health.get("tokens"), record.get("sentences")
    if not _is_number(tokens) or not _is_number(sentences):
        return None
    used = sentences - (record.get("skipped_sentences") or 0)
    return tokens / used + SPECIALS_PER_SENTENCE if used > 0 and tokens > 0 else None


def collapse_threshold(record: dict) -> float | None:
    """COLLAPSE_FRACTION × ln(keys per row) for the record, in nats (None when the record does not say)."""
    keys = keys_per_row(record)
    return COLLAPSE_FRACTION * math.log(keys) if keys is not None and keys > 1 else None


class AnalysisTimeline:
    """A run's analysis records by step (see the module docstring), and the step the Train tab's slider has chosen.
    `add` records as they come, in any order; `changed` announces (timeline, "records") when the records change and
    (timeline, "step") when the chosen step does."""

    def __init__(self):
        self.changed = Event()
        self.version = 0  # changes whenever the records do (a view redraws when the version it drew is old)
        self.step: int | None = None  # the step chosen (the slider's); None: none, the views show the newest record
        self._reset()

    def _reset(self) -> None:
        self.steps: list[int] = []  # increasing
        self.records: list[dict] = []  # the record of each step
        self.shape: tuple[int, int] | None = None  # (layers, heads) of the run's model, from its first record
        self.refused = 0  # records that could not be read or are of another shape, left out
        self.version += 1

    def clear(self) -> None:
        """Forget every record and the chosen step (another run is shown)."""
        self._reset()
        self.step = None
        self.changed.emit(self, "records")

    def __len__(self) -> int:
        return len(self.steps)

    def select_step(self, step: int | None) -> None:
        """The step the views follow (the step slider's, or one clicked)."""
        step = None if step is None else int(step)
        if step != self.step:
            self.step = step
            self.changed.emit(self, "step")

    def add(self, record: Any, step: int | None = None) -> bool:
        """Keep `record` (its own "step", else `step`); False, counted in `refused`, for what is not a readable
        record of this run's shape."""
        kept = self._keep(record, step)
        if kept:
            self.changed.emit(self, "records")
        return kept

    def add_all(self, records: Iterable[Any]) -> int:
        """Keep every record (announced once); how many were kept."""
        kept = sum(self._keep(record, None) for record in records)
        if kept:
            self.changed.emit(self, "records")
        return kept

    def _keep(self, record: Any, step: int | None) -> bool:
        shape = _record_shape(record)
        step = record.get("step", step) if isinstance(record, dict) else None
        if shape is None or not _is_number(step) or step < 0 or (self.shape is not None and shape != self.shape):
            self.refused += 1
            return False
        step = int(step)
        self.shape = shape
        index = bisect.bisect_left(self.steps, step)
        if index < len(self.steps) and self.steps[index] == step:
            self.records[index] = record
        else:
            self.steps.insert(index, step)
            self.records.insert(index, record)
        self.version += 1
        return True

    def nearest(self, step: int) -> int | None:
        """The index of the record nearest to `step` (the earlier of two as near); None when there is none."""
        if not self.steps:
            return None
        index = bisect.bisect_left(self.steps, step)
        candidates = [i for i in (index - 1, index) if 0 <= i < len(self.steps)]
        return min(candidates, key=lambda i: (abs(self.steps[i] - step), self.steps[i]))

    def step_array(self) -> np.ndarray:
        return np.asarray(self.steps, np.float64)

    # ---- syntax ----
    def uas(self) -> np.ndarray:
        """(S, L, H) every head's UAS (the better direction) at each record."""
        return self._stack(lambda record: record.get("uas"), self._heads_shape())

    def best_uas(self) -> np.ndarray:
        """(S,) the best head's UAS at each record (NaN where a record names none)."""
        return np.array([_number((record.get("best_head") or {}).get("uas")) for record in self.records])

    def best_heads(self) -> list[tuple[int, int] | None]:
        """(layer, head) of the best head at each record, 0-based."""
        heads = []
        for record in self.records:
            best = record.get("best_head") or {}
            layer, head = best.get("layer"), best.get("head")
            heads.append((int(layer), int(head)) if _is_number(layer) and _is_number(head) else None)
        return heads

    def offset_baseline(self) -> tuple[str, float] | None:
        """The best of Clark's offset baselines ("+1", 0.29: the next word is the head) over the newest record's
        sentences; None when it says none."""
        for record in reversed(self.records):
            baselines = {name: _number(value) for name, value in (record.get("offset_baselines") or {}).items()}
            baselines = {name: value for name, value in baselines.items() if math.isfinite(value)}
            if baselines:
                name = max(baselines, key=lambda key: (baselines[key], key))
                return name, baselines[name]
        return None

    def onset(self) -> StructureOnset | None:
        return structure_onset(self.steps, self.best_uas())

    # ---- probes ----
    def probe(self, key: str) -> np.ndarray:
        """(S, L + 1) the probe's `key` ("accuracy", "control_accuracy", "selectivity") per layer, embeddings first."""
        return self._stack(lambda record: (record.get("probe") or {}).get(key), self._layers_shape())

    def probe_majority(self) -> np.ndarray:
        """(S,) the probe's majority-class baseline at each record."""
        return np.array([_number((record.get("probe") or {}).get("majority_baseline")) for record in self.records])

    def probe_task(self) -> str | None:
        for record in reversed(self.records):
            task = (record.get("probe") or {}).get("task")
            if isinstance(task, str):
                return task
        return None

    def blimp(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps, accuracy) of the records that scored BLiMP (the others are skipped: a run scores it on every
        `blimp_every`-th record)."""
        pairs = [(step, _number(record["blimp"].get("accuracy")))
                 for step, record in zip(self.steps, self.records, strict=True)
                 if isinstance(record.get("blimp"), dict)]
        pairs = [(step, value) for step, value in pairs if math.isfinite(value)]
        return (np.array([step for step, _ in pairs], np.float64), np.array([value for _, value in pairs], np.float64))

    def blimp_unavailable(self) -> str | None:
        """Why the run's records could not score BLiMP (no masked-LM head), from the newest record that says."""
        for record in reversed(self.records):
            reason = record.get("blimp_unavailable")
            if isinstance(reason, str) and reason:
                return reason
        return None

    # ---- health ----
    def health(self, key: str) -> np.ndarray:
        """(S, L + 1) "anisotropy" or "effective_rank" per layer, embeddings first."""
        return self._stack(lambda record: (record.get("health") or {}).get(key), self._layers_shape())

    def attention_entropy(self) -> np.ndarray:
        """(S, L, H) each head's attention entropy, nats."""
        return self._stack(lambda record: (record.get("health") or {}).get("attention_entropy"), self._heads_shape())

    def collapse_thresholds(self) -> np.ndarray:
        """(S,) COLLAPSE_FRACTION × ln(keys per row) of each record, nats (NaN where it does not say)."""
        return np.array([_number(collapse_threshold(record)) for record in self.records])

    def collapsed_heads(self) -> list[CollapsedHead]:
        """The heads collapsed at the newest record (COLLAPSE_RULE), each with the step since which it has been,
        lowest entropy first."""
        if not self.records:
            return []
        entropy = self.attention_entropy()
        below = entropy < self.collapse_thresholds()[:, None, None]  # NaN compares False: not collapsed
        thresholds = self.collapse_thresholds()
        found = []
        for layer, head in zip(*np.nonzero(below[-1]), strict=True):
            first = len(self.steps) - 1
            while first > 0 and below[first - 1, layer, head]:
                first -= 1
            found.append(CollapsedHead(int(layer), int(head), float(entropy[-1, layer, head]), float(thresholds[-1]),
                                       self.steps[first]))
        return sorted(found, key=lambda item: (item.entropy, item.layer, item.head))

    # ---- internals ----
    def _heads_shape(self) -> tuple[int, int]:
        return self.shape or (0, 0)

    def _layers_shape(self) -> tuple[int]:
        return ((self.shape[0] + 1) if self.shape else 0,)

    def _stack(self, field, shape: tuple[int, ...]) -> np.ndarray:
        """(S, *shape) float64 of each record's `field(record)`; NaN rows where it is missing or misshapen."""
        table = np.full((len(self.records), *shape), np.nan)
        for row, record in enumerate(self.records):
            values = _array(field(record))
            if values is not None and values.shape == shape:
                table[row] = values
        return table


def analysis_records(records: Iterable[Any]) -> list[dict]:
    """The analysis records among a metrics file's records (kind "analysis")."""
    return [record for record in records if isinstance(record, dict) and record.get("kind") == RECORD_KIND]


def read_analysis_records(run_dir: str | os.PathLike, up_to_step: int | None = None) -> list[dict]:
    """The analysis records of a run folder's metrics.jsonl, up to a step; [] when it has none. ValueError naming
    the file when it cannot be read."""
    from bertcore.errors import RunFolderError
    from bertcore.files.run_folder import RunFolder

    try:
        records = RunFolder(run_dir).metrics_tail().poll().records
    except RunFolderError as error:
        raise ValueError(str(error)) from None
    found = analysis_records(records)
    if up_to_step is None:
        return found
    return [record for record in found if _is_number(record.get("step")) and record["step"] <= up_to_step]


def _record_shape(record: Any) -> tuple[int, int] | None:
    """(layers, heads) of a record's UAS grid; None for what is not a readable analysis record."""
    if not isinstance(record, dict):
        return None
    uas = _array(record.get("uas"))
    if uas is None or uas.ndim != 2 or not uas.size:
        return None
    return int(uas.shape[0]), int(uas.shape[1])


def _array(values: Any) -> np.ndarray | None:
    """Nested lists of JSON numbers (None for NaN) as float64; None when they are not a rectangular table."""
    if values is None:
        return None
    try:
        array = np.array(values, dtype=object)  # a ragged table comes out as a row of lists: no number in it
    except (TypeError, ValueError):
        return None
    return np.array([_number(value) for value in array.ravel()], np.float64).reshape(array.shape)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float:
    return float(value) if _is_number(value) else math.nan
