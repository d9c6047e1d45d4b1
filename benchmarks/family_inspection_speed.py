"""Inspection forward of bertcore's families against transformers' eager classes, on the same CPU.

    python benchmarks/family_inspection_speed.py [--families modernbert roberta] [--lengths 128 512]
                                                 [--repeats 10] [--threads N]

Both models of a family hold the same random weights at the base size (ModernBERT-base: 22 layers, 768 wide, 12
heads, GeGLU 1152, local window 128 on two layers of three; RoBERTa-base: 12 layers, 768 wide, 12 heads, FFN
3072, 50265 tokens, 514 positions) and run one sequence with every attention map and hidden state, as the
inspector asks. The two alternate within each repeat (which goes first alternates too), so that load on a shared
machine falls on both alike; medians are printed with their ratio (ours / transformers: below 1.0 is faster), the
ratio of the fastest runs (steadier under load), and the largest logit difference as a check that both computed
the same thing, and the ratio of the CPU time both used (all threads; what waiting for a busy core does not
inflate). The 1-minute load average is printed before and after: on a shared machine read the ratios, not the
milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM

FAMILIES = ("modernbert", "roberta")


def load_average() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else f"{os.getloadavg()}"


def timed(forward, cpu_ms: list[float]) -> float:
    """Wall-clock ms of one call; its CPU ms (all threads) is appended to cpu_ms."""
    start, cpu_start = time.perf_counter(), time.process_time()
    forward()
    cpu_ms.append((time.process_time() - cpu_start) * 1000)
    return (time.perf_counter() - start) * 1000


def compare(ours, reference, input_ids: torch.Tensor, repeats: int
            ) -> tuple[list[float], list[float], float, float]:
    """(ours ms per repeat, transformers ms per repeat, largest logit difference, ratio of their total CPU time)
    of the inspection forward."""
    attention_mask = torch.ones_like(input_ids)
    outputs = {}

    def run_ours():
        outputs["ours"] = ours(input_ids, attention_mask=attention_mask, output_attentions=True,
                               output_hidden_states=True)

    def run_reference():
        outputs["reference"] = reference(input_ids, attention_mask=attention_mask, output_attentions=True,
                                         output_hidden_states=True)

    ours_ms, reference_ms = [], []
    ours_cpu, reference_cpu = [], []
    with torch.inference_mode():
        for _ in range(2):  # warm-up: allocator, kernels picked for these shapes
            run_ours()
            run_reference()
        for repeat in range(repeats):
            if repeat % 2:
                reference_ms.append(timed(run_reference, reference_cpu))
                ours_ms.append(timed(run_ours, ours_cpu))
            else:
                ours_ms.append(timed(run_ours, ours_cpu))
                reference_ms.append(timed(run_reference, reference_cpu))
    difference = (outputs["ours"].logits - outputs["reference"].logits).abs().max().item()
    return ours_ms, reference_ms, difference, sum(ours_cpu) / sum(reference_cpu)


def base_models(family: str, transformers) -> tuple[torch.nn.Module, torch.nn.Module, int]:
    """(ours, transformers' eager model with the same weights, vocab size) at the family's base size."""
    torch.manual_seed(0)
    if family == "modernbert":
        config = ModernBertConfig()  # transformers' defaults: the ModernBERT-base layout
        ours = ModernBertForMaskedLM(config).eval()
        reference_values = {key: value for key, value in config.to_dict().items() if key != "model_type"}
        reference_config = transformers.ModernBertConfig(**reference_values, attn_implementation="eager")
        reference = transformers.ModernBertForMaskedLM(reference_config).eval()
    else:
        config = RobertaConfig()  # roberta-base's sizes
        ours = RobertaForMaskedLM(config).eval()
        reference_config = transformers.RobertaConfig(**config.to_dict(), attn_implementation="eager")
        reference = transformers.RobertaForMaskedLM(reference_config).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    if unexpected or any(not name.endswith(("position_ids", "token_type_ids")) for name in missing):
        raise SystemExit(f"{family}: the state dicts differ: missing {missing}, unexpected {unexpected}")
    return ours, reference, config.vocab_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--lengths", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    torch.set_num_threads(args.threads)
    print(f"torch={torch.__version__} transformers={transformers.__version__} threads={torch.get_num_threads()} "
          f"cpu={os.cpu_count()} repeats={args.repeats}")
    print(f"loadavg before: {load_average()}")
    print(f"{'family':>10} {'tokens':>6} {'ours ms':>9} {'transformers ms':>16} {'ratio':>6} {'best-of ratio':>14} "
          f"{'CPU-time ratio':>15} {'max |Δ logit|':>14}")
    for family in args.families:
        ours, reference, vocab_size = base_models(family, transformers)
        for length in args.lengths:
            # ids from 3 up: none is RoBERTa's padding id (1), which would shift its positions
            input_ids = torch.randint(3, vocab_size, (1, length), generator=torch.Generator().manual_seed(length))
            ours_ms, reference_ms, difference, cpu_ratio = compare(ours, reference, input_ids, args.repeats)
            ours_median, reference_median = statistics.median(ours_ms), statistics.median(reference_ms)
            best_ratio = min(ours_ms) / min(reference_ms)  # the least disturbed run of each: steadier under load
            print(f"{family:>10} {length:>6} {ours_median:>9.1f} {reference_median:>16.1f} "
                  f"{ours_median / reference_median:>6.2f} {best_ratio:>14.2f} {cpu_ratio:>15.2f} {difference:>14.2e}")
        del ours, reference
    print(f"loadavg after: {load_average()}")


if __name__ == "__main__":
    main()
