"""A run's curves read from its files, Qt-free: every point of every metric, of three kinds of run.

    bert-train / bert-finetune   a run folder (bertcore.files.file_names): metrics.jsonl's "step" records give the
                                 training curves under their own names (loss, mlm_loss, learning_rate, …) and its
                                 "eval" records the held-out ones, named "eval/<name>" (eval/loss) as TensorBoard
                                 and the Trainer name theirs; "tokens" (per step) and "elapsed_seconds" become the
                                 tokens-seen and relative-time axes; checkpoint, warning and error records are the
                                 run's news, not curves. It keeps no clock time (wall_times None).
    Hugging Face Trainer         an output folder: trainer_state.json's log_history, in the folder or in its newest
                                 checkpoint-N (the one further on); every number under its own name (loss,
                                 eval_loss, learning_rate, …), "num_input_tokens_seen" also as the tokens axis. It
                                 keeps no clock time.
    TensorBoard                  a log folder's tfevents files (explorer.runs.tfevents): every scalar tag as
                                 written (train/loss), with each point's wall time. A folder's subfolders that hold
                                 tfevents files are runs of their own, as TensorBoard shows them.

`read_curves(path)` reads one run whole; `open_run(path)` returns a `CurveReader` whose `poll()` returns only what
was appended since the last poll (a run still writing is followed by tailing its files from the byte where the last
poll stopped, never by reading them again): a metrics line or a tfevents record still being written is left for the
next poll. A file replaced or shortened (a resumed bert-train run rewrites its metrics.jsonl; a Trainer rewrites
its trainer_state.json) says `restarted`, and the poll then holds the whole run again. `find_runs(folder)` lists the
runs in a folder and below it.

A file that is not what its name says (not JSON, a tfevents record whose checksum fails, a FIFO or a folder in its
place) is a `CurveReadError` naming it; nothing here waits on a file.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertcore.files.file_names import METRICS_FILE, RUN_CONFIG_FILE
from bertcore.files.reading import open_regular_file, parse_json
from explorer.runs.tfevents import TagKinds, TfeventsError, _NotAnEvent, decode_event, parse_records, verify_data

__all__ = ["BERT_FINETUNE", "BERT_TRAIN", "TENSORBOARD", "TRAINER", "Curve", "CurveChunk", "CurveReadError",
           "CurveReader", "RunCurves", "find_runs", "open_run", "read_curves", "run_kind"]

BERT_TRAIN, BERT_FINETUNE, TRAINER, TENSORBOARD = "bert-train", "bert-finetune", "trainer", "tensorboard"
TRAINER_STATE_FILE = "trainer_state.json"
EVAL_PREFIX = "eval/"  # a bert-train run's held-out metrics: "eval/loss"
_TRAINER_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_CHUNK_BYTES = 64 << 20  # read at most this much of a file per poll: a huge file arrives over several polls
_TRAINER_STATE_LIMIT = 512 << 20
# A step record's fields that are not curves: its place (step, of total_steps) and the two progress measures that
# become x axes (tokens seen, relative time).
_STEP_BOOKKEEPING = frozenset({"kind", "step", "total_steps", "tokens", "elapsed_seconds"})
_EVAL_BOOKKEEPING = frozenset({"kind", "step", "num_examples"})


class CurveReadError(ValueError):
    """A run's file that cannot be read as what its name says, or a folder that holds no run; the message names
    the path and what is wrong."""


@dataclass(frozen=True)
class Curve:
    """One metric of one run: every point, in the order the run wrote them."""

    name: str
    steps: np.ndarray  # int64
    values: np.ndarray  # float64 (NaN and ±inf as written)
    wall_times: np.ndarray | None = None  # seconds since the epoch, float64; None where the format keeps no time

    def __len__(self) -> int:
        return len(self.steps)


@dataclass
class Points:
    """Points of one metric as a poll found them (numpy arrays of one length)."""

    steps: np.ndarray
    values: np.ndarray
    wall_times: np.ndarray | None = None


@dataclass
class CurveChunk:
    """What one poll of a run found. When `restarted`, the run's curves start again from these points."""

    points: dict[str, Points] = field(default_factory=dict)
    restarted: bool = False
    tokens: Points | None = None  # (step, tokens seen by then) where the run logs them
    elapsed: Points | None = None  # (step, seconds of training by then): bert-train's relative time
    records: list[dict] = field(default_factory=list)  # a bert-train run's other records (checkpoint, warning, error)
    main_metric: str | None = None  # a fine-tuning run's main held-out metric, as its eval records name it
    skipped: int = 0  # lines or records that could not be read (a damaged line), skipped

    def __bool__(self) -> bool:
        return bool(self.points or self.restarted or self.records or self.tokens or self.elapsed or self.skipped)


