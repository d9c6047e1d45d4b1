"""The training run as the Train tab sees it, without Qt: its settings and the engine behind it.

- `TrainingSettings`: what the tab's form asks for, validated, with messages a user understands.
- `EngineRun`: what the tab needs from a running engine; `make_engine_run` adapts `bertcore.training.pretraining`,
  whose `StepStats` (plain numbers, with the step's `EvalStats` and checkpoint) reach the GUI as they are.
- `RunDriver`: one run as its training thread drives it (builds the engine, hands weight snapshots to the
  prober every N steps, passes a stop request on).
- `StepPace`: a run's recent pace, for the time it has left; the devices to pick from.

The probe thread's side is `explorer.runs.snapshot_probe`; a run in words (a failure, a configuration, a
duration) is `explorer.runs.run_descriptions`.

Everything here runs headless (the engine and the prober in worker threads); `explorer.train._qt.training_panel`
is the thin Qt view over it.
"""

from __future__ import annotations

import abc
import inspect
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.models.config import PRESETS
from bertcore.training.settings import OBJECTIVES, TrainingConfig, config_field_problems, default_of
from explorer.runs.form_words import CONFIG_NAMES
from explorer.runs.probe_history import ProbePair
from explorer.runs.snapshot_probe import ProbeMasking, WeightsJob

PRESET_NAMES = tuple(PRESETS)  # bertcore's model sizes, smallest first
CONTINUE_LOADED = "continue the loaded model"
DEFAULT_PROBE = ProbePair("the king is dead. long live the king.", "my lord, the queen is come.")


MAX_SEQ_LEN = 512  # positions of every bertcore preset
MAX_BATCH_SIZE = 4096
MAX_SEED = 2**31 - 1  # what the form's seed field holds

# The form's fields that TrainingConfig checks (its messages are the ones shown), and their names there.
CONFIG_FIELDS = ("steps", "batch_size", "seq_len", "learning_rate", "seed", "checkpoint_every", "eval_every",
                 "objective", "arch", "masking", "mlm_probability", "analysis_every")
# The objectives the form offers, with what each is (bertcore.training.settings.OBJECTIVES); its families are the
# family registry's (bertcore.models.families.family_names), asked when the form is built.
OBJECTIVE_CHOICES = tuple((name, objective.summary) for name, objective in OBJECTIVES.items())


def _at_least(name: str, low: int, value, high: int | None = None, why: str = "") -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name} is {value!r}; type a whole number"
    if value < low:
        return f"{name} is {value:,}; it must be at least {low}{why}"
    if high is not None and value > high:
        return f"{name} is {value:,}; it can be at most {high:,}{why}"
    return None


def _at_most(name: str, value: int, high: int, why: str = "") -> str | None:
    return f"{name} is {value:,}; it can be at most {high:,}{why}" if value > high else None


# What the app asks beyond TrainingConfig, checked once the config has taken the value: the preset and the length
# limit belong to the model, which bertcore only checks when it builds one (after the run has started); the batch
# limit keeps a typo from asking for a batch no machine here holds; the probes are the app's own.
APP_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "preset": lambda value: None if value in (*PRESET_NAMES, CONTINUE_LOADED)
    else f"preset {value!r} is unknown; pick one of {', '.join(PRESET_NAMES)}",
    "batch_size": lambda value: _at_most("batch_size", value, MAX_BATCH_SIZE),
    "seq_len": lambda value: _at_most("seq_len", value, MAX_SEQ_LEN, " (the presets have 512 positions)"),
    "probe_every": lambda value: _at_least("probe every", 0, value, why=" (0 = off)"),
}


def field_problems(**values: Any) -> dict[str, str]:
    """{field: what is wrong with it} for the fields given (empty when all are fine), in their order: TrainingConfig's
    own message for a field it checks, then what the app asks beyond it (APP_CHECKS)."""
    checked = {name: value for name, value in values.items() if name in CONFIG_FIELDS}
    return with_app_checks(values, config_field_problems(TrainingConfig, checked, names=CONFIG_NAMES))


