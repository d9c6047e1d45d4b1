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
Only one `steps()` loop may run at a time.

Run folder (shared by the CLI and the app; the app tails metrics.jsonl):
    <out>/run_config.json         {"training": TrainingConfig fields, "model": BertConfig fields, "world_size",
                                   "torch_version", "command" (CLI only), "created"}
    <out>/vocab.txt, tokenizer_config.json   the vocabulary in use
    <out>/metrics.jsonl           one JSON object per line, flushed per line:
                                  {"kind": "step", "step", "total_steps", "loss", "mlm_loss", "nsp_loss",
                                   "mlm_accuracy", "nsp_accuracy", "learning_rate", "grad_norm", "tokens",
                                   "tokens_per_second", "elapsed_seconds"}
                                  {"kind": "eval", "step", "loss", "mlm_loss", "nsp_loss", "mlm_accuracy",
                                   "nsp_accuracy", "num_examples"}
                                  {"kind": "checkpoint", "step", "path"}
                                  {"kind": "error", "step", "message"}
                                  Per step: its "step" record, then its "eval" record (if any), then its
                                  "checkpoint" record (if any). On resume, records after the resumed step are
                                  dropped before appending, so the file always holds one curve.
    <out>/checkpoints/step-000500/   config.json, model.safetensors, vocab.txt, tokenizer_config.json
                                  (loadable by bertcore.checkpoint.load_pretrained and by transformers) +
                                  trainer_state.pt (optimizer state, step, elapsed; torch.load(weights_only=True))
    <out>/checkpoints/latest      text file naming the newest complete checkpoint folder ("step-000500");
                                  a checkpoint is written to a hidden temporary folder, renamed into place,
                                  and only then is `latest` replaced (os.replace), so a crash mid-write never
                                  leaves a half checkpoint as the latest.
    <out>/final/                  the final weights in the standard layout (no optimizer state), written when
                                  the run reaches `steps` (a stopped run keeps its weights in checkpoints/)
    <out>/summary.json            last step, last held-out metrics, training seconds, last checkpoint, device,
                                  world size, per-rank weight checksums (equal under DDP); written at the end

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
import json
import math
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from bertcore.data import Batch, CorpusError, PretrainingData, read_corpus, step_rng

TRAINER_STATE_FILE = "trainer_state.pt"
TRAINER_STATE_VERSION = 1
CHECKPOINTS_DIR = "checkpoints"
LATEST_POINTER = "latest"


class TrainingError(RuntimeError):
    """A training run that cannot go on; the message says why and what to change."""


class NonFiniteLossError(TrainingError):
    """The loss (or gradient norm) became NaN or infinite; no update was applied for that step."""

    def __init__(self, message: str, step: int, last_checkpoint: Path | None):
        super().__init__(message)
        self.step = step
        self.last_checkpoint = last_checkpoint


class OutOfMemoryTrainingError(TrainingError):
    """The device ran out of memory; use a smaller batch or sequence length."""


