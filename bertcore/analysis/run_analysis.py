"""A training run's analysis records (bertcore.analysis.records): the data they measure, the records of a run read
back, and a finished or stopped run's checkpoints analysed afterwards.

    for progress in bertcore.analyse_checkpoints("runs/mine"):   # in a worker thread; stop iterating to cancel
        print(f"{progress.done}/{progress.total} {progress.what}")
    records = bertcore.read_analysis_records("runs/mine")         # {"kind": "analysis", "step": …, "uas": …}

Records live in the run's metrics.jsonl as {"kind": "analysis", "step": N, …the record}: the step whose weights
were measured. A run trained with `--analysis-every N` writes them as it trains (bertcore.analysis.schedule); a run
without them, or with gaps, gets one per checkpoint afterwards (`analyse_checkpoints`), marked "post_hoc": true.
The same weights give the same record either way (the record's "seconds" aside, and "index", which decides
whether BLiMP is scored: a post-hoc record stands on its own, index None, so it always has BLiMP).

The data (`analysis_data`): the shipped UD English EWT cut (its dev sentences measured, its test sentences for the
probe) and the shipped BLiMP pairs, or a CoNLL-U treebank of the user's, whose first `sentences` sentences are
measured and the next `test_sentences` test the probe.

`analyse_checkpoints` appends under the run folder's lock (bertcore.files.run_folder.RunLock), taken for each
append and never held while it computes or yields: a run folder a live training run holds is refused at the start
(RunFolderBusyError), and a run that starts in the folder meanwhile stops it at its next append.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.analysis.likelihood import MinimalPair, shipped_blimp
from bertcore.analysis.records import RECORD_KIND, RecordSettings, iter_analysis_record
from bertcore.analysis.treebank import Sentence, read_conllu, shipped_treebank
from bertcore.errors import AnalysisError, RunFolderBusyError
from bertcore.files.atomic import open_plain_file, run_write_error
from bertcore.files.file_names import FINAL_DIR, checkpoint_step
from bertcore.files.metrics_log import MetricsTail
from bertcore.files.run_folder import RunFolder, list_checkpoints

AnalysisData = tuple[list[Sentence], list[Sentence] | None, list[MinimalPair]]


def analysis_data(treebank: str | os.PathLike | Sequence[Sentence] | None = None) -> AnalysisData:
    """(treebank sentences, test sentences or None, BLiMP pairs) for a run's records: the shipped EWT dev and test
    cuts and BLiMP pairs, or the sentences of `treebank` (a CoNLL-U path, or sentences read already) with None for
    the test sentences (the record then tests the probe on the treebank's sentences after those it measures)."""
    if treebank is None:
        return shipped_treebank("dev"), shipped_treebank("test"), shipped_blimp()
    sentences = read_conllu(treebank) if isinstance(treebank, str | os.PathLike) else list(treebank)
    return sentences, None, shipped_blimp()


def check_analysis_data(data: AnalysisData, settings: RecordSettings, where: str = "the treebank") -> None:
    """AnalysisError, before any work, when a record could not be made from `data`: a treebank without the
    record's sentences and, with no test treebank, at least one sentence after them for the probe to be tested on."""
    treebank, test, _ = data
    needed = settings.sentences + (1 if test is None else 0)
    if len(treebank) < needed:
        raise AnalysisError(
            f"{where} holds {len(treebank)} sentence{'s' if len(treebank) != 1 else ''}; a record measures the first "
            f"{settings.sentences} and tests its probe on the next {settings.test_sentences}, so it needs at least "
            f"{needed} (give a larger treebank)")


def read_analysis_records(run_folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The analysis records of a run's metrics.jsonl, in file order (a record per step at most, unless an older
    bertcore wrote two); [] when there is no metrics file yet."""
    return [record for record in _metrics_records(RunFolder(run_folder)) if record.get("kind") == RECORD_KIND]


# ---- a run's checkpoints, analysed afterwards ------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointProgress:
    """How far `analyse_checkpoints` is, for a progress bar: `done` of `total` checkpoints analysed (and their
    records appended); within the current one, `part` of `parts` (bertcore.analysis.records' parts)."""

    done: int
    total: int
    what: str  # in words: "step 500 (checkpoints/step-000500): 2 of 4 parts"
    step: int | None = None  # the checkpoint being analysed; None before the first and after the last
    part: int = 0
    parts: int = 1
    record: dict[str, Any] | None = None  # the record just appended (on the yield right after its append)

    @property
    def fraction(self) -> float:
        """How much of all the work is done, in [0, 1]."""
        if not self.total:
            return 1.0
        return min(1.0, (self.done + (self.part / self.parts if self.record is None else 0)) / self.total)


def analyse_checkpoints(run_folder: str | os.PathLike, *, settings: RecordSettings | None = None,
                        treebank: str | os.PathLike | Sequence[Sentence] | None = None
                        ) -> Iterator[CheckpointProgress]:
    """Analyse each checkpoint of a finished or stopped run (checkpoints/step-N and final/, in step order) that has
    no analysis record yet, appending {"kind": "analysis", "step": N, "post_hoc": true, …record} to its
    metrics.jsonl as each is done. A generator: it yields progress (first 0 of `total`, then part by part) and
    stops cleanly when its consumer stops iterating (Cancel): a record is appended only once whole.

    settings: what each record measures; default the settings of the run's own records, if it has any, else
    RecordSettings(). treebank: default the one the run was trained with (`--treebank`), else the shipped cut.
    RunFolderBusyError when a live run holds the folder; AnalysisError when it is not a run folder or the
    treebank cannot serve the records; CheckpointError for a checkpoint that cannot be opened."""
    from bertcore.models.checkpoint import load_pretrained

    run = RunFolder(run_folder)
    if not run.looks_like_run():
        raise AnalysisError(f"{run.path} is not a training run's folder (it has no metrics.jsonl nor "
                            "run_config.json); give the folder bert-train, bert-finetune or the app trained in")
    _check_not_held(run)
    records = _metrics_records(run)
    analysed = {record.get("step") for record in records if record.get("kind") == RECORD_KIND}
    settings = settings or _settings_of(records)
    if treebank is None:
        treebank = _recorded_treebank(run)
    data = analysis_data(treebank)
    check_analysis_data(data, settings, where=str(treebank) if treebank is not None else "the shipped treebank")
    todo = [(step, folder) for step, folder in _checkpoints_by_step(run, records) if step not in analysed]
    total = len(todo)
    yield CheckpointProgress(0, total, f"{total} checkpoint{'s' if total != 1 else ''} to analyse"
                             + (f" ({len(analysed)} step{'s' if len(analysed) != 1 else ''} already analysed)"
                                if analysed else ""))
    for done, (step, folder) in enumerate(todo):
        where = f"step {step} ({folder.relative_to(run.path)})"
        yield CheckpointProgress(done, total, f"{where}: loading", step=step)
        model, tokenizer = load_pretrained(folder)
        record = None
        for part in iter_analysis_record(model, tokenizer, data[0], data[2], test_treebank=data[1],
                                         settings=settings):
            record = part.result
            if part.done < part.total:
                yield CheckpointProgress(done, total, f"{where}: {part.done} of {part.total} parts", step=step,
                                         part=part.done, parts=part.total)
        line = {"kind": RECORD_KIND, "step": step, "post_hoc": True, **record}
        if _append_unless_analysed(run, line):
            yield CheckpointProgress(done + 1, total, f"{where}: analysed", step=step, record=line)
        else:  # a record of this step appeared meanwhile (another analysis of the same folder)
            yield CheckpointProgress(done + 1, total, f"{where}: already analysed meanwhile", step=step)
    yield CheckpointProgress(total, total, "done")


def _check_not_held(run: RunFolder) -> None:
    try:
        with run.lock():
            pass
    except RunFolderBusyError as error:
        holder = f"process {error.pid}" if error.pid is not None else "another process"
        raise RunFolderBusyError(
            f"{run.path} is in use by a training run ({holder} holds {run.lock_path}); its checkpoints can be "
            "analysed once it has stopped. A run trained with --analysis-every N writes its own records as it goes",
            run.path, error.pid) from None


def _metrics_records(run: RunFolder) -> list[dict[str, Any]]:
    """Every record of the run's metrics.jsonl (read through bertcore.files.reading: a regular file only)."""
    tail = MetricsTail(run.metrics_path)
    records: list[dict[str, Any]] = []
    while True:  # a poll reads at most 64 MB
        update = tail.poll()
        if not update.records and not update.bad_lines:
            return records
        records.extend(update.records)


def _settings_of(records: Sequence[Mapping[str, Any]]) -> RecordSettings:
    """The settings of the run's first analysis record (so that its records compare), else the defaults."""
    for record in records:
        if record.get("kind") == RECORD_KIND and isinstance(record.get("settings"), dict):
            known = {name: value for name, value in record["settings"].items()
                     if name in RecordSettings.__dataclass_fields__}
            with contextlib.suppress(ValueError, TypeError):
                return RecordSettings(**known)
    return RecordSettings()


def _recorded_treebank(run: RunFolder) -> str | None:
    """The treebank the run was trained with (run_config.json's training settings), when it named one."""
    try:
        treebank = run.read_run_config().get("training", {}).get("treebank")
    except (ValueError, AttributeError):
        return None
    return treebank if isinstance(treebank, str) and treebank else None


def _checkpoints_by_step(run: RunFolder, records: Sequence[Mapping[str, Any]]) -> list[tuple[int, Path]]:
    """The run's complete step-N checkpoints and final/ (its step: summary.json's, else the last step record's),
    one folder per step, in step order."""
    by_step: dict[int, Path] = {}
    for _, folder in list_checkpoints(run.path):
        step = checkpoint_step(folder.name)
        if step is not None:
            by_step[step] = folder
    final = run.path / FINAL_DIR
    if (final / "config.json").is_file():
        step = (run.read_summary() or {}).get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            steps = [record.get("step") for record in records if record.get("kind") == "step"]
            step = max((value for value in steps if isinstance(value, int)), default=None)
        if step is not None:
            by_step.setdefault(step, final)  # a checkpoint of the same step holds the same weights
    return sorted(by_step.items())


def _append_unless_analysed(run: RunFolder, record: dict[str, Any]) -> bool:
    """Append `record` to metrics.jsonl under the run folder's lock unless a record of its step is there already
    (False then). A last line a crash left without its newline gets one first, so the two never run together."""
    with run.lock():
        if any(existing.get("kind") == RECORD_KIND and existing.get("step") == record["step"]
               for existing in _metrics_records(run)):
            return False
        line = (json.dumps(record) + "\n").encode("utf-8")
        with run_write_error(run.metrics_path, "the metrics file"):
            descriptor = open_plain_file(run.metrics_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.fstat(descriptor).st_size
                if size and os.pread(descriptor, 1, size - 1) != b"\n":
                    line = b"\n" + line
                os.write(descriptor, line)
            finally:
                os.close(descriptor)
    return True
