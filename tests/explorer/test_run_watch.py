"""The Qt-free run watcher and probe history: tailing a growing metrics file, nearest-snapshot lookup."""

import json
import os
import subprocess
import sys
import threading

import pytest

from bertcore.files.metrics_log import MetricsTail
from bertcore.files.run_folder import latest_checkpoint, list_checkpoints, read_run_config
from explorer.runs.probe_history import ProbeHistory, ProbePair
from explorer.runs.run_watch import can_resume, is_eval_record, normalize_record, stats_from_record


def _line(record: dict) -> bytes:
    return (json.dumps(record) + "\n").encode()


def test_tail_reads_only_new_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.poll().records == []  # no file yet is not an error
    path.write_bytes(_line({"step": 1, "loss": 9.0}) + _line({"step": 2, "loss": 8.5}))
    assert [r["step"] for r in tail.read_new()] == [1, 2]
    assert tail.read_new() == []
    with open(path, "ab") as file:
        file.write(_line({"step": 3, "loss": 8.0}) + b'{"step": 4, "lo')  # writer caught mid-line
    assert [r["step"] for r in tail.read_new()] == [3]
    with open(path, "ab") as file:
        file.write(b'ss": 7.5}\n')
    assert tail.read_new() == [{"step": 4, "loss": 7.5}]


def test_tail_skips_garbage_and_restarts_on_truncation_and_replacement(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_line({"step": 1}) + b"not json\n" + b"[1, 2]\n" + _line({"step": 2}))
    tail = MetricsTail(path)
    update = tail.poll()
    assert [r["step"] for r in update.records] == [1, 2] and update.bad_lines == 2
    path.write_bytes(_line({"step": 1}))  # truncated: a new run in the same folder
    update = tail.poll()
    assert update.restarted and update.records == [{"step": 1}]
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(_line({"step": 5}) + _line({"step": 6}))
    os.replace(replacement, path)  # rotated: a different file under the same name
    update = tail.poll()
    assert update.restarted and [r["step"] for r in update.records] == [5, 6]


def test_tail_follows_a_thread_appending_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    seen = []

    def write():
        with open(path, "ab", buffering=0) as file:
            for step in range(1, 201):
                data = _line({"step": step, "loss": 10.0 / step})
                file.write(data[:7])  # split writes: the reader may see half a line
                file.write(data[7:])

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        seen += tail.read_new()
    writer.join()
    seen += tail.read_new()
    assert [r["step"] for r in seen] == list(range(1, 201))


def test_tail_follows_another_process(tmp_path):
    path = tmp_path / "metrics.jsonl"
    script = (
        "import json, sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    for s in range(1, 51):\n"
        "        f.write(json.dumps({'step': s, 'loss': 1.0}) + '\\n'); f.flush()\n"
    )
    tail = MetricsTail(path)
    process = subprocess.Popen([sys.executable, "-c", script, str(path)])
    seen = []
    while process.poll() is None:
        seen += tail.read_new()
    seen += tail.read_new()
    assert process.returncode == 0
    assert [r["step"] for r in seen] == list(range(1, 51))


def test_normalize_record_marks_eval_and_canonical_names():
    assert not is_eval_record({"step": 3, "loss": 1.0, "lr": 1e-3})
    train = normalize_record({"step": 3, "loss": 1.0, "lr": 1e-3, "mlm_acc": 0.25})
    assert train["learning_rate"] == 1e-3 and train["mlm_accuracy"] == 0.25 and not train["eval"]
    for record in ({"kind": "eval", "step": 10, "loss": 2.0}, {"step": 10, "eval_loss": 2.0}):
        normalized = normalize_record(record)
        assert normalized["eval"] and normalized["loss"] == 2.0 and normalized["step"] == 10


