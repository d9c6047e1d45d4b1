"""The Train tab's plain logic, headless: a failure in words, and the run as its training thread drives it."""

from __future__ import annotations

import errno
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from explorer.common.failure import describe_exception
from explorer.runs.probe_history import ProbePair
from explorer.runs.run_descriptions import describe_failure
from explorer.runs.snapshot_probe import CheckpointJob, ProbeMasking, SnapshotProber, WeightsJob
from explorer.runs.training_run import (
    CONTINUE_LOADED,
    EngineRun,
    RunDriver,
    TrainingSettings,
    initial_model,
    settings_for_resume,
)

LAST_STEP = SimpleNamespace(step=41)  # what a StepStats offers describe_failure


def raised(error: BaseException):
    try:
        raise error
    except BaseException as caught:
        return describe_exception(caught)


def test_a_failure_crosses_as_plain_values_and_reads_as_one_line():
    failure = raised(FileNotFoundError(errno.ENOENT, "No such file", "corpus.txt"))
    assert failure.kind == "FileNotFoundError" and failure.is_a("OSError") and failure.errno == errno.ENOENT
    assert failure.text == failure.message  # an error the user caused: its message alone
    bug = raised(KeyError("step"))
    assert bug.text == "'step'"
    bug = raised(AttributeError("'NoneType' object has no attribute 'config'"))
    assert bug.text.startswith("AttributeError: 'NoneType'") and "test_training_run.py:" in bug.text
    assert "Traceback" in bug.traceback and "Traceback" not in bug.text
    assert raised(RuntimeError()).message == "RuntimeError"


@pytest.mark.parametrize(("error", "last_step", "says"), [
    (OSError(errno.ENOSPC, "No space left on device"), LAST_STEP, "The disk is full"),
    (OSError(errno.ENOSPC, "No space left on device"), None, "The disk is full"),
    (PermissionError(errno.EACCES, "Permission denied", "metrics.jsonl"), LAST_STEP, "could not write to its folder"),
    (PermissionError(errno.EACCES, "Permission denied", "runs"), None, "The run could not start"),
    (RuntimeError("the process group went away"), LAST_STEP, "failed after step 41 (RuntimeError)"),
    (ValueError("device 'cuda:3' was asked for"), None, "The run could not start"),
])
def test_describe_failure_says_what_happened_and_what_was_kept(error, last_step, says):
    message = describe_failure(raised(error), last_step, Path("run/checkpoints/step-000040"))
    assert says in message
    if last_step is not None:
        assert "step-000040" in message


def test_a_training_error_the_app_does_not_know_is_the_engines_message():
    from bertcore.training.pretraining import TrainingError

    class RunawayLossError(TrainingError):
        pass

    failure = raised(RunawayLossError("the loss is 12x its start at step 300; lower the learning rate"))
    message = describe_failure(failure, LAST_STEP, None)
    assert message.startswith("The run stopped: the loss is 12x its start at step 300")
    assert "No checkpoint had been written yet" in message


class CountingRun(EngineRun):
    def __init__(self, steps: int):
        self.run_dir = Path(".")
        self.model_config, self.tokenizer = "config", "tokenizer"
        self.stops = 0
        self.steps = iter(SimpleNamespace(step=step) for step in range(1, steps + 1))

    def request_stop(self):
        self.stops += 1

    def snapshot(self):
        return {"weights": 1}


class Engines:
    """An engine factory that keeps what it built."""

    def __init__(self):
        self.built = []

    def __call__(self, settings, init):
        self.built.append(CountingRun(settings.steps))
        return self.built[-1]


def test_the_run_driver_probes_every_n_steps_and_at_the_end_and_passes_a_stop_on():
    settings = TrainingSettings(steps=10, probe_every=4)
    engines, probes, pairs = Engines(), [], (ProbePair("to be", "or not"),)
    driver = RunDriver(settings, None, engines, lambda step, job: probes.append((step, job)), lambda: pairs)
    for stats in driver.make_steps():
        driver.after_step(stats)
    assert [step for step, _ in probes] == [0, 4, 8, 10]  # before the first step, every 4, the last
    assert isinstance(probes[0][1], WeightsJob) and probes[0][1].pairs == pairs
    driver.probe_every = 0  # the form's field changed mid-run
    driver.after_step(SimpleNamespace(step=10))
    assert len(probes) == 4
    driver.request_stop()
    assert engines.built[0].stops == 1


