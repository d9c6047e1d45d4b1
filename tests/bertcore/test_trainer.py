"""The training loop: learning, stop/pause, exact resume, crash-safe checkpoints, NaN and OOM handling."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from bertcore.data.corpus import CorpusError
from bertcore.errors import (
    CheckpointWriteError,
    DivergenceError,
    RunFolderBusyError,
    RunFolderError,
    TrainingError,
)
from bertcore.models.checkpoint import load_pretrained
from bertcore.models.config import preset
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from bertcore.training.pretraining import (
    NonFiniteLossError,
    OutOfMemoryTrainingError,
    StepStats,
    Trainer,
    TrainingConfig,
    find_checkpoint,
    warm_up,
    weight_decay_groups,
)
from tests.bertcore.test_data import WORDS, synthetic_corpus_text

REPO = Path(__file__).resolve().parents[2]
# Distinct small sizes, so a wrong transpose fails loudly.
TINY_MODEL = preset("tiny", hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
                    max_position_embeddings=40)


# Tiny models are overhead-bound: one thread is faster and does not fight other processes.
pytestmark = pytest.mark.usefixtures("one_thread")


def write_vocabulary(folder: Path) -> None:
    """A fixed word-level vocabulary of the synthetic corpora (a trained WordPiece vocabulary may break ties
    differently from run to run, and runs compared step by step must share one)."""
    BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True).save(folder)


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory) -> Path:
    """Random words: nothing to learn beyond word frequencies, plenty to exercise the machinery."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=40), encoding="utf-8")
    write_vocabulary(path.parent)
    return path


@pytest.fixture(scope="module")
def memorable_corpus_path(tmp_path_factory) -> Path:
    """Documents made of six fixed sentences: every masked word is predictable from its neighbours."""
    sentences = [" ".join(WORDS[i : i + 6]).capitalize() + "." for i in range(0, 18, 3)]
    rng = random.Random(0)
    documents = ["\n".join(rng.sample(sentences, 4)) for _ in range(40)]
    path = tmp_path_factory.mktemp("memorable") / "corpus.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    write_vocabulary(path.parent)
    return path


def make_config(corpus_path: Path, out_dir: Path, **changes) -> TrainingConfig:
    values = dict(corpus=str(corpus_path), out_dir=str(out_dir), vocab=str(corpus_path.parent / "vocab.txt"),
                  steps=8, batch_size=6, seq_len=32,
                  lr=2e-3, warmup_steps=2, eval_every=0, eval_batches=1, checkpoint_every=0, heldout_fraction=0.1,
                  seed=1)
    values.update(changes)
    return TrainingConfig(**values)


@pytest.mark.slow
def test_loss_decreases_on_a_tiny_overfit_run(memorable_corpus_path, tmp_path):
    config = make_config(memorable_corpus_path, tmp_path / "run", steps=80, lr=1e-2, warmup_steps=5, eval_every=40)
    stats = list(Trainer(config, model_config=TINY_MODEL).steps())
    losses = [s.loss for s in stats]
    assert [s.step for s in stats] == list(range(1, 81))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    assert stats[-1].mlm_accuracy > stats[0].mlm_accuracy
    assert stats[39].eval is not None and stats[-1].eval is not None and stats[40].eval is None
    assert all(isinstance(getattr(s, f), float) for s in stats for f in ("loss", "learning_rate", "grad_norm"))
    assert all(s.warning is None for s in stats)  # a healthy run never trips the divergence check


@pytest.mark.slow
def test_run_folder_format(corpus_path, tmp_path):
    out = tmp_path / "run"
    config = make_config(corpus_path, out, steps=4, eval_every=2, checkpoint_every=2, keep_checkpoints=1)
    stats = list(Trainer(config, model_config=TINY_MODEL).steps())
    run_config = json.loads((out / "run_config.json").read_text())
    assert run_config["training"]["steps"] == 4 and run_config["model"]["hidden_size"] == 24
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["kind"] == "step"]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert set(steps[0]) >= {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "learning_rate",
                             "grad_norm", "tokens_per_second", "elapsed_seconds"}
    assert [r["step"] for r in records if r["kind"] == "eval"] == [2, 4]
    assert [r["step"] for r in records if r["kind"] == "checkpoint"] == [2, 4]
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000004"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step-000004"]  # rotation
    assert stats[-1].checkpoint == str(out / "checkpoints" / "step-000004")
    state = torch.load(out / "checkpoints" / "step-000004" / "trainer_state.pt", weights_only=True)
    assert state["step"] == 4 and "optimizer" in state
    model, tokenizer = load_pretrained(out / "final")
    assert model.config.hidden_size == 24 and tokenizer.vocab_size == model.config.vocab_size
    assert not (out / "final" / "trainer_state.pt").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["step"] == 4 and summary["eval"]["step"] == 4


