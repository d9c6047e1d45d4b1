"""The shipped demo tasks: which there are, what each asks and where its files are (assets/tasks/<name>/). It reads
nothing, so a config naming a demo does not reach the corpus reader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertcore.files.resources import assets_dir
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK


@dataclass(frozen=True)
class DemoTask:
    name: str
    task: str  # one of bertcore.tasks.kinds.TASK_KINDS
    train: Path
    eval: Path
    description: str


_DEMOS = {
    "mood": (SEQUENCE_TASK, "csv", "question, exclamation or statement? (one sentence, final punctuation removed)"),
    "next-line": (SEQUENCE_TASK, "tsv", "does sentence B directly follow sentence A in the same speech? (pairs)"),
    "names": (TOKEN_TASK, "conll", "BIO tags for characters mentioned by name (PER)"),
    "who-says": (QA_TASK, "json", 'Who says "..."? over a passage of speeches (SQuAD v2.0 format)'),
}


def demo_tasks(folder: Path | None = None) -> list[DemoTask]:
    """The shipped demo tasks (assets/tasks/<name>/{train,eval}.<ext>)."""
    folder = Path(folder) if folder is not None else assets_dir() / "tasks"
    return [DemoTask(name, task, folder / name / f"train.{ext}", folder / name / f"eval.{ext}", description)
            for name, (task, ext, description) in _DEMOS.items()]


def demo_task(name: str, folder: Path | None = None) -> DemoTask:
    for demo in demo_tasks(folder):
        if demo.name == name:
            return demo
    raise ValueError(f"there is no demo task {name!r}; the demo tasks are {', '.join(_DEMOS)}")
