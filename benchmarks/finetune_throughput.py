"""Fine-tuning throughput: bertcore's BertForSequenceClassification against transformers' on the same weights.

One training step = zero_grad(set_to_none) -> forward with class labels -> backward -> clip grad norm 1.0 ->
AdamW step (the same fused AdamW for both, from bertcore.training.pretraining.make_optimizer). Batches are what a
fine-tuning loader gives: sequences of random length (--min-len..--max-len tokens, [CLS] first), padded to the
batch's longest, random labels; both models get the same batches. Steps are interleaved (a few of one, then a
few of the other) so that load from other processes hits both alike. Reported: the median over timed steps
(after warm-up) of real (non-pad) tokens per second, the ratio, and the load average before and after.

    .venv/bin/python benchmarks/finetune_throughput.py                     # mini, vocab 8000, batch 32, 24..128
    .venv/bin/python benchmarks/finetune_throughput.py --threads 1          # steadier on a shared machine
    .venv/bin/python benchmarks/finetune_throughput.py --device cuda --dtype bf16

Where bertcore's speed comes from: the classifier reads only the pooled [CLS] vector, so the last layer runs
its queries and feed-forward at [CLS] alone, and no layer runs its dense work (projections, feed-forward,
LayerNorms) on padding (bertcore.models.parts.TokenRows); both are exact.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import load_average
from benchmarks.train_throughput import Runner, time_interleaved  # the pretraining benchmark's timed step
from bertcore.models.config import preset
from bertcore.models.task_heads import BertForSequenceClassification


def padded_batches(vocab_size: int, batch_size: int, min_len: int, max_len: int, num_labels: int, count: int,
                   seed: int = 0) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        lengths = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)
        seq_len = int(lengths.max())
        attention_mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()  # (B, T)
        input_ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=generator) * attention_mask
        input_ids[:, 0] = 2  # [CLS]
        token_type_ids = ((torch.arange(seq_len)[None, :] >= lengths[:, None] // 2).long()) * attention_mask
        batches.append({
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            "labels": torch.randint(0, num_labels, (batch_size,), generator=generator),
        })
    return batches


def transformers_model(config, state_dict):
    import transformers

    hf_config = transformers.BertConfig(**config.to_dict())  # default attention (SDPA), as a user gets it
    model = transformers.BertForSequenceClassification(hf_config)
    model.load_state_dict(state_dict, strict=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--num-labels", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--min-len", type=int, default=24)
    parser.add_argument("--max-len", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds of --per-round timed steps")
    parser.add_argument("--per-round", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16 = autocast (CUDA)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    config = preset(args.preset, vocab_size=args.vocab_size, num_labels=args.num_labels,
                    max_position_embeddings=max(512, args.max_len))
    batches = padded_batches(args.vocab_size, args.batch_size, args.min_len, args.max_len, args.num_labels, count=8)
    torch.manual_seed(0)
    ours = BertForSequenceClassification(config)
    import transformers

    state = {name: tensor.clone() for name, tensor in ours.state_dict().items()}
    runners = [Runner("bertcore", ours, device, dtype, batches),
               Runner(f"transformers {transformers.__version__}", transformers_model(config, state), device, dtype,
                      batches)]

    real = statistics.mean(int(b["attention_mask"].sum()) for b in batches) / args.batch_size
    padded = statistics.mean(b["input_ids"].size(1) for b in batches)
    load_before = load_average()
    print(f"{args.preset} (vocab {args.vocab_size}, hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
          f"{config.num_attention_heads} heads, intermediate {config.intermediate_size}), sequence classification "
          f"with {args.num_labels} labels; batch {args.batch_size}, lengths {args.min_len}..{args.max_len} padded to "
          f"the batch's longest ({real:.1f} real of {padded:.1f} positions per sequence); {device} "
          f"({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}), {args.dtype}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}", flush=True)
    time_interleaved(runners, args.warmup, args.rounds, args.per_round)
    ours_runner, reference_runner = runners
    print()
    print(f"| model | real tokens/s (median of {len(ours_runner.rates)}) | range |")
    print("|---|---|---|")
    for runner in runners:
        print(f"| {runner.name} | {runner.median:,.0f} | {min(runner.rates):,.0f}–{max(runner.rates):,.0f} |")
    print(f"| **ratio** | **{ours_runner.median / reference_runner.median:.2f}×** | |")
    print(f"\nload average (1, 5, 15 min): {load_before} before, {load_average()} after")


if __name__ == "__main__":
    main()
