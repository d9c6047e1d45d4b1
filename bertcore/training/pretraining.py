"""Pretraining with the family's objectives: the `PretrainingTask` of the shared training loop, and `Trainer`.

The loop itself (run folder and lock, checkpoints, exact resume, stop/pause, bf16, DDP, NaN/OOM/divergence
errors, metrics.jsonl, final/, summary.json) is `bertcore.training.loop.TrainingLoop`, shared with fine-tuning
(bertcore.training.finetuning); its docstring describes the protocol. What is here is what pretraining means: a
corpus, a vocabulary (reused or trained), a model and its objective (bertcore.training.objectives: BERT's MLM + NSP
by default, RoBERTa's mlm, ALBERT's mlm+sop, ELECTRA's rtd; the family from `arch` or init_from), and statistics.

    from bertcore.training.pretraining import Trainer, TrainingConfig, warm_up

    warm_up()                                   # once, early (e.g. before the window shows)
    trainer = Trainer(TrainingConfig(corpus="assets/corpus/tinyshakespeare.txt", vocab="assets/vocab.txt",
                                     preset="mini", steps=2000, out_dir="runs/demo"))
    for stats in trainer.steps():               # in a worker thread
        print(stats.step, stats.loss, stats.mlm_accuracy, stats.eval and stats.eval.mlm_accuracy)

From any other thread: trainer.request_stop(), .pause() / .resume(), .request_checkpoint(), .save_checkpoint(),
.snapshot_state_dict() / .snapshot_model(); trainer.close() (or `with Trainer(...) as trainer:`) releases the
run folder for good.

metrics.jsonl records of a pretraining run: "step" = StepStats.to_dict(), "eval" = EvalStats.to_dict() for mlm+nsp
(ObjectiveStepStats / ObjectiveEvalStats, the objective's metrics by name, for the others), and the loop's
"checkpoint", "warning" and "error" records (bertcore.training.loop).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from bertcore.data.batches import Batch, PretrainingData, step_rng
from bertcore.data.corpus import CorpusError
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
from bertcore.files.file_names import (  # re-exported: their home before bertcore.files
    CHECKPOINTS_DIR,
    LATEST_POINTER,
    TRAINER_STATE_FILE,
)
from bertcore.files.metrics_log import MetricsLog  # re-exported, as above: its home before bertcore.files
from bertcore.files.run_folder import find_checkpoint
from bertcore.models.families import pretraining_class, pretraining_objectives
from bertcore.training.loop import (  # re-exported: their home before bertcore.training.loop
    AnalysisHook,
    TrainingLoop,
    make_optimizer,
    resolve_device,
    warm_up,
    weight_decay_groups,
)
from bertcore.training.objectives import Objective, family_config, family_of, objective_for
from bertcore.training.settings import TrainingConfig
from bertcore.training.task import LoopPlace, TrainingTask, metric_numbers, step_record


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
    # The analysis record (bertcore.analysis.records, plain JSON) finished since the previous step record, when the
    # run measures what its model learns (--analysis-every); metrics.jsonl holds it as an "analysis" record.
    analysis: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        values = {"kind": "step", **dataclasses.asdict(self)}
        del values["eval"], values["checkpoint"], values["warning"], values["analysis"]
        return values


@dataclass(frozen=True)
class ObjectiveEvalStats:
    """Held-out metrics of an objective other than mlm+nsp (bertcore.training.objectives: its metric_names)."""

    step: int
    loss: float
    metrics: Mapping[str, float]  # e.g. {"mlm_loss": ..., "mlm_accuracy": ...}
    num_examples: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "eval", "step": self.step, "loss": self.loss, **self.metrics,
                "num_examples": self.num_examples}


@dataclass(frozen=True)
class ObjectiveStepStats:
    """One step of an objective other than mlm+nsp: StepStats' common fields, and the objective's metrics by name
    (mlm: mlm_loss, mlm_accuracy; mlm+sop: + sop_loss, sop_accuracy; rtd: generator_loss, discriminator_loss,
    generator_accuracy, discriminator_accuracy, replaced_accuracy, original_accuracy). Plain numbers."""

    step: int
    total_steps: int
    loss: float  # the objective's loss (rtd: generator_loss + discriminator_weight × discriminator_loss)
    metrics: Mapping[str, float]
    learning_rate: float
    grad_norm: float
    tokens: int
    tokens_per_second: float
    elapsed_seconds: float
    eval: ObjectiveEvalStats | None = None
    checkpoint: str | None = None
    warning: str | None = None
    analysis: dict[str, Any] | None = None  # as StepStats.analysis

    def to_dict(self) -> dict[str, Any]:
        return step_record(self)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> ObjectiveStepStats:
        """A metrics.jsonl "step" record back as the record (eval, checkpoint: None); unknown numbers are metrics."""
        fixed = {"kind", *(field.name for field in dataclasses.fields(cls))}
        warning = record.get("warning")
        return cls(step=int(record["step"]), total_steps=int(record.get("total_steps", 0)),
                   loss=float(record.get("loss", math.nan)), metrics=metric_numbers(record, fixed),
                   learning_rate=float(record.get("learning_rate", math.nan)),
                   grad_norm=float(record.get("grad_norm", math.nan)), tokens=int(record.get("tokens", 0)),
                   tokens_per_second=float(record.get("tokens_per_second", math.nan)),
                   elapsed_seconds=float(record.get("elapsed_seconds", math.nan)),
                   warning=warning if isinstance(warning, str) and warning else None)


def objective_stats_from_record(record: Mapping[str, Any]) -> ObjectiveStepStats | ObjectiveEvalStats | None:
    """A metrics.jsonl record of a run whose objective is not mlm+nsp as its step or evaluation record; None for
    the loop's other records (checkpoint, warning, error)."""
    kind = record.get("kind")
    if kind == "step" and "step" in record:
        return ObjectiveStepStats.from_dict(record)
    if kind == "eval" and "step" in record:
        fixed = {"kind", "step", "loss", "num_examples"}
        examples = record.get("num_examples")
        return ObjectiveEvalStats(step=int(record["step"]), loss=float(record.get("loss", math.nan)),
                                  metrics=metric_numbers(record, fixed),
                                  num_examples=examples if isinstance(examples, int) else 0)
    return None


