"""How long listing a Hugging Face cache of N BERT-base-sized models takes (hub_listing.list_cached_models).

Builds the cache in a temporary folder: per repo a config.json, a model.safetensors with BERT-base's real header
(199 tensors, 110M parameters; the data is a sparse hole of the real size, so nothing but the header is on disk),
a 30522-line vocab.txt and a tokenizer_config.json, as blobs with snapshot links and refs/main. Times the first
listing in a fresh interpreter (import of bertcore.models.hub included) and the median of repeated listings in this one
(the files' metadata then in the OS cache, as for a window that lists again); then, in fresh interpreters, one repo
id resolved (huggingface_hub's snapshot_download imported on first use) and huggingface_hub's scan_cache_dir alone,
the figures behind what bertcore.models.hub leaves to huggingface_hub. Prints the load average: a loaded machine
stretches every figure.

    .venv/bin/python benchmarks/hub_cache_listing.py [--repos 50] [--repeats 7]

Goal: 50 repos in ≤ 1 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertcore.models.hub_listing import list_cached_models  # noqa: E402 - after the path that makes the checkout importable


def bert_base_header() -> tuple[bytes, int]:
    """BERT-base's safetensors header (float32) and the size of its data section."""
    hidden, intermediate, vocab, positions = 768, 3072, 30522, 512
    shapes = {"bert.embeddings.word_embeddings.weight": (vocab, hidden),
              "bert.embeddings.position_embeddings.weight": (positions, hidden),
              "bert.embeddings.token_type_embeddings.weight": (2, hidden),
              "bert.embeddings.LayerNorm.weight": (hidden,), "bert.embeddings.LayerNorm.bias": (hidden,)}
    for layer in range(12):
        prefix = f"bert.encoder.layer.{layer}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[prefix + name + ".weight"] = (hidden, hidden)
            shapes[prefix + name + ".bias"] = (hidden,)
        shapes[prefix + "intermediate.dense.weight"] = (intermediate, hidden)
        shapes[prefix + "intermediate.dense.bias"] = (intermediate,)
        shapes[prefix + "output.dense.weight"] = (hidden, intermediate)
        shapes[prefix + "output.dense.bias"] = (hidden,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[prefix + norm + ".weight"] = (hidden,)
            shapes[prefix + norm + ".bias"] = (hidden,)
    shapes["bert.pooler.dense.weight"] = (hidden, hidden)
    shapes["bert.pooler.dense.bias"] = (hidden,)
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4
        for dimension in shape:
            size *= dimension
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded, offset


def build_cache(cache: Path, repos: int) -> None:
    header, data_size = bert_base_header()
    vocab = "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(30517))]).encode()
    for index in range(repos):
        commit = hashlib.sha1(str(index).encode()).hexdigest()
        storage = cache / f"models--org--bert-{index}"
        (storage / "blobs").mkdir(parents=True)
        (storage / "refs").mkdir()
        (storage / "refs" / "main").write_text(commit)
        snapshot = storage / "snapshots" / commit
        snapshot.mkdir(parents=True)
        config = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 768,
                  "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 30522, "index": index}
        files = {"config.json": json.dumps(config).encode(), "vocab.txt": vocab,
                 "tokenizer_config.json": b'{"do_lower_case": true}'}
        for name, content in files.items():
            blob = storage / "blobs" / hashlib.sha256(content).hexdigest()
            blob.write_bytes(content)
            (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
        weights = storage / "blobs" / hashlib.sha256(header + str(index).encode()).hexdigest()
        with weights.open("wb") as handle:
            handle.write(header)
            handle.truncate(len(header) + data_size)  # a sparse hole: the real size, no data written
        (snapshot / "model.safetensors").symlink_to(os.path.relpath(weights, snapshot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        build_cache(cache, arguments.repos)
        first = subprocess.run(
            [sys.executable, "-c", "import sys, time; start = time.perf_counter(); sys.path.insert(0, sys.argv[1]); "
             "from bertcore.models.hub_listing import list_cached_models; models = list_cached_models(sys.argv[2]); "
             "print(time.perf_counter() - start, len(models))", str(ROOT), str(cache)],
            capture_output=True, text=True, check=True).stdout.split()
        # For the reasons in bertcore.models.hub's docstring: one repo id resolved (huggingface_hub imported on
        # first use), and huggingface_hub's own scan of the cache, each in a fresh interpreter, import included
        resolve_first = _fresh_seconds("from bertcore.models.hub import resolve_model; "
                                       "resolve_model('org/bert-7', cache_dir=sys.argv[2])", cache)
        scan_first = _fresh_seconds("from huggingface_hub import scan_cache_dir; scan_cache_dir(sys.argv[2])", cache)
        times = []
        for _ in range(arguments.repeats):
            start = time.perf_counter()
            models = list_cached_models(cache)
            times.append(time.perf_counter() - start)
        assert len(models) == arguments.repos and models[0].parameters == 109_482_240, models[0]
    print(f"{arguments.repos} cached BERT-base repos ({models[0].describe()}):")
    print(f"  first listing in a fresh interpreter, import included: {float(first[0]) * 1000:.0f} ms")
    print(f"  listing again, median of {arguments.repeats}: {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f} ms)")
    print(f"  resolving one repo id in a fresh interpreter, import included: {resolve_first * 1000:.0f} ms")
    print(f"  huggingface_hub's scan_cache_dir alone in a fresh interpreter, import included: "
          f"{scan_first * 1000:.0f} ms")
    print(f"  load average: {Path('/proc/loadavg').read_text().strip()}")


def _fresh_seconds(statement: str, cache: Path) -> float:
    code = (f"import sys, time; start = time.perf_counter(); sys.path.insert(0, sys.argv[1]); {statement}; "
            "print(time.perf_counter() - start)")
    return float(subprocess.run([sys.executable, "-c", code, str(ROOT), str(cache)], capture_output=True, text=True,
                                check=True).stdout)


if __name__ == "__main__":
    main()