def with_app_checks(values: dict[str, Any], problems: dict[str, str]) -> dict[str, str]:
    """The config's `problems` with APP_CHECKS' for the fields it found nothing wrong with, in the order of `values`
    (what both run forms show)."""
    problems = dict(problems)
    for name, value in values.items():
        check = APP_CHECKS.get(name)
        if name not in problems and check is not None and (problem := check(value)):
            problems[name] = problem
    return {name: problems[name] for name in values if name in problems}


# Where the Train tab's first run differs from bert-train's defaults (TrainingConfig's), so that a run the user
# watches finishes on a 2-core CPU in about a minute; every other default is bert-train's.
# Analysis (bertcore's analysis records: syntax, probes, health) is on here, where bert-train has it off: a record
# every 100 steps of the quick run costs it about 4% of its time (bertcore.analysis.records' defaults), and the app
# measures on a copy of the weights off the training thread (bertcore.AnalysisSchedule(in_background=True)).
QUICK_RUN = {"preset": "tiny", "steps": 300, "batch_size": 16, "seq_len": 64, "lr": 1e-3, "device": "cpu",
             "checkpoint_every": 100, "eval_every": 50, "analysis_every": 100}


def _default(name: str):
    """The form's default for TrainingConfig's field `name`: the quick run's, else bert-train's."""
    return QUICK_RUN[name] if name in QUICK_RUN else default_of(TrainingConfig, name)


@dataclass(frozen=True)
class TrainingSettings:
    """What the panel's form asks for; the defaults are bert-train's, but for the quick run's (QUICK_RUN)."""

    corpus: str | None = None  # a .txt file or a folder of them; None = the default corpus
    preset: str = _default("preset")  # a bertcore preset name, or CONTINUE_LOADED to train the inspector's model
    steps: int = _default("steps")
    batch_size: int = _default("batch_size")
    seq_len: int = _default("seq_len")
    learning_rate: float = _default("lr")
    device: str = _default("device")
    seed: int = _default("seed")
    probe_every: int = 25  # re-inspect the probe pairs every this many steps (0 = never)
    # measure what the model learns (syntax, probes, health) every this many steps, and at step 0 and the last (0 = off)
    analysis_every: int = _default("analysis_every")
    checkpoint_every: int = _default("checkpoint_every")  # checkpoint every this many steps (and at the end)
    eval_every: int = _default("eval_every")  # held-out loss every this many steps
    objective: str | None = _default("objective")  # one of OBJECTIVE_CHOICES; None = the architecture's own
    arch: str | None = _default("arch")  # a new model's family; None = the objective's own (bert for mlm+nsp)
    masking: str = _default("masking")  # what is masked (bertcore.data.masking_recipes)
    mlm_probability: float = _default("mlm_probability")  # the share of tokens masked, whatever the recipe
    out_dir: str | None = None  # the run folder; None = a fresh timestamped folder under the app's data
    # A run folder to resume from its latest checkpoint, exactly as `bert-train --out DIR --resume` does
    # (its recorded configuration; the fields above only describe it); None = a new run.
    resume_from: str | None = None

    def __post_init__(self) -> None:
        values = {name: getattr(self, name) for name in (*CONFIG_FIELDS, *APP_CHECKS)}
        problems = field_problems(**values)
        if problems:
            raise ValueError(next(iter(problems.values())))


def resume_config(run_dir: str | os.PathLike):
    """The `bertcore.training.pretraining.TrainingConfig` a run folder was started with, pointed at that folder: what
    `bert-train --out RUN --resume` continues (ValueError naming the file when it cannot be read)."""
    from bertcore.files.run_folder import RunFolder
    return TrainingConfig.from_dict(RunFolder(run_dir).read_training_settings())


