"""Peak GPU memory of one pretraining step per batch size, the largest batch that fits, and what the user sees
when a batch does not.

One step is the training loop's: zero_grad(set_to_none) -> bertcore BertForPreTraining forward with MLM + NSP
labels under bf16 autocast -> backward -> clip grad norm 1.0 -> the fused AdamW of
bertcore.training.loop.make_optimizer, on full-length random batches (benchmarks.train_throughput's
full_length_batches: no padding, 15% of positions labelled). For each sequence length the batch size doubles
from --start until the device runs out of memory (or --max-batch, or the time budget). Each size gets one untimed
step, then torch.cuda.reset_peak_memory_stats and --steps timed steps: the peak of torch.cuda.max_memory_allocated
(weights, gradients, Adam's moments and the step's activations) and the median real tokens/s. Everything of a
size is freed before the next (del, gc.collect, torch.cuda.empty_cache). Then a bisection between the last size
that fit and the first that did not (one untimed step each, multiples of 8) gives the largest batch that fits.
Each sequence length gets an even share of --time-budget: no new size starts once its share is spent.

Last, the user's path: bertcore.training.pretraining.Trainer (default corpus, assets vocabulary of 8,000 words,
one step) with twice the smallest batch that did not fit (its smaller vocabulary needs less memory), and the
OutOfMemoryTrainingError message it raises.

    python benchmarks/gpu_memory.py --device cuda                           # base at 128 and 512, ≤ ~60 s
    python benchmarks/gpu_memory.py --device cpu --preset tiny --max-batch 64   # dry run: no OOM, RSS instead

On the CPU there is no per-step peak to reset: the process's peak RSS so far (ru_maxrss) is printed instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import synchronize
from benchmarks.train_throughput import full_length_batches, training_step
from bertcore.models.bert import BertForPreTraining
from bertcore.models.config import preset
from bertcore.training.loop import is_out_of_memory, make_optimizer, weight_decay_groups

GIB = 1024 ** 3


class StepMeasure:
    """A model and its optimizer on the device, stepping batches of any size; frees what a size left behind."""

    def __init__(self, preset_name: str, device: torch.device, dtype: torch.dtype):
        torch.manual_seed(0)
        self.config = preset(preset_name)
        self.model = BertForPreTraining(self.config).to(device).train()
        self.optimizer = make_optimizer(weight_decay_groups(self.model, 0.01), lr=1e-4)
        self.device, self.dtype = device, dtype

    def _step(self, batch: dict[str, torch.Tensor]) -> None:
        training_step(self.model, self.optimizer, batch, self.device, self.dtype)

    def free(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def measure(self, batch_size: int, seq_len: int, steps: int) -> tuple[float | None, float | None] | None:
        """(peak bytes or None on the CPU, median real tokens/s or None when steps = 0) of `steps` timed steps after
        one untimed step; None when the device ran out of memory."""
        out_of_memory = False
        try:
            batches = [{name: tensor.to(self.device) for name, tensor in batch.items()}
                       for batch in full_length_batches(self.config.vocab_size, batch_size, seq_len, count=2)]
            self._step(batches[0])
            synchronize(self.device)
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)
            seconds = []
            for index in range(steps):
                start = time.perf_counter()
                self._step(batches[index % 2])
                synchronize(self.device)
                seconds.append(time.perf_counter() - start)
        except RuntimeError as error:
            # cuBLAS reports a failed workspace allocation in its own words
            if not (is_out_of_memory(error) or "ALLOC_FAILED" in str(error)):
                raise
            out_of_memory = True  # the error (and the activations its traceback holds) goes with this block
        batches = None  # this size's batches go before the next size's are made
        self.free()
        if out_of_memory:
            return None
        peak = torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None
        return peak, batch_size * seq_len / statistics.median(seconds) if seconds else None


def peak_text(peak: float | None) -> str:
    if peak is not None:
        return f"{peak / GIB:.2f} GiB"
    return f"n/a (process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GiB)"


def ladder(measure: StepMeasure, seq_len: int, args, deadline: float) -> tuple[int | None, int | None]:
    """Print each doubling's peak and rate; (largest size that fit, smallest that did not or None)."""
    fit, failed, batch_size = None, None, args.start
    print(f"\n| {args.preset} seq {seq_len}: batch | peak memory | real tokens/s |\n|---|---|---|", flush=True)
    while batch_size <= args.max_batch:
        if time.perf_counter() > deadline:
            print(f"(stopped: this length's share of the {args.time_budget:.0f} s time budget is spent)")
            break
        measured = measure.measure(batch_size, seq_len, max(1, args.steps))
        if measured is None:
            print(f"| {batch_size} | out of memory | |", flush=True)
            failed = batch_size
            break
        peak, rate = measured
        print(f"| {batch_size} | {peak_text(peak)} | {rate:,.0f} |", flush=True)
        fit, batch_size = batch_size, batch_size * 2
    return fit, failed


