"""The head lab's plain side: what the app asks of bertcore's analyses, and what its views draw. No Qt.

- `analyse_input(InputJob)`: for the inspection on screen, in one worker call, the head importance (Michel et
  al. 2019's gate gradient), the head roles (Clark et al. 2019) and the logit lens. Each part that cannot be
  computed (no MLM head, nothing masked) comes back as None with a sentence saying why.
- The same importance and roles over held-out corpus pairs, and the pruning curve: explorer.head_lab.corpus_run.
- `HeadScores`: one source's importance and roles ("this input" or "corpus sample") with what the table, the
  head grid and the overview draw from them: `rows()`, `annotations()`, `least_important(k)`.
- `recommend_objective`: which loss importance should differentiate for the loaded model, and why.

Ranking: heads are ranked by Michel et al.'s normalised importance (each layer divided by its L2 norm, then
min–max over the model), the value the views colour by; "the k least important" and the pruning curve's order
use the same ranking, so what the table says is what the buttons do.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

OBJECTIVES = {"mlm": "MLM", "mlm+nsp": "MLM + NSP", "nsp": "NSP"}  # the loss importance differentiates
ROLE_BADGES = {"previous token": "prev", "next token": "next", "[SEP]": "[SEP]", "[CLS]": "[CLS]", "self": "self",
               "punctuation": "punct", "broad": "broad", "content": "content"}
SHARE_COLUMNS = {"cls": "[CLS]", "sep": "[SEP]", "self": "self", "previous": "prev", "next": "next",
                 "punctuation": "punct", "other": "other"}  # bertcore.analysis.roles.CATEGORIES -> column titles
OVERFIT_DROP = 0.05  # held-out NSP accuracy this far below its best = the NSP head overfit
SOURCES = {"input": "this input", "corpus": "corpus sample"}
NO_HEADS_NOTE = "no MLM or NSP head, so no loss to rank heads by"
ANALYSIS_MODULES = ("bertcore.analysis.importance", "bertcore.analysis.pruning", "bertcore.analysis.roles",
                    "bertcore.analysis.lens", "bertcore.data.corpus", "bertcore.analysis.embedding_views",
                    "bertcore.files.resources")


def warm_up_analyses() -> None:
    """Import the analyses now, in the calling (GUI) thread, once torch is loaded: a module imported for the
    first time in a worker thread holds the GIL while it executes, and the window would stall meanwhile."""
    for name in ANALYSIS_MODULES:
        importlib.import_module(name)


class HeldOutData:
    """The tokenized corpus of the last (tokenizer, corpus, length, seed) corpus runs asked for, kept between
    runs: reading and tokenizing the built-in corpus takes ~1 s, and a pruning curve after an importance run,
    or a run with another loss, samples the same held-out pairs. Thread-safe (a cancelled run may still read
    it while the next one starts)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._data = None

    def get(self, tokenizer: Any, corpus_path: str | None, seq_len: int, seed: int) -> Any:
        from bertcore.data.batches import PretrainingData
        from bertcore.data.corpus import read_corpus
        from bertcore.files.resources import default_corpus_path

        key = (tokenizer, corpus_path, seq_len, seed)
        with self._lock:
            if self._key is None or self._key[0] is not tokenizer or self._key[1:] != key[1:]:
                self._data = None  # the old corpus goes first: two never coexist
                corpus = read_corpus(corpus_path or default_corpus_path())
                self._data = PretrainingData(corpus, tokenizer, seq_len=seq_len, seed=seed)
                self._key = key
                # ~100k lists that live until the model changes: out of the cycle collector's walks, which run
                # in the GUI thread (explorer.common._qt.gui_gc) and took ~100 ms more per walk with them. Refcounting
                # still frees them when they go.
                gc.freeze()
            return self._data


# ---- which loss ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectiveChoice:
    objective: str | None  # a key of OBJECTIVES; None when the model has no pretraining loss
    reason: str  # one paragraph for a tooltip


