"""The pruning curve: switch heads off in order of increasing importance and watch a held-out metric.

Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?", section 4.2 and figure 3: heads are
masked 10% of all heads at a time, least important first (importance from `bertcore.analysis.importance`), and
the metric is measured after each step; the same with a random order is the baseline. A good importance
keeps the metric up far longer than the random order does.

    evaluate = pretraining_metric(model, pretraining_sample(data, 256))   # head_mask -> {name: value}
    curve = pruning_curve(importance, evaluate)
    curve.metric("mlm_accuracy", "importance"), curve.metric("mlm_accuracy", "random")  # (steps,) each
    curve.to_csv("pruning.csv")
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.models.bert import IGNORE_INDEX

Order = Literal["importance", "random"]
ORDERS: tuple[Order, ...] = ("importance", "random")
Metric = Callable[[np.ndarray], "float | Mapping[str, float]"]


@dataclass(frozen=True)
class PruningCurve:
    """Metric after each pruning step, for the importance order and the random order.

    Step s masks the first num_masked[s] heads of an order; the masks of an order are nested. While the curve
    is being computed, the steps not yet measured hold NaN.
    """

    grid_shape: tuple[int, int]  # (layers, heads) of the model
    metric_names: tuple[str, ...]  # (M,) what `evaluate` returned, e.g. ("mlm_accuracy", "nsp_accuracy", "loss")
    fractions: np.ndarray  # (S,) float64 share of all heads masked at each step; 0.0 first
    num_masked: np.ndarray  # (S,) int64 heads masked at each step
    importance_metrics: np.ndarray  # (S, M) float64, heads masked least important first
    random_metrics: np.ndarray  # (S, M) float64, heads masked in a seeded random order
    importance_order: np.ndarray  # (layers·heads, 2) int64 (layer, head) pairs, least important first
    random_order: np.ndarray  # (layers·heads, 2) int64 (layer, head) pairs of the baseline
    seed: int  # of the random order

    @property
    def num_steps(self) -> int:
        return len(self.num_masked)

    def order(self, order: Order) -> np.ndarray:
        """(layers·heads, 2) (layer, head) pairs in the order they are masked."""
        return self.importance_order if _checked_order(order) == "importance" else self.random_order

    def metric(self, name: str, order: Order = "importance") -> np.ndarray:
        """(S,) the named metric at each step of one order."""
        if name not in self.metric_names:
            raise ValueError(f"no metric {name!r} in this curve; it has {', '.join(self.metric_names)}")
        values = self.importance_metrics if _checked_order(order) == "importance" else self.random_metrics
        return values[:, self.metric_names.index(name)]

    def head_mask(self, step: int, order: Order = "importance") -> np.ndarray:
        """(layers, heads) float32 mask of a step: 0 for the heads masked so far, 1 for the rest."""
        if not 0 <= step < self.num_steps:
            raise ValueError(f"step {step} is out of range; this curve has steps 0..{self.num_steps - 1}")
        return _mask(self.order(order)[: self.num_masked[step]], self.grid_shape)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per step for a table or CSV: fraction, heads masked, each metric of each order, and the
        heads each order added at that step as "layer:head" (0-based), space-separated."""
        rows = []
        for step in range(self.num_steps):
            previous = self.num_masked[step - 1] if step else 0
            row: dict[str, Any] = {"fraction_masked": float(self.fractions[step]),
                                   "heads_masked": int(self.num_masked[step])}
            for order in ORDERS:
                values = self.importance_metrics if order == "importance" else self.random_metrics
                for column, name in enumerate(self.metric_names):
                    row[f"{order}_{name}"] = float(values[step, column])
            for order in ORDERS:
                added = self.order(order)[previous : self.num_masked[step]]
                row[f"{order}_heads_added"] = " ".join(f"{layer}:{head}" for layer, head in added)
            rows.append(row)
        return rows

    def to_csv(self, path: str | Path) -> Path:
        """Write `rows()` as CSV with a header line; returns the path."""
        path = Path(path)
        rows = self.rows()
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        return path


def pruning_curve(
    importance: np.ndarray,
    evaluate: Metric,
    *,
    step_fraction: float = 0.1,
    max_fraction: float = 1.0,
    seed: int = 0,
) -> PruningCurve:
    """Michel et al. 2019's pruning experiment: the finished `PruningCurve` (see `iter_pruning_curve`)."""
    progress = run_to_end(iter_pruning_curve(importance, evaluate, step_fraction=step_fraction,
                                             max_fraction=max_fraction, seed=seed))
    assert progress is not None  # step 0 is always evaluated
    return progress.result


