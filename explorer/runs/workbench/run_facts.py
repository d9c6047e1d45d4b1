"""What the Runs tab says about a run beside its curves, read from its folder: whether it is still going, what it
trains, its size, its steps, its settings and its checkpoints. Plain functions of the file system, Qt-free; they
run in the follower's thread (explorer.runs.workbench.follower), never on the GUI thread.

A bert-train / bert-finetune run is running while its run.lock is held by a live process (the trainer deletes the
lock when it lets go) or its metrics grew in the last RECENT_S seconds; finished when summary.json says it reached
its planned steps; stopped when it ended before them; failed when its metrics hold an error record. A Trainer run is
finished when its state reached max_steps. Neither a Trainer folder nor a TensorBoard log says more: a run that wrote
in the last RECENT_S seconds is running, else it ended.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertcore.files.file_names import (
    CONFIG_FILE,
    FINAL_DIR,
    LOCK_FILE,
    METRICS_FILE,
    PYTORCH_FILE,
    RUN_CONFIG_FILE,
    SAFETENSORS_FILE,
    SUMMARY_FILE,
)
from bertcore.files.reading import RUN_JSON_LIMIT, open_regular_file, read_json
from explorer.runs.curve_files import (
    BERT_FINETUNE,
    BERT_TRAIN,
    TENSORBOARD,
    TRAINER,
    _tfevents_files,
    trainer_state_file,
)

RECENT_S = 120.0
RUNNING, FINISHED, STOPPED, FAILED, ENDED = "running", "finished", "stopped", "failed", "ended"
TAB_OF_KIND = {BERT_TRAIN: "Train", BERT_FINETUNE: "Fine-tune"}
KIND_WORDS = {BERT_TRAIN: "bert-train", BERT_FINETUNE: "bert-finetune", TRAINER: "HF Trainer",
              TENSORBOARD: "TensorBoard"}
_TRAINER_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_SAFETENSORS_HEADER_LIMIT = 100 << 20


@dataclass(frozen=True)
class RunFacts:
    """A run's facts as plain values (they cross from the follower's thread to the GUI)."""

    status: str = ""  # RUNNING, FINISHED, STOPPED, FAILED, ENDED, or "" before anything is known
    status_note: str = ""  # why the status says so, or the failure's message
    objective: str = ""  # "mlm+nsp", "sequence (mood demo)", "BertForSequenceClassification"
    parameters: int | None = None  # the model's parameter count, where a checkpoint or summary says
    shape: str = ""  # "L2/H128" where the configuration says
    planned_steps: int | None = None
    started: float = 0.0  # seconds since the epoch: newest first
    config: dict[str, str] = field(default_factory=dict)  # setting -> value, as words
    checkpoints: tuple[tuple[str, str], ...] = ()  # (label, folder), oldest first, final weights last

    @property
    def size(self) -> str:
        """"1.53M · L2/H128" (parameters, layers and width), or what is known of it."""
        count = self.parameters or 0
        parts = [f"{count / 1e6:.3g}M" if count >= 1e6 else f"{count / 1e3:.3g}k" if count else "", self.shape]
        return " · ".join(part for part in parts if part)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _read_json(path: Path) -> Any:
    try:
        return read_json(path, limit=RUN_JSON_LIMIT)
    except (OSError, ValueError):
        return None


def flatten(values: Any, prefix: str = "", into: dict[str, str] | None = None) -> dict[str, str]:
    """A nested configuration as {"training.lr": "0.001", …}: scalars as JSON writes them, short lists inline; long
    mappings of labels (id2label) are left out."""
    into = {} if into is None else into
    if isinstance(values, dict):
        for key, value in values.items():
            if key in ("id2label", "label2id", "log_history", "stateful_callbacks") and prefix.count(".") < 2:
                continue
            flatten(value, f"{prefix}{key}.", into)
    elif isinstance(values, list) and all(not isinstance(item, (dict, list)) for item in values) and len(values) <= 8:
        into[prefix[:-1]] = json.dumps(values)
    elif isinstance(values, (str, int, float, bool)) or values is None:
        into[prefix[:-1]] = values if isinstance(values, str) else json.dumps(values)
    return into


def parameter_count(checkpoint: Path) -> int | None:
    """The parameters in a checkpoint folder's model.safetensors, from its header alone (no weights are read)."""
    path = checkpoint / SAFETENSORS_FILE
    try:
        with open_regular_file(path) as file:  # a FIFO in its place is refused, never waited on
            (length,) = struct.unpack("<Q", file.read(8))
            if length > _SAFETENSORS_HEADER_LIMIT:
                return None
            head = json.loads(file.read(length))
    except (OSError, ValueError, struct.error):
        return None
    if not isinstance(head, dict):
        return None
    total = 0
    for name, entry in head.items():
        if name != "__metadata__" and isinstance(entry, dict) and isinstance(entry.get("shape"), list):
            total += math.prod(int(size) for size in entry["shape"])
    return total or None


def _shape(model: Any) -> str:
    if isinstance(model, dict) and "num_hidden_layers" in model and "hidden_size" in model:
        return f"L{model['num_hidden_layers']}/H{model['hidden_size']}"
    return ""


def _is_checkpoint(folder: Path) -> bool:
    return (folder / CONFIG_FILE).is_file() and ((folder / SAFETENSORS_FILE).is_file()
                                                  or (folder / PYTORCH_FILE).is_file())


