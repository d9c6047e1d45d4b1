"""Demo fine-tuning tasks from the shipped default model: the held-out metric against training wall time.

Runs `bertcore.training.finetuning.Finetuner` on each demo task named (default: mood and next-line) with its measured
settings (bertcore.training.settings.DEMO_SETTINGS) or the ones given, evaluating on the whole eval set
every --eval-every steps, and prints step, training seconds (evaluation excluded, as the run's elapsed_seconds
counts it) and the task's metrics, then the load average before and after (the machine may be shared: compare
runs of one sitting).

    .venv/bin/python benchmarks/finetune_demos.py                                  # mood and next-line
    .venv/bin/python benchmarks/finetune_demos.py --demo mood --lr 1e-4 --steps 600 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import load_average
from bertcore.training.finetuning import Finetuner
from bertcore.training.settings import DEMO_SETTINGS, FinetuneConfig


def run(demo: str, args: argparse.Namespace) -> None:
    changes = {name: getattr(args, name) for name in ("steps", "lr", "batch_size", "seq_len", "seed")
               if getattr(args, name) is not None}
    with tempfile.TemporaryDirectory() as out:
        config = FinetuneConfig.for_demo(demo, out_dir=out, eval_every=args.eval_every, checkpoint_every=0,
                                         **changes)
        started = time.perf_counter()
        with Finetuner(config) as finetuner:
            settings = finetuner.config
            print(f"\n{demo}: {settings.steps} steps × batch {settings.batch_size}, seq_len {settings.seq_len}, "
                  f"lr {settings.lr:g}, warm-up {settings.warmup_steps}, seed {settings.seed}; set-up "
                  f"{time.perf_counter() - started:.1f} s; load {load_average()}")
            print(f"{'step':>6} {'epoch':>6} {'train s':>8} {'eval loss':>9}  metrics")
            for stats in finetuner.steps():
                if stats.eval is not None:
                    metrics = "  ".join(f"{name} {value:.3f}" for name, value in stats.eval.metrics.items())
                    print(f"{stats.step:>6} {stats.epoch:>6.2f} {stats.elapsed_seconds:>8.1f} "
                          f"{stats.eval.loss:>9.4f}  {metrics}", flush=True)
        print(f"{demo}: wall time {time.perf_counter() - started:.1f} s (evaluations included); "
              f"load {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", action="append", choices=tuple(DEMO_SETTINGS),
                        help="a demo task; repeat for several (default: mood and next-line)")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPUs; load {load_average()}")
    for demo in args.demo or ["mood", "next-line"]:
        run(demo, args)


if __name__ == "__main__":
    main()