def test_stop_request_is_honoured_within_one_step(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=50), model_config=TINY_MODEL)
    seen = []
    for stats in trainer.steps():
        seen.append(stats.step)
        if stats.step == 3:
            trainer.request_stop()
    assert seen == [1, 2, 3]
    assert find_checkpoint(tmp_path / "run").name == "step-000003"  # the progress is kept
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["step"] == 3 and summary["eval"]["step"] == 3  # with held-out numbers for it
    assert next(trainer.steps()).step == 4  # the request was consumed: iterating again continues


@pytest.mark.slow
def test_stop_and_pause_from_another_thread(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=10_000), model_config=TINY_MODEL)
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.extend(s.step for s in trainer.steps()))
    worker.start()
    while not seen:
        time.sleep(0.01)
    trainer.pause()
    time.sleep(0.3)
    paused_at = len(seen)
    time.sleep(0.3)
    assert len(seen) == paused_at and trainer.is_paused  # nothing moves while paused
    snapshot = trainer.snapshot_state_dict()  # a consistent copy while the loop waits
    assert all(t.device.type == "cpu" for t in snapshot.values())
    trainer.resume()
    while len(seen) < paused_at + 3:
        time.sleep(0.01)
    requested_at = len(seen)
    trainer.request_stop()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(seen) <= requested_at + 1 and trainer.step == seen[-1]


def test_leaving_the_loop_then_iterating_again_continues_the_run(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=4), model_config=TINY_MODEL)
    for stats in trainer.steps():
        if stats.step == 2:
            break
    assert trainer.step == 2
    assert [s.step for s in trainer.steps()] == [3, 4]
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "step"] == [1, 2, 3, 4]


def test_snapshot_is_a_copy_and_probe_model_matches(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=2), model_config=TINY_MODEL)
    list(trainer.steps())
    snapshot = trainer.snapshot_state_dict()
    name = "bert.embeddings.LayerNorm.weight"
    snapshot[name].add_(1.0)
    assert not torch.equal(snapshot[name], trainer.model.state_dict()[name])
    probe = trainer.snapshot_model()
    assert not probe.training
    ids = torch.tensor([[2, 7, 8, 3]])
    trainer.model.eval()
    with torch.no_grad():
        assert torch.allclose(probe(ids).prediction_logits, trainer.model(ids).prediction_logits)


