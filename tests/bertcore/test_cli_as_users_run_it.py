"""`bert-train` and `bert-finetune` run the way a user runs them: progress bars on (the default), their output
through a pipe and under a pseudo-terminal, and a vocabulary trained on the corpus (no --vocab). The rest of the
CLI tests pass --no-progress to keep their output short; these are the tests of the path users take first."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.bertcore.test_data import synthetic_corpus_text

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--preset", "tiny", "--hidden-size", "24", "--num-layers", "2", "--num-heads", "2",
         "--intermediate-size", "40", "--batch-size", "4", "--seq-len", "32", "--num-threads", "1",
         "--steps", "3", "--eval-every", "2"]


def command_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}


def run_under_pty(argv: list[str], cwd: Path, timeout: float = 240) -> tuple[int, str]:
    """Run `argv` with a pseudo-terminal as its stdin, stdout and stderr (as in a user's terminal): exit status and
    everything it wrote. The terminal is 100 columns by 30 rows, as a user's window is (a pseudo-terminal starts at
    0 x 0, where tqdm draws empty bars)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    process = subprocess.Popen(argv, cwd=cwd, env=command_env(), stdin=follower, stdout=follower, stderr=follower,
                               close_fds=True)
    os.close(follower)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: every writer has closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        else:
            process.kill()
            raise AssertionError(f"{argv} did not finish in {timeout} s:\n{output.decode(errors='replace')}")
    finally:
        os.close(leader)
    return process.wait(timeout=30), output.decode(errors="replace")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("texts")
    (folder / "my_texts.txt").write_text(synthetic_corpus_text(num_documents=30), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_bert_train_with_its_progress_bars_through_a_pipe(corpus, tmp_path):
    """Progress on, a vocabulary trained on the corpus: the vocabulary pass reports 100 % twice (its last piece, then
    its closing report), which once closed the bar and then updated it (AttributeError on None)."""
    result = subprocess.run([sys.executable, "-m", "bertcore.cli.train", "--corpus", str(corpus), "--vocab-size", "70",
                             "--out", str(tmp_path / "run"), *SMALL], cwd=tmp_path, env=command_env(),
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "vocabulary sample" in result.stderr and "preparing corpus" in result.stderr  # both passes as bars
    assert "finished at step 3" in result.stderr
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["mlm+nsp", "rtd"])
def test_bert_train_under_a_terminal(corpus, tmp_path, objective):
    code, output = run_under_pty([sys.executable, "-m", "bertcore.cli.train", "--corpus", str(corpus),
                                  "--vocab-size", "70", "--objective", objective, "--out", str(tmp_path / "run"),
                                  *SMALL], cwd=tmp_path)
    assert code == 0, output
    assert "Traceback" not in output
    assert "100%" in output and "finished at step 3" in output


@pytest.mark.slow
def test_bert_finetune_with_its_progress_bar_under_a_terminal_and_a_pipe(tmp_path):
    data = REPO / "assets" / "tasks" / "mood"
    argv = [sys.executable, "-m", "bertcore.cli.finetune", "--task", "sequence", "--train", str(data / "train.csv"),
            "--init-from", str(REPO / "assets" / "default-model"), "--steps", "3", "--batch-size", "4",
            "--num-threads", "1"]
    code, output = run_under_pty([*argv, "--out", str(tmp_path / "tty")], cwd=tmp_path)
    assert code == 0, output
    assert "Traceback" not in output and "finished at step 3" in output
    piped = subprocess.run([*argv, "--out", str(tmp_path / "pipe")], cwd=tmp_path, env=command_env(),
                           capture_output=True, text=True, timeout=240)
    assert piped.returncode == 0, piped.stderr
    assert "Traceback" not in piped.stderr and "finished at step 3" in piped.stderr