class RunCurves(Mapping[str, Curve]):
    """A run's curves by metric name (a read-only mapping), and its progress axes."""

    def __init__(self, path: Path, kind: str, curves: dict[str, Curve], tokens: Curve | None,
                 elapsed: Curve | None, main_metric: str | None = None):
        self.path, self.kind = path, kind
        self._curves = curves
        self.tokens = tokens  # .steps, .values: tokens seen by each step, where the run logs them
        self.elapsed = elapsed  # .steps, .values: seconds of training by each step (bert-train)
        self.main_metric = main_metric

    def __getitem__(self, name: str) -> Curve:
        return self._curves[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._curves)

    def __len__(self) -> int:
        return len(self._curves)

    def __repr__(self) -> str:
        return f"RunCurves({str(self.path)!r}, {self.kind!r}, {sorted(self._curves)})"


# ---- what a folder is -------------------------------------------------------------------------------------------
def is_tfevents_file(path: Path) -> bool:
    return "tfevents" in path.name and not path.name.startswith(".")


def _tfevents_files(folder: Path) -> list[Path]:
    try:
        return sorted(path for path in folder.iterdir() if is_tfevents_file(path) and path.is_file())
    except OSError:
        return []


def trainer_state_file(folder: Path) -> Path | None:
    """The trainer_state.json of a Trainer output folder: the folder's own or its newest checkpoint-N's, whichever
    is further on (its global_step; the folder's own on a tie); None when there is none."""
    candidates = [folder / TRAINER_STATE_FILE] if (folder / TRAINER_STATE_FILE).is_file() else []
    try:
        checkpoints = [path for path in folder.iterdir() if _TRAINER_CHECKPOINT.fullmatch(path.name)
                       and (path / TRAINER_STATE_FILE).is_file()]
    except OSError:
        checkpoints = []
    if checkpoints:
        newest = max(checkpoints, key=lambda path: int(_TRAINER_CHECKPOINT.fullmatch(path.name).group(1)))
        candidates.append(newest / TRAINER_STATE_FILE)
    if len(candidates) < 2:
        return candidates[0] if candidates else None
    return max(candidates, key=lambda path: (_global_step(path), path.parent == folder))


def _global_step(path: Path) -> int:
    """trainer_state.json's global_step, read from the file's start (the Trainer sorts its keys: global_step comes
    before the long log_history)."""
    try:
        with open_regular_file(path, error=CurveReadError) as file:
            head = file.read(8192)
    except (OSError, CurveReadError):
        return -1
    match = re.search(rb'"global_step"\s*:\s*(\d+)', head)
    return int(match.group(1)) if match else -1


