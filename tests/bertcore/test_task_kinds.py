"""The fine-tuning task kinds have one home (bertcore.tasks.kinds); every list of them agrees with it."""

import pytest

from bertcore.cli.finetune import build_parser
from bertcore.tasks.demos.registry import demo_tasks
from bertcore.tasks.finetune_data import load_finetuning_data
from bertcore.tasks.kinds import TASK_KINDS
from bertcore.tasks.outputs import QuestionAnsweringTaskOutput, SequenceTaskOutput, TokenTaskOutput
from bertcore.tasks.qa import QuestionAnsweringData
from bertcore.tasks.sequence import SequenceClassificationData
from bertcore.tasks.token import TokenClassificationData
from bertcore.training.finetuning import TASK_MODELS
from bertcore.training.settings import TASK_OPTIONS, FinetuneConfig


def test_the_kinds_are_what_users_type():
    assert TASK_KINDS == ("sequence", "token", "qa")
    task_action = next(action for action in build_parser()._actions if action.dest == "task")
    assert tuple(task_action.choices) == TASK_KINDS


def test_every_table_of_tasks_covers_exactly_the_kinds():
    assert tuple(TASK_MODELS) == TASK_KINDS and tuple(TASK_OPTIONS) == TASK_KINDS
    data_classes = (SequenceClassificationData, TokenClassificationData, QuestionAnsweringData)
    assert tuple(data.task for data in data_classes) == TASK_KINDS
    outputs = (SequenceTaskOutput, TokenTaskOutput, QuestionAnsweringTaskOutput)
    assert tuple(output.kind for output in outputs) == TASK_KINDS
    assert {demo.task for demo in demo_tasks()} == set(TASK_KINDS)


def test_another_kind_is_refused_naming_the_kinds(tmp_path):
    with pytest.raises(ValueError, match="is not one of sequence, token, qa"):
        FinetuneConfig(task="span", train=str(tmp_path / "train.csv"))
    with pytest.raises(ValueError, match="is not one of"):
        load_finetuning_data("span", tmp_path / "train.csv", tokenizer=None)
