"""`explorer.runs.read_curves` against files written by the real writers: torch's SummaryWriter (and TF2's tensor
scalars, built with the tensorboard package's own protobuf classes and record writer), the Hugging Face Trainer's
trainer_state.json (its own TrainerState class, and a real Trainer run) and bertcore's
own trainer; with every point compared to the tensorboard package's EventAccumulator or to the file's lines.
Files still being written are read up to their last whole record, and files that are not what they claim are a
clear error, never a hang."""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from explorer.runs import read_curves
from explorer.runs.curve_files import (
    BERT_FINETUNE,
    BERT_TRAIN,
    TENSORBOARD,
    TRAINER,
    CurveReadError,
    find_runs,
    open_run,
    run_kind,
)
from explorer.runs.tfevents import masked_crc32c

tensorboard = pytest.importorskip("tensorboard")


# ---------------------------------------------------------------- TensorBoard
def accumulated(folder: Path) -> dict[str, list]:
    """Every scalar of a log folder as the tensorboard package reads it (no 10,000-point cap), by tag."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0, TENSORS: 0})
    accumulator.Reload()
    found = {tag: [(e.step, e.value, e.wall_time) for e in accumulator.Scalars(tag)]
             for tag in accumulator.Tags()["scalars"]}
    for tag in accumulator.Tags()["tensors"]:  # TF2's scalars are tensors to the legacy accumulator
        from tensorboard.util import tensor_util

        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        found[tag] = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto)), e.wall_time)
                      for e in accumulator.Tensors(tag)]
    return found


def assert_same_points(curves, reference: dict[str, list]) -> None:
    assert set(curves) == set(reference)
    for tag, points in reference.items():
        steps, values, walls = (np.asarray(column) for column in zip(*points, strict=True))
        curve = curves[tag]
        assert curve.steps.tolist() == steps.tolist(), tag
        np.testing.assert_array_equal(curve.values, values.astype(np.float64))
        np.testing.assert_array_equal(curve.wall_times, walls)


def write_summary_writer_run(folder: Path, steps: int = 300) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(1, steps + 1):
        writer.add_scalar("train/loss", 4.0 * math.exp(-step / 100) + 0.01 * (step % 7), step)
        writer.add_scalar("train/learning_rate", 1e-3 * min(1.0, step / 50), step)
        if step % 50 == 0:
            writer.add_scalar("eval/loss", 4.2 * math.exp(-step / 100), step)
            writer.add_scalar("eval/accuracy", step / steps, step, new_style=True)  # a tensor of plugin "scalars"
    writer.add_scalar("train/diverged", math.nan, steps + 1)
    writer.add_text("notes", "not a scalar", 0)
    writer.add_histogram("weights", np.arange(10.0), 0)
    writer.close()


def test_summary_writer_run_every_point_as_the_tensorboard_package_reads_it(tmp_path):
    write_summary_writer_run(tmp_path / "run")
    curves = read_curves(tmp_path / "run")
    assert curves.kind == TENSORBOARD and run_kind(tmp_path / "run") == TENSORBOARD
    reference = accumulated(tmp_path / "run")
    assert_same_points(curves, reference)
    assert len(curves["train/loss"]) == 300 and len(curves["eval/accuracy"]) == 6
    assert math.isnan(curves["train/diverged"].values[0])  # written as such: kept (the smoothing passes it through)


def tf2_scalar_event(tag: str, step: int, value: float, wall_time: float, *, with_metadata: bool, dtype: str):
    """An Event as TF2's tf.summary.scalar writes it: a rank-0 tensor in tensor_content, the "scalars" plugin's
    metadata with the tag's first value only."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

    numpy_type, proto_type = {"float": ("<f4", types_pb2.DT_FLOAT), "double": ("<f8", types_pb2.DT_DOUBLE),
                              "half": ("<f2", types_pb2.DT_HALF)}[dtype]
    tensor = tensor_pb2.TensorProto(dtype=proto_type, tensor_content=np.asarray(value, numpy_type).tobytes())
    tensor.tensor_shape.SetInParent()  # a scalar: no dims
    summary_value = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
    if with_metadata:
        summary_value.metadata.plugin_data.plugin_name = "scalars"
        summary_value.metadata.data_class = summary_pb2.DATA_CLASS_SCALAR
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary_pb2.Summary(value=[summary_value]))


