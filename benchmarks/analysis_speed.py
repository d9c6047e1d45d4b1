"""How long the measurements of bertcore.analysis take, and what one training record costs next to training.

    python benchmarks/analysis_speed.py                      # everything (a few minutes on 2 quiet cores)
    python benchmarks/analysis_speed.py --part speed         # the issue's targets only
    python benchmarks/analysis_speed.py --part record --presets tiny mini --rounds 3

`--part speed`, the issue's targets, each the median of `--repeats` runs beside a reference of the same run:
- syntactic_attention on the first 500 sentences of the shipped EWT cut, for a random `mini` and a random `base`
  (the presets, over the shipped 8,000-word vocabulary): target ≤ 2 s and ≤ 20 s on 2 cores. The reference is the
  encoder's plain forward over the same batches (no attention probabilities returned): the ratio is the cost of
  the measurement beyond running the model, comparable across machines;
- pseudo_log_likelihood of 100 BLiMP pairs (200 sentences; two pairs of each of the first 50 paradigms) on a
  random `mini`: target ≤ 2 s. Reference: one forward over the same masked copies' tokens.

`--part record`: a training record (bertcore.analysis.records, RecordSettings' defaults, the shipped data) against
training steps of the Train tab's default run (the app's settings: batch 16, 64 positions, lr 1e-3, the shipped
vocabulary, on the CPU; eval and checkpoints off, so the steps are pure training, which makes the ratio a bound).
Per preset, `--rounds` rounds of (`--steps` training steps, a record without BLiMP, a record with it), interleaved
so that the machine's load falls on all; prints each part, the median step, and the overhead of one record every
`--interval` steps with BLiMP on every `blimp_every`-th: (record + BLiMP / blimp_every) / (interval × step).

Every figure is printed with the load average, and the run begins and ends with what a plain matrix product gets
from the CPU: on a shared machine read the ratios (`--threads 1` keeps two busy cores from making them noise).
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
from bertcore.analysis.likelihood import _masked_copies, pseudo_log_likelihood, shipped_blimp
from bertcore.analysis.records import RecordSettings, analysis_record, shipped_analysis_data
from bertcore.analysis.syntax import syntactic_attention
from bertcore.analysis.treebank import shipped_treebank
from bertcore.analysis.word_inputs import encoded_batches, layout_words, measuring
from bertcore.files.resources import default_vocab_path
from bertcore.models.bert import BertForPreTraining
from bertcore.models.config import preset
from bertcore.models.families import base_model_name
from bertcore.tokenization.wordpiece import BertTokenizer


def timed(function, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def machine_speed() -> str:
    """What the CPU gives torch now: float32 GFLOP/s of a 1024 × 1024 matrix product (median of 5). On a shared
    machine it falls with the load; with 2 threads on 2 busy cores it falls most (threads wait for each other)."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    median, _ = timed(lambda: a @ b, 5)
    return f"{2 * 1024**3 / median / 1e9:.0f} GFLOP/s in a 1024² matmul"


def random_model(name: str, tokenizer) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(preset(name, vocab_size=tokenizer.vocab_size)).eval()


def speed(args) -> None:
    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    sentences = shipped_treebank("dev")[:500]
    for name, target in (("mini", 2.0), ("base", 20.0)):
        model = random_model(name, tokenizer)
        inputs, _ = layout_words(model, tokenizer, [sentence.words for sentence in sentences])

        def plain_forward(model=model, inputs=inputs) -> None:
            with measuring(model):
                for _ in encoded_batches(model, tokenizer, inputs):
                    pass

        def measured(model=model) -> None:
            syntactic_attention(model, tokenizer, sentences)

        syntactic_attention(model, tokenizer, sentences[:20])  # warm-up: first-call allocations
        seconds, times = timed(measured, args.repeats)
        reference, _ = timed(plain_forward, args.repeats)
        tokens = sum(len(item) for item in inputs)
        print(f"syntactic_attention, {name}, 500 sentences ({sum(len(s) for s in sentences):,} words, {tokens:,} "
              f"positions): {seconds:.2f} s median of {', '.join(f'{t:.2f}' for t in times)} (target <= "
              f"{target:g} s); the plain forward over the same batches {reference:.2f} s: {seconds / reference:.2f}x "
              f"[load {load_average()}]", flush=True)
    model = random_model("mini", tokenizer)
    pairs = shipped_blimp(per_paradigm=2)[:100]
    texts = [text for pair in pairs for text in (pair.good, pair.bad)]
    encoded = [(e.input_ids, e.segment_ids, e.special_tokens_mask) for e in (tokenizer.encode(t) for t in texts)]
    encoder = getattr(model, base_model_name(model))

    def copies_forward() -> None:
        with measuring(model):
            for copies in _masked_copies(encoded, tokenizer, 4096):
                encoder(input_ids=copies.input_ids)

    pseudo_log_likelihood(model, tokenizer, texts[:10])
    seconds, times = timed(lambda: pseudo_log_likelihood(model, tokenizer, texts), args.repeats)
    reference, _ = timed(copies_forward, args.repeats)
    copies = sum(len(ids) - sum(special) for ids, _, special in encoded)
    print(f"pseudo_log_likelihood, mini, 100 BLiMP pairs (200 sentences, {copies:,} masked copies): {seconds:.2f} s "
          f"median of {', '.join(f'{t:.2f}' for t in times)} (target <= 2 s); the encoder's full forward over the "
          f"same copies {reference:.2f} s: {seconds / reference:.2f}x [load {load_average()}]", flush=True)