def recommend_objective(model: Any, checkpoint_path: str | Path | None = None) -> ObjectiveChoice:
    """The loss whose importance is honest for this model, from its training history when one is at hand.

    Importance is |∂ loss / ∂ head gate|: it predicts what switching a head off costs only where the loss is
    one the model generalises on. On the shipped default model the NSP head overfit (held-out NSP accuracy
    peaked at 83% and ended at 70%); its NSP gradients are large, of both signs on held-out pairs, and rank
    heads the MLM barely needs on top, so MLM+NSP importance did not predict ablations and MLM-only did. So:
    NSP accuracy that fell from its best by OVERFIT_DROP or more → "mlm"; a history where it held → "mlm+nsp"
    (the pretraining loss, as Michel et al.); no history → "mlm", the loss every masked-LM head carries.
    """
    if not (model.has_mlm_head or model.has_nsp_head):  # a bare encoder, or a fine-tuned task model
        return ObjectiveChoice(None, "This model has no MLM or NSP head (a plain encoder or a fine-tuned "
                                     "checkpoint), so there is no pretraining loss to take head importance from. "
                                     "Head roles still work.")
    if not model.has_nsp_head:  # a masked LM alone: BertForMaskedLM, DistilBERT, RoBERTa, ALBERT (SOP is not NSP)
        return ObjectiveChoice("mlm", "MLM only: this model has no NSP head, so the masked-LM loss is the one "
                                      "there is to take head importance from.")
    history = nsp_history(checkpoint_path) if checkpoint_path else []
    if not history:
        return ObjectiveChoice("mlm", (
            "MLM only: no training history says how well this model's next-sentence head generalises. The "
            "masked-LM loss is what every head of a masked LM serves; on the shipped default model, whose NSP "
            "head overfit, MLM importance was the one that predicted which heads can be switched off. Choose "
            "MLM + NSP for the full pretraining loss (Michel et al. 2019)."))
    best_step, best = max(history, key=lambda item: item[1])
    last_step, last = history[-1]
    if best - last >= OVERFIT_DROP:
        return ObjectiveChoice("mlm", (
            f"MLM only: this model's held-out NSP accuracy peaked at {best:.0%} (step {best_step:,}) and ended "
            f"at {last:.0%} (step {last_step:,}): its NSP head overfit. Its NSP gradients are then large and of "
            "both signs on held-out pairs, so MLM + NSP importance ranks heads by effects that are not costs; "
            "MLM importance predicts what switching heads off does."))
    return ObjectiveChoice("mlm+nsp", (
        f"MLM + NSP, the pretraining loss (as Michel et al. 2019): this model's held-out NSP accuracy held at "
        f"{last:.0%} (best {best:.0%}), so its NSP head generalises and both losses say what the heads carry."))


