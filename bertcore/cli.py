"""`bert-train`: headless MLM + NSP pretraining from the command line (a thin consumer of bertcore.trainer).

    bert-train --corpus assets/corpus/tinyshakespeare.txt --vocab assets/vocab.txt --preset mini \
        --steps 2000 --batch-size 32 --seq-len 128 --out runs/shakespeare-mini
    bert-train --out runs/shakespeare-mini --resume            # continue from checkpoints/latest
    torchrun --nproc_per_node=2 -m bertcore.cli --device cpu ...  # DistributedDataParallel (gloo on CPU)

The run folder layout (run_config.json, metrics.jsonl, checkpoints/, final/, summary.json) is described in
bertcore/run_folder.py; one process trains in a folder at a time (a second is refused, naming the first's pid).
Ctrl-C (or SIGTERM) stops after the current step and writes a checkpoint; a second Ctrl-C aborts at once.
Exit status: 0 done or stopped, 1 training failed (NaN or diverging loss, out of memory, a checkpoint that
could not be written), 2 bad arguments or input (corpus, vocabulary, checkpoint, a run folder in use).

`bert-train --help` answers without importing torch: this module imports it only once a run starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from bertcore.run_folder import RUN_CONFIG_FILE, RunFolder

# Command-line option -> TrainingConfig field. Options left out keep the default (or, with --resume, the
# value recorded in the run's run_config.json).
OPTION_FIELDS = {
    "corpus": "corpus", "out": "out_dir", "preset": "preset", "vocab": "vocab", "vocab_size": "vocab_size",
    "init_from": "init_from", "steps": "steps", "batch_size": "batch_size", "seq_len": "seq_len", "lr": "lr",
    "warmup_steps": "warmup_steps", "weight_decay": "weight_decay", "max_grad_norm": "max_grad_norm",
    "seed": "seed", "device": "device", "precision": "precision", "mlm_probability": "mlm_probability",
    "heldout_fraction": "heldout_fraction", "length_buckets": "length_buckets", "eval_every": "eval_every",
    "eval_batches": "eval_batches",
    "checkpoint_every": "checkpoint_every", "keep_checkpoints": "keep_checkpoints", "compile": "compile",
    "num_threads": "num_threads", "divergence_factor": "divergence_factor",
}


# Model-size options that override fields of the --preset (new runs only).
MODEL_OPTIONS = {"--hidden-size": "hidden_size", "--num-layers": "num_hidden_layers",
                 "--num-heads": "num_attention_heads", "--intermediate-size": "intermediate_size"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bert-train", description="Pretrain a BERT (masked-LM + next-sentence prediction) on a text corpus.",
        argument_default=None,
    )
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", help="a .txt file or a folder of .txt files (blank lines separate documents); "
                                       "default: the built-in Tiny Shakespeare")
    data.add_argument("--vocab", help="reuse this vocab.txt instead of training a vocabulary on the corpus")
    data.add_argument("--vocab-size", type=int, help="size of the WordPiece vocabulary trained when no --vocab "
                                                     "(default 8000)")
    data.add_argument("--seq-len", type=int, help="longest sequence in tokens, [CLS]/[SEP] included (default 128)")
    data.add_argument("--heldout-fraction", type=float, help="documents held out for evaluation (default 0.02)")
    data.add_argument("--mlm-probability", type=float, help="fraction of tokens masked (default 0.15)")
    data.add_argument("--length-buckets", type=int, help="cut batches from a length-sorted pool of this many "
                                                         "batches, so padding is small; 1 = off (default 8)")
    model = parser.add_argument_group("model")
    model.add_argument("--preset", help="tiny, mini, small, medium or base (default mini)")
    model.add_argument("--init-from", help="a checkpoint folder to train further (its weights and vocabulary)")
    for option, field in MODEL_OPTIONS.items():
        model.add_argument(option, type=int, dest=field, help=f"override the preset's {field}")
    optim = parser.add_argument_group("optimisation")
    optim.add_argument("--steps", type=int, help="optimisation steps in total (default 1000)")
    optim.add_argument("--batch-size", type=int, help="sequences per step per process (default 32)")
    optim.add_argument("--lr", type=float, help="peak learning rate (default 5e-4)")
    optim.add_argument("--warmup-steps", type=int, help="linear warm-up steps (default: 10%% of --steps)")
    optim.add_argument("--weight-decay", type=float, help="AdamW weight decay (default 0.01)")
    optim.add_argument("--max-grad-norm", type=float, help="gradient clipping norm, 0 = off (default 1.0)")
    optim.add_argument("--seed", type=int, help="seed of init, data, masks and dropout (default 0)")
    optim.add_argument("--divergence-factor", type=float,
                       help="stop when the smoothed loss stays this many times above its best value for 10 steps "
                            "(a learning rate far too high); 0 = never (default 4)")
    run = parser.add_argument_group("run")
    run.add_argument("--out", help="run folder (default runs/bert-<date>-<time>)")
    run.add_argument("--resume", nargs="?", const=True,
                     help="continue the run in --out from checkpoints/latest, or from the given checkpoint folder")
    run.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps (default auto: CUDA, then MPS, then CPU)")
    run.add_argument("--precision", choices=("auto", "fp32", "bf16"), help="default auto (bf16 autocast on CUDA)")
    run.add_argument("--eval-every", type=int, help="held-out evaluation every N steps (default 100)")
    run.add_argument("--eval-batches", type=int, help="held-out batches per evaluation (default 4)")
    run.add_argument("--checkpoint-every", type=int, help="checkpoint every N steps (default 500)")
    run.add_argument("--keep-checkpoints", type=int, help="newest checkpoints kept (default 2)")
    run.add_argument("--num-threads", type=int, help="CPU threads for PyTorch (default: PyTorch's choice)")
    run.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation)")
    return parser


def make_config(args: argparse.Namespace):
    """The TrainingConfig: defaults (or the resumed run's recorded values) with the given options on top."""
    from bertcore.config import TrainingConfig

    given = {field: getattr(args, option) for option, field in OPTION_FIELDS.items()
             if getattr(args, option) is not None}
    if args.resume:
        base = TrainingConfig.from_dict(RunFolder(_resumed_run_dir(args)).read_training_settings())
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
    from bertcore.config import preset
    from bertcore.tokenizer import BertTokenizer

    vocab_size = BertTokenizer.from_vocab_file(config.vocab).vocab_size if config.vocab else config.vocab_size
    return preset(config.preset, vocab_size=vocab_size, **overrides)


def _resumed_run_dir(args: argparse.Namespace) -> Path:
    """The run folder --resume continues: --out, or the run folder --resume names, or the one holding the
    checkpoint it names (<run>/checkpoints/step-N; the trainer refuses one that resolves outside it)."""
    if args.resume is True:
        if args.out is None:
            raise ValueError("--resume without a folder needs --out RUN_FOLDER (the run to continue)")
        run_dir = Path(args.out)
    elif args.out:
        run_dir = Path(args.out)
    else:
        named = Path(args.resume).absolute()
        run_dir = named if RunFolder(named).run_config_path.is_file() else named.parent.parent
    if not RunFolder(run_dir).run_config_path.is_file():
        raise ValueError(f"{run_dir} holds no {RUN_CONFIG_FILE}, so it is not a bert-train run folder to resume")
    return run_dir


def _resume_argument(args: argparse.Namespace) -> bool | str:
    """What Trainer(resume=...) gets: False, True (the latest checkpoint) or the checkpoint folder named."""
    if not args.resume:
        return False
    if args.resume is True:
        return True
    named = Path(args.resume)
    if RunFolder(named).run_config_path.is_file() and (args.out is None or Path(args.out).resolve() == named.resolve()):
        return True  # --resume RUN_FOLDER continues from its latest checkpoint
    return args.resume  # a checkpoint folder; the trainer refuses one outside the run folder


def _init_distributed(device_name: str | None) -> bool:
    """Join the torchrun process group when launched under torchrun with more than one process."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch
    import torch.distributed as dist

    use_nccl = torch.cuda.is_available() and (device_name or "auto") != "cpu"
    if use_nccl:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend="nccl" if use_nccl else "gloo")
    return True


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    distributed = False
    try:
        from bertcore.data import CorpusError
        from bertcore.errors import CheckpointError, TrainingError
        from bertcore.tokenizer import TokenizerError
        from bertcore.trainer import Trainer

        try:
            config = make_config(args)
            distributed = _init_distributed(config.device)
            command = ["bert-train", *(sys.argv[1:] if argv is None else argv)]
            trainer = Trainer(config, model_config=make_model_config(args, config), resume=_resume_argument(args),
                              command=command)
        except (ValueError, CorpusError, CheckpointError, TokenizerError, TrainingError) as error:
            print(f"bert-train: error: {error}", file=sys.stderr)
            return 2
        with trainer:
            code = _run(trainer, args, TrainingError)
        if distributed and code == 0:
            import torch.distributed as dist

            # Rank 0 writes the final folder after the others are done; tearing gloo down on one rank while
            # another still runs aborted rank 0 ("terminate called without an active exception") under load.
            dist.barrier()
        return code
    finally:
        if distributed:
            import torch.distributed as dist

            dist.destroy_process_group()


def _run(trainer, args: argparse.Namespace, training_error: type[Exception]) -> int:
    from tqdm import tqdm

    config = trainer.config
    show = trainer.is_main
    interrupts = 0

    def on_signal(signum, frame):
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1:
            raise KeyboardInterrupt
        trainer.request_stop()
        if show:
            print("\nbert-train: stopping after this step and writing a checkpoint (Ctrl-C again to abort)",
                  file=sys.stderr)

    in_main_thread = threading.current_thread() is threading.main_thread()  # signals only work there
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main_thread else {}
    if show:
        source = f"resuming from {trainer.resumed_from} at step {trainer.step}" if trainer.resumed_from else "new run"
        print(f"bert-train: {source}; {trainer.model.num_parameters():,} parameters on {trainer.device} "
              f"× {trainer.world_size} process(es); run folder {trainer.out_dir}", file=sys.stderr)
    progress = tqdm(total=config.steps, initial=trainer.step, disable=not show or args.no_progress,
                    unit="step", dynamic_ncols=True, file=sys.stderr)
    try:
        for stats in trainer.steps():
            progress.update(1)
            progress.set_postfix(loss=_fmt(stats.loss), mlm_acc=_fmt(stats.mlm_accuracy),
                                 nsp_acc=_fmt(stats.nsp_accuracy), tok_s=f"{stats.tokens_per_second:.0f}",
                                 refresh=False)
            if stats.warning is not None and show:
                progress.write(f"bert-train: warning: {stats.warning}", file=sys.stderr)
            if stats.eval is not None and show:
                line = (f"step {stats.step}: held-out loss {_fmt(stats.eval.loss)}, MLM accuracy "
                        f"{stats.eval.mlm_accuracy:.4f}, NSP accuracy {stats.eval.nsp_accuracy:.4f}; train loss "
                        f"{_fmt(stats.loss)}, {stats.tokens_per_second:.0f} tokens/s, {stats.elapsed_seconds:.0f} s")
                progress.write(line, file=sys.stderr)
    except training_error as error:
        progress.close()
        print(f"bert-train: error: {error}", file=sys.stderr)
        return 1
    finally:
        progress.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if show:
        evaluation = trainer.last_eval
        final = trainer.run_folder.final_dir if trainer.step >= config.steps else trainer.run_folder.checkpoints_dir
        print(f"bert-train: {'finished' if trainer.step >= config.steps else 'stopped'} at step {trainer.step}; "
              + (f"held-out MLM accuracy {evaluation.mlm_accuracy:.4f}, NSP accuracy {evaluation.nsp_accuracy:.4f}; "
                 if evaluation else "") + f"weights in {final}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
