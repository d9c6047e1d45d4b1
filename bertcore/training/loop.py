"""The training loop every run shares, whole: what is trained is a `TrainingTask` (pretraining, fine-tuning).

Nothing here knows about BERT's heads, its data or a GUI. `TrainingLoop.steps()` yields one frozen record of
plain numbers per optimisation step (the task's own class: `bertcore.training.pretraining.StepStats` for pretraining,
`bertcore.training.finetuning.TaskStepStats` for fine-tuning); the command lines and the app's worker thread consume it.
`bertcore.training.pretraining.Trainer` and `bertcore.training.finetuning.Finetuner` are this loop with their task
built in.

This module owns the loop's machinery, in reading order: setting a run up (the device, the run folder and its
lock, the resume, AdamW with decay groups, DistributedDataParallel, torch.compile, bf16 autocast), the controls
another thread may use, evaluation, `steps()`, one optimisation step (its schedule, re-seeded dropout, gradient
clipping and the NaN/OOM/divergence errors), the checkpoints (atomic, with trainer_state.pt; which one is known to
be sane; final/) and summary.json; then the plain functions the loop is set up with. It is one class because it is
one thing: every part reads and writes the same state, which `__init__` and `_set_up` name in one place, and, as
nanoGPT's train.py, the loop reads best whole.

A task owns what the numbers mean (see `TrainingTask`): it builds or loads the model and its data, gives the
batch of a step, turns one forward pass into numbers that add up over batches and processes (`batch_sums`),
turns the summed numbers into the loss and the step record (`loss_of`, `step_stats`), and evaluates the model
on its held-out data (`evaluate`).

From any other thread, while the loop runs (each request is a flag read at the next step boundary, so no step is
cut in half):
    loop.request_stop()       finish the current step, evaluate, write a checkpoint, end the iteration
    loop.pause() / .resume()  block / release the loop at the next step boundary (stop also releases it)
    loop.request_checkpoint() write a checkpoint at the next step boundary (its record's .checkpoint says where)
    loop.save_checkpoint()    write one now (blocks the loop only for the write)
    loop.snapshot_state_dict() / loop.snapshot_model()   CPU copies of the current weights, for probing
A consumer may also simply stop iterating (or `close()` the generator): nothing more is trained and nothing is
written (call `save_checkpoint()` to keep the progress); calling `steps()` again continues from that step.
Only one `steps()` loop may run at a time. `loop.close()` (or leaving `with ... as loop:`) releases the run
folder for good.

metrics.jsonl holds one JSON record per line: the task's step record ("kind": "step"), its evaluation record
("kind": "eval"), {"kind": "checkpoint", "step", "path", "smoothed_loss", "sane"}, {"kind": "warning" | "error",
"step", "message"}; per step: its "step" record, then "warning", "eval", "checkpoint" if any, then what the analysis
hook hands back.

What measures the model as it trains (`analysis=`, an `AnalysisHook`: bertcore.analysis.schedule.AnalysisSchedule
runs `--analysis-every`'s records) is given to the loop, which never reaches into the analyses itself: it calls the
hook at its step boundaries, writes the records the hook hands back to metrics.jsonl, and puts the analysis record
on the step record it yields (its `analysis` field: the record finished since the previous yield, else None).

One loop at a time per run folder: the loop takes the folder's lock when it is created (a second process or
loop on the folder is refused at once with RunFolderBusyError naming the holder's pid), lets go of it when a
`steps()` loop ends, and takes it back for a later loop or save unless another run changed the folder
meanwhile (bertcore.files.run_folder.RunClaim); `close()` releases it for good.

Faults end the loop with a TrainingError whose message says what to change, recorded in metrics.jsonl:
NonFiniteLossError (NaN/inf loss), DivergenceError (a loss exploding without NaN, see bertcore.training.divergence; the
step record's `warning` says so first), OutOfMemoryTrainingError, CheckpointWriteError (disk full: nothing
half-written, the previous checkpoint still the latest; whatever the writing library raised). After a NaN or a
divergence the error names the newest checkpoint known to be sane (`last_good_checkpoint`: written while the loss
was sane, and its weights still gave a sane loss at the next step; never pruned). Each checkpoint's sanity.json
records whether the loss was sane when it was written, and is set to false when its weights then gave a NaN or
an exploding loss, so a later resume passes over it.

Resuming restores weights, optimizer moments, step (hence learning-rate schedule and data position: a task's
batch of step s is a pure function of (seed, rank, s)) and dropout randomness (re-seeded per step from
(seed, rank, step)), so a resumed run continues the same loss curve. `resume=True` continues from the newest
checkpoint whose loss was sane: after a NaN or a divergence the checkpoints written once the loss had gone bad
are passed over, and `resume_note` (also a "warning" record) names them; a named checkpoint is used as it is.

Several processes: launch under `torchrun --nproc_per_node=N`; when torch.distributed is initialised the model
is wrapped in DistributedDataParallel, every rank draws its own batches, step statistics are summed over ranks,
and only rank 0 evaluates and writes files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn

from bertcore.data.batches import step_rng
from bertcore.errors import (
    DivergenceError,
    NonFiniteLossError,
    OutOfMemoryTrainingError,
    RunFolderError,
    RunFolderWriteError,
    TrainingError,
)
from bertcore.files.file_names import TRAINER_STATE_FILE
from bertcore.files.metrics_log import MetricsLog
from bertcore.files.reading import open_regular_file
from bertcore.files.run_folder import ResumeChoice, RunClaim, RunFolder
from bertcore.models.bert import BertForPreTraining
from bertcore.training.batches_ahead import BatchesAhead
from bertcore.training.divergence import DivergenceMonitor, learning_rate_advice
from bertcore.training.reporting import ReportedMetrics, check_report_to, with_reporters
from bertcore.training.settings import linear_schedule
from bertcore.training.task import TrainingTask

TRAINER_STATE_VERSION = 1


class AnalysisHook(Protocol):
    """What measures the model beside the loop, at its step boundaries, on rank 0 (bertcore.analysis.schedule.
    AnalysisSchedule: the records of `--analysis-every`). Each call that hands back records hands back metrics.jsonl
    records: at most one "analysis" record, and "warning" records (a measurement that failed)."""

    def attach(self, loop: TrainingLoop) -> None:
        """Once, at the end of the loop's setup: read what it measures and check the model takes it (a ValueError
        naming what is wrong stops the run before it trains)."""

    def begin(self) -> None:
        """A steps() loop starts at loop.step (a new run's step 0 is measured here)."""

    def after_step(self) -> list[dict[str, Any]]:
        """At a step boundary, loop.step's weights current: the records to write now."""

    def end(self, *, cancel: bool) -> list[dict[str, Any]]:
        """The steps() loop ended: the records finished since the last boundary; `cancel` drops what is still being
        measured (a fault, or a consumer that stopped iterating). Called again, it hands back nothing."""

    def close(self) -> None:
        """The loop is closed for good: let go of threads and copies."""


class TrainingLoop:
    """One run of `task` with the settings of `config` (a TrainingConfig or a FinetuneConfig: out_dir, seed,
    device, num_threads, batch_size, seq_len, lr, weight_decay, adam_betas, adam_eps, max_grad_norm, precision,
    compile, eval_every, checkpoint_every, keep_checkpoints, divergence_factor, divergence_patience).

    Construction does the setup work (the task reads its data, builds or loads the model; run_config.json is
    written): create it in the worker thread. It takes the run folder's lock (RunFolderBusyError when another
    run holds it). `resume=True` continues the run in `config.out_dir` from its latest checkpoint; a path
    continues from that checkpoint folder, which must belong to that run. `analysis` measures the model as it
    trains (an AnalysisHook; a config whose `analysis_every` asks for records needs one).
    """

    def __init__(self, config, task: TrainingTask, *, resume: bool | str | Path = False,
                 command: list[str] | None = None, analysis: AnalysisHook | None = None):
        # Only pretraining's config declares analysis_every; the loop hears of it to refuse a run that would
        # silently measure nothing.
        if getattr(config, "analysis_every", 0) and analysis is None:
            raise ValueError(f"analysis_every is {config.analysis_every}, but the loop was given nothing to measure "
                             "the model with: pass analysis=bertcore.AnalysisSchedule() (bert-train and the app do)")
        self.config = config
        self.task = task
        self.analysis = analysis
        self.rank, self.world_size, local_rank = distributed()
        self.is_main = self.rank == 0
        self.device = resolve_device(config.device, local_rank)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.run_folder = RunFolder(config.out_dir)
        self.out_dir = self.run_folder.path
        self.checkpoint_dir = self.run_folder.checkpoints_dir
        self._lock = threading.RLock()  # guards the weights/optimizer against the loop and other threads
        # open while a steps() loop runs (rank 0); its records also reach config.report_to's tools (reporting)
        self._metrics: MetricsLog | ReportedMetrics | None = None
        self._claim = None
        self._batches: BatchesAhead | None = None  # the coming steps' batches, while a steps() loop runs
        # The controls: flags another thread sets and the loop reads at its next step boundary.
        self._stop = threading.Event()
        self._unpaused = threading.Event()
        self._unpaused.set()
        self._checkpoint_requested = threading.Event()
        self.resumed_from: Path | None = None  # the checkpoint this run continued from (set by _choose_start)
        self.resume_note: str | None = None  # which checkpoints a resume passed over (after a NaN or divergence)
        # What is being written right now ("the checkpoint", "the final weights"), or None: a second Ctrl-C
        # waits for such a write instead of aborting it (bertcore.cli.common).
        self.writing: str | None = None
        # From here on this process writes into the folder: hold its lock (rank 0 writes for every rank).
        self._claim = RunClaim(self.run_folder, hold=self.is_main, owner=f"this {type(self).__name__}")
        try:
            check_report_to(config.report_to)  # a missing package said now, not after the setup
            self._set_up(resume, command)
        except BaseException:
            self.close()
            raise

    def _set_up(self, resume: bool | str | Path, command: list[str] | None) -> None:
        config, task = self.config, self.task
        state, start = self._choose_start(resume)  # before the task spends its setup on a folder it cannot use
        task.setup(self, self.resumed_from)
        self.config = config = task.config  # as the task resolved it (e.g. fine-tuning's steps from epochs)
        self.tokenizer = task.tokenizer
        self.total_steps = task.total_steps
        self.model = task.model.to(self.device)  # the plain module: weights, checkpoints, snapshots, evaluation
        self.model.train()
        self.optimizer = make_optimizer(weight_decay_groups(self.model, config.weight_decay), lr=config.lr,
                                        betas=config.adam_betas, eps=config.adam_eps)
        self.step = 0
        self._elapsed_before = 0.0
        self._session_started: float | None = None
        self._paused_seconds = 0.0
        # The smoothed loss and whether the run still looks sane; checkpoints keep it, a resume restores it.
        self._divergence = DivergenceMonitor(config.divergence_factor, config.divergence_patience)
        self.last_checkpoint: Path | None = self.resumed_from  # the newest checkpoint written (or resumed)
        # The newest checkpoint known to be sane: written while the run was not rising, and whose weights gave a
        # sane loss at the next step (or the loop ended without a fault). Never pruned.
        self.last_good_checkpoint: Path | None = start.last_good if start else None
        self._unconfirmed_checkpoint: Path | None = None  # written while sane; its loss comes with the next step
        if start is not None and start.sane is not False and self.is_main:
            self._unconfirmed_checkpoint = start.folder  # the first step's loss shows whether its weights really are
        if state is not None:
            self._restore(state)
        self._train_model: nn.Module = self.model  # what the step runs: maybe DDP-wrapped and/or compiled
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            self._train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if config.compile:
            self._train_model = torch.compile(self._train_model)
        self.autocast_dtype = autocast_dtype(config.precision, self.device)

        self.last_eval = None  # the newest evaluation record
        if self.analysis is not None and self.is_main:
            self.analysis.attach(self)
        if self.is_main:
            self._prepare_run_folder(command)
        if self.world_size > 1:
            dist.barrier()

    def _choose_start(self, resume: bool | str | Path) -> tuple[dict[str, Any] | None, ResumeChoice | None]:
        """Where the run starts (the run folder's `start`: None for a new run, else the checkpoint a resume continues
        from, and the newest one known to be sane), with its trainer state; sets resumed_from and resume_note."""
        judged: dict[Path, dict[str, Any]] = {}

        def sane_by_state(folder: Path) -> bool:
            # A checkpoint without sanity.json (written before there was one): its trainer state says.
            judged.clear()
            judged[folder] = read_trainer_state(folder / TRAINER_STATE_FILE)
            return bool(judged[folder].get("sane", True))

        start = self.run_folder.start(resume, judge=sane_by_state)
        if start is None:
            return None, None
        self.resumed_from, self.resume_note = start.folder, start.note()
        return judged.get(start.folder) or read_trainer_state(start.folder / TRAINER_STATE_FILE), start

    def _restore(self, state: dict[str, Any]) -> None:
        path = self.resumed_from / TRAINER_STATE_FILE
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError, IndexError) as error:
            raise RunFolderError(f"{path}: its optimizer state does not fit this model ({error}); the checkpoint "
                                 "is damaged. Resume from an earlier checkpoint, or start a new run") from None
        self.step = int(state["step"])
        self._elapsed_before = float(state["elapsed_seconds"])
        if "divergence" in state:  # absent in checkpoints written before the divergence check
            self._divergence.load_state_dict(state["divergence"])

    def _prepare_run_folder(self, command: list[str] | None) -> None:
        run_config = {
            "training": self.config.to_dict(), **self.task.run_config(),
            "num_parameters": self.model.num_parameters(), "world_size": self.world_size,
            "process_group": process_group_backend(), "device": str(self.device), "torch_version": torch.__version__,
            "command": command, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        self._metrics = with_reporters(self.run_folder.begin(self.tokenizer, run_config,
                                                             resumed_at_step=self.step if self.resumed_from else None,
                                                             note=self.resume_note),
                                       self.config.report_to, self.out_dir, first_step=self.step + 1)

    # ---- the run folder's lock -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the run folder (its lock) and close the metrics file, for good: a closed loop neither
        trains nor saves. Idempotent; also done on leaving `with ... as loop:`."""
        if self.analysis is not None:
            self.analysis.close()
        with self._lock:
            if self._metrics is not None:
                self._metrics.close()
                self._metrics = None
            if self._claim is not None:
                self._claim.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


    # ---- what another thread may ask -----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop at the next step boundary (after writing a checkpoint); also ends a pause."""
        self._stop.set()
        self._unpaused.set()

    def pause(self) -> None:
        """Block the loop at the next step boundary until `resume()` or `request_stop()`."""
        self._unpaused.clear()

    def resume(self) -> None:
        self._unpaused.set()

    @property
    def is_paused(self) -> bool:
        return not self._unpaused.is_set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_checkpoint(self) -> None:
        """Write a checkpoint at the next step boundary (the yielded record's .checkpoint names it)."""
        self._checkpoint_requested.set()

    def snapshot_state_dict(self) -> dict[str, torch.Tensor]:
        """CPU copies of the current weights (consistent: never taken in the middle of an update)."""
        with self._lock:
            weights = self.task.published_model.state_dict()
            return {name: tensor.detach().to("cpu", copy=True) for name, tensor in weights.items()}

    def snapshot_model(self):
        """A CPU model of the published class (task.published_model) in eval mode holding a copy of the current
        weights, for probing."""
        published = self.task.published_model
        copy = type(published)(published.config)
        copy.load_state_dict(self.snapshot_state_dict())
        if isinstance(copy, BertForPreTraining):  # a fresh one says it has heads; the trained one may not
            copy.has_pretraining_heads = published.has_pretraining_heads
        return copy.eval()


    # ---- evaluation ----------------------------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self):
        """The task's evaluation of the current weights (its held-out data), or None (no held-out data, or a
        rank other than 0). The loop calls it every `eval_every` steps and at the end; call it yourself only
        between steps from the loop's thread or when not iterating (it switches the model to eval mode)."""
        if not self.is_main:
            return None

        def forward(batch):
            batch = batch.to(self.device)
            with self._autocast():
                return self.model(**batch.model_inputs()), batch

        with self._lock:
            self.model.eval()
            try:
                stats = self.task.evaluate(forward, self.step)
            finally:
                self.model.train()
        if stats is not None:
            self.last_eval = stats
        return stats


    # ---- the loop ------------------------------------------------------------------------------------------------

    def steps(self) -> Iterator:
        """Train until the task's last step (or a stop request), yielding the task's step record after each.

        Evaluates every `eval_every` steps and at the end, checkpoints every `checkpoint_every` steps, on
        request, on stop and at the end, then writes final/ and summary.json. Raises a `TrainingError`
        (recorded in metrics.jsonl): `NonFiniteLossError` or `DivergenceError` (no update applied, the last sane
        checkpoint kept), `OutOfMemoryTrainingError`, `CheckpointWriteError`; `RunFolderBusyError` when another
        run took the folder since an earlier loop ended. The run folder's lock is let go when the loop ends.
        """
        with self._lock:
            self._claim.take()
            if self.is_main and self._metrics is None:  # iterating again after an earlier loop was left
                self._metrics = with_reporters(self.run_folder.open_metrics(), self.config.report_to, self.out_dir,
                                               first_step=self.step + 1)
        self._session_started = time.perf_counter()
        self._paused_seconds = 0.0
        config = self.config
        self._batches = None
        analysis = self.analysis if self.is_main else None
        try:
            self._batches = BatchesAhead(  # inside the try: the run folder's claim is let go if its workers fail
                functools.partial(_train_batch, self.task, config.batch_size, self.rank, self.world_size),
                first_step=self.step + 1, last_step=self.total_steps,
                workers=self.task.batch_workers.get(self.device.type, 0))
            if analysis is not None:
                analysis.begin()
            while self.step < self.total_steps:
                self._paused_seconds += self._wait_while_paused()
                if self._stop_agreed():
                    break
                stats = self._train_one_step()
                evaluation = None
                if (config.eval_every and self.step % config.eval_every == 0) or self.step == self.total_steps:
                    evaluation = self.evaluate()
                if self._metrics is not None:
                    self._metrics.write(stats.to_dict())
                    if stats.warning is not None:
                        self._metrics.write({"kind": "warning", "step": stats.step, "message": stats.warning})
                    if evaluation is not None:
                        self._metrics.write(evaluation.to_dict())
                checkpoint = None
                due = config.checkpoint_every and self.step % config.checkpoint_every == 0
                if self._take_checkpoint_request() or due or self.step == self.total_steps:
                    checkpoint = self.save_checkpoint()
                measured = self._analysis_written(analysis.after_step(), stats) if analysis is not None else {}
                yield dataclasses.replace(stats, eval=evaluation, checkpoint=str(checkpoint) if checkpoint else None,
                                          **measured)
            else:
                if analysis is not None:
                    self._analysis_written(analysis.end(cancel=False))
                self._confirm_checkpoint()  # the run ended without a fault
                self._evaluate_if_stale()  # a run resumed at its last step: final/ carries this step's results
                self.save_final()
                self._write_summary()
                return
            # stopped early: keep the progress, with held-out numbers for it
            self._stop.clear()  # the request is consumed; a later steps() call continues the run
            if self.step > 0:
                self._evaluate_if_stale()
            already_saved = self.last_checkpoint == self.run_folder.checkpoint_path(self.step)
            if self.step > 0 and not already_saved:
                self.save_checkpoint()
            if analysis is not None:
                self._analysis_written(analysis.end(cancel=False))
            self._confirm_checkpoint()  # stopped without a fault
            self._write_summary()
        except TrainingError as error:
            if self._metrics is not None:
                with contextlib.suppress(RunFolderWriteError):  # a full disk may refuse this record too
                    self._metrics.write({"kind": "error", "step": getattr(error, "step", self.step),
                                         "message": str(error)})
            raise
        finally:
            if analysis is not None:
                analysis.end(cancel=True)  # after a fault, or a consumer that stopped iterating: nothing more
            if self._batches is not None:
                self._batches.close()
            self._elapsed_before, self._session_started = self._elapsed(), None
            with self._lock:
                if self._metrics is not None:
                    self._metrics.close()
                    self._metrics = None
                self._claim.give_back()

    def _analysis_written(self, records: list[dict[str, Any]], stats=None) -> dict[str, Any]:
        """The analysis hook's records written to metrics.jsonl; what they set on the step record `stats` about to
        be yielded: its `analysis` (the analysis record, or None), and the `warning` of a measurement that failed."""
        fields: dict[str, Any] = {"analysis": None}
        warnings = [stats.warning] if stats is not None and stats.warning else []
        for record in records:
            if self._metrics is not None:
                self._metrics.write(record)
            if record.get("kind") == "analysis":
                fields["analysis"] = record
            elif record.get("kind") == "warning":
                warnings.append(record["message"])
        if stats is not None and len(warnings) > bool(stats.warning):
            fields["warning"] = "; ".join(warnings)
        return fields

    def _evaluate_if_stale(self) -> None:
        """Evaluate (and record it) unless the newest evaluation is of the current step."""
        if self.last_eval is not None and self.last_eval.step == self.step:
            return
        evaluation = self.evaluate()
        if evaluation is not None and self._metrics is not None:
            self._metrics.write(evaluation.to_dict())

    def _stop_agreed(self) -> bool:
        """The stop flag, combined over all processes so that every rank stops at the same step."""
        if self.world_size == 1:
            return self._stop.is_set()
        flag = torch.tensor([1.0 if self._stop.is_set() else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _wait_while_paused(self) -> float:
        """Block while paused; returns the seconds waited."""
        paused_at = time.perf_counter()
        while not self._unpaused.wait(timeout=0.1):
            pass
        return time.perf_counter() - paused_at

    def _take_checkpoint_request(self) -> bool:
        """Whether a checkpoint was requested since the last call (the request is consumed)."""
        requested = self._checkpoint_requested.is_set()
        self._checkpoint_requested.clear()
        return requested

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _elapsed(self) -> float:
        """Training wall time of the run: earlier sessions (resume) + this one, pauses excluded."""
        if self._session_started is None:
            return self._elapsed_before
        return self._elapsed_before + time.perf_counter() - self._session_started - self._paused_seconds


    # ---- one optimisation step -----------------------------------------------------------------------------------

    def learning_rate(self, step: int) -> float:
        """Learning rate of 1-based `step`: linear warm-up to config.lr, then linear decay towards 0, step for step
        transformers' linear schedule (`linear_schedule`)."""
        return linear_schedule(step, lr=self.config.lr, warmup_steps=self.task.warmup_steps,
                               total_steps=self.total_steps)

    def _train_one_step(self):
        config, task = self.config, self.task
        step = self.step + 1
        started = time.perf_counter()
        learning_rate = self.learning_rate(step)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        try:
            batch = self._batches.batch(step).to(self.device, non_blocking=True)
            # Dropout draws from the global RNG: re-seed it per step (resume-exact) without disturbing the caller's.
            with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_available() else []):
                torch.manual_seed(step_rng(config.seed, self.rank, step, "dropout").getrandbits(63))
                with self._autocast():
                    output = self._train_model(**batch.model_inputs())
            output.loss.backward()
            if config.max_grad_norm > 0:
                grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), config.max_grad_norm, foreach=True)
            else:
                grads = [p.grad for p in self.model.parameters() if p.grad is not None]
                grad_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            sums = torch.cat([task.batch_sums(output, batch).float(),
                              torch.stack([grad_norm.float(), torch.tensor(float(batch.num_tokens),
                                                                           device=grad_norm.device)])])
            if self.world_size > 1:
                dist.all_reduce(sums)
            *task_sums, grad_norm_sum, tokens = sums.tolist()
            grad_norm_value = grad_norm_sum / self.world_size  # identical on every rank after DDP's all-reduce
            loss = task.loss_of(task_sums)
            if not (math.isfinite(loss) and math.isfinite(grad_norm_value)):
                self.optimizer.zero_grad(set_to_none=True)
                what = "loss" if not math.isfinite(loss) else "gradient norm"
                value = loss if what == "loss" else grad_norm_value
                self._discredit_unconfirmed(f"its weights gave a {what} of {value} at step {step}")
                raise NonFiniteLossError(
                    f"the {what} became {value} at step {step}; training stopped before applying that update. "
                    + self._restart_advice(), step, self.last_good_checkpoint)
            warning = self._watch_divergence(step, loss)
            with self._lock:
                self.optimizer.step()
                self.step = step
            self.optimizer.zero_grad(set_to_none=True)
        except TrainingError:
            raise
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            self.optimizer.zero_grad(set_to_none=True)
            raise OutOfMemoryTrainingError(
                f"{self.device} ran out of memory at step {step} with batch size {config.batch_size} × sequence "
                f"length {config.seq_len}; use a smaller --batch-size (e.g. {max(1, config.batch_size // 2)}) "
                f"or --seq-len (e.g. {max(8, config.seq_len // 2)}){task.smaller_model_hint}") from error
        seconds = time.perf_counter() - started
        return task.step_stats(
            task_sums, step=step, total_steps=self.total_steps, loss=loss, learning_rate=learning_rate,
            grad_norm=grad_norm_value, tokens=int(tokens), tokens_per_second=tokens / seconds,
            elapsed_seconds=self._elapsed(), warning=warning)

    def _watch_divergence(self, step: int, loss: float) -> str | None:
        """Feed the loss to the divergence monitor: DivergenceError (before the update is applied) when the run
        has diverged; a warning text on the first step the smoothed loss is far above its best."""
        monitor, config = self._divergence, self.config
        monitor.update(step, loss)
        if self._unconfirmed_checkpoint is not None:  # this loss is the one of the weights it holds
            if monitor.confirms(loss):
                self._confirm_checkpoint()
            else:
                self._discredit_unconfirmed(f"its weights gave a loss of {loss:.4g} at step {step}, with the smoothed "
                                            f"loss at {monitor.smoothed:.4g} against a best of {monitor.best:.4g}")
        if monitor.diverged:
            self.optimizer.zero_grad(set_to_none=True)
            raise DivergenceError(
                f"the loss diverged: {monitor.describe(step)}, above {config.divergence_factor:g}× its best for "
                f"{monitor.steps_above} steps — it explodes without becoming NaN. Training stopped before applying "
                f"that update. {self._restart_advice()}. (To turn this check off: divergence_factor=0, "
                f"{self.task.command} --divergence-factor 0.)",
                step, monitor.smoothed, monitor.best, monitor.best_step, self.last_good_checkpoint)
        if monitor.started_rising:
            return (f"the loss is rising far: {monitor.describe(step)}; the run stops if it stays above "
                    f"{config.divergence_factor:g}× its best for {config.divergence_patience} steps. Is the learning "
                    f"rate ({config.lr:g}) too high?")
        return None


    # ---- checkpoints ---------------------------------------------------------------------------------------------

    def save_checkpoint(self) -> Path | None:
        """Write `checkpoints/step-NNNNNN/` atomically and point `latest` at it; returns the folder
        (None on ranks other than 0, which write nothing). Thread-safe. CheckpointWriteError when the disk is
        full (or any write fails): nothing half-written stays and the previous checkpoint is still the latest."""
        if not self.is_main:
            return None
        with self._lock:
            if not self._parameters_finite():
                raise NonFiniteLossError(
                    f"the weights hold NaN/inf at step {self.step}; no checkpoint was written. "
                    + self._restart_advice(), self.step, self.last_good_checkpoint)
            sane = not self._divergence.rising
            took = self._claim.take()
            self.writing = "the checkpoint"
            try:
                # The newest sane checkpoint is never pruned: after a divergence it is the one to go back to.
                folder = self.run_folder.write_checkpoint(
                    self.step, self._write_checkpoint_files, keep=self.config.keep_checkpoints,
                    protect=[self.last_good_checkpoint], sane=sane, smoothed_loss=self._divergence.smoothed)
                if self._metrics is not None:
                    self._metrics.write({"kind": "checkpoint", "step": self.step, "path": str(folder),
                                         "smoothed_loss": self._divergence.smoothed, "sane": sane})
            finally:
                self.writing = None
                if took:
                    self._claim.give_back()
            self.last_checkpoint = folder
            self._unconfirmed_checkpoint = folder if sane else None
        return folder

    def _confirm_checkpoint(self) -> None:
        """The unconfirmed checkpoint proved sane: it is the last good one now, and the one before may go."""
        with self._lock:
            folder, self._unconfirmed_checkpoint = self._unconfirmed_checkpoint, None
            if folder is not None and folder.is_dir():
                self.last_good_checkpoint = folder
                self.run_folder.prune_checkpoints(self.config.keep_checkpoints, protect=[folder])

    def _discredit_unconfirmed(self, reason: str) -> None:
        """The unconfirmed checkpoint's weights gave a NaN or exploding loss (`reason` says which, at which
        step): its sanity.json says so from now on (a resume passes over it), and if it was the last good one,
        the newest sane one before it takes its place."""
        with self._lock:
            folder, self._unconfirmed_checkpoint = self._unconfirmed_checkpoint, None
            if folder is None or not self.is_main or not folder.is_dir():
                return
            with contextlib.suppress(RunFolderError):  # best effort: a full disk may refuse even this
                self.run_folder.mark_unsound(folder, reason)
            if self.last_good_checkpoint == folder:
                self.last_good_checkpoint = self.run_folder.newest_sane_checkpoint(before=folder)

    def _write_checkpoint_files(self, folder: Path) -> None:
        from bertcore.files.atomic import library_write

        self.task.write_model_files(folder)
        state = self._trainer_state()
        # torch.save reports a failed write (a full disk) as a RuntimeError: an OSError like any other write's.
        with library_write(folder / TRAINER_STATE_FILE, "torch.save", RuntimeError):
            torch.save(state, folder / TRAINER_STATE_FILE)

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "version": TRAINER_STATE_VERSION,
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "elapsed_seconds": self._elapsed(),
            "training_config": self.config.to_dict(),
            "world_size": self.world_size,
            "divergence": self._divergence.state_dict(),  # the smoothed loss at this checkpoint, and its best
            "sane": not self._divergence.rising,
        }

    def _parameters_finite(self) -> bool:
        norms = torch._foreach_norm([p.detach() for p in self.model.parameters()])
        return bool(torch.isfinite(torch.stack(norms)).all())

    def save_final(self) -> Path | None:
        """Write `<out>/final/`: the weights and vocabulary in the standard layout, and the task's final files."""
        if not self.is_main:
            return None

        def write_files(folder: Path) -> None:
            self.task.write_model_files(folder)
            self.task.write_final_files(folder)

        with self._lock:
            took = self._claim.take()
            self.writing = "the final weights"
            try:
                return self.run_folder.write_final(write_files)
            finally:
                self.writing = None
                if took:
                    self._claim.give_back()

    def _restart_advice(self) -> str:
        """Where to go back to after a NaN or a divergence, and what to change."""
        checkpoint = self.last_good_checkpoint
        where = (f"The last checkpoint written while the loss was sane is {checkpoint}; " if checkpoint
                 else "No checkpoint of this run is known to be sane; ")
        change = learning_rate_advice(self.config.lr, pretraining=self.task.pretrains)
        return where + change + (", and resume from it" if checkpoint else ", and start again")


    # ---- the end of a run ----------------------------------------------------------------------------------------

    def _write_summary(self) -> None:
        checksums = self._replica_checksums()
        if not self.is_main:
            return
        evaluation = self.last_eval
        self.run_folder.write_summary({
            "step": self.step, "total_steps": self.total_steps, "elapsed_seconds": self._elapsed(),
            "eval": evaluation.to_dict() if evaluation else None,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "device": str(self.device), "world_size": self.world_size, "process_group": process_group_backend(),
            "num_parameters": self.model.num_parameters(), "replica_checksums": checksums,
            **self.task.summary(),
        })

    def _replica_checksums(self) -> list[float]:
        """A float64 checksum of the weights on every rank (they must agree under DDP)."""
        with torch.no_grad():
            checksum = torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum()
        if self.world_size == 1:
            return [checksum.item()]
        gathered = [torch.zeros_like(checksum) for _ in range(self.world_size)]
        dist.all_gather(gathered, checksum)
        return [value.item() for value in gathered]


