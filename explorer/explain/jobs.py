"""The Explain tab's work, Qt-free: what one job asks for, the records its generator yields, and which job runs.

Three kinds, each a frozen job captured in the GUI thread (`ExplainState.attribution_job()` and its siblings):
- "attribution": one `bertcore.explain.attribute` per chosen method, then each one's deletion / insertion curves
  (`bertcore.explain.faithfulness`);
- "mixing": context mixing of the chosen method and of raw attention (with attention rollout);
- "patching": the corrupted run restored from the clean one, over the residual stream, then over the heads.
`job_steps(job)` is the work as a generator of `JobRecord`s (progress, and a result when one is complete): each
`yield` is a point where it can be stopped (the tab's `GeneratorWorker` closes it). `JobQueue` decides which job
runs next: one at a time, since the patching's forward passes and an attribution's gradients must not share the
model between two threads, and the newest job of a kind wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bertcore.tokenization.wordpiece import Encoding

JOB_KINDS = ("attribution", "mixing", "patching")  # also the order they run in
PATCHING_OVER = ("residual", "heads")


@dataclass(frozen=True)
class AttributionJob:
    kind = "attribution"
    request_id: int
    model: Any
    tokenizer: Any
    encoding: Encoding  # as the model saw it
    target: tuple
    methods: tuple[str, ...]
    steps: int


@dataclass(frozen=True)
class MixingJob:
    kind = "mixing"
    request_id: int
    model: Any
    tokenizer: Any
    encoding: Encoding
    method: str


@dataclass(frozen=True)
class PatchingJob:
    kind = "patching"
    request_id: int
    model: Any
    tokenizer: Any
    clean: Encoding
    corrupted: Encoding
    target: tuple


@dataclass(frozen=True)
class JobRecord:
    """One step of a job, as its generator yields it: how far it is, and a result when one is complete."""

    kind: str
    request_id: int
    fraction: float  # of the whole job, in [0, 1]
    text: str  # what it is doing, for the status line
    item: tuple[str, str, Any] | None = None  # (what, key, value): ("attribution", method, Attribution), …


# ---------------------------------------------------------------- the work, as plain generators


def job_steps(job: AttributionJob | MixingJob | PatchingJob) -> Iterator[JobRecord]:
    """The records of one job, computed as they are asked for: stop asking (or `close()`) to cancel."""
    if isinstance(job, AttributionJob):
        return _attribution_steps(job)
    if isinstance(job, MixingJob):
        return _mixing_steps(job)
    return _patching_steps(job)


def _attribution_steps(job: AttributionJob) -> Iterator[JobRecord]:
    """Every method's attribution first (what the click asked to see), then each one's faithfulness curves."""
    from bertcore.explain.attribution import attribute_progress

    share = 1.0 / (2 * len(job.methods))
    attributions = {}
    for index, method in enumerate(job.methods):
        start = index * share
        attribution = None
        for progress in attribute_progress(job.model, job.tokenizer, job.encoding, job.target, method=method,
                                           steps=job.steps):
            attribution = progress.result
            inner = progress.fraction if progress.fraction is not None else 0.0
            yield JobRecord(job.kind, job.request_id, start + share * inner, f"{method_words(method)}: "
                            f"{progress.done} of {progress.total or '?'} evaluations")
        attributions[method] = attribution
        yield JobRecord(job.kind, job.request_id, start + share, f"{method_words(method)}: done",
                        ("attribution", method, attribution))
    from bertcore.explain.faithfulness import faithfulness

    for index, method in enumerate(job.methods):
        curves = faithfulness(job.model, job.tokenizer, job.encoding, job.target, attributions[method].scores)
        yield JobRecord(job.kind, job.request_id, 0.5 + (index + 1) * share,
                        f"{method_words(method)}: faithfulness done", ("faithfulness", method, curves))


def _mixing_steps(job: MixingJob) -> Iterator[JobRecord]:
    """The chosen measure, then raw attention: a record per layer measured, so Cancel stops a long input between
    two layers (ALTI over 500 tokens of MiniLM takes tens of seconds on two cores)."""
    from bertcore.explain.mixing import context_mixing_progress

    methods = (job.method,) if job.method == "attention" else (job.method, "attention")
    for index, method in enumerate(methods):
        yield JobRecord(job.kind, job.request_id, index / len(methods), f"context mixing: {method_words(method)}…")
        for progress in context_mixing_progress(job.model, job.tokenizer, job.encoding, method):
            inner = progress.fraction if progress.fraction is not None else 0.0
            item = None if progress.result is None else ("mixing", method, progress.result)
            yield JobRecord(job.kind, job.request_id, (index + inner) / len(methods),
                            f"context mixing: {method_words(method)}, {progress.done} of {progress.total} layers",
                            item)


def _patching_steps(job: PatchingJob) -> Iterator[JobRecord]:
    from bertcore.explain.patching import activation_patching_progress

    for index, over in enumerate(PATCHING_OVER):
        result = None
        for progress in activation_patching_progress(job.model, job.tokenizer, job.clean, job.corrupted, job.target,
                                                     over=over):
            result = progress.result
            inner = progress.fraction if progress.fraction is not None else 0.0
            # the rows measured so far are drawn as they come (the rest are NaN)
            yield JobRecord(job.kind, job.request_id, (index + inner) / len(PATCHING_OVER),
                            f"patching the {over}: {progress.done} of {progress.total or '?'} layers",
                            None if result is None else ("patching", over, result))
        yield JobRecord(job.kind, job.request_id, (index + 1) / len(PATCHING_OVER), f"patching the {over}: done",
                        ("patching", over, result))


def method_words(method: str) -> str:
    """A method's name in words: "integrated gradients"."""
    return method.replace("_", " ")


# ---------------------------------------------------------------- which job runs


class JobQueue:
    """One job runs at a time, the kinds in JOB_KINDS order; a job waiting is replaced by a newer one of its kind,
    and a newer job of the running one's kind asks for the running one to stop (newest wins). Plain Python: the
    tab runs what it says."""

    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}  # kind → the newest job of that kind not started yet
        self.running: Any = None

    def submit(self, job: Any) -> bool:
        """Queue `job`; True when the running job must be stopped (it is of the same kind, so now stale)."""
        self.pending.pop(job.kind, None)
        self.pending[job.kind] = job
        return self.running is not None and self.running.kind == job.kind

    def start_next(self) -> Any:
        """The job to start now (it becomes `running`), or None while one runs or none waits."""
        if self.running is not None or not self.pending:
            return None
        kind = min(self.pending, key=JOB_KINDS.index)  # the attributions first: they answer the click
        self.running = self.pending.pop(kind)
        return self.running

    def ended(self, job: Any) -> None:
        """`job` has ended (finished, stopped or failed); another may start."""
        if self.running is job:
            self.running = None

    def cancel(self) -> bool:
        """Drop every waiting job; True when there is a running one to stop."""
        self.pending.clear()
        return self.running is not None
