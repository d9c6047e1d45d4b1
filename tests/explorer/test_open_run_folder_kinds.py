"""*Open run folder…* on folders that are not bert-train / bert-finetune runs: a Hugging Face Trainer output folder, a
TensorBoard log folder, a model checkpoint, a folder of anything else. Each is named for what it is and refused at
once (the tab waited forever "for the run's first step"); a folder that may still become a run (empty, or a run
that has only just started) is watched, saying what it waits for."""

from __future__ import annotations

import json

import pytest

from explorer.runs.run_kinds import run_folder_verdict


def trainer_folder(root):
    """What transformers' Trainer leaves: checkpoint-N/ with trainer_state.json, the final one on top, and its
    TensorBoard logs under runs/."""
    folder = root / "trainer-out"
    (folder / "checkpoint-500").mkdir(parents=True)
    (folder / "checkpoint-500" / "trainer_state.json").write_text(json.dumps({"global_step": 500, "log_history": []}))
    (folder / "checkpoint-500" / "config.json").write_text("{}")
    (folder / "runs" / "Nov23_10-00-00_host").mkdir(parents=True)
    (folder / "runs" / "Nov23_10-00-00_host" / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"\0" * 16)
    return folder


def tensorboard_folder(root):
    folder = root / "logs"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "events.out.tfevents.1700000000.host.2.0").write_bytes(b"\0" * 16)
    return folder


def checkpoint_folder(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 8)
    return folder


@pytest.mark.parametrize("kind, command", [("pretraining", "bert-train"), ("finetuning", "bert-finetune")])
def test_folders_that_are_no_run_are_named_and_refused(tmp_path, kind, command):
    verdict = run_folder_verdict(trainer_folder(tmp_path), kind)
    assert not verdict.watch and "Hugging Face Trainer output folder" in verdict.message
    assert f"{command} --out" in verdict.message
    verdict = run_folder_verdict(tensorboard_folder(tmp_path), kind)
    assert not verdict.watch and "TensorBoard log folder" in verdict.message and command in verdict.message
    verdict = run_folder_verdict(checkpoint_folder(tmp_path / "model"), kind)
    assert not verdict.watch and "model checkpoint" in verdict.message and "Open checkpoint folder" in verdict.message
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    verdict = run_folder_verdict(other, kind)
    assert not verdict.watch and "not a run folder" in verdict.message and "run_config.json" in verdict.message


def test_a_checkpoint_inside_a_run_points_to_its_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({"training": {"steps": 10, "preset": "tiny"}}))
    (run / "metrics.jsonl").write_text("")
    for inner in (run / "final", run / "checkpoints" / "step-000005"):
        verdict = run_folder_verdict(checkpoint_folder(inner), "pretraining")
        assert not verdict.watch and f"the run in {run}" in verdict.message, verdict.message


def test_folders_that_may_still_become_a_run_are_watched_saying_what_for(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    verdict = run_folder_verdict(empty, "pretraining")
    assert verdict.watch and "empty" in verdict.message and "waiting" in verdict.message
    starting = tmp_path / "starting"  # bert-train holds the lock while it prepares the corpus, before its config
    starting.mkdir()
    (starting / "run.lock").write_text("1234")
    verdict = run_folder_verdict(starting, "pretraining")
    assert verdict.watch and "starting" in verdict.message
    configured = tmp_path / "configured"
    configured.mkdir()
    (configured / "run_config.json").write_text(json.dumps({"training": {"steps": 10, "preset": "tiny"}}))
    verdict = run_folder_verdict(configured, "pretraining")
    assert verdict.watch and "no step yet" in verdict.message
    (configured / "metrics.jsonl").write_text(json.dumps({"kind": "step", "step": 1, "loss": 9.0}) + "\n")
    assert run_folder_verdict(configured, "pretraining") == run_folder_verdict(configured, "pretraining")
    assert run_folder_verdict(configured, "pretraining").watch and not run_folder_verdict(configured,
                                                                                          "pretraining").message
    verdict = run_folder_verdict(configured, "finetuning")
    assert not verdict.watch and "open it in the Train tab" in verdict.message


@pytest.mark.slow  # (making its 3,300 entries takes most of a second on busy cores)
def test_a_large_folder_picked_by_mistake_answers_at_once(tmp_path):
    import time

    big = tmp_path / "home"
    big.mkdir()
    for index in range(3000):
        (big / f"note-{index}.txt").write_text("x")
    for index in range(300):
        (big / f"folder-{index}").mkdir()
    started = time.perf_counter()
    verdict = run_folder_verdict(big, "pretraining")
    assert time.perf_counter() - started < 1.0 and not verdict.watch


@pytest.mark.slow
def test_the_train_tab_refuses_a_trainer_folder_and_waits_for_an_empty_one_saying_so(qtbot, tmp_path):
    from explorer.train._qt.training_panel import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    try:
        assert not panel.watch_run_folder(trainer_folder(tmp_path))
        status = panel.status.status_label.text()
        assert "Hugging Face Trainer output folder" in status and "bert-train" in status, status
        assert not panel.is_watching and "waiting" not in panel.progress.format()
        empty = tmp_path / "new-run"
        empty.mkdir()
        assert panel.watch_run_folder(empty)
        status = panel.status.status_label.text()
        assert "empty" in status and "waiting for a run to start" in status, status
        (empty / "run_config.json").write_text(json.dumps({"training": {"steps": 4, "preset": "tiny"}}))
        (empty / "metrics.jsonl").write_text(json.dumps({"kind": "step", "step": 1, "total_steps": 4,
                                                         "loss": 9.0}) + "\n")
        qtbot.waitUntil(lambda: panel.plots.point_count() == 1, timeout=10_000)
        assert "empty" not in panel.status.status_label.text()  # what it waited for came
    finally:
        panel.shutdown()
