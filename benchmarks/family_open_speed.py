"""Opening a RoBERTa-base-sized folder with bertcore.load_pretrained (target: 2 s for a 110M-parameter model).

    python benchmarks/family_open_speed.py [--folder DIR] [--repeats 3]

The folder is built once with transformers, as a user's download looks: RobertaForMaskedLM at roberta-base's
sizes (12 layers, 768 wide, 50265 tokens, 514 positions; 124.7M parameters, random weights) saved as
model.safetensors, and a byte-level BPE tokenizer of roberta-base's size (50265 tokens, 50000 merges, made up
here: no download) saved by RobertaTokenizerFast as tokenizer.json + tokenizer_config.json. --folder keeps it
between runs (built when missing).

Two figures: the call itself, in this process with the modules imported (each repeat reads the files again;
the page cache holds them after the first), and a fresh interpreter that imports bertcore and opens the folder
(what `bert-explorer FOLDER` pays before its window shows the model), both with the tokenizer's and the
weights' shares. The load average is printed before and after: on a shared machine read it beside the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROBERTA_BASE_TOKENS = 50265
FRESH_PROCESS = """
import sys, time
start = time.perf_counter()
import bertcore
from bertcore.models.checkpoint import load_pretrained
imported = time.perf_counter()
model, tokenizer = load_pretrained(sys.argv[1])
print(imported - start, time.perf_counter() - imported)
"""


def load_average() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else f"{os.getloadavg()}"


def byte_level_vocabulary() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """roberta-base's shape of vocabulary: its 5 specials, the 256 byte stand-ins, then one token per merge of two
    stand-ins (50004 merges, so 50265 tokens in all)."""
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: index for index, token in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    for char in alphabet:
        vocab[char] = len(vocab)
    merges = []
    for left in alphabet:
        for right in alphabet:
            if len(vocab) == ROBERTA_BASE_TOKENS - 1:
                break
            vocab[left + right] = len(vocab)
            merges.append((left, right))
    vocab["<mask>"] = len(vocab)
    return vocab, merges


def build_folder(folder: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.RobertaForMaskedLM(transformers.RobertaConfig())  # roberta-base's sizes
    model.save_pretrained(folder, safe_serialization=True)
    vocab, merges = byte_level_vocabulary()
    transformers.RobertaTokenizerFast(vocab=vocab, merges=merges).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["vocab_size"] == len(vocab) == ROBERTA_BASE_TOKENS, (config["vocab_size"], len(vocab))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, help="where to keep the model folder (built when missing)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    scratch = None
    if args.folder is None:
        scratch = tempfile.TemporaryDirectory(prefix="roberta-base-")
        args.folder = Path(scratch.name) / "roberta-base"
    if not (args.folder / "model.safetensors").exists():
        print(f"building {args.folder} with transformers ...", flush=True)
        build_folder(args.folder)

    import torch

    from bertcore.models.checkpoint import load_pretrained
    from bertcore.tokenization.pretrained import tokenizer_from_folder

    size_mb = sum(path.stat().st_size for path in args.folder.iterdir()) / 1e6
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} cpu={os.cpu_count()} folder={size_mb:.0f} MB")
    print(f"loadavg before: {load_average()}")
    calls, cpu_times, tokenizer_reads = [], [], []
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        model, tokenizer = load_pretrained(args.folder)
        calls.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        start = time.perf_counter()
        tokenizer_from_folder(args.folder)
        tokenizer_reads.append(time.perf_counter() - start)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    print(f"{type(model).__name__}: {parameters / 1e6:.1f}M parameters, tokenizer {tokenizer!r}")
    print(f"load_pretrained (modules imported): median {statistics.median(calls):.2f} s, runs "
          f"{', '.join(f'{seconds:.2f}' for seconds in calls)}; of which the tokenizer ~"
          f"{statistics.median(tokenizer_reads):.2f} s; CPU time median {statistics.median(cpu_times):.2f} s (all "
          "threads: near what an idle machine's wall clock shows when the wall clock waits on other processes)")
    fresh = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(args.folder)], capture_output=True, text=True,
                           check=True, cwd=Path(__file__).resolve().parents[1])
    imports, opening = (float(value) for value in fresh.stdout.split())
    print(f"fresh interpreter: import {imports:.2f} s + load_pretrained {opening:.2f} s = {imports + opening:.2f} s")
    print(f"loadavg after: {load_average()}")
    if scratch is not None:
        scratch.cleanup()


if __name__ == "__main__":
    main()