def test_the_run_driver_hands_the_runs_own_masking_to_the_prober():
    class WholeWordRun(CountingRun):
        probe_masking = ProbeMasking("whole-word", 0.3)

    probes = []
    driver = RunDriver(TrainingSettings(steps=2, probe_every=1), None, lambda settings, init: WholeWordRun(2),
                       lambda step, job: probes.append(job), lambda: (ProbePair("to be", "or not"),))
    for stats in driver.make_steps():
        driver.after_step(stats)
    assert {job.masking for job in probes} == {ProbeMasking("whole-word", 0.3)}
    assert CountingRun.probe_masking == ProbeMasking("token", 0.15)  # an engine that says nothing: BERT's


def write_run_config(run_dir: Path, **training) -> None:
    from bertcore.files.run_folder import RunFolder
    from bertcore.training.settings import TrainingConfig

    RunFolder(run_dir).write_run_config({"training": TrainingConfig(out_dir=str(run_dir), **training).to_dict()})


def test_snapshots_are_masked_with_the_runs_recipe_and_probability(tmp_path, tiny_model, tokenizer):
    from bertcore.data.masking import mask_like_bert
    from bertcore.models.checkpoint import save_pretrained

    pair = ProbePair("the king is dead. long live the king.", "my lord, the queen is come.")
    prober, state = SnapshotProber(), tiny_model.state_dict()
    shown = {}
    for recipe, probability in (("token", 0.15), ("whole-word", 0.3), ("span", 0.4)):
        job = WeightsJob(state, tiny_model.config, tokenizer, (pair,), ProbeMasking(recipe, probability))
        masking = prober(job)[pair].masking
        encoding = tokenizer.encode(pair.text_a, pair.text_b, max_length=tiny_model.config.max_position_embeddings)
        assert masking == mask_like_bert(encoding, tokenizer, seed=0, recipe=recipe, mlm_probability=probability)
        shown[recipe] = masking.positions
    assert len(set(map(tuple, shown.values()))) == 3  # each recipe its own positions, none cached for another

    run_dir = tmp_path / "run"
    folder = save_pretrained(tiny_model, tokenizer, run_dir / "checkpoints" / "step-000002")
    write_run_config(run_dir, masking="span", mlm_probability=0.4)
    assert ProbeMasking.of_checkpoint(folder) == ProbeMasking("span", 0.4)
    assert prober(CheckpointJob(str(folder), (pair,)))[pair].masking.positions == shown["span"]


def test_a_checkpoint_of_a_run_that_records_no_recipe_is_masked_as_bert_masks(tmp_path):
    from bertcore.files.run_folder import RunFolder

    RunFolder(tmp_path).write_run_config({"training": {"steps": 3}})  # written before the recipes
    assert ProbeMasking.of_checkpoint(tmp_path / "checkpoints" / "step-000003") == ProbeMasking()
    RunFolder(tmp_path).write_run_config({"task": "classification"})  # a fine-tuning run
    assert ProbeMasking.of_checkpoint(tmp_path / "checkpoints" / "step-000003") == ProbeMasking()


def test_a_watched_runs_description_names_a_masking_other_than_berts():
    from explorer.runs.run_descriptions import describe_run_config

    training = {"preset": "tiny", "steps": 400, "batch_size": 16, "seq_len": 64, "lr": 0.002}
    described = {(masking, probability): describe_run_config(
        {"training": {**training, "masking": masking, "mlm_probability": probability}})
        for masking, probability in (("token", 0.15), ("whole-word", 0.15), ("span", 0.3), ("token", 0.3))}
    assert described == {("token", 0.15): "tiny preset, 400 steps of 16 × 64, lr 0.002",
                         ("whole-word", 0.15): "tiny preset, whole-word masking, 400 steps of 16 × 64, lr 0.002",
                         ("span", 0.3): "tiny preset, span masking of 30%, 400 steps of 16 × 64, lr 0.002",
                         ("token", 0.3): "tiny preset, token masking of 30%, 400 steps of 16 × 64, lr 0.002"}
    assert describe_run_config({"training": training}) == "tiny preset, 400 steps of 16 × 64, lr 0.002"  # before
    damaged = describe_run_config({"training": {**training, "mlm_probability": "lots"}})
    assert "token masking of 'lots'" in damaged  # a hand-edited file is shown, not a crash


