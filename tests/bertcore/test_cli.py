"""`bert-train`: a run end to end, resume, clear errors, and a 2-process torchrun (gloo) run on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertcore.cli.train import build_parser, main
from bertcore.models.checkpoint import load_pretrained
from tests.bertcore.test_data import synthetic_corpus_text

REPO = Path(__file__).resolve().parents[2]
TINY = ["--preset", "tiny", "--hidden-size", "24", "--num-layers", "2", "--num-heads", "2",
        "--intermediate-size", "40", "--batch-size", "4", "--seq-len", "32", "--num-threads", "1"]


@pytest.fixture(autouse=True)
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=30), encoding="utf-8")
    return path


def step_records(run: Path) -> list[dict]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["kind"] == "step"]


def test_help_lists_the_documented_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--corpus", "--preset", "--steps", "--batch-size", "--seq-len", "--lr", "--device", "--seed",
                   "--out", "--resume", "--vocab-size", "--vocab"):
        assert option in help_text


@pytest.mark.slow
def test_a_run_trains_its_vocabulary_then_resumes_to_more_steps(corpus_path, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "3", "--eval-every", "2",
                 "--out", str(out), "--no-progress", *TINY])
    assert code == 0, capsys.readouterr().err
    assert (out / "vocab.txt").exists() and (out / "final" / "model.safetensors").exists()
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["command"][0] == "bert-train" and run_config["model"]["num_hidden_layers"] == 2
    assert "held-out" in capsys.readouterr().err

    code = main(["--out", str(out), "--resume", "--steps", "5", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert [r["step"] for r in step_records(out)] == [1, 2, 3, 4, 5]
    assert json.loads((out / "summary.json").read_text())["step"] == 5
    model, tokenizer = load_pretrained(out / "final")
    assert model.config.hidden_size == 24 and tokenizer.vocab_size == model.config.vocab_size


def test_bad_input_exits_2_with_a_message_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"Caf\xe9.\n")
    assert main(["--corpus", str(bad), "--out", str(tmp_path / "run"), *TINY]) == 2
    assert "latin1.txt is not UTF-8" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "never-ran"), "--resume"]) == 2
    assert "no run_config.json" in capsys.readouterr().err


def test_divergence_exits_1_naming_the_step(corpus_path, tmp_path, capsys):
    code = main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "40", "--lr", "1e6",
                 "--warmup-steps", "0", "--max-grad-norm", "0", "--out", str(tmp_path / "run"), "--no-progress",
                 *TINY])
    assert code == 1
    assert "at step" in capsys.readouterr().err


HOLD_A_RUN = """
import sys
from bertcore.training.settings import TrainingConfig
from bertcore.training.pretraining import Trainer
trainer = Trainer(TrainingConfig(corpus=sys.argv[1], out_dir=sys.argv[2], vocab_size=70, preset="tiny", steps=2,
                                 seq_len=32, batch_size=4))
print("training", flush=True)
sys.stdin.readline()
"""


@pytest.mark.slow
def test_a_second_run_on_the_same_folder_is_refused_at_once(corpus_path, tmp_path, capsys):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", HOLD_A_RUN, str(corpus_path), str(out)], cwd=REPO, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "training"
        code = main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "2", "--out", str(out),
                     "--no-progress", *TINY])
        assert code == 2
        assert f"{out} is in use by another training run: process {first.pid} holds" in capsys.readouterr().err
    finally:
        first.kill()
        first.wait()
    assert main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "2", "--out", str(out),
                 "--no-progress", *TINY]) == 0  # the lock of the killed process died with it


def test_a_full_disk_exits_1_keeping_the_previous_checkpoint(corpus_path, tmp_path, capsys, monkeypatch):
    import bertcore.models.checkpoint

    real_save_file, calls = bertcore.models.checkpoint.save_file, []

    def save_file_until_the_disk_is_full(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        real_save_file(tensors, path, metadata=metadata)

    monkeypatch.setattr(bertcore.models.checkpoint, "save_file", save_file_until_the_disk_is_full)
    out = tmp_path / "run"
    code = main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "4", "--checkpoint-every", "2",
                 "--out", str(out), "--no-progress", *TINY])
    assert code == 1
    assert "could not write the checkpoint of step 4" in capsys.readouterr().err
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000002"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step-000002"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["kind"] == "error" and "No space left on device" in records[-1]["message"]


@pytest.mark.slow
def test_resume_refuses_a_checkpoint_of_another_run(corpus_path, tmp_path, capsys):
    for name in ("run", "other"):
        assert main(["--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "2", "--out",
                     str(tmp_path / name), "--no-progress", *TINY]) == 0
    capsys.readouterr()
    foreign = tmp_path / "other" / "checkpoints" / "step-000002"
    assert main(["--out", str(tmp_path / "run"), "--resume", str(foreign), "--steps", "3", "--no-progress"]) == 2
    assert "not a checkpoint of the run folder" in capsys.readouterr().err
    (tmp_path / "run" / "checkpoints" / "step-000009").symlink_to(foreign, target_is_directory=True)
    assert main(["--resume", str(tmp_path / "run" / "checkpoints" / "step-000009"), "--steps", "3",
                 "--no-progress"]) == 2
    assert "not a checkpoint of the run folder" in capsys.readouterr().err
    assert main(["--resume", str(tmp_path / "run"), "--steps", "3", "--no-progress"]) == 0  # a run folder: latest


@pytest.mark.slow
def test_two_process_torchrun_on_cpu_with_gloo(corpus_path, tmp_path):
    out = tmp_path / "ddp"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "bertcore.cli.train", "--corpus", str(corpus_path), "--vocab-size", "70", "--steps", "4",
               "--device", "cpu", "--eval-every", "2", "--checkpoint-every", "2", "--out", str(out),
               "--no-progress", *TINY]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["step"] for r in step_records(out)] == [1, 2, 3, 4]  # written once, by rank 0
    run_config = json.loads((out / "run_config.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert run_config["world_size"] == 2 and summary["world_size"] == 2
    assert run_config["process_group"] == summary["process_group"] == "gloo"
    assert "× 2 process(es) over gloo" in result.stderr
    first, second = summary["replica_checksums"]
    assert first == second  # DDP kept both replicas identical
    # both ranks' batches count: about twice the tokens of one rank's batch of 4 sequences
    assert all(r["tokens"] > 8 * 5 for r in step_records(out))
    assert result.stderr.count("finished at step 4") == 1  # only rank 0 reports
    load_pretrained(out / "checkpoints" / "step-000004")