def _train_batch(task: TrainingTask, batch_size: int, rank: int, world_size: int, step: int):
    """The task's batch of `step` (a module-level function, for the batch workers)."""
    return task.train_batch(step, batch_size, rank, world_size)


# ---- what a loop is set up with: the device, bf16 autocast, the process group, AdamW and its decay groups, and
# the checkpoint's trainer state

def warm_up() -> float:
    """Pay one-off import/first-call costs (AdamW's first construction imports torch._dynamo, ~1 s holding the
    GIL) so a GUI can do it before its window shows. Returns the seconds spent."""
    start = time.perf_counter()
    import bertcore.models.bert  # noqa: F401

    parameter = nn.Parameter(torch.zeros(4))
    parameter.grad = torch.zeros(4)
    make_optimizer([parameter], lr=1e-3).step()
    return time.perf_counter() - start

def make_optimizer(param_groups, lr: float, betas=(0.9, 0.999), eps: float = 1e-6) -> torch.optim.AdamW:
    """AdamW, fused where the device supports it (CPU, CUDA, MPS), else the multi-tensor (foreach) kernel."""
    try:
        return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, foreach=True)

def weight_decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW groups: decayed weights, and biases + LayerNorm parameters without decay (tied tensors once)."""
    decay, no_decay, seen = [], [], set()
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad or id(parameter) in seen:
            continue
        seen.add(id(parameter))
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """'auto' -> CUDA (this process's local rank), then MPS, then CPU; an explicit name must be available."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"device {name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for but this PyTorch sees no CUDA GPU; use --device cpu")
        if device.index is None:
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} was asked for but MPS is not available; use --device cpu")
    return device