def settings_for_resume(run_dir: str | os.PathLike, device_names: tuple[str, ...] = ("cpu",)) -> TrainingSettings:
    """The form's view of a run folder to resume (its recorded configuration, as near as the form can show)."""
    config = resume_config(run_dir)
    device = config.device if config.device in device_names else device_names[0]
    return TrainingSettings(
        corpus=config.corpus or None, preset=config.preset if config.preset in PRESET_NAMES else "tiny",
        steps=config.steps, batch_size=min(config.batch_size, MAX_BATCH_SIZE),
        seq_len=min(config.seq_len, MAX_SEQ_LEN), learning_rate=config.lr,
        device=device, seed=min(config.seed, MAX_SEED), checkpoint_every=config.checkpoint_every,
        eval_every=config.eval_every, objective=config.objective, arch=config.arch, masking=config.masking,
        mlm_probability=config.mlm_probability, analysis_every=config.analysis_every, out_dir=str(run_dir),
        resume_from=str(run_dir))


def initial_model(settings: TrainingSettings, model: Any, tokenizer: Any) -> tuple[Any, Any] | None:
    """What a run with `settings` starts from: for "continue the loaded model", the inspector's (model,
    tokenizer), which the training thread saves as the run's first checkpoint and trains a copy of (reading
    its weights, never changing them); None for a preset. ValueError, saying what to pick, when that model
    is missing or has no MLM/NSP heads to pretrain."""
    if settings.preset != CONTINUE_LOADED:
        return None
    if (refusal := continue_refusal(model)) is not None:
        raise ValueError(refusal)
    return model, tokenizer


def continue_refusal(model: Any) -> str | None:
    """Why "continue the loaded model" cannot train the inspector's `model`, saying what to pick; None when it can
    (the form disables the choice up front with this reason, and a Start that asks anyway gives it)."""
    if model is None:
        return "the inspector has no model loaded; pick a preset instead"
    if not model.trained_heads:  # which heads it has, not has_pretraining_heads: a BertForMaskedLM has its MLM head
        return ("the loaded model has no MLM/NSP heads (a bare encoder such as MiniLM, or a fine-tuned task model), "
                "so it cannot be pretrained further here; pick a new model instead")
    return None


def available_devices() -> list[tuple[str, str]]:
    """(device, label) pairs the user may pick: CPU always, CUDA/MPS only when torch sees them."""
    import torch

    devices = [("cpu", f"CPU ({os.cpu_count()} cores)")]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.insert(index, (f"cuda:{index}", f"CUDA {index}: {torch.cuda.get_device_name(index)}"))
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.insert(0, ("mps", "Apple MPS"))
    return devices


# ---------------------------------------------------------------- the engine, seen through one adapter
class EngineRun(abc.ABC):
    """What the panel needs from a run; `make_engine_run` builds the bertcore one, tests may pass others.

    Built in the worker thread. `steps` yields one `bertcore.training.pretraining.StepStats` per step (plain numbers;
    its     `eval` holds the step's held-out `EvalStats`, its `checkpoint` the folder written after it);
    `request_stop()` makes it end at the next step boundary after saving a checkpoint; `snapshot()` returns
    a CPU copy of the weights (state dict) for probing, safe to call between steps from the training thread;
    `model_config`/`tokenizer` let the probe build its model.
    """

    run_dir: Path
    steps: Iterator
    model_config: Any
    tokenizer: Any
    start_step: int = 0  # the step it continues from (a resumed run), 0 for a new one
    probe_masking: ProbeMasking = ProbeMasking()  # how the run masks: the probe pairs are masked the same way

    @abc.abstractmethod
    def request_stop(self) -> None:
        """End at the next step boundary (thread-safe)."""

    @abc.abstractmethod
    def snapshot(self) -> dict:
        """A CPU copy of the current weights."""


EngineFactory = Callable[[TrainingSettings, Any], EngineRun]


class LoopRun(EngineRun):
    """A `bertcore.training.loop.TrainingLoop` (a pretraining `Trainer`, a `Finetuner`) behind the EngineRun
    interface; a subclass builds the loop from its settings and hands it to `_start`."""

    def _start(self, loop) -> None:
        self.loop = loop
        self.model_config = loop.model.config
        self.tokenizer = loop.tokenizer
        self.start_step = loop.step
        self.steps = loop.steps()

    def request_stop(self) -> None:
        self.loop.request_stop()

    def snapshot(self) -> dict:
        return self.loop.snapshot_state_dict()


