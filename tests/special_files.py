"""Reading files that are not files, safely from a test: a FIFO, a link to /dev/zero, a folder, JSON nested 100,000
deep put where a regular file belongs (`replace_with`), and the reads run in child processes with a per-case time
limit and a memory limit (`run_in_children`), so a read that blocks or never ends fails its test, never the suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECONDS_PER_CASE = 20
CHILD_MEMORY = 2 << 30  # RLIMIT_DATA of the child: reading /dev/zero stops at 2 GiB with a MemoryError
DEEP_JSON = "[" * 100_000 + "]" * 100_000

# What a child script starts with: its memory limit, then `for name, argument, path in cases():` with the case's
# time limit armed (`faulthandler` ends the child on a hang); each case prints json [name, outcome, message].
CHILD_PREAMBLE = r"""
import faulthandler, json, resource, sys
from pathlib import Path
_, hard = resource.getrlimit(resource.RLIMIT_DATA)
limit = MEMORY if hard == resource.RLIM_INFINITY else min(MEMORY, hard)
resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
def cases():
    for line in sys.stdin.read().splitlines():
        faulthandler.dump_traceback_later(SECONDS, exit=True)  # a hang ends the process; the parent goes on
        yield json.loads(line)
        faulthandler.cancel_dump_traceback_later()
""".replace("MEMORY", str(CHILD_MEMORY)).replace("SECONDS", str(SECONDS_PER_CASE))


def run_in_children(script: str, cases: list[tuple[str, str, str]]) -> dict[str, tuple[str, str]]:
    """(outcome, message) of each (name, argument, path), run in order by `script` (CHILD_PREAMBLE + its loop) in a
    child process; a case that hangs ends its child and is recorded as 'hung', and a new child takes the rest."""
    results: dict[str, tuple[str, str]] = {}
    pending = list(cases)
    while pending:
        try:
            finished = subprocess.run([sys.executable, "-c", script], input="\n".join(map(json.dumps, pending)),
                                      capture_output=True, text=True, cwd=REPO,
                                      timeout=60 + SECONDS_PER_CASE * len(pending))
            output, errors = finished.stdout, finished.stderr
        except subprocess.TimeoutExpired as expired:
            output, errors = expired.stdout or "", f"the child was killed after {expired.timeout} s"
            output = output.decode() if isinstance(output, bytes) else output
        for line in output.splitlines():
            name, outcome, message = json.loads(line)
            results[name] = (outcome, message)
        pending = [case for case in pending if case[0] not in results]
        if pending:  # the first one left is the one its child was stuck in
            results[pending[0][0]] = ("hung", errors[-3000:])
            pending = pending[1:]
    return results


def replace_with(path: Path, kind: str) -> None:
    """Put a `kind` where `path` is: "fifo", "dev_zero" (a link to it), "folder" or "deep" (JSON nested 100,000
    deep, a regular file)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_text("a folder, not the file")
    elif kind == "deep":
        path.write_text(DEEP_JSON)
    else:
        raise ValueError(f"no special file of kind {kind!r}")