PAIR_OBJECTIVES = ("mlm+nsp", "mlm+sop")  # their examples are sentence pairs, laid out [CLS] A [SEP] B [SEP]


def _check_pair_layout(tokenizer, objective: str) -> None:
    """A pair objective's batches are laid out as BERT and ALBERT read pairs; a tokenizer whose own pair template
    differs (RoBERTa's <s> A </s></s> B </s>, one segment) would train the model on a layout it never sees again."""
    if objective not in PAIR_OBJECTIVES:
        return
    word = next(i for i in range(tokenizer.vocab_size) if i not in tokenizer.special_token_ids)  # A's and B's one word
    ids, segments, _ = tokenizer.layout_ids([word], [word])
    expected = [tokenizer.cls_token_id, word, tokenizer.sep_token_id, word, tokenizer.sep_token_id]
    if ids != expected or segments != [0, 0, 0, 1, 1]:
        shown = " ".join("A" if i == 1 else "B" if i == len(ids) - 2 and ids[i] == word else token
                         for i, token in enumerate(tokenizer.convert_ids_to_tokens(ids)))
        raise ValueError(
            f"objective {objective} trains on sentence pairs laid out [CLS] A [SEP] B [SEP] with two segments, but "
            f"this tokenizer lays a pair out as {shown} (segments {segments}); its family pretrains on single "
            "segments: use --objective mlm (or rtd), or a WordPiece/SentencePiece vocabulary for mlm+nsp / mlm+sop")