def iter_pruning_curve(
    importance: np.ndarray,
    evaluate: Metric,
    *,
    step_fraction: float = 0.1,
    max_fraction: float = 1.0,
    seed: int = 0,
) -> Iterator[Progress[PruningCurve]]:
    """The pruning curve one evaluation at a time: yields Progress(done evaluations, total, curve so far).

    importance: (layers, heads), any scale (raw or normalised; ties keep layer-major order). evaluate: called
    with a (layers, heads) float32 head mask (1 = on, 0 = off), returns a number or a {name: number} mapping
    (higher or lower better, the curve does not care). Steps mask round(k · step_fraction · heads) heads for
    k = 0, 1, … while k · step_fraction ≤ max_fraction (steps that round to the same count are merged). A mask
    both orders share (no head or every head masked) is evaluated once. Stop iterating to cancel.
    """
    importance = np.asarray(importance, dtype=np.float64)
    if importance.ndim != 2 or 0 in importance.shape or not np.all(np.isfinite(importance)):
        raise ValueError(f"importance must be a finite (layers, heads) array, got shape {importance.shape}")
    for name, value in (("step_fraction", step_fraction), ("max_fraction", max_fraction)):
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name} is {value}; it must be in (0, 1] (Michel et al. step by 0.1 up to 1.0)")
    grid_shape = importance.shape
    num_heads_total = importance.size
    num_steps = math.floor(max_fraction / step_fraction + 1e-9) + 1
    num_masked = np.unique([math.floor(k * step_fraction * num_heads_total + 0.5) for k in range(num_steps)])
    importance_order = np.argwhere(np.ones(grid_shape))[np.argsort(importance, axis=None, kind="stable")]
    random_order = np.argwhere(np.ones(grid_shape))[np.random.default_rng(seed).permutation(num_heads_total)]

    # Each distinct mask once, in the order step 0 (importance, random), step 1 (...), ...: both curves grow
    # together, and a mask the orders share (none or every head masked) fills both slots when measured.
    masks: dict[bytes, np.ndarray] = {}
    slots: dict[bytes, list[tuple[Order, int]]] = {}
    for step, count in enumerate(num_masked):
        for order, pairs in zip(ORDERS, (importance_order, random_order), strict=True):
            mask = _mask(pairs[:count], grid_shape)
            masks.setdefault(mask.tobytes(), mask)
            slots.setdefault(mask.tobytes(), []).append((order, step))
    metric_names: tuple[str, ...] | None = None
    values: dict[str, np.ndarray] = {}
    for done, (key, mask) in enumerate(masks.items(), start=1):
        names, measured = _as_metrics(evaluate(mask.copy()), metric_names)
        if metric_names is None:
            metric_names = names
            values = {order: np.full((len(num_masked), len(names)), np.nan) for order in ORDERS}
        for order, step in slots[key]:
            values[order][step] = measured
        yield Progress(done=done, total=len(masks), result=PruningCurve(
            grid_shape=grid_shape, metric_names=metric_names,
            fractions=num_masked / num_heads_total, num_masked=num_masked.astype(np.int64),
            importance_metrics=values["importance"].copy(), random_metrics=values["random"].copy(),
            importance_order=importance_order.astype(np.int64), random_order=random_order.astype(np.int64),
            seed=seed,
        ))


