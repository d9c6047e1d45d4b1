"""Inspection latency: sentence pair -> Inspection (all attentions, hidden states, MLM top-k, NSP).

Prints the median and p90 over timed runs after warm-up, for the mini and base presets at 32 and 128
tokens, on the chosen device (CPU unless --device cuda). Run: python benchmarks/inspection_latency.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from bertcore.analysis.inspection import inspect_encoding
from bertcore.data.masking import mask_like_bert
from bertcore.files.resources import default_corpus_path, default_vocab_path
from bertcore.models.bert import BertForPreTraining
from bertcore.models.config import preset
from bertcore.tokenization.wordpiece import BertTokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--presets", nargs="+", default=["mini", "base"])
    parser.add_argument("--lengths", nargs="+", type=int, default=[32, 128])
    args = parser.parse_args()

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    words = default_corpus_path().read_text(encoding="utf-8").split()
    text_a, text_b = " ".join(words[:400]), " ".join(words[400:800])
    print(f"device={args.device} torch={torch.__version__} threads={torch.get_num_threads()}")
    print(f"{'preset':>7} {'tokens':>6} {'median ms':>10} {'p90 ms':>8}")
    for name in args.presets:
        torch.manual_seed(0)
        model = BertForPreTraining(preset(name, vocab_size=tokenizer.vocab_size)).to(args.device).eval()
        for length in args.lengths:
            encoding = tokenizer.encode(text_a, text_b, max_length=length)
            masking = mask_like_bert(encoding, tokenizer, seed=0)
            for _ in range(3):
                inspect_encoding(model, tokenizer, encoding, masking=masking)
            timings = []
            for _ in range(args.repeats):
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                start = time.perf_counter()
                inspect_encoding(model, tokenizer, encoding, masking=masking)  # ends with .cpu(): synchronised
                timings.append((time.perf_counter() - start) * 1000)
            timings.sort()
            p90 = timings[int(0.9 * (len(timings) - 1))]
            print(f"{name:>7} {len(encoding):>6} {statistics.median(timings):>10.1f} {p90:>8.1f}")


if __name__ == "__main__":
    main()
