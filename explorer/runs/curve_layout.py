"""Which curves the training plots draw, and where: one layout for pretraining, one for fine-tuning. Qt-free.

The plots are three, one above the other on one step axis: the loss, a metric plot, the learning rate. A layout
names each plot's training curves (a point per step: smoothed over faint raw values, or drawn as they are) and
its held-out series (a point per evaluation), with their legend names and colours. Records reach the plots as
the engines yield them and as a metrics file is read back: `bertcore.training.pretraining.StepStats` / `EvalStats`
(pretraining), `bertcore.training.finetuning.TaskStepStats` / `TaskEvalStats` (fine-tuning); `record_values` reads
any of them into {statistic: value}, and `is_held_out` tells an evaluation from a step.

Fine-tuning's held-out series are the task's metrics under the names people know (accuracy, macro_f1,
entity_f1, exact_match, f1, pearson, spearman); a series is drawn (and in the legend) only once a value of it
arrives, so each task shows its own.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

LOSS_PLOT, METRIC_PLOT, LR_PLOT = range(3)


@dataclass(frozen=True)
class Curve:
    key: str  # the statistic (a field of the record, or a metric's name)
    name: str | None  # its legend entry; None: none (held-out dots beside the training curve of their colour)
    colour: str
    plot: int  # LOSS_PLOT, METRIC_PLOT or LR_PLOT
    smoothed: bool = False  # a training curve drawn smoothed (an EMA) over its faint raw values
    joined: bool = False  # held-out points joined by a dashed line (a fine-tuning run evaluates a few times)
    symbol: str = "o"  # a held-out point's marker (pyqtgraph's: "o" circle, "d" diamond)


@dataclass(frozen=True)
class CurveLayout:
    kind: str  # "pretraining" | "finetuning"
    metric_title: str  # the middle plot's axis title
    train: tuple[Curve, ...]
    held_out: tuple[Curve, ...]
    summary: tuple[tuple[str, str], ...]  # (statistic, label) of the newest step shown in the summary line
    held_out_summary: tuple[tuple[str, str], ...] = ()  # (statistic, label) of the newest evaluation

    def held_out_curve(self, key: str) -> Curve | None:
        return next((curve for curve in self.held_out if curve.key == key), None)


# Every pretraining objective's curves (bertcore.training.objectives): a run draws those whose values arrive, so
# each objective shows its own. The sentence tasks (NSP, SOP) share green, the masked LMs (MLM, ELECTRA's
# generator) orange: no objective has two of either. rtd's total is generator + 50 × discriminator loss.
_PRETRAINING_TRAIN = (
    Curve("loss", "total", "#1f77b4", LOSS_PLOT, smoothed=True),
    Curve("mlm_loss", "MLM", "#ff7f0e", LOSS_PLOT, smoothed=True),
    Curve("nsp_loss", "NSP", "#2ca02c", LOSS_PLOT, smoothed=True),
    Curve("sop_loss", "SOP", "#2ca02c", LOSS_PLOT, smoothed=True),
    Curve("generator_loss", "generator MLM", "#ff7f0e", LOSS_PLOT, smoothed=True),
    Curve("discriminator_loss", "discriminator", "#8c564b", LOSS_PLOT, smoothed=True),
    Curve("mlm_accuracy", "MLM", "#ff7f0e", METRIC_PLOT, smoothed=True),
    Curve("nsp_accuracy", "NSP", "#2ca02c", METRIC_PLOT, smoothed=True),
    Curve("sop_accuracy", "SOP", "#2ca02c", METRIC_PLOT, smoothed=True),
    Curve("generator_accuracy", "generator MLM", "#ff7f0e", METRIC_PLOT, smoothed=True),
    Curve("replaced_accuracy", "discriminator on replaced", "#e377c2", METRIC_PLOT, smoothed=True),
    Curve("original_accuracy", "discriminator on original", "#17becf", METRIC_PLOT, smoothed=True),
    Curve("learning_rate", "learning rate", "#9467bd", LR_PLOT),
)
PRETRAINING = CurveLayout(
    kind="pretraining", metric_title="accuracy", train=_PRETRAINING_TRAIN,
    held_out=tuple(Curve(c.key, None, c.colour, c.plot) for c in _PRETRAINING_TRAIN if c.smoothed),
    summary=(("loss", "loss"), ("mlm_accuracy", "MLM acc"), ("nsp_accuracy", "NSP acc"), ("sop_accuracy", "SOP acc"),
             ("generator_accuracy", "generator acc"), ("replaced_accuracy", "replaced acc"),
             ("original_accuracy", "original acc")),
)

# The task metrics, as bertcore.training.finetuning records them; a task has some of them (accuracy and macro_f1,
# pearson and spearman, entity_f1 and accuracy, exact_match and f1), so colours repeat only across tasks. The
# green ones are diamonds: a task's two metrics are often nearly equal, and a diamond on a circle shows both.
TASK_METRICS = (("accuracy", "#ff7f0e"), ("macro_f1", "#2ca02c"), ("entity_f1", "#2ca02c"),
                ("exact_match", "#9467bd"), ("f1", "#2ca02c"), ("pearson", "#ff7f0e"), ("spearman", "#2ca02c"))
FINETUNING = CurveLayout(
    kind="finetuning", metric_title="task metric",
    train=(Curve("loss", "loss", "#1f77b4", LOSS_PLOT, smoothed=True),
           Curve("accuracy", "accuracy (train batches)", "#ff7f0e", METRIC_PLOT, smoothed=True),
           Curve("learning_rate", "learning rate", "#9467bd", LR_PLOT)),
    held_out=(Curve("loss", "held-out loss", "#1f77b4", LOSS_PLOT, joined=True),
              *(Curve(key, f"{key} (held-out)", colour, METRIC_PLOT, joined=True,
                      symbol="d" if colour == "#2ca02c" else "o") for key, colour in TASK_METRICS)),
    summary=(("loss", "loss"),),
    held_out_summary=tuple((key, f"held-out {key}") for key, _ in TASK_METRICS),
)


def is_held_out(record: Any) -> bool:
    """True for an evaluation record (EvalStats, TaskEvalStats), False for a step's (they say total_steps)."""
    return not hasattr(record, "total_steps")


