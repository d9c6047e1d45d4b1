"""Which tab a run folder belongs in, decided headless from its run_config.json."""

from __future__ import annotations

import json

from explorer.runs.run_kinds import wrong_tab_reason


def write_run_config(folder, training):
    folder.mkdir()
    (folder / "run_config.json").write_text(json.dumps({"training": training}))
    return folder


def test_a_run_of_the_other_kind_names_the_tab_and_command_that_open_it(tmp_path):
    pretraining = write_run_config(tmp_path / "pretraining", {"steps": 10, "preset": "tiny"})
    finetuning = write_run_config(tmp_path / "finetuning", {"steps": 10, "task": "keywords.tsv"})
    assert wrong_tab_reason(pretraining, "finetuning") == (
        f"{pretraining} holds a pretraining run (bert-train); open it in the Train tab")
    assert wrong_tab_reason(finetuning, "pretraining") == (
        f"{finetuning} holds a finetuning run (bert-finetune); open it in the Fine-tune tab")
    assert wrong_tab_reason(pretraining, "pretraining") is None
    assert wrong_tab_reason(finetuning, "finetuning") is None


def test_a_folder_without_a_readable_run_config_may_still_be_watched(tmp_path):
    assert wrong_tab_reason(tmp_path, "pretraining") is None  # none yet: the run may not have started writing
    (tmp_path / "run_config.json").write_text("{not json")
    assert wrong_tab_reason(tmp_path, "finetuning") is None