def write_events(path: Path, events) -> None:
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    with open(path, "wb") as file:
        writer = RecordWriter(file)
        writer.write(event_pb2.Event(wall_time=1.0e9, file_version="brain.Event:2").SerializeToString())
        for event in events:
            writer.write(event.SerializeToString())


@pytest.mark.parametrize("dtype", ["float", "double", "half"])
def test_tf2_tensor_scalars_with_metadata_on_the_first_value_only(tmp_path, dtype):
    folder = tmp_path / "tf2"
    folder.mkdir()
    values = [0.5, 0.25, -3.0, 1024.0]
    events = [tf2_scalar_event("epoch_loss", step, value, 1.7e9 + step, with_metadata=step == 0, dtype=dtype)
              for step, value in enumerate(values)]
    write_events(folder / "events.out.tfevents.1.host.2.v2", events)
    curve = read_curves(folder)["epoch_loss"]
    assert curve.steps.tolist() == [0, 1, 2, 3] and curve.values.tolist() == values
    assert curve.wall_times.tolist() == [1.7e9 + step for step in range(4)]
    assert_same_points(read_curves(folder), accumulated(folder))


def test_a_tensor_of_another_plugin_is_not_a_scalar(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2

    folder = tmp_path / "run"
    folder.mkdir()
    value = summary_pb2.Summary.Value(tag="text", tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                                                                  float_val=[1.0]))
    value.metadata.plugin_data.plugin_name = "text"
    events = [event_pb2.Event(step=1, wall_time=2.0, summary=summary_pb2.Summary(value=[value])),
              tf2_scalar_event("loss", 1, 2.0, 2.0, with_metadata=True, dtype="float")]
    write_events(folder / "events.out.tfevents.1", events)
    assert list(read_curves(folder)) == ["loss"]


