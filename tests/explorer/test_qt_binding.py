"""Guards against a Qt binding that corrupts the interpreter.

PySide6-Essentials 6.12.0 on Python < 3.12 drops one reference to None on every Qt call that returns
void; after a few thousand calls (seconds of hovering over a heatmap) Python aborts. pyproject excludes
that release; this test fails loudly if such a build is installed anyway.
"""

import sys

from PySide6.QtCore import QObject


def test_void_qt_calls_keep_none_alive():
    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(200):
        probe.setObjectName("probe")
    assert sys.getrefcount(None) >= before - 20, "this PySide6 build leaks references to None; install another"