def nsp_history(checkpoint_path: str | Path) -> list[tuple[int, float]]:
    """(step, held-out NSP accuracy) pairs of the run that wrote a checkpoint, up to its step; [] if unknown.

    Read from `training_summary.json` beside the weights (the shipped default model) or from the run folder's
    `metrics.jsonl` eval records (a checkpoint under <run>/checkpoints/step-N or <run>/final).
    """
    from bertcore.files.file_names import checkpoint_step

    folder = Path(checkpoint_path)
    summary = folder / "training_summary.json"
    points: list[tuple[int, float]] = []
    try:
        if summary.is_file():
            for entry in json.loads(summary.read_text(encoding="utf-8")).get("curve", []):
                points.append((int(entry["step"]), float(entry["nsp_accuracy"])))
        else:
            run = folder.parent.parent if folder.parent.name == "checkpoints" else folder.parent
            metrics = run / "metrics.jsonl"
            if metrics.is_file():
                for line in metrics.read_text(encoding="utf-8").splitlines():
                    record = json.loads(line) if line.strip() else {}
                    if record.get("kind") == "eval" and "nsp_accuracy" in record:
                        points.append((int(record["step"]), float(record["nsp_accuracy"])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []  # a history that cannot be read says nothing
    limit = checkpoint_step(folder.name)
    points = [(step, accuracy) for step, accuracy in points if math.isfinite(accuracy)
              and (limit is None or step <= limit)]
    return sorted(points)


# ---- one source's scores ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadAnnotations:
    """What the head grid and the overview draw on the heads (explorer.head_lab._qt.head_marks draws it)."""

    caption: str  # what the scores are of, e.g. "this input (MLM loss)"
    grid_shape: tuple[int, int]  # (L, H) of the model they belong to
    scores: np.ndarray | None  # (L, H) float in [0, 1], normalised importance; None when not computed
    badges: np.ndarray | None  # (L, H) str, short role names ("prev", "[SEP]", ...); None when not computed
    note: str = ""  # why something is missing ("importance: mask a token ..."), "" when all is there


@dataclass(frozen=True)
class HeadScores:
    """Importance and roles of every head from one source, and the views' data derived from them."""

    source: str  # a key of SOURCES
    caption: str  # what it was computed on, e.g. "this input (MLM loss)", "256 held-out pairs (MLM loss)"
    grid_shape: tuple[int, int]  # (L, H)
    importance: np.ndarray | None  # (L, H) float64 raw Σ|∂L/∂gate|; None when there was no loss
    roles: Any = None  # bertcore.analysis.roles.HeadRoles, or None
    importance_note: str = ""  # why importance is None
    head_mask: np.ndarray | None = None  # (L, H) the heads on (1) / off (0) when it was computed

    @cached_property
    def normalized(self) -> np.ndarray | None:
        """(L, H) Michel et al.'s normalisation of `importance` to [0, 1] (see bertcore.analysis.importance)."""
        if self.importance is None:
            return None
        from bertcore.analysis.importance import normalize_importance

        return normalize_importance(self.importance)

    @cached_property
    def rank(self) -> np.ndarray | None:
        """(L, H) int, 1 = the most important head; ties keep layer-major order."""
        if self.normalized is None:
            return None
        order = np.argsort(-self.normalized, axis=None, kind="stable")
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(1, order.size + 1)
        return rank.reshape(self.grid_shape)

    def least_important(self, count: int) -> np.ndarray:
        """(count, 2) (layer, head) pairs, least important first (the pruning curve's order)."""
        if self.normalized is None:
            raise ValueError(f"no importance to rank heads by: {self.importance_note or 'none was computed'}")
        total = self.normalized.size
        if not 0 <= count <= total:
            raise ValueError(f"count is {count}; this model has {total} heads")
        order = np.argsort(self.normalized, axis=None, kind="stable")[:count]
        return np.stack(np.unravel_index(order, self.grid_shape), axis=1).astype(np.int64)

    def mask_without_least_important(self, count: int) -> np.ndarray:
        """(L, H) float32 head mask with the `count` least important heads off (0) and every other head on."""
        mask = np.ones(self.grid_shape, np.float32)
        pairs = self.least_important(count)
        mask[pairs[:, 0], pairs[:, 1]] = 0.0
        return mask

    @property
    def badges(self) -> np.ndarray | None:
        """(L, H) short role names for badges, or None without roles."""
        if self.roles is None:
            return None
        return np.vectorize(lambda label: ROLE_BADGES.get(str(label), str(label)), otypes=[object])(
            self.roles.labels).astype(str)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per head, layer-major: layer and head 1-based, importance raw / normalised / rank (None
        without importance), role, the share of each key kind (None without roles), entropy, on."""
        rows = []
        num_layers, num_heads = self.grid_shape
        for layer in range(num_layers):
            for head in range(num_heads):
                row: dict[str, Any] = {"layer": layer + 1, "head": head + 1}
                has_importance = self.importance is not None
                row["importance"] = float(self.importance[layer, head]) if has_importance else None
                row["normalised"] = float(self.normalized[layer, head]) if has_importance else None
                row["rank"] = int(self.rank[layer, head]) if has_importance else None
                roles = self.roles
                row["role"] = str(roles.labels[layer, head]) if roles is not None else ""
                for category, title in SHARE_COLUMNS.items():
                    row[title] = float(roles.share(category)[layer, head]) if roles is not None else None
                row["entropy"] = float(roles.entropy[layer, head]) if roles is not None else None
                row["on"] = bool(self.head_mask is None or self.head_mask[layer, head] > 0.5)
                rows.append(row)
        return rows

    def annotations(self) -> HeadAnnotations:
        """The marks the head grid and the overview draw."""
        note = f"importance: {self.importance_note}" if self.importance is None and self.importance_note else ""
        return HeadAnnotations(caption=self.caption, grid_shape=self.grid_shape, scores=self.normalized,
                               badges=self.badges, note=note)


# ---- the current input ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputJob:
    """What the input-analysis worker needs for the inspection on screen; `request_id` orders jobs."""

    request_id: int
    model: Any
    tokenizer: Any
    inspection: Any  # bertcore.analysis.inspection.Inspection, computed with `model`
    objective: str | None  # a key of OBJECTIVES; None: no importance (a model without heads)
    want_importance: bool = True
    want_roles: bool = True
    want_lens: bool = True
    top_k: int = 5


@dataclass(frozen=True)
class InputAnalysis:
    request_id: int
    scores: HeadScores  # importance and roles of this input
    lens: Any  # bertcore.analysis.lens.LogitLens, or None
    lens_note: str  # why `lens` is None or empty
    importance_ms: float  # the gradient's wall time (the benchmark reads it)


def input_importance_arguments(objective: str, inspection: Any) -> dict[str, Any]:
    """The masking and NSP choice `input_head_importance` takes for an objective on this input."""
    if objective == "mlm":
        return {"masking": inspection.masking, "next_sentence": "none"}
    if objective == "nsp":
        return {"masking": None, "next_sentence": "predicted"}
    return {"masking": inspection.masking, "next_sentence": "predicted"}


def analyse_input(job: InputJob) -> InputAnalysis:
    """Importance, roles and logit lens of the inspection on screen (the worker's call; no Qt)."""
    from bertcore.analysis.importance import input_head_importance
    from bertcore.analysis.lens import logit_lens
    from bertcore.analysis.roles import inspection_head_roles

    inspection, model = job.inspection, job.model
    grid = (inspection.num_layers, inspection.num_heads)
    importance, note, importance_ms = None, "", 0.0
    has_heads = model.has_mlm_head or model.has_nsp_head
    if not has_heads or job.objective is None:
        note = NO_HEADS_NOTE
    elif job.want_importance and not _has_loss(job.objective, inspection):
        note = {"mlm": "mask a token (Ctrl+M or click one)", "nsp": "type sentence B (NSP needs a pair)"}.get(
            job.objective, "mask a token or type sentence B")
    elif job.want_importance:
        started = time.perf_counter()
        try:
            importance = input_head_importance(model, inspection.encoding, head_mask=inspection.head_mask,
                                               **input_importance_arguments(job.objective, inspection))
        except ValueError as error:
            note = _readable(str(error))
        importance_ms = (time.perf_counter() - started) * 1e3
    else:
        note = "not computed"
    roles = inspection_head_roles(inspection) if job.want_roles else None
    lens, lens_note = None, ""
    if not model.has_mlm_head:
        lens_note = ("This model has no MLM head (a plain encoder checkpoint such as MiniLM), so there is no "
                     "prediction to read off each layer.")
    elif inspection.masking is None or not inspection.masking.positions:
        lens_note = "Mask a token (Ctrl+M or click one) to see where its prediction forms, layer by layer."
    elif job.want_lens:
        lens = logit_lens(model, job.tokenizer, inspection, top_k=job.top_k)
    # a masked LM alone asked for MLM + NSP got the MLM term only (input_head_importance): say the loss it got
    objective = "mlm" if job.objective == "mlm+nsp" and not model.has_nsp_head else job.objective
    caption = f"this input ({OBJECTIVES[objective]} loss)" if objective and has_heads else "this input"
    scores = HeadScores(source="input", caption=caption, grid_shape=grid, importance=importance, roles=roles,
                        importance_note=note, head_mask=np.asarray(inspection.head_mask, np.float32).copy())
    return InputAnalysis(request_id=job.request_id, scores=scores, lens=lens, lens_note=lens_note,
                         importance_ms=importance_ms)


def _has_loss(objective: str, inspection: Any) -> bool:
    masked = inspection.masking is not None and bool(inspection.masking.positions)
    is_pair = 1 in inspection.encoding.sequence_ids
    return {"mlm": masked, "nsp": is_pair}.get(objective, masked or is_pair)


def _readable(message: str) -> str:
    """bertcore's "nothing to explain: ...; mask a token ..." minus its opening."""
    return message.removeprefix("nothing to explain: ")