def test_many_files_and_subfolder_runs(tmp_path):
    """A run's files are read in name order; each subfolder holding event files is a run of its own."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path / "logs"
    for name, offset in (("a", 0), ("b", 100)):
        for part in range(2):  # two writers, one after the other, into one run folder: two files
            writer = SummaryWriter(str(root / name), filename_suffix=f".{part}")
            for step in range(part * 10, part * 10 + 10):
                writer.add_scalar("loss", offset + step, step)
            writer.close()
    runs = find_runs(root)
    assert runs == [(root / "a", TENSORBOARD), (root / "b", TENSORBOARD)]
    with pytest.raises(CurveReadError, match="holds 2 run"):
        read_curves(root)
    curve = read_curves(root / "b")["loss"]
    assert curve.steps.tolist() == list(range(20)) and curve.values.tolist() == [100.0 + s for s in range(20)]


def test_a_record_still_being_written_waits_for_its_end(tmp_path):
    write_summary_writer_run(tmp_path / "whole", steps=40)
    source = next((tmp_path / "whole").iterdir())
    data = source.read_bytes()
    folder = tmp_path / "growing"
    folder.mkdir()
    target = folder / source.name
    whole = read_curves(tmp_path / "whole")
    target.write_bytes(data[:5])
    reader = open_run(folder)
    got: dict[str, list] = {}
    cut_points = sorted({12, 20, 333, len(data) // 2, len(data) // 2 + 5, len(data) - 3, len(data)})
    written = 5
    for cut in cut_points:  # the file grows in pieces that end mid-length, mid-data and mid-checksum
        with open(target, "ab") as file:
            file.write(data[written:cut])
        written = cut
        chunk = reader.poll()
        assert not chunk.restarted
        for name, points in chunk.points.items():
            got.setdefault(name, []).extend(points.values.tolist())
    assert {name: len(values) for name, values in got.items()} == {name: len(curve) for name, curve in whole.items()}
    for name, values in got.items():
        np.testing.assert_array_equal(values, whole[name].values)


@pytest.mark.slow
def test_a_writer_started_again_at_a_step_drops_what_was_written_from_there_as_tensorboard_does(tmp_path):
    """A resumed run's SummaryWriter(purge_step=S) starts a session at S: the steps from S on that the first
    writer wrote are out of date. EventAccumulator drops them; so does the reader, whether it reads the folder
    whole or followed it while the first writer wrote (then the poll starts again)."""
    import time

    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path / "resumed"
    first = SummaryWriter(str(folder))
    for step in range(1, 31):
        first.add_scalar("train/loss", 10.0 + step, step)
        if step % 10 == 0:
            first.add_scalar("eval/loss", 20.0 + step, step)
    first.close()
    followed = open_run(folder)
    chunk = followed.poll()
    assert chunk.points["train/loss"].steps.tolist() == list(range(1, 31))
    time.sleep(1.1)  # the next file's name (its time in seconds) sorts after the first's
    second = SummaryWriter(str(folder), purge_step=21)
    for step in range(21, 41):
        second.add_scalar("train/loss", 100.0 + step, step)
    second.close()
    assert len(list(folder.iterdir())) == 2
    reference = accumulated(folder)
    assert [step for step, _, _ in reference["train/loss"]] == list(range(1, 41))
    assert [step for step, _, _ in reference["eval/loss"]] == [10, 20]
    assert_same_points(read_curves(folder), reference)
    chunk = followed.poll()
    assert chunk.restarted
    assert_same_points({tag: points for tag, points in chunk.points.items()}, reference)
    assert not followed.poll()  # nothing new, nothing started again


def test_a_file_that_is_not_an_event_file_is_said_at_once(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "events.out.tfevents.123.host").write_bytes(b"\xff" * 8 + b"this is not TensorBoard's" * 10)
    with pytest.raises(CurveReadError, match=r"not a TensorBoard event file.*byte 0"):
        read_curves(folder)


def test_damaged_data_is_said_with_its_byte(tmp_path):
    write_summary_writer_run(tmp_path / "run", steps=20)
    path = next((tmp_path / "run").iterdir())
    data = bytearray(path.read_bytes())
    second = 12 + struct.unpack_from("<Q", data, 0)[0] + 4  # the second record: the first scalar
    data[second + 12 + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CurveReadError, match=rf"damaged.*byte {second:,}"):
        read_curves(tmp_path / "run")


def test_masked_crc32c_is_the_record_formats():
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

    for data in (b"", b"a", b"123456789", bytes(range(256)) * 3):
        assert masked_crc32c(data) == reference(data)


# ---------------------------------------------------------------- the Hugging Face Trainer
def trainer_history(steps: int, eval_every: int) -> list[dict]:
    """log_history entries in the Trainer's own words: logging steps, evaluations and the closing summary."""
    history = []
    for step in range(1, steps + 1):
        history.append({"epoch": step / steps, "grad_norm": 1.0 + step / 10, "learning_rate": 5e-5 * (1 - step / steps),
                        "loss": 3.0 - step / steps, "num_input_tokens_seen": 512 * step, "step": step})
        if step % eval_every == 0:
            history.append({"epoch": step / steps, "eval_loss": 3.1 - step / steps, "eval_runtime": 0.25,
                            "eval_samples_per_second": 64.0, "eval_steps_per_second": 8.0,
                            "num_input_tokens_seen": 512 * step, "step": step})
    history.append({"epoch": 1.0, "step": steps, "total_flos": 1234.0, "train_loss": 2.5, "train_runtime": 3.5,
                    "train_samples_per_second": 10.0, "train_steps_per_second": 1.0})
    return history


def save_trainer_state(folder: Path, history: list[dict], global_step: int) -> None:
    from transformers import TrainerState

    folder.mkdir(parents=True, exist_ok=True)
    state = TrainerState(global_step=global_step, max_steps=global_step, logging_steps=1, eval_steps=2,
                         train_batch_size=8)
    state.log_history = history
    state.save_to_json(str(folder / "trainer_state.json"))


@pytest.mark.slow  # transformers' import, the first time
def test_trainer_state_is_read_from_the_newest_checkpoint(tmp_path):
    out = tmp_path / "trainer-out"
    history = trainer_history(10, eval_every=2)
    save_trainer_state(out / "checkpoint-4", [entry for entry in history if entry["step"] <= 4][:-1], 4)
    save_trainer_state(out / "checkpoint-10", history, 10)
    assert run_kind(out) == TRAINER
    curves = read_curves(out)
    assert curves["loss"].steps.tolist() == list(range(1, 11))
    assert curves["loss"].values.tolist() == [entry["loss"] for entry in history if "loss" in entry]
    assert curves["eval_loss"].steps.tolist() == [2, 4, 6, 8, 10]
    assert curves["epoch"].steps.tolist() == list(range(1, 11))  # once a step, though evaluations say it too
    assert curves["train_loss"].values.tolist() == [2.5] and curves["loss"].wall_times is None
    assert curves.tokens.values[-1] == 5120


