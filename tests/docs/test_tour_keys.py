"""The keys the documentation names are the keys the window has: every bold key of the README's one-minute tour and
of the tab guides is a row of the shortcut table (explorer/common/_qt/shortcuts.py), a key a widget has, or a
Ctrl+N of the window's tabs — and "the X tab (Ctrl+N)" names the tab that Ctrl+N shows, in the window the app builds
(the Train and Fine-tune tabs included)."""

from __future__ import annotations

import re

import pytest

from tests.docs.doc_blocks import REPO, doc_pages
from tests.explorer.conftest import open_window

KEY = re.compile(r"\*\*((?:Ctrl|Alt|Shift|F\d|PgUp|PgDown|←)[^*]*)\*\*")
TAB_KEY = re.compile(r"[Tt]he (?P<title>[A-Z][\w-]*(?: [a-z][\w-]*)?) tab \(\*\*(?P<key>Ctrl\+\d)\*\*\)")
PAGE_TAB_KEY = re.compile(r"\*\*(?P<key>Ctrl\+\d)\*\* shows the tab")


def named_keys(text: str) -> set[str]:
    """"**PgUp / PgDown**" -> {"PgUp", "PgDown"}; "**Ctrl+1** … **Ctrl+9**" -> {"Ctrl+1", "Ctrl+9"}."""
    keys = set()
    for match in KEY.finditer(text):
        keys.update(part.strip() for part in match[1].split(" / "))
    return keys


def tour() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("## A one-minute tour")
    end = readme.index("\n## ", start + 1)
    return readme[start:end]


def window_tab_titles(qtbot, settings) -> dict[str, str]:
    """Ctrl+N -> the title of the tab it shows, in a window with every tab the app adds."""
    from explorer.app import _add_training_tab

    window = open_window(qtbot, settings)
    _add_training_tab(window)
    return {f"Ctrl+{index + 1}": window.tabs.tabText(index).replace("&", "") for index in range(window.tabs.count())}


def window_keys() -> set[str]:
    from explorer.common._qt.shortcuts import SHORTCUTS, WIDGET_KEYS

    keys = {shortcut.keys for shortcut in SHORTCUTS}
    for keys_text, _, _ in WIDGET_KEYS:
        keys.update(part.strip() for part in keys_text.split(" / "))
    return keys


def test_the_tour_names_five_things_with_a_key_each():
    items = re.findall(r"^\d\. \*\*(.+?)\*\* — (.+?)(?=^\d\. |\Z)", tour(), flags=re.MULTILINE | re.DOTALL)
    assert len(items) == 5, [title for title, _ in items]
    for title, text in items:
        assert named_keys(text), f"the tour's {title!r} names no key"


@pytest.mark.slow
def test_every_key_the_docs_name_is_one_the_window_has_and_shows_what_they_say(qtbot, settings):
    tab_titles = window_tab_titles(qtbot, settings)
    known = window_keys() | set(tab_titles)
    for page in [page for page in doc_pages() if page.name == "README.md" or "tabs" in page.parts]:
        unknown = named_keys(page.read_text(encoding="utf-8")) - known
        assert not unknown, f"{page.relative_to(REPO)} names keys the window does not have: {sorted(unknown)}"
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        for match in TAB_KEY.finditer(text):
            assert tab_titles.get(match["key"]) == match["title"], (
                f"{page.relative_to(REPO)}: {match['key']} shows {tab_titles.get(match['key'])!r}, not the "
                f"{match['title']} tab")
        title = re.match(r"# The (.+) tab\n", text)
        for match in PAGE_TAB_KEY.finditer(text):
            assert title and tab_titles.get(match["key"]) == title[1], (
                f"{page.relative_to(REPO)}: {match['key']} shows {tab_titles.get(match['key'])!r}, not this page's tab")
