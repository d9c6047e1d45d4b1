"""The run folder: its lock, its `latest` pointer kept inside it, checkpoint writing and pruning, metrics.jsonl."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import bertcore.files.run_folder as run_lock_module
from bertcore.errors import CheckpointWriteError, RunFolderBusyError, RunFolderError
from bertcore.files.file_names import LOCK_FILE, checkpoint_name, checkpoint_step
from bertcore.files.metrics_log import MetricsLog, MetricsTail
from bertcore.files.run_folder import RunFolder, RunLock, find_checkpoint, latest_checkpoint

REPO = Path(__file__).resolve().parents[2]
HOLD_THE_LOCK = (
    "import sys\n"
    "from bertcore.files.run_folder import RunFolder\n"
    "lock = RunFolder(sys.argv[1]).lock()\n"
    "print('locked', flush=True)\n"
    "sys.stdin.readline()\n"
)


def fake_checkpoint(run: RunFolder, step: int) -> Path:
    def write(folder: Path) -> None:
        for name in ("config.json", "trainer_state.pt", "model.safetensors"):
            (folder / name).write_text(str(step))

    return run.write_checkpoint(step, write, keep=100)


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of tmp_path/run (killed at the end)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(tmp_path / "run")], cwd=REPO, env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    yield process
    process.kill()
    process.wait()


# ---- the lock -----------------------------------------------------------------------------------------------
def test_a_second_process_is_refused_naming_the_folder_and_the_pid(tmp_path, holder):
    with pytest.raises(RunFolderBusyError, match=rf"run is in use by another training run: process {holder.pid}") \
            as caught:
        RunFolder(tmp_path / "run").lock()
    assert caught.value.pid == holder.pid and caught.value.folder == tmp_path / "run"


def test_the_lock_of_a_killed_process_is_gone_with_it(tmp_path, holder):
    holder.send_signal(signal.SIGKILL)  # no clean-up runs: the lock file stays, with a dead pid in it
    holder.wait()
    assert (tmp_path / "run" / LOCK_FILE).read_text().strip() == str(holder.pid)
    with RunFolder(tmp_path / "run").lock() as lock:
        assert lock.held
        assert (tmp_path / "run" / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert not (tmp_path / "run" / LOCK_FILE).exists()  # released and tidied up


def test_the_lock_is_released_when_the_holder_exits(tmp_path, holder):
    holder.communicate("\n")  # the holder's interpreter exits normally, lock still "held" in its code
    assert holder.returncode == 0
    RunFolder(tmp_path / "run").lock().release()


def test_within_one_process_too(tmp_path):
    first = RunFolder(tmp_path).lock()
    with pytest.raises(RunFolderBusyError, match=rf"another Trainer in this process \(pid {os.getpid()}\)"):
        RunLock(tmp_path / LOCK_FILE).acquire()
    first.release()
    first.release()  # idempotent
    second = RunLock(tmp_path / LOCK_FILE).acquire()
    del second  # garbage-collected: released
    RunLock(tmp_path / LOCK_FILE).acquire().release()


def test_without_fcntl_training_goes_on_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock_module, "fcntl", None)
    with pytest.warns(RuntimeWarning, match="not locked: this platform has no fcntl"):
        lock = RunLock(tmp_path / LOCK_FILE).acquire()
    assert lock.held
    lock.release()


def test_a_file_system_without_locks_warns(tmp_path, monkeypatch):
    class NoLocks:
        LOCK_EX, LOCK_NB = 2, 4

        @staticmethod
        def flock(descriptor, operation):
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(run_lock_module, "fcntl", NoLocks)
    with pytest.warns(RuntimeWarning, match="cannot lock"):
        RunLock(tmp_path / LOCK_FILE).acquire().release()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.undo()
        RunLock(tmp_path / LOCK_FILE).acquire().release()


# ---- the latest pointer stays inside the run ----------------------------------------------------------------
@pytest.mark.parametrize("pointer", ["../../elsewhere", "..", "/tmp", "step-000002/../../other"])
def test_a_pointer_leading_outside_is_refused(tmp_path, pointer):
    run = RunFolder(tmp_path / "run")
    fake_checkpoint(run, 2)
    run.latest_pointer_path.write_text(pointer + "\n")
    with pytest.raises(RunFolderError, match="leads outside the run's"):
        run.checkpoint_to_resume()
    with pytest.raises(RunFolderError, match="leads outside"):
        find_checkpoint(run.path)
    assert latest_checkpoint(run.path) == run.checkpoint_path(2)  # the watcher does not follow it either


def test_a_symlink_leading_outside_is_refused(tmp_path):
    outside = RunFolder(tmp_path / "other-run")
    foreign = fake_checkpoint(outside, 7)
    run = RunFolder(tmp_path / "run")
    fake_checkpoint(run, 2)
    (run.checkpoints_dir / "step-000009").symlink_to(foreign, target_is_directory=True)
    run.latest_pointer_path.write_text("step-000009\n")
    with pytest.raises(RunFolderError, match=r"step-000009.*leads outside"):
        run.checkpoint_to_resume()
    run.latest_pointer_path.unlink()
    assert run.checkpoint_to_resume() == run.checkpoint_path(2)  # the symlinked folder is not one of the run's
    with pytest.raises(RunFolderError, match="not a checkpoint of the run folder"):
        run.checkpoint_to_resume(foreign)
    with pytest.raises(RunFolderError, match="not a checkpoint of the run folder"):
        run.checkpoint_to_resume(run.checkpoints_dir / "step-000009")
    assert run.checkpoint_to_resume(run.path) == run.checkpoint_path(2)


def test_latest_names_the_newest_and_a_broken_pointer_falls_back(tmp_path):
    run = RunFolder(tmp_path / "run")
    with pytest.raises(RunFolderError, match="no checkpoint to resume"):
        run.checkpoint_to_resume()
    for step in (2, 4):
        fake_checkpoint(run, step)
    assert run.latest_pointer_path.read_text() == "step-000004\n"
    assert run.checkpoint_to_resume() == find_checkpoint(run.path) == find_checkpoint(run.checkpoints_dir)
    run.latest_pointer_path.write_text("step-000099\n")  # names a folder that is gone
    assert run.checkpoint_to_resume() == run.checkpoint_path(4)
    assert checkpoint_name(4) == "step-000004" and checkpoint_step("step-1234567") == 1234567
    assert checkpoint_step("final") is None


# ---- writing and pruning checkpoints -------------------------------------------------------------------------
def test_a_failed_checkpoint_leaves_nothing_and_latest_unchanged(tmp_path):
    run = RunFolder(tmp_path / "run")
    fake_checkpoint(run, 2)

    def disk_full(folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CheckpointWriteError, match=r"step 4 to .*step-000004: No space left on device \(ENOSPC\)"
                                                   r".*step-000002 is still the latest") as caught:
        run.write_checkpoint(4, disk_full, keep=2)
    assert caught.value.errno == errno.ENOSPC and caught.value.path == run.checkpoint_path(4)
    assert sorted(p.name for p in run.checkpoints_dir.iterdir()) == ["latest", "step-000002"]
    assert run.checkpoint_to_resume() == run.checkpoint_path(2)


def test_pruning_keeps_the_newest_and_the_protected(tmp_path):
    run = RunFolder(tmp_path / "run")
    for step in (1, 2, 3, 10, 1_000_000):  # numerically, not by name: step-1000000 is the newest
        fake_checkpoint(run, step)
    deleted = run.prune_checkpoints(keep=2, protect=[run.checkpoint_path(2)])
    assert [p.name for p in deleted] == ["step-000001", "step-000003"]
    assert [p.name for p in run.checkpoint_folders()] == ["step-000002", "step-000010", "step-1000000"]


# ---- metrics.jsonl ----------------------------------------------------------------------------------------------
def test_metrics_log_truncates_after_a_resumed_step_and_a_tail_sees_the_new_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in (1, 2, 3):
        log.write({"kind": "step", "step": step})
    log.close()
    with open(path, "a") as file:
        file.write('{"kind": "step", "st')  # a torn last line from a crash
    tail = MetricsTail(path)
    assert [r["step"] for r in tail.read_new()] == [1, 2, 3]
    log = MetricsLog(path, truncate_after_step=2)
    log.write({"kind": "step", "step": 3, "again": True})
    log.close()
    update = tail.poll()
    assert update.restarted and [r["step"] for r in update.records] == [1, 2, 3] and update.records[-1]["again"]
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


def test_run_config_and_summary(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert run.read_summary() is None and not run.looks_like_run()
    with pytest.raises(ValueError, match=r"run_config\.json does not exist"):
        run.read_run_config()
    run.path.mkdir()
    run.write_run_config({"training": {"steps": 3}})
    run.write_summary({"step": 3})
    assert run.read_run_config() == {"training": {"steps": 3}} and run.read_summary() == {"step": 3}
    assert run.looks_like_run()
    run.run_config_path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        run.read_run_config()
