"""--report-to tensorboard: a run's metrics.jsonl numbers as TensorBoard events beside it, read back by the tensorboard
package's EventAccumulator and by the Runs tab's own reader and compared with metrics.jsonl point for point; a
resumed run's events shown once; the writer closed however a run ends; a clear error without the package."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from bertcore.errors import NonFiniteLossError, ReportToError
from bertcore.training import reporting
from bertcore.training.pretraining import Trainer
from bertcore.training.reporting import TOKENS_SEEN_TAG, scalars_of
from tests.bertcore.test_trainer import TINY_MODEL, corpus_path, make_config  # noqa: F401 (a fixture)

pytest.importorskip("tensorboard")
pytestmark = pytest.mark.usefixtures("one_thread")


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def accumulated(run: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run folder's events as TensorBoard reads them (no cap on points), by tag."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    accumulator = EventAccumulator(str(run), size_guidance={SCALARS: 0})
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def expected_scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """What metrics.jsonl holds, under the Trainer's tags, as float32 (an event's simple_value)."""
    expected: dict[str, list[tuple[int, float]]] = {}
    tokens = 0
    for record in records(run):
        for tag, value in scalars_of(record).items():
            expected.setdefault(tag, []).append((record["step"], float(np.float32(value))))
        if record["kind"] == "step":
            tokens += record["tokens"]
            expected.setdefault(TOKENS_SEEN_TAG, []).append((record["step"], float(np.float32(tokens))))
    return expected


def assert_events_equal_metrics(run: Path) -> None:
    from explorer.runs.curve_files import TensorBoardReader

    expected = expected_scalars(run)
    assert {"train/loss", "train/learning_rate", "train/mlm_accuracy", "eval/loss", "eval/nsp_accuracy",
            TOKENS_SEEN_TAG} <= set(expected)
    assert accumulated(run) == expected
    ours = TensorBoardReader(run).read_all()  # the events alone (the Runs tab reads the folder's metrics.jsonl)
    assert {tag: list(zip(curve.steps.tolist(), curve.values.tolist(), strict=True))
            for tag, curve in ours.items()} == expected


def test_the_scalars_are_metrics_jsonls_under_the_trainers_tags():
    step = {"kind": "step", "step": 3, "total_steps": 9, "loss": 2.5, "learning_rate": 1e-4, "grad_norm": 0.7,
            "tokens": 120, "tokens_per_second": 800.0, "elapsed_seconds": 1.5, "epoch": 0.25, "accuracy": 0.5}
    assert scalars_of(step) == {"train/loss": 2.5, "train/learning_rate": 1e-4, "train/grad_norm": 0.7,
                                "train/tokens_per_second": 800.0, "train/epoch": 0.25, "train/accuracy": 0.5}
    evaluation = {"kind": "eval", "step": 3, "loss": 2.7, "accuracy": 0.4, "main_metric": "accuracy",
                  "num_examples": 50}
    assert scalars_of(evaluation) == {"eval/loss": 2.7, "eval/accuracy": 0.4}
    for other in ({"kind": "checkpoint", "step": 3, "path": "x", "sane": True},
                  {"kind": "warning", "step": 3, "message": "m"}, {"kind": "error", "step": 3, "message": "m"}):
        assert scalars_of(other) == {}


@pytest.mark.slow
def test_a_run_reported_to_tensorboard_reads_back_as_its_metrics(corpus_path, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=8, eval_every=4, report_to="tensorboard")
    stats = list(Trainer(config, model_config=TINY_MODEL).steps())
    assert len(stats) == 8 and len(list(run.glob("events.out.tfevents.*"))) == 1
    assert json.loads((run / "run_config.json").read_text())["training"]["report_to"] == "tensorboard"
    assert_events_equal_metrics(run)


@pytest.mark.slow
def test_a_resumed_run_shows_each_step_once(corpus_path, tmp_path):  # noqa: F811
    """Stopped at step 6 with its last checkpoint at 4, resumed there: metrics.jsonl drops steps 5 and 6 and
    the run writes them again; its new events start a session at step 5, so TensorBoard (and our reader) drop the
    first writer's 5 and 6 too, and the tokens seen go on from step 4's."""
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=8, eval_every=4, checkpoint_every=4, report_to="tensorboard")
    first = Trainer(config, model_config=TINY_MODEL)
    with first:
        for stats in first.steps():
            if stats.step == 6:
                break  # left without a checkpoint of step 6: a resume goes back to step 4
    resumed = Trainer(config, resume=True)
    assert resumed.step == 4
    with resumed:
        assert [stats.step for stats in resumed.steps()] == [5, 6, 7, 8]
    assert len(list(run.glob("events.out.tfevents.*"))) == 2
    assert [record["step"] for record in records(run) if record["kind"] == "step"] == list(range(1, 9))
    assert_events_equal_metrics(run)


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["finished", "stopped", "left", "ctrl-c", "error"])
def test_the_writer_is_closed_however_the_run_ends(corpus_path, tmp_path, monkeypatch, ending):  # noqa: F811
    closed = []
    real_close = reporting.TensorBoardReporter.close
    monkeypatch.setattr(reporting.TensorBoardReporter, "close",
                        lambda self: (closed.append(self.folder), real_close(self)))
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=4, report_to="tensorboard"),
                      model_config=TINY_MODEL)
    steps = trainer.steps()
    next(steps)
    if ending == "finished":
        list(steps)
    elif ending == "stopped":
        trainer.request_stop()
        list(steps)
    elif ending == "left":
        steps.close()  # the consumer stops iterating
    elif ending == "ctrl-c":
        with pytest.raises(KeyboardInterrupt):
            steps.throw(KeyboardInterrupt)
    else:
        import torch

        with torch.no_grad():
            trainer.model.bert.embeddings.LayerNorm.weight[0] = float("nan")
        with pytest.raises(NonFiniteLossError):
            next(steps)
    assert closed == [tmp_path / "run"]
    events = accumulated(tmp_path / "run")
    assert [step for step, _ in events["train/loss"]] == [record["step"] for record in records(tmp_path / "run")
                                                          if record["kind"] == "step"]
    trainer.close()
    assert closed == [tmp_path / "run"]


def test_without_the_tensorboard_package_the_run_says_what_to_install(corpus_path, tmp_path, monkeypatch,  # noqa: F811
                                                                     capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "tensorboard" else real_find_spec(name, *args))
    with pytest.raises(ReportToError, match=r"pip install -e '\.\[tensorboard\]'"):
        Trainer(make_config(corpus_path, tmp_path / "run", report_to="tensorboard"), model_config=TINY_MODEL)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # said before the run began

    from bertcore.cli import train

    code = train.main(["--corpus", str(corpus_path), "--vocab", str(corpus_path.parent / "vocab.txt"), "--out",
                       str(tmp_path / "cli"), "--steps", "2", "--report-to", "tensorboard", "--no-progress"])
    assert code == 2 and "bert-train: error: --report-to tensorboard" in capsys.readouterr().err


def test_report_to_takes_the_tools_it_knows():
    with pytest.raises(ValueError, match="report_to 'wandb' is not one of none, tensorboard"):
        make_config(Path("corpus.txt"), Path("run"), report_to="wandb")
