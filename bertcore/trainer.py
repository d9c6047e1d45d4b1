"""The pretraining loop: MLM + NSP with AdamW, resumable, headless, Qt-free; it reports through a generator.

Nothing here knows about a GUI or a terminal. `Trainer.steps()` yields one frozen `StepStats` (plain
Python numbers) per optimisation step; the command line (`bertcore.cli`) and the app's worker thread are
thin consumers of it:

    from bertcore.trainer import Trainer, TrainingConfig, warm_up

    warm_up()                                   # once, early (e.g. before the window shows)
    trainer = Trainer(TrainingConfig(corpus="assets/corpus/tinyshakespeare.txt", vocab="assets/vocab.txt",
                                     preset="mini", steps=2000, out_dir="runs/demo"))
    for stats in trainer.steps():               # in a worker thread
        print(stats.step, stats.loss, stats.mlm_accuracy, stats.eval and stats.eval.mlm_accuracy)

From any other thread, while the loop runs:
    trainer.request_stop()       finish the current step, evaluate, write a checkpoint, end the iteration
    trainer.pause() / .resume()  block / release the loop at the next step boundary (stop also releases it)
    trainer.request_checkpoint() write a checkpoint at the next step boundary (its StepStats.checkpoint says where)
    trainer.save_checkpoint()    write one now (blocks the loop only for the write)
    trainer.snapshot_state_dict() / trainer.snapshot_model()   CPU copies of the current weights, for probing
A consumer may also simply stop iterating (or `close()` the generator): nothing more is trained and nothing is
written (call `save_checkpoint()` to keep the progress); calling `steps()` again continues from that step.
Only one `steps()` loop may run at a time. `trainer.close()` (or leaving `with Trainer(...) as trainer:`)
releases the run folder for good.

The run folder (`config.out_dir`; layout, names and operations in bertcore.run_folder): run_config.json,
vocab.txt, metrics.jsonl (one JSON record per line: "step" = StepStats.to_dict(), "eval" = EvalStats.to_dict(),
{"kind": "checkpoint", "step", "path", "smoothed_loss", "sane"}, {"kind": "warning" | "error", "step",
"message"}; per step: its "step" record, then "warning", "eval", "checkpoint" if any), checkpoints/step-NNNNNN/
(the standard BERT folder + trainer_state.pt) with checkpoints/latest, final/ and summary.json at the end.

One trainer at a time per run folder: the Trainer takes the folder's lock (bertcore.run_lock.RunLock) when
it is created, so a second process (or a second Trainer in this one) on the same folder is refused at once
with RunFolderBusyError naming the holder's pid. It lets go when a `steps()` loop ends (finished, stopped,
failed or left), takes the lock back for a later loop or save (refusing if another run changed the folder
meanwhile), and releases it for good on `close()` (or `with Trainer(...) as trainer:`, or garbage collection).

Faults end the loop with a TrainingError whose message says what to change, recorded in metrics.jsonl:
NonFiniteLossError (NaN/inf loss), DivergenceError (a loss exploding without NaN, see bertcore.divergence;
StepStats.warning says so first), OutOfMemoryTrainingError, CheckpointWriteError (disk full: nothing
half-written, the previous checkpoint still the latest). After a NaN or a divergence the error names the newest
checkpoint known to be sane (`Trainer.last_good_checkpoint`: written while the loss was sane, and its weights
still gave a sane loss at the next step; never pruned).

Resuming restores weights, optimizer moments, step (hence learning-rate schedule and data position: the batch
of step s is a pure function of (seed, rank, s), see bertcore.data) and dropout randomness (re-seeded per
step from (seed, rank, step)), so a resumed run continues the same loss curve.

Several processes: launch under `torchrun --nproc_per_node=N`; when torch.distributed is initialised the
model is wrapped in DistributedDataParallel, every rank draws its own batches, statistics are averaged over
ranks and only rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from bertcore.config import TrainingConfig
from bertcore.data import Batch, CorpusError, PretrainingData, read_corpus, step_rng
from bertcore.divergence import DivergenceMonitor
from bertcore.errors import (
    CheckpointWriteError,
    DivergenceError,
    NonFiniteLossError,
    OutOfMemoryTrainingError,
    RunFolderBusyError,
    RunFolderError,
    RunFolderWriteError,
    TrainingError,
)
from bertcore.run_folder import (  # re-exported: their home before bertcore.run_folder
    CHECKPOINTS_DIR,
    LATEST_POINTER,
    TRAINER_STATE_FILE,
    MetricsLog,
    RunFolder,
    find_checkpoint,
)

TRAINER_STATE_VERSION = 1


@dataclass(frozen=True)
class EvalStats:
    """Held-out metrics over the fixed held-out batches."""

    step: int
    loss: float
    mlm_loss: float
    nsp_loss: float
    mlm_accuracy: float  # on masked positions
    nsp_accuracy: float
    num_examples: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "eval", **dataclasses.asdict(self)}


@dataclass(frozen=True)
class StepStats:
    """What one optimisation step did; every field is a plain Python number (safe to send across threads)."""

    step: int  # 1-based number of this step
    total_steps: int
    loss: float  # mlm_loss + nsp_loss
    mlm_loss: float
    nsp_loss: float
    mlm_accuracy: float  # argmax == original token, over the masked positions
    nsp_accuracy: float
    learning_rate: float  # used for this step
    grad_norm: float  # before clipping
    tokens: int  # real (non-pad) tokens in this step, all processes together
    tokens_per_second: float  # tokens / wall time of this step (data, forward, backward, update)
    elapsed_seconds: float  # training time of the whole run so far (paused time excluded; resumed runs add up)
    eval: EvalStats | None = None  # set on steps that ran a held-out evaluation
    checkpoint: str | None = None  # folder of a checkpoint written right after this step
    # Set on the first step of a stretch where the smoothed loss is far above its best (see bertcore.divergence):
    # the run stops with a DivergenceError if it stays there. metrics.jsonl holds it as a "warning" record.
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        values = {"kind": "step", **dataclasses.asdict(self)}
        del values["eval"], values["checkpoint"], values["warning"]
        return values


def warm_up() -> float:
    """Pay one-off import/first-call costs (AdamW's first construction imports torch._dynamo, ~1 s holding the
    GIL) so a GUI can do it before its window shows. Returns the seconds spent."""
    start = time.perf_counter()
    import bertcore.model  # noqa: F401

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


def _distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank); (0, 1, 0) unless torch.distributed is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    return 0, 1, 0


def _is_out_of_memory(error: BaseException) -> bool:
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(error, oom_type) or "out of memory" in str(error).lower()


def _read_trainer_state(path: Path) -> dict[str, Any]:
    """A checkpoint's trainer_state.pt, checked; RunFolderError naming the file when it is damaged."""
    advice = "resume from an earlier checkpoint (--resume <run>/checkpoints/step-…) or start a new run"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
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


