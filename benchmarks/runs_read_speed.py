"""How fast the Runs tab reads a run, beside the references it must be compared with, in the same process:

- a 100,000-line metrics.jsonl (bert-train's records: 14 fields, an eval record every 1,000 steps):
  `explorer.runs.read_curves` against a plain loop of `json.loads` over its lines (which only parses);
- a 20,000-point tfevents file written by torch's SummaryWriter: `read_curves` against the tensorboard package's
  `EventAccumulator` told to keep every point (size_guidance 0), and a check that both read the same points.

Each figure is the best of --repeat runs; the load average is printed first (the machine may be shared).

    .venv/bin/python benchmarks/runs_read_speed.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from explorer.runs import read_curves


def write_metrics(path: Path, lines: int) -> None:
    rng = random.Random(0)
    with open(path, "w") as file:
        for step in range(1, lines + 1):
            loss = 9 * math.exp(-step / 2e4) + rng.random()
            file.write(json.dumps({"kind": "step", "step": step, "total_steps": lines, "loss": loss,
                                   "mlm_loss": loss - 0.69, "nsp_loss": 0.69 - 0.1 * rng.random(),
                                   "mlm_accuracy": rng.random(), "nsp_accuracy": rng.random(),
                                   "learning_rate": 1e-3 * min(1.0, step / 1000), "grad_norm": 1 + rng.random(),
                                   "tokens": 4096 - step % 7, "tokens_per_second": 1e4 * rng.random(),
                                   "elapsed_seconds": step * 0.1}) + "\n")
            if step % 1000 == 0:
                file.write(json.dumps({"kind": "eval", "step": step, "loss": loss, "mlm_loss": loss - 0.7,
                                       "nsp_loss": 0.6, "mlm_accuracy": 0.4, "nsp_accuracy": 0.8,
                                       "num_examples": 512}) + "\n")


def write_events(folder: Path, points: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    rng = random.Random(1)
    writer = SummaryWriter(str(folder))
    for step in range(1, points + 1):
        writer.add_scalar("train/loss", 9 * math.exp(-step / 5e3) + rng.random(), step)
    writer.close()


def best_of(repeat: int, action):
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - began)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}, {os.cpu_count()} CPU cores")
    folder = Path(tempfile.mkdtemp(prefix="runs-read-"))

    run = folder / "bert-train"
    run.mkdir()
    write_metrics(run / "metrics.jsonl", args.lines)
    size = (run / "metrics.jsonl").stat().st_size

    def json_loop():
        with open(run / "metrics.jsonl", "rb") as file:
            return [json.loads(line) for line in file]

    ours, curves = best_of(args.repeat, lambda: read_curves(run))
    reference, records = best_of(args.repeat, json_loop)
    assert len(curves["loss"]) == sum(record["kind"] == "step" for record in records)
    print(f"metrics.jsonl, {args.lines:,} lines ({size / 2**20:.1f} MiB): read_curves {ours:.3f} s, "
          f"json.loads loop {reference:.3f} s (ratio {ours / reference:.2f}; target ≤ 0.5 s)")

    try:
        import tensorboard  # noqa: F401
    except ImportError:
        print("tfevents: skipped (pip install -e '.[tensorboard]' for SummaryWriter and EventAccumulator)")
        return 0
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    logs = folder / "tensorboard"
    write_events(logs, args.points)

    def accumulate():
        accumulator = EventAccumulator(str(logs), size_guidance={SCALARS: 0})
        accumulator.Reload()
        return accumulator.Scalars("train/loss")

    ours, curves = best_of(args.repeat, lambda: read_curves(logs))
    reference, events = best_of(max(1, args.repeat // 2), accumulate)
    same = (np.array_equal(curves["train/loss"].values, [event.value for event in events])
            and np.array_equal(curves["train/loss"].steps, [event.step for event in events]))
    print(f"tfevents, {args.points:,} points: read_curves {ours:.3f} s, EventAccumulator (every point) "
          f"{reference:.3f} s (ratio {ours / reference:.2f}; target ≤ 0.3 s); the same points: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
