"""ModernBERT's training path at 512 and 8,192 tokens: bertcore against transformers' SDPA model, same weights.

Why a script of its own rather than a mode of family_inspection_speed.py: that one times the inspector's forward
(every attention map and hidden state, one sequence, eager attention); this one times what training runs — the
fused attention kernel, no maps, batches with padding, forward and backward — where bertcore's unpadded path
(`skip_padding`: the projections, GeGLU and norms of the real tokens only, taken with sparse-prediction labels)
is meant to pay. transformers' ModernBertForMaskedLM runs with attn_implementation="sdpa" (the padded grid;
flash_attention_2, its unpadded path, is not installed on the GPU machine).

Both models: ModernBERT-base's layout (bertcore.models.modernbert.ModernBertConfig's defaults: 22 layers,
768 wide, 12 heads, GeGLU 1152, 8,192 positions, local window 128 on two layers of three, vocab 50,368), the same
random weights, sparse_prediction on (the released training recipe: the MLM head runs on the labelled 15% only).

Cases (SEQxBATCH, "pad" = lengths drawn uniformly from SEQ/8..SEQ, padded to the longest):
  512x16, 8192x1, 512x16pad
For each case, interleaved (which model goes first alternates), medians of --repeats after --warmup:
  forward  — inference_mode, no labels, no attention maps;
  train    — forward with MLM labels (15% of the real tokens) + backward (no optimizer step: the same for both);
real (non-pad) tokens/s of each, the ratio bertcore / transformers (above 1 is faster), and, in fp32 on up to two
rows of the case's batch, the largest logit difference over real positions (a check both computed the same).
A case that runs out of memory, or fails otherwise, says so in its row and the next case runs.

    python benchmarks/modernbert_long.py --device cuda                      # bf16 autocast, ≤ ~60 s on an H200
    python benchmarks/modernbert_long.py --device cpu --tiny                # dry run: a tiny config, short lengths
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
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks._common import autocast, synchronize
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.training.loop import is_out_of_memory

TINY = {"vocab_size": 101, "hidden_size": 48, "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4,
        "local_attention": 16, "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "cls_token_id": 1,
        "eos_token_id": 2, "sep_token_id": 2}
TINY_CASES = ["64x4", "256x1", "64x4pad"]


def parse_case(text: str) -> tuple[int, int, bool]:
    """'512x16pad' -> (512, 16, True)."""
    padded = text.endswith("pad")
    try:
        seq_len, batch_size = (int(part) for part in text.removesuffix("pad").split("x"))
    except ValueError:
        raise SystemExit(f"--cases takes SEQxBATCH or SEQxBATCHpad, e.g. 512x16pad; got {text!r}") from None
    return seq_len, batch_size, padded


def make_batch(config: ModernBertConfig, seq_len: int, batch_size: int, padded: bool, seed: int
               ) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    if padded:
        lengths = torch.randint(max(1, seq_len // 8), seq_len + 1, (batch_size,), generator=generator)
        lengths[0] = seq_len  # the batch is padded to its longest: make that the case's length
    else:
        lengths = torch.full((batch_size,), seq_len)
    attention_mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()  # (B, T)
    input_ids = torch.randint(5, min(config.vocab_size, 50280), (batch_size, seq_len), generator=generator)
    input_ids = input_ids.masked_fill(~attention_mask.bool(), config.pad_token_id)
    picked = (torch.rand(batch_size, seq_len, generator=generator) < 0.15) & attention_mask.bool()
    labels = torch.where(picked, input_ids, torch.full_like(input_ids, -100))
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def twin_models(config: ModernBertConfig):
    """(bertcore model, transformers' SDPA model with the same weights)."""
    import transformers

    torch.manual_seed(0)
    ours = ModernBertForMaskedLM(config)
    values = {key: value for key, value in config.to_dict().items() if key != "model_type"}
    reference = transformers.ModernBertForMaskedLM(
        transformers.ModernBertConfig(**values, attn_implementation="sdpa"))
    reference.load_state_dict(ours.state_dict(), strict=True)
    return ours, reference


class Timer:
    """Timed runs of one model on one batch: forward-only and forward + backward."""

    def __init__(self, model, batch, device: torch.device, dtype: torch.dtype):
        self.model, self.batch, self.device, self.dtype = model, batch, device, dtype
        self.real_tokens = int(batch["attention_mask"].sum())

    def forward(self) -> float:
        inputs = {k: v for k, v in self.batch.items() if k != "labels"}
        self.model.eval()
        synchronize(self.device)
        start = time.perf_counter()
        with torch.inference_mode(), autocast(self.device, self.dtype):
            self.model(**inputs)
        synchronize(self.device)
        return self.real_tokens / (time.perf_counter() - start)

    def train(self) -> float:
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        synchronize(self.device)
        start = time.perf_counter()
        with autocast(self.device, self.dtype):
            loss = self.model(**self.batch).loss
        loss.backward()
        synchronize(self.device)
        rate = self.real_tokens / (time.perf_counter() - start)
        self.model.zero_grad(set_to_none=True)
        return rate


def interleaved(ours: Timer, reference: Timer, kind: str, warmup: int, repeats: int) -> tuple[float, float]:
    """Median tokens/s of (ours, reference) for `kind` ("forward" or "train")."""
    run_ours, run_reference = getattr(ours, kind), getattr(reference, kind)
    for _ in range(warmup):
        run_ours()
        run_reference()
    ours_rates, reference_rates = [], []
    for repeat in range(repeats):
        if repeat % 2:
            reference_rates.append(run_reference())
            ours_rates.append(run_ours())
        else:
            ours_rates.append(run_ours())
            reference_rates.append(run_reference())
    return statistics.median(ours_rates), statistics.median(reference_rates)


def fp32_difference(ours, reference, batch: dict[str, torch.Tensor]) -> float:
    """Largest |logit difference| over the real positions of up to two rows, both models in fp32."""
    rows = {k: v[:2] for k, v in batch.items() if k != "labels"}
    with torch.inference_mode():
        ours.eval(), reference.eval()
        real = rows["attention_mask"].bool()
        difference = (ours(**rows).logits[real].float() - reference(**rows).logits[real].float()).abs().max()
    return difference.item()


def failure(error: Exception) -> str:
    """A table cell for a run that raised: "out of memory", or the error's type and first line."""
    if is_out_of_memory(error):
        return "out of memory"
    return f"failed: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:160]}"


def free(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default=None, help="default: bf16 on CUDA, else fp32")
    parser.add_argument("--cases", nargs="+", default=None, help="SEQxBATCH[pad] (default: 512x16 8192x1 512x16pad)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help=f"a tiny config ({TINY}) for a CPU dry run")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    args.dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    cases = args.cases or (TINY_CASES if args.tiny else ["512x16", "8192x1", "512x16pad"])
    import transformers

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    print(f"{name}; torch {torch.__version__}; transformers {transformers.__version__}; {args.dtype}; "
          f"load average {os.getloadavg()}")
    config = ModernBertConfig(**(TINY if args.tiny else {}), sparse_prediction=True)
    ours, reference = twin_models(config)
    ours, reference = ours.to(device), reference.to(device)
    print(f"ModernBERT {'tiny' if args.tiny else 'base'}: {config.num_hidden_layers} layers × {config.hidden_size}, "
          f"{config.num_attention_heads} heads, GeGLU {config.intermediate_size}, local window "
          f"{config.local_attention} on layers {list(ours.model.local_layers())[:4]}…, vocab {config.vocab_size}; "
          f"transformers with attn_implementation={reference.config._attn_implementation!r}")
    print(f"medians of {args.repeats} after {args.warmup} warm-up runs; tokens/s count real (non-pad) tokens\n")
    print("| case | real tokens | pass | bertcore tokens/s | transformers tokens/s | ratio | fp32 max abs Δ logit |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        seq_len, batch_size, padded = parse_case(case)
        batch = {k: v.to(device) for k, v in make_batch(config, seq_len, batch_size, padded,
                                                         seed=seq_len).items()}
        ours_timer, reference_timer = Timer(ours, batch, device, dtype), Timer(reference, batch, device, dtype)
        started = time.perf_counter()
        try:
            difference = f"{fp32_difference(ours, reference, batch):.2e}"
        except Exception as error:  # one failing case must not cost the others: print it, it is the finding
            difference = failure(error)
        free(device)
        for kind in ("forward", "train"):
            try:
                ours_rate, reference_rate = interleaved(ours_timer, reference_timer, kind, args.warmup, args.repeats)
                cells = f"{ours_rate:,.0f} | {reference_rate:,.0f} | {ours_rate / reference_rate:.2f}×"
            except Exception as error:
                cells = f"{failure(error)} | | "
            ours.zero_grad(set_to_none=True), reference.zero_grad(set_to_none=True)
            free(device)
            print(f"| {case} | {ours_timer.real_tokens:,} | {kind} | {cells} | {difference} |", flush=True)
        print(f"  ({case}: {time.perf_counter() - started:.1f} s)", flush=True)
        del batch, ours_timer, reference_timer
        free(device)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
