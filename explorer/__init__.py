"""bert-explorer: the desktop app that shows the inside of BERT.

Each feature is a folder (`inspector`, `head_lab`, `embeddings`, `what_changed`, `train`, `finetune`, with `runs`,
`window` and `common` beside them): its state is plain Python (tested headless), and everything that imports Qt or
pyqtgraph lives in its `_qt` subfolder (and `explorer.app`).
"""

from bertcore import __version__  # noqa: F401  (one version for the project: bertcore's)

APP_NAME = "bert-explorer"  # the Qt organisation and application name: settings and data folders
