"""Is data loading ever the bottleneck? How fast bert-train's own data path makes pretraining batches, on the CPU.

The path timed is the Trainer's (bertcore.training.pretraining.Trainer.train_batch): the default corpus prepared
once into memory-mapped token ids (bertcore.data.prepare.prepare_corpus, here into a fresh temporary cache,
timed apart), then PretrainingData.train_batch(step, batch_size) with the trainer's defaults (length_buckets 8,
token masking at 15%, short_seq_prob 0.1): pairs sampled, collated, padded to the batch's longest, masked.
Each case times --batches consecutive steps (the first pool of a length-bucket group costs the most, so a
whole number of groups is timed) and reports batches/s, real tokens/s and padded positions/s of the CPU side
alone. Compare with the GPU step rate of benchmarks/train_throughput.py at the same sizes: when a GPU step
takes less time than a batch here, the GPU waits for data.

Whether the Trainer overlaps the two: on a GPU, yes. Two worker processes make the coming batches while the
device computes (bertcore.training.batches_ahead, PretrainingTask.batch_workers), which made bert-train's loop 1.40×
faster on an H200 (benchmarks/train_loop_speed.py measures it). On the CPU it makes each batch in turn with the
step, so the time here adds to every step in full. The copy to the device is `non_blocking` from unpinned
memory, which overlaps nothing.

    python benchmarks/data_feed.py                      # base at 128 × 256 and 512 × 64, ≤ 30 s
    python benchmarks/data_feed.py --cases 128x32 --batches 8   # a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import load_average
from bertcore.data.batches import PretrainingData
from bertcore.data.prepare import prepare_corpus
from bertcore.data.sources import CorpusSource
from bertcore.files.resources import default_corpus_path, default_vocab_path
from bertcore.tokenization.wordpiece import BertTokenizer
from bertcore.training.settings import TrainingConfig


def parse_case(text: str) -> tuple[int, int]:
    """'128x256' -> (sequence length 128, batch size 256)."""
    try:
        seq_len, batch_size = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--cases takes SEQxBATCH items such as 128x256; got {text!r}") from None
    return seq_len, batch_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=["128x256", "512x64"], help="SEQxBATCH (base's sizes)")
    parser.add_argument("--batches", type=int, default=32, help="timed consecutive steps per case")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    defaults = TrainingConfig()
    print(f"torch {torch.__version__}; CPU only ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads); "
          f"load average {load_average()}")
    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        prepared = prepare_corpus(CorpusSource.open(default_corpus_path()), tokenizer, cache_dir=cache)
        print(f"corpus {default_corpus_path().name}: prepared in {time.perf_counter() - started:.1f} s "
              f"({prepared.num_tokens:,} tokens; cached after the first run of bert-train)")
        print(f"trainer defaults: length_buckets {defaults.length_buckets}, masking {defaults.masking!r}, "
              f"mlm_probability {defaults.mlm_probability}, short_seq_prob {defaults.short_seq_prob}")
        print("\n| seq × batch | batches/s | real tokens/s | padded positions/s | ms per batch (median, max) | "
              "real share |")
        print("|---|---|---|---|---|---|")
        for case in args.cases:
            seq_len, batch_size = parse_case(case)
            data = PretrainingData(prepared, tokenizer, seq_len=seq_len, seed=defaults.seed,
                                   heldout_fraction=defaults.heldout_fraction,
                                   short_seq_prob=defaults.short_seq_prob,
                                   mlm_probability=defaults.mlm_probability, length_buckets=defaults.length_buckets,
                                   masking=defaults.masking)
            data.train_batch(10_000, batch_size)  # first use of the memory map and the samplers, untimed
            seconds, real, padded = [], 0, 0
            count = max(defaults.length_buckets, args.batches // defaults.length_buckets * defaults.length_buckets)
            started = time.perf_counter()
            for step in range(1, count + 1):
                start = time.perf_counter()
                batch = data.train_batch(step, batch_size)
                seconds.append(time.perf_counter() - start)
                real += batch.num_tokens
                padded += batch.input_ids.numel()
            total = time.perf_counter() - started
            print(f"| {seq_len} × {batch_size} | {count / total:,.1f} | {real / total:,.0f} | {padded / total:,.0f} | "
                  f"{1000 * statistics.median(seconds):.1f}, {1000 * max(seconds):.1f} | {real / padded:.1%} |",
                  flush=True)
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
