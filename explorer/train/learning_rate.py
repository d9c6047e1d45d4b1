"""The learning rate the Train tab suggests for the objective chosen.

The other objectives keep the tab's 1e-3 (TrainingSettings' default). ELECTRA's replaced-token detection cannot:
with the tab's other defaults (tiny preset, Tiny Shakespeare, 300 steps of 16 × 64) its discriminator settles on
"always original" at 1e-3 (held-out replaced accuracy 0.0 at step 300, seeds 0, 1 and 2; at 2e-3 too, 0.04 at
5e-4), while at 2e-4 it finds 0.44 / 0.40 / 0.47 of the replaced tokens and keeps 0.94-0.96 of the originals
(1e-4, seed 0: 0.52). The form follows the objective until the user types a rate; `bert-train --lr` keeps its own
default (5e-4) for every objective.
"""

from __future__ import annotations

from bertcore.models.families import pretraining_objectives
from explorer.runs.training_run import TrainingSettings

# Objectives that learn at another rate than TrainingSettings.learning_rate with the tab's other defaults (above).
OWN_LEARNING_RATES = {"rtd": 2e-4}


def suggested_learning_rate(objective: str | None, arch: str | None) -> float:
    """The rate for `objective` (None: the architecture's own; a loaded model, arch None, counts as BERT's)."""
    resolved = objective or (pretraining_objectives(arch or "bert") or ("mlm+nsp",))[0]
    return OWN_LEARNING_RATES.get(resolved, TrainingSettings.learning_rate)
