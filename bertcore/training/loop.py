"""The training loop every run shares; what is trained is a `TrainingTask` (pretraining, fine-tuning).

Nothing here knows about BERT's heads, its data or a GUI. `TrainingLoop.steps()` yields one frozen record of
plain numbers per optimisation step (the task's own class: `bertcore.training.pretraining.StepStats` for pretraining,
`bertcore.training.finetuning.TaskStepStats` for fine-tuning); the command lines and the app's worker thread consume it.
`bertcore.training.pretraining.Trainer` and `bertcore.training.finetuning.Finetuner` are this loop with their task
built in.

The loop owns the machinery: the run folder (layout in bertcore.files.run_folder) and its lock, AdamW with decay groups,
bf16 autocast on CUDA, DistributedDataParallel, the optimisation step with its schedule, re-seeded dropout, gradient
clipping and NaN/OOM/divergence errors (bertcore.training.loop_step), the stop/pause/checkpoint controls, atomic
checkpoints with trainer_state.pt (bertcore.training.loop_checkpoints), exact resume, metrics.jsonl, final/ and
summary.json.

A task owns what the numbers mean (see `TrainingTask`): it builds or loads the model and its data, gives the
batch of a step, turns one forward pass into numbers that add up over batches and processes (`batch_sums`),
turns the summed numbers into the loss and the step record (`loss_of`, `step_stats`), and evaluates the model
on its held-out data (`evaluate`).

From any other thread, while the loop runs (bertcore.training.controls):
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
"step", "message"}; per step: its "step" record, then "warning", "eval", "checkpoint" if any.

One loop at a time per run folder: the loop takes the folder's lock when it is created (a second process or
loop on the folder is refused at once with RunFolderBusyError naming the holder's pid), lets go of it when a
`steps()` loop ends, and takes it back for a later loop or save unless another run changed the folder
meanwhile (bertcore.files.run_claim); `close()` releases it for good.

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
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from bertcore.errors import RunFolderWriteError, TrainingError
from bertcore.files.metrics_log import MetricsLog
from bertcore.files.run_claim import RunClaim
from bertcore.files.run_folder import RunFolder
from bertcore.models.bert import BertForPreTraining
from bertcore.training.batches_ahead import BatchesAhead
from bertcore.training.controls import LoopControls
from bertcore.training.divergence import DivergenceMonitor
from bertcore.training.loop_checkpoints import LoopCheckpoints
from bertcore.training.loop_step import LoopStep
from bertcore.training.setup import (
    autocast_dtype,
    distributed,
    make_optimizer,
    process_group_backend,
    resolve_device,
    weight_decay_groups,
)
from bertcore.training.task import TrainingTask


class TrainingLoop(LoopStep, LoopCheckpoints, LoopControls):
    """One run of `task` with the settings of `config` (a TrainingConfig or a FinetuneConfig: out_dir, seed,
    device, num_threads, batch_size, seq_len, lr, weight_decay, adam_betas, adam_eps, max_grad_norm, precision,
    compile, eval_every, checkpoint_every, keep_checkpoints, divergence_factor, divergence_patience).

    Construction does the setup work (the task reads its data, builds or loads the model; run_config.json is
    written): create it in the worker thread. It takes the run folder's lock (RunFolderBusyError when another
    run holds it). `resume=True` continues the run in `config.out_dir` from its latest checkpoint; a path
    continues from that checkpoint folder, which must belong to that run.
    """

    def __init__(self, config, task: TrainingTask, *, resume: bool | str | Path = False,
                 command: list[str] | None = None):
        super().__init__()
        self.config = config
        self.task = task
        self.rank, self.world_size, local_rank = distributed()
        self.is_main = self.rank == 0
        self.device = resolve_device(config.device, local_rank)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.run_folder = RunFolder(config.out_dir)
        self.out_dir = self.run_folder.path
        self.checkpoint_dir = self.run_folder.checkpoints_dir
        self._lock = threading.RLock()  # guards the weights/optimizer against the loop and other threads
        self._metrics: MetricsLog | None = None
        self._claim = None
        # What is being written right now ("the checkpoint", "the final weights"), or None: a second Ctrl-C
        # waits for such a write instead of aborting it (bertcore.cli.common).
        self.writing: str | None = None
        # From here on this process writes into the folder: hold its lock (rank 0 writes for every rank).
        self._claim = RunClaim(self.run_folder, hold=self.is_main, owner=f"this {type(self).__name__}")
        try:
            self._set_up(resume, command)
        except BaseException:
            self.close()
            raise

    def _set_up(self, resume: bool | str | Path, command: list[str] | None) -> None:
        config, task = self.config, self.task
        self.run_folder.refuse_linked_folders()  # before the task spends its setup on a run that cannot be written
        if not resume and self.run_folder.checkpoint_folders():
            raise ValueError(f"{self.out_dir} already holds a run with checkpoints; resume it (--resume) or "
                             "choose another output folder (--out)")
        state, resumed_sane = self._choose_resume(resume)
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
        self.last_good_checkpoint: Path | None = self.resumed_from
        self._unconfirmed_checkpoint: Path | None = None  # written while sane; its loss comes with the next step
        if self.resumed_from is not None:
            if resumed_sane:  # the first step's loss shows whether its weights really are (rank 0 keeps the folder)
                self._unconfirmed_checkpoint = self.resumed_from if self.is_main else None
            else:  # a named checkpoint written after the loss went bad: the one before it is the one to go back to
                self.last_good_checkpoint = self.run_folder.newest_sane_checkpoint(before=self.resumed_from)
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
        if self.is_main:
            self._prepare_run_folder(command)
        if self.world_size > 1:
            dist.barrier()

    def _prepare_run_folder(self, command: list[str] | None) -> None:
        folder = self.run_folder
        folder.create()  # also clears what a crashed writer left behind
        if self.resumed_from is None or not folder.vocab_path.exists():  # a new run: not a killed run's vocabulary
            folder.write_vocabulary(self.tokenizer)
        if self.resumed_from is None or not folder.run_config_path.exists():
            folder.write_run_config({
                "training": self.config.to_dict(), **self.task.run_config(),
                "num_parameters": self.model.num_parameters(), "world_size": self.world_size,
                "process_group": process_group_backend(), "device": str(self.device),
                "torch_version": torch.__version__,
                "command": command, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            })
        # A fresh run in an old folder starts a fresh curve; a resumed one drops the records after its step.
        self._metrics = folder.open_metrics(self.step if self.resumed_from else None, fresh=self.resumed_from is None)
        if self.resume_note is not None:
            self._metrics.write({"kind": "warning", "step": self.step, "message": self.resume_note})

    # ---- the run folder's lock ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the run folder (its lock) and close the metrics file, for good: a closed loop neither
        trains nor saves. Idempotent; also done on leaving `with ... as loop:`."""
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

    # ---- thread-safe controls -----------------------------------------------------------------------------

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

    # ---- evaluation ---------------------------------------------------------------------------------------

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

    # ---- the loop -----------------------------------------------------------------------------------------

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _elapsed(self) -> float:
        """Training wall time of the run: earlier sessions (resume) + this one, pauses excluded."""
        if self._session_started is None:
            return self._elapsed_before
        return self._elapsed_before + time.perf_counter() - self._session_started - self._paused_seconds

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
                self._metrics = self.run_folder.open_metrics()
        self._session_started = time.perf_counter()
        self._paused_seconds = 0.0
        config = self.config
        self._batches = None
        try:
            self._batches = BatchesAhead(  # inside the try: the run folder's claim is let go if its workers fail
                functools.partial(_train_batch, self.task, config.batch_size, self.rank, self.world_size),
                first_step=self.step + 1, last_step=self.total_steps,
                workers=self.task.batch_workers.get(self.device.type, 0))
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
                yield dataclasses.replace(stats, eval=evaluation, checkpoint=str(checkpoint) if checkpoint else None)
            else:
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
            self._confirm_checkpoint()  # stopped without a fault
            self._write_summary()
        except TrainingError as error:
            if self._metrics is not None:
                with contextlib.suppress(RunFolderWriteError):  # a full disk may refuse this record too
                    self._metrics.write({"kind": "error", "step": getattr(error, "step", self.step),
                                         "message": str(error)})
            raise
        finally:
            if self._batches is not None:
                self._batches.close()
            self._elapsed_before, self._session_started = self._elapsed(), None
            with self._lock:
                if self._metrics is not None:
                    self._metrics.close()
                    self._metrics = None
                self._claim.give_back()

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