@pytest.mark.slow
def test_a_trainer_state_rewritten_with_more_history_adds_only_the_new_entries(tmp_path):
    out = tmp_path / "trainer-out"
    history = trainer_history(10, eval_every=5)
    save_trainer_state(out / "checkpoint-5", history[:6], 5)
    reader = open_run(out)
    assert reader.poll().points["loss"].steps.tolist() == [1, 2, 3, 4, 5]
    assert not reader.poll()  # unchanged: nothing
    save_trainer_state(out / "checkpoint-10", history, 10)
    chunk = reader.poll()
    assert not chunk.restarted and chunk.points["loss"].steps.tolist() == [6, 7, 8, 9, 10]
    save_trainer_state(out / "checkpoint-12", trainer_history(12, eval_every=5), 12)  # another run's history
    chunk = reader.poll()
    assert chunk.restarted and chunk.points["loss"].steps.tolist() == list(range(1, 13))


def test_a_damaged_trainer_state_is_said(tmp_path):
    out = tmp_path / "trainer-out"
    out.mkdir()
    (out / "trainer_state.json").write_text('{"global_step": 3, "log_history": {"loss": 1}}')
    with pytest.raises(CurveReadError, match="no log_history list"):
        read_curves(out)


@pytest.mark.slow
def test_a_real_trainer_run(tmp_path):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    config = BertConfig(vocab_size=99, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=16, num_labels=2)
    model = BertForSequenceClassification(config)
    generator = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(1, 99, (8,), generator=generator), "labels": index % 2}
            for index in range(32)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=4,
                             logging_steps=1, eval_strategy="steps", eval_steps=3, save_steps=3, report_to=[],
                             use_cpu=True, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=rows, eval_dataset=rows[:8]).train()
    curves = read_curves(tmp_path / "out")
    state = json.loads((tmp_path / "out" / "checkpoint-6" / "trainer_state.json").read_text())
    losses = [entry for entry in state["log_history"] if "loss" in entry]
    assert curves["loss"].steps.tolist() == [entry["step"] for entry in losses] == list(range(1, 7))
    assert curves["loss"].values.tolist() == [entry["loss"] for entry in losses]
    assert curves["eval_loss"].steps.tolist() == [3, 6]