def warm_up_engine() -> None:
    """Pay the engine's one-time costs now, on this thread, not inside a run.

    AdamW's first construction imports torch._dynamo (~1 s holding the GIL), and a module imported for the
    first time in the training or probe thread holds the GIL while it executes: either would freeze the
    window mid-run. Cheap after the first call.
    """
    import importlib

    for name in ("bertcore.models.checkpoint", "bertcore.analysis.inspection", "bertcore.data.masking",
                 "bertcore.models.bert", "bertcore.tokenization.wordpiece", "bertcore.data.corpus",
                 "bertcore.analysis.schedule", "bertcore.analysis.run_analysis"):
        importlib.import_module(name)
    from bertcore.training.pretraining import warm_up

    warm_up()


def make_engine_run(settings: TrainingSettings, init: Any, progress: Callable[[Any], None] | None = None
                    ) -> EngineRun:
    """The bertcore trainer behind the EngineRun interface (see `_BertcoreRun`); `progress` hears how far its corpus
    preparation is (bertcore.data.prepare.PreparationProgress) and may raise PreparationCancelled."""
    return _BertcoreRun(settings, init, progress)


class _BertcoreRun(LoopRun):
    """`bertcore.training.pretraining.Trainer` with the panel's settings (or a run folder's own, when it resumes one);
    yields its `StepStats` as they are."""

    def __init__(self, settings: TrainingSettings, init: Any, progress: Callable[[Any], None] | None = None):
        from bertcore.files.resources import default_vocab_path
        from bertcore.training.pretraining import Trainer, TrainingConfig

        if settings.resume_from is not None:  # exactly what `bert-train --out RUN --resume` does
            self.run_dir = Path(settings.resume_from)
            config = resume_config(self.run_dir)
            self._start(Trainer(config, resume=True, progress=progress, analysis=analysis_schedule(config)))
            self.probe_masking = ProbeMasking(self.loop.config.masking, self.loop.config.mlm_probability)
            return
        self.run_dir = Path(settings.out_dir)
        init_from = None
        if init is not None:  # "continue the loaded model": the engine starts from a checkpoint folder
            from bertcore.models.checkpoint import save_pretrained

            model, tokenizer = init
            init_from = str(save_pretrained(model, tokenizer, self.run_dir / "init"))
        vocab = None
        if settings.corpus is None and init_from is None:
            try:  # the shipped vocabulary was trained on the default corpus: no need to train another
                vocab = str(default_vocab_path()) if default_vocab_path().is_file() else None
            except FileNotFoundError:
                vocab = None
        config = TrainingConfig(
            corpus=settings.corpus or "",
            out_dir=str(self.run_dir),
            preset=settings.preset if settings.preset != CONTINUE_LOADED else "tiny",
            vocab=vocab,
            init_from=init_from,
            steps=settings.steps,
            batch_size=settings.batch_size,
            seq_len=settings.seq_len,
            lr=settings.learning_rate,
            seed=settings.seed,
            device=settings.device,
            eval_every=settings.eval_every,
            checkpoint_every=settings.checkpoint_every,
            objective=settings.objective,
            arch=settings.arch if init_from is None else None,  # a loaded model keeps its own family
            masking=settings.masking,
            mlm_probability=settings.mlm_probability,
            analysis_every=settings.analysis_every,
        )
        self._start(Trainer(config, progress=progress, analysis=analysis_schedule(config)))
        self.probe_masking = ProbeMasking(config.masking, config.mlm_probability)


def analysis_schedule(config: Any) -> Any:
    """What measures the model while `config`'s run trains (its `analysis_every`), or None when nothing is asked:
    bertcore's schedule in the background, on a CPU copy of the weights in a thread of its own, so that the training
    thread does not wait for a record (and that thread, started by the niced training thread, is niced as it is)."""
    if not getattr(config, "analysis_every", 0):
        return None
    from bertcore.analysis.schedule import AnalysisSchedule

    return AnalysisSchedule(in_background=True)


