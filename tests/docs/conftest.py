# The window fixtures of tests/explorer (a QSettings of the test's own, every QSettings scope in a temporary folder),
# for the test that builds the window to check the keys the documentation names.
from tests.explorer.conftest import isolated_qsettings, settings  # noqa: F401
