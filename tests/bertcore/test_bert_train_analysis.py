"""bert-train's analysis records (--analysis-every, --treebank): a line per record, a clean stop on Ctrl-C in the
middle of one, the recorded interval kept by a resume, a treebank that cannot be read refused with exit 2, and every
family's records through --arch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import bertcore
from bertcore.analysis.records import record_summary
from bertcore.analysis.run_analysis import read_analysis_records
from bertcore.cli.train import main
from bertcore.models.families import family_names
from tests.bertcore.analysis_runs import ewt_corpus

pytestmark = pytest.mark.usefixtures("one_thread")
REPO = Path(__file__).resolve().parents[2]


def test_a_record_in_one_line():
    record = {"step": 300, "best_head": {"layer": 1, "head": 0, "direction": 0, "uas": 0.3124},
              "offset_baselines": {"-1": 0.1, "+1": 0.2881, "+2": None},
              "probe": {"task": "upos", "best_layer": 2, "accuracy": [0.5, 0.7, 0.881],
                        "selectivity": [0.1, 0.2, 0.3011]},
              "blimp": {"accuracy": 0.5522}}
    assert record_summary(record) == ("step 300: best head L2·H1 UAS 0.312 (next word 0.288); POS probe best at layer "
                                      "2 (0.881, selectivity 0.301); BLiMP 0.552")
    record.update(blimp=None, due_step=200, probe={**record["probe"], "best_layer": 0})
    assert record_summary(record) == ("step 300 (due at step 200): best head L2·H1 UAS 0.312 (next word 0.288); POS "
                                      "probe best at the embeddings (0.500, selectivity 0.100)")


# ---- bert-train ----------------------------------------------------------------------------------------------------

SIZE_OPTIONS = ["--preset", "tiny", "--hidden-size", "24", "--num-layers", "2", "--num-heads", "3",
                "--intermediate-size", "40"]


def cli_options(folder: Path, *extra: str) -> list[str]:
    return ["--corpus", str(ewt_corpus(folder)), "--vocab", str(bertcore.files.resources.default_vocab_path()),
            "--data-cache", str(folder / "cache"), "--batch-size", "4", "--seq-len", "48", "--warmup-steps", "1",
            "--eval-every", "0", "--no-progress", *SIZE_OPTIONS, *extra]


@pytest.mark.slow
@pytest.mark.parametrize("arch", family_names())
def test_every_family_gets_its_records_through_bert_train(arch, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(cli_options(tmp_path, "--arch", arch, "--steps", "3", "--analysis-every", "2",
                            "--out", str(run))) == 0
    err = capsys.readouterr().err
    records = read_analysis_records(run)
    assert [r["step"] for r in records] == [0, 2, 3]
    for record in records:
        assert record_summary(record) in err  # a line per record
        assert len(record["uas"]) == 2 and len(record["uas"][0]) == 3 and len(record["probe"]["accuracy"]) == 3
    assert "measuring what the model learns every 2 steps" in err
    if arch == "electra":  # its published model is the discriminator: no masked-LM head
        assert records[0]["blimp"] is None and "discriminator" in records[0]["blimp_unavailable"]
    else:
        assert records[0]["blimp"]["pairs"] == 67
    assert json.loads((run / "run_config.json").read_text())["training"]["analysis_every"] == 2


@pytest.mark.slow
def test_bert_train_resumes_measuring_and_refuses_a_bad_treebank(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(cli_options(tmp_path, "--steps", "3", "--analysis-every", "2", "--out", str(run))) == 0
    assert main(["--out", str(run), "--resume", "--steps", "4", "--no-progress"]) == 0  # the recorded interval
    assert [r["step"] for r in read_analysis_records(run)] == [0, 2, 3, 4]
    capsys.readouterr()
    missing = str(tmp_path / "no.conllu")
    assert main(cli_options(tmp_path, "--steps", "2", "--analysis-every", "1", "--treebank", missing,
                            "--out", str(tmp_path / "other"))) == 2
    assert "no.conllu does not exist; give the path of a CoNLL-U treebank" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_in_the_middle_of_a_record_stops_cleanly(tmp_path):
    """bert-train with a record after every step, which takes longer than the step: a Ctrl-C lands in a record,
    which is abandoned between two of its parts; the run stops with a checkpoint, and a resume measures that step."""
    run = tmp_path / "run"
    command = [sys.executable, "-m", "bertcore.cli.train",
               *cli_options(tmp_path, "--steps", "400", "--analysis-every", "1", "--out", str(run))]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("step 3:"):  # records are flowing: the loop is in one now or soon
            time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            break
    _, rest = process.communicate(timeout=120)
    err = "".join(lines) + rest
    assert process.returncode == 0, err
    assert "stopping after this step and writing a checkpoint" in err and "Traceback" not in err
    stopped_at = int(err.split("stopped at step ")[1].split(";")[0])
    assert (run / "checkpoints" / f"step-{stopped_at:06d}").is_dir()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line whole
    steps = [r["step"] for r in records if r["kind"] == "analysis"]
    assert steps == sorted(set(steps)) and steps[-1] in (stopped_at - 1, stopped_at)
    assert main(["--out", str(run), "--resume", "--steps", str(stopped_at + 1), "--no-progress"]) == 0
    steps = [r["step"] for r in read_analysis_records(run)]
    assert steps == list(range(stopped_at + 2))  # one record per step, the stopped one included