def record(args) -> None:
    from bertcore.training.pretraining import Trainer, TrainingConfig

    treebank, test, pairs = shipped_analysis_data()
    settings = RecordSettings()
    print(f"record settings: {settings.to_dict()}", flush=True)
    for name in args.presets:
        with tempfile.TemporaryDirectory() as folder:
            # The Train tab's run (explorer.runs.training_run): its form's batch, length and rate, the shipped vocab.
            config = TrainingConfig(out_dir=str(Path(folder) / "run"), vocab=str(default_vocab_path()), preset=name,
                                    steps=100_000, batch_size=16, seq_len=64, lr=1e-3, device="cpu", eval_every=0,
                                    checkpoint_every=0)
            trainer = Trainer(config)
            steps = trainer.steps()
            for _ in range(5):  # warm-up
                next(steps)
            step_times, plain_times, blimp_times = [], [], []
            parts: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                start = time.perf_counter()
                for _ in range(args.steps):
                    next(steps)
                step_times.append((time.perf_counter() - start) / args.steps)
                # a run's record 1 has no BLiMP, record 0 has it (every settings.blimp_every-th record does)
                for index, times in ((1, plain_times), (0, blimp_times)):
                    start = time.perf_counter()
                    result = analysis_record(trainer.model, trainer.tokenizer, treebank, pairs, test_treebank=test,
                                             settings=settings, index=index)
                    times.append(time.perf_counter() - start)
                    for part, seconds in result["seconds"].items():
                        parts.setdefault(f"{part}{'' if index else ' (record 0)'}", []).append(seconds)
            steps.close()
            trainer.close()
        step = statistics.median(step_times)
        plain, with_blimp = statistics.median(plain_times), statistics.median(blimp_times)
        average = plain + (with_blimp - plain) / settings.blimp_every
        shown = ", ".join(f"{part} {statistics.median(values):.3f}" for part, values in parts.items()
                          if not part.startswith("total"))
        print(f"{name}: a training step {step * 1000:.1f} ms (median of {args.rounds} rounds of {args.steps}); a "
              f"record {plain:.3f} s, with BLiMP {with_blimp:.3f} s ({shown}); on average, BLiMP on every "
              f"{settings.blimp_every}th record, {average:.3f} s a record; one every {args.interval} steps: "
              f"{100 * average / (args.interval * step):.1f}% of the training time (target <= 5%) "
              f"[load {load_average()}]", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("speed", "record", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each speed figure (the median is shown)")
    parser.add_argument("--presets", nargs="+", default=["tiny", "mini"],
                        help="models the record is measured on (tiny: the Train tab's default; mini: the issue's)")
    parser.add_argument("--rounds", type=int, default=3, help="(steps, record) rounds per preset")
    parser.add_argument("--steps", type=int, default=30, help="training steps per round")
    parser.add_argument("--interval", type=int, default=100, help="steps between two records in a run")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: as torch starts)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs; "
          f"load {load_average()}; {machine_speed()}", flush=True)
    if args.part in ("speed", "all"):
        speed(args)
    if args.part in ("record", "all"):
        record(args)
    print(f"at the end: load {load_average()}; {machine_speed()}", flush=True)


if __name__ == "__main__":
    main()