def test_the_engine_trains_and_probes_with_the_forms_masking(tmp_path, monkeypatch):
    from explorer.runs.training_run import make_engine_run

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the prepared corpus goes there
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"the king speaks to lord number {i}. the queen answers him at length."
                                   for i in range(400)), encoding="utf-8")
    settings = TrainingSettings(corpus=str(corpus), steps=2, batch_size=2, seq_len=32, masking="span",
                                mlm_probability=0.3, out_dir=str(tmp_path / "run"))
    run = make_engine_run(settings, None)
    assert (run.loop.config.masking, run.loop.config.mlm_probability) == ("span", 0.3)
    assert run.probe_masking == ProbeMasking("span", 0.3)


def test_resuming_keeps_the_runs_masking(tmp_path):
    write_run_config(tmp_path, masking="whole-word", mlm_probability=0.25, steps=40, batch_size=4, seq_len=32)
    settings = settings_for_resume(tmp_path)
    assert (settings.masking, settings.mlm_probability, settings.resume_from) == ("whole-word", 0.25, str(tmp_path))


def test_a_stop_asked_before_the_engine_exists_reaches_it_and_no_pairs_means_no_probe():
    probes, engines = [], Engines()
    driver = RunDriver(TrainingSettings(steps=3, probe_every=1), None, engines, lambda step, job: probes.append(step),
                       lambda: ())
    driver.request_stop()  # while the corpus is still being read
    steps = driver.make_steps()
    assert engines.built[0].stops == 1
    for stats in steps:
        driver.after_step(stats)
    assert probes == []


def test_a_run_starts_from_the_inspectors_model_only_when_asked_and_only_one_it_can_pretrain():
    loaded = SimpleNamespace(trained_heads=frozenset({"mlm", "nsp"}))
    assert initial_model(TrainingSettings(corpus="c.txt", preset="tiny"), loaded, "tok") is None
    continuing = TrainingSettings(corpus="c.txt", preset=CONTINUE_LOADED)
    assert initial_model(continuing, loaded, "tok") == (loaded, "tok")
    with pytest.raises(ValueError, match="no model loaded; pick a preset"):
        initial_model(continuing, None, None)
    with pytest.raises(ValueError, match="no MLM/NSP heads"):
        initial_model(continuing, SimpleNamespace(trained_heads=frozenset()), "tok")


def test_a_masked_lm_alone_can_be_pretrained_further_from_the_inspector():
    # bert-base-uncased and most fill-mask checkpoints load as BertForMaskedLM: an MLM head, no NSP head. It was
    # refused as having "no MLM/NSP heads", because the check read has_pretraining_heads (False for that class).
    from bertcore.models.bert import BertForMaskedLM, BertForPreTraining
    from tests.tiny_configs import tiny_bert

    continuing = TrainingSettings(corpus="c.txt", preset=CONTINUE_LOADED)
    masked_lm = BertForMaskedLM(tiny_bert(50))
    assert initial_model(continuing, masked_lm, "tok") == (masked_lm, "tok")
    bare = BertForPreTraining(tiny_bert(50))
    bare.has_pretraining_heads = False  # how a bare encoder (MiniLM) loads
    with pytest.raises(ValueError, match="no MLM/NSP heads"):
        initial_model(continuing, bare, "tok")


def test_the_train_settings_say_what_training_config_says_and_the_app_adds_only_its_own_limits():
    from bertcore.training.settings import TrainingConfig
    from explorer.runs.training_run import TrainingSettings, field_problems

    cases = [(dict(steps=0), dict(steps=0)), (dict(learning_rate=0.0), dict(lr=0.0)),
             (dict(checkpoint_every=-1), dict(checkpoint_every=-1)), (dict(seq_len=7), dict(seq_len=7))]
    for given, config_values in cases:
        with pytest.raises(ValueError) as refused:
            TrainingConfig(**config_values)
        assert field_problems(**given) == {next(iter(given)): str(refused.value)}
        with pytest.raises(ValueError, match=re.escape(str(refused.value))):
            TrainingSettings(**given)
    for given, config_values in ((dict(masking="spans"), dict(masking="spans")),
                                 (dict(mlm_probability=1.5), dict(mlm_probability=1.5)),
                                 (dict(mlm_probability="0.l5"), dict(mlm_probability="0.l5"))):
        with pytest.raises(ValueError) as refused:
            TrainingConfig(**config_values)
        assert field_problems(**given) == {next(iter(given)): str(refused.value)}
    assert field_problems(masking="span", mlm_probability=0.3) == {}
    assert field_problems(learning_rate=2.0) == {}  # bertcore sets no upper bound: the loop names a diverging run
    assert field_problems(seq_len=600, probe_every=-1) == {
        "seq_len": "seq_len is 600; it can be at most 512 (the presets have 512 positions)",
        "probe_every": "probe every is -1; it must be at least 0 (0 = off)"}
