"""bert-explorer: the desktop app that shows the inside of BERT.

`explorer.state` and `explorer.startup` are plain Python (tested headless); everything that imports Qt or
pyqtgraph lives in `explorer._qt` and `explorer.app`.
"""

from bertcore import __version__  # noqa: F401  (one version for the project: bertcore's)

APP_NAME = "bert-explorer"  # the Qt organisation and application name: settings and data folders
