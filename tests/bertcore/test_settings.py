"""bertcore.training.settings: every setting declared once, and the command lines generated from the declarations."""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass

import pytest

from bertcore.cli import finetune, train
from bertcore.cli.common import add_setting_options, given_settings
from bertcore.training.settings import FinetuneConfig, LoopSettings, TrainingConfig, setting

COMMANDS = {"bert-train": (train, TrainingConfig), "bert-finetune": (finetune, FinetuneConfig)}

# The options each command had before they were generated, by name: generating them may add none and lose none.
OPTIONS = {
    "bert-train": [
        "--corpus", "--text-field", "--data-cache", "--vocab-sample", "--vocab", "--vocab-size", "--seq-len",
        "--heldout-fraction", "--mlm-probability", "--masking", "--length-buckets", "--objective", "--arch",
        "--generator-width", "--discriminator-weight", "--preset", "--init-from", "--hidden-size", "--num-layers",
        "--num-heads", "--intermediate-size", "--steps", "--batch-size", "--lr", "--warmup-steps", "--weight-decay",
        "--max-grad-norm", "--seed", "--divergence-factor", "--out", "--resume", "--device", "--precision",
        "--eval-every", "--checkpoint-every", "--keep-checkpoints", "--num-threads", "--compile", "--no-progress",
        "--eval-batches", "--report-to", "--analysis-every", "--treebank"],
    "bert-finetune": [
        "--task", "--train", "--eval", "--demo", "--seq-len", "--heldout-fraction", "--length-buckets", "--format",
        "--text-column", "--text-b-column", "--label-column", "--problem-type", "--tokens-field", "--tags-field",
        "--max-query-length", "--doc-stride", "--max-answer-length", "--null-score-diff-threshold",
        "--allow-no-answer", "--init-from", "--steps", "--batch-size", "--lr", "--warmup-steps", "--weight-decay",
        "--max-grad-norm", "--seed", "--divergence-factor", "--epochs", "--out", "--resume", "--device",
        "--precision", "--eval-every", "--checkpoint-every", "--keep-checkpoints", "--num-threads", "--compile",
        "--no-progress", "--report-to"],
}


def names(config_class: type) -> set[str]:
    return {field.name for field in dataclasses.fields(config_class)}


def option_fields(config_class: type) -> list[dataclasses.Field]:
    return [field for field in dataclasses.fields(config_class) if field.metadata["option"] is not None]


def option_of(field: dataclasses.Field) -> str:
    return field.metadata["option"] or "--" + field.name.replace("_", "-")


def help_lines(parser: argparse.ArgumentParser, monkeypatch) -> dict[str, str]:
    """Each option's line of the rendered --help, at a width that wraps nothing: option -> its help text."""
    monkeypatch.setenv("COLUMNS", "2000")
    lines, option = {}, None
    for line in parser.format_help().splitlines():
        if match := re.match(r"\s+(--[\w-]+)(?: \S+)?(?:\s{2,}(.*))?$", line):
            option = match.group(1)
            lines[option] = match.group(2) or ""
        elif option is not None and line.strip() and not lines[option]:  # the help under a long option
            lines[option] = line.strip()
    return lines


def test_the_settings_every_run_shares_are_declared_once():
    assert issubclass(TrainingConfig, LoopSettings) and issubclass(FinetuneConfig, LoopSettings)
    shared = names(TrainingConfig) & names(FinetuneConfig)
    assert shared == names(LoopSettings) and len(shared) == 24
    # A shared field declared again is one whose fine-tuning default (or meaning) differs; its help stays one text.
    redeclared = {name for name in shared if FinetuneConfig.__dataclass_fields__[name].default
                  != LoopSettings.__dataclass_fields__[name].default}
    assert redeclared == {"out_dir", "steps", "lr", "adam_eps", "heldout_fraction", "eval_every"}
    assert set(TrainingConfig.__annotations__) & names(LoopSettings) == set()  # pretraining's are LoopSettings' own


@pytest.mark.parametrize("config_class", [TrainingConfig, FinetuneConfig])
def test_every_setting_has_its_help_and_its_place(config_class):
    for field in dataclasses.fields(config_class):
        assert field.metadata["help"].strip(), field.name
        assert field.metadata["group"] in ("data", "model", "optimisation", "run"), field.name


