"""The documentation's fenced code blocks, and the commands and Python in them that tests/docs runs as written.

The pages are README.md, CONTRIBUTING.md and every `docs/**/*.md`, found anew on each run, so a page added later
is checked without anyone listing it. In a block of shell (```bash, ```sh, ```shell, ```console or an unnamed
fence) a command is a logical line (backslash continuations joined, a trailing `# comment` dropped) whose program
is `bert-train`, `bert-finetune`, `bert-explorer` or `torchrun`, or `python -m` one of their modules; other lines
(`pip install`, `pytest`, `ls`) are not run. A ```python block is run whole.

A block that cannot run here says so on the line just before its fence, with the reason, e.g.

    <!-- not run by tests/docs: needs a CUDA GPU -->

and the page's text says the same to the reader (the test cannot check that part).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
PYTHON_LANGUAGES = {"python", "py"}
SKIP_MARKER = re.compile(r"<!--\s*not run by tests/docs:\s*(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<info>[^`]*)$")

# The programs a command may start with, and the module `python -m` runs for each.
PROGRAMS = {"bert-train": "bertcore.cli.train", "bert-finetune": "bertcore.cli.finetune",
            "bert-explorer": "explorer.app", "torchrun": "torch.distributed.run"}
TRAINING_MODULES = {"bertcore.cli.train", "bertcore.cli.finetune"}
WINDOW_MODULES = {"explorer.app", "explorer"}


def doc_pages() -> list[Path]:
    """Every page the tests read: the README, CONTRIBUTING.md and docs/, in a fixed order."""
    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [page for page in pages if page.is_file()]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    skip_reason: str | None  # the marker's reason, when the block is marked as not run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening["fence"], (opening["info"].split() or [""])[0].lower()
        body, end = [], index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][len(opening["indent"]):] if lines[end].startswith(opening["indent"]) else lines[end])
            end += 1
        marker = SKIP_MARKER.search(lines[index - 1]) if index > 0 else None
        blocks.append(Block(page, index + 1, language, "\n".join(body), marker["reason"] if marker else None))
        index = end + 1
    return blocks


@dataclass(frozen=True)
class Step:
    """One thing the docs test runs: a command line or a Python block, where the page has it."""

    block: Block
    line: int
    kind: str  # "command" (a training run, step cap appended), "help" (as written) or "python"
    text: str  # the command as written (comment dropped) or the Python source
    needs_window: bool = False

    @property
    def where(self) -> str:
        return f"{self.block.page.relative_to(REPO)}:{self.line}"

    @property
    def id(self) -> str:
        shown = " ".join(self.text.split())[:70] if self.kind != "python" else "python block"
        return f"{self.where} {shown}"


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(offset of the first physical line, the line with its backslash continuations joined)."""
    joined, start, parts = [], None, []
    for offset, line in enumerate(text.splitlines()):
        if start is None:
            start = offset
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        joined.append((start, " ".join(part.strip() for part in parts)))
        start, parts = None, []
    if parts:
        joined.append((start, " ".join(part.strip() for part in parts)))
    return joined


def program_module(argv: list[str]) -> str | None:
    """The module a command line runs (bertcore.cli.train for `bert-train` or `python -m bertcore.cli.train`, past
    any `VAR=value`, `nice -n N`, `time` or `torchrun … -m`), or None when it is not one the docs test runs."""
    index = 0
    while index < len(argv) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[index]):
        index += 1
    while index < len(argv) and (argv[index] in ("nice", "time", "-n")
                                 or (index > 0 and argv[index - 1] == "-n" and argv[index].isdigit())):
        index += 1
    if index >= len(argv):
        return None
    name = Path(argv[index]).name
    if name in PROGRAMS and name != "torchrun":
        return PROGRAMS[name]
    if name == "torchrun" or re.fullmatch(r"python3?(\.\d+)?", name):
        if "-m" in argv[index + 1:]:
            module = argv[argv.index("-m", index + 1) + 1]
            if name == "torchrun" or module in TRAINING_MODULES | WINDOW_MODULES:
                return module
    return None


def steps(page: Path) -> list[Step]:
    """The commands and Python blocks of a page, in its order."""
    found = []
    for block in fenced_blocks(page):
        if block.language in PYTHON_LANGUAGES:
            found.append(Step(block, block.line + 1, "python", block.text))
            continue
        if block.language not in SHELL_LANGUAGES:
            continue
        for offset, line in logical_lines(block.text):
            command = line.strip().removeprefix("$ ")
            try:
                words = shlex.split(command, comments=True)
            except ValueError:
                continue
            for argv in simple_commands(words):
                module = program_module(argv)
                if module is None:
                    continue
                line, without_comment = block.line + 1 + offset, shlex.join(argv)
                if module in WINDOW_MODULES:
                    asks_only = bool({"--help", "-h", "--version"} & set(argv))
                    found.append(Step(block, line, "help", without_comment, needs_window=not asks_only))
                elif {"--help", "-h"} & set(argv):
                    found.append(Step(block, line, "help", without_comment))
                else:
                    found.append(Step(block, line, "command", without_comment))
    return found


def simple_commands(words: list[str]) -> list[list[str]]:
    """`a && b; c | d` as [a], [b], [c], [d]."""
    commands, current = [], []
    for word in words:
        if word in ("&&", "||", ";", "|"):
            commands.append(current)
            current = []
        else:
            current.append(word)
    return [command for command in [*commands, current] if command]