# ---------------------------------------------------------------- the training thread's side of a run
class RunDriver:
    """One run as its training thread drives it: builds the engine (`make_steps`), hands a weights snapshot
    to the prober every `probe_every` steps and at the end (`after_step`), and passes a stop request on to
    the engine, which then ends at its next step boundary with a checkpoint (`request_stop`, any thread).

    submit_probe(step, job) must be thread-safe (a `LatestJobWorker.submit`); probe_pairs() returns the pairs
    to probe now (a tuple the GUI thread replaces whole).
    """

    def __init__(self, settings: TrainingSettings, init: Any, engine_factory: EngineFactory,
                 submit_probe: Callable[[int, Any], None], probe_pairs: Callable[[], tuple[ProbePair, ...]],
                 on_preparation: Callable[[Any], None] | None = None):
        self.settings = settings
        self._on_preparation = on_preparation  # any thread may call it (a Qt signal's emit)
        self.probe_every = settings.probe_every  # the form's field stays live: the GUI thread replaces it whole
        self._init = init
        self._engine_factory = engine_factory
        self._submit_probe = submit_probe
        self._probe_pairs = probe_pairs
        self._lock = threading.Lock()
        self._run: EngineRun | None = None
        self._stop_requested = False

    def make_steps(self) -> Iterator:  # training thread
        from bertcore.data.prepare import PreparationCancelled

        # A factory that prepares a corpus takes `progress` (make_engine_run); the others are called as before.
        accepts_progress = "progress" in inspect.signature(self._engine_factory).parameters
        try:
            run = self._engine_factory(self.settings, self._init,
                                       **({"progress": self._preparation} if accepts_progress else {}))
        except PreparationCancelled:  # Stop while the corpus was prepared: nothing is kept, nothing ran
            return iter(())
        with self._lock:
            self._run = run
            stop = self._stop_requested
        if stop:  # asked while the engine was being built
            run.request_stop()
        if self.probe_every:
            self._probe(run, getattr(run, "start_step", 0))  # "before": the weights the run starts from
        return run.steps

    def _preparation(self, progress: Any) -> None:  # training thread, between chunks of the corpus preparation
        if self._stop_requested:
            from bertcore.data.prepare import PreparationCancelled

            raise PreparationCancelled()
        if self._on_preparation is not None:
            self._on_preparation(progress)

    def after_step(self, stats: Any) -> None:  # training thread
        every, run = self.probe_every, self._run
        last = getattr(stats, "total_steps", 0) or self.settings.steps
        if every and run is not None and (stats.step % every == 0 or stats.step == last):
            self._probe(run, stats.step)

    def request_stop(self) -> None:  # any thread
        with self._lock:
            self._stop_requested = True
            run = self._run
        if run is not None:
            run.request_stop()

    def _probe(self, run: EngineRun, step: int) -> None:
        pairs = self._probe_pairs()
        if pairs:
            self._submit_probe(step, WeightsJob(run.snapshot(), run.model_config, run.tokenizer, pairs,
                                                run.probe_masking))


# ---------------------------------------------------------------- following a run: its pace, its checkpoints
class StepPace:
    """Recent (step, elapsed seconds) points of a run, for the time it has left at its recent pace."""

    def __init__(self, window: int = 50):
        self._points: deque[tuple[int, float]] = deque(maxlen=window)

    def clear(self) -> None:
        """Forget the pace (a pause is not part of it)."""
        self._points.clear()

    def add(self, step: int, elapsed: float) -> None:
        self._points.append((step, float(elapsed)))

    def seconds_left(self, step: int, total: int) -> float | None:
        """Seconds until step `total` at the recent pace; None before there is a pace to go by."""
        points = self._points
        if total > step and len(points) >= 2 and points[-1][0] > points[0][0]:
            seconds_per_step = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
            return seconds_per_step * (total - step)
        return None
