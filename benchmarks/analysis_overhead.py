"""What analysis records cost a training run: the Train tab's default run with and without them, one process per run,
runs interleaved, and where the records run (bertcore.analysis.schedule).

    python benchmarks/analysis_overhead.py                          # the app's way at its default interval
    python benchmarks/analysis_overhead.py --modes off inline background --every 25 --rounds 5
    python benchmarks/analysis_overhead.py --modes off background --every 10 25 50 100
    python benchmarks/analysis_overhead.py --modes off background --train-threads 2 --analysis-threads 1

The run is the Train tab's first run (explorer.runs.training_run.QUICK_RUN: preset tiny, 300 steps, batch 16 × 64,
lr 1e-3, the shipped corpus and vocabulary on the CPU, a held-out evaluation every 50 steps and a checkpoint every
100), trained with the threads the app gives its training thread (all cores but one, at least one: the app keeps a
core for the GUI) unless --train-threads says otherwise. Each mode:
- off: no records (the reference);
- inline: records in the training thread between two steps (bert-train's way; training waits for each);
- background: records on a CPU copy of the weights in a thread of their own with --analysis-threads torch threads
  (the app's way), while training goes on.
A record is due at step 0, every --every steps and at the last step, with RecordSettings' defaults (48 + 48
treebank sentences; BLiMP, 67 pairs, on every 10th record).

`--part contention` measures the same thing inside one process, where the machine's load falls alike on what is
compared: training steps alternate, in blocks of --block steps, between a background thread measuring records
back to back (as the app's thread does while a record is in flight) and an idle one. Their median step times give
the slowdown of a step while a record is in flight; with a record's own time in the background and inline, and the
snapshot's, it predicts each mode's overhead at each interval:
    inline:      (record + BLiMP's extra / blimp_every) / (interval × step)
    background:  share of the interval a record is in flight × (slowdown − 1) + snapshot / (interval × step)
(the predictions ignore the wait at the last two steps, a record's worth once per run).

Every round runs each (mode, interval) once, in a fresh process, in a shuffled order, so that the machine's load
falls on all alike. A run's time is the wall time of its steps loop, from before the first step until the loop has
written final/ (a record still in flight at the end is waited for). Printed per run, then per mode and interval:
the median time, the median of the per-round ratios to `off` (the overhead; target <= 5 %), the records written and
those deferred, with the load average; --csv appends one row per (mode, interval) to a data file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import load_average  # noqa: E402
from explorer.runs.training_run import QUICK_RUN  # noqa: E402

# The Train tab's default interval: its quick run's analysis_every (100, where the tab sets one; 100 before it did).
APP_EVERY = QUICK_RUN.get("analysis_every") or 100


def app_training_threads() -> int:
    """What the Train tab gives its training thread (explorer.runs._qt.run_panel): all cores but one, at least one."""
    return max(1, (os.cpu_count() or 1) - 1)


def child(args) -> None:
    """One run in this process; prints its figures as one JSON line."""
    import torch

    torch.set_num_threads(args.train_threads)
    from bertcore.analysis.schedule import AnalysisSchedule
    from bertcore.files.resources import default_vocab_path
    from bertcore.training.pretraining import Trainer, TrainingConfig
    from explorer.runs.training_run import QUICK_RUN

    every = 0 if args.mode == "off" else args.every[0]
    settings = {**QUICK_RUN, "steps": args.steps or QUICK_RUN["steps"], "analysis_every": every}
    with tempfile.TemporaryDirectory() as folder:
        config = TrainingConfig(out_dir=str(Path(folder) / "run"), vocab=str(default_vocab_path()),
                                data_cache=args.data_cache, **settings)
        analysis = None
        if every:
            analysis = AnalysisSchedule(in_background=args.mode == "background", threads=args.analysis_threads)
        with Trainer(config, analysis=analysis) as trainer:
            started = time.perf_counter()
            records = [stats.analysis for stats in trainer.steps() if stats.analysis]
            seconds = time.perf_counter() - started
        records += analysis.uncarried_records if analysis else []
    record_seconds = [record["seconds"]["total"] for record in records]
    print(json.dumps({"seconds": seconds, "records": len(records),
                      "deferred": sum("due_step" in record for record in records),
                      "skipped": sum(len(record.get("skipped_steps", ())) for record in records),
                      "record_seconds": statistics.median(record_seconds) if record_seconds else None}))


def contention(args) -> None:
    """Steps with and without a background record in flight, alternating in one process (see the docstring)."""
    import threading

    import torch

    torch.set_num_threads(args.train_threads)
    from bertcore.analysis.records import RecordSettings, analysis_record, shipped_analysis_data
    from bertcore.files.resources import default_vocab_path
    from bertcore.training.pretraining import Trainer, TrainingConfig
    from explorer.runs.training_run import QUICK_RUN

    treebank, test, pairs = shipped_analysis_data()
    settings = RecordSettings()
    busy, stop = threading.Event(), threading.Event()
    background_records: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        config = TrainingConfig(out_dir=str(Path(folder) / "run"), vocab=str(default_vocab_path()),
                                data_cache=args.data_cache, **{**QUICK_RUN, "steps": 10**9, "eval_every": 0,
                                                               "checkpoint_every": 0, "analysis_every": 0})
        with Trainer(config) as trainer:
            copy = trainer.snapshot_model()

            def measure_in_background() -> None:
                torch.set_num_threads(args.analysis_threads)
                index = 1
                while not stop.is_set():
                    if not busy.wait(timeout=0.05):
                        continue
                    started = time.perf_counter()
                    analysis_record(copy, trainer.tokenizer, treebank, pairs, test_treebank=test, settings=settings,
                                    index=index)  # BLiMP on every blimp_every-th, as a run has it
                    background_records.append(time.perf_counter() - started)
                    index += 1

            thread = threading.Thread(target=measure_in_background, daemon=True)
            thread.start()
            steps = trainer.steps()
            for _ in range(10):  # warm-up
                next(steps)
            idle_steps, busy_steps, snapshots = [], [], []
            for block in range(2 * args.blocks):
                (busy.set if block % 2 else busy.clear)()
                time.sleep(0.02)  # the other thread takes up its state
                for _ in range(args.block):
                    started = time.perf_counter()
                    next(steps)
                    (busy_steps if block % 2 else idle_steps).append(time.perf_counter() - started)
                started = time.perf_counter()
                copy_weights = trainer.snapshot_state_dict()
                snapshots.append(time.perf_counter() - started)
                del copy_weights
            busy.clear()
            stop.set()
            thread.join()
            inline_plain, inline_blimp = [], []
            for index in (1, 0, 2, 10, 3, 20):  # records without BLiMP and with it, in the training thread
                started = time.perf_counter()
                analysis_record(trainer.model, trainer.tokenizer, treebank, pairs, test_treebank=test,
                                settings=settings, index=index)
                (inline_blimp if settings.has_blimp(index) else inline_plain).append(time.perf_counter() - started)
            steps.close()
    step, slow = statistics.median(idle_steps), statistics.median(busy_steps)
    slowdown = slow / step
    plain, with_blimp = statistics.median(inline_plain), statistics.median(inline_blimp)
    inline_record = plain + (with_blimp - plain) / settings.blimp_every
    background_record = statistics.mean(background_records)  # BLiMP's share in it, as a run has it
    snapshot = statistics.median(snapshots)
    print(f"contention, in one process ({args.train_threads} training thread(s), background {args.analysis_threads}): "
          f"a step {step * 1000:.1f} ms alone, {slow * 1000:.1f} ms with a record in flight (x{slowdown:.3f}, "
          f"{len(idle_steps)} steps each, alternating blocks of {args.block}); a record in the training thread "
          f"{plain:.3f} s, with BLiMP {with_blimp:.3f} s; in the background {background_record:.3f} s on average "
          f"({len(background_records)} records); a snapshot {snapshot * 1000:.1f} ms [load {load_average()}]",
          flush=True)
    for every in args.every:
        interval = every * step
        inline = inline_record / interval
        in_flight = min(1.0, background_record / (every * slow))
        background = in_flight * (slowdown - 1) + snapshot / interval
        print(f"  every {every}: predicted overhead inline {100 * inline:.1f}%, background {100 * background:.1f}% "
              f"(a record in flight {100 * in_flight:.0f}% of the time)", flush=True)


def run_child(args, mode: str, every: int) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--every", str(every), "--train-threads",
               str(args.train_threads), "--analysis-threads", str(args.analysis_threads), "--data-cache",
               args.data_cache, "--steps", str(args.steps or 0)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("runs", "contention", "all"), default="all")
    parser.add_argument("--modes", nargs="+", default=["off", "background"], choices=("off", "inline", "background"))
    parser.add_argument("--every", nargs="+", type=int, default=[APP_EVERY],
                        help=f"intervals measured (default: the Train tab's, {APP_EVERY})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: the Train tab's)")
    parser.add_argument("--train-threads", type=int, default=app_training_threads())
    parser.add_argument("--analysis-threads", type=int, default=1, help="torch threads of the background record")
    parser.add_argument("--data-cache", default=None, help="prepared corpora (default: a temporary folder)")
    parser.add_argument("--csv", type=Path, help="append one row per mode and interval to this file")
    parser.add_argument("--blocks", type=int, default=20, help="contention: blocks of each kind")
    parser.add_argument("--block", type=int, default=10, help="contention: steps per block")
    parser.add_argument("--child", choices=("off", "inline", "background"), dest="mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode is not None:
        child(args)
        return
    if "off" not in args.modes:
        args.modes.insert(0, "off")
    with tempfile.TemporaryDirectory() as cache:
        args.data_cache = args.data_cache or cache
        run_child(args, "off", 0)  # prepares the corpus once, outside the timings
        print(f"{os.cpu_count()} CPUs; training threads {args.train_threads}, background record threads "
              f"{args.analysis_threads}; load {load_average()}", flush=True)
        if args.part in ("contention", "all"):
            contention(args)
        if args.part == "contention":
            return
        cases = [("off", 0)] + [(mode, every) for mode in args.modes if mode != "off" for every in args.every]
        results: dict[tuple[str, int], list[dict]] = {case: [] for case in cases}
        rng = random.Random(0)
        for round_number in range(args.rounds):
            order = cases[:]
            rng.shuffle(order)
            for mode, every in order:
                result = run_child(args, mode, every)
                results[(mode, every)].append(result)
                print(f"round {round_number + 1}: {mode:10s} every {every or '-':>3}: {result['seconds']:6.2f} s, "
                      f"{result['records']} records ({result['deferred']} deferred, {result['skipped']} due steps "
                      f"passed over), a record {result['record_seconds'] or 0:.3f} s [load {load_average()}]",
                      flush=True)
    reference = [result["seconds"] for result in results[("off", 0)]]
    print(f"\noff: median {statistics.median(reference):.2f} s ({', '.join(f'{s:.2f}' for s in reference)})")
    rows = []
    for (mode, every), runs in results.items():
        if mode == "off":
            continue
        seconds = [run["seconds"] for run in runs]
        ratios = [run / off for run, off in zip(seconds, reference, strict=True)]
        overhead = 100 * (statistics.median(ratios) - 1)
        record = statistics.median(run["record_seconds"] for run in runs)
        print(f"{mode} every {every}: median {statistics.median(seconds):.2f} s; per-round ratios "
              f"{', '.join(f'{r:.3f}' for r in ratios)}: overhead {overhead:+.1f}% (target <= 5%); "
              f"{runs[0]['records']} records, a record {record:.3f} s median, "
              f"{statistics.median(run['deferred'] for run in runs):.0f} deferred [load {load_average()}]", flush=True)
        rows.append((mode, every, overhead, statistics.median(seconds), statistics.median(reference), record))
    if args.csv:
        new = not args.csv.exists()
        with args.csv.open("a") as file:
            if new:
                file.write("date,cpus,load,train_threads,analysis_threads,mode,every,rounds,overhead_percent,"
                           "median_seconds,off_median_seconds,record_seconds\n")
            for mode, every, overhead, seconds, off, record in rows:
                file.write(f"{date.today()},{os.cpu_count()},{load_average().replace(' ', '/')},"
                           f"{args.train_threads},{args.analysis_threads},{mode},{every},{args.rounds},"
                           f"{overhead:.1f},{seconds:.2f},{off:.2f},{record:.3f}\n")


if __name__ == "__main__":
    main()
