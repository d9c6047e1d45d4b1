"""Training throughput of bertcore against transformers.BertForPreTraining: same config, batches, AdamW, device.

One training step = zero_grad(set_to_none) -> forward with MLM + NSP labels -> backward -> clip grad norm 1.0 ->
AdamW step (the same fused AdamW for both, from bertcore.training.pretraining.make_optimizer; --default-adamw adds a
transformers run with torch.optim.AdamW's default kernel, what a plain transformers script gets on the CPU).
Both models start from the same weights; their steps are interleaved (a few of one, then a few of the other)
so that load from other processes hits both alike. Reported: the median over timed steps (after warm-up) of
real (non-pad) tokens per second, and the ratio; on the CPU also the ratio of tokens per second of the process's
CPU time, which other processes' load stretches far less than wall time (cache sharing aside).

    .venv/bin/python benchmarks/train_throughput.py                       # mini, 32 × 128, full-length batches
    .venv/bin/python benchmarks/train_throughput.py --batches corpus      # Tiny Shakespeare pairs
    .venv/bin/python benchmarks/train_throughput.py --preset base --device cuda --dtype bf16   # + MFU, peak memory
    python benchmarks/train_throughput.py --preset base --vocab-size 30522 --batches corpus --seq-len 512 \
        --batch-size 64 --device cuda --dtype bf16                        # what benchmarks/gpu_report.sh runs

--batches full:   identical random full-length batches (no padding), 15% of positions labelled.
--batches corpus: batches from the real pipeline (bertcore.data.batches, with the trainer's default length bucketing)
                  on the default corpus (--join-documents N: every N of its documents joined into one), padded
                  to their longest sequence and given to both models; transformers is also timed on the same
                  batches padded to --seq-len, the usual fixed-length input of a transformers pipeline. The
                  model's vocabulary is the corpus vocabulary's (8,000 words) unless --vocab-size names a larger
                  one (30,522 for BERT's own size: the ids stay the corpus's).

MFU (CUDA, bf16): training FLOPs per real token (training_flops_per_token: 6 × the matrix parameters each token
passes through, the vocabulary projection at the 15 % labelled positions only, plus the attention products at the
batch's length) × tokens/s over the GPU's dense bf16 peak from its datasheet (989 TFLOP/s for the H100/H200).
The same useful FLOPs are credited to every model, so a model that computes more (transformers decodes all positions,
and every layer runs on padding) shows a lower MFU for the same work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import autocast, synchronize
from bertcore.models.bert import BertForPreTraining
from bertcore.models.config import preset
from bertcore.training.pretraining import make_optimizer, weight_decay_groups

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense tensor-core peaks


def full_length_batches(vocab_size: int, batch_size: int, seq_len: int, count: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        original = torch.randint(5, vocab_size, (batch_size, seq_len), generator=generator)  # (B, T), no specials
        picked = torch.rand(batch_size, seq_len, generator=generator) < 0.15
        input_ids = torch.where(picked, torch.full_like(original, 4), original)  # [MASK] = 4
        batches.append({
            "input_ids": input_ids,
            "token_type_ids": (torch.arange(seq_len) >= seq_len // 2).long().expand(batch_size, -1).contiguous(),
            "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long),
            "labels": torch.where(picked, original, torch.full_like(original, -100)),
            "next_sentence_label": torch.randint(0, 2, (batch_size,), generator=generator),
        })
    return batches


def corpus_batches(batch_size: int, seq_len: int, count: int, length_buckets: int, join_documents: int = 1):
    from bertcore.data.batches import PretrainingData
    from bertcore.data.corpus import Corpus, read_corpus
    from bertcore.files.resources import default_corpus_path, default_vocab_path
    from bertcore.tokenization.wordpiece import BertTokenizer

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    corpus = read_corpus(default_corpus_path())
    if join_documents > 1:  # Tiny Shakespeare's documents are speeches of ~38 tokens: join them into longer ones
        documents = corpus.documents
        joined = [[sentence for document in documents[i:i + join_documents] for sentence in document]
                  for i in range(0, len(documents), join_documents)]
        corpus = Corpus(documents=joined, files=corpus.files, source=corpus.source)
    data = PretrainingData(corpus, tokenizer, seq_len=seq_len,
                           length_buckets=length_buckets)
    return tokenizer.vocab_size, [data.train_batch(step, batch_size).model_inputs() for step in range(1, count + 1)]


def pad_to(batch: dict[str, torch.Tensor], seq_len: int) -> dict[str, torch.Tensor]:
    pad = seq_len - batch["input_ids"].size(1)
    fill = {"input_ids": 0, "token_type_ids": 0, "attention_mask": 0, "labels": -100}
    return {name: torch.nn.functional.pad(t, (0, pad), value=fill[name]) if name in fill else t
            for name, t in batch.items()}


def transformers_model(config, state_dict):
    import transformers

    hf_config = transformers.BertConfig(**{k: v for k, v in config.to_dict().items()
                                           if k not in ("architectures", "model_type")})
    model = transformers.BertForPreTraining(hf_config)
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
    return model


def training_step(model, optimizer, batch: dict[str, torch.Tensor], device: torch.device, dtype: torch.dtype) -> None:
    """One step as the trainer takes it: zero_grad -> forward (autocast unless fp32) -> backward -> clip -> AdamW."""
    optimizer.zero_grad(set_to_none=True)
    with autocast(device, dtype):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    optimizer.step()


class Runner:
    def __init__(self, name: str, model, device, dtype, batches, default_adamw: bool = False):
        self.name, self.model, self.dtype = name, model.to(device).train(), dtype
        self.config = getattr(model, "_orig_mod", model).config  # a compiled model keeps the module it wraps
        self.compiled = model is not getattr(model, "_orig_mod", model)
        self.seq_lens = [b["input_ids"].size(1) for b in batches]
        self.batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
        groups = weight_decay_groups(self.model, 0.01)
        # default_adamw: torch.optim.AdamW as constructed by default (the for-loop kernel on CPU)
        self.optimizer = (torch.optim.AdamW(groups, lr=1e-4, eps=1e-6) if default_adamw
                          else make_optimizer(groups, lr=1e-4))
        self.device = device
        self.rates: list[float] = []  # real tokens per second of wall time
        self.flop_rates: list[float] = []  # useful training FLOP per second (training_flops_per_token at the batch's T)
        self.peak_memory = 0  # bytes, CUDA only: the most this runner's steps held at once
        self.cpu_rates: list[float] = []  # real tokens per second of this process's CPU time: load barely moves it
        self.cursor = 0

    def step(self, timed: bool) -> None:
        index = self.cursor % len(self.batches)
        batch = self.batches[index]
        self.cursor += 1
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        start, cpu_start = time.perf_counter(), time.process_time()
        training_step(self.model, self.optimizer, batch, self.device, self.dtype)
        synchronize(self.device)
        if timed:
            elapsed = time.perf_counter() - start
            tokens = int(batch["attention_mask"].sum())
            self.rates.append(tokens / elapsed)
            self.cpu_rates.append(tokens / (time.process_time() - cpu_start))
            self.flop_rates.append(training_flops_per_token(self.config, self.seq_lens[index]) * tokens / elapsed)
            if self.device.type == "cuda":
                self.peak_memory = max(self.peak_memory, torch.cuda.max_memory_allocated(self.device))

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_rates)


def time_interleaved(runners: list[Runner], warmup: int, rounds: int, per_round: int) -> None:
    """Warm each runner up, then time `rounds` rounds of `per_round` steps of each in turn."""
    for runner in runners:
        start = time.perf_counter()
        # A compiled model compiles again for each new batch shape: every batch is seen before the timing starts.
        steps = max(warmup, len(runner.batches)) if runner.compiled else warmup
        for _ in range(steps):
            runner.step(timed=False)
        print(f"  {runner.name}: {steps} warm-up steps took {time.perf_counter() - start:.1f} s", flush=True)
    for _ in range(rounds):
        for runner in runners:
            for _ in range(per_round):
                runner.step(timed=True)


def training_flops_per_token(config, seq_len: int, mlm_fraction: float = 0.15) -> float:
    """6 × (matmul parameters touched per token) + attention scores/values; decoder only on masked positions."""
    d, layers = config.hidden_size, config.num_hidden_layers
    encoder = layers * (4 * d * d + 2 * d * config.intermediate_size)
    heads = mlm_fraction * (d * d + d * config.vocab_size)
    attention = layers * 2 * seq_len * d  # QK^T and PV per token
    return 6 * (encoder + heads) + 6 * attention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="the model's vocabulary (default 8000 for full batches; corpus: the corpus vocabulary's)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batches", choices=("full", "corpus"), default="full")
    parser.add_argument("--length-buckets", type=int, default=8, help="corpus batches: the trainer's bucketing")
    parser.add_argument("--join-documents", type=int, default=1,
                        help="corpus batches: join every N documents into one, so that pairs can fill long sequences")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of --per-round timed steps")
    parser.add_argument("--per-round", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16 = autocast (CUDA)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    parser.add_argument("--no-transformers", action="store_true", help="time bertcore only (e.g. for MFU)")
    parser.add_argument("--compile", action="store_true", help="also time bertcore under torch.compile")
    parser.add_argument("--default-adamw", action="store_true",
                        help="also time transformers with torch.optim.AdamW's default kernel instead of the fused one")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    vocab_size = args.vocab_size or 8000
    if args.batches == "corpus":
        corpus_vocab, batches = corpus_batches(args.batch_size, args.seq_len, count=8,
                                               length_buckets=args.length_buckets, join_documents=args.join_documents)
        vocab_size = max(args.vocab_size or 0, corpus_vocab)
    else:
        batches = full_length_batches(vocab_size, args.batch_size, args.seq_len, count=4)
    config = preset(args.preset, vocab_size=vocab_size, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    torch.manual_seed(0)
    ours = BertForPreTraining(config)
    runners = [Runner("bertcore", ours, device, dtype, batches)]
    if args.compile:
        twin = BertForPreTraining(config)
        twin.load_state_dict(ours.state_dict())
        runners.append(Runner("bertcore + torch.compile", torch.compile(twin), device, dtype, batches))
    if not args.no_transformers:
        import transformers

        state = {k: v.clone() for k, v in ours.state_dict().items()}
        runners.append(Runner(f"transformers {transformers.__version__}", transformers_model(config, state),
                              device, dtype, batches))
        if args.default_adamw:
            runners.append(Runner(f"transformers {transformers.__version__}, default AdamW",
                                  transformers_model(config, state), device, dtype, batches, default_adamw=True))
        if args.batches == "corpus":
            runners.append(Runner(f"transformers {transformers.__version__}, padded to {args.seq_len}",
                                  transformers_model(config, state), device, dtype,
                                  [pad_to(b, args.seq_len) for b in batches]))

    mean_tokens = statistics.mean(int(b["attention_mask"].sum()) for b in batches) / args.batch_size
    print(f"{args.preset} (vocab {vocab_size}, hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
          f"{config.num_attention_heads} heads, intermediate {config.intermediate_size}); batch {args.batch_size} × "
          f"{args.seq_len} ({args.batches} batches, {mean_tokens:.1f} real tokens per sequence); {device}, "
          f"{args.dtype}, {torch.get_num_threads()} threads, torch {torch.__version__}", flush=True)
    time_interleaved(runners, args.warmup, args.rounds, args.per_round)
    peak = None
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None) if args.dtype == "bf16" else None
        print(f"  on {name}; MFU against its dense bf16 peak of {peak} TFLOP/s")
    for runner in runners:
        spread = f"{min(runner.rates):,.0f}–{max(runner.rates):,.0f}"
        extra = ""
        if device.type == "cuda":
            achieved = statistics.median(runner.flop_rates) / 1e12
            extra = f"; {achieved:.0f} TFLOP/s" + (f", MFU {achieved / peak:.1%}" if peak else "")
            extra += f"; peak memory {runner.peak_memory / 2**30:.1f} GiB"
        print(f"  {runner.name:<40} {runner.median:>10,.0f} tokens/s (median of {len(runner.rates)}; range {spread})"
              + extra)
    for ours_runner in (r for r in runners if r.name.startswith("bertcore")):
        for other in (r for r in runners if r.name.startswith("transformers")):
            cpu = (f"; per CPU second {ours_runner.cpu_median / other.cpu_median:.2f}×" if device.type == "cpu"
                   else "")
            print(f"  ratio {ours_runner.name} / {other.name}: {ours_runner.median / other.median:.2f}×{cpu}")


if __name__ == "__main__":
    main()