def bisect(measure: StepMeasure, seq_len: int, fit: int, failed: int, rounds: int, deadline: float) -> tuple[int, int]:
    """Narrow (fit, failed) with one step per try, on multiples of 8; the final (fit, failed)."""
    for _ in range(rounds):
        middle = (fit + failed) // 2 // 8 * 8
        if middle <= fit or time.perf_counter() > deadline:
            break
        fits = measure.measure(middle, seq_len, steps=0) is not None
        print(f"  bisect {middle}: {'fits' if fits else 'out of memory'}", flush=True)
        fit, failed = (middle, failed) if fits else (fit, middle)
    return fit, failed


def trainer_message(args, batch_size: int, seq_len: int) -> None:
    """Run the Trainer for one step with `batch_size` and print what it says."""
    from bertcore.files.resources import default_vocab_path
    from bertcore.training.pretraining import OutOfMemoryTrainingError, Trainer, TrainingConfig

    with tempfile.TemporaryDirectory() as folder:
        config = TrainingConfig(out_dir=str(Path(folder) / "run"), preset=args.preset, vocab=str(default_vocab_path()),
                                steps=1, batch_size=batch_size, seq_len=seq_len, device=args.device,
                                precision="bf16" if args.dtype == "bf16" else "fp32", eval_every=0, eval_batches=1,
                                checkpoint_every=0, data_cache=str(Path(folder) / "cache"))
        print(f"\nTrainer ({args.preset}, seq {seq_len}, batch {batch_size}, {args.device}, {config.precision}), "
              f"one step:", flush=True)
        started = time.perf_counter()
        try:
            for stats in Trainer(config).steps():
                print(f"  it fit: step {stats.step}, loss {stats.loss:.3f} — no out-of-memory message to show")
        except OutOfMemoryTrainingError as error:
            print(f"  OutOfMemoryTrainingError: {error}")
        except Exception as error:  # what a user would see instead of the clear message: print it, it is the finding
            print(f"  not the clear message but {type(error).__name__}: {error}")
        print(f"  ({time.perf_counter() - started:.1f} s with the corpus preparation)")
    gc.collect()
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", default="base")
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--start", type=int, default=32, help="first batch size of the doubling ladder")
    parser.add_argument("--max-batch", type=int, default=1 << 16, help="largest batch size tried")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per size (after one untimed)")
    parser.add_argument("--bisect-rounds", type=int, default=5)
    parser.add_argument("--time-budget", type=float, default=40.0,
                        help="seconds for the ladders and bisections of all lengths together, shared evenly")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default=None, help="default: bf16 on CUDA, else fp32")
    parser.add_argument("--trainer-batch", type=int, default=None,
                        help="batch size of the Trainer run (default: twice the last length's smallest that did "
                             "not fit, since its vocabulary is smaller; else --max-batch)")
    parser.add_argument("--no-trainer", action="store_true", help="skip the Trainer run")
    args = parser.parse_args()
    device = torch.device(args.device)
    args.dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    total = f", {torch.cuda.get_device_properties(device).total_memory / GIB:.1f} GiB" if device.type == "cuda" else ""
    print(f"{name}{total}; torch {torch.__version__}; {args.dtype}; load average {os.getloadavg()}")
    measure = StepMeasure(args.preset, device, dtype)
    config = measure.config
    print(f"{args.preset}: {config.num_hidden_layers} layers × {config.hidden_size}, vocab {config.vocab_size}, "
          f"{sum(p.numel() for p in measure.model.parameters()) / 1e6:.1f} M parameters; fused AdamW "
          f"{measure.optimizer.defaults.get('fused')}")
    failed = None
    for seq_len in args.seq_lens:
        deadline = time.perf_counter() + args.time_budget / len(args.seq_lens)  # each length its share
        fit, failed = ladder(measure, seq_len, args, deadline)
        if fit is not None and failed is not None:
            fit, failed = bisect(measure, seq_len, fit, failed, args.bisect_rounds, deadline)
            print(f"largest batch that fits at seq {seq_len}: {fit} (out of memory at {failed})", flush=True)
        elif failed is None:
            print(f"largest batch tried at seq {seq_len}: {fit}, and it fit", flush=True)
        else:
            print(f"even batch {failed} did not fit at seq {seq_len}", flush=True)
    del measure
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if not args.no_trainer:
        trainer_message(args, args.trainer_batch or (2 * failed if failed else args.max_batch), args.seq_lens[-1])
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
