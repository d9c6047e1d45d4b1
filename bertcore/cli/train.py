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
    SHARED_OPTION_FIELDS,
    add_optimisation_options,
    add_run_options,
    drive,
    fmt,
    given_options,
    process_group_note,
    resume_argument,
    resumed_run_dir,
    run_command,
)
from bertcore.data.masking_recipes import MASKING_RECIPES, RECIPE_DESCRIPTIONS
from bertcore.files.run_folder import RunFolder

OBJECTIVE_CHOICES = ("mlm+nsp", "mlm", "mlm+sop", "rtd")  # bertcore.training.pretraining_config.OBJECTIVES
ARCH_CHOICES = ("bert", "roberta", "distilbert", "electra", "albert", "modernbert")  # ... .ARCHITECTURES

# Command-line option -> TrainingConfig field. Options left out keep the default (or, with --resume, the
# value recorded in the run's run_config.json).
OPTION_FIELDS = {
    **SHARED_OPTION_FIELDS, "corpus": "corpus", "preset": "preset", "vocab": "vocab", "vocab_size": "vocab_size",
    "mlm_probability": "mlm_probability", "masking": "masking", "eval_batches": "eval_batches",
    "text_field": "text_field", "vocab_sample": "vocab_sample", "data_cache": "data_cache",
    "objective": "objective", "arch": "arch", "generator_width": "generator_width",
    "discriminator_weight": "discriminator_weight",
}


# Model-size options that override fields of the --preset (new runs only).
MODEL_OPTIONS = {"--hidden-size": "hidden_size", "--num-layers": "num_hidden_layers",
                 "--num-heads": "num_attention_heads", "--intermediate-size": "intermediate_size"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bert-train", description="Pretrain a BERT-family model on a text corpus with its objective: BERT's "
        "masked LM + next-sentence prediction (default), RoBERTa's masked LM, ALBERT's sentence order, ELECTRA's "
        "replaced-token detection.",
        argument_default=None,
    )
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", help="a corpus file or a folder of them: .txt or .txt.gz (blank lines separate "
                                       "documents), .jsonl or .jsonl.gz (one document per record), .parquet or "
                                       ".arrow (one per row; needs pyarrow); default: the built-in Tiny Shakespeare")
    data.add_argument("--text-field", help="the text field of .jsonl records and Parquet/Arrow tables "
                                           "(default text)")
    data.add_argument("--data-cache", help="folder of prepared corpora: a corpus is tokenized once into it and "
                                           "reused by later runs, resumes and every process (default "
                                           "$XDG_CACHE_HOME/bert-explorer/corpora)")
    data.add_argument("--vocab-sample", type=int, help="characters of the corpus, drawn evenly from all of it, "
                                                       "that a vocabulary is trained on (default 32000000)")
    data.add_argument("--vocab", help="reuse this tokenizer instead of training a WordPiece vocabulary on the "
                      "corpus: a vocab.txt, a tokenizer.json, or a model folder's tokenizer (RoBERTa's byte-level BPE, "
                      "ALBERT's SentencePiece, ...)")
    data.add_argument("--vocab-size", type=int, help="size of the WordPiece vocabulary trained when no --vocab "
                                                     "(default 8000)")
    data.add_argument("--seq-len", type=int, help="longest sequence in tokens, [CLS]/[SEP] included (default 128)")
    data.add_argument("--heldout-fraction", type=float, help="documents held out for evaluation (default 0.02)")
    data.add_argument("--mlm-probability", type=float, help="fraction of tokens masked (default 0.15)")
    data.add_argument("--masking", choices=MASKING_RECIPES, help="what is masked: " + "; ".join(
        f"{name} = {description}" for name, description in RECIPE_DESCRIPTIONS.items()) + " (default token)")
    data.add_argument("--length-buckets", type=int, help="cut batches from a length-sorted pool of this many "
                                                         "batches, so padding is small; 1 = off (default 8)")
    model = parser.add_argument_group("model")
    model.add_argument("--objective", choices=OBJECTIVE_CHOICES, help="what the model learns: mlm+nsp = BERT's masked "
                       "LM + next-sentence prediction; mlm = RoBERTa's masked LM on full sentences packed across "
                       "documents; mlm+sop = ALBERT's masked LM + sentence-order prediction; rtd = ELECTRA's "
                       "replaced-token detection with a small generator (default: the architecture's own, mlm+nsp)")
    model.add_argument("--arch", choices=ARCH_CHOICES, help="a new model's family, at the --preset size, saved in "
                       "its transformers layout (default: the objective's own, bert)")
    model.add_argument("--generator-width", type=float, help="rtd: the generator's width as a share of the "
                                                               "discriminator's (default 0.25)")
    model.add_argument("--discriminator-weight", type=float, help="rtd: weight of the discriminator's loss "
                                                                    "(default 50)")
    model.add_argument("--preset", help="tiny, mini, small, medium or base (default mini)")
    model.add_argument("--init-from", help="a checkpoint folder to train further (its weights and vocabulary)")
    for option, field in MODEL_OPTIONS.items():
        model.add_argument(option, type=int, dest=field, help=f"override the preset's {field}")
    add_optimisation_options(parser, steps="default 1000", lr="default 5e-4")
    run = add_run_options(parser, out="runs/bert-<date>-<time>", eval_every="default 100")
    run.add_argument("--eval-batches", type=int, help="held-out batches per evaluation (default 4)")
    return parser


def make_config(args: argparse.Namespace):
    """The TrainingConfig: defaults (or the resumed run's recorded values) with the given options on top."""
    from bertcore.training.pretraining_config import TrainingConfig

    given = given_options(args, OPTION_FIELDS)
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

        bar = PreparationBar(enabled=not args.no_progress)
        try:
            return Trainer(config, model_config=make_model_config(args, config), resume=resume_argument(args),
                           command=command, progress=bar)
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

    progress = trainer.task.objective.progress  # (metric, short label) of the objective

    def numbers(record) -> dict[str, float]:
        return getattr(record, "metrics", None) or {name: getattr(record, name) for name, _ in progress}

    return drive(trainer, args, "bert-train",
                 describe_eval=lambda evaluation: ", ".join(
                     f"{_spoken(name)} {numbers(evaluation)[name]:.4f}" for name, _ in progress),
                 postfix=lambda stats: dict(loss=fmt(stats.loss), **{label: fmt(numbers(stats)[name])
                                                                     for name, label in progress},
                                            tok_s=f"{stats.tokens_per_second:.0f}"))

if __name__ == "__main__":
    sys.exit(main())
