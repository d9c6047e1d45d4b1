"""The family registry (bertcore.models.families.FAMILIES) is the one place a family is named: one entry more there,
and bert-train offers it, the Train tab offers it, and the Hugging Face cache listing lists its checkpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bertcore.cli import train
from bertcore.models.families import FAMILIES
from bertcore.models.hub_listing import list_cached_models
from bertcore.training.settings import TrainingConfig
from explorer.train._qt.training_form import TrainingForm
from tests.hub_fixtures import (
    cache_repo,
    hub_config,
    hub_env_fixture,  # noqa: F401 (a fixture: tests ask for it as `hub_env`)
    safetensors_bytes,
)


def arch_choices() -> tuple[str, ...]:
    return next(action for action in train.build_parser()._actions if action.dest == "arch").choices


def test_one_entry_in_the_registry_reaches_every_place_a_family_is_offered(qtbot, hub_env: Path, monkeypatch):
    cache_repo(hub_env, "org/fake", {"config.json": hub_config("fakebert", ["FakeBertForMaskedLM"]),
                                     "model.safetensors": safetensors_bytes({"w": ((4, 8), "F32")})})
    assert "fakebert" not in arch_choices() and list_cached_models() == []

    monkeypatch.setitem(FAMILIES, "fakebert", dataclasses.replace(FAMILIES["bert"], class_prefix="FakeBert"))

    assert arch_choices()[-1] == "fakebert"  # after the six, in the registry's order
    assert TrainingConfig(arch="fakebert").resolved_arch == "fakebert"
    form = TrainingForm()
    qtbot.addWidget(form)
    offered = [form.arch_combo.itemData(index) for index in range(form.arch_combo.count())]
    assert offered == [None, "bert", "roberta", "distilbert", "electra", "albert", "modernbert", "fakebert"]
    assert [model.repo_id for model in list_cached_models()] == ["org/fake"]
