"""`bert-finetune`: fine-tune a BERT (or any family bertcore loads) on a task from the command line (a thin
consumer of bertcore.training.finetuning).

    bert-finetune --demo mood                                     # a shipped demo task with its measured settings
    bert-finetune --task sequence --train reviews.csv --eval reviews-test.csv --out runs/reviews
    bert-finetune --task token --train ner.conll --init-from runs/bert/final --epochs 3 --lr 3e-5
    bert-finetune --demo mood --init-from path/to/roberta-folder  # RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT
    bert-finetune --task qa --train squad-train.json --eval squad-dev.json --seq-len 384 --batch-size 12
    bert-finetune --out runs/reviews --resume                     # continue from checkpoints/latest
    python -m bertcore.cli.finetune ...                           # the same

Tasks and their files (bertcore.tasks.task_data): sequence = CSV/TSV with a header, or JSONL, with `text`, optional
`text_b` and `label` (a number with a fraction makes it a regression); token = CoNLL (word and tag per line, a
blank line between sentences) or JSONL with `tokens` and `tags`; qa = SQuAD v1.1 / v2.0 JSON. Without --eval, a
seeded 10% of the training file is held out. --init-from defaults to the shipped default model; a folder of any
family trains that family's own head (RobertaForSequenceClassification, ElectraForTokenClassification, …).

The run folder is bert-train's (bertcore.files.run_folder; metrics.jsonl records in bertcore.training.finetuning), with
final/predictions.json for qa. Ctrl-C (or SIGTERM) stops after the current step and writes a checkpoint; a second
Ctrl-C waits for a checkpoint being written and otherwise aborts at once, without one. --resume continues from
the newest checkpoint whose loss was sane (a warning names those passed over after a NaN or a divergence).
Exit status: 0 done or stopped, 1 training failed (NaN or diverging loss, out of memory, a checkpoint that could
not be written) or aborted by a second Ctrl-C, 2 bad arguments or input (a data file, a checkpoint, a run folder
in use, not writable, or not a run): the message names the file, the line and the fix.

`bert-finetune --help` answers without importing torch.
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
from bertcore.tasks.kinds import QA_TASK
from bertcore.training.settings import TASK_OPTION_SETTINGS, FinetuneConfig

PROG = "bert-finetune"


def build_parser() -> argparse.ArgumentParser:
    """bert-finetune's options: one per FinetuneConfig field (bertcore.training.settings), then the data's options,
    --resume and --no-progress. An option left out keeps the default (a demo's settings, or, with --resume, the
    value recorded in the run's run_config.json)."""
    parser = argparse.ArgumentParser(
        prog=PROG, argument_default=None,
        description="Fine-tune a BERT on a task: a label per text or pair (sequence), a tag per word (token), or "
                    "answer spans (qa, SQuAD), starting from a checkpoint (default: the shipped default model).",
    )
    sections = add_setting_options(parser, FinetuneConfig,
                                   groups={"data": "task and data", "model": "model", "optimisation": "optimisation",
                                           "run": "run"},
                                   shown={"out_dir": "runs/finetune-<task>-<date>-<time>"})
    for name, option in TASK_OPTION_SETTINGS.items():  # FinetuneConfig.task_options, by name
        flag, help_text = "--" + name.replace("_", "-"), option.help.replace("%", "%%")
        if option.type is bool:
            sections["data"].add_argument(flag, action="store_true", default=None, dest=name, help=help_text)
        else:
            sections["data"].add_argument(flag, type=option.type, dest=name, help=help_text)
    add_run_control_options(sections["run"])
    return parser


def make_config(args: argparse.Namespace):
    """The FinetuneConfig: defaults (a demo's settings, or the resumed run's recorded values) with the given
    options on top; --epochs without --steps drops a recorded or demo step count."""
    given = given_settings(args, FinetuneConfig)
    options = {name: getattr(args, name) for name in TASK_OPTION_SETTINGS if getattr(args, name) is not None}
    if args.epochs is not None and args.steps is None:
        given["steps"] = None
    if args.resume:
        recorded = RunFolder(resumed_run_dir(args, PROG)).read_training_settings()
        if options:
            given["task_options"] = {**recorded.get("task_options", {}), **options}
        return FinetuneConfig.from_dict({**recorded, **given})
    given.setdefault("out_dir", time.strftime(f"runs/finetune-{args.demo or args.task}-%Y%m%d-%H%M%S"))
    if options:
        given["task_options"] = options  # checked against the task by FinetuneConfig
    if args.demo:
        return FinetuneConfig.for_demo(args.demo, **given).resolved()
    return FinetuneConfig(**given)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def make_finetuner(config, command: list[str]):
        from bertcore.training.finetuning import Finetuner

        return Finetuner(config, resume=resume_argument(args), command=command)

    return run_command(PROG, argv, lambda: make_config(args), make_finetuner, lambda finetuner: _run(finetuner, args))


def describe_metrics(metrics, names) -> str:
    return ", ".join(f"{name} {metrics[name]:.4f}" for name in names if name in metrics)


def _run(finetuner, args: argparse.Namespace) -> int:
    config, data = finetuner.config, finetuner.data
    if finetuner.is_main:
        source = (f"resuming from {finetuner.resumed_from} at step {finetuner.step}" if finetuner.resumed_from
                  else finetuner.init_note)
        print(f"{PROG}: {source}", file=sys.stderr)
        if finetuner.resume_note:
            print(f"{PROG}: warning: {finetuner.resume_note}", file=sys.stderr)
        print(f"{PROG}: {config.task} task, {len(data.train_features):,} training / {len(data.eval_features):,} "
              f"eval {'windows' if config.task == QA_TASK else 'examples'} (eval: {data.eval_source}); "
              f"{config.steps:,} steps of {config.batch_size} at lr {config.lr:g}; "
              f"{finetuner.model.num_parameters():,} parameters on {finetuner.device} × {finetuner.world_size} "
              f"process(es){process_group_note()}; run folder {finetuner.out_dir}", file=sys.stderr)
    names = finetuner.task.metric_names

    def postfix(stats) -> dict:
        values = {"loss": fmt(stats.loss), **{name[:3]: fmt(value) for name, value in stats.metrics.items()}}
        return {**values, "tok_s": f"{stats.tokens_per_second:.0f}"}

    return drive(finetuner, args, PROG, postfix=postfix,
                 describe_eval=lambda evaluation: describe_metrics(evaluation.metrics, names))

if __name__ == "__main__":
    sys.exit(main())
