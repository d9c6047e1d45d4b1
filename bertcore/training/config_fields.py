"""A config's own checks, field by field: what a form shows next to each field as it is typed, so that the app
never checks a setting a second time, differently. Torch-free."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def config_field_problems(config_class: type, values: Mapping[str, Any], *, names: Mapping[str, str] | None = None,
                          context: Mapping[str, Any] | None = None) -> dict[str, str]:
    """{field: the ValueError message `config_class` gives} for the `values` it refuses, in their order.

    Each field is first checked alone (the config's other fields at `context` or their defaults), so its message
    is its own; when every field passes alone, they are checked together, and a refusal that only the combination
    earns (warmup_steps above steps) goes to the field the message starts with. `names` maps a field to the
    config's name for it where the two differ (the form's learning_rate is the config's lr)."""
    names = dict(names or {})
    context = dict(context or {})
    problems = {}
    for field, value in values.items():
        if (message := _refusal(config_class, {**context, names.get(field, field): value})) is not None:
            problems[field] = message
    if not problems and values:
        combined = {**context, **{names.get(field, field): value for field, value in values.items()}}
        if (message := _refusal(config_class, combined)) is not None:
            problems[_field_named_by(message, list(values), names)] = message
    return problems


def _refusal(config_class: type, values: dict[str, Any]) -> str | None:
    try:
        config_class(**values)
    except ValueError as error:
        return str(error)
    return None


def _field_named_by(message: str, fields: list[str], names: Mapping[str, str]) -> str:
    """The field the message is about: the one it starts with, else the first it names, else the first field."""
    for field in fields:
        if message.startswith(f"{names.get(field, field)} "):
            return field
    for field in fields:
        if re.search(rf"\b{re.escape(names.get(field, field))}\b", message):
            return field
    return fields[0]
