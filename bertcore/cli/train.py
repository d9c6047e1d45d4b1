"""`bert-train`: headless MLM + NSP pretraining from the command line (a thin consumer of
bertcore.training.pretraining).

    bert-train --corpus assets/corpus/tinyshakespeare.txt --vocab assets/vocab.txt --preset mini \
        --steps 2000 --batch-size 32 --seq-len 128 --out runs/shakespeare-mini
    bert-train --out runs/shakespeare-mini --resume            # continue from checkpoints/latest
    torchrun --nproc_per_node=2 -m bertcore.cli.train --device cpu ...  # DistributedDataParallel (gloo on CPU)

The run folder layout (run_config.json, metrics.jsonl, checkpoints/, final/, summary.json) is described in
bertcore/files/file_names.py; one process trains in a folder at a time (a second is refused, naming the first's pid).
Ctrl-C (or SIGTERM) stops after the current step and writes a checkpoint; a second Ctrl-C waits for a checkpoint
being written ("still writing the checkpoint, please wait…") and otherwise aborts at once, without one.
--resume continues from the newest checkpoint whose loss was sane: after a NaN or a diverging loss, the
checkpoints written once the loss had gone bad are passed over, and a warning names them (--resume PATH uses PATH).
Exit status: 0 done or stopped, 1 training failed (NaN or diverging loss, out of memory, a checkpoint that
could not be written) or aborted by a second Ctrl-C, 2 bad arguments or input (corpus, vocabulary, checkpoint,
a run folder in use, not writable, or not a bert-train run).

`bert-train --help` answers without importing torch: this module imports it only once a run starts.
"""

from __future__ import annotations

import argparse
import sys
import time

from bertcore.cli.common import (
    add_run_control_options,
    add_setting_options,
    drive,
    fmt,
    given_settings,
    process_group_note,
    resume_argument,
    resumed_run_dir,
    run_command,
)
from bertcore.files.run_folder import RunFolder
from bertcore.training.settings import TrainingConfig

# Model-size options that override fields of the --preset (new runs only): the model's config, not the run's.
MODEL_OPTIONS = {"--hidden-size": "hidden_size", "--num-layers": "num_hidden_layers",
                 "--num-heads": "num_attention_heads", "--intermediate-size": "intermediate_size"}


def build_parser() -> argparse.ArgumentParser:
    """bert-train's options: one per TrainingConfig field (bertcore.training.settings), then the model-size
    overrides, --resume and --no-progress. An option left out keeps the default (or, with --resume, the value
    recorded in the run's run_config.json)."""
    parser = argparse.ArgumentParser(
        prog="bert-train", description="Pretrain a BERT-family model on a text corpus with its objective: BERT's "
        "masked LM + next-sentence prediction (default), RoBERTa's masked LM, ALBERT's sentence order, ELECTRA's "
        "replaced-token detection.",
        argument_default=None,
    )
    sections = add_setting_options(parser, TrainingConfig,
                                   groups={"data": "data", "model": "model", "optimisation": "optimisation",
                                           "run": "run"},
                                   shown={"out_dir": "runs/bert-<date>-<time>"})
    for option, field in MODEL_OPTIONS.items():
        sections["model"].add_argument(option, type=int, dest=field, help=f"override the preset's {field}")
    add_run_control_options(sections["run"])
    return parser


def make_config(args: argparse.Namespace):
    """The TrainingConfig: defaults (or the resumed run's recorded values) with the given options on top."""
    given = given_settings(args, TrainingConfig)
    if args.resume:
        base = TrainingConfig.from_dict(RunFolder(resumed_run_dir(args, "bert-train")).read_training_settings())
    else:
        base = TrainingConfig(out_dir=time.strftime("runs/bert-%Y%m%d-%H%M%S"))
    return base.replace(**given)


