"""How a config says that a value is wrong: the checks every config's fields share, with messages that
name the field, the value and what is allowed. Torch-free."""

from __future__ import annotations

import math
from typing import Any


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")


def check_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number (float), got {value!r} ({type(value).__name__})")


def check_at_most(name: str, value: float, maximum: float, why: str) -> None:
    if value > maximum:
        raise ValueError(f"{name} is {shown_number(value)}; it must be at most {maximum:,g} ({why})")


def shown_number(value: float) -> str:
    """A number for a message, even an int too long to print or to make a float of."""
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"about 10^{int(value.bit_length() * math.log10(2))}"
    return f"{value:g}" if isinstance(value, float) else str(value)