@dataclass(frozen=True)
class TrainingConfig:
    corpus: str = ""  # a .txt file or a folder of them; "" = the built-in Tiny Shakespeare
    out_dir: str = "runs/bert"  # run folder: run_config.json, metrics.jsonl, checkpoints/, final/
    preset: str = "mini"  # model size (bertcore.config.PRESETS); ignored when init_from is set
    vocab: str | None = None  # reuse this vocab.txt; None = train a WordPiece vocabulary on the corpus
    vocab_size: int = 8000  # size of the vocabulary trained when vocab is None
    init_from: str | None = None  # a checkpoint folder to train further (its weights, config and vocabulary)
    steps: int = 1000  # optimisation steps in total
    batch_size: int = 32  # sequences per step per process
    seq_len: int = 128  # longest sequence, [CLS]/[SEP] included; batches are padded only to their longest
    lr: float = 5e-4  # peak learning rate, reached after warm-up
    warmup_steps: int | None = None  # linear warm-up; None = 10% of steps; then linear decay to 0
    weight_decay: float = 0.01  # AdamW decoupled decay, not applied to biases and LayerNorm
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # global gradient-norm clipping; 0 = off
    seed: int = 0  # model init, held-out split, batches, masks and dropout all derive from it
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:1", "mps"
    precision: str = "auto"  # "auto" (bf16 autocast on CUDA when supported, else fp32), "fp32", "bf16"
    mlm_probability: float = 0.15  # fraction of tokens picked for the MLM loss
    short_seq_prob: float = 0.1  # fraction of examples with a shorter random target length (as the paper)
    length_buckets: int = 8  # batches cut from a length-sorted pool of this many (less padding); 1 = off
    heldout_fraction: float = 0.02  # documents kept out of training for the held-out metrics
    eval_every: int = 100  # held-out evaluation every N steps (and at the end); 0 = only at the end
    eval_batches: int = 4  # held-out batches per evaluation (a fixed set)
    checkpoint_every: int = 500  # checkpoint every N steps (and at the end / on stop); 0 = only those
    keep_checkpoints: int = 2  # newest step-* folders kept (older ones are deleted)
    compile: bool = False  # torch.compile the model (slow first step; mostly useful on GPUs)
    num_threads: int | None = None  # torch.set_num_threads for this process; None = leave as is

    def __post_init__(self) -> None:
        positive = ("vocab_size", "steps", "batch_size", "seq_len", "eval_batches", "keep_checkpoints",
                    "length_buckets")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("eval_every", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0 (0 = only at the end), got {value!r}")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"warmup_steps is {self.warmup_steps}; it must be between 0 and steps ({self.steps})")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r} (BERT-mini likes about 5e-4)")
        if not self.weight_decay >= 0 or not self.max_grad_norm >= 0:
            raise ValueError("weight_decay and max_grad_norm must be >= 0")
        if not (0 < self.mlm_probability < 1):
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        if not (0 <= self.short_seq_prob <= 1):
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob!r}")
        if not (0 <= self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision {self.precision!r} is not one of auto, fp32, bf16")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {self.num_threads}")
        object.__setattr__(self, "adam_betas", tuple(float(b) for b in self.adam_betas))

    @property
    def resolved_warmup_steps(self) -> int:
        return self.steps // 10 if self.warmup_steps is None else self.warmup_steps

    def learning_rate(self, step: int) -> float:
        """Learning rate of 1-based step `step`: linear warm-up to lr, then linear decay to 0 at `steps`."""
        warmup = self.resolved_warmup_steps
        if step <= warmup:
            return self.lr * step / max(1, warmup)
        return self.lr * max(0.0, (self.steps - step) / max(1, self.steps - warmup))

    def replace(self, **changes: Any) -> TrainingConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["adam_betas"] = list(self.adam_betas)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingConfig:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})


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

    def to_dict(self) -> dict[str, Any]:
        values = {"kind": "step", **dataclasses.asdict(self)}
        del values["eval"], values["checkpoint"]
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


def find_checkpoint(path: str | Path) -> Path:
    """The checkpoint folder to resume from: a step-* folder itself, or a run folder's `latest` (falling back
    to its newest complete step-* folder when the pointer is missing or names a broken folder)."""
    path = Path(path)
    if (path / TRAINER_STATE_FILE).is_file():
        return path
    root = path / CHECKPOINTS_DIR if (path / CHECKPOINTS_DIR).is_dir() else path
    pointer = root / LATEST_POINTER
    if pointer.is_file():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / TRAINER_STATE_FILE).is_file() and (candidate / "config.json").is_file():
            return candidate
    complete = sorted(p for p in root.glob("step-*") if (p / TRAINER_STATE_FILE).is_file())
    if not complete:
        raise TrainingError(f"there is no checkpoint to resume in {path}; start a new run without --resume")
    return complete[-1]


def _distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank); (0, 1, 0) unless torch.distributed is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    return 0, 1, 0


def _is_out_of_memory(error: BaseException) -> bool:
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(error, oom_type) or "out of memory" in str(error).lower()


