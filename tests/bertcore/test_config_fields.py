"""A config's own checks, field by field (bertcore.training.settings), for forms that show them as typed."""

from bertcore.training.settings import FinetuneConfig, TrainingConfig, config_field_problems


def refusal(config_class, **values) -> str:
    try:
        config_class(**values)
    except ValueError as error:
        return str(error)
    raise AssertionError(f"{config_class.__name__} took {values}")


def test_each_field_gets_the_configs_own_message_for_its_value():
    problems = config_field_problems(TrainingConfig, {"steps": 0, "rate": -1.0, "seed": 3, "seq_len": 4},
                                     names={"rate": "lr"})
    assert problems == {"steps": refusal(TrainingConfig, steps=0), "rate": refusal(TrainingConfig, lr=-1.0),
                        "seq_len": refusal(TrainingConfig, seq_len=4)}
    assert list(problems) == ["steps", "rate", "seq_len"]  # in the order given
    assert config_field_problems(TrainingConfig, {"steps": 5, "seed": 3}) == {}


def test_a_refusal_only_the_combination_earns_goes_to_the_field_it_names_first():
    values = {"steps": 10, "warmup_steps": 11}
    assert config_field_problems(FinetuneConfig, values, context={"demo": "mood"}) == {
        "warmup_steps": refusal(FinetuneConfig, demo="mood", **values)}
    assert config_field_problems(FinetuneConfig, {"steps": 10}, context={"demo": "mood"}) == {}


def test_the_context_is_what_the_config_needs_to_be_whole():
    assert "needs a task and a training file" in config_field_problems(FinetuneConfig, {"steps": 10})["steps"]
