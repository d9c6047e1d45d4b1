"""Faults around the run folder: links and odd files where its files belong, a read-only folder, a full disk
whatever the writing library raises, Ctrl-C twice, resuming after a NaN or a divergence, a run killed before
its settings were written. Each names what the user sees: the exception type, the exit code, the message."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError

import bertcore.models.checkpoint
from bertcore.cli.train import main
from bertcore.errors import (
    CheckpointError,
    CheckpointSaveError,
    CheckpointWriteError,
    DivergenceError,
    NonFiniteLossError,
    RunFolderError,
    RunFolderWriteError,
)
from bertcore.files.metrics_log import MetricsLog
from bertcore.files.run_folder import RunFolder
from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.training.pretraining import Trainer, find_checkpoint
from tests.bertcore.test_cli import TINY
from tests.bertcore.test_data import synthetic_corpus_text
from tests.bertcore.test_trainer import TINY_MODEL, make_config, write_vocabulary

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
# What torch.save and safetensors raise when the disk fills up under them (torch 2.x; safetensors 0.4+).
TORCH_DISK_FULL = RuntimeError("[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing "
                               "file data/3: file write failed")
SAFETENSORS_DISK_FULL = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


# Tiny models are overhead-bound: one thread is faster and does not fight other processes.
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=40), encoding="utf-8")
    write_vocabulary(path.parent)
    return path


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def cli_run(corpus_path: Path, out: Path, *options: str) -> list[str]:
    """bert-train options of a tiny run on the test corpus with its fixed vocabulary."""
    return ["--corpus", str(corpus_path), "--vocab", str(corpus_path.parent / "vocab.txt"), "--out", str(out),
            "--no-progress", *TINY, *options]


def fake_checkpoint(run: RunFolder, step: int, *, sane: bool = True, keep: int = 100) -> Path:
    def write(folder: Path) -> None:
        for name in ("config.json", "trainer_state.pt", "model.safetensors"):
            (folder / name).write_text(str(step))

    return run.write_checkpoint(step, write, keep=keep, **({} if sane else {"sane": False}))


def outside_file(tmp_path: Path) -> Path:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir(exist_ok=True)
    target.write_text("precious\n")
    return target


# ---- 1. never through a link, never into a FIFO, folder or device ---------------------------------------------
def test_a_link_named_run_lock_is_refused_and_what_it_leads_to_is_left_alone(tmp_path):
    target = outside_file(tmp_path)
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.lock_path.symlink_to(target)
    with pytest.raises(RunFolderError, match=r"run\.lock is a symbolic link \(to .*precious\.txt\), not a file.*"
                                             r"never writes through a link.*Delete .*run\.lock"):
        run.lock()
    assert target.read_text() == "precious\n"  # not truncated, no pid written into it
    run.lock_path.unlink()
    dangling = tmp_path / "elsewhere" / "not-yet"
    run.lock_path.symlink_to(dangling)
    with pytest.raises(RunFolderError, match="symbolic link"):
        run.lock()
    assert not dangling.exists()  # not created through the link
    run.lock_path.unlink()
    run.lock().release()  # a plain lock file is fine again


@pytest.mark.parametrize(("make", "what"), [(os.mkfifo, "a FIFO"), (os.mkdir, "a folder")])
def test_a_fifo_or_a_folder_named_run_lock_is_refused(tmp_path, make, what):
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    make(run.lock_path)
    with pytest.raises(RunFolderError, match=rf"run\.lock is {what}.*, not a file"):
        run.lock()


def finishes(function, seconds: float = 20.0):
    """Run `function` in a thread: its result or exception, or a failure if it hangs (a FIFO opened for writing
    with nobody reading blocks forever)."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "it hangs"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.parametrize("truncate_after_step", [None, 3])
def test_metrics_jsonl_is_never_appended_through_a_link(tmp_path, truncate_after_step):
    target = outside_file(tmp_path)
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.metrics_path.symlink_to(target)
    with pytest.raises(RunFolderError, match=r"metrics\.jsonl is a symbolic link.*never writes through a link"):
        MetricsLog(run.metrics_path, truncate_after_step=truncate_after_step).write({"kind": "step", "step": 1})
    assert target.read_text() == "precious\n"
    run.metrics_path.unlink()
    dangling = tmp_path / "elsewhere" / "created.jsonl"
    run.metrics_path.symlink_to(dangling)
    with pytest.raises(RunFolderError, match="symbolic link"):
        MetricsLog(run.metrics_path, truncate_after_step=truncate_after_step)
    assert not dangling.exists()


