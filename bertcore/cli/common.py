"""What `bert-train` (bertcore.cli.train) and `bert-finetune` (bertcore.cli.finetune) share: their options, generated
from the settings' fields (bertcore.training.settings), finding the run a --resume continues, joining a torchrun
process group, and driving a training loop with a progress bar, Ctrl-C handling and the exit codes:

    0  finished, or stopped (Ctrl-C or SIGTERM once: after the current step, with a checkpoint)
    1  training failed (NaN or diverging loss, out of memory, a checkpoint or file that could not be written),
       or was aborted (Ctrl-C a second time while no checkpoint was being written: at once, even in the middle of
       a long step, without a checkpoint, naming the latest one and the steps it does not hold)
    2  bad arguments or input (a data file, a checkpoint, a run folder in use, not writable, or not a run)

The first Ctrl-C is answered at once too ("stopping after this step and writing a checkpoint"), though the step
itself runs to its end. A second Ctrl-C while the stopping checkpoint (or the final weights) is being written does
not cut it short: the command says "still writing the checkpoint, please wait…" and ends when it is written
(exit 0). No Ctrl-C ends in a traceback.

Torch-free at import, so that `--help` answers at once: torch comes in when a run starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import sys
import threading
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bertcore.files.file_names import CHECKPOINTS_DIR, LOCK_FILE, METRICS_FILE, RUN_CONFIG_FILE, VOCAB_FILE
from bertcore.files.run_folder import RunFolder
from bertcore.training.settings import help_of


def add_setting_options(parser: argparse.ArgumentParser, config_class: type, *, groups: Mapping[str, str],
                        shown: Mapping[str, str] | None = None) -> dict[str, argparse._ArgumentGroup]:
    """One option per field of `config_class` that has one (bertcore.training.settings.setting), as transformers'
    HfArgumentParser makes them: named after the field (`--batch-size`, or the field's own option name), with its
    type, its choices and its help, the default said in the help. argparse's own default is None, so that an
    option left out keeps the config's default, or, with --resume, the resumed run's value (`given_settings`).

    `groups` titles the --help sections, in their order (a field's group -> title); `shown` says the defaults the
    command picks itself (a fresh, dated run folder). Returns the sections by group, for the command's own options."""
    sections = {group: parser.add_argument_group(title) for group, title in groups.items()}
    hints = typing.get_type_hints(config_class)
    inherited = {field.name for base in config_class.__mro__[1:] if dataclasses.is_dataclass(base)
                 for field in dataclasses.fields(base)}
    # The command's own settings lead each section, then those every run shares.
    for field in sorted(dataclasses.fields(config_class), key=lambda field: field.name in inherited):
        meta = field.metadata
        if not meta or meta["option"] is None:
            continue
        option = meta["option"] or "--" + field.name.replace("_", "-")
        words = (shown or {}).get(field.name, meta["shown"])
        if words is not None:
            words = f"default: {words}"
        elif field.default is not None and field.default is not False:
            words = f"default {field.default:g}" if isinstance(field.default, float) else f"default {field.default}"
        help_text = help_of(config_class, field.name) + (f" ({words})" if words else "")
        kind = _option_type(hints[field.name])
        keywords: dict[str, Any] = {"dest": field.name, "default": None, "help": help_text.replace("%", "%%")}
        if kind is bool:
            keywords["action"] = "store_true"
        else:
            choices = meta["choices"]
            keywords.update(type=None if kind is str else kind, choices=choices() if callable(choices) else choices,
                            metavar=None if choices else option.lstrip("-").replace("-", "_").upper())
        sections[meta["group"]].add_argument(option, **keywords)
    return sections


def _option_type(hint: Any) -> type:
    """The type an option's text becomes: the field's, without its None (`int | None` -> int)."""
    kinds = [kind for kind in typing.get_args(hint) if kind is not type(None)] or [hint]
    if len(kinds) != 1 or kinds[0] not in (bool, int, float, str):
        raise TypeError(f"a setting of type {hint} cannot be an option; declare it with option=None")
    return kinds[0]


def given_settings(args: argparse.Namespace, config_class: type) -> dict[str, Any]:
    """{field: value} of the settings given on the command line (the options left out are None)."""
    return {field.name: getattr(args, field.name) for field in dataclasses.fields(config_class)
            if getattr(args, field.name, None) is not None}


def add_run_control_options(run: argparse._ArgumentGroup) -> None:
    """--resume and --no-progress: how the command runs, which no setting records."""
    run.add_argument("--resume", nargs="?", const=True,
                     help="continue the run in --out from checkpoints/latest, or from the given checkpoint folder")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (one line per evaluation)")


def resumed_run_dir(args: argparse.Namespace, prog: str) -> Path:
    """The run folder --resume continues: --out, or the run folder --resume names, or the one holding the
    checkpoint it names (<run>/checkpoints/step-N; the loop refuses one that resolves outside it)."""
    if args.resume is True:
        if args.out_dir is None:
            raise ValueError("--resume without a folder needs --out RUN_FOLDER (the run to continue)")
        run_dir = Path(args.out_dir)
    elif args.out_dir:
        run_dir = Path(args.out_dir)
    else:
        named = Path(args.resume).absolute()
        run_dir = named if RunFolder(named).run_config_path.is_file() else named.parent.parent
    if not RunFolder(run_dir).run_config_path.is_file():
        raise ValueError(_why_not_resumable(run_dir, prog))
    return run_dir


def _why_not_resumable(run_dir: Path, prog: str) -> str:
    """Why a folder without run_config.json cannot be resumed, as the folder shows it."""
    if not run_dir.exists():
        return (f"{run_dir} does not exist, so it holds no {RUN_CONFIG_FILE} and there is no {prog} run to resume; "
                "start a new run without --resume, or name the run folder it wrote (--out)")
    left = [name for name in (LOCK_FILE, METRICS_FILE, VOCAB_FILE, CHECKPOINTS_DIR) if (run_dir / name).exists()]
    if left:
        return (f"{run_dir} holds no {RUN_CONFIG_FILE}: a run started in it (it left {', '.join(left)}) but was "
                "stopped before its settings were written, so there is nothing to resume. Start it again without "
                "--resume (the same --out is fine), or delete the folder")
    return f"{run_dir} holds no {RUN_CONFIG_FILE}, so it is not a {prog} run folder to resume"


def resume_argument(args: argparse.Namespace) -> bool | str:
    """What the loop's resume= gets: False, True (the latest checkpoint) or the checkpoint folder named."""
    if not args.resume:
        return False
    if args.resume is True:
        return True
    named = Path(args.resume)
    if RunFolder(named).run_config_path.is_file() and (args.out_dir is None
                                                       or Path(args.out_dir).resolve() == named.resolve()):
        return True  # --resume RUN_FOLDER continues from its latest checkpoint
    return args.resume  # a checkpoint folder; the loop refuses one outside the run folder


def init_distributed(device_name: str | None) -> bool:
    """Join the torchrun process group when launched by torchrun (TORCHELASTIC_RUN_ID), even a group of one: its
    backend (NCCL on a GPU) is then the one a larger run would use; or when WORLD_SIZE says there are several."""
    if "TORCHELASTIC_RUN_ID" not in os.environ and int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch
    import torch.distributed as dist

    use_nccl = torch.cuda.is_available() and (device_name or "auto") != "cpu"
    if use_nccl:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend="nccl" if use_nccl else "gloo")
    return True


def process_group_note() -> str:
    """" over nccl" (or gloo) for a process in a torchrun process group, else "": for the run's first line."""
    from bertcore.training.loop import process_group_backend

    backend = process_group_backend()
    return f" over {backend}" if backend else ""


def fmt(value: float) -> str:
    return f"{value:.4g}"


def run_command(prog: str, argv: list[str] | None, make_config: Callable[[], object],
                make_loop: Callable[[object, list[str]], object], drive_loop: Callable[[object], int]) -> int:
    """The main() of a training command: `make_config()` and `make_loop(config, command line)` build the loop (a bad
    argument or input -> its message and exit 2; Ctrl-C while it is built -> exit 1, nothing trained),
    `drive_loop(loop)` runs it (0 or 1); a torchrun process group is joined and left around it."""
    distributed = False
    try:
        from bertcore.errors import TrainingError

        try:
            config = make_config()
            distributed = init_distributed(config.device)
            loop = make_loop(config, [prog, *(sys.argv[1:] if argv is None else argv)])
        except (ValueError, TrainingError) as error:  # CheckpointError, TaskDataError, ... are ValueErrors
            print(f"{prog}: error: {error}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # the loop (and its lock) was let go of by its own constructor
            print(f"\n{prog}: interrupted before training started; nothing was trained", file=sys.stderr)
            return 1
        try:
            with loop:
                code = drive_loop(loop)
        except KeyboardInterrupt:  # a Ctrl-C after drive_loop let go of its handler (it handles the ones before)
            print(f"\n{prog}: interrupted", file=sys.stderr)
            return 1
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


class _Interrupts:
    """Ctrl-C (SIGINT) and SIGTERM while `drive()` runs, acted on the moment they arrive.

    The first asks the loop to stop after the current step, with a checkpoint. A second one while a checkpoint (or
    the final weights) is being written waits for that write, saying so: cutting it short would only lose it. At any
    other moment it ends the process at once (exit 1), saying what was saved and what was not.

    Python runs a signal handler only between two bytecodes of the main thread, so a handler alone waits for the
    long C++ operation in progress (a backward pass of minutes) before it runs. The C handler Python installs for
    a Python-handled signal also writes the signal's number to the wakeup fd (`signal.set_wakeup_fd`) the moment
    it arrives; a thread blocked reading it acts then, while the main thread computes (torch releases the GIL in
    its kernels). The Python handler, which keeps Python's KeyboardInterrupt away, sees every signal too, later:
    each side counts what it saw and the larger count is acted on, so a signal is acted on once, by whichever
    sees it first, and one that arrives as the wakeup fd is being let go of is still seen. Where no wakeup fd can
    be set, the Python handler acts alone, between bytecodes (off the main thread no handler is set at all).

    Ending at once is `os._exit`: no Python clean-up runs, and none is needed. The run folder's lock is an OS lock
    that dies with the process, `metrics.jsonl` is flushed line by line, and checkpoints are written into a staging
    folder and renamed whole, so nothing half-written is ever taken for a checkpoint (a write that begins in the
    instant between the check and the exit leaves at most that staging folder). The batch workers of a GPU
    run (torch's DataLoader) leave when their parent is gone."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, loop, prog: str, show: bool):
        self.loop, self.prog, self.show = loop, prog, show
        self.count = 0  # the signals acted on
        self._seen = {"watcher": 0, "handler": 0}  # the signals each side has seen
        self._count_lock = threading.Lock()
        self._previous_handlers: dict = {}
        self._previous_wakeup_fd: int | None = None
        self._reader = self._writer = None
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is not threading.main_thread():  # signal handlers can only be set there
            return self
        self._previous_handlers = {sig: signal.signal(sig, self._python_handler) for sig in self.SIGNALS}
        try:
            reader, writer = socket.socketpair()  # a socket: the one kind of wakeup fd Windows accepts too
        except OSError:
            return self  # the Python handler acts alone, between bytecodes
        try:
            writer.setblocking(False)  # set_wakeup_fd requires it: the C handler must never block
            self._previous_wakeup_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (OSError, ValueError):
            reader.close()
            writer.close()
            return self
        self._reader, self._writer = reader, writer
        self._watcher = threading.Thread(target=self._watch, name=f"{self.prog} interrupts", daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._writer is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd if self._previous_wakeup_fd is not None else -1)
            self._writer.close()  # the watcher reads the end of the stream and leaves
            self._watcher.join()
            self._reader.close()
        for sig, handler in self._previous_handlers.items():
            # Once a stop was asked for, the process is on its way out: a further Ctrl-C between here and the exit
            # would meet the default handler and kill it (exit -2) after its checkpoint was already written.
            signal.signal(sig, signal.SIG_IGN if self.count else handler)

    def _python_handler(self, signum, frame) -> None:
        self.arrived("handler")

    def _watch(self) -> None:
        while True:
            try:
                received = self._reader.recv(64)
            except OSError:
                return
            if not received:
                return
            for signum in received:
                if signum in self.SIGNALS:
                    self.arrived("watcher")

    def arrived(self, seen_by: str) -> None:
        """One Ctrl-C or SIGTERM, as the watcher or the Python handler saw it."""
        with self._count_lock:
            self._seen[seen_by] += 1
            if max(self._seen.values()) == self.count:  # the other side saw this one already and acted on it
                return
            self.count += 1
            first = self.count == 1
        loop, prog = self.loop, self.prog
        if first:
            loop.request_stop()
            self._say(f"{prog}: stopping after this step and writing a checkpoint (Ctrl-C again to stop at once "
                      "without it)")
            return
        writing = getattr(loop, "writing", None)
        if writing:
            self._say(f"{prog}: still writing {writing}, please wait…")
            return
        self._say(self.abort_message())
        os._exit(1)

    def abort_message(self) -> str:
        """What a second Ctrl-C leaves: the step reached, the checkpoint to resume from, the steps not saved."""
        from bertcore.files.file_names import checkpoint_step

        prog, step, kept = self.prog, self.loop.step, self.loop.last_checkpoint
        kept_step = checkpoint_step(kept.name) if kept is not None else None
        if kept is not None and kept_step == step:
            return f"{prog}: aborted at step {step} after writing its checkpoint {kept}; resume from it with --resume"
        first_lost = 1 if kept_step is None else kept_step + 1
        lost = ("" if step < first_lost else f" step {step}" if step == first_lost
                else f" steps {first_lost}–{step}")
        if kept is None:
            verb = "is" if step == first_lost else "are"
            saved = f"there is no checkpoint to resume from, so{lost} {verb} lost" if lost else "nothing was trained"
        else:
            saved = f"the latest is {kept}: resume from it with --resume" + (f" (it repeats{lost})" if lost else "")
        return (f"{prog}: aborted at step {step} without writing a checkpoint; {saved}. One Ctrl-C stops with a "
                "checkpoint")

    def _say(self, message: str) -> None:
        if not self.show:
            return
        print(f"\n{message}", file=sys.stderr, flush=True)


def drive(loop, args: argparse.Namespace, prog: str, *, postfix: Callable[[object], dict],
          describe_eval: Callable[[object], str], describe_analysis: Callable[[dict], str] | None = None) -> int:
    """Iterate the loop's steps with a progress bar (rank 0 only): `postfix(stats)` for the bar, a line per
    evaluation and one at the end, with `describe_eval(evaluation)` for the task's metrics, and a line per analysis
    record with `describe_analysis(record)` (those a stop left after the last step too). Ctrl-C (or SIGTERM)
    stops after the current step with a checkpoint. A second one while a checkpoint (or the final weights) is
    being written waits for it, saying so; at any other moment it ends the process at once, even in the middle
    of a long step, without a checkpoint (exit 1; see _Interrupts). Returns 0 (finished or stopped) or 1 (a
    TrainingError, printed)."""
    from tqdm import tqdm

    from bertcore.errors import TrainingError

    show = loop.is_main
    shown_uncarried = 0

    def uncarried() -> list[dict]:
        """The analysis records written since the last call that no step record carried (AnalysisSchedule)."""
        nonlocal shown_uncarried
        records = loop.analysis.uncarried_records[shown_uncarried:]
        shown_uncarried += len(records)
        return records

    progress = tqdm(total=loop.total_steps, initial=loop.step, disable=not show or args.no_progress,
                    unit="step", dynamic_ncols=True, file=sys.stderr)
    try:
        with _Interrupts(loop, prog, show):
            for stats in loop.steps():
                progress.update(1)
                progress.set_postfix(**postfix(stats), refresh=False)
                if stats.warning is not None and show:
                    progress.write(f"{prog}: warning: {stats.warning}", file=sys.stderr)
                if stats.eval is not None and show:
                    epoch = f" (epoch {stats.epoch:.2f})" if hasattr(stats, "epoch") else ""
                    progress.write(f"step {stats.step}{epoch}: held-out loss {fmt(stats.eval.loss)}, "
                                   f"{describe_eval(stats.eval)}; train loss {fmt(stats.loss)}, "
                                   f"{stats.tokens_per_second:.0f} tokens/s, {stats.elapsed_seconds:.0f} s",
                                   file=sys.stderr)
                if describe_analysis is not None and show:
                    for record in [*uncarried(), stats.analysis]:
                        if record is not None:
                            progress.write(describe_analysis(record), file=sys.stderr)
            if describe_analysis is not None and show:
                for record in uncarried():  # those a stop left after the last step
                    progress.write(describe_analysis(record), file=sys.stderr)
    except TrainingError as error:
        progress.close()
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    finally:
        progress.close()
    if show:
        finished = loop.step >= loop.total_steps
        weights = loop.run_folder.final_dir if finished else loop.run_folder.checkpoints_dir
        evaluation = loop.last_eval
        print(f"{prog}: {'finished' if finished else 'stopped'} at step {loop.step}; "
              + (f"held-out {describe_eval(evaluation)}; " if evaluation else "") + f"weights in {weights}",
              file=sys.stderr)
    return 0