class Trainer:
    """MLM + NSP pretraining of a `BertForPreTraining` on a corpus; see the module docstring for the protocol.

    Construction does the setup work (reads and tokenizes the corpus, maybe trains a vocabulary, builds or
    loads the model, writes run_config.json): create it in the worker thread. It takes the run folder's lock
    (RunFolderBusyError when another run holds it). `resume=True` continues the run in `config.out_dir` from
    its latest checkpoint; a path continues from that checkpoint folder, which must belong to that run.
    `model_config` replaces the preset (its vocab_size is set to the vocabulary's size).
    """

    def __init__(self, config: TrainingConfig, *, model_config=None, resume: bool | str | Path = False,
                 command: list[str] | None = None):
        from bertcore.resources import default_corpus_path

        self.config = config
        self.rank, self.world_size, local_rank = _distributed()
        self.is_main = self.rank == 0
        self.device = resolve_device(config.device, local_rank)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.run_folder = RunFolder(config.out_dir)
        self.out_dir = self.run_folder.path
        self.checkpoint_dir = self.run_folder.checkpoints_dir
        self._lock = threading.RLock()  # guards the weights/optimizer against the loop and other threads
        self._metrics: MetricsLog | None = None
        self._closed = False
        self._run_lock = None
        self._folder_when_released: tuple | None = None
        corpus_path = Path(config.corpus) if config.corpus else default_corpus_path()
        corpus = read_corpus(corpus_path)
        # From here on this process writes into the folder: hold its lock (rank 0 writes for every rank).
        self._run_lock = self.run_folder.lock() if self.is_main else None
        try:
            self._set_up(corpus, model_config, resume, command)
        except BaseException:
            self.close()
            raise

    def _set_up(self, corpus, model_config, resume: bool | str | Path, command: list[str] | None) -> None:
        from bertcore.checkpoint import load_pretrained
        from bertcore.config import preset
        from bertcore.model import BertForPreTraining
        from bertcore.tokenizer import BertTokenizer

        config = self.config
        if not resume and self.run_folder.checkpoint_folders():
            raise ValueError(f"{self.out_dir} already holds a run with checkpoints; resume it (--resume) or "
                             "choose another output folder (--out)")
        state: dict[str, Any] | None = None
        self.resumed_from: Path | None = None
        if resume:
            self.resumed_from = self.run_folder.checkpoint_to_resume(None if resume is True else resume)
            model, tokenizer = load_pretrained(self.resumed_from)
            state = _read_trainer_state(self.resumed_from / TRAINER_STATE_FILE)
        elif config.init_from:
            model, tokenizer = load_pretrained(config.init_from)
        else:
            if config.vocab:
                tokenizer = BertTokenizer.from_vocab_file(config.vocab)
            else:
                tokenizer = self._train_vocabulary(corpus)
            model_config = model_config or preset(config.preset)
            model_config = model_config.replace(
                vocab_size=tokenizer.vocab_size,  # the embedding table follows the vocabulary in use
                max_position_embeddings=max(model_config.max_position_embeddings, config.seq_len))
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed)
                model = BertForPreTraining(model_config)
        if config.seq_len > model.config.max_position_embeddings:
            raise ValueError(f"seq_len is {config.seq_len} but the model has only "
                             f"{model.config.max_position_embeddings} positions; use --seq-len "
                             f"{model.config.max_position_embeddings} or less")
        self.tokenizer = tokenizer
        self.data = PretrainingData(corpus, tokenizer, seq_len=config.seq_len, seed=config.seed,
                                    heldout_fraction=config.heldout_fraction,
                                    short_seq_prob=config.short_seq_prob, mlm_probability=config.mlm_probability,
                                    length_buckets=config.length_buckets)
        self.heldout_batches = self.data.heldout_batches(config.eval_batches, config.batch_size) if self.is_main \
            else []

        self.model = model.to(self.device)  # the plain module: weights, checkpoints, snapshots, evaluation
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
        if state is not None:
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
            if not state.get("sane", True):
                self.last_good_checkpoint = None
        self._train_model: nn.Module = self.model  # what the step runs: maybe DDP-wrapped and/or compiled
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            self._train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if config.compile:
            self._train_model = torch.compile(self._train_model)
        use_bf16 = config.precision == "bf16" or (
            config.precision == "auto" and self.device.type == "cuda" and torch.cuda.is_bf16_supported())
        self.autocast_dtype = torch.bfloat16 if use_bf16 else None

        self._stop = threading.Event()
        self._unpaused = threading.Event()
        self._unpaused.set()
        self._checkpoint_requested = threading.Event()
        self.last_eval: EvalStats | None = None
        if self.is_main:
            self._prepare_run_folder(command)
        if self.world_size > 1:
            dist.barrier()

    # ---- setup --------------------------------------------------------------------------------------------

    def _train_vocabulary(self, corpus):
        from bertcore.tokenizer import BertTokenizer

        if self.is_main:
            sentences = (sentence for document in corpus.documents for sentence in document)
            self.run_folder.write_vocabulary(BertTokenizer.train(sentences, vocab_size=self.config.vocab_size))
        if self.world_size > 1:
            dist.barrier()  # the other ranks read rank 0's vocabulary: one vocabulary for all
        return BertTokenizer.from_vocab_file(self.run_folder.vocab_path)

    def _prepare_run_folder(self, command: list[str] | None) -> None:
        folder = self.run_folder
        folder.create()  # also clears what a crashed writer left behind
        if not folder.vocab_path.exists():
            folder.write_vocabulary(self.tokenizer)
        if self.resumed_from is None or not folder.run_config_path.exists():
            folder.write_run_config({
                "training": self.config.to_dict(), "model": self.model.config.to_dict(),
                "num_parameters": self.model.num_parameters(), "world_size": self.world_size,
                "device": str(self.device), "torch_version": torch.__version__,
                "command": command, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            })
        # A fresh run in an old folder starts a fresh curve; a resumed one drops the records after its step.
        self._metrics = folder.open_metrics(self.step if self.resumed_from else None, fresh=self.resumed_from is None)

    # ---- the run folder's lock ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the run folder (its lock) and close the metrics file, for good: a closed trainer neither
        trains nor saves. Idempotent; also done on leaving `with Trainer(...) as trainer:`."""
        self._closed = True
        with self._lock:
            if self._metrics is not None:
                self._metrics.close()
                self._metrics = None
            if self._run_lock is not None:
                self._run_lock.release()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _take_run_folder(self) -> bool:
        """Hold the run folder's lock for a loop or a save; True when this call took it (and must give it back).

        Refuses when another run holds the folder, or changed it while this trainer did not hold it (its latest
        checkpoint or metrics differ): continuing then would write over that run's progress."""
        if self._closed:
            raise TrainingError(f"this Trainer on {self.out_dir} was closed; create a new one (resume=True) to go on")
        if self._run_lock is None or self._run_lock.held:
            return False
        self._run_lock.acquire()
        if self._folder_stamp() != self._folder_when_released:
            self._run_lock.release()
            raise RunFolderError(
                f"{self.out_dir} was changed by another run since this trainer last trained in it (its latest "
                "checkpoint or metrics differ); create a new Trainer with resume=True to continue from there")
        return True

    def _give_back_run_folder(self) -> None:
        if self._run_lock is not None and self._run_lock.held:
            self._folder_when_released = self._folder_stamp()
            self._run_lock.release()

    def _folder_stamp(self) -> tuple:
        """What another run would change: the `latest` pointer and the metrics file's identity and size."""
        try:
            pointer = self.run_folder.latest_pointer_path.read_bytes()
        except OSError:
            pointer = None
        try:
            stat = self.run_folder.metrics_path.stat()
            metrics = (stat.st_ino, stat.st_size)
        except OSError:
            metrics = None
        return pointer, metrics

    # ---- thread-safe controls -----------------------------------------------------------------------------

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
        """Write a checkpoint at the next step boundary (the yielded StepStats.checkpoint names it)."""
        self._checkpoint_requested.set()

    def snapshot_state_dict(self) -> dict[str, torch.Tensor]:
        """CPU copies of the current weights (consistent: never taken in the middle of an update)."""
        with self._lock:
            return {name: tensor.detach().to("cpu", copy=True) for name, tensor in self.model.state_dict().items()}

    def snapshot_model(self):
        """A CPU `BertForPreTraining` in eval mode holding a copy of the current weights, for probing."""
        from bertcore.model import BertForPreTraining

        copy = BertForPreTraining(self.model.config)
        copy.load_state_dict(self.snapshot_state_dict())
        return copy.eval()

    # ---- checkpoints --------------------------------------------------------------------------------------

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
            took = self._take_run_folder()
            try:
                # The newest sane checkpoint is never pruned: after a divergence it is the one to go back to.
                folder = self.run_folder.write_checkpoint(
                    self.step, self._write_checkpoint_files, keep=self.config.keep_checkpoints,
                    protect=[self.last_good_checkpoint])
                if self._metrics is not None:
                    self._metrics.write({"kind": "checkpoint", "step": self.step, "path": str(folder),
                                         "smoothed_loss": self._divergence.smoothed, "sane": sane})
            finally:
                if took:
                    self._give_back_run_folder()
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

    def _write_checkpoint_files(self, folder: Path) -> None:
        from bertcore.checkpoint import write_pretrained_files

        write_pretrained_files(self.model, self.tokenizer, folder)
        torch.save(self._trainer_state(), folder / TRAINER_STATE_FILE)

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
        """Write `<out>/final/`: the weights and vocabulary only, in the standard layout."""
        if not self.is_main:
            return None
        from bertcore.checkpoint import write_pretrained_files

        with self._lock:
            took = self._take_run_folder()
            try:
                return self.run_folder.write_final(
                    lambda folder: write_pretrained_files(self.model, self.tokenizer, folder))
            finally:
                if took:
                    self._give_back_run_folder()

    def _restart_advice(self) -> str:
        """Where to go back to after a NaN or a divergence, and what to change."""
        checkpoint, lr = self.last_good_checkpoint, self.config.lr
        where = (f"The last checkpoint written while the loss was sane is {checkpoint}; " if checkpoint
                 else "No checkpoint of this run is known to be sane; ")
        return (where + f"lower the learning rate (now {lr:g}) — e.g. to {lr / 10:g} — or lengthen the warm-up and "
                + ("resume from it" if checkpoint else "start again"))

    # ---- evaluation ---------------------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self) -> EvalStats | None:
        """Held-out loss and accuracies over the fixed held-out batches (None without a held-out split).

        The loop calls it every `eval_every` steps; call it yourself only between steps from the loop's thread
        or when not iterating (it switches the shared model to eval mode for its duration)."""
        if not self.heldout_batches:
            return None
        with self._lock:
            self.model.eval()
            sums = torch.zeros(6, dtype=torch.float64)  # mlm loss·n, mlm correct, n, nsp loss·b, nsp correct, b
            try:
                for batch in self.heldout_batches:
                    batch = batch.to(self.device)
                    with self._autocast():
                        output = self.model(**batch.model_inputs())
                    sums += self._batch_sums(output, batch).double().cpu()
            finally:
                self.model.train()
        mlm_loss, mlm_correct, masked, nsp_loss, nsp_correct, examples = sums.tolist()
        stats = EvalStats(step=self.step, loss=mlm_loss / masked + nsp_loss / examples,
                          mlm_loss=mlm_loss / masked, nsp_loss=nsp_loss / examples,
                          mlm_accuracy=mlm_correct / masked, nsp_accuracy=nsp_correct / examples,
                          num_examples=int(examples))
        self.last_eval = stats
        return stats

    @staticmethod
    def _batch_sums(output, batch: Batch) -> torch.Tensor:
        """(mlm loss·n_masked, mlm correct, n_masked, nsp loss·B, nsp correct, B) of one forward pass."""
        masked_labels = batch.labels[batch.labels != -100]  # (N,), in the order of prediction_logits rows
        mlm_correct = (output.prediction_logits.argmax(-1) == masked_labels).sum()
        nsp_correct = (output.seq_relationship_logits.argmax(-1) == batch.next_sentence_label).sum()
        num_masked, num_examples = masked_labels.numel(), batch.next_sentence_label.numel()
        return torch.stack([
            output.mlm_loss.detach().float() * num_masked, mlm_correct.float(),
            torch.tensor(float(num_masked), device=mlm_correct.device),
            output.nsp_loss.detach().float() * num_examples, nsp_correct.float(),
            torch.tensor(float(num_examples), device=mlm_correct.device),
        ])

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

    def steps(self) -> Iterator[StepStats]:
        """Train until `config.steps` (or a stop request), yielding a `StepStats` after every step.

        Evaluates every `eval_every` steps and at the end, checkpoints every `checkpoint_every` steps, on
        request, on stop and at the end, then writes final/ and summary.json. Raises a `TrainingError`
        (recorded in metrics.jsonl): `NonFiniteLossError` or `DivergenceError` (no update applied, the last sane
        checkpoint kept), `OutOfMemoryTrainingError`, `CheckpointWriteError`; `RunFolderBusyError` when another
        run took the folder since an earlier loop ended. The run folder's lock is let go when the loop ends.
        """
        with self._lock:
            self._take_run_folder()
            if self.is_main and self._metrics is None:  # iterating again after an earlier loop was left
                self._metrics = self.run_folder.open_metrics()
        self._session_started = time.perf_counter()
        self._paused_seconds = 0.0
        config = self.config
        try:
            while self.step < config.steps:
                self._wait_while_paused()
                if self._stop_agreed():
                    break
                stats = self._train_one_step()
                evaluation = None
                if (config.eval_every and self.step % config.eval_every == 0) or self.step == config.steps:
                    evaluation = self.evaluate()
                if self._metrics is not None:
                    self._metrics.write(stats.to_dict())
                    if stats.warning is not None:
                        self._metrics.write({"kind": "warning", "step": stats.step, "message": stats.warning})
                    if evaluation is not None:
                        self._metrics.write(evaluation.to_dict())
                checkpoint = None
                due = config.checkpoint_every and self.step % config.checkpoint_every == 0
                if due or self._checkpoint_requested.is_set() or self.step == config.steps:
                    self._checkpoint_requested.clear()
                    checkpoint = self.save_checkpoint()
                yield dataclasses.replace(stats, eval=evaluation, checkpoint=str(checkpoint) if checkpoint else None)
            else:
                self._confirm_checkpoint()  # the run ended without a fault
                self.save_final()
                self._write_summary()
                return
            # stopped early: keep the progress, with held-out numbers for it
            self._stop.clear()  # the request is consumed; a later steps() call continues the run
            if self.step > 0 and (self.last_eval is None or self.last_eval.step != self.step):
                evaluation = self.evaluate()
                if evaluation is not None and self._metrics is not None:
                    self._metrics.write(evaluation.to_dict())
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
            self._elapsed_before, self._session_started = self._elapsed(), None
            with self._lock:
                if self._metrics is not None:
                    self._metrics.close()
                    self._metrics = None
                self._give_back_run_folder()

    def _wait_while_paused(self) -> None:
        paused_at = time.perf_counter()
        while not self._unpaused.wait(timeout=0.1):
            pass
        self._paused_seconds += time.perf_counter() - paused_at

    def _stop_agreed(self) -> bool:
        """The stop flag, combined over all processes so that every rank stops at the same step."""
        if self.world_size == 1:
            return self._stop.is_set()
        flag = torch.tensor([1.0 if self._stop.is_set() else 0.0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _train_one_step(self) -> StepStats:
        config = self.config
        step = self.step + 1
        started = time.perf_counter()
        learning_rate = config.learning_rate(step)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        try:
            batch = self.data.train_batch(step, config.batch_size, self.rank).to(self.device, non_blocking=True)
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
            sums = torch.cat([self._batch_sums(output, batch).float(),
                              torch.stack([grad_norm.float(), torch.tensor(float(batch.num_tokens),
                                                                           device=grad_norm.device)])])
            if self.world_size > 1:
                dist.all_reduce(sums)
            (mlm_loss, mlm_correct, masked, nsp_loss, nsp_correct, examples, grad_norm_sum,
             tokens) = sums.tolist()
            grad_norm_value = grad_norm_sum / self.world_size  # identical on every rank after DDP's all-reduce
            loss = mlm_loss / masked + nsp_loss / examples
            if not (math.isfinite(loss) and math.isfinite(grad_norm_value)):
                self.optimizer.zero_grad(set_to_none=True)
                what = "loss" if not math.isfinite(loss) else "gradient norm"
                raise NonFiniteLossError(
                    f"the {what} became {loss if what == 'loss' else grad_norm_value} at step {step}; training "
                    "stopped before applying that update. " + self._restart_advice(), step, self.last_good_checkpoint)
            warning = self._watch_divergence(step, loss)
            with self._lock:
                self.optimizer.step()
                self.step = step
            self.optimizer.zero_grad(set_to_none=True)
        except TrainingError:
            raise
        except RuntimeError as error:
            if not _is_out_of_memory(error):
                raise
            self.optimizer.zero_grad(set_to_none=True)
            raise OutOfMemoryTrainingError(
                f"{self.device} ran out of memory at step {step} with batch size {config.batch_size} × sequence "
                f"length {config.seq_len}; use a smaller --batch-size (e.g. {max(1, config.batch_size // 2)}) "
                f"or --seq-len (e.g. {max(8, config.seq_len // 2)}), or a smaller --preset") from error
        seconds = time.perf_counter() - started
        return StepStats(
            step=step, total_steps=config.steps, loss=loss, mlm_loss=mlm_loss / masked,
            nsp_loss=nsp_loss / examples, mlm_accuracy=mlm_correct / masked, nsp_accuracy=nsp_correct / examples,
            learning_rate=learning_rate, grad_norm=grad_norm_value, tokens=int(tokens),
            tokens_per_second=tokens / seconds, elapsed_seconds=self._elapsed(), warning=warning,
        )

    def _watch_divergence(self, step: int, loss: float) -> str | None:
        """Feed the loss to the divergence monitor: DivergenceError (before the update is applied) when the run
        has diverged; a warning text on the first step the smoothed loss is far above its best."""
        monitor, config = self._divergence, self.config
        monitor.update(step, loss)
        if self._unconfirmed_checkpoint is not None:  # this loss is the one of the weights it holds
            if monitor.confirms(loss):
                self._confirm_checkpoint()
            else:
                self._unconfirmed_checkpoint = None
        if monitor.diverged:
            self.optimizer.zero_grad(set_to_none=True)
            raise DivergenceError(
                f"the loss diverged: {monitor.describe(step)}, above {config.divergence_factor:g}× its best for "
                f"{monitor.steps_above} steps — it explodes without becoming NaN. Training stopped before applying "
                f"that update. {self._restart_advice()}. (To turn this check off: divergence_factor=0, "
                "bert-train --divergence-factor 0.)",
                step, monitor.smoothed, monitor.best, monitor.best_step, self.last_good_checkpoint)
        if monitor.started_rising:
            return (f"the loss is rising far: {monitor.describe(step)}; the run stops if it stays above "
                    f"{config.divergence_factor:g}× its best for {config.divergence_patience} steps. Is the learning "
                    f"rate ({config.lr:g}) too high?")
        return None

    def _write_summary(self) -> None:
        checksums = self._replica_checksums()
        if not self.is_main:
            return
        evaluation = self.last_eval
        self.run_folder.write_summary({
            "step": self.step, "total_steps": self.config.steps, "elapsed_seconds": self._elapsed(),
            "eval": evaluation.to_dict() if evaluation else None,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "device": str(self.device), "world_size": self.world_size,
            "num_parameters": self.model.num_parameters(), "replica_checksums": checksums,
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


__all__ = [
    "CHECKPOINTS_DIR", "LATEST_POINTER", "TRAINER_STATE_FILE", "CheckpointWriteError", "CorpusError",
    "DivergenceError", "EvalStats", "MetricsLog", "NonFiniteLossError", "OutOfMemoryTrainingError",
    "RunFolderBusyError", "RunFolderError", "RunFolderWriteError", "StepStats", "Trainer", "TrainingConfig",
    "TrainingError", "find_checkpoint", "make_optimizer", "resolve_device", "warm_up", "weight_decay_groups",
]
