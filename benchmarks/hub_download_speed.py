"""How fast bertcore's Hub download moves bytes, against huggingface_hub's hf_hub_download on the same server.

    .venv/bin/python benchmarks/hub_download_speed.py                 # a 256 MB weights file, 3 rounds
    .venv/bin/python benchmarks/hub_download_speed.py --megabytes 64 --rounds 5

Both download the same repo (config.json, vocab.txt and a weights file of --megabytes random bytes) from a fake Hub
on 127.0.0.1 (tests/hub_fixtures.FakeHub) into fresh caches, in turn, so load on the machine falls on both alike.
bertcore's transfer (bertcore.models.hub_download) checks the weights' SHA-256 as they arrive and runs in a thread
of its own that a cancel can stop; huggingface_hub's checks the size only. Prints each round's seconds and MB/s, the
median ratio (bertcore / huggingface_hub: above 1 is slower), and the load average. Loopback has no network in the
way, so this measures the client's own cost per byte: a real download is bounded by the network long before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from bertcore.models.hub_download import download_model  # noqa: E402 - after the path that makes the checkout importable
from tests.hub_fixtures import HUB_COMMIT, hub_config, start_fake_hub  # noqa: E402


def with_huggingface_hub(repo_id: str, names: list[str], cache: Path, endpoint: str) -> None:
    from huggingface_hub import hf_hub_download

    for name in names:
        hf_hub_download(repo_id, name, revision=HUB_COMMIT, cache_dir=str(cache), endpoint=endpoint)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=256, help="the weights file's size (default 256)")
    parser.add_argument("--rounds", type=int, default=3, help="downloads by each, in turn (default 3)")
    args = parser.parse_args()
    weights = os.urandom(args.megabytes * 1_000_000)
    files = {"config.json": hub_config(architectures=["BertForMaskedLM"]), "vocab.txt": b"[PAD]\n[UNK]\n",
             "model.safetensors": weights}
    repo_id = "org/speed"
    hub, server = start_fake_hub({repo_id: files})
    os.environ["HF_ENDPOINT"] = hub.url
    total_mb = sum(len(content) for content in files.values()) / 1e6
    work = Path(tempfile.mkdtemp(prefix="hub-speed-"))
    times: dict[str, list[float]] = {"bertcore": [], "huggingface_hub": []}
    try:
        for round_index in range(args.rounds):
            for who in ("bertcore", "huggingface_hub") if round_index % 2 == 0 else ("huggingface_hub", "bertcore"):
                cache = work / f"{who}-{round_index}"
                started = time.perf_counter()
                if who == "bertcore":
                    download_model(repo_id, cache_dir=cache)
                else:
                    with_huggingface_hub(repo_id, ["config.json", "model.safetensors", "vocab.txt"], cache, hub.url)
                seconds = time.perf_counter() - started
                times[who].append(seconds)
                print(f"round {round_index + 1} {who:16s} {seconds:7.2f} s  {total_mb / seconds:8.1f} MB/s",
                      flush=True)
                shutil.rmtree(cache)
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [ours / theirs for ours, theirs in zip(times["bertcore"], times["huggingface_hub"], strict=True)]
    print(f"{total_mb:.0f} MB per download; median bertcore {statistics.median(times['bertcore']):.2f} s, "
          f"huggingface_hub {statistics.median(times['huggingface_hub']):.2f} s; ratio (bertcore / huggingface_hub) "
          f"median {statistics.median(ratios):.3f}, rounds " + ", ".join(f"{ratio:.3f}" for ratio in ratios))
    print("load average:", " ".join(f"{value:.2f}" for value in os.getloadavg()))


if __name__ == "__main__":
    main()
