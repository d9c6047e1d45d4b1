"""Head-lab timings: importance of the current input, importance over a corpus sample, roles, a 2-D projection.

1. Importance of one input (Michel et al. 2019's gate gradient: one forward + one backward to the gates), the
   mini preset (L4/H256/A4, vocab 8000, random weights: the time does not depend on them) and the shipped
   default model (L4/H128), at 30 tokens with 4 masked; median and p90 of --repeats after warm-up. Target
   <= 50 ms on this project's 2-core CPU.
2. Importance over 256 held-out corpus pairs at 128 tokens (mini, batches of 32), as the app's background job
   runs it; median of --corpus-repeats passes, and the longest batch (the app's cancel latency).
3. Head roles over the same 256 pairs (one forward with attention maps per batch).
4. A 2-D projection of 2,000 token points of the default corpus (mini): the batched forward for every layer's
   hidden states, then PCA of each of the 5 layers.

Each at every --threads value (torch.set_num_threads), with the load average before each line: this machine
is shared, and with other work on the cores one thread is often faster than two.
Run: python benchmarks/head_importance.py [--threads 1 2] [--device cuda]
On a GPU every timing waits for the device (torch.cuda.synchronize) before reading the clock; --threads then
sets only the CPU threads of the host-side work, so one value is enough (--device cuda --threads 8).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import synchronize as synchronize_device
from bertcore.analysis.embedding_views import project_hidden_states, sample_hidden_states, sample_sentences
from bertcore.analysis.importance import input_head_importance, iter_head_importance, pretraining_sample
from bertcore.analysis.inspection import inspect_encoding
from bertcore.analysis.roles import corpus_head_roles, role_sample
from bertcore.data.batches import PretrainingData
from bertcore.data.corpus import read_corpus
from bertcore.data.masking import mask_like_bert
from bertcore.files.resources import default_checkpoint_dir, default_corpus_path, default_vocab_path
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import load_pretrained
from bertcore.models.config import preset
from bertcore.tokenization.wordpiece import BertTokenizer


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def timed(run: Callable[[], object], repeats: int, warm_up: int, synchronize: Callable[[], None]) -> list[float]:
    for _ in range(warm_up):
        run()
    timings = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        run()
        synchronize()
        timings.append(time.perf_counter() - start)
    return sorted(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--corpus-repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--points", type=int, default=2000)
    args = parser.parse_args()
    device = torch.device(args.device)
    synchronize = functools.partial(synchronize_device, device)

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    torch.manual_seed(0)
    models = {"mini": BertForPreTraining(preset("mini", vocab_size=tokenizer.vocab_size)).to(device).eval()}
    if (default_checkpoint_dir() / "config.json").is_file():
        models["default (L4/H128)"] = load_pretrained(default_checkpoint_dir(), device)[0]
    corpus = read_corpus(default_corpus_path())
    words = default_corpus_path().read_text(encoding="utf-8").split()
    encoding = tokenizer.encode(" ".join(words[:40]), " ".join(words[40:80]), max_length=30)
    masking = mask_like_bert(encoding, tokenizer, seed=0)
    started = time.perf_counter()
    data = PretrainingData(corpus, tokenizer, seq_len=128, seed=0)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device={device} ({device_name}) torch={torch.__version__} cores={os.cpu_count()}; corpus tokenized in "
          f"{time.perf_counter() - started:.1f} s; {load()}")

    print(f"\n1. importance of the current input: {len(encoding)} tokens, {len(masking.positions)} masked, NSP on "
          f"the model's own decision; median / p90 of {args.repeats} after 3 warm-up runs, and the ratio to an "
          f"inspection of the same input timed alongside (README: mini at 32 tokens 6.7 ms on an idle machine)")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, model in models.items():
            before = load()
            importance, inspection = [], []
            for _ in range(args.repeats // 5):  # interleaved, so both see the same load
                importance += timed(lambda model=model: input_head_importance(model, encoding, masking), 5, 3,
                                    synchronize)
                inspection += timed(lambda model=model: inspect_encoding(model, tokenizer, encoding, masking=masking),
                                    5, 3, synchronize)
            importance.sort()
            p90 = importance[int(0.9 * (len(importance) - 1))]
            ratio = statistics.median(importance) / statistics.median(inspection)
            print(f"   {name:<18} threads={threads}  {1000 * statistics.median(importance):6.1f} ms / "
                  f"{1000 * p90:6.1f} ms, inspection {1000 * statistics.median(inspection):5.1f} ms, ratio "
                  f"{ratio:4.2f}   ({before})")

    model = models["mini"]
    batches = pretraining_sample(data, args.pairs, batch_size=32)
    print(f"\n2. importance over {args.pairs} held-out pairs at 128 tokens, mini, {len(batches)} batches of 32: "
          f"median of {args.corpus_repeats}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        before = load()
        passes, longest_batch = [], 0.0
        for _ in range(args.corpus_repeats):
            synchronize()
            start = last = time.perf_counter()
            for _progress in iter_head_importance(model, batches):
                synchronize()
                now = time.perf_counter()
                longest_batch, last = max(longest_batch, now - last), now
            passes.append(time.perf_counter() - start)
        tokens = sum(int(batch["attention_mask"].sum()) for batch in batches)

        def forward_only():
            with torch.inference_mode():
                for batch in batches:
                    model(**{key: value.to(device) for key, value in batch.items()})

        forward = statistics.median(timed(forward_only, args.corpus_repeats, 0, synchronize))
        print(f"   threads={threads}  {statistics.median(passes):5.2f} s ({tokens / statistics.median(passes):,.0f} "
              f"real tokens/s), longest batch {longest_batch:.2f} s; the forward passes alone {forward:.2f} s, "
              f"ratio {statistics.median(passes) / forward:.2f}   ({before})")

    role_batches = role_sample(data, args.pairs, batch_size=32)
    print(f"\n3. head roles over {args.pairs} held-out pairs at 128 tokens, mini: median of {args.corpus_repeats}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        before = load()
        timings = timed(lambda: corpus_head_roles(model, tokenizer, role_batches), args.corpus_repeats, 0,
                        synchronize)
        print(f"   threads={threads}  {statistics.median(timings):5.2f} s   ({before})")

    sentences = sample_sentences(corpus, 400, seed=0)
    print(f"\n4. projection of {args.points} token points of corpus sentences, mini: hidden states of 5 layers in "
          f"batches of 64, then PCA of each layer; median of 5 after 1 warm-up")
    for threads in args.threads:
        torch.set_num_threads(threads)
        before = load()
        sample_times = timed(lambda: sample_hidden_states(model, tokenizer, sentences, max_points=args.points),
                             5, 1, synchronize)
        sample = sample_hidden_states(model, tokenizer, sentences, max_points=args.points)
        layers = range(sample.hidden_states.shape[0])
        pca_times = timed(lambda sample=sample, layers=layers: [project_hidden_states(sample, i) for i in layers],
                          5, 1, synchronize)
        print(f"   threads={threads}  forward {1000 * statistics.median(sample_times):5.0f} ms, PCA of "
              f"{len(layers)} layers {1000 * statistics.median(pca_times):4.0f} ms   ({before})")


if __name__ == "__main__":
    main()
