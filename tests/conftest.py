import os

# Tests run headless (CI has no display): Qt must render offscreen before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
