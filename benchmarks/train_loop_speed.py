"""bert-train's own steps, data included, with the coming batches made by worker processes and without.

    python benchmarks/train_loop_speed.py --device cuda --preset base --batch-size 256 --seq-len 128

Each run is a whole `Trainer` (bert-train's loop: the next batch from the prepared corpus, forward, backward,
clipping, update, the step's numbers read back) on the shipped corpus and vocabulary (Tiny Shakespeare, 8,000
words), bf16 autocast on CUDA. Reported per run: the tokens/s and mean step time of its steps after the first
quarter (all their tokens over all their time, from the loop's own step records), and beside them the time the
data pipeline alone takes to make one batch (PretrainingData.train_batch on this CPU, no device work): when that
time is a large share of a step, a loop that makes batches in turn leaves the device idle for it. The runs
alternate (in turn, workers, workers, in turn) so that load from other processes falls on both; the load
average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertcore.files.resources import default_vocab_path
from bertcore.training.pretraining import PretrainingTask, Trainer, TrainingConfig

WORKERS = 2  # batch worker processes in the runs that have them


def run(config: TrainingConfig, ahead: bool, device: str) -> tuple[float, float, float]:
    """Tokens/s and mean ms of the run's steps after the first quarter, and the data pipeline's ms per batch."""
    PretrainingTask.batch_workers = {device.split(":")[0]: WORKERS} if ahead else {}
    trainer = Trainer(config)
    steps = list(trainer.steps())[config.steps // 4:]
    start = time.perf_counter()
    for step in range(1, 9):
        trainer.data.train_batch(config.steps + step, config.batch_size)
    data_ms = (time.perf_counter() - start) / 8 * 1000
    # Totals, not medians of per-step rates: length buckets make one step's batch 6 times another's.
    seconds = sum(s.tokens / s.tokens_per_second for s in steps)
    return sum(s.tokens for s in steps) / seconds, seconds / len(steps) * 1000, data_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=40, help="steps per run")
    parser.add_argument("--pairs", type=int, default=2, help="(in turn, workers) pairs of runs")
    args = parser.parse_args()
    import torch

    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    print(f"{args.preset}, batch {args.batch_size} × {args.seq_len}, {args.steps} steps a run, on {name}; torch "
          f"{torch.__version__}; load {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    # A whole run first warms the device up (kernel selection, the allocator meeting every batch shape: the two
    # H200 tries of 2026-11-26 timed the workers' run first and found it slower); then in turn, workers, workers,
    # in turn, ... so that neither kind always runs first.
    order = [None] + [index % 4 in (1, 2) for index in range(args.pairs * 2)]
    with tempfile.TemporaryDirectory() as folder:
        for index, ahead in enumerate(order):
            config = TrainingConfig(out_dir=str(Path(folder) / f"run{index}"), vocab=str(default_vocab_path()),
                                    preset=args.preset, steps=args.steps,
                                    batch_size=args.batch_size, seq_len=args.seq_len, device=args.device,
                                    eval_every=0, checkpoint_every=0, eval_batches=1)
            rate, step_ms, data_ms = run(config, bool(ahead), args.device)
            if ahead is None:
                continue
            results[ahead].append((rate, step_ms, data_ms))
            print(f"  {f'{WORKERS} batch workers' if ahead else 'batches made in turn':<22} {rate:>12,.0f} tokens/s, "
                  f"{step_ms:.1f} ms a step; the data pipeline alone: {data_ms:.1f} ms a batch", flush=True)

    def median(ahead: bool, index: int) -> float:
        return statistics.median(values[index] for values in results[ahead])

    print(f"  median: workers {median(True, 0):,.0f}, in turn {median(False, 0):,.0f} tokens/s: "
          f"{median(True, 0) / median(False, 0):.2f}×; a step {median(True, 1):.1f} against {median(False, 1):.1f} "
          f"ms, the batch alone {median(False, 2):.1f} ms; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