@pytest.mark.parametrize("command", OPTIONS)
def test_the_options_are_the_ones_there_were(command):
    module, _ = COMMANDS[command]
    assert sorted(action.option_strings[0] for action in module.build_parser()._actions
                  if action.option_strings and action.dest != "help") == sorted(OPTIONS[command])


@pytest.mark.parametrize("command", OPTIONS)
def test_help_shows_each_settings_default(command, monkeypatch):
    module, config_class = COMMANDS[command]
    lines = help_lines(module.build_parser(), monkeypatch)
    for field in option_fields(config_class):
        line = lines[option_of(field)]
        said = re.search(r"\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)$", line)
        if field.name == "out_dir":  # each command names a fresh, dated run folder itself
            assert "<date>-<time>" in said.group(1)
        elif field.metadata["shown"] is not None:
            assert said.group(1) == field.metadata["shown"], line
        elif field.default is None or field.default is False:
            assert said is None, line
        elif isinstance(field.default, str):
            assert said.group(1) == field.default, line
        else:
            assert float(said.group(1)) == field.default, line


@pytest.mark.parametrize("command", OPTIONS)
def test_each_option_has_its_settings_type_and_choices(command):
    module, config_class = COMMANDS[command]
    actions = {action.dest: action for action in module.build_parser()._actions}
    hints = {"int": int, "float": float, "str": None}
    for field in option_fields(config_class):
        action = actions[field.name]
        assert action.default is None  # left out: the config's default, or the resumed run's value
        if field.type == "bool":
            assert isinstance(action, argparse._StoreTrueAction)
            continue
        assert action.type is hints[field.type.replace(" | None", "")], field.name
        choices = field.metadata["choices"]
        assert action.choices == (choices() if callable(choices) else choices), field.name


def test_an_option_left_out_keeps_the_default_and_a_given_one_is_taken(tmp_path):
    args = train.build_parser().parse_args(["--steps", "7", "--lr", "0.01", "--compile", "--masking", "span",
                                            "--out", str(tmp_path / "run")])
    config = train.make_config(args)
    assert (config.steps, config.lr, config.compile, config.masking) == (7, 0.01, True, "span")
    assert config.out_dir == str(tmp_path / "run")
    untouched = {"steps", "lr", "compile", "masking", "out_dir"}
    assert {name: getattr(config, name) for name in names(TrainingConfig) - untouched} == {
        name: getattr(TrainingConfig(), name) for name in names(TrainingConfig) - untouched}


def test_a_new_field_with_its_help_is_a_new_option(monkeypatch):
    @dataclass(frozen=True)
    class WithAnalyses(TrainingConfig):
        analysis_every: int = setting(0, "measure the heads every N steps; 0 = never", group="run")

    parser = argparse.ArgumentParser()
    add_setting_options(parser, WithAnalyses, groups={"data": "data", "model": "model", "optimisation": "o",
                                                      "run": "run"})
    assert help_lines(parser, monkeypatch)["--analysis-every"] == "measure the heads every N steps; 0 = never " \
                                                                  "(default 0)"
    assert given_settings(parser.parse_args(["--analysis-every", "5"]), WithAnalyses) == {"analysis_every": 5}
    assert given_settings(parser.parse_args([]), WithAnalyses) == {}


def test_a_setting_that_cannot_be_typed_must_say_it_has_no_option():
    @dataclass(frozen=True)
    class WithPairs(TrainingConfig):
        betas_again: tuple[float, float] = setting((0.9, 0.99), "a pair", group="optimisation")

    with pytest.raises(TypeError, match="option=None"):
        add_setting_options(argparse.ArgumentParser(), WithPairs, groups={"data": "d", "model": "m",
                                                                            "optimisation": "o", "run": "r"})


def test_a_warm_up_longer_than_the_run_names_both_ways_out():
    for config_class in (TrainingConfig, FinetuneConfig):
        with pytest.raises(ValueError, match=r"warmup_steps is 400 but the run has 2 steps in all.*warmup_steps 2 or "
                                             r"fewer.*steps 400 or more"):
            config_class(steps=2, warmup_steps=400)
