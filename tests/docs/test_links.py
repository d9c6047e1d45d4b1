"""The documentation's links: every relative link and picture of README.md, CONTRIBUTING.md and docs/ leads to a
file that exists (and, with a #fragment, to a heading of that page), and every page of docs/ is one click from the
README, so a newcomer finds any detail from the front door."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from tests.docs.doc_blocks import REPO, doc_pages

LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
README_LINE_LIMIT = 200


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    lines, inside = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            lines.append((number, line))
    return lines


def links(page: Path) -> list[tuple[int, str]]:
    return [(number, match["target"]) for number, line in prose_lines(page) for match in LINK.finditer(line)]


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (letters, digits, spaces, - and _ kept),
    spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(character for character in text
                   if character in " -_" or unicodedata.category(character)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, seen = set(), {}
    for _, line in prose_lines(page):
        if line.startswith("#"):
            anchor = heading_anchor(re.sub(r"[`*]", "", line.lstrip("#")))
            count = seen.get(anchor, 0)
            found.add(anchor if count == 0 else f"{anchor}-{count}")
            seen[anchor] = count + 1
    return found


def relative_links() -> list[tuple[Path, int, str]]:
    return [(page, number, target) for page in doc_pages() for number, target in links(page)
            if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize(("page", "line", "target"), relative_links(),
                         ids=lambda value: str(value.relative_to(REPO)) if isinstance(value, Path) else str(value))
def test_a_relative_link_leads_somewhere(page: Path, line: int, target: str):
    path_part, _, fragment = target.partition("#")
    destination = (page.parent / path_part).resolve() if path_part else page
    where = f"{page.relative_to(REPO)}:{line}"
    assert destination.exists(), f"{where}: {target} leads to {destination}, which does not exist"
    assert REPO in destination.parents or destination == REPO, f"{where}: {target} leads out of the repository"
    if fragment and destination.suffix == ".md":
        assert fragment in anchors(destination), (
            f"{where}: {destination.name} has no heading #{fragment}; its anchors: {sorted(anchors(destination))}")


def test_every_page_of_the_docs_is_one_click_from_the_readme():
    readme = REPO / "README.md"
    linked = {(readme.parent / target.partition("#")[0]).resolve() for _, target in links(readme)}
    pages = sorted((REPO / "docs").rglob("*.md"))
    assert pages, "docs/ has no pages"
    unlinked = [str(page.relative_to(REPO)) for page in pages if page.resolve() not in linked]
    assert not unlinked, f"README.md links none of {unlinked}: add each to its Documentation list"


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINE_LIMIT, (
        f"README.md has {len(lines)} lines; it is the front door (≤ {README_LINE_LIMIT}): move detail to docs/")


def test_the_anchor_rule():
    assert heading_anchor("Ctrl-C and SIGTERM") == "ctrl-c-and-sigterm"
    assert heading_anchor("The `bertcore` library") == "the-bertcore-library"
    assert heading_anchor("Corpora, prepared once") == "corpora-prepared-once"
    assert heading_anchor("Sittings (2026-11-23, load 0.5–1.5)") == "sittings-2026-11-23-load-0515"