@pytest.mark.slow
def test_resume_continues_the_same_loss_curve(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "straight", steps=8)
    straight = [s.loss for s in Trainer(config, model_config=TINY_MODEL).steps()]

    interrupted = config.replace(out_dir=str(tmp_path / "interrupted"))
    first = Trainer(interrupted, model_config=TINY_MODEL)
    before = []
    for stats in first.steps():
        before.append(stats.loss)
        if stats.step == 4:
            first.request_stop()
    resumed = Trainer(interrupted, resume=True)
    assert resumed.step == 4
    after = [s.loss for s in resumed.steps()]
    assert len(before) == 4 and len(after) == 4
    assert before + after == pytest.approx(straight, rel=1e-5, abs=1e-6)
    metrics = [json.loads(line) for line in (tmp_path / "interrupted" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in metrics if r["kind"] == "step"] == list(range(1, 9))
    assert json.loads((tmp_path / "interrupted" / "summary.json").read_text())["step"] == 8


KILL_DURING_WRITE = textwrap.dedent("""
    import os, signal, sys
    import bertcore.models.checkpoint as checkpoint
    from bertcore.models.config import preset
    from bertcore.training.pretraining import Trainer, TrainingConfig
    real_save_file, calls = checkpoint.save_file, []
    def save_file_then_die(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) == 2:  # the second checkpoint: write half a weights file, then die like a killed process
            with open(path, "wb") as handle:
                handle.write(b"half a safetensors file")
            os.kill(os.getpid(), signal.SIGKILL)
        real_save_file(tensors, path, metadata=metadata)
    checkpoint.save_file = save_file_then_die
    config = TrainingConfig(**{config!r})
    model = preset("tiny", hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40)
    for stats in Trainer(config, model_config=model).steps():
        pass
""")


@pytest.mark.slow
def test_a_kill_during_checkpoint_writing_leaves_the_previous_checkpoint_loadable(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=6, checkpoint_every=2)
    script = KILL_DURING_WRITE.format(config=config.to_dict())
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, timeout=120)
    assert result.returncode == -9, result.stderr.decode()
    checkpoints = tmp_path / "run" / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "step-000002"
    assert any(p.name.startswith(".") for p in checkpoints.iterdir())  # the half-written one, never "latest"
    model, _ = load_pretrained(find_checkpoint(tmp_path / "run"))
    assert all(torch.isfinite(p).all() for p in model.parameters())
    resumed = Trainer(config, resume=True)  # also clears the debris
    assert resumed.step == 2
    assert [s.step for s in resumed.steps()] == [3, 4, 5, 6]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest", "step-000004", "step-000006"]


def read_records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_full_disk_while_checkpointing_is_a_clear_error_and_keeps_the_previous_checkpoint(corpus_path, tmp_path,
                                                                                             monkeypatch):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=4, checkpoint_every=2), model_config=TINY_MODEL)
    steps = trainer.steps()
    assert next(steps).step == 1 and next(steps).checkpoint is not None

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    next(steps)
    with pytest.raises(CheckpointWriteError, match=r"checkpoint of step 4 to .*step-000004: No space left on device "
                                                   r"\(ENOSPC\).*step-000002 is still the latest"):
        next(steps)
    checkpoints = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest", "step-000002"]  # nothing half-written
    assert find_checkpoint(tmp_path / "run").name == "step-000002"
    load_pretrained(find_checkpoint(tmp_path / "run"))
    error = read_records(tmp_path / "run")[-1]
    assert error["kind"] == "error" and error["step"] == 4 and "No space left" in error["message"]
    assert issubclass(CheckpointWriteError, TrainingError)


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=10, checkpoint_every=2), model_config=TINY_MODEL)
    steps = trainer.steps()
    for _ in range(3):
        next(steps)
    with torch.no_grad():
        trainer.model.bert.embeddings.LayerNorm.weight[0] = float("nan")  # a diverged weight
    with pytest.raises(NonFiniteLossError, match=r"became nan at step 4.*step-000002") as caught:
        next(steps)
    assert caught.value.step == 4 and caught.value.last_checkpoint.name == "step-000002"
    assert trainer.step == 3  # the bad update was not applied
    assert find_checkpoint(tmp_path / "run").name == "step-000002"
    model, _ = load_pretrained(find_checkpoint(tmp_path / "run"))
    assert all(torch.isfinite(p).all() for p in model.parameters())
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["kind"] == "error" and records[-1]["step"] == 4