def test_a_fifo_named_metrics_jsonl_is_refused_without_hanging(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    os.mkfifo(run.metrics_path)
    with pytest.raises(RunFolderError, match=r"metrics\.jsonl is a FIFO"):
        finishes(lambda: MetricsLog(run.metrics_path))
    with pytest.raises(RunFolderError, match=r"metrics\.jsonl is a FIFO"):
        finishes(lambda: MetricsLog(run.metrics_path, truncate_after_step=2))


def test_a_run_iterated_again_does_not_append_through_a_link_put_in_its_folder(corpus_path, tmp_path):
    target = outside_file(tmp_path)
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=4), model_config=TINY_MODEL)
    metrics = tmp_path / "run" / "metrics.jsonl"
    for stats in trainer.steps():
        if stats.step == 2:
            metrics.unlink()  # while the loop holds the folder (else it would notice a change by another run)
            metrics.symlink_to(target)
            break
    with pytest.raises(RunFolderError, match="symbolic link"):
        next(trainer.steps())
    assert target.read_text() == "precious\n"
    trainer.close()


def test_files_replaced_by_rename_replace_a_link_not_what_it_leads_to(tmp_path):
    """run_config.json, summary.json, checkpoints/latest and final/ are written beside and renamed into place:
    a link there is replaced by the run's own file (or folder), and its target is left as it was."""
    run = RunFolder(tmp_path / "run")
    run.create()
    targets = {}
    for name, path in [("config", run.run_config_path), ("summary", run.summary_path),
                       ("latest", run.latest_pointer_path)]:
        targets[name] = outside_file(tmp_path).with_name(f"{name}.txt")
        targets[name].write_text("precious\n")
        path.symlink_to(targets[name])
    elsewhere = tmp_path / "elsewhere" / "final"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("precious\n")
    run.final_dir.symlink_to(elsewhere, target_is_directory=True)

    run.write_run_config({"training": {}})
    run.write_summary({"step": 1})
    fake_checkpoint(run, 2)
    run.write_final(lambda folder: (folder / "config.json").write_text("{}"))

    for path in (run.run_config_path, run.summary_path, run.latest_pointer_path):
        assert path.is_file() and not path.is_symlink()
    assert all(target.read_text() == "precious\n" for target in targets.values())
    assert run.read_summary() == {"step": 1} and run.latest_pointer_path.read_text() == "step-000002\n"
    assert run.final_dir.is_dir() and not run.final_dir.is_symlink()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]  # what the link led to is untouched
    assert not [p.name for p in run.path.iterdir() if p.name.startswith(".")]  # nor a retired link left behind


def test_a_dangling_link_where_a_checkpoint_or_final_goes_is_replaced(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.create()
    nowhere = tmp_path / "nowhere"
    run.checkpoint_path(2).symlink_to(nowhere, target_is_directory=True)
    run.final_dir.symlink_to(nowhere, target_is_directory=True)
    assert fake_checkpoint(run, 2).is_dir() and not run.checkpoint_path(2).is_symlink()
    run.write_final(lambda folder: (folder / "config.json").write_text("{}"))
    assert (run.final_dir / "config.json").is_file() and not nowhere.exists()


def test_pruning_renames_a_checkpoint_away_before_deleting_it_and_leaves_links_alone(tmp_path):
    run = RunFolder(tmp_path / "run")
    for step in (2, 4, 6):
        fake_checkpoint(run, step)
    foreign = tmp_path / "foreign-step"
    foreign.mkdir()
    (foreign / "weights").write_text("keep")
    run.checkpoint_path(1).symlink_to(foreign, target_is_directory=True)
    removed = []
    real_rmtree = shutil.rmtree

    def watching_rmtree(path, *args, **kwargs):
        removed.append(Path(path).name)
        real_rmtree(path, *args, **kwargs)

    shutil.rmtree = watching_rmtree
    try:
        deleted = run.prune_checkpoints(keep=1)
    finally:
        shutil.rmtree = real_rmtree
    assert [p.name for p in deleted] == ["step-000002", "step-000004"]
    assert all(name.startswith(".step-") and name.endswith(".old") for name in removed)  # never deleted in place
    assert (foreign / "weights").read_text() == "keep" and run.checkpoint_path(1).is_symlink()


# ---- 2. a read-only run folder ------------------------------------------------------------------------------
@pytest.fixture
def finished_run(corpus_path, tmp_path) -> Path:
    out = tmp_path / "run"
    assert main(cli_run(corpus_path, out, "--steps", "2")) == 0
    return out


@pytest.fixture
def read_only(monkeypatch):
    """Make `folder` unwritable as a read-only mount makes it (the tests run as root, which permission bits do
    not stop): every os.open for writing of a path in it fails with EROFS, as the kernel would answer."""
    folders: list[Path] = []
    real_open = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def open_read_only(path, flags, *args, **kwargs):
        if flags & writing and any(Path(path).absolute().is_relative_to(f) for f in folders):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_read_only)
    return lambda folder: folders.append(Path(folder).absolute())


