"""Which CPU levers would move bertcore's pretraining throughput (issue 18 asks ≥ 2.0× transformers at fp32).

Each lever is applied to a twin of the same bertcore model (same weights, same batches) and timed interleaved with
the unchanged model in one process, as train_throughput.py times bertcore against transformers:

  rand-mask dropout    every dropout (hidden and attention) keeps a position where a uniform draw is ≥ p, instead
                       of torch's bernoulli_ (1.7× faster alone on the CPU); attention then runs the explicit
                       softmax path, since SDPA draws its own mask.
  + fused QKV          one (N, D) × (D, 3D) matmul on the concatenated query/key/value weights (concatenated at
                       forward time, so parameter names and state dicts stay HF's).
  no dropout (ceiling) both dropout probabilities 0: SDPA's fused CPU kernel, which refuses dropout > 0, runs. Not a
                       lever (it changes the recipe); it bounds what any dropout or attention lever can give.

    .venv/bin/python benchmarks/train_levers.py --threads 1
"""

from __future__ import annotations

import argparse
import math
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import load_average
from train_throughput import Runner, full_length_batches, time_interleaved

from bertcore.models.bert import BertForPreTraining, BertSelfAttention
from bertcore.models.config import preset


def rand_mask_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    return x * (torch.rand_like(x) >= p) * (1.0 / (1.0 - p))


def dropout_forward(self: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    return rand_mask_dropout(x, self.p) if self.training and self.p > 0 else x


def attention_forward(self: BertSelfAttention, hidden_states, rows, key_padding_mask, head_mask, output_attentions,
                      query_states=None, fused_qkv: bool = False):
    if output_attentions or head_mask is not None or not self.training:
        return BertSelfAttention.forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions,
                                         query_states)
    if fused_qkv and query_states is None:
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])  # (3D, D)
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        query, key, value = (self.split_heads(part) for part in rows.pad(F.linear(hidden_states, weight, bias))
                             .chunk(3, dim=-1))  # each (B, nh, T, hs)
    else:
        query = self.split_heads(rows.pad(self.query(hidden_states)) if query_states is None
                                 else self.query(query_states))  # (B, nh, M, hs)
        key = self.split_heads(rows.pad(self.key(hidden_states)))  # (B, nh, T, hs)
        value = self.split_heads(rows.pad(self.value(hidden_states)))
    scores = (query * (1.0 / math.sqrt(self.head_dim))) @ key.transpose(-2, -1)  # (B, nh, M, T)
    if key_padding_mask is not None:
        scores = scores.masked_fill(~key_padding_mask, torch.finfo(scores.dtype).min)
    context = rand_mask_dropout(scores.softmax(dim=-1), self.dropout_prob) @ value  # (B, nh, M, hs)
    context = context.transpose(1, 2).flatten(2)  # (B, M, D)
    return (context if query_states is not None else rows.unpad(context)), None


def with_levers(model: BertForPreTraining, fused_qkv: bool) -> BertForPreTraining:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.forward = types.MethodType(dropout_forward, module)
        elif isinstance(module, BertSelfAttention):
            module.forward = types.MethodType(
                lambda self, *args, **kwargs: attention_forward(self, *args, fused_qkv=fused_qkv, **kwargs), module)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    def config(dropout: float):
        return preset(args.preset, vocab_size=args.vocab_size, hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout)

    batches = full_length_batches(args.vocab_size, args.batch_size, args.seq_len, count=4)
    torch.manual_seed(0)
    base = BertForPreTraining(config(0.1))

    def twin(dropout: float = 0.1) -> BertForPreTraining:
        model = BertForPreTraining(config(dropout))
        model.load_state_dict(base.state_dict())
        return model

    cpu = torch.device("cpu")
    runners = [
        Runner("bertcore today", base, cpu, torch.float32, batches),
        Runner("rand-mask dropout", with_levers(twin(), fused_qkv=False), cpu, torch.float32, batches),
        Runner("rand-mask dropout + fused QKV", with_levers(twin(), fused_qkv=True), cpu, torch.float32, batches),
        Runner("no dropout (ceiling, not a lever)", twin(0.0), cpu, torch.float32, batches),
    ]
    print(f"{args.preset}, batch {args.batch_size} × {args.seq_len} full batches, {torch.get_num_threads()} threads; "
          f"{load_average()}", flush=True)
    time_interleaved(runners, warmup=2, rounds=args.rounds, per_round=2)
    for runner in runners:
        print(f"  {runner.name:<36} {runner.median:>8,.0f} tokens/s  ({runner.median / runners[0].median:.3f}×)")
    print(f"  {load_average()}")


if __name__ == "__main__":
    main()
