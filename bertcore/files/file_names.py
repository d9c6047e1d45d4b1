"""The names of the files bertcore reads and writes, in one place: a training run's folder and the standard BERT
checkpoint folder (config.json, model.safetensors, vocab.txt, ...). Torch-free, so finding a checkpoint needs no torch.

    <run>/run_config.json          {"training": TrainingConfig or FinetuneConfig fields (a fine-tuning run's
                                   have "task"), "model": BertConfig fields, "world_size", ...; fine-tuning adds
                                   "task" (the data's summary) and "init" (what the model started from)}
    <run>/vocab.txt, tokenizer_config.json   the vocabulary in use
    <run>/metrics.jsonl            one JSON object per line ("kind": "step" | "eval" | "checkpoint" | "warning" |
                                   "error"), flushed per line; a resumed run drops the records after its step
    <run>/checkpoints/step-000500/ the standard BERT folder (config.json, model.safetensors, vocab.txt,
                                   tokenizer_config.json) + trainer_state.pt (optimizer, step, ...) + sanity.json
                                   ({"step", "sane", "smoothed_loss", "reason"}: whether the loss was sane when it
                                   was written; set to false with the reason when its weights later proved bad)
    <run>/checkpoints/latest       text naming the newest complete checkpoint ("step-000500")
    <run>/final/                   the final weights in the standard layout, when the run reached its last step
                                   (a QA fine-tuning run adds predictions.json: question id -> answer text)
    <run>/summary.json             last step, held-out metrics, last checkpoint, ...; written at the end
    <run>/run.lock                 held (flock: run_folder.RunLock) by the process training in the folder; its pid
"""

from __future__ import annotations

import re

RUN_CONFIG_FILE = "run_config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
LOCK_FILE = "run.lock"
CHECKPOINTS_DIR = "checkpoints"
LATEST_POINTER = "latest"
FINAL_DIR = "final"
CHECKPOINT_PREFIX = "step-"
TRAINER_STATE_FILE = "trainer_state.pt"
SANITY_FILE = "sanity.json"  # in a checkpoint: whether the loss was sane (torch-free, unlike trainer_state.pt)
# The standard BERT checkpoint folder (bertcore.models.checkpoint writes it).
CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PYTORCH_FILE = "pytorch_model.bin"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_JSON_FILE = "tokenizer.json"  # what transformers 5 saves instead of vocab.txt (read, never written)

_STEP_NAME = re.compile(rf"{CHECKPOINT_PREFIX}(\d+)")


def checkpoint_name(step: int) -> str:
    """'step-000500'."""
    return f"{CHECKPOINT_PREFIX}{step:06d}"


def checkpoint_step(name: str) -> int | None:
    """500 for 'step-000500'; None for any other name."""
    match = _STEP_NAME.fullmatch(name)
    return int(match.group(1)) if match else None
