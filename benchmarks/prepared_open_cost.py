"""What checking a prepared corpus costs when it is opened: PreparedCorpus.open with and without its checksums.

Writes a prepared folder of --tokens-mb MB of tokens (random uint16 ids, sentences of 10 to 40 tokens, documents
of 5 to 30 sentences, as a ~2x larger text corpus prepares to) with meta.json's sizes and CRC-32s, then opens it
--repeats times each way, alternating, with the file in the page cache (the second open of a run, and what a
freshly prepared corpus always is). Prints the median of each, their ratio, and the checksum's speed; a cold
open (a corpus prepared by an earlier run, pages evicted since) adds the disk read, which the run's first epoch
would otherwise pay for the same pages.

    .venv/bin/python benchmarks/prepared_open_cost.py [--tokens-mb 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bertcore.data.prepared import (
    DOCUMENT_OFFSETS_FILE,
    FORMAT_VERSION,
    META_FILE,
    SENTENCE_OFFSETS_FILE,
    TOKENS_FILE,
    PreparedCorpus,
    checksum,
)


def write_folder(folder: Path, tokens_mb: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    num_tokens = tokens_mb * (1 << 20) // 2
    with open(folder / TOKENS_FILE, "wb") as tokens:
        left = num_tokens
        while left:
            count = min(left, 1 << 24)
            tokens.write(rng.integers(5, 30_000, count, dtype=np.uint16).tobytes())
            left -= count
    lengths = rng.integers(10, 41, num_tokens // 10, dtype=np.int64)
    ends = np.cumsum(lengths)
    ends = ends[ends < num_tokens]
    sentence_offsets = np.concatenate([[0], ends, [num_tokens]]).astype(np.int64)
    num_sentences = len(sentence_offsets) - 1
    per_document = rng.integers(5, 31, num_sentences // 5, dtype=np.int64)
    document_ends = np.cumsum(per_document)
    document_ends = document_ends[document_ends < num_sentences]
    document_offsets = np.concatenate([[0], document_ends, [num_sentences]]).astype(np.int64)
    sentence_offsets.tofile(folder / SENTENCE_OFFSETS_FILE)
    document_offsets.tofile(folder / DOCUMENT_OFFSETS_FILE)
    meta = {"format_version": FORMAT_VERSION, "key": "benchmark", "source": "synthetic", "corpus": {},
            "tokenizer": "synthetic", "token_dtype": "uint16", "num_tokens": int(num_tokens),
            "num_sentences": int(num_sentences), "num_documents": int(len(document_offsets) - 1),
            "checksums": {name: checksum(folder / name)
                          for name in (TOKENS_FILE, SENTENCE_OFFSETS_FILE, DOCUMENT_OFFSETS_FILE)}}
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    return meta


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens-mb", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prepared-open-") as temp:
        folder = Path(temp)
        write_folder(folder, args.tokens_mb)
        size = sum(path.stat().st_size for path in folder.iterdir())
        PreparedCorpus.open(folder)  # into the page cache
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeats):
            for verify in (False, True):
                started = time.perf_counter()
                PreparedCorpus.open(folder, verify=verify)
                times[verify].append(time.perf_counter() - started)
    plain, checked = statistics.median(times[False]), statistics.median(times[True])
    print(f"prepared corpus of {size / 1e6:,.0f} MB ({args.tokens_mb} MB of tokens), {args.repeats} opens each, "
          "warm page cache")
    print(f"  open without checksums: {plain * 1000:8.1f} ms (median)")
    print(f"  open with checksums:    {checked * 1000:8.1f} ms (median), {size / 1e6 / checked:,.0f} MB/s, "
          f"{checked / max(plain, 1e-9):.0f}x")
    print(f"  checksums' share per GB of prepared files: {(checked - plain) / (size / 1e9):.2f} s")
    print("load average:", Path("/proc/loadavg").read_text().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
