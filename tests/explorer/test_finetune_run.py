"""The Fine-tune tab's plain logic, without Qt: its settings' checks, what they make of a run, an evaluation."""

import math

import pytest

from bertcore.training.finetuning import TaskEvalStats
from explorer.finetune.finetune_run import FinetuneSettings, finetune_problems
from explorer.runs.run_descriptions import describe_evaluation


def test_checkpoint_and_evaluation_intervals_are_checked_as_typed():
    assert "checkpoint_every" in finetune_problems(checkpoint_every=-1)
    assert "eval_every" in finetune_problems(eval_every=-5)
    assert not finetune_problems(checkpoint_every=0, eval_every=None)
    with pytest.raises(ValueError, match="checkpoint_every must be an integer >= 0"):
        FinetuneSettings(checkpoint_every=-1)
    with pytest.raises(ValueError, match="eval_every must be an integer >= 0"):
        FinetuneSettings(eval_every=-1)


def test_the_settings_say_what_finetune_config_says_and_the_app_adds_only_its_own_limits():
    from bertcore.training.settings import FinetuneConfig

    cases = [(dict(learning_rate=0.0), "learning_rate", dict(lr=0.0)), (dict(seq_len=4), "seq_len", dict(seq_len=4)),
             (dict(steps=10, warmup_steps=11), "warmup_steps", dict(steps=10, warmup_steps=11))]
    for given, field, config_values in cases:
        with pytest.raises(ValueError) as refused:
            FinetuneConfig(demo="mood", **config_values)
        assert finetune_problems(**given) == {field: str(refused.value)}
    assert finetune_problems(batch_size=5000) == {"batch_size": "batch_size is 5,000; it can be at most 4,096"}


def test_eval_every_reaches_the_engines_config():
    config = FinetuneSettings(eval_every=25, checkpoint_every=50, out_dir="runs/x").to_config(None)
    assert (config.eval_every, config.checkpoint_every) == (25, 50)
    assert FinetuneSettings(out_dir="runs/x").to_config(None).eval_every is None  # once an epoch


def test_an_evaluation_in_words_names_the_main_metric_first():
    evaluation = TaskEvalStats(step=1200, loss=0.6123, metrics={"macro_f1": 0.7512, "accuracy": 0.7634},
                               main_metric="accuracy", num_examples=1500)
    assert describe_evaluation(evaluation) == ("Held-out at step 1,200 (1,500 examples): accuracy 0.763 · "
                                               "macro_f1 0.751 · loss 0.612")
    squad = TaskEvalStats(step=5, loss=math.nan, metrics={"exact_match": 0.25, "f1": math.nan}, main_metric="f1",
                          num_examples=0)
    assert describe_evaluation(squad) == "Held-out at step 5: exact_match 0.250"


def test_an_epoch_count_out_of_range_is_said_as_typed():
    assert finetune_problems(steps=None, epochs=0.0)["epochs"] == "epochs must be above 0, got 0.0; or give steps"
    assert finetune_problems(steps=None, epochs="x")["epochs"].startswith("epochs must be a finite number")
    assert not finetune_problems(steps=100, epochs=0.0)  # a run given in steps ignores its epochs
