"""Every file read from a run folder, a checkpoint's trainer state, a config.json and the Hugging Face cache is read
only as a regular file of a bounded size: a FIFO, a link to /dev/zero, a folder or JSON nested 100,000 deep is
refused with the error each reader documents (or, for readers that answer "none" for an unreadable file, None),
never waited on, read forever or a RecursionError.

Each read runs in a child process with a per-case time limit and a memory limit (the approach of
test_checkpoint_files.py): a read that blocks ends its child and is recorded as 'hung', so a regression fails its
test instead of freezing the suite."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.special_files import CHILD_PREAMBLE, SECONDS_PER_CASE, replace_with, run_in_children

COMMIT = "c" * 40
pytestmark = pytest.mark.skipif(
    not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero") or sys.platform == "win32",
    reason="needs FIFOs and /dev/zero (POSIX)")

CHILD = CHILD_PREAMBLE + r"""
from bertcore.models.config import BertConfig
from bertcore.models.hub_listing import list_cached_models
from bertcore.files.metrics_log import MetricsTail
from bertcore.files.run_folder import RunFolder, read_run_config
from bertcore.training.loop import read_trainer_state
for name, expression, path in cases():
    try:
        result = ["returned", repr(eval(expression, globals(), {"path": Path(path)}))]
    except BaseException as error:  # MemoryError too: reading /dev/zero until the limit
        result = [type(error).__name__, str(error)]
    print(json.dumps([name, *result]), flush=True)
"""




NOT_A_FILE = {
    "fifo": r"is a FIFO \(named pipe\), not a file",
    "dev_zero": r"\(a symbolic link to /dev/zero\) is a character device, not a file",
    "folder": r"is a folder, not a file",
    "deep": r"nested too deeply",
}

# (reader, file inside a run folder `run/`, expression of `path`, kinds, expected outcome). The outcome is an
# error type whose message names the file and what is there, or "None" for readers that answer None for a file
# they cannot use.
READERS = [
    ("run_config", "run_config.json", "read_run_config(path.parent)", ("fifo", "dev_zero", "folder", "deep"),
     "ValueError"),
    ("summary", "summary.json", "RunFolder(path.parent).read_summary()", ("fifo", "dev_zero", "deep"), "None"),
    ("sanity", "checkpoints/step-000001/sanity.json", "RunFolder(path.parents[2]).checkpoint_sanity(path.parent)",
     ("fifo", "dev_zero", "deep"), "None"),
    ("latest", "checkpoints/latest", "RunFolder(path.parents[1]).read_latest_pointer()", ("fifo", "dev_zero"),
     "None"),
    ("metrics", "metrics.jsonl", "MetricsTail(path).poll()", ("fifo", "dev_zero", "folder"), "RunFolderError"),
    ("trainer_state", "checkpoints/step-000001/trainer_state.pt", "read_trainer_state(path)",
     ("fifo", "dev_zero", "folder"), "RunFolderError"),
    ("config", "final/config.json", "BertConfig.from_json_file(path)", ("fifo", "dev_zero", "deep"), "ValueError"),
]
CASES = [f"{reader}-{kind}" for reader, _, _, kinds, _ in READERS for kind in kinds]


def _hub_repo(cache: Path, replaced: str, kind: str) -> Path:
    """A cached bert repo whose config.json (or refs/main) is replaced by `kind`; the file replaced."""
    storage = cache / "models--org--odd"
    snapshot = storage / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()
    (snapshot / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(24))
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text(COMMIT)
    target = snapshot / "config.json" if replaced == "config" else storage / "refs" / "main"
    replace_with(target, kind)
    return target


HUB_CASES = {  # case -> (file replaced, kind, the repo ids listed)
    "hub_config-fifo": ("config", "fifo", "[]"),
    "hub_config-dev_zero": ("config", "dev_zero", "[]"),
    "hub_config-deep": ("config", "deep", "[]"),
    # a ref that is no file holding a commit hash is named, not read around: the listing reports the repo as one it
    # cannot open (hub_listing.scan_cache's broken entries), as resolve_model refuses to open it
    "hub_ref-fifo": ("ref", "fifo", "[]"),
    "hub_ref-dev_zero": ("ref", "dev_zero", "[]"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[str, str, Path]]:
    """Every case read once, in children: case -> (outcome, message, the file replaced)."""
    root = tmp_path_factory.mktemp("reads")
    cases, files = [], {}
    for reader, file_name, expression, kinds, _ in READERS:
        for kind in kinds:
            run = root / f"{reader}-{kind}"
            (run / "checkpoints").mkdir(parents=True)
            path = run / file_name
            replace_with(path, kind)
            cases.append((f"{reader}-{kind}", expression, str(path)))
            files[f"{reader}-{kind}"] = path
    for case, (replaced, kind, _) in HUB_CASES.items():
        cache = root / case
        files[case] = _hub_repo(cache, replaced, kind)
        cases.append((case, "[model.repo_id for model in list_cached_models(path)]", str(cache)))
    found = run_in_children(CHILD, cases)
    return {name: (*found[name], files[name]) for name in files}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_run_folder_file_that_is_not_a_regular_file_is_refused_without_blocking(results, case):
    outcome, message, path = results[case]
    assert outcome != "hung", f"reading {path} did not finish within {SECONDS_PER_CASE} s (it blocks):\n{message}"
    reader, kind = case.rsplit("-", 1)
    expected = next(outcome for name, *_, outcome in READERS if name == reader)
    if expected == "None":
        assert (outcome, message) == ("returned", "None"), message
    else:
        assert outcome == expected, message
        assert re.search(re.escape(str(path)) + ".*" + NOT_A_FILE[kind], message), message


@pytest.mark.slow
@pytest.mark.parametrize("case", list(HUB_CASES))
def test_listing_the_hub_cache_skips_a_repo_whose_files_are_not_regular_files_without_blocking(results, case):
    outcome, message, path = results[case]
    assert outcome != "hung", f"listing with {path} did not finish within {SECONDS_PER_CASE} s (it blocks):\n{message}"
    assert (outcome, message) == ("returned", HUB_CASES[case][2]), message


def test_metrics_are_still_tailed_after_the_change(tmp_path):
    from bertcore.files.metrics_log import MetricsTail

    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.poll().records == []  # not written yet: nothing, no error
    path.write_text('{"step": 1}\n{"step": 2')
    assert tail.poll().records == [{"step": 1}]
    with path.open("a") as file:
        file.write("}\n")
    assert tail.poll().records == [{"step": 2}]
    path.write_text('{"step": 1}\n')  # replaced by a shorter file: a restart
    update = tail.poll()
    assert update.restarted and update.records == [{"step": 1}]


def test_the_app_reading_a_curve_names_a_metrics_file_that_is_not_a_file(tmp_path):
    from explorer.runs.run_watch import read_curve

    (tmp_path / "metrics.jsonl").mkdir()
    # A ValueError, which the app's Resume shows (an OSError or RunFolderError escaped it before)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "metrics.jsonl")) + " is a folder, not a file"):
        read_curve(tmp_path)