def run_kind(path: str | os.PathLike) -> str | None:
    """BERT_TRAIN, BERT_FINETUNE, TRAINER or TENSORBOARD for a folder holding a run of that kind; None otherwise."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    if (folder / METRICS_FILE).exists() or (folder / RUN_CONFIG_FILE).exists():
        return BERT_FINETUNE if _is_finetuning(folder) else BERT_TRAIN
    if trainer_state_file(folder) is not None:
        return TRAINER
    if _tfevents_files(folder):
        return TENSORBOARD
    return None


def _is_finetuning(folder: Path) -> bool:
    from bertcore.files.run_folder import read_run_config
    from explorer.runs.run_watch import is_finetuning_run

    try:
        return is_finetuning_run(read_run_config(folder))
    except (OSError, ValueError):
        return False


def find_runs(folder: str | os.PathLike, *, max_depth: int = 6, max_folders: int = 20_000) -> list[tuple[Path, str]]:
    """The runs in `folder` and below it, as (folder, kind), in path order: the folder itself when it is a run, and
    every subfolder that is. A bert-train or Trainer run's own subfolders (checkpoints, TensorBoard logs a Trainer
    wrote beside its state) are its own, not runs; a TensorBoard folder's subfolders may be runs. Hidden folders
    are passed over; the walk stops `max_depth` folders down and after `max_folders` folders (a home folder)."""
    root = Path(folder)
    found: list[tuple[Path, str]] = []
    visited = 0
    pending = [(root, 0)]
    while pending and visited < max_folders:
        current, depth = pending.pop()
        visited += 1
        kind = run_kind(current)
        if kind is not None:
            found.append((current, kind))
            if kind != TENSORBOARD:
                continue
        if depth >= max_depth:
            continue
        try:
            children = sorted((path for path in current.iterdir()
                               if not path.name.startswith(".") and path.is_dir() and not path.is_symlink()),
                              reverse=True)
        except OSError:
            continue
        pending.extend((child, depth + 1) for child in children)
    return sorted(found)


# ---- reading files as they grow -------------------------------------------------------------------------------------
class AppendedBytes:
    """The bytes appended to one file since the last read: never reads a byte twice, notices a file replaced or
    shortened (`read` then starts from its beginning and says so), and opens only a regular file (never waits on
    a FIFO)."""

    def __init__(self, path: Path, label: str):
        self.path, self.label = path, label
        self.offset = 0
        self._identity: tuple[int, int] | None = None

    def read(self, limit: int = _CHUNK_BYTES) -> tuple[bytes, bool]:
        """(bytes appended since the last read, at most `limit`; whether the file started again)."""
        try:
            file = open_regular_file(self.path, error=CurveReadError, label=self.label)
        except FileNotFoundError:
            return b"", False
        with file:
            status = os.fstat(file.fileno())
            identity = (status.st_dev, status.st_ino)
            restarted = self._identity is not None and (identity != self._identity or status.st_size < self.offset)
            if restarted:
                self.offset = 0
            self._identity = identity
            if status.st_size == self.offset:
                return b"", restarted
            try:
                file.seek(self.offset)
                data = file.read(min(limit, status.st_size - self.offset))
            except OSError as error:
                raise CurveReadError(f"{self.label} {self.path} cannot be read: {error.strerror or error}") from None
        self.offset += len(data)
        return data, restarted

    def give_back(self, count: int) -> None:
        """The last `count` bytes read were not used (a record still being written): read them again next time."""
        self.offset -= count


class CurveReader:
    """Follows one run's files: each `poll()` returns a `CurveChunk` of what was appended since the last."""

    kind = ""

    def __init__(self, folder: Path):
        self.folder = folder

    def poll(self) -> CurveChunk:
        raise NotImplementedError

    def read_all(self, max_polls: int = 100_000) -> RunCurves:
        """Every point of the run as it is now: polls until a poll finds nothing more."""
        collected = _Collector()
        for _ in range(max_polls):
            chunk = self.poll()
            if not chunk:
                break
            collected.add(chunk)
        return collected.result(self.folder, self.kind)


class _Collector:
    """A run's chunks joined into whole curves."""

    def __init__(self):
        self.parts: dict[str, list[Points]] = {}
        self.tokens: list[Points] = []
        self.elapsed: list[Points] = []
        self.main_metric: str | None = None

    def add(self, chunk: CurveChunk) -> None:
        if chunk.restarted:
            self.parts, self.tokens, self.elapsed = {}, [], []
        for name, points in chunk.points.items():
            self.parts.setdefault(name, []).append(points)
        if chunk.tokens is not None:
            self.tokens.append(chunk.tokens)
        if chunk.elapsed is not None:
            self.elapsed.append(chunk.elapsed)
        self.main_metric = chunk.main_metric or self.main_metric

    @staticmethod
    def _joined(name: str, parts: list[Points]) -> Curve:
        walls = None if any(part.wall_times is None for part in parts) else \
            np.concatenate([part.wall_times for part in parts])
        return Curve(name, np.concatenate([part.steps for part in parts]).astype(np.int64),
                     np.concatenate([part.values for part in parts]).astype(np.float64), walls)

    def result(self, folder: Path, kind: str) -> RunCurves:
        curves = {name: self._joined(name, parts) for name, parts in self.parts.items()}
        tokens = self._joined("tokens seen", self.tokens) if self.tokens else None
        elapsed = self._joined("elapsed seconds", self.elapsed) if self.elapsed else None
        return RunCurves(folder, kind, curves, tokens, elapsed, self.main_metric)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Columns:
    """Points gathered a record at a time, kept as plain lists until a poll ends."""

    def __init__(self):
        self.steps: dict[str, list[int]] = {}
        self.values: dict[str, list[float]] = {}

    def add(self, name: str, step: int, value: float) -> None:
        steps = self.steps.get(name)
        if steps is None:
            steps = self.steps[name] = []
            self.values[name] = []
        steps.append(step)
        self.values[name].append(value)

    def points(self) -> dict[str, Points]:
        return {name: Points(np.asarray(steps, dtype=np.int64), np.asarray(self.values[name], dtype=np.float64))
                for name, steps in self.steps.items()}


