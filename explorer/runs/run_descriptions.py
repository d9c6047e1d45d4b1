"""A run in words, for the run tabs' status lines and captions: what a run folder's recorded configuration says
(`describe_config`, either kind of run), an evaluation, and a failure with what was kept (`describe_failure`). Plain
functions of plain data, without Qt. (How long is left is written by `explorer.common.message_text.format_duration`.)
"""

from __future__ import annotations

import errno
import math
import re
from pathlib import Path
from typing import Any

from explorer.common.failure import Failure
from explorer.runs.run_watch import is_finetuning_run


def describe_failure(failure: Failure, last_step: Any, last_checkpoint: Path | None) -> str:
    """A message a user understands for a failed run, saying what was kept.

    `last_step` is the last statistics record the run yielded (None: it failed before its first step).
    """
    kind, message = failure.kind, failure.message
    lowered = message.lower()
    kept = (f"The last good checkpoint is kept: {last_checkpoint}." if last_checkpoint
            else "No checkpoint had been written yet.")
    if failure.is_a("CorpusError"):
        return f"The corpus cannot be used: {message}"
    if failure.is_a("NonFiniteLossError") or failure.is_a("DivergenceError"):
        return f"The run diverged: {message}"  # the engine's message names the step, the checkpoint and the fix
    if failure.is_a("OutOfMemoryTrainingError"):  # the engine's message suggests the smaller sizes
        return f"Out of memory: {message}. {kept}"
    if kind in ("OutOfMemoryError", "MemoryError") or "out of memory" in lowered:
        return f"Out of memory: {message}. Try a smaller batch size or sequence length, or the CPU. {kept}"
    if failure.errno == errno.ENOSPC or "no space left" in lowered:
        return (f"The disk is full: {message}. Free some space (or pick a run folder on another disk) and "
                f"start again. {kept}")
    if last_step is not None and failure.is_a("OSError"):  # a checkpoint or metrics write failed
        return f"The run could not write to its folder: {message}. {kept}"
    if failure.is_a("TrainingError"):  # the engine stopped the run; its message says why and what to change
        return f"The run stopped: {message}" + ("" if "checkpoint" in lowered else f". {kept}")
    if kind == "FloatingPointError" or re.search(r"\b(nan|inf)\b|diverg", lowered):
        return f"The run diverged: {message}. Try a lower learning rate. {kept}"
    if last_step is None:
        return f"The run could not start: {message}"
    return f"The run failed after step {last_step.step} ({kind}): {message}. {kept}"


def planned_steps(config: dict) -> int | None:
    """The total steps a watched run's `config.json` (as `run_watch.read_run_config` reads it) plans, if it says."""
    training = config.get("training") if isinstance(config.get("training"), dict) else config
    for key in ("steps", "total_steps", "max_steps", "num_steps"):
        if isinstance(training.get(key), int):
            return training[key]
    return None


def describe_run_config(config: dict) -> str:
    """A watched run's configuration in one line ("tiny preset L2/H64, 300 steps of 16 × 64, lr 0.001, cpu")."""
    training, model = config.get("training"), config.get("model")
    if not isinstance(training, dict):
        return ""
    parts = [f"{training.get('preset', '?')} preset" if not training.get("init_from") else "further training"]
    if isinstance(model, dict) and "num_hidden_layers" in model:
        parts[0] += f" L{model['num_hidden_layers']}/H{model.get('hidden_size')}"
    objective = config.get("objective")  # absent before there were objectives: BERT's mlm+nsp
    if isinstance(objective, str) and objective != "mlm+nsp":
        family = model.get("model_type") if isinstance(model, dict) else None
        parts.append(f"{objective} on {family}" if isinstance(family, str) else objective)
    # absent before there were recipes: BERT's token masking of 15 %, said as before by saying nothing
    masking, probability = training.get("masking", "token"), training.get("mlm_probability", 0.15)
    if masking != "token" or probability != 0.15:
        share = f"{probability:.0%}" if isinstance(probability, int | float) else repr(probability)
        parts.append(f"{masking} masking" + ("" if probability == 0.15 else f" of {share}"))
    parts.append(f"{training.get('steps')} steps of {training.get('batch_size')} × {training.get('seq_len')}")
    parts.append(f"lr {training.get('lr')}")
    if config.get("device"):
        parts.append(str(config["device"]))
    return ", ".join(parts)


def describe_finetune_config(config: dict) -> str:
    """A fine-tuning run's configuration in one line ("mood demo (sequence) from default-model, 300 steps of
    32 × 64, lr 0.0002, cpu")."""
    training = config.get("training")
    if not isinstance(training, dict):
        return ""
    what = f"{training['demo']} demo" if training.get("demo") else f"{Path(str(training.get('train'))).name}"
    start = run_start(config)
    parts = [f"{what} ({training.get('task')})" + (f" from {start.name}" if start else ""),
             f"{training.get('steps')} steps of {training.get('batch_size')} × {training.get('seq_len')}",
             f"lr {training.get('lr')}"]
    if config.get("device"):
        parts.append(str(config["device"]))
    return ", ".join(parts)


def describe_evaluation(evaluation: Any) -> str:
    """A `TaskEvalStats` in words: "Held-out at step 200 (1,200 examples): accuracy 0.763 · macro_f1 0.751 ·
    loss 0.612", the main metric first."""
    metrics = dict(evaluation.metrics)
    order = sorted(metrics, key=lambda name: name != evaluation.main_metric)
    numbers = [f"{name} {metrics[name]:.3f}" for name in order if math.isfinite(metrics[name])]
    if math.isfinite(evaluation.loss):
        numbers.append(f"loss {evaluation.loss:.3f}")
    examples = f" ({evaluation.num_examples:,} examples)" if evaluation.num_examples else ""
    return f"Held-out at step {evaluation.step:,}{examples}: " + " · ".join(numbers)


def run_start(config: dict) -> Path | None:
    """The checkpoint a fine-tuning run started from (run_config.json's "init"), or None when it does not say."""
    init = config.get("init")
    if isinstance(init, dict) and isinstance(init.get("from"), str):
        return Path(init["from"])
    training = config.get("training")
    if isinstance(training, dict) and isinstance(training.get("init_from"), str):
        return Path(training["init_from"])
    return None


def describe_config(config: dict) -> str:
    """A watched run's configuration in one line, for either kind of run."""
    if is_finetuning_run(config):
        return describe_finetune_config(config)
    return describe_run_config(config)
