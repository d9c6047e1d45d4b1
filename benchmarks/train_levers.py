"""What each CPU lever gives bertcore's pretraining throughput (issue 18 asks ≥ 2.0× transformers at fp32).

Each variant is a twin of the same bertcore model (same weights, same batches), timed interleaved with the others in
one process, as train_throughput.py times bertcore against transformers:

  bertcore              as shipped: every dropout (hidden and attention) keeps a value where 16 random bits (four to
                        each 64-bit draw) are ≥ p · 2^16 (bertcore.models.parts), and CPU training attention runs
                        the explicit softmax path so that its probabilities go through that dropout.
  float32 uniform mask  the previous mask: one float32 uniform draw per value, kept where it is ≥ p.
  torch's dropout       the lever undone: nn.Dropout's bernoulli_ mask, and SDPA with dropout_p (its math
                        fallback on the CPU, which draws its own bernoulli_ mask and guards fully-masked rows).
  + fused QKV           as shipped, plus one (N, D) × (D, 3D) matmul on the concatenated query/key/value weights
                        (concatenated at forward time, so parameter names and state dicts stay HF's).
  no dropout (ceiling)  both dropout probabilities 0: SDPA's fused CPU kernel, which refuses dropout > 0, runs. Not a
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


def torch_dropout_forward(self: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    return F.dropout(x, self.p, self.training)


def uniform_dropout_forward(self: torch.nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    if not self.training or self.p == 0.0:
        return x
    keep = torch.rand(x.shape, dtype=torch.float32).ge_(self.p).mul_(1.0 / (1.0 - self.p))  # 1 / (1 - p) or 0
    return x * keep.to(x.dtype)


def attention_forward(self: BertSelfAttention, hidden_states, rows, key_padding_mask, head_mask, output_attentions,
                      query_states=None, lever: str = ""):
    if output_attentions or head_mask is not None or not self.training:
        return BertSelfAttention.forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions,
                                         query_states)
    if lever == "fused QKV" and query_states is None:
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])  # (3D, D)
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        query, key, value = (self.split_heads(part) for part in rows.pad(F.linear(hidden_states, weight, bias))
                             .chunk(3, dim=-1))  # each (B, nh, T, hs)
    else:
        query = self.split_heads(rows.pad(self.query(hidden_states)) if query_states is None
                                 else self.query(query_states))  # (B, nh, M, hs)
        key = self.split_heads(rows.pad(self.key(hidden_states)))  # (B, nh, T, hs)
        value = self.split_heads(rows.pad(self.value(hidden_states)))
    if lever == "torch's dropout":
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=key_padding_mask,
                                                 dropout_p=self.dropout_prob)
    else:
        scores = (query * (1.0 / math.sqrt(self.head_dim))) @ key.transpose(-2, -1)  # (B, nh, M, T)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask, torch.finfo(scores.dtype).min)
        context = self.dropout(scores.softmax(dim=-1)) @ value  # (B, nh, M, hs)
    context = context.transpose(1, 2).flatten(2)  # (B, M, D)
    return (context if query_states is not None else rows.unpad(context)), None


def with_lever(model: BertForPreTraining, lever: str) -> BertForPreTraining:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and lever == "torch's dropout":
            module.forward = types.MethodType(torch_dropout_forward, module)
        elif isinstance(module, torch.nn.Dropout) and lever == "float32 uniform mask":
            module.forward = types.MethodType(uniform_dropout_forward, module)
        elif isinstance(module, BertSelfAttention):
            module.forward = types.MethodType(
                lambda self, *args, **kwargs: attention_forward(self, *args, lever=lever, **kwargs), module)
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
        Runner("bertcore", base, cpu, torch.float32, batches),
        Runner("torch's dropout (the lever undone)", with_lever(twin(), "torch's dropout"), cpu, torch.float32,
               batches),
        Runner("float32 uniform mask (the last lever)", with_lever(twin(), "float32 uniform mask"), cpu,
               torch.float32, batches),
        Runner("+ fused QKV", with_lever(twin(), "fused QKV"), cpu, torch.float32, batches),
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