@pytest.mark.slow
def test_a_loss_that_explodes_without_nan_stops_naming_a_sane_checkpoint(corpus_path, tmp_path):
    """lr 30 (warm-up over 300 steps): the loss climbs from 4 to tens of nats, finite throughout."""
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=2000, lr=30.0, warmup_steps=300, checkpoint_every=2,
                         keep_checkpoints=1)
    trainer = Trainer(config, model_config=TINY_MODEL)
    seen = []
    with pytest.raises(DivergenceError, match=r"the loss diverged: the smoothed loss is [\d.]+ at step \d+, [\d.]+× "
                                              r"its best of [\d.]+ \(step \d+\).*lower the learning rate \(now 30\)"
                       ) as caught:
        seen.extend(trainer.steps())
    error = caught.value
    assert all(math.isfinite(s.loss) for s in seen)
    warned = [s.step for s in seen if s.warning]
    assert warned and "rising far" in seen[warned[0] - 1].warning
    assert error.step == len(seen) + 1 == warned[-1] + config.divergence_patience - 1
    assert error.smoothed_loss > 4 * max(error.best_loss, 1.0) and f"at step {error.step}," in str(error)
    # the checkpoint it names was written before the trouble, survived pruning (keep_checkpoints=1) and is sane
    good = error.last_checkpoint
    assert good is not None and good.is_dir() and str(good) in str(error) and trainer.last_good_checkpoint == good
    good_step = int(good.name.split("-")[1])
    assert good_step < warned[0] and seen[good_step].loss < 4 * max(error.best_loss, 1.0)  # the loss it gave next
    # newer checkpoints were written while the loss exploded; `latest` names the newest, a resume the sane one
    assert (run / "checkpoints" / "latest").read_text().strip() != good.name
    assert find_checkpoint(run) == good
    records = read_records(run)
    assert [r["step"] for r in records if r["kind"] == "warning"] == warned
    assert records[-1]["kind"] == "error" and records[-1]["step"] == error.step
    saved = {r["step"]: r for r in records if r["kind"] == "checkpoint"}
    assert saved[good_step]["sane"] and saved[good_step]["smoothed_loss"] < 4 * max(error.best_loss, 1.0)
    assert not saved[max(saved)]["sane"]
    model, _ = load_pretrained(good)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.slow
def test_the_divergence_check_can_be_turned_off(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=30, lr=30.0, warmup_steps=0, divergence_factor=0)
    stats = list(Trainer(config, model_config=TINY_MODEL).steps())  # diverging, but nobody asked to stop it
    assert len(stats) == 30 and all(s.warning is None for s in stats) and stats[-1].loss > 10


def test_a_huge_learning_rate_diverges_into_a_clear_error(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=40, lr=1e6, warmup_steps=0, max_grad_norm=0.0)
    with pytest.raises(NonFiniteLossError, match=r"at step \d+.*lower the learning rate \(now 1e\+06\)"):
        for stats in Trainer(config, model_config=TINY_MODEL).steps():
            assert math.isfinite(stats.loss)


def test_out_of_memory_becomes_a_clear_message(corpus_path, tmp_path, monkeypatch):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run"), model_config=TINY_MODEL)

    def out_of_memory(**inputs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer, "_train_model", out_of_memory)
    with pytest.raises(OutOfMemoryTrainingError, match=r"batch size 6 × sequence length 32.*--batch-size \(e.g. 3\)"):
        next(trainer.steps())


def test_request_checkpoint_writes_at_the_next_step(corpus_path, tmp_path):
    trainer = Trainer(make_config(corpus_path, tmp_path / "run", steps=5), model_config=TINY_MODEL)
    steps = trainer.steps()
    assert next(steps).checkpoint is None
    trainer.request_checkpoint()
    assert next(steps).checkpoint.endswith("step-000002")
    assert next(steps).checkpoint is None
    assert trainer.save_checkpoint().name == "step-000003"


def test_one_trainer_per_run_folder_until_it_is_closed(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=4, checkpoint_every=2)
    first = Trainer(config, model_config=TINY_MODEL)
    with pytest.raises(RunFolderBusyError, match=rf"in use by another Trainer in this process \(pid {os.getpid()}\)"):
        Trainer(config, model_config=TINY_MODEL)
    steps = first.steps()
    next(steps), next(steps)
    with pytest.raises(RunFolderBusyError):  # held while the loop runs
        Trainer(config, resume=True)
    steps.close()  # the loop ends: the folder is free for another trainer (e.g. `bert-train --resume`)
    with Trainer(config, resume=True) as second:
        assert second.step == 2
        with pytest.raises(RunFolderBusyError):
            first.save_checkpoint()  # the first takes it back for any write, and is refused now
        assert [s.step for s in second.steps()] == [3, 4]
    with pytest.raises(RunFolderError, match="changed by another run"):
        next(first.steps())  # it would write over the second's progress
    first.close()
    with pytest.raises(TrainingError, match="was closed"):
        next(first.steps())
    assert not (tmp_path / "run" / "run.lock").exists()