def _write_json_atomic(path: Path, values: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(values, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _fsync_tree(folder: Path) -> None:
    for file in folder.iterdir():
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())


class MetricsLog:
    """Append-only metrics.jsonl writer: one JSON object per line, flushed per line."""

    def __init__(self, path: Path, truncate_after_step: int | None = None):
        self.path = path
        if truncate_after_step is not None and path.exists():  # a resumed run rewrites history after its step
            kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip() and _record_step(line) <= truncate_after_step]
            temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            temporary.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
            os.replace(temporary, path)
        self._file = open(path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()  # save_checkpoint() may log from another thread

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _record_step(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return 1 << 62  # a torn last line from a crash: drop it


class Trainer:
    """MLM + NSP pretraining of a `BertForPreTraining` on a corpus; see the module docstring for the protocol.

    Construction does the setup work (reads and tokenizes the corpus, maybe trains a vocabulary, builds or
    loads the model, writes run_config.json): create it in the worker thread. `resume=True` continues the
    run in `config.out_dir` from its latest checkpoint; a path continues from that checkpoint folder.
    `model_config` replaces the preset (its vocab_size is set to the vocabulary's size).
    """

    def __init__(self, config: TrainingConfig, *, model_config=None, resume: bool | str | Path = False,
                 command: list[str] | None = None):
        from bertcore.checkpoint import load_pretrained
        from bertcore.config import preset
        from bertcore.model import BertForPreTraining
        from bertcore.resources import default_corpus_path
        from bertcore.tokenizer import BertTokenizer

        self.config = config
        self.rank, self.world_size, local_rank = _distributed()
        self.is_main = self.rank == 0
        self.device = resolve_device(config.device, local_rank)
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.out_dir = Path(config.out_dir)
        self.checkpoint_dir = self.out_dir / CHECKPOINTS_DIR
        if not resume and any(self.checkpoint_dir.glob("step-*")):
            raise ValueError(f"{self.out_dir} already holds a run with checkpoints; resume it (--resume) or "
                             "choose another output folder (--out)")
        corpus_path = Path(config.corpus) if config.corpus else default_corpus_path()
        corpus = read_corpus(corpus_path)

        state: dict[str, Any] | None = None
        self.resumed_from: Path | None = None
        if resume:
            self.resumed_from = find_checkpoint(self.out_dir if resume is True else resume)
            model, tokenizer = load_pretrained(self.resumed_from)
            state = torch.load(self.resumed_from / TRAINER_STATE_FILE, map_location="cpu", weights_only=True)
            if state.get("version") != TRAINER_STATE_VERSION:
                raise TrainingError(f"{self.resumed_from / TRAINER_STATE_FILE} has an unknown format "
                                    f"(version {state.get('version')!r}); it cannot be resumed")
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
        if state is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.step = int(state["step"])
            self._elapsed_before = float(state["elapsed_seconds"])
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

        self._lock = threading.RLock()  # guards the weights/optimizer against the loop and other threads
        self._stop = threading.Event()
        self._unpaused = threading.Event()
        self._unpaused.set()
        self._checkpoint_requested = threading.Event()
        self.last_checkpoint: Path | None = self.resumed_from
        self.last_eval: EvalStats | None = None
        self._metrics: MetricsLog | None = None
        if self.is_main:
            self._prepare_run_folder(command)
        if self.world_size > 1:
            dist.barrier()

    # ---- setup --------------------------------------------------------------------------------------------

    def _train_vocabulary(self, corpus):
        from bertcore.tokenizer import BertTokenizer

        vocab_dir = self.out_dir
        if self.is_main:
            sentences = (sentence for document in corpus.documents for sentence in document)
            BertTokenizer.train(sentences, vocab_size=self.config.vocab_size).save(vocab_dir)
        if self.world_size > 1:
            dist.barrier()  # the other ranks read rank 0's vocabulary: one vocabulary for all
        return BertTokenizer.from_vocab_file(vocab_dir / "vocab.txt")

    def _prepare_run_folder(self, command: list[str] | None) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir.mkdir(exist_ok=True)
        for stale in self.checkpoint_dir.glob(".*tmp-*"):  # half-written checkpoints of a crashed run
            shutil.rmtree(stale, ignore_errors=True)
        if not (self.out_dir / "vocab.txt").exists():
            self.tokenizer.save(self.out_dir)
        run_config_path = self.out_dir / "run_config.json"
        if self.resumed_from is None or not run_config_path.exists():
            _write_json_atomic(run_config_path, {
                "training": self.config.to_dict(), "model": self.model.config.to_dict(),
                "num_parameters": self.model.num_parameters(), "world_size": self.world_size,
                "device": str(self.device), "torch_version": torch.__version__,
                "command": command, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            })
        metrics_path = self.out_dir / "metrics.jsonl"
        if self.resumed_from is None and metrics_path.exists():
            metrics_path.unlink()  # a fresh run in an old folder starts a fresh curve
        self._metrics = MetricsLog(metrics_path, truncate_after_step=self.step if self.resumed_from else None)

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
        (None on ranks other than 0, which write nothing). Thread-safe."""
        if not self.is_main:
            return None
        from bertcore.checkpoint import save_pretrained

        with self._lock:
            if not self._parameters_finite():
                raise NonFiniteLossError(
                    f"the weights hold NaN/inf at step {self.step}; no checkpoint was written. The last good "
                    f"checkpoint is {self.last_checkpoint}; lower the learning rate (now {self.config.lr:g})",
                    self.step, self.last_checkpoint)
            name = f"step-{self.step:06d}"
            final = self.checkpoint_dir / name
            temporary = self.checkpoint_dir / f".tmp-{name}-{os.getpid()}"
            shutil.rmtree(temporary, ignore_errors=True)
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            save_pretrained(self.model, self.tokenizer, temporary)
            torch.save(self._trainer_state(), temporary / TRAINER_STATE_FILE)
            _fsync_tree(temporary)
            if final.exists():  # saving the same step twice: swap the old one out of the way first
                old = self.checkpoint_dir / f".tmp-old-{name}-{os.getpid()}"
                os.replace(final, old)
                os.replace(temporary, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(temporary, final)
            pointer = self.checkpoint_dir / f".{LATEST_POINTER}.tmp-{os.getpid()}"
            pointer.write_text(name + "\n", encoding="utf-8")
            os.replace(pointer, self.checkpoint_dir / LATEST_POINTER)
            self.last_checkpoint = final
            self._prune_checkpoints(keep=final)
        if self._metrics is not None:
            self._metrics.write({"kind": "checkpoint", "step": self.step, "path": str(final)})
        return final

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "version": TRAINER_STATE_VERSION,
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "elapsed_seconds": self._elapsed(),
            "training_config": self.config.to_dict(),
            "world_size": self.world_size,
        }

    def _prune_checkpoints(self, keep: Path) -> None:
        folders = sorted(p for p in self.checkpoint_dir.glob("step-*") if p.is_dir())
        for folder in folders[: max(0, len(folders) - self.config.keep_checkpoints)]:
            if folder != keep:
                shutil.rmtree(folder, ignore_errors=True)

    def _parameters_finite(self) -> bool:
        norms = torch._foreach_norm([p.detach() for p in self.model.parameters()])
        return bool(torch.isfinite(torch.stack(norms)).all())

    def save_final(self) -> Path | None:
        """Write `<out>/final/`: the weights and vocabulary only, in the standard layout."""
        if not self.is_main:
            return None
        from bertcore.checkpoint import save_pretrained

        with self._lock:
            save_pretrained(self.model, self.tokenizer, self.out_dir / "final")
        return self.out_dir / "final"

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
        request, on stop and at the end, then writes final/ and summary.json. Raises `NonFiniteLossError`
        (no update applied, last good checkpoint kept) or `OutOfMemoryTrainingError`.
        """
        if self.is_main and self._metrics is None:  # iterating again after an earlier loop was left
            self._metrics = MetricsLog(self.out_dir / "metrics.jsonl")
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
                    if evaluation is not None:
                        self._metrics.write(evaluation.to_dict())
                checkpoint = None
                due = config.checkpoint_every and self.step % config.checkpoint_every == 0
                if due or self._checkpoint_requested.is_set() or self.step == config.steps:
                    self._checkpoint_requested.clear()
                    checkpoint = self.save_checkpoint()
                yield dataclasses.replace(stats, eval=evaluation, checkpoint=str(checkpoint) if checkpoint else None)
            else:
                self.save_final()
                self._write_summary()
                return
            # stopped early: keep the progress, with held-out numbers for it
            self._stop.clear()  # the request is consumed; a later steps() call continues the run
            if self.step > 0 and (self.last_eval is None or self.last_eval.step != self.step):
                evaluation = self.evaluate()
                if evaluation is not None and self._metrics is not None:
                    self._metrics.write(evaluation.to_dict())
            already_saved = self.last_checkpoint is not None and self.last_checkpoint.name == f"step-{self.step:06d}"
            if self.step > 0 and not already_saved:
                self.save_checkpoint()
            self._write_summary()
        except TrainingError as error:
            if self._metrics is not None:
                self._metrics.write({"kind": "error", "step": getattr(error, "step", self.step),
                                     "message": str(error)})
            raise
        finally:
            self._elapsed_before, self._session_started = self._elapsed(), None
            if self._metrics is not None:
                self._metrics.close()
                self._metrics = None

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
                    f"stopped before applying that update. "
                    + (f"The last good checkpoint is {self.last_checkpoint}; " if self.last_checkpoint else
                       "No checkpoint was written yet; ")
                    + f"lower the learning rate (now {config.lr:g}) or lengthen the warm-up and "
                    + ("resume from it" if self.last_checkpoint else "start again"), step, self.last_checkpoint)
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
            tokens_per_second=tokens / seconds, elapsed_seconds=self._elapsed(),
        )

    def _write_summary(self) -> None:
        checksums = self._replica_checksums()
        if not self.is_main:
            return
        evaluation = self.last_eval
        _write_json_atomic(self.out_dir / "summary.json", {
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
    "CorpusError", "EvalStats", "NonFiniteLossError", "OutOfMemoryTrainingError", "StepStats", "Trainer",
    "TrainingConfig", "TrainingError", "find_checkpoint", "make_optimizer", "resolve_device", "warm_up",
    "weight_decay_groups",
]