def test_resuming_a_read_only_run_folder_is_a_clear_error(finished_run, read_only, corpus_path):
    read_only(finished_run)
    config = make_config(corpus_path, finished_run, steps=4)
    with pytest.raises(RunFolderWriteError, match=rf"cannot train in the run folder {finished_run}: its lock file "
                                                  r".*run\.lock cannot be written \(Read-only file system \(EROFS\)\)"
                                                  r".*must be writable.*--out COPY --resume") as caught:
        Trainer(config, resume=True)
    assert caught.value.errno == errno.EROFS


def test_bert_train_resume_on_a_read_only_folder_exits_2_with_the_fix(finished_run, read_only, capsys):
    read_only(finished_run)
    capsys.readouterr()
    assert main(["--out", str(finished_run), "--resume", "--steps", "4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"bert-train: error: cannot train in the run folder {finished_run}" in err
    assert "Read-only file system (EROFS)" in err and "Traceback" not in err


def can_mount() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.slow
def test_a_really_read_only_run_folder_exits_2(finished_run):
    """The same through a real read-only bind mount, where the system allows one (root with mount rights)."""
    if not can_mount():
        pytest.skip("no mount namespace here (needs root with CAP_SYS_ADMIN)")
    folder = str(finished_run)
    script = (f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder} && "
              f"exec {sys.executable} -m bertcore.cli.train --out {folder} --resume --steps 4 --no-progress")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=REPO, env=ENV, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "cannot train in the run folder" in result.stderr and "Read-only file system (EROFS)" in result.stderr
    assert "Traceback" not in result.stderr


# ---- 3. a full disk, whatever the library raises -----------------------------------------------------------------
def torch_save_fails(monkeypatch):
    monkeypatch.setattr(torch, "save", lambda *args, **kwargs: (_ for _ in ()).throw(TORCH_DISK_FULL))


def safetensors_fails(monkeypatch):
    def save_file(*args, **kwargs):
        raise SAFETENSORS_DISK_FULL

    monkeypatch.setattr(bertcore.models.checkpoint, "save_file", save_file)


@pytest.mark.parametrize(("fail", "reason"), [
    (torch_save_fails, r"torch\.save failed: \[enforce fail.*PytorchStreamWriter failed writing file"),
    (safetensors_fails, r"No space left on device \(ENOSPC\)"),
])
@pytest.mark.slow
def test_a_checkpoint_that_a_library_cannot_write_is_a_clean_stop(corpus_path, tmp_path, monkeypatch, fail,
                                                                   reason):
    run = tmp_path / "run"
    trainer = Trainer(make_config(corpus_path, run, steps=4, checkpoint_every=2), model_config=TINY_MODEL)
    steps = trainer.steps()
    assert next(steps).step == 1 and next(steps).checkpoint is not None
    next(steps)
    fail(monkeypatch)
    with pytest.raises(CheckpointWriteError, match=rf"checkpoint of step 4 to .*step-000004: {reason}.*Nothing "
                                                   r"half-written.*step-000002 is still the latest") as caught:
        next(steps)
    if fail is safetensors_fails:
        assert caught.value.errno == errno.ENOSPC
    checkpoints = run / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest", "step-000002"]  # nothing half-written
    assert find_checkpoint(run).name == "step-000002"
    load_pretrained(find_checkpoint(run))
    error = records(run)[-1]
    assert error["kind"] == "error" and error["step"] == 4 and "could not write the checkpoint" in error["message"]


@pytest.mark.parametrize("fail", [torch_save_fails, safetensors_fails])
def test_bert_train_exits_1_when_a_library_cannot_write_a_checkpoint(corpus_path, tmp_path, monkeypatch, capsys,
                                                                     fail):
    fail(monkeypatch)
    out = tmp_path / "run"
    assert main(cli_run(corpus_path, out, "--steps", "2")) == 1
    err = capsys.readouterr().err
    assert "bert-train: error: could not write the checkpoint of step 2" in err and "Traceback" not in err
    assert records(out)[-1]["kind"] == "error"
    assert not [p for p in (out / "checkpoints").iterdir()]  # no half checkpoint, hidden or not


def test_final_weights_that_cannot_be_written_are_a_clean_stop(corpus_path, tmp_path, monkeypatch):
    run = tmp_path / "run"
    trainer = Trainer(make_config(corpus_path, run, steps=2), model_config=TINY_MODEL)
    real_save_file = bertcore.models.checkpoint.save_file

    def save_file(tensors, path, metadata=None):
        if ".final." in str(path):
            raise SAFETENSORS_DISK_FULL
        real_save_file(tensors, path, metadata=metadata)

    monkeypatch.setattr(bertcore.models.checkpoint, "save_file", save_file)
    with pytest.raises(CheckpointWriteError, match=r"could not write the final weights to .*final: No space left"):
        list(trainer.steps())
    assert not (run / "final").exists() and find_checkpoint(run).name == "step-000002"
    assert records(run)[-1]["kind"] == "error"


@pytest.mark.parametrize("fail", [torch_save_fails, safetensors_fails])
def test_save_pretrained_on_a_full_disk_is_a_checkpoint_error_and_leaves_nothing(tmp_path, monkeypatch, fail,
                                                                                 small_vocab_tokenizer):
    from bertcore.models.bert import BertForPreTraining
    from bertcore.models.config import preset

    tokenizer = small_vocab_tokenizer
    model = BertForPreTraining(preset("tiny", vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=20))
    folder = save_pretrained(model, tokenizer, tmp_path / "model")
    before = (folder / "model.safetensors").read_bytes()
    fail(monkeypatch)
    if fail is torch_save_fails:  # save_pretrained writes no torch file: the disk fills under safetensors
        safetensors_fails(monkeypatch)
    with pytest.raises(CheckpointSaveError, match=r"could not save the model to .*model: No space left on device "
                                                  r"\(ENOSPC\)\. Nothing half-written.*intact") as caught:
        save_pretrained(model, tokenizer, folder)
    assert isinstance(caught.value, CheckpointError) and caught.value.errno == errno.ENOSPC
    assert (folder / "model.safetensors").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging folder left
    with pytest.raises(CheckpointSaveError, match="could not save the model"):
        save_pretrained(model, tokenizer, tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_programming_error_while_writing_is_not_taken_for_a_full_disk(corpus_path, tmp_path, monkeypatch):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=2), model_config=TINY_MODEL)

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(bertcore.models.checkpoint, "save_file", broken)
    with pytest.raises(TypeError, match="a bug"):
        list(trainer.steps())


