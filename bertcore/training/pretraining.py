"""MLM + NSP pretraining: the `PretrainingTask` of the shared training loop, and `Trainer`, the loop running it.

The loop itself (run folder and lock, checkpoints, exact resume, stop/pause, bf16, DDP, NaN/OOM/divergence
errors, metrics.jsonl, final/, summary.json) is `bertcore.training.loop.TrainingLoop`, shared with fine-tuning
(bertcore.training.finetuning); its docstring describes the protocol. What is here is what pretraining means: a
corpus, a vocabulary (reused or trained), a `BertForPreTraining`, MLM + NSP batches, and their statistics.

    from bertcore.training.pretraining import Trainer, TrainingConfig, warm_up

    warm_up()                                   # once, early (e.g. before the window shows)
    trainer = Trainer(TrainingConfig(corpus="assets/corpus/tinyshakespeare.txt", vocab="assets/vocab.txt",
                                     preset="mini", steps=2000, out_dir="runs/demo"))
    for stats in trainer.steps():               # in a worker thread
        print(stats.step, stats.loss, stats.mlm_accuracy, stats.eval and stats.eval.mlm_accuracy)

From any other thread: trainer.request_stop(), .pause() / .resume(), .request_checkpoint(), .save_checkpoint(),
.snapshot_state_dict() / .snapshot_model(); trainer.close() (or `with Trainer(...) as trainer:`) releases the
run folder for good.

metrics.jsonl records of a pretraining run: "step" = StepStats.to_dict(), "eval" = EvalStats.to_dict(), and the
loop's "checkpoint", "warning" and "error" records (bertcore.training.loop).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from bertcore.data.corpus import Batch, CorpusError, PretrainingData
from bertcore.data.prepare import ProgressCallback, corpus_change_note, prepare_corpus, vocabulary_sample
from bertcore.data.prepared import PreparedCorpus
from bertcore.data.sources import CorpusSource
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
from bertcore.files.metrics_log import MetricsLog  # re-exported, as below: their home before bertcore.files
from bertcore.files.run_folder import (  # re-exported: their home before bertcore.files.run_folder
    CHECKPOINTS_DIR,
    LATEST_POINTER,
    TRAINER_STATE_FILE,
)
from bertcore.files.run_lookup import find_checkpoint
from bertcore.models.bert import IGNORE_INDEX
from bertcore.training.loop import TrainingLoop
from bertcore.training.pretraining_config import TrainingConfig
from bertcore.training.setup import (  # re-exported: their home before bertcore.training.setup
    make_optimizer,
    resolve_device,
    warm_up,
    weight_decay_groups,
)
from bertcore.training.task import LoopPlace, TrainingTask


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
    # Set on the first step of a stretch where the smoothed loss is far above its best (see
    # bertcore.training.divergence): the run stops with a DivergenceError if it stays there. metrics.jsonl holds it
    # as a "warning" record.
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        values = {"kind": "step", **dataclasses.asdict(self)}
        del values["eval"], values["checkpoint"], values["warning"]
        return values


class PretrainingTask(TrainingTask):
    """MLM + NSP on a corpus: a `BertForPreTraining` built from a preset (or `model_config`), continued from
    `config.init_from`, or resumed; batches and held-out batches from `bertcore.data.corpus.PretrainingData`."""

    metric_names = ("mlm_accuracy", "nsp_accuracy")
    command = "bert-train"
    smaller_model_hint = ", or a smaller --preset"

    def __init__(self, config: TrainingConfig, model_config=None, progress: ProgressCallback | None = None):
        from bertcore.files.resources import default_corpus_path

        self.config = config
        self.model_config = model_config
        self.total_steps = config.steps
        self.warmup_steps = config.resolved_warmup_steps
        # Only the files' list and stats here: the text is read once, by the preparation in setup (or never, when
        # the cache has it). `progress` hears about that pass (and the vocabulary's sample), on rank 0.
        self.corpus_source = CorpusSource.open(config.corpus or default_corpus_path(), text_field=config.text_field)
        self.progress = progress

    def setup(self, loop: LoopPlace, resume_from: Path | None) -> None:
        from bertcore.models.bert import BertForPreTraining
        from bertcore.models.checkpoint import load_pretrained
        from bertcore.models.config import preset
        from bertcore.tokenization.wordpiece import BertTokenizer

        config = self.config
        if resume_from is not None:
            model, tokenizer = load_pretrained(resume_from)
        elif config.init_from:
            model, tokenizer = load_pretrained(config.init_from)
        else:
            tokenizer = BertTokenizer.from_vocab_file(config.vocab) if config.vocab else self._train_vocabulary(loop)
            model_config = self.model_config or preset(config.preset)
            model_config = model_config.replace(
                vocab_size=tokenizer.vocab_size,  # the embedding table follows the vocabulary in use
                max_position_embeddings=max(model_config.max_position_embeddings, config.seq_len))
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(config.seed)
                model = BertForPreTraining(model_config)
        if not isinstance(model, BertForPreTraining):
            raise ValueError(f"{resume_from or config.init_from} holds a {type(model).__name__}; pretraining continues "
                             "a BertForPreTraining (or a bare encoder). Fine-tune it with bert-finetune instead")
        model.has_pretraining_heads = True  # trained from here on (a bare encoder's heads start fresh): saved too
        if config.seq_len > model.config.max_position_embeddings:
            raise ValueError(f"seq_len is {config.seq_len} but the model has only "
                             f"{model.config.max_position_embeddings} positions; use --seq-len "
                             f"{model.config.max_position_embeddings} or less")
        self.model, self.tokenizer = model, tokenizer
        prepared = self._prepared_corpus(loop, tokenizer, resume_from)
        self.data = PretrainingData(prepared, tokenizer, seq_len=config.seq_len, seed=config.seed,
                                    heldout_fraction=config.heldout_fraction, short_seq_prob=config.short_seq_prob,
                                    mlm_probability=config.mlm_probability, length_buckets=config.length_buckets,
                                    masking=config.masking)
        self.heldout_batches = (self.data.heldout_batches(config.eval_batches, config.batch_size) if loop.is_main
                                else [])

    def _train_vocabulary(self, loop: LoopPlace):
        from bertcore.tokenization.wordpiece import BertTokenizer

        if loop.is_main:
            sample = vocabulary_sample(self.corpus_source, self.config.vocab_sample, self.progress)
            loop.run_folder.write_vocabulary(BertTokenizer.train(sample, vocab_size=self.config.vocab_size))
        if loop.world_size > 1:
            dist.barrier()  # the other ranks read rank 0's vocabulary: one vocabulary for all
        return BertTokenizer.from_vocab_file(loop.run_folder.vocab_path)

    def _prepared_corpus(self, loop: LoopPlace, tokenizer, resume_from: Path | None) -> PreparedCorpus:
        """The corpus prepared for `tokenizer`, from the cache or prepared now by rank 0 while the other ranks wait
        (then they map the same files). A resume notes when the corpus is not the one the run began on."""
        cache = self.config.data_cache
        prepared = (prepare_corpus(self.corpus_source, tokenizer, cache_dir=cache, progress=self.progress)
                    if loop.is_main else None)
        if loop.world_size > 1:
            dist.barrier()
        self.prepared = prepared or prepare_corpus(self.corpus_source, tokenizer, cache_dir=cache, create=False)
        if resume_from is not None and loop.is_main and loop.run_folder.run_config_path.is_file():
            note = corpus_change_note(loop.run_folder.read_run_config().get("corpus"), self.prepared,
                                      self.corpus_source)
            if note:
                loop.resume_note = "; ".join(filter(None, [getattr(loop, "resume_note", None), note]))
        return self.prepared

    def run_config(self) -> dict[str, Any]:
        return {**super().run_config(), "corpus": self.prepared.record()}  # which prepared corpus: a resume compares

    def train_batch(self, step: int, batch_size: int, rank: int, world_size: int) -> Batch:
        return self.data.train_batch(step, batch_size, rank)

    def batch_sums(self, output, batch: Batch) -> torch.Tensor:
        """(mlm loss·n_masked, mlm correct, n_masked, nsp loss·B, nsp correct, B) of one forward pass."""
        masked_labels = batch.labels[batch.labels != IGNORE_INDEX]  # (N,), in the order of prediction_logits rows
        mlm_correct = (output.prediction_logits.argmax(-1) == masked_labels).sum()
        nsp_correct = (output.seq_relationship_logits.argmax(-1) == batch.next_sentence_label).sum()
        num_masked, num_examples = masked_labels.numel(), batch.next_sentence_label.numel()
        return torch.stack([
            output.mlm_loss.detach().float() * num_masked, mlm_correct.float(),
            torch.tensor(float(num_masked), device=mlm_correct.device),
            output.nsp_loss.detach().float() * num_examples, nsp_correct.float(),
            torch.tensor(float(num_examples), device=mlm_correct.device),
        ])

    def loss_of(self, sums: list[float]) -> float:
        mlm_loss, _, masked, nsp_loss, _, examples = sums
        return mlm_loss / masked + nsp_loss / examples

    def step_stats(self, sums: list[float], **common: Any) -> StepStats:
        mlm_loss, mlm_correct, masked, nsp_loss, nsp_correct, examples = sums
        return StepStats(mlm_loss=mlm_loss / masked, nsp_loss=nsp_loss / examples, mlm_accuracy=mlm_correct / masked,
                         nsp_accuracy=nsp_correct / examples, **common)

    def evaluate(self, forward, step: int) -> EvalStats | None:
        """Held-out loss and accuracies over the fixed held-out batches (None without a held-out split)."""
        if not self.heldout_batches:
            return None
        sums = torch.zeros(6, dtype=torch.float64)
        for batch in self.heldout_batches:
            sums += self.batch_sums(*forward(batch)).double().cpu()
        mlm_loss, mlm_correct, masked, nsp_loss, nsp_correct, examples = sums.tolist()
        return EvalStats(step=step, loss=mlm_loss / masked + nsp_loss / examples,
                         mlm_loss=mlm_loss / masked, nsp_loss=nsp_loss / examples,
                         mlm_accuracy=mlm_correct / masked, nsp_accuracy=nsp_correct / examples,
                         num_examples=int(examples))


class Trainer(TrainingLoop):
    """MLM + NSP pretraining of a `BertForPreTraining` on a corpus: the shared `TrainingLoop` running a
    `PretrainingTask`; see bertcore.training.loop for the protocol.

    Construction does the setup work (reads and tokenizes the corpus, maybe trains a vocabulary, builds or
    loads the model, writes run_config.json): create it in the worker thread. It takes the run folder's lock
    (RunFolderBusyError when another run holds it). `resume=True` continues the run in `config.out_dir` from
    its latest checkpoint; a path continues from that checkpoint folder, which must belong to that run.
    `model_config` replaces the preset (its vocab_size is set to the vocabulary's size).
    """

    task: PretrainingTask
    last_eval: EvalStats | None

    def __init__(self, config: TrainingConfig, *, model_config=None, resume: bool | str | Path = False,
                 command: list[str] | None = None, progress: ProgressCallback | None = None):
        super().__init__(config, PretrainingTask(config, model_config, progress), resume=resume, command=command)

    @property
    def data(self) -> PretrainingData:
        return self.task.data

    @property
    def heldout_batches(self) -> list[Batch]:
        return self.task.heldout_batches


__all__ = [
    "CHECKPOINTS_DIR", "LATEST_POINTER", "TRAINER_STATE_FILE", "CheckpointWriteError", "CorpusError",
    "DivergenceError", "EvalStats", "MetricsLog", "NonFiniteLossError", "OutOfMemoryTrainingError",
    "PretrainingTask", "RunFolderBusyError", "RunFolderError", "RunFolderWriteError", "StepStats", "Trainer",
    "TrainingConfig", "TrainingError", "find_checkpoint", "make_optimizer", "resolve_device", "warm_up",
    "weight_decay_groups",
]