def make_model_config(args: argparse.Namespace, config):
    """The preset with any --hidden-size/--num-layers/... overrides, or None (the trainer's default)."""
    overrides = {field: getattr(args, field) for field in MODEL_OPTIONS.values() if getattr(args, field) is not None}
    if not overrides:
        return None
    if args.resume or config.init_from:
        raise ValueError(f"{', '.join(o for o, f in MODEL_OPTIONS.items() if f in overrides)} cannot change the "
                         "size of a model that is resumed or trained further (--resume / --init-from)")
    from bertcore.models.config import preset
    from bertcore.tokenization.pretrained import tokenizer_from_path

    vocab_size = tokenizer_from_path(config.vocab).vocab_size if config.vocab else config.vocab_size
    return preset(config.preset, vocab_size=vocab_size, **overrides)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def make_trainer(config, command: list[str]):
        from bertcore.training.pretraining import Trainer

        analysis = None
        if config.analysis_every:  # measured between two steps, in the loop's thread
            from bertcore.analysis.schedule import AnalysisSchedule

            analysis = AnalysisSchedule()
        bar = PreparationBar(enabled=not args.no_progress)
        try:
            return Trainer(config, model_config=make_model_config(args, config), resume=resume_argument(args),
                           command=command, progress=bar, analysis=analysis)
        finally:
            bar.close()

    return run_command("bert-train", argv, lambda: make_config(args), make_trainer, lambda trainer: _run(trainer, args))


class PreparationBar:
    """The corpus preparation's progress (MB, MB/s, time left) as a progress bar on stderr, one per phase. A phase
    may report its end more than once (the last piece read, then the pass's own closing report): its bar stays open,
    full, until the next phase starts or the bar is closed."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.phase: str | None = None

    def __call__(self, progress) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        if progress.phase != self.phase:
            self.close()
            self.phase = progress.phase
            label = "vocabulary sample" if progress.phase == "vocabulary" else "preparing corpus"
            self.bar = tqdm(total=progress.total_bytes, unit="B", unit_scale=True, unit_divisor=1000,
                            desc=f"bert-train: {label}", file=sys.stderr, leave=True)
        self.bar.update(max(0, progress.done_bytes - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _spoken(metric: str) -> str:
    """"mlm_accuracy" -> "MLM accuracy", "replaced_accuracy" -> "replaced accuracy"."""
    head, _, rest = metric.partition("_")
    return f"{head.upper() if head in ('mlm', 'nsp', 'sop') else head} {rest}"


def _run(trainer, args: argparse.Namespace) -> int:
    if trainer.is_main:
        source = f"resuming from {trainer.resumed_from} at step {trainer.step}" if trainer.resumed_from else "new run"
        print(f"bert-train: {source}; {trainer.model.num_parameters():,} parameters on {trainer.device} "
              f"× {trainer.world_size} process(es){process_group_note()}; run folder {trainer.out_dir}",
              file=sys.stderr)
        prepared = trainer.task.prepared
        print(f"bert-train: corpus {prepared.source}: {prepared.meta['num_documents']:,} documents, "
              f"{prepared.num_tokens:,} tokens, prepared in {prepared.folder}", file=sys.stderr)
        for note in prepared.notes:  # what the corpus cache did: a damaged preparation replaced, old ones removed
            print(f"bert-train: note: {note}", file=sys.stderr)
        if trainer.resume_note:
            print(f"bert-train: warning: {trainer.resume_note}", file=sys.stderr)
        if trainer.analysis is not None:
            print(f"bert-train: {_analysis_plan(trainer)}", file=sys.stderr)

    progress = trainer.task.objective.progress  # (metric, short label) of the objective

    def numbers(record) -> dict[str, float]:
        return getattr(record, "metrics", None) or {name: getattr(record, name) for name, _ in progress}

    describe_analysis = None
    if trainer.analysis is not None:
        from bertcore.analysis.records import record_summary as describe_analysis
    return drive(trainer, args, "bert-train",
                 describe_eval=lambda evaluation: ", ".join(
                     f"{_spoken(name)} {numbers(evaluation)[name]:.4f}" for name, _ in progress),
                 postfix=lambda stats: dict(loss=fmt(stats.loss), **{label: fmt(numbers(stats)[name])
                                                                     for name, label in progress},
                                            tok_s=f"{stats.tokens_per_second:.0f}"),
                 describe_analysis=describe_analysis)


def _analysis_plan(trainer) -> str:
    """What the run measures, and when: the first line about its analysis records."""
    config, settings = trainer.config, trainer.analysis.settings
    blimp = (f", BLiMP on every {settings.blimp_every}th" if settings.blimp_every > 1 else ", BLiMP on each"
             ) if settings.pairs_per_paradigm else ""
    return (f"measuring what the model learns every {config.analysis_every} steps, at step 0 and at the last (syntax "
            f"in the heads, {settings.probe_task.upper()} probes, health{blimp}) on the first {settings.sentences} "
            f"sentences of {config.treebank or 'the shipped UD English EWT cut'}; analysis records in metrics.jsonl")

if __name__ == "__main__":
    sys.exit(main())