FILL_THE_DISK = """
import os, sys
from pathlib import Path
import bertcore.files.run_folder as run_folder
from bertcore.cli.train import main

FILE, real = sys.argv[1], run_folder.RunFolder.write_checkpoint

def write_checkpoint(self, step, write_files, **kwargs):
    if step == 4:  # leave the disk room for the checkpoint's files before FILE, but not for FILE
        previous = self.checkpoint_path(2)
        files = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "trainer_state.pt"]
        room = sum(os.path.getsize(previous / f) + 8192 for f in files[: files.index(FILE)]) + 8192
        free = os.statvfs(self.path).f_bavail * os.statvfs(self.path).f_frsize
        with open(self.path.parent / "filler", "wb") as filler:
            filler.write(b"x" * max(0, free - room))
    return real(self, step, write_files, **kwargs)

run_folder.RunFolder.write_checkpoint = write_checkpoint
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("file", ["model.safetensors", "trainer_state.pt"])
def test_a_really_full_disk_exits_1_with_an_error_record(corpus_path, tmp_path, file):
    """A real full disk (a small tmpfs, where the system allows mounting one): torch.save and safetensors meet
    ENOSPC themselves, and raise their own exception types."""
    if not can_mount():
        pytest.skip("no mount namespace here (needs root with CAP_SYS_ADMIN)")
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "run"
    program = tmp_path / "fill_the_disk.py"
    program.write_text(FILL_THE_DISK)
    arguments = shlex.join([sys.executable, str(program), file,
                            *cli_run(corpus_path, out, "--steps", "4", "--checkpoint-every", "2")])
    script = (f"mount -t tmpfs -o size=4m none {disk} && {arguments}; code=$?; cat {out}/metrics.jsonl; "
              f"ls -a {out}/checkpoints; exit $code")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=REPO, env=ENV, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "could not write the checkpoint of step 4" in result.stderr and "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    written = [json.loads(line) for line in lines if line.startswith("{")]
    assert written[-1]["kind"] == "error" and written[-1]["step"] == 4
    assert sorted(line for line in lines if not line.startswith("{")) == [".", "..", "latest", "step-000002"]


# ---- 4. Ctrl-C twice ----------------------------------------------------------------------------------------
SLOW_RUN = """
import sys, time
import bertcore.models.checkpoint as checkpoint
import bertcore.training.loop as training_loop
from bertcore.cli.train import main