# ---- bert-train / bert-finetune: metrics.jsonl ------------------------------------------------------------------
class MetricsFileReader(CurveReader):
    """A bert-train or bert-finetune run folder's metrics.jsonl, tailed a whole line at a time."""

    kind = BERT_TRAIN

    def __init__(self, folder: Path, kind: str = BERT_TRAIN):
        super().__init__(folder)
        self.kind = kind
        self._file = AppendedBytes(folder / METRICS_FILE, "the metrics file")
        self._partial = b""  # the start of a line still being written
        self._tokens_seen = 0  # a running sum of the step records' tokens

    def poll(self) -> CurveChunk:
        data, restarted = self._file.read()
        if restarted:
            self._partial, self._tokens_seen = b"", 0
        if not data:
            return CurveChunk(restarted=restarted)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # b"" when the data ended with its line
        chunk = self._parse([line for line in lines if line.strip()])
        chunk.restarted = restarted
        return chunk

    @staticmethod
    def _records(lines: list[bytes]) -> tuple[list, int]:
        """The JSON objects of whole lines, parsed together (one call is ~2x a call per line); a damaged line is
        found and skipped only when the whole fails."""
        if not lines:
            return [], 0
        try:
            records = json.loads(b"[" + b",".join(lines) + b"]")
        except (ValueError, RecursionError):
            records = []
            for line in lines:
                try:
                    records.append(json.loads(line))
                except (ValueError, RecursionError):
                    records.append(None)
        kept = [record for record in records if isinstance(record, dict)]
        return kept, len(records) - len(kept)

    def _parse(self, lines: list[bytes]) -> CurveChunk:
        """The curves of a poll's records, a column at a time: records of one kind with the same fields (nearly all
        of a run's) are one group, and each field of a group one list comprehension and one numpy array."""
        records, skipped = self._records(lines)
        groups: dict[tuple, list[int]] = {}
        others, main_metric = [], None
        for index, record in enumerate(records):
            kind = record.get("kind")
            if kind in (None, "step", "eval") and "step" in record:
                groups.setdefault((kind, *record), []).append(index)
            elif kind is not None:
                others.append(record)  # checkpoint, warning, error: the run's news
            else:
                skipped += 1
        parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}  # name -> (record index, step, value)
        tokens_parts, clock_parts = [], []
        for (kind, *names), indexes in groups.items():
            chosen = [records[index] for index in indexes]
            order = np.asarray(indexes, dtype=np.int64)
            steps = _numbers([record["step"] for record in chosen])
            usable = np.isfinite(steps)
            skipped += int(np.count_nonzero(~usable))
            steps = steps.astype(np.int64)
            held_out = kind == "eval"
            if held_out and isinstance(chosen[-1].get("main_metric"), str):
                main_metric = chosen[-1]["main_metric"]
            for name in names:
                if name in (_EVAL_BOOKKEEPING if held_out else _STEP_BOOKKEEPING) or name == "main_metric":
                    continue
                values = _numbers([record[name] for record in chosen], keep_missing=False)
                keep = usable & ~np.isnan(values) | usable & _written_nan(chosen, name, values)
                if not keep.any():
                    continue
                parts.setdefault(EVAL_PREFIX + name if held_out else name, []).append(
                    (order[keep], steps[keep], values[keep]))
            if not held_out:
                for name, into in (("tokens", tokens_parts), ("elapsed_seconds", clock_parts)):
                    if name in names:
                        values = _numbers([record[name] for record in chosen], keep_missing=False)
                        keep = usable & np.isfinite(values)
                        into.append((order[keep], steps[keep], values[keep]))
        tokens = _in_file_order(tokens_parts)
        if tokens is not None:
            tokens.values = self._tokens_seen + np.cumsum(tokens.values)  # tokens per step -> tokens seen by then
            self._tokens_seen = float(tokens.values[-1]) if len(tokens.values) else self._tokens_seen
        return CurveChunk(points={name: _in_file_order(pieces) for name, pieces in parts.items()}, records=others,
                          main_metric=main_metric, skipped=skipped, tokens=tokens, elapsed=_in_file_order(clock_parts))


