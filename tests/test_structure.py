"""The intended structure (docs/structure.json: parts of the tree, the arrows between them, and what must never be)
holds in the code: no file of a part imports a file of a part it must never reach, at module level or inside a
function. A new file is covered as soon as it sits in a part's folder."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STRUCTURE = json.loads((REPO / "docs" / "structure.json").read_text(encoding="utf-8"))
PACKAGES = ("bertcore", "explorer")


def part_of(path: Path) -> str | None:
    """The part a file is on: the part whose path holds it most closely (a longer path wins, as a folder's
    subfolder named by another part belongs to that part)."""
    relative = path.relative_to(REPO).as_posix()
    best, best_length = None, -1
    for name, part in STRUCTURE["parts"].items():
        for entry in part["is"]:
            if (relative == entry or (entry.endswith("/") and relative.startswith(entry))) and len(entry) > best_length:
                best, best_length = name, len(entry)
    return best


def module_file(module: str) -> Path | None:
    """The file a dotted module name of this tree stands for (a package's __init__.py), or None."""
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache  # every rule reads the same files: each is parsed once
def imported_files(path: Path) -> frozenset[Path]:
    """Every file of this tree that `path` imports anywhere (module level, functions, `import a.b as c`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.split(".")[0] in PACKAGES:
                # the deepest module of the name that exists: `from bertcore.files import atomic` is that file
                parts = name.split(".")
                for end in range(len(parts), 0, -1):
                    target = module_file(".".join(parts[:end]))
                    if target is not None:
                        found.add(target)
                        break
    return frozenset(found)


def source_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_every_source_file_is_on_a_part():
    assert [path for path in source_files() if part_of(path) is None] == []


@pytest.mark.parametrize("never", STRUCTURE["never"], ids=lambda never: f"{never[0]}-x-{never[1]}")
def test_no_part_reaches_what_it_must_never_reach(never):
    source, target, why = never
    broken = [f"{path.relative_to(REPO)} imports {imported.relative_to(REPO)}"
              for path in source_files() if part_of(path) == source
              for imported in imported_files(path) if part_of(imported) == target]
    assert broken == [], f"{source} must never reach {target} ({why}): " + "; ".join(broken)


def test_bertcore_never_imports_explorer():
    """The whiteboard's nevers name the pairs that matter most; every file of bertcore is held to the whole rule."""
    reached = [f"{path.relative_to(REPO)} imports {imported.relative_to(REPO)}"
               for path in source_files() if path.relative_to(REPO).parts[0] == "bertcore"
               for imported in imported_files(path) if imported.relative_to(REPO).parts[0] == "explorer"]
    assert reached == []


def test_the_check_sees_a_broken_rule():
    """A self-test: the Qt views do import the plain state, so the rule read backwards must be found broken."""
    views = [path for path in source_files() if part_of(path) == "AppQt"]
    assert any(part_of(imported) == "AppPlain" for path in views for imported in imported_files(path))


def test_signals_are_held_back_only_through_blocked():
    """`explorer.common._qt.signal_blocker.blocked` restores a widget's signals even when a setter raises; a bare
    `blockSignals(True)` ... `blockSignals(False)` pair leaves them off for good."""
    bare = [f"{path.relative_to(REPO)}:{node.lineno}"
            for path in (REPO / "explorer").rglob("*.py") if path.name != "signal_blocker.py"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "blockSignals"]
    assert not bare, f"use `with blocked(widget):` instead of blockSignals at {', '.join(bare)}"