# ---------------------------------------------------------------- bert-train and bert-finetune
@pytest.fixture(scope="module")
def bert_train_run(tmp_path_factory) -> Path:
    """A real, tiny bert-train run (bertcore's own trainer): steps, evaluations and checkpoints in metrics.jsonl."""
    import torch

    from bertcore.models.config import preset
    from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
    from bertcore.training.pretraining import Trainer, TrainingConfig
    from tests.bertcore.test_data import WORDS, synthetic_corpus_text

    folder = tmp_path_factory.mktemp("bert-train")
    (folder / "corpus.txt").write_text(synthetic_corpus_text(num_documents=40), encoding="utf-8")
    BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True).save(folder)
    config = TrainingConfig(corpus=str(folder / "corpus.txt"), out_dir=str(folder / "run"),
                            vocab=str(folder / "vocab.txt"), steps=6, batch_size=4, seq_len=24, lr=2e-3,
                            warmup_steps=2, eval_every=3, eval_batches=1, checkpoint_every=3, heldout_fraction=0.1,
                            seed=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        list(Trainer(config, model_config=preset("tiny", hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                 intermediate_size=24, max_position_embeddings=32)).steps())
    finally:
        torch.set_num_threads(threads)
    return folder / "run"


@pytest.mark.slow
def test_bert_train_run_every_record_under_its_name(bert_train_run):
    records = [json.loads(line) for line in (bert_train_run / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["kind"] == "step"]
    evaluations = [record for record in records if record["kind"] == "eval"]
    curves = read_curves(bert_train_run)
    assert curves.kind == BERT_TRAIN
    for name in ("loss", "mlm_loss", "nsp_accuracy", "learning_rate", "grad_norm", "tokens_per_second"):
        assert curves[name].steps.tolist() == [record["step"] for record in steps]
        assert curves[name].values.tolist() == [record[name] for record in steps]
        assert curves[name].wall_times is None  # metrics.jsonl keeps no clock time
    assert curves["eval/loss"].steps.tolist() == [3, 6]
    assert curves["eval/loss"].values.tolist() == [record["loss"] for record in evaluations]
    assert not {"tokens", "elapsed_seconds", "total_steps", "eval/num_examples"} & set(curves)  # the axes, not curves
    assert curves.tokens.values.tolist() == np.cumsum([record["tokens"] for record in steps]).tolist()
    assert curves.elapsed.values.tolist() == [record["elapsed_seconds"] for record in steps]


def test_a_metrics_line_still_being_written_waits_for_its_newline(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps({"kind": "step", "step": step, "loss": 1.0 / step, "tokens": 10, "elapsed_seconds": step})
             for step in range(1, 5)]
    lines.insert(2, json.dumps({"kind": "eval", "step": 2, "loss": 0.7, "num_examples": 8}))
    lines.insert(3, json.dumps({"kind": "checkpoint", "step": 2, "path": "x"}))
    text = "\n".join(lines) + "\n"
    cut = text.index("\n", text.index('"step": 3')) - 4  # in the middle of step 3's line
    (run / "metrics.jsonl").write_text(text[:cut])
    reader = open_run(run)
    first = reader.poll()
    assert first.points["loss"].steps.tolist() == [1, 2] and first.points["eval/loss"].values.tolist() == [0.7]
    assert [record["kind"] for record in first.records] == ["checkpoint"]
    with open(run / "metrics.jsonl", "a") as file:
        file.write(text[cut:] + '{"kind": "step", "step": 9, "lo')
    second = reader.poll()
    assert second.points["loss"].steps.tolist() == [3, 4] and second.tokens.values.tolist() == [30, 40]
    assert not reader.poll()


def test_a_metrics_file_replaced_by_a_resumed_run_restarts_the_curves(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write = lambda steps: (run / "metrics.jsonl").write_text(  # noqa: E731
        "".join(json.dumps({"kind": "step", "step": s, "loss": float(s)}) + "\n" for s in steps))
    write(range(1, 6))
    reader = open_run(run)
    reader.poll()
    os.replace(run / "metrics.jsonl", run / "old.jsonl")
    write(range(1, 4))
    chunk = reader.poll()
    assert chunk.restarted and chunk.points["loss"].steps.tolist() == [1, 2, 3]


def test_damaged_lines_are_skipped_and_counted(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"kind": "step", "step": 1, "loss": 2.0}\nnot json\n\xff\xfe\n[1, 2]\n'
                                        b'{"kind": "step", "step": 2, "loss": NaN, "lr": "high"}\n')
    chunk = open_run(run).poll()
    assert chunk.skipped == 3
    assert chunk.points["loss"].steps.tolist() == [1, 2] and math.isnan(chunk.points["loss"].values[1])
    assert "lr" not in chunk.points


def test_a_fine_tuning_run_names_its_kind_and_main_metric(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({"training": {"task": "sequence", "steps": 2}}))
    (run / "metrics.jsonl").write_text(
        json.dumps({"kind": "step", "step": 2, "loss": 0.5, "accuracy": 0.75}) + "\n"
        + json.dumps({"kind": "eval", "step": 2, "loss": 0.6, "accuracy": 0.7, "macro_f1": 0.65,
                      "main_metric": "accuracy", "num_examples": 20}) + "\n")
    curves = read_curves(run)
    assert curves.kind == BERT_FINETUNE and curves.main_metric == "accuracy"
    assert set(curves) == {"loss", "accuracy", "eval/loss", "eval/accuracy", "eval/macro_f1"}


# ---------------------------------------------------------------- what is not a run
def test_what_is_not_a_run_is_said(tmp_path):
    with pytest.raises(CurveReadError, match="does not exist"):
        read_curves(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CurveReadError, match="holds no run"):
        read_curves(tmp_path / "empty")


def test_a_fifo_named_like_a_runs_file_is_refused_never_waited_on(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "metrics.jsonl")
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(_error_of(lambda: read_curves(run))), daemon=True)
    thread.start()
    thread.join(10)
    assert outcome and "FIFO" in outcome[0]


def _error_of(action) -> str:
    try:
        action()
    except CurveReadError as error:
        return str(error)
    return "no error"
