"""Which tab and command line each kind of run belongs to (pretraining: the Train tab and bert-train; fine-tuning:
the Fine-tune tab and bert-finetune), and why a run folder is not for a given tab."""

from __future__ import annotations

import os
from pathlib import Path

from bertcore.files.run_folder import read_run_config
from explorer.runs.curve_layout import layout_for_run

TAB_OF_KIND = {"pretraining": "Train", "finetuning": "Fine-tune"}
COMMAND_OF_KIND = {"pretraining": "bert-train", "finetuning": "bert-finetune"}


def wrong_tab_reason(folder: str | os.PathLike, kind: str) -> str | None:
    """Why the run in `folder` is not for the tab of runs of `kind` ("pretraining", "finetuning"): it holds a run
    of the other kind, and the tab to open it in. None for a run of that kind, or for a folder without a readable
    run_config.json (yet), which may still be watched until one appears."""
    try:
        config = read_run_config(folder)
    except (ValueError, OSError):
        return None
    found = layout_for_run(config).kind
    if found == kind:
        return None
    return f"{Path(folder)} holds a {found} run ({COMMAND_OF_KIND[found]}); open it in the {TAB_OF_KIND[found]} tab"
