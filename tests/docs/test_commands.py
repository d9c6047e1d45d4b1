"""Every `bert-train`, `bert-finetune` and `bert-explorer --help` command and every Python block in the README,
CONTRIBUTING.md and docs/ runs as written (tests/docs/doc_blocks.py says what counts as one). A training command
gets only a step cap, `--steps 2`, appended; nothing else is changed. A documented example that cannot run is a
failing test here, named by its page and line.

Each page's commands and blocks run in its order in one scratch folder per page (a `--resume` continues the run
an earlier command of the page started), holding what the commands name, made from the shipped assets:

    .venv/bin/   bert-train, bert-finetune, bert-explorer, torchrun and python, this test's own interpreter
    assets/      a copy of the shipped assets (the screenshots left out)
    my_texts/    the default corpus (assets/corpus)
    reviews.csv, dev.csv                 the mood demo's train and eval files (text,label)
    train-v2.0.json, dev-v2.0.json       the who-says demo's SQuAD 2.0 files

A page that names another file adds it to SCRATCH_FILES. Python blocks run in a fresh interpreter there. The
network is off (HF_HUB_OFFLINE), the Hugging Face cache is an empty folder and prepared corpora go to the test
session's cache, so nothing of the user's is read or written.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.doc_blocks import PROGRAMS, REPO, Step, doc_pages, fenced_blocks, steps

STEP_CAP = ["--steps", "2"]
COMMAND_TIMEOUT = 600
ASSETS = REPO / "assets"
# file or folder in the scratch folder -> what it is made from, under the shipped assets
SCRATCH_FILES = {
    "my_texts": "corpus",
    "reviews.csv": "tasks/mood/train.csv",
    "dev.csv": "tasks/mood/eval.csv",
    "train-v2.0.json": "tasks/who-says/train.json",
    "dev-v2.0.json": "tasks/who-says/eval.json",
}


def all_steps() -> list[Step]:
    return [step for page in doc_pages() for step in steps(page)]


def skipped_or_run(step: Step) -> bool:
    return step.block.skip_reason is None


def make_scratch(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ASSETS, folder / "assets", ignore=shutil.ignore_patterns("*.png"))
    for name, source in SCRATCH_FILES.items():
        copy = shutil.copytree if (ASSETS / source).is_dir() else shutil.copyfile
        copy(ASSETS / source, folder / name)
    bin_folder = folder / ".venv" / "bin"
    bin_folder.mkdir(parents=True)
    for name, module in {**PROGRAMS, "python": None, "python3": None}.items():
        script = bin_folder / name
        runs = f" -m {module}" if module else ""
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}"{runs} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (folder / "home").mkdir()
    (folder / "hf-cache").mkdir()
    return folder


def command_env(scratch: Path) -> dict[str, str]:
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    hub_cache = str(scratch / "hf-cache")
    env = {**os.environ, "PYTHONPATH": python_path, "HOME": str(scratch / "home"), "HF_HOME": hub_cache,
           "HF_HUB_CACHE": hub_cache, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}
    env.pop("HF_ENDPOINT", None)
    env.pop("HF_TOKEN", None)
    return env


class PageRuns:
    """Runs a page's steps in order in its scratch folder, each once; a step runs the page's earlier ones first."""

    def __init__(self, root: Path):
        self.root = root
        self.results: dict[tuple[Path, int], subprocess.CompletedProcess] = {}
        self.scratch: dict[Path, Path] = {}

    def run_through(self, step: Step) -> subprocess.CompletedProcess:
        page = step.block.page
        if page not in self.scratch:
            self.scratch[page] = make_scratch(self.root / page.relative_to(REPO).as_posix().replace("/", "__"))
        for earlier in steps(page):
            key = (page, earlier.line)
            if key not in self.results and skipped_or_run(earlier) and not earlier.needs_window:
                self.results[key] = self._run(earlier, self.scratch[page])
            if earlier == step:
                return self.results[key]
        raise AssertionError(f"{step.id} is no longer on its page")

    @staticmethod
    def _run(step: Step, scratch: Path) -> subprocess.CompletedProcess:
        if step.kind == "python":
            argv = [sys.executable, "-c", step.text]
        else:
            command = step.text + (" " + " ".join(STEP_CAP) if step.kind == "command" else "")
            argv = ["bash", "-c", command]
        started = time.perf_counter()
        result = subprocess.run(argv, cwd=scratch, env=command_env(scratch), capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        result.seconds = time.perf_counter() - started
        return result


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory) -> PageRuns:
    return PageRuns(tmp_path_factory.mktemp("docs-scratch"))


STEPS = all_steps()


@pytest.mark.slow
@pytest.mark.parametrize("step", [step for step in STEPS if skipped_or_run(step)], ids=lambda step: step.id)
def test_a_documented_command_or_python_block_runs_as_written(step: Step, page_runs: PageRuns):
    assert not step.needs_window, (
        f"{step.where}: `{step.text}` opens the window, which a test cannot look at; mark its block "
        "<!-- not run by tests/docs: opens the window --> and say so in the page")
    result = page_runs.run_through(step)
    output = f"{result.stdout}\n{result.stderr}"
    ran = step.text + (" " + " ".join(STEP_CAP) if step.kind == "command" else "")
    assert result.returncode == 0, f"{step.where}: `{ran}` exited {result.returncode}:\n{output[-6000:]}"
    assert "Traceback" not in output, f"{step.where}: `{ran}` printed a traceback:\n{output[-6000:]}"


def test_the_docs_have_commands_and_python_to_run():
    """The extraction itself: if it found nothing, every test above would pass by running nothing."""
    kinds = {step.kind for step in STEPS if skipped_or_run(step)}
    assert {"command", "help", "python"} <= kinds, kinds
    assert any(step.block.page.name == "README.md" and step.kind == "command" for step in STEPS)


def test_every_block_marked_not_run_gives_its_reason():
    for page in doc_pages():
        for block in fenced_blocks(page):
            if block.skip_reason is not None:
                assert len(block.skip_reason.split()) >= 2, f"{block.where}: say why the block is not run"


def test_the_extraction_finds_commands_as_a_reader_writes_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n"
        ".venv/bin/bert-train --corpus my_texts/ \\\n    --out runs/a   # a comment\n"
        "nice -n 5 .venv/bin/python -m bertcore.cli.finetune --demo mood\n"
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/bert-explorer\n"
        ".venv/bin/bert-explorer --help\n"
        ".venv/bin/pip install -e .\n"
        "```\n"
        "<!-- not run by tests/docs: opens the window -->\n"
        "```bash\n.venv/bin/bert-explorer runs/a/final\n```\n"
        "```python\nprint(1)\n```\n"
        "```text\nbert-train --not-a-command\n```\n", encoding="utf-8")
    found = steps(page)
    assert [(step.line, step.kind, step.text, step.needs_window) for step in found] == [
        (2, "command", ".venv/bin/bert-train --corpus my_texts/ --out runs/a", False),
        (4, "command", "nice -n 5 .venv/bin/python -m bertcore.cli.finetune --demo mood", False),
        (5, "help", ".venv/bin/bert-explorer", True),
        (6, "help", ".venv/bin/bert-explorer --help", False),
        (11, "help", ".venv/bin/bert-explorer runs/a/final", True),
        (14, "python", "print(1)", False),
    ]
    assert found[4].block.skip_reason == "opens the window"
    assert not skipped_or_run(found[4]) and skipped_or_run(found[0])