def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 for "bf16", and for "auto" on a CUDA device that supports it; None (fp32) otherwise."""
    use_bf16 = precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.bfloat16 if use_bf16 else None

def process_group_backend() -> str | None:
    """The backend of the torch.distributed process group this process joined ("nccl", "gloo"), or None."""
    return dist.get_backend() if dist.is_available() and dist.is_initialized() else None

def distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank); (0, 1, 0) unless torch.distributed is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    return 0, 1, 0

def is_out_of_memory(error: BaseException) -> bool:
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(error, oom_type) or "out of memory" in str(error).lower()

def read_trainer_state(path: Path) -> dict[str, Any]:
    """A checkpoint's trainer_state.pt, checked; RunFolderError naming the file when it is damaged, or is not a
    regular file (a FIFO is refused, never waited on; a link to a device is never read)."""
    advice = "resume from an earlier checkpoint (--resume <run>/checkpoints/step-…) or start a new run"
    try:
        with open_regular_file(path, error=RunFolderError, label="the trainer state") as file:
            state = torch.load(file, map_location="cpu", weights_only=True)
    except RunFolderError as error:  # what is there is not a file: say so, not "damaged"
        raise RunFolderError(f"{error}; {advice}") from None
    except Exception as error:  # truncated, garbage or code: torch raises many types, all meaning "damaged"
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        raise RunFolderError(f"{path} cannot be read ({type(error).__name__}: {first_line}); the trainer state "
                             f"is damaged: {advice}") from None
    if not isinstance(state, dict):
        raise RunFolderError(f"{path} holds a {type(state).__name__}, not a trainer state; {advice}")
    if state.get("version") != TRAINER_STATE_VERSION:
        raise RunFolderError(f"{path} has an unknown format (version {state.get('version')!r}); it cannot be "
                             f"resumed: {advice}")
    expected = {"step": int, "optimizer": dict, "elapsed_seconds": (int, float)}
    wrong = [key for key, kind in expected.items() if not isinstance(state.get(key), kind)
             or isinstance(state.get(key), bool)]
    if wrong:
        raise RunFolderError(f"{path} lacks a valid {', '.join(wrong)}; the trainer state is damaged: {advice}")
    return state