def _numbers(column: list, keep_missing: bool = True) -> np.ndarray:
    """A column of JSON values as float64: numbers as they are, anything else (null, text, true/false, a list) NaN.
    Python's json writes NaN and Infinity for non-finite floats and reads them back as floats."""
    kinds = set(map(type, column))
    if kinds <= {int, float}:
        return np.asarray(column, dtype=np.float64)
    return np.asarray([value if _number(value) else np.nan for value in column], dtype=np.float64)


def _written_nan(records: list[dict], name: str, values: np.ndarray) -> np.ndarray:
    """Where a NaN in `values` was a NaN written in the file (a diverged step: a point, passed through by the
    smoothing) rather than a value that was no number."""
    written = np.zeros(len(values), dtype=bool)
    for index in np.flatnonzero(np.isnan(values)):
        written[index] = isinstance(records[index][name], float)
    return written


def _in_file_order(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> Points | None:
    """Pieces of one curve from several groups of records, joined in the order their records were written."""
    if not pieces:
        return None
    if len(pieces) == 1:
        _, steps, values = pieces[0]
        return Points(steps, values)
    order = np.concatenate([piece[0] for piece in pieces])
    by_record = np.argsort(order, kind="stable")
    return Points(np.concatenate([piece[1] for piece in pieces])[by_record],
                  np.concatenate([piece[2] for piece in pieces])[by_record])


# ---- the Hugging Face Trainer: trainer_state.json -------------------------------------------------------------------
TRAINER_TOKENS = "num_input_tokens_seen"


class TrainerStateReader(CurveReader):
    """A Hugging Face Trainer output folder: the log_history of its newest trainer_state.json. The Trainer rewrites
    the file whole at each checkpoint (a new checkpoint-N), so a poll reads it when it changed; what the previous
    read held is kept when the new history begins with it (only the entries past it are new)."""

    kind = TRAINER

    def __init__(self, folder: Path):
        super().__init__(folder)
        self._stamp: tuple | None = None
        self._taken = 0  # log_history entries already returned
        self._last_taken: dict | None = None
        self.state: dict = {}  # the newest trainer_state.json, but its log_history

    def poll(self) -> CurveChunk:
        path = trainer_state_file(self.folder)
        if path is None:
            return CurveChunk()
        try:
            status = path.stat()
        except OSError:
            return CurveChunk()
        stamp = (str(path), status.st_mtime_ns, status.st_size, status.st_ino)
        if stamp == self._stamp:
            return CurveChunk()
        try:
            with open_regular_file(path, error=CurveReadError, label="the Trainer state") as file:
                data = file.read(_TRAINER_STATE_LIMIT + 1)
        except FileNotFoundError:
            return CurveChunk()  # replaced between the look and the read: the next poll
        if len(data) > _TRAINER_STATE_LIMIT:
            raise CurveReadError(f"the Trainer state {path} is over {_TRAINER_STATE_LIMIT >> 20} MiB; it is not a "
                                 "trainer_state.json")
        try:
            state = parse_json(data, path, error=CurveReadError, label="the Trainer state")
        except CurveReadError:
            if data and not data.rstrip().endswith(b"}"):
                return CurveChunk()  # still being written (the Trainer writes it in place): the next poll
            raise
        history = state.get("log_history") if isinstance(state, dict) else None
        if not isinstance(history, list):
            raise CurveReadError(f"{path} holds no log_history list; it is not a Hugging Face Trainer's "
                                 "trainer_state.json")
        self._stamp = stamp
        self.state = {key: value for key, value in state.items() if key != "log_history"}
        continues = (self._last_taken is not None and len(history) >= self._taken
                     and history[self._taken - 1] == self._last_taken)
        start = self._taken if continues else 0
        chunk = self._parse(history[start:])
        chunk.restarted = not continues and self._taken > 0
        self._taken = len(history)
        self._last_taken = history[-1] if history else None
        return chunk

    @staticmethod
    def _parse(entries: list) -> CurveChunk:
        columns = _Columns()
        token_steps, token_values, skipped = [], [], 0
        last_epoch_step = None
        for entry in entries:
            step = entry.get("step") if isinstance(entry, dict) else None
            if not _number(step):
                skipped += 1
                continue
            step = int(step)
            for name, value in entry.items():
                if name == "step" or not _number(value):
                    continue
                if name == "epoch":  # every entry says it: one point a step
                    if last_epoch_step == step:
                        continue
                    last_epoch_step = step
                columns.add(name, step, value)
            if _number(entry.get(TRAINER_TOKENS)):
                token_steps.append(step)
                token_values.append(entry[TRAINER_TOKENS])
        return CurveChunk(points=columns.points(), skipped=skipped,
                          tokens=Points(np.asarray(token_steps, np.int64), np.asarray(token_values, np.float64))
                          if token_steps else None)


# ---- TensorBoard: tfevents files ------------------------------------------------------------------------------------
TENSORBOARD_TOKEN_TAGS = ("num_input_tokens_seen", "train/num_input_tokens_seen")


class TensorBoardReader(CurveReader):
    """A TensorBoard log folder: every tfevents file directly in it (a run's files, in name order; new ones are
    found as they appear), each tailed a whole record at a time.

    A writer that starts a session at step S (torch's SummaryWriter(purge_step=S): a resumed run) makes what was
    written before at step S or later out of date: it is dropped, as TensorBoard's EventAccumulator drops it (for
    every tag). When points already returned are among them, the poll starts again (`restarted`) without them."""

    kind = TENSORBOARD

    def __init__(self, folder: Path):
        super().__init__(folder)
        self._files: dict[Path, AppendedBytes] = {}
        self._kinds = TagKinds()
        self._returned_up_to: int | None = None  # the highest step of the points earlier polls returned
        self._purged_returned = False  # a session start in this poll dropped some of them

    def poll(self) -> CurveChunk:
        for path in _tfevents_files(self.folder):
            if path not in self._files:
                self._files[path] = AppendedBytes(path, "the TensorBoard event file")
        restarted = False
        parts: dict[str, list[Points]] = {}
        self._purged_returned = False
        for path, appended in self._files.items():
            data, file_restarted = appended.read()
            if file_restarted:  # rewritten: read every file again, from its start
                restarted = True
                break
            if data:
                self._scalars(path, appended, data, parts)
        if restarted or self._purged_returned:
            self._files, self._kinds, self._returned_up_to = {}, TagKinds(), None
            chunk = self.poll()
            chunk.restarted = True
            return chunk
        points = {name: Points(np.concatenate([piece.steps for piece in pieces]),
                               np.concatenate([piece.values for piece in pieces]),
                               np.concatenate([piece.wall_times for piece in pieces]))
                  for name, pieces in parts.items()}
        points = {name: curve for name, curve in points.items() if len(curve.steps)}
        highest = [int(curve.steps.max()) for curve in points.values()]
        if highest:
            self._returned_up_to = max([*highest, self._returned_up_to or highest[0]])
        tokens = next((points[tag] for tag in TENSORBOARD_TOKEN_TAGS if tag in points), None)
        return CurveChunk(points=points, tokens=Points(tokens.steps, tokens.values) if tokens else None)

    def _scalars(self, path: Path, appended: AppendedBytes, data: bytes, parts: dict[str, list[Points]]) -> None:
        base = appended.offset - len(data)
        label = f"the TensorBoard event file {path}"
        try:
            records = parse_records(data, file_label=label, base_offset=base)
        except TfeventsError as error:
            raise CurveReadError(str(error)) from None
        appended.give_back(len(data) - records.consumed)
        steps: dict[str, list[int]] = {}
        values: dict[str, list[float]] = {}
        walls: dict[str, list[float]] = {}
        holding = []
        kinds = self._kinds
        for index, (start, length) in enumerate(zip(records.starts.tolist(), records.lengths.tolist(), strict=True)):
            try:
                event = decode_event(data, start, start + length, kinds)
            except (_NotAnEvent, IndexError, struct.error):
                verify_data(data, records, np.asarray([index]), file_label=label, base_offset=base)
                raise CurveReadError(f"{label} is damaged: the record at byte {base + start - 12:,} is not a "
                                     "TensorBoard event") from None
            if event is None:
                continue
            holding.append(index)
            if event.session_start:
                _gathered(steps, values, walls, parts)
                steps, values, walls = {}, {}, {}
                self._purge(parts, event.step)
            for tag, value in event.values:
                if tag not in steps:
                    steps[tag], values[tag], walls[tag] = [], [], []
                steps[tag].append(event.step)
                values[tag].append(value)
                walls[tag].append(event.wall_time)
        try:
            verify_data(data, records, np.asarray(holding, dtype=np.int64), file_label=label, base_offset=base)
        except TfeventsError as error:
            raise CurveReadError(str(error)) from None
        _gathered(steps, values, walls, parts)

    def _purge(self, parts: dict[str, list[Points]], step: int) -> None:
        """Drop the points at `step` or later: those gathered in this poll, and note whether earlier polls
        returned some."""
        for pieces in parts.values():
            for index, piece in enumerate(pieces):
                kept = piece.steps < step
                if not kept.all():
                    pieces[index] = Points(piece.steps[kept], piece.values[kept], piece.wall_times[kept])
        if self._returned_up_to is not None and self._returned_up_to >= step:
            self._purged_returned = True


def _gathered(steps: dict[str, list[int]], values: dict[str, list[float]], walls: dict[str, list[float]],
              parts: dict[str, list[Points]]) -> None:
    """Points gathered as lists, added to `parts` as arrays."""
    for tag, tag_steps in steps.items():
        parts.setdefault(tag, []).append(Points(np.asarray(tag_steps, np.int64), np.asarray(values[tag], np.float64),
                                                np.asarray(walls[tag], np.float64)))


# ---- the front door -------------------------------------------------------------------------------------------------
def open_run(path: str | os.PathLike) -> CurveReader:
    """A reader following the run in `path` (a run folder of any kind above, or its metrics.jsonl,
    trainer_state.json or one tfevents file's folder); CurveReadError saying what is there when it is not a run."""
    folder = Path(path)
    if folder.is_file() or (not folder.exists() and folder.name in (METRICS_FILE, TRAINER_STATE_FILE)):
        folder = folder.parent
    if not folder.exists():
        raise CurveReadError(f"{folder} does not exist")
    if not folder.is_dir():
        raise CurveReadError(f"{folder} is not a folder or a run's file")
    kind = run_kind(folder)
    if kind in (BERT_TRAIN, BERT_FINETUNE):
        return MetricsFileReader(folder, kind)
    if kind == TRAINER:
        return TrainerStateReader(folder)
    if kind == TENSORBOARD:
        return TensorBoardReader(folder)
    inside = find_runs(folder, max_depth=3, max_folders=2000)
    if inside:
        raise CurveReadError(f"{folder} is not a run itself but holds {len(inside)} run(s) in its subfolders, such as "
                             f"{inside[0][0]}; read each of those")
    raise CurveReadError(f"{folder} holds no run: no {METRICS_FILE} or {RUN_CONFIG_FILE} (bert-train, "
                         f"bert-finetune), no {TRAINER_STATE_FILE} (a Hugging Face Trainer's output folder, or its "
                         "checkpoint-N) and no tfevents file (TensorBoard)")


def read_curves(path: str | os.PathLike) -> RunCurves:
    """Every point of every metric of the run in `path`, as it is now: metric name -> `Curve` (.steps, .values,
    .wall_times). See the module docstring for what each kind of run gives; CurveReadError when `path` holds no
    run or a file of it is not what its name says."""
    return open_run(path).read_all()
