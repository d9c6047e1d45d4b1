"""A large corpus from the command line: peak memory and time to the first step, cold and with the cache warm.

Generates a corpus of --size-mb MB from Tiny Shakespeare (assets/corpus), each copy varied (its documents in
another order, one word in eleven swapped for a word from elsewhere, so no copy repeats another), then runs
`bert-train --vocab assets/vocab.txt --preset tiny --steps 1` in a child process twice with an empty
--data-cache: the first run prepares the corpus, the second finds it prepared. For each: wall time end to end
(process start to exit, one step done) and peak RSS (the child's ru_maxrss). Beside them, in the same run for
scale: a bare `tokenizers` encode of the same text (the vocabulary's Rust tokenizer, encode_batch_fast over the
file's lines in batches, nothing written) in its own child process, timed and measured the same way.

    .venv/bin/python benchmarks/corpus_prepare.py [--size-mb 100] [--keep DIR]

Goals (issue 18, idle 2-core CPU): peak RSS <= 0.8 GB for 100 MB (1.36 GB before), first run <= 3x the bare
encode, second run <= 20 s (32 s before); 1 GB with the same peak RSS as 100 MB. The load average is printed:
other processes on the machine stretch every time here.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "assets" / "corpus" / "tinyshakespeare.txt"
VOCAB = ROOT / "assets" / "vocab.txt"

BARE_ENCODE = """
import sys, time
from bertcore.tokenization.wordpiece import BertTokenizer
backend = BertTokenizer.from_vocab_file(sys.argv[2])._tokenizer
started = time.perf_counter()
tokens, batch = 0, []
with open(sys.argv[1], encoding="utf-8") as text:
    for line in text:
        batch.append(line)
        if len(batch) == 20000:
            tokens += sum(len(e.ids) for e in backend.encode_batch_fast(batch, add_special_tokens=False))
            batch = []
tokens += sum(len(e.ids) for e in backend.encode_batch_fast(batch, add_special_tokens=False))
print(tokens, time.perf_counter() - started)
"""


def generate(path: Path, size_mb: float) -> None:
    """Tiny Shakespeare, copied with variation until the file holds size_mb MB."""
    documents = SOURCE.read_text(encoding="utf-8").split("\n\n")
    words = SOURCE.read_text(encoding="utf-8").split()
    rng = random.Random(0)
    target = int(size_mb * 1e6)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            rng.shuffle(documents)
            for document in documents:
                lines = []
                for line in document.split("\n"):
                    tokens = line.split(" ")
                    for i in range(rng.randrange(11), len(tokens), 11):
                        tokens[i] = rng.choice(words)
                    lines.append(" ".join(tokens))
                block = "\n".join(lines) + "\n\n"
                out.write(block)
                written += len(block.encode("utf-8"))
                if written >= target:
                    break


def run_child(command: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, peak RSS of this child alone in GB (os.wait4's rusage), its stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{out.read()}\n{err.read()}")
        return seconds, usage.ru_maxrss / 1e6, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=100.0)
    parser.add_argument("--keep", help="folder for the corpus, cache and runs (default: a temporary one, removed)")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="corpus-prepare-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.size_mb:g}mb.txt"
    try:
        if not corpus.exists():
            started = time.perf_counter()
            generate(corpus, args.size_mb)
            print(f"generated {corpus} ({corpus.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.0f} s")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}
        cache = work / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        train = [sys.executable, "-m", "bertcore.cli.train", "--corpus", str(corpus), "--vocab", str(VOCAB),
                 "--preset", "tiny", "--steps", "1", "--batch-size", "8", "--seq-len", "128", "--eval-batches", "1",
                 "--device", "cpu", "--data-cache", str(cache), "--no-progress"]
        first_s, first_gb, _ = run_child([*train, "--out", str(work / "run1")], env)
        second_s, second_gb, _ = run_child([*train, "--out", str(work / "run2")], env)
        bare_s, bare_gb, output = run_child([sys.executable, "-c", BARE_ENCODE, str(corpus), str(VOCAB)], env)
        tokens, encode_s = output.split()
        meta = json.loads(next(cache.glob("*/meta.json")).read_text())
        print(f"corpus: {corpus.stat().st_size / 1e6:.0f} MB, {meta['num_documents']:,} documents, "
              f"{meta['num_sentences']:,} sentences, {meta['num_tokens']:,} tokens ({meta['token_dtype']}); "
              f"prepared in {meta['prepared_seconds']:.1f} s")
        print(f"first run (prepares):      {first_s:6.1f} s end to end, peak RSS {first_gb:.2f} GB")
        print(f"second run (cache warm):   {second_s:6.1f} s end to end, peak RSS {second_gb:.2f} GB")
        print(f"bare tokenizers encode:    {bare_s:6.1f} s process ({float(encode_s):.1f} s encoding "
              f"{int(tokens):,} tokens), peak RSS {bare_gb:.2f} GB")
        print(f"first run / bare encode:   {first_s / bare_s:.2f}x")
        print(f"load average: {open('/proc/loadavg').read().strip()}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