mode, real_save_file, real_step = sys.argv[1], checkpoint.save_file, training_loop.TrainingLoop._train_one_step

def save_file(*args, **kwargs):
    print("writing", flush=True)
    time.sleep(4)  # a slow disk: the second Ctrl-C comes now
    return real_save_file(*args, **kwargs)

def train_one_step(self):
    if self.step == 1:
        print("in step 2", flush=True)
        time.sleep(4 if mode == "abort" else 2)  # a slow step: the first Ctrl-C (in "abort", both) comes now
    return real_step(self)

checkpoint.save_file, training_loop.TrainingLoop._train_one_step = save_file, train_one_step
code = main(sys.argv[2:])
print("returned", flush=True)
time.sleep(2 if mode == "late" else 0)  # on the way out: in "late" the second Ctrl-C comes now
sys.exit(code)
"""


def run_and_interrupt(corpus_path: Path, out: Path, mode: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", SLOW_RUN, mode, *cli_run(corpus_path, out, "--steps", "50")]
    process = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout.readline().strip() == "in step 2"
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)  # stop after this step, with a checkpoint
        if mode in ("wait", "late"):
            awaited = "writing" if mode == "wait" else "returned"
            while process.stdout.readline().strip() != awaited:
                assert process.poll() is None, "the run ended before the second Ctrl-C"
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.slow
def test_a_second_ctrl_c_while_the_checkpoint_is_written_waits_for_it(corpus_path, tmp_path):
    out = tmp_path / "run"
    result = run_and_interrupt(corpus_path, out, "wait")
    assert result.returncode == 0, result.stderr
    assert "still writing the checkpoint, please wait…" in result.stderr
    assert "bert-train: stopped at step 2" in result.stderr and "Traceback" not in result.stderr
    assert find_checkpoint(out).name == "step-000002"
    load_pretrained(find_checkpoint(out))


@pytest.mark.slow
def test_a_second_ctrl_c_during_a_step_aborts_at_once_without_a_traceback(corpus_path, tmp_path):
    out = tmp_path / "run"
    result = run_and_interrupt(corpus_path, out, "abort")
    assert result.returncode == 1, result.stderr
    assert "bert-train: aborted at step 1 without writing a checkpoint" in result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert not list((out / "checkpoints").iterdir())
    RunFolder(out).lock().release()  # the folder was let go of


@pytest.mark.slow
def test_a_second_ctrl_c_after_the_stop_was_written_does_not_kill_the_exit(corpus_path, tmp_path):
    """The race the audit found: a second Ctrl-C after the stopping checkpoint, as the process exits, met the
    restored default handler and killed it (exit -2) although its checkpoint was whole."""
    out = tmp_path / "run"
    result = run_and_interrupt(corpus_path, out, "late")
    assert result.returncode == 0, result.stderr
    assert "bert-train: stopped at step 2" in result.stderr and "Traceback" not in result.stderr
    assert find_checkpoint(out).name == "step-000002"


# A step that is one long C++ operation, as a backward pass of minutes is: Python cannot run a signal handler
# until it returns. Its length is measured first, so that the test says how long the old code would have waited.
BUSY_RUN = """
import math, sys, time
import torch
import bertcore.training.loop as training_loop
from bertcore.cli.train import main

