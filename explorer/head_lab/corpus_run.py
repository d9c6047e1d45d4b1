"""The head lab's corpus sample, without Qt: importance and roles over held-out corpus pairs, and the pruning
curve, as one generator of `CorpusProgress` records (`corpus_run`; each `yield` is a point where the app can
cancel). Ranked as explorer.head_lab.analyses ranks "this input", so both sources read the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from explorer.head_lab.analyses import NO_HEADS_NOTE, OBJECTIVES, HeadScores, HeldOutData


@dataclass(frozen=True)
class CorpusSettings:
    """A background run over held-out corpus pairs."""

    num_pairs: int = 256  # pairs for importance and for roles (and as many again to evaluate the pruning curve)
    seq_len: int = 128  # tokens per pair at most (the model's max positions caps it)
    batch_size: int = 32  # pairs per forward pass: one batch is the cancel latency
    objective: str = "mlm"  # a key of OBJECTIVES
    corpus_path: str | None = None  # a .txt file or folder; None = the built-in corpus
    seed: int = 0  # the held-out split and its masks (seed 0 is the split the default model was trained with)
    importance: bool = True  # what the run ends with; `corpus_run` computes only what its `known` lacks
    roles: bool = True
    pruning: bool = False  # also the pruning curve (Michel et al. 2019, figure 3), steps of 10%

    @property
    def roles_batch_size(self) -> int:
        """Roles read every layer's attention maps, a forward pass without gradients: a quarter of the batch
        keeps a batch (the cancel latency) about as long as an importance batch (MiniLM: 3.3 s -> 0.8 s)."""
        return max(1, self.batch_size // 4)

    def same_sample(self, other: CorpusSettings) -> bool:
        """Whether `other` samples the same pairs and takes the same loss (what it computes aside)."""
        flags = {"importance": True, "roles": True, "pruning": False}
        return dataclasses.replace(self, **flags) == dataclasses.replace(other, **flags)

    def __post_init__(self) -> None:
        for name, value, low in (("num_pairs", self.num_pairs, 2), ("seq_len", self.seq_len, 16),
                                 ("batch_size", self.batch_size, 1)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} is {value!r}; it must be an integer of at least {low}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective is {self.objective!r}; use one of {', '.join(OBJECTIVES)}")


STAGES = {"preparing": "reading the corpus", "importance": "importance", "roles": "roles",
          "evaluating": "pruning curve"}


@dataclass(frozen=True)
class CorpusProgress:
    """One step of a corpus run: the stage, how far it is, and every result so far (plain values)."""

    stage: str  # a key of STAGES
    done: int  # units of this stage finished (batches, or evaluations for the pruning curve)
    total: int  # units in this stage
    scores: HeadScores | None = None  # the corpus importance and roles so far
    curve: Any = None  # bertcore.analysis.pruning.PruningCurve so far
    note: str = ""  # e.g. why importance was skipped

    @property
    def text(self) -> str:
        if self.stage == "preparing":
            return "reading the corpus and sampling held-out pairs…"
        return f"{STAGES[self.stage]}: {self.done} / {self.total}"


@dataclass
class _CorpusResults:
    grid: tuple[int, int]
    caption: str
    importance: np.ndarray | None = None
    roles: Any = None
    note: str = ""
    scores: HeadScores | None = field(default=None)

    def update(self) -> HeadScores:
        self.scores = HeadScores(source="corpus", caption=self.caption, grid_shape=self.grid,
                                 importance=self.importance, roles=self.roles, importance_note=self.note)
        return self.scores


def corpus_run(model: Any, tokenizer: Any, settings: CorpusSettings, known: HeadScores | None = None,
               held_out: HeldOutData | None = None) -> Iterator[CorpusProgress]:
    """Importance and roles over `settings.num_pairs` held-out pairs, then (if asked) the pruning curve over as
    many other held-out pairs, yielding after every batch or evaluation. `known`: corpus scores of an earlier
    run on the same sample and loss; what it holds is not computed again (a curve after an importance run).
    `held_out`: where the tokenized corpus is kept between runs."""
    from bertcore.analysis.importance import iter_head_importance, pretraining_sample
    from bertcore.analysis.pruning import iter_pruning_curve, pretraining_metric
    from bertcore.analysis.roles import iter_corpus_head_roles, role_sample

    config = model.config
    grid = (config.num_hidden_layers, config.num_attention_heads)
    has_heads = model.has_mlm_head or model.has_nsp_head
    if not model.has_nsp_head and settings.objective != "mlm":
        # a masked LM alone takes no NSP label (and has no NSP loss to rank heads by): its loss is the MLM's
        settings = dataclasses.replace(settings, objective="mlm")
    yield CorpusProgress("preparing", 0, 1)
    seq_len = min(settings.seq_len, config.max_position_embeddings)
    data = (held_out or HeldOutData()).get(tokenizer, settings.corpus_path, seq_len, settings.seed)
    source = data.corpus.source
    if data.heldout is None:
        raise ValueError(f"the corpus {source} is too small to hold out pairs the model was not trained on; "
                         "pick a larger corpus")
    where = f"{settings.num_pairs} held-out pairs of {Path(source).name}"
    results = _CorpusResults(grid, f"{where} ({OBJECTIVES[settings.objective]} loss)" if has_heads else where)
    yield CorpusProgress("preparing", 1, 1)  # the corpus is read and tokenized (kept for the next run)
    if known is not None and known.grid_shape == grid:
        results.importance, results.roles, results.note = known.importance, known.roles, known.importance_note
    wants_importance = (settings.importance or settings.pruning) and results.importance is None
    if wants_importance and not has_heads:
        results.note = NO_HEADS_NOTE
    elif wants_importance:
        batches = pretraining_sample(data, settings.num_pairs, batch_size=settings.batch_size,
                                     objective=settings.objective)
        for progress in iter_head_importance(model, batches):
            results.importance = progress.result
            yield CorpusProgress("importance", progress.done, progress.total, results.update())
    if settings.roles and results.roles is None:
        sample = role_sample(data, settings.num_pairs, batch_size=settings.roles_batch_size, seed=settings.seed)
        for progress in iter_corpus_head_roles(model, tokenizer, sample):
            results.roles = progress.result
            yield CorpusProgress("roles", progress.done, progress.total, results.update(), note=results.note)
    scores = results.update()
    if settings.pruning and scores.normalized is not None:
        # evaluated on the held-out pairs after the importance sample's, so the curve is not measured on the
        # pairs the order was taken from
        skip = -(-settings.num_pairs // settings.batch_size)
        evaluation = pretraining_sample(data, skip * settings.batch_size + settings.num_pairs,
                                        batch_size=settings.batch_size,
                                        objective="mlm+nsp" if model.has_nsp_head else "mlm")[skip:]
        evaluate = pretraining_metric(model, evaluation)
        for progress in iter_pruning_curve(scores.normalized, _accuracies(evaluate)):
            yield CorpusProgress("evaluating", progress.done, progress.total, scores, progress.result)
    elif settings.pruning:
        yield CorpusProgress("evaluating", 0, 0, scores, note=scores.importance_note)


def _accuracies(evaluate):
    """The pretraining metric without its loss: the curve plots accuracies (both on one 0–1 axis)."""

    def accuracies(head_mask: np.ndarray) -> dict[str, float]:
        values = evaluate(head_mask)
        return {name: value for name, value in values.items() if name != "loss"}

    return accuracies
