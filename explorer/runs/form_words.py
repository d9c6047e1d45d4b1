"""A run form's messages in its own words: bertcore checks a config and says what is wrong in the config's names
(for the command line); a form names each field by its label and gives advice that suits the model chosen."""

from __future__ import annotations

import re

CONFIG_NAMES = {"learning_rate": "lr"}  # a form's field -> the config's name for it, where they differ


def in_form_words(problems: dict[str, str], labels: dict[str, str], *, names: dict[str, str] = CONFIG_NAMES,
                  advice: dict[str, str] | None = None) -> dict[str, str]:
    """The checks' messages as a form says them (bertcore's stay as they are for the command line): each field by
    its label ("Learning rate", not "lr"; `names` maps a field to the config's name for it), a value that is no
    number without Python's type names, and the `advice` given for a field (what suits the model chosen) in place
    of the config's own parenthesised hint, which may name another model."""
    advice = advice or {}
    worded = {}
    for field, message in problems.items():
        label = labels.get(field)
        for name in (names.get(field), field, field.replace("_", " ")):
            if label and name and message.startswith(f"{name} "):
                message = label + message[len(name):]
                break
        message = re.sub(r"must be a finite number \(float\), got (.+) \(\w+\)$", r"must be a number, got \1",
                         message)
        message = re.sub(r"must be in \((\S+), (\S+)\)", r"must be above \1 and below \2", message)
        if field in advice:  # an empty advice drops the config's hint alone
            message = "; ".join(filter(None, (re.sub(r" [(][^()]*[)]$", "", message), advice[field])))
        worded[field] = message
    return worded