def test_a_new_run_refuses_a_folder_that_holds_another_run(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=2)
    list(Trainer(config, model_config=TINY_MODEL).steps())
    with pytest.raises(ValueError, match=r"already holds a run.*--resume"):
        Trainer(config, model_config=TINY_MODEL)


def test_resuming_a_checkpoint_outside_the_run_is_refused(corpus_path, tmp_path):
    other = make_config(corpus_path, tmp_path / "other", steps=2)
    list(Trainer(other, model_config=TINY_MODEL).steps())
    config = make_config(corpus_path, tmp_path / "run", steps=4)
    list(Trainer(config.replace(steps=2), model_config=TINY_MODEL).steps())
    with pytest.raises(RunFolderError, match=r"cannot resume from .*other.*not a checkpoint of the run folder"):
        Trainer(config, resume=tmp_path / "other" / "checkpoints" / "step-000002")
    (tmp_path / "run" / "checkpoints" / "latest").write_text("../../other/checkpoints/step-000002\n")
    with pytest.raises(RunFolderError, match="leads outside"):
        Trainer(config, resume=True)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda path: path.write_bytes(path.read_bytes()[:100]), "cannot be read"),
    (lambda path: path.write_bytes(b"not a checkpoint at all"), "cannot be read"),
    (lambda path: torch.save({"version": 1, "step": 2}, path), "lacks a valid optimizer, elapsed_seconds"),
    (lambda path: torch.save([1, 2], path), "holds a list"),
    (lambda path: torch.save({**torch.load(path, weights_only=True), "optimizer": {"state": {}, "param_groups": []}},
                             path), "optimizer state does not fit"),
])
@pytest.mark.slow
def test_a_damaged_trainer_state_is_a_clear_error(corpus_path, tmp_path, damage, message):
    config = make_config(corpus_path, tmp_path / "run", steps=4)
    list(Trainer(config.replace(steps=2), model_config=TINY_MODEL).steps())
    damage(tmp_path / "run" / "checkpoints" / "step-000002" / "trainer_state.pt")
    with pytest.raises(RunFolderError, match=rf"trainer_state\.pt.*{message}"):
        Trainer(config, resume=True)
    assert not (tmp_path / "run" / "run.lock").exists()  # the failed trainer let go of the folder


def test_corpus_problems_surface_from_the_trainer(tmp_path):
    with pytest.raises(CorpusError, match=r"nowhere\.txt does not exist"):
        Trainer(make_config(tmp_path / "nowhere.txt", tmp_path / "run"), model_config=TINY_MODEL)


def test_config_validation_and_schedule():
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        TrainingConfig(batch_size=0)
    with pytest.raises(ValueError, match="lr must be a positive number"):
        TrainingConfig(lr=float("nan"))
    config = TrainingConfig(steps=100, warmup_steps=10, lr=1.0)
    # Update k uses transformers' factor of k - 1 (its scheduler steps after the optimizer).
    assert config.learning_rate(1) == 0.0
    assert config.learning_rate(6) == pytest.approx(0.5)
    assert config.learning_rate(11) == pytest.approx(1.0)
    assert config.learning_rate(56) == pytest.approx(0.5)
    assert config.learning_rate(100) == pytest.approx(1 / 90)
    assert TrainingConfig.from_dict(config.to_dict()) == config


def test_weight_decay_spares_biases_and_layer_norms():
    from bertcore.models.bert import BertForPreTraining

    model = BertForPreTraining(TINY_MODEL.replace(vocab_size=50))
    decay, no_decay = weight_decay_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(not names[id(p)].endswith("bias") and "LayerNorm" not in names[id(p)] for p in decay["params"])
    assert all(names[id(p)].endswith("bias") or "LayerNorm" in names[id(p)] for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))  # tied: once


def test_warm_up_and_stats_are_plain_numbers():
    assert warm_up() >= 0.0
    stats = StepStats(step=1, total_steps=2, loss=1.0, mlm_loss=0.5, nsp_loss=0.5, mlm_accuracy=0.1,
                      nsp_accuracy=0.5, learning_rate=1e-3, grad_norm=1.0, tokens=10, tokens_per_second=5.0,
                      elapsed_seconds=2.0)
    assert json.loads(json.dumps(stats.to_dict()))["kind"] == "step"