class PretrainingTask(TrainingTask):
    """Pretraining on a corpus with an objective (bertcore.training.objectives; BERT's MLM + NSP by default): a model
    of the objective's class built from a preset (or `model_config`) in the family `config.resolved_arch`, continued
    from `config.init_from`, or resumed; batches and held-out batches from `bertcore.data.batches.PretrainingData`."""

    metric_names = ("mlm_accuracy", "nsp_accuracy")
    command = "bert-train"
    pretrains = True  # whatever the family: the advice after a NaN uses pretraining's learning rates
    # Sampling, collating and masking a batch took a quarter of a base step at 256 × 128 on an H200; two workers
    # made bert-train's loop 1.40× faster there (benchmarks/train_loop_speed.py). Fine-tuning's batches are
    # features tokenized once, and nobody has measured workers for them.
    batch_workers: ClassVar[dict[str, int]] = {"cuda": 2}
    objective: Objective  # set by setup: config.objective, or what init_from's folder was trained for
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
        from bertcore.models.checkpoint import load_pretrained
        from bertcore.models.config import preset
        from bertcore.tokenization.pretrained import tokenizer_from_path

        config = self.config
        source = resume_from or config.init_from
        if source is not None:
            loaded, tokenizer = load_pretrained(source)
            self.objective = objective_for(self._objective_of(loaded), config)
            model = self.objective.adopt(loaded, Path(source), config)
        else:
            tokenizer = tokenizer_from_path(config.vocab) if config.vocab else self._train_vocabulary(loop)
            self.objective = objective_for(config.resolved_objective, config)
            model_config = family_config(
                config.resolved_arch, self.model_config or preset(config.preset), vocab_size=tokenizer.vocab_size,
                pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
                sep_token_id=tokenizer.sep_token_id, seq_len=config.seq_len)
            model = self.objective.build(config.resolved_arch, model_config, config)
        _check_pair_layout(tokenizer, self.objective.name)
        positions = getattr(model.config, "max_length", model.config.max_position_embeddings)  # RoBERTa: less pad
        if config.seq_len > positions:
            raise ValueError(f"seq_len is {config.seq_len} but the model has only {positions} positions; use "
                             f"--seq-len {positions} or less")
        self.model, self.tokenizer = model, tokenizer
        prepared = self._prepared_corpus(loop, tokenizer, resume_from)
        self.data = PretrainingData(prepared, tokenizer, seq_len=config.seq_len, seed=config.seed,
                                    heldout_fraction=config.heldout_fraction, short_seq_prob=config.short_seq_prob,
                                    mlm_probability=config.mlm_probability, length_buckets=config.length_buckets,
                                    masking=config.masking, examples=self.objective.recipe)
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

    def train_batch(self, step: int, batch_size: int, rank: int, world_size: int):
        return self.data.train_batch(step, batch_size, rank)

    def _objective_of(self, loaded) -> str:
        """The objective of a run continuing a loaded folder: the configured one; else, continuing init_from, the one
        that trains the folder's class (a BertForMaskedLM continues with mlm), or its family's own."""
        config = self.config
        if config.objective or not config.init_from:
            return config.resolved_objective
        arch = family_of(loaded)
        names = pretraining_objectives(arch)
        return next((name for name in names if type(loaded) is pretraining_class(arch, name)), names[0] if names
                    else "mlm+nsp")

    def batch_sums(self, output, batch) -> torch.Tensor:
        """The objective's numbers of one forward pass (mlm+nsp: mlm loss·n_masked, mlm correct, n_masked,
        nsp loss·B, nsp correct, B)."""
        return self.objective.sums(output, batch)

    def loss_of(self, sums: list[float]) -> float:
        return self.objective.loss(sums)

    def step_stats(self, sums: list[float], **common: Any) -> StepStats | ObjectiveStepStats:
        metrics = self.objective.metrics(sums)
        if self.objective.name == "mlm+nsp":
            return StepStats(**metrics, **common)
        return ObjectiveStepStats(metrics=metrics, **common)

    def evaluate(self, forward, step: int) -> EvalStats | ObjectiveEvalStats | None:
        """Held-out loss and metrics over the fixed held-out batches (None without a held-out split). Each batch's
        randomness (rtd's generator samples) is seeded by its index: every evaluation sees the same draws."""
        if not self.heldout_batches:
            return None
        sums, num_examples = None, 0
        for index, batch in enumerate(self.heldout_batches):
            with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_available() else []):
                torch.manual_seed(step_rng(self.config.seed, 0, index, "heldout-forward").getrandbits(63))
                batch_sums = self.batch_sums(*forward(batch)).double().cpu()
            sums = batch_sums if sums is None else sums + batch_sums
            num_examples += int(batch.input_ids.size(0))
        totals = sums.tolist()
        metrics = self.objective.metrics(totals)
        if self.objective.name == "mlm+nsp":
            return EvalStats(step=step, loss=self.objective.loss(totals), **metrics, num_examples=int(totals[5]))
        return ObjectiveEvalStats(step=step, loss=self.objective.loss(totals), metrics=metrics,
                                  num_examples=num_examples)

    @property
    def published_model(self):
        return self.objective.published(self.model)

    def write_model_files(self, folder: Path) -> None:
        self.objective.write_model_files(self.model, self.tokenizer, folder)

    def run_config(self) -> dict[str, Any]:
        values = {"model": self.model.config.to_dict(), "objective": self.objective.name,
                  "corpus": self.prepared.record()}  # which prepared corpus: a resume compares it
        if hasattr(self.model, "generator"):  # rtd: the generator's config beside the discriminator's
            values["generator"] = self.model.generator.config.to_dict()
        return values


class Trainer(TrainingLoop):
    """Pretraining on a corpus with config.objective (BERT's MLM + NSP by default): the shared `TrainingLoop`
    running a `PretrainingTask`; see bertcore.training.loop for the protocol.

    Construction does the setup work (reads and tokenizes the corpus, maybe trains a vocabulary, builds or
    loads the model, writes run_config.json): create it in the worker thread. It takes the run folder's lock
    (RunFolderBusyError when another run holds it). `resume=True` continues the run in `config.out_dir` from
    its latest checkpoint; a path continues from that checkpoint folder, which must belong to that run.
    `model_config` replaces the preset (its vocab_size is set to the vocabulary's size). `analysis` measures the
    model as it trains when config.analysis_every asks for it (bertcore.analysis.schedule.AnalysisSchedule).
    """

    task: PretrainingTask
    last_eval: EvalStats | None

    def __init__(self, config: TrainingConfig, *, model_config=None, resume: bool | str | Path = False,
                 command: list[str] | None = None, progress: ProgressCallback | None = None,
                 analysis: AnalysisHook | None = None):
        super().__init__(config, PretrainingTask(config, model_config, progress), resume=resume, command=command,
                         analysis=analysis)

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
