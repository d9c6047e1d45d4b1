"""The label a loss skips has one home, bertcore.models.parts.IGNORE_INDEX (with what every family shares): a second
definition or a bare -100 could drift from it, and a label the loss then scores would silently train on padding or on
unmasked tokens."""

import ast
from pathlib import Path

import pytest

import bertcore
from bertcore.models.parts import IGNORE_INDEX

PACKAGE = Path(bertcore.__file__).parent


@pytest.mark.slow
def test_only_parts_py_defines_the_ignored_label_and_no_code_writes_minus_100():
    homes, literals = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "IGNORE_INDEX" for t in node.targets):
                homes.append((name, node.lineno))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                    and isinstance(node.operand, ast.Constant) and node.operand.value == -IGNORE_INDEX:
                literals.append((name, node.lineno))
    assert [name for name, _ in homes] == ["models/parts.py"]
    stray = [f"{name}:{line}" for name, line in literals if (name, line) not in homes]
    assert stray == [], f"use bertcore.models.parts.IGNORE_INDEX instead of -100 at {stray}"