def test_run_config_and_checkpoints(tmp_path):
    with pytest.raises(ValueError, match=r"run_config\.json"):
        read_run_config(tmp_path)
    (tmp_path / "run_config.json").write_text(json.dumps({"preset": "tiny"}))
    assert read_run_config(tmp_path) == {"preset": "tiny"}
    for name, complete in (("step-000010", True), ("step-000020", True), ("step-000030.tmp", True),
                           ("step-000040", False)):
        folder = tmp_path / "checkpoints" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        if complete:
            (folder / "model.safetensors").write_bytes(b"x")
    assert [step for step, _ in list_checkpoints(tmp_path)] == [10, 20]
    assert latest_checkpoint(tmp_path).name in ("step-000010", "step-000020")


def test_a_run_can_be_resumed_once_it_stopped_or_failed_with_a_checkpoint(tmp_path):
    assert not can_resume(None, "stopped")
    assert not can_resume(tmp_path, "stopped")  # no checkpoint yet
    checkpoint = tmp_path / "checkpoints" / "step-000010"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "model.safetensors").write_bytes(b"x")
    assert can_resume(tmp_path, "stopped") and can_resume(tmp_path, "failed")
    for ended_as in ("finished", "", None):  # every step done, or it may still be going
        assert not can_resume(tmp_path, ended_as)


def test_probe_history_nearest_and_thinning():
    pair, other = ProbePair("the cat sat", "on the mat"), ProbePair("hello")
    history = ProbeHistory(max_snapshots=8)
    assert history.nearest_step(5) is None
    for step in range(0, 100, 10):
        history.add(step, {pair: f"inspection@{step}"})
    history.add(90, {other: "other@90"})
    steps = history.steps()
    assert len(steps) <= 8 and steps[0] == 0 and steps[-1] == 90 and steps == sorted(steps)
    assert history.nearest_step(-5) == 0 and history.nearest_step(1000) == 90
    assert history.nearest_step(steps[1] + 1) == steps[1]
    assert history.nearest(87, other) == (90, "other@90")
    assert history.get(90, pair) == "inspection@90"
    assert history.pairs() == [pair, other]
    with pytest.raises(ValueError, match="max_snapshots"):
        ProbeHistory(max_snapshots=1)


def test_metrics_records_become_the_trainers_own_records_once():
    import math

    from bertcore.training.pretraining import EvalStats, StepStats

    ours = StepStats(step=3, total_steps=10, loss=2.5, mlm_loss=2.0, nsp_loss=0.5, mlm_accuracy=0.25,
                     nsp_accuracy=0.75, learning_rate=1e-3, grad_norm=1.5, tokens=640, tokens_per_second=5e3,
                     elapsed_seconds=1.25)
    assert stats_from_record(ours.to_dict()) == ours  # what bert-train writes comes back as it was
    held_out = EvalStats(step=3, loss=2.6, mlm_loss=2.1, nsp_loss=0.5, mlm_accuracy=0.2, nsp_accuracy=0.7,
                         num_examples=64)
    assert stats_from_record(held_out.to_dict()) == held_out
    foreign = stats_from_record({"global_step": 7, "train_loss": 4.0, "lr": 2e-4, "max_steps": 100, "time": 9.0})
    assert isinstance(foreign, StepStats) and (foreign.step, foreign.total_steps) == (7, 100)
    assert (foreign.loss, foreign.learning_rate, foreign.elapsed_seconds) == (4.0, 2e-4, 9.0)
    assert math.isnan(foreign.mlm_accuracy) and foreign.tokens == 0  # not said: NaN, which plots skip
    prefixed = stats_from_record({"step": 7, "eval_loss": 3.5})
    assert isinstance(prefixed, EvalStats) and prefixed.loss == 3.5
    assert stats_from_record({"step": 7, "loss": 1.0}).total_steps == 0  # unknown total
    for marker in ({"kind": "checkpoint", "step": 5, "path": "x"}, {"kind": "error", "step": 5, "message": "m"},
                   {"loss": 1.0}, {"step": "five", "loss": 1.0}):
        assert stats_from_record(marker) is None
