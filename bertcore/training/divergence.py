"""Noticing a loss that explodes without becoming NaN (a learning rate far too high), early and without false alarms.

The check: an exponential moving average of the training loss (weight 0.9 on the past, about the last ten
steps, so one unlucky batch cannot trip it) against the lowest value that average has reached so far. The run
has diverged when the average stays more than `factor` times above that best value for `patience` steps in a
row; the first step above it is a warning.

Why 4 × the best smoothed loss, with a floor of 1 nat, for 10 steps (the TrainingConfig defaults):
- A model that knows nothing guesses uniformly: a loss of about ln(V) + ln 2 (9.7 for 8000 WordPiece tokens).
  Training only goes down from there, and the ten-step average of a healthy run moves by percents, not by
  factors. Four times the best is above the uniform-guessing loss at every point of a run (4 × 9.7 at the
  start, 4 × 2.5 = 10 late on): reaching it takes confidently wrong predictions, i.e. weights blown up.
- The best value, not the first one, is the reference: it also works for a run that continues a trained model
  (init_from, resume), and late in a run, where falling back to the starting loss is already a disaster.
- Below 1 nat the relative noise of a small batch is large (0.1 → 0.4 is no divergence), hence the floor.
- Ten steps of patience let a transient spike (a warm-up overshoot) settle; a real divergence only grows.

Torch-free and plain numbers in, plain numbers out, so any training loop can use it; `state_dict()` goes into a
checkpoint so that a resumed run keeps watching the same curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SMOOTHING = 0.9  # weight of the past in the moving average: about the last 1 / (1 - 0.9) = 10 steps
LOSS_FLOOR = 1.0  # nats; the reference never goes below it (see above)

# The learning rates runs usually succeed with, (low, high, in words): BERT-base was pretrained at 1e-4 and small
# BERTs take up to about 1e-3; the BERT paper fine-tuned base models at 2e-5 to 5e-5.
PRETRAINING_LEARNING_RATES = (1e-4, 1e-3, "1e-4 to 1e-3 for pretraining a small BERT")
FINETUNING_LEARNING_RATES = (2e-5, 5e-5, "2e-5 to 5e-5 for fine-tuning BERT-base (small models take up to 2e-4)")


def learning_rate_advice(lr: float, *, pretraining: bool) -> str:
    """What to change after a NaN or a diverging loss at learning rate `lr`, as a clause ("lower the learning rate
    (now 1e+30) into the usual range ..."). A tenth of an absurd rate is still absurd, so a rate above the usual
    range is pointed into it; one within it is halved; one below it is not the likely cause."""
    low, high, usual = PRETRAINING_LEARNING_RATES if pretraining else FINETUNING_LEARNING_RATES
    if lr > high:
        middle = math.sqrt(low * high)  # 3e-04 or 3e-05 once rounded: a round value in the middle of the range
        return (f"lower the learning rate (now {lr:g}) into the usual range, {usual}: e.g. {middle:.0e}; or lengthen "
                "the warm-up")
    if lr >= low:
        return (f"lower the learning rate (now {lr:g}), already within the usual range ({usual}), e.g. to "
                f"{lr / 2:.2g}, or lengthen the warm-up")
    return (f"the learning rate (now {lr:g}) is already below the usual range ({usual}), so it is not the likely "
            "cause: lengthen the warm-up, clip the gradients (--max-grad-norm 1) or train in fp32 (--precision "
            "fp32)")


@dataclass
class DivergenceMonitor:
    """Feed it every step's loss (`update`); it says whether the run is rising far (`rising`), has diverged
    (`diverged`), and describes the curve in words. factor = 0 only tracks the average and never trips."""

    factor: float = 4.0
    patience: int = 10
    smoothed: float | None = None  # the moving average after the latest step
    best: float | None = None  # its lowest value so far
    best_step: int = 0  # the step at which it was lowest
    steps_above: int = 0  # consecutive steps the average has been above factor × max(best, LOSS_FLOOR)

    def update(self, step: int, loss: float) -> None:
        self.smoothed = loss if self.smoothed is None else SMOOTHING * self.smoothed + (1 - SMOOTHING) * loss
        if self.best is None or self.smoothed < self.best:
            self.best, self.best_step = self.smoothed, step
        above = self.factor > 0 and self.smoothed > self.factor * max(self.best, LOSS_FLOOR)
        self.steps_above = self.steps_above + 1 if above else 0

    @property
    def rising(self) -> bool:
        """The average is far above its best now: checkpoints written now are not to be trusted."""
        return self.steps_above > 0

    @property
    def started_rising(self) -> bool:
        """This step is the first of a stretch above the threshold: the moment to warn."""
        return self.steps_above == 1

    def confirms(self, loss: float) -> bool:
        """Whether `loss`, measured on weights saved after the previous step, shows they were still sane: it is
        finite and not far above the best, and the run is not rising. (A checkpoint's own loss is only seen at
        the next step; a single update with a learning rate far too high can blow a model up.)"""
        return math.isfinite(loss) and not self.rising and (
            self.factor <= 0 or self.best is None or loss <= self.factor * max(self.best, LOSS_FLOOR))

    @property
    def diverged(self) -> bool:
        return self.factor > 0 and self.steps_above >= self.patience

    def describe(self, step: int) -> str:
        """'the smoothed loss is 93.1 at step 40, 9.6× its best of 9.7 (step 3)'."""
        ratio = self.smoothed / self.best if self.best else float("inf")
        return (f"the smoothed loss is {self.smoothed:.4g} at step {step}, {ratio:.1f}× its best of "
                f"{self.best:.4g} (step {self.best_step})")

    def state_dict(self) -> dict[str, Any]:
        return {"smoothed": self.smoothed, "best": self.best, "best_step": self.best_step,
                "steps_above": self.steps_above}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.smoothed, self.best = state["smoothed"], state["best"]
        self.best_step, self.steps_above = int(state["best_step"]), int(state["steps_above"])