def pretraining_metric(
    model: nn.Module, batches: Iterable[Mapping[str, Any]]
) -> Callable[[np.ndarray], dict[str, float]]:
    """A ready `evaluate` for `BertForPreTraining`: head_mask -> {"mlm_accuracy", "nsp_accuracy", "loss"}.

    Over the given labelled batches (dicts of forward arguments with labels and next_sentence_label, e.g.
    `pretraining_sample(...)`): MLM accuracy over all masked positions, NSP accuracy over all pairs, loss =
    mean MLM cross-entropy + mean NSP cross-entropy (as `Trainer.evaluate` reports them). Eval mode, no
    gradients; the model's mode is restored after each call. A model without an NSP head (`has_nsp_head` False:
    BertForMaskedLM, DistilBERT…) is measured on its MLM alone: {"mlm_accuracy", "loss"}, NSP labels unread.
    """
    has_nsp_head = model.has_nsp_head
    batches = [dict(batch.model_inputs() if hasattr(batch, "model_inputs") else batch) for batch in batches]
    if not batches:
        raise ValueError("pretraining_metric needs at least one labelled batch to evaluate on")
    for index, batch in enumerate(batches):
        missing = {"input_ids", "labels", *(("next_sentence_label",) if has_nsp_head else ())} - batch.keys()
        if missing:
            raise ValueError(f"batch {index} lacks {', '.join(sorted(missing))}; the pretraining metric needs "
                             "masked-LM labels and NSP labels (e.g. from pretraining_sample)")
        if not has_nsp_head:
            batch.pop("next_sentence_label", None)  # a masked LM alone takes no NSP label
    num_layers, num_heads = model.config.num_hidden_layers, model.config.num_attention_heads

    def evaluate(head_mask: np.ndarray) -> dict[str, float]:
        head_mask = np.asarray(head_mask, dtype=np.float32)
        if head_mask.shape != (num_layers, num_heads):
            raise ValueError(f"head_mask has shape {head_mask.shape}; this model needs (layers, heads) = "
                             f"{(num_layers, num_heads)}")
        device = next(model.parameters()).device
        sums = np.zeros(6)  # mlm loss·n, mlm correct, n masked, nsp loss·b, nsp correct, b
        with eval_mode(model), torch.inference_mode():
            gate = torch.from_numpy(head_mask).to(device)
            for batch in batches:
                batch = {name: value.to(device) for name, value in batch.items()}
                output = model(**batch, head_mask=gate)
                labelled = batch["labels"] != IGNORE_INDEX  # (B, T)
                labels = batch["labels"][labelled]  # (N,)
                if has_nsp_head:
                    prediction_logits = output.prediction_logits  # (N, V): BertForPreTraining scores only these
                else:
                    prediction_logits = output.logits[labelled]  # (B, T, V) -> (N, V)
                sums[:3] += [
                    F.cross_entropy(prediction_logits.float(), labels, reduction="sum").item(),
                    (prediction_logits.argmax(-1) == labels).sum().item(), labels.numel(),
                ]
                if has_nsp_head:
                    nsp_labels = batch["next_sentence_label"].view(-1)  # (B,)
                    logits = output.seq_relationship_logits.float()  # (B, 2)
                    sums[3:] += [F.cross_entropy(logits, nsp_labels, reduction="sum").item(),
                                 (logits.argmax(-1) == nsp_labels).sum().item(), nsp_labels.numel()]
        mlm_loss, mlm_correct, num_masked, nsp_loss, nsp_correct, num_pairs = sums
        num_masked = max(num_masked, 1.0)
        if not has_nsp_head:
            return {"mlm_accuracy": mlm_correct / num_masked, "loss": mlm_loss / num_masked}
        return {"mlm_accuracy": mlm_correct / num_masked, "nsp_accuracy": nsp_correct / num_pairs,
                "loss": mlm_loss / num_masked + nsp_loss / num_pairs}

    return evaluate


# ---- internals -----------------------------------------------------------------------------------------------


def _checked_order(order: str) -> str:
    if order not in ORDERS:
        raise ValueError(f"order is {order!r}; use 'importance' or 'random'")
    return order


def _mask(pairs: np.ndarray, grid_shape: tuple[int, int]) -> np.ndarray:
    mask = np.ones(grid_shape, np.float32)
    if len(pairs):
        mask[pairs[:, 0], pairs[:, 1]] = 0.0
    return mask


def _as_metrics(value: Any, expected: tuple[str, ...] | None) -> tuple[tuple[str, ...], np.ndarray]:
    if isinstance(value, Mapping):
        names, numbers = tuple(str(name) for name in value), list(value.values())
    else:
        names, numbers = ("metric",), [value]
    try:
        numbers = np.array([float(number) for number in numbers], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"evaluate returned {value!r}; it must return a number or a {{name: number}} dict") from None
    if not names:
        raise ValueError("evaluate returned an empty dict; return at least one metric")
    if expected is not None and names != expected:
        raise ValueError(f"evaluate returned metrics {names} after {expected}; it must return the same names "
                         "every time")
    return names, numbers
