"""The kinds of fine-tuning task: the one list the configs, the data, the trainer, the demos and the app name.

Plain strings (torch-free), because they are what a user types (`--task qa`) and what run_config.json holds.
"""

from __future__ import annotations

SEQUENCE_TASK = "sequence"  # a label, labels or a score per text or text pair, read from [CLS]
TOKEN_TASK = "token"  # a tag per word (e.g. BIO named entities)
QA_TASK = "qa"  # an answer span in a passage, or none (SQuAD v1.1 / v2.0)
TASK_KINDS = (SEQUENCE_TASK, TOKEN_TASK, QA_TASK)