def record_values(record: Any) -> dict[str, float]:
    """{statistic: value} of a step or evaluation record of either engine (NaN where a file did not say)."""
    metrics = getattr(record, "metrics", None)
    if metrics is not None:  # fine-tuning: the task's metrics by name
        values = {"loss": float(record.loss), **{key: float(value) for key, value in metrics.items()}}
        if hasattr(record, "learning_rate"):
            values["learning_rate"] = float(record.learning_rate)
        return values
    return {field.name: float(getattr(record, field.name)) for field in dataclasses.fields(record)
            if isinstance(getattr(record, field.name), float)}


def layout_for_run(run_config: dict) -> CurveLayout:
    """The layout of a run folder's run_config.json: fine-tuning when its "training" names a task."""
    from explorer.runs.run_watch import is_finetuning_run

    return FINETUNING if is_finetuning_run(run_config) else PRETRAINING


def summary_line(layout: CurveLayout, step: int, values: dict[str, float], held_out: dict[str, float]) -> str:
    """"dots = held-out · step 120 · loss 0.612 · held-out accuracy 0.741" for the newest step and evaluation."""
    parts = ["dots = held-out", f"step {step:,}"]
    parts += [f"{label} {values[key]:.3f}" for key, label in layout.summary if math.isfinite(values.get(key, math.nan))]
    parts += [f"{label} {held_out[key]:.3f}" for key, label in layout.held_out_summary
              if math.isfinite(held_out.get(key, math.nan))][:2]
    return "  ·  ".join(parts)