def _lock_held(folder: Path) -> bool:
    """Whether run.lock names a live process (the trainer deletes the file when it lets go; a killed one leaves it
    naming a dead pid)."""
    try:
        pid = int((folder / LOCK_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def bert_run_facts(folder: Path, kind: str, error: str | None, last_step: int | None) -> RunFacts:
    """A bert-train or bert-finetune run's facts; `error` is its error record's message, `last_step` the newest step
    its metrics show."""
    from bertcore.files.run_folder import list_checkpoints

    config = _read_json(folder / RUN_CONFIG_FILE)
    config = config if isinstance(config, dict) else {}
    training = config.get("training") if isinstance(config.get("training"), dict) else {}
    planned = training.get("steps") if isinstance(training.get("steps"), int) else None
    if kind == BERT_FINETUNE:
        task = training.get("task") or "fine-tuning"
        objective = f"{task} ({training['demo']} demo)" if training.get("demo") else str(task)
    else:
        objective = config.get("objective") or training.get("objective") or "mlm+nsp"
    summary = _read_json(folder / SUMMARY_FILE)
    summary = summary if isinstance(summary, dict) else {}
    checkpoints = [(f"step {step:,}" if step is not None else path.name, str(path))
                   for step, path in list_checkpoints(folder)]
    if _is_checkpoint(folder / FINAL_DIR):
        checkpoints.append(("final weights", str(folder / FINAL_DIR)))
    parameters = summary.get("num_parameters") if isinstance(summary.get("num_parameters"), int) else None
    if parameters is None and checkpoints:
        parameters = parameter_count(Path(checkpoints[-1][1]))
    metrics_time = _mtime(folder / METRICS_FILE)
    recent = metrics_time is not None and time.time() - metrics_time < RECENT_S
    summary_step = summary.get("step") if isinstance(summary.get("step"), int) else None
    ended = summary_step is not None and (last_step is None or summary_step >= last_step)
    if error is not None:
        status, note = FAILED, error
    elif _lock_held(folder) or (recent and not ended):
        status, note = RUNNING, "its trainer holds run.lock" if _lock_held(folder) else "its metrics grew just now"
    elif ended and planned is not None and summary_step >= planned:
        status, note = FINISHED, f"all {planned:,} planned steps"
    elif ended:
        status, note = STOPPED, f"stopped at step {summary_step:,}" + (f" of {planned:,}" if planned else "")
    elif last_step is not None:
        status, note = STOPPED, "ended without a summary (killed, or its machine stopped); it can be resumed"
    else:
        status, note = "", "no step yet"
    started = _mtime(folder / RUN_CONFIG_FILE) or metrics_time or _mtime(folder) or 0.0
    flat = flatten({key: value for key, value in config.items() if key in ("training", "model", "objective",
                                                                            "device", "world_size", "init", "task")})
    return RunFacts(status, note, str(objective), parameters, _shape(config.get("model")), planned, started, flat,
                    tuple(checkpoints))


def trainer_facts(folder: Path, state: dict) -> RunFacts:
    """A Hugging Face Trainer output folder's facts; `state` is its newest trainer_state.json without log_history."""
    checkpoints = sorted((int(match.group(1)), path) for path in _children(folder)
                         if (match := _TRAINER_CHECKPOINT.fullmatch(path.name)) and _is_checkpoint(path))
    listed = [(f"step {step:,}", str(path)) for step, path in checkpoints]
    if _is_checkpoint(folder):
        listed.append(("final weights", str(folder)))
    newest = Path(listed[-1][1]) if listed else None
    model = _read_json(newest / CONFIG_FILE) if newest is not None else None
    model = model if isinstance(model, dict) else {}
    architectures = model.get("architectures")
    objective = architectures[0] if isinstance(architectures, list) and architectures else model.get("model_type", "")
    planned = state.get("max_steps") if isinstance(state.get("max_steps"), int) and state.get("max_steps") else None
    step = state.get("global_step") if isinstance(state.get("global_step"), int) else None
    state_file = trainer_state_file(folder)
    written = _mtime(state_file) if state_file is not None else None
    if planned is not None and step is not None and step >= planned:
        status, note = FINISHED, f"all {planned:,} steps (max_steps)"
    elif written is not None and time.time() - written < RECENT_S:
        status, note = RUNNING, "it saved a checkpoint just now"
    elif step is not None:
        status, note = STOPPED, f"its newest state is at step {step:,}" + (f" of {planned:,}" if planned else "")
    else:
        status, note = "", ""
    started = min((_mtime(path) or math.inf for _, path in checkpoints), default=math.inf)
    started = started if math.isfinite(started) else (written or _mtime(folder) or 0.0)
    config = flatten({key: value for key, value in state.items() if not isinstance(value, (dict, list))})
    config.update(flatten(model, "model."))
    return RunFacts(status, note, str(objective), parameter_count(newest) if newest else None, _shape(model),
                    planned, started, config, tuple(listed))


def tensorboard_facts(folder: Path) -> RunFacts:
    files = _tfevents_files(folder)
    times = [time for time in (_mtime(path) for path in files) if time is not None]
    written = max(times, default=None)
    if written is not None and time.time() - written < RECENT_S:
        status, note = RUNNING, "its event file grew just now"
    else:
        minutes = (time.time() - written) / 60 if written else None
        status, note = ENDED, ("TensorBoard logs do not say whether a run finished; nothing was written for "
                               f"{minutes:,.0f} minutes" if minutes is not None else "")
    stamps = [int(match.group(1)) for path in files if (match := re.search(r"tfevents\.(\d{9,})", path.name))]
    started = float(min(stamps)) if stamps else (min(times, default=0.0))
    return RunFacts(status, note, "", None, "", None, started, {}, ())


def _children(folder: Path) -> list[Path]:
    try:
        return [path for path in folder.iterdir() if path.is_dir()]
    except OSError:
        return []