real_step = training_loop.TrainingLoop._train_one_step
matrix = torch.eye(1024)
started = time.perf_counter()
matrix @ matrix
product_seconds = max(time.perf_counter() - started, 1e-4)
count = max(2, math.ceil(60 / product_seconds))  # one call of about a minute

def train_one_step(self):
    if self.step == 1:
        print(f"busy for {count * product_seconds:.0f} s", flush=True)
        torch.linalg.multi_dot([matrix] * count)  # count - 1 products in one C++ call
    return real_step(self)

training_loop.TrainingLoop._train_one_step = train_one_step
sys.exit(main(sys.argv[1:]))
"""


class StderrLines:
    """The lines a process writes to stderr, read as they come (a thread), with the time each arrived."""

    def __init__(self, stream):
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append((time.perf_counter(), line))

    def wait_for(self, text: str, timeout: float) -> float:
        """When a line holding `text` arrived; AssertionError after `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for arrived, line in list(self.lines):
                if text in line:
                    return arrived
            time.sleep(0.02)
        raise AssertionError(f"no {text!r} within {timeout} s; stderr: {self.text()}")

    def text(self) -> str:
        self._thread.join(timeout=5)
        return "".join(line for _, line in self.lines)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_second_ctrl_c_in_the_middle_of_a_long_operation_ends_the_run_at_once(corpus_path, tmp_path, signum):
    """Python runs a signal handler only between bytecodes: before, both Ctrl-Cs waited for the step's long C++
    operation (here a minute), then the second aborted. Now the first says it will stop and the second ends the
    process within seconds, saying what was not saved; progress is on, as users run it."""
    out = tmp_path / "run"
    options = [option for option in cli_run(corpus_path, out, "--steps", "50") if option != "--no-progress"]
    process = subprocess.Popen([sys.executable, "-c", BUSY_RUN, *options], cwd=REPO, env=ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stderr = StderrLines(process.stderr)
        busy = process.stdout.readline().strip()
        assert busy.startswith("busy for "), busy + stderr.text()
        busy_seconds = float(busy.split()[2])
        time.sleep(0.5)
        first = time.perf_counter()
        process.send_signal(signum)
        said = stderr.wait_for("bert-train: stopping after this step", timeout=5) - first
        second = time.perf_counter()
        process.send_signal(signum)
        process.wait(timeout=30)
        ended = time.perf_counter() - second
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = stderr.text()
    assert process.returncode == 1, text
    assert said < 3 and ended < 5 < busy_seconds / 4, (said, ended, busy_seconds)
    assert ("bert-train: aborted at step 1 without writing a checkpoint; there is no checkpoint to resume from, so "
            "step 1 is lost. One Ctrl-C stops with a checkpoint") in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert not list((out / "checkpoints").iterdir())
    RunFolder(out).lock().release()  # the process's lock died with it


class AbortedLoop:
    """What _Interrupts reads of a loop: the step reached and the newest checkpoint."""

    def __init__(self, step: int, last_checkpoint: Path | None):
        self.step, self.last_checkpoint = step, last_checkpoint


@pytest.mark.parametrize(("step", "checkpoint", "says"), [
    (0, None, "aborted at step 0 without writing a checkpoint; nothing was trained. One Ctrl-C"),
    (1, None, "aborted at step 1 without writing a checkpoint; there is no checkpoint to resume from, so step 1 is "
              "lost. One Ctrl-C"),
    (7, None, "so steps 1–7 are lost"),
    (37, "run/checkpoints/step-000030", "aborted at step 37 without writing a checkpoint; the latest is "
                                        "run/checkpoints/step-000030: resume from it with --resume (it repeats "
                                        "steps 31–37). One Ctrl-C stops with a checkpoint"),
    (31, "run/checkpoints/step-000030", "(it repeats step 31)."),
    (30, "run/checkpoints/step-000030", "bert-train: aborted at step 30 after writing its checkpoint "
                                        "run/checkpoints/step-000030; resume from it with --resume"),
])
def test_what_an_abort_says_was_saved_and_what_was_not(step, checkpoint, says):
    from bertcore.cli.common import _Interrupts

    loop = AbortedLoop(step, Path(checkpoint) if checkpoint else None)
    assert says in _Interrupts(loop, "bert-train", show=True).abort_message()


# ---- 5. resuming after a NaN or a divergence ---------------------------------------------------------------
def diverged_run(corpus_path: Path, run: Path, keep: int = 1) -> tuple[DivergenceError, list[str]]:
    """A run with lr 30 whose loss explodes without NaN: checkpoints every 2 steps, the newest ones written
    while the loss was far above its best; returns the error and the checkpoint folders left."""
    config = make_config(corpus_path, run, steps=2000, lr=30.0, warmup_steps=300, checkpoint_every=2,
                         keep_checkpoints=keep)
    with pytest.raises(DivergenceError) as caught:
        list(Trainer(config, model_config=TINY_MODEL).steps())
    return caught.value, sorted(p.name for p in (run / "checkpoints").glob("step-*"))


@pytest.mark.slow
def test_plain_resume_after_a_divergence_continues_from_the_newest_sane_checkpoint(corpus_path, tmp_path):
    run = tmp_path / "run"
    error, left = diverged_run(corpus_path, run)
    good = error.last_checkpoint
    newer = [name for name in left if name > good.name]
    assert newer and (run / "checkpoints" / "latest").read_text().strip() == newer[-1]  # written after it went bad
    config = make_config(corpus_path, run, steps=good_step(good) + 4, lr=1e-3, warmup_steps=0, checkpoint_every=2,
                         keep_checkpoints=1)
    trainer = Trainer(config, resume=True)
    assert trainer.resumed_from == good and trainer.step == good_step(good)
    assert trainer.last_good_checkpoint == good
    note = trainer.resume_note
    assert f"resuming from {good.name}, the newest checkpoint written while the loss was sane" in note
    assert all(name in note for name in newer) and "went bad" in note
    warning = [r for r in records(run) if r["kind"] == "warning"][-1]
    assert warning == {"kind": "warning", "step": good_step(good), "message": note}
    stats = list(trainer.steps())
    assert stats[0].step == good_step(good) + 1 and all(s.loss < 20 for s in stats)


def good_step(folder: Path) -> int:
    return int(folder.name.split("-")[1])


@pytest.mark.slow
def test_bert_train_resume_after_a_divergence_says_which_checkpoints_it_passed_over(corpus_path, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(cli_run(corpus_path, out, "--steps", "2000", "--lr", "30", "--warmup-steps", "300",
                        "--checkpoint-every", "2", "--keep-checkpoints", "1")) == 1
    err = capsys.readouterr().err
    assert "the loss diverged" in err
    good = err.split("The last checkpoint written while the loss was sane is ")[1].split(";")[0]
    step = good_step(Path(good))
    assert main(["--out", str(out), "--resume", "--lr", "1e-3", "--warmup-steps", "0", "--steps", str(step + 2),
                 "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"bert-train: resuming from {good} at step {step}" in err
    assert f"bert-train: warning: resuming from {Path(good).name}, the newest checkpoint written while the loss " \
           "was sane; passed over the newer step-" in err


@pytest.fixture
def nan_at(monkeypatch):
    """The set of steps whose loss is NaN, as weights whose forward pass overflows give it."""
    from bertcore.training.pretraining import PretrainingTask

    bad_steps: set[int] = set()
    real_loss_of, real_train_batch = PretrainingTask.loss_of, PretrainingTask.train_batch
    current = {}

    def train_batch(self, step, *args):
        current["step"] = step
        return real_train_batch(self, step, *args)

    def loss_of(self, sums):
        return float("nan") if current.get("step") in bad_steps else real_loss_of(self, sums)

    monkeypatch.setattr(PretrainingTask, "train_batch", train_batch)
    monkeypatch.setattr(PretrainingTask, "loss_of", loss_of)
    return bad_steps


@pytest.mark.slow
def test_a_checkpoint_whose_weights_then_give_nan_is_passed_over(corpus_path, tmp_path, nan_at):
    """A checkpoint written while the loss was still sane, whose weights gave a NaN at the next step: its
    trainer_state.pt says sane, its sanity.json then says it is not, and a resume goes back one further."""
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=10, checkpoint_every=2, keep_checkpoints=1)
    trainer = Trainer(config, model_config=TINY_MODEL)
    steps = trainer.steps()
    for _ in range(3):
        next(steps)
    bad = trainer.save_checkpoint()
    nan_at.add(4)
    assert bad.name == "step-000003"
    with pytest.raises(NonFiniteLossError, match=r"at step 4.*sane is .*step-000002") as caught:
        next(steps)
    assert caught.value.last_checkpoint.name == "step-000002"
    sanity = RunFolder(run).checkpoint_sanity(bad)
    assert sanity["sane"] is False and "at step 4" in sanity["reason"]
    assert torch.load(bad / "trainer_state.pt", weights_only=True)["sane"]  # what the state alone says
    trainer.close()
    nan_at.clear()  # the weights of step-000002 are fine
    resumed = Trainer(config, resume=True)
    assert resumed.resumed_from.name == "step-000002" and "step-000003" in resumed.resume_note
    assert [s.step for s in resumed.steps()][:2] == [3, 4]


@pytest.mark.slow
def test_a_resumed_checkpoint_whose_first_step_gives_nan_is_passed_over_next_time(corpus_path, tmp_path, nan_at):
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=10, checkpoint_every=2, keep_checkpoints=5)
    trainer = Trainer(config, model_config=TINY_MODEL)
    for stats in trainer.steps():
        if stats.step == 3:
            trainer.request_stop()  # a stop "without a fault": its checkpoint's loss is never seen
    trainer.close()
    assert find_checkpoint(run).name == "step-000003"
    nan_at.add(4)
    resumed = Trainer(config, resume=True)
    with pytest.raises(NonFiniteLossError, match=r"at step 4.*sane is .*step-000002"):
        list(resumed.steps())
    resumed.close()
    again = Trainer(config, resume=True)
    assert again.resumed_from.name == "step-000002"


def test_pruning_never_deletes_the_newest_sane_checkpoint(tmp_path):
    run = RunFolder(tmp_path / "run")
    fake_checkpoint(run, 40)
    for step in (60, 80):
        fake_checkpoint(run, step, sane=False, keep=1)
    assert sorted(p.name for p in run.checkpoint_folders()) == ["step-000040", "step-000080"]
    assert run.checkpoint_to_resume() == run.checkpoint_path(40)
    assert run.resume_choice().skipped == (run.checkpoint_path(80),)
    assert run.checkpoint_to_resume(run.checkpoint_path(80)) == run.checkpoint_path(80)  # named: as asked
    assert run.newest_sane_checkpoint() == run.checkpoint_path(40)


@pytest.mark.slow
def test_resuming_a_named_checkpoint_written_after_the_loss_went_bad_keeps_the_sane_one(corpus_path, tmp_path):
    run = tmp_path / "run"
    error, left = diverged_run(corpus_path, run)
    good, newest = error.last_checkpoint, run / "checkpoints" / left[-1]
    config = make_config(corpus_path, run, steps=good_step(newest) + 6, lr=1e-4, warmup_steps=0,
                         checkpoint_every=2, keep_checkpoints=1, divergence_factor=0)
    trainer = Trainer(config, resume=str(newest))
    assert trainer.resumed_from == newest and trainer.last_good_checkpoint == good
    assert "as asked, although it was written after the loss went bad" in trainer.resume_note
    steps = trainer.steps()
    next(steps)
    assert next(steps).checkpoint is not None  # pruned with keep_checkpoints=1 ...
    assert good.is_dir()  # ... but the newest sane checkpoint is spared until a newer one proves sane
    assert next(steps).step == good_step(newest) + 3 and trainer.last_good_checkpoint.name > newest.name


def test_when_no_checkpoint_is_sane_resume_says_so(tmp_path):
    run = RunFolder(tmp_path / "run")
    for step in (2, 4):
        fake_checkpoint(run, step, sane=False)
    with pytest.raises(RunFolderError, match=r"every checkpoint in .*checkpoints \(step-000004, step-000002\) was "
                                             r"written after the loss went bad.*--resume .*step-000004"):
        run.checkpoint_to_resume()


# ---- 6. a run killed before run_config.json was written ------------------------------------------------------
def test_resuming_a_run_killed_before_its_settings_were_written_names_the_cause(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.lock").write_text("12345\n")  # what a run killed while reading its corpus leaves
    (out / "vocab.txt").write_text("[PAD]\n")
    assert main(["--out", str(out), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert (f"{out} holds no run_config.json: a run started in it (it left run.lock, vocab.txt) but was stopped "
            "before its settings were written, so there is nothing to resume. Start it again without --resume") in err
    assert "not a bert-train run folder" not in err
    from bertcore.cli.finetune import main as finetune_main

    assert finetune_main(["--out", str(out), "--resume"]) == 2
    assert "stopped before its settings were written" in capsys.readouterr().err
