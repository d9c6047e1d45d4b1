"""Fault audit: feed bertcore broken checkpoints, broken run folders and broken task files, and classify each outcome.

    .venv/bin/python benchmarks/fault_audit.py                     # all three families, 2 jobs
    .venv/bin/python benchmarks/fault_audit.py --family checkpoint --quick --jobs 4

Three families of concrete cases, each made in a temporary folder:

- checkpoint: a tiny bertcore-saved checkpoint and transformers-saved BertForPreTraining / BertModel /
  BertForSequenceClassification folders, each damaged (files deleted, cut, flipped; config.json values of wrong
  types and sizes, deep JSON; FIFOs, /dev/zero and dangling symlinks; vocabularies that do not fit; NaN, misshapen,
  extra or missing tensors; pickles that would run code; safetensors headers of garbage). `load_pretrained` runs
  in a forked child of a process that imported bertcore once, with a 10 s timeout and RLIMIT_AS of 3 GB, so a
  hang or a memory blow-up is counted, not suffered; a hang is confirmed in a fresh interpreter.
- run: `bert-train` (python -m bertcore.cli.train) on a tiny model: kill -9 and --resume (the resumed loss curve is
  compared with an uninterrupted run's), run files as symlinks to a victim file outside the folder, FIFOs,
  read-only folders (chattr +i), a full disk (a small tmpfs), corrupt trainer_state.pt / run_config.json /
  latest, divergence, Ctrl-C twice, two runs in one folder, bad corpora and options.
- finetune: `bert-finetune` (python -m bertcore.cli.finetune) for one step on CSV/TSV/JSONL/CoNLL/SQuAD files
  with broken headers, quoting, encodings, labels, fields and nesting, and absurd settings. The schedule is
  transformers' linear one (update k uses its factor of k - 1), so a warm-up's first update has rate 0: settings
  that only bite in an update (--lr 1e30) get 3 steps.
- tokenizer, corpus, explain (issue 34; their own section below, PROBE_FAMILIES): tokenizer files (tokenizer.json,
  vocab.json + merges.txt, vocab.txt, spiece.model: the audit's cases and hundreds of deterministic damages, a
  SentencePiece model held to `sentencepiece`'s own encoding), corpus formats, long lines, a gz bomb and the
  prepared-corpus cache (tampered, meta.json missing, FIFOs, read-only, kill -9 during preparation, five edits),
  and the Explain API (steps, tolerances, targets, NaN weights, empty inputs). Each case runs in a forked child of
  a process that imported bertcore once, with a timeout and an address-space limit; the children import bertcore
  from this script's checkout.

Each case records what it expects: "fail" (the input is wrong: it must be refused), "ok" (valid: it must work) or
"any" (either is right, e.g. a flipped byte inside safetensors' tensor data, which no checksum covers). Outcomes:

    ok         a valid input that worked (or an "any" case that worked and passed its checks)
    clear      refused with exit code 1 or 2 (or, loading, a CheckpointError) and a message, no traceback
    refused    a valid input refused (with a clear message)
    traceback  a traceback on stderr, an undocumented exception type, an exit code other than 0/1/2, a crash
    silent     succeeded although the input was wrong, or succeeded with a wrong result (the case says which)
    hang       no answer within the timeout
    victim     a file outside the run folder was changed or created, or a pickle's code ran (data loss)

Prints a table per family and every case whose outcome is not ok or clear, with its one-line message.
A measuring script, not a test: it exits 0 whatever it finds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import itertools
import json
import os
import pickle
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
LOAD_TIMEOUT_S = 10.0
LOAD_MEMORY_BYTES = 3 * 1024**3
CLI_TIMEOUT_S = 60.0
OUTCOMES = ("ok", "clear", "refused", "traceback", "silent", "hang", "victim")
TRACEBACK = "Traceback (most recent call last)"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# 99 tokens: an odd vocab_size that no power-of-two padding rule can excuse a shorter vocabulary for.
TINY_VOCAB = SPECIALS + [f"w{i}" for i in range(94)]
TINY_SIZES = dict(vocab_size=99, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=37,
                  max_position_embeddings=64, type_vocab_size=2)


@dataclass
class Outcome:
    kind: str
    message: str


@dataclass
class Result:
    family: str
    name: str
    expect: str
    outcome: Outcome
    seconds: float


# ---- processes -------------------------------------------------------------------------------------------------

@dataclass
class Proc:
    rc: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float


def last_line(text: str, width: int = 220) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return (lines[-1] if lines else "(no message)")[:width]


def error_line(text: str, width: int = 220) -> str:
    """The line that says what went wrong: an 'error:' line or the last line of a traceback."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    for line in reversed(lines):
        if "error:" in line.lower() or "Error" in line.split(":")[0]:
            return line[:width]
    return last_line(text, width)


def run_cli(module: str, args: list[str], cwd: Path, timeout: float = CLI_TIMEOUT_S) -> Proc:
    return finish(start_cli(module, args, cwd), timeout)


def start_cli(module: str, args: list[str], cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([PYTHON, "-m", module, *map(str, args)], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)


def finish(process: subprocess.Popen, timeout: float) -> Proc:
    started = time.monotonic()
    try:
        out, err = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        timed_out = True
    return Proc(process.returncode, out, err, timed_out, time.monotonic() - started)


def judge(expect: str, proc: Proc, *, victim: str | None = None, wrong: str | None = None) -> Outcome:
    """The outcome of a command line run: see the module docstring. `wrong` says what is wrong with a success."""
    if victim:
        return Outcome("victim", victim)
    if proc.timed_out:
        return Outcome("hang", f"no exit within {proc.seconds:.0f} s; last: {last_line(proc.stderr)}")
    if TRACEBACK in proc.stderr or TRACEBACK in proc.stdout:
        return Outcome("traceback", error_line(proc.stderr))
    if proc.rc not in (0, 1, 2):
        return Outcome("traceback", f"exit code {proc.rc}: {last_line(proc.stderr)}")
    if proc.rc == 0:
        if wrong:
            return Outcome("silent", wrong)
        if expect == "fail":
            return Outcome("silent", f"exit 0 on wrong input: {last_line(proc.stderr)}")
        return Outcome("ok", last_line(proc.stderr))
    if not proc.stderr.strip():
        return Outcome("traceback", f"exit code {proc.rc} with no message")
    if expect == "ok":
        return Outcome("refused", error_line(proc.stderr))
    return Outcome("clear", error_line(proc.stderr))


class Victims:
    """Files outside the run folder that a case points the run's files at; any change to them is data loss."""

    def __init__(self, root: Path):
        self.root = root / "victims"
        (self.root / "folder" / "inner").mkdir(parents=True)
        self.file = self.root / "precious.txt"
        self.file.write_text("precious data, not the run's\n")
        self.folder = self.root / "folder"
        (self.folder / "keep.txt").write_text("keep me\n")
        (self.folder / "inner" / "deep.txt").write_text("keep me too\n")
        self.missing = self.root / "not-yet.txt"  # a dangling symlink's target: must not be created
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, str]:
        seen = {}
        for path in sorted(self.root.rglob("*")):
            rel = str(path.relative_to(self.root))
            if path.is_symlink():
                seen[rel] = "symlink:" + os.readlink(path)
            elif path.is_file():
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[rel] = "folder"
        return seen

    def damage(self) -> str | None:
        after = self.snapshot()
        if after == self.before:
            return None
        gone = sorted(self.before.keys() - after.keys())
        new = sorted(after.keys() - self.before.keys())
        changed = sorted(k for k in self.before.keys() & after.keys() if self.before[k] != after[k])
        parts = [f"{label}: {', '.join(names[:3])}" for label, names in
                 (("deleted", gone), ("created", new), ("changed", changed)) if names]
        return "outside the run folder, " + "; ".join(parts)


def make_fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def replace_with_symlink(path: Path, target: Path | str) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)


def deep_json(levels: int = 100_000) -> str:
    return "[" * levels + "]" * levels


def unfreeze(root: Path) -> None:
    """Undo chattr +i anywhere under root (cases may freeze files), so the temporary folder can be removed."""
    subprocess.run(["chattr", "-R", "-i", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- family 1: checkpoints -------------------------------------------------------------------------------------

@dataclass
class CheckpointCase:
    name: str
    base: str  # which tiny checkpoint it damages: ours, hf-pretraining, hf-model, hf-seqcls
    expect: str
    damage: Callable[[Path], None]
    marker: bool = False  # the damage plants a pickle that would create <folder>/../PWNED
    want: dict = field(default_factory=dict)  # digest values a successful load must have


def build_checkpoint_bases(root: Path) -> dict[str, Path]:
    import torch

    import bertcore

    bases = {}
    torch.manual_seed(0)
    tokenizer = bertcore.BertTokenizer(TINY_VOCAB)
    ours = bertcore.BertForPreTraining(bertcore.BertConfig(**TINY_SIZES))
    bases["ours"] = bertcore.save_pretrained(ours, tokenizer, root / "ours")
    padded = bertcore.BertForPreTraining(bertcore.BertConfig(**{**TINY_SIZES, "vocab_size": 104}))
    bertcore.save_pretrained(padded, bertcore.BertTokenizer([*TINY_VOCAB, "x1", "x2", "x3", "x4", "x5"]),
                             root / "ours-104")
    lines = (root / "ours-104" / "vocab.txt").read_text().splitlines()[:99]
    (root / "ours-104" / "vocab.txt").write_text("\n".join(lines) + "\n")  # 104 rows padded from 99 (a multiple of 8)
    (root / "ours-104" / "tokenizer_config.json").unlink()  # as NVIDIA's padded checkpoints come: no record of 104
    bases["ours-104"] = root / "ours-104"

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name, cls, extra in (("hf-pretraining", transformers.BertForPreTraining, {}),
                             ("hf-model", transformers.BertModel, {}),
                             ("hf-seqcls", transformers.BertForSequenceClassification,
                              dict(num_labels=3, id2label={0: "neg", 1: "neu", 2: "pos"},
                                   label2id={"neg": 0, "neu": 1, "pos": 2}))):
        torch.manual_seed(1)
        model = cls(transformers.BertConfig(**TINY_SIZES, **extra))
        model.save_pretrained(root / name, safe_serialization=True)
        (root / name / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
        bases[name] = root / name
    return bases


def _edit_bytes(path: Path, edit: Callable[[bytes], bytes]) -> None:
    path.write_bytes(edit(path.read_bytes()))


def _flip(offset_of: Callable[[int], int]) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        if not data:
            return data
        at = min(max(offset_of(len(data)), 0), len(data) - 1)
        return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
    return edit


def _garbage(data: bytes) -> bytes:
    return random.Random(len(data)).randbytes(max(len(data), 16))


FILE_DAMAGES: list[tuple[str, Callable[[Path], None]]] = [
    ("deleted", lambda p: p.unlink()),
    ("emptied", lambda p: p.write_bytes(b"")),
    ("cut to half", lambda p: _edit_bytes(p, lambda d: d[: len(d) // 2])),
    ("last byte cut", lambda p: _edit_bytes(p, lambda d: d[:-1])),
    ("first byte flipped", lambda p: _edit_bytes(p, _flip(lambda n: 0))),
    ("middle byte flipped", lambda p: _edit_bytes(p, _flip(lambda n: n // 2))),
    ("replaced by garbage", lambda p: _edit_bytes(p, _garbage)),
]


def _file_damage_expectation(file: str, damage: str) -> str:
    if file == "tokenizer_config.json":
        return "any"  # optional: only says whether to lower-case
    if damage == "last byte cut":
        return "any" if file in ("config.json", "vocab.txt") else "fail"  # maybe just the final newline
    if file == "model.safetensors" and damage == "middle byte flipped":
        return "any"  # inside tensor data: no checksum covers it
    return "fail"


def _config_edit(**changes) -> Callable[[Path], None]:
    """Set (or, with the value DELETE, remove) config.json fields."""
    def damage(folder: Path) -> None:
        path = folder / "config.json"
        config = json.loads(path.read_text())
        for key, value in changes.items():
            if value is DELETE:
                config.pop(key, None)
            else:
                config[key] = value
        path.write_text(json.dumps(config, allow_nan=True))
    return damage


DELETE = object()


def _config_text(text: str | bytes) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "config.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return damage


def _config_text_with(template: Callable[[str], str]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "config.json"
        path.write_text(template(path.read_text()))
    return damage


def _weights_edit(edit: Callable[[dict], dict]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        path = folder / "model.safetensors"
        save_file(edit(load_file(path)), path, metadata={"format": "pt"})
    return damage


def _set(name_part: str, make: Callable) -> Callable[[dict], dict]:
    def edit(tensors: dict) -> dict:
        name = next(n for n in sorted(tensors) if name_part in n)
        tensors[name] = make(tensors[name])
        return tensors
    return edit


def _drop(predicate: Callable[[str], bool]) -> Callable[[dict], dict]:
    return lambda tensors: {n: t for n, t in tensors.items() if not predicate(n)}


def _rename(mapping: Callable[[str], str]) -> Callable[[dict], dict]:
    return lambda tensors: {mapping(n): t for n, t in tensors.items()}


def _nan_at(tensor):
    tensor = tensor.clone()
    tensor.view(-1)[3] = float("nan")
    return tensor


def _inf_at(tensor):
    tensor = tensor.clone()
    tensor.view(-1)[-1] = float("inf")
    return tensor


def _vocab_lines(count_of: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "vocab.txt"
        path.write_text("\n".join(count_of(path.read_text().splitlines())) + "\n")
    return damage


def _vocab_bytes(edit: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    return lambda folder: _edit_bytes(folder / "vocab.txt", edit)


class _RunsCode:
    """Unpickling this creates the marker file: the proof that a loader ran code from a checkpoint."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _bin_from(make: Callable[[dict, Path], object], *, legacy: bool = False, keep_safetensors: bool = False):
    """Replace the weights with a pytorch_model.bin holding make(state_dict, marker)."""
    def damage(folder: Path) -> None:
        import torch
        from safetensors.torch import load_file

        state_dict = load_file(folder / "model.safetensors")
        if not keep_safetensors:
            (folder / "model.safetensors").unlink()
        payload = make(state_dict, folder.parent / "PWNED")
        if legacy:
            with open(folder / "pytorch_model.bin", "wb") as handle:
                pickle.dump(payload, handle)
        else:
            torch.save(payload, folder / "pytorch_model.bin")
    return damage


def _safetensors_header(header: bytes | None = None, *, length: int | None = None, tail: bytes = b""):
    """Rewrite model.safetensors' header (an 8-byte little-endian length, then JSON) keeping the tensor data."""
    def damage(folder: Path) -> None:
        path = folder / "model.safetensors"
        data = path.read_bytes()
        (old_length,) = struct.unpack("<Q", data[:8])
        body = data[8 + old_length:]
        new_header = data[8:8 + old_length] if header is None else header
        path.write_bytes(struct.pack("<Q", len(new_header) if length is None else length) + new_header + body + tail)
    return damage


def _header_json_edit(edit: Callable[[dict], dict]):
    def damage(folder: Path) -> None:
        path = folder / "model.safetensors"
        data = path.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = edit(json.loads(data[8:8 + length]))
        encoded = json.dumps(header).encode()
        encoded += b" " * (-len(encoded) % 8)
        path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data[8 + length:])
    return damage


def _first_tensor(header: dict) -> str:
    return next(name for name in sorted(header) if name != "__metadata__")


def _header_offsets(offsets) -> Callable[[dict], dict]:
    def edit(header: dict) -> dict:
        header[_first_tensor(header)]["data_offsets"] = offsets
        return header
    return edit


def _header_field(key: str, value) -> Callable[[dict], dict]:
    def edit(header: dict) -> dict:
        header[_first_tensor(header)][key] = value
        return header
    return edit


def _path_damage(file: str, kind: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / file
        path.unlink(missing_ok=True)
        if kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        elif kind == "dev-urandom":
            path.symlink_to("/dev/urandom")
        elif kind == "dangling":
            path.symlink_to(folder / "no-such-file")
        elif kind == "self-loop":
            path.symlink_to(path.name)
    return damage


def checkpoint_cases() -> list[CheckpointCase]:
    import torch

    cases: list[CheckpointCase] = []
    heads = {"hf-pretraining": True, "hf-model": False}
    for base in ("ours", "hf-pretraining", "hf-model", "hf-seqcls"):
        want = {"class": "BertForSequenceClassification"} if base == "hf-seqcls" else {}
        if base in heads:
            want["heads"] = heads[base]
        cases.append(CheckpointCase(f"{base}: intact", base, "ok", lambda f: None, want=want))
        files = ["config.json", "model.safetensors", "vocab.txt"]
        files += ["tokenizer_config.json"] if base == "ours" else []
        for file in files:
            for label, damage in FILE_DAMAGES:
                cases.append(CheckpointCase(f"{base}: {file} {label}", base, _file_damage_expectation(file, label),
                                            lambda f, file=file, damage=damage: damage(f / file)))
        for kind in ("folder", "fifo", "dev-zero", "dangling"):
            cases.append(CheckpointCase(f"{base}: config.json a {kind}", base, "fail",
                                        _path_damage("config.json", kind)))

    # config.json: missing keys, wrong types and values
    size_keys = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings"]
    for key in size_keys:
        if key == "num_attention_heads":
            continue  # no tensor shape says it: transformers' default (12) divides 24 too, so below as "any"
        cases.append(CheckpointCase(f"config without {key}", "ours", "fail", _config_edit(**{key: DELETE})))
    for key in ("num_attention_heads", "type_vocab_size", "architectures", "model_type", "hidden_act",
                "layer_norm_eps"):
        cases.append(CheckpointCase(f"config without {key}", "ours", "any", _config_edit(**{key: DELETE})))
    cases.append(CheckpointCase("seqcls config without architectures", "hf-seqcls", "any",
                                _config_edit(architectures=DELETE)))
    for key, value in [("vocab_size", "99"), ("vocab_size", True), ("vocab_size", None), ("vocab_size", [99]),
                       ("vocab_size", {"n": 99}), ("vocab_size", -99), ("vocab_size", 0), ("vocab_size", 10**12),
                       ("vocab_size", 99.5), ("hidden_size", "24"), ("hidden_size", -24), ("hidden_size", 2**63),
                       ("num_hidden_layers", 1_000_000), ("num_hidden_layers", -2), ("num_hidden_layers", 0),
                       ("num_hidden_layers", "2"), ("num_attention_heads", 5), ("num_attention_heads", 0),
                       ("num_attention_heads", -3), ("intermediate_size", 10**9), ("intermediate_size", "37"),
                       ("max_position_embeddings", 10**100), ("max_position_embeddings", -1),
                       ("type_vocab_size", 0), ("type_vocab_size", 10**7), ("hidden_act", 5),
                       ("hidden_act", "no_such_activation"), ("layer_norm_eps", "x"), ("layer_norm_eps", -1.0),
                       ("layer_norm_eps", float("nan")), ("layer_norm_eps", float("inf")),
                       ("hidden_dropout_prob", 1.5), ("hidden_dropout_prob", -0.1), ("hidden_dropout_prob", "0.1"),
                       ("attention_probs_dropout_prob", float("nan")), ("architectures", ["GPT2LMHeadModel"]),
                       ("architectures", [5]),
                       ("initializer_range", "x"), ("id2label", {"x": "a"}), ("id2label", [1, 2]),
                       ("pad_token_id", 10**6), ("pad_token_id", -5)]:
        cases.append(CheckpointCase(f"config {key} = {json.dumps(value, allow_nan=True)[:40]}", "ours", "fail",
                                    _config_edit(**{key: value})))
    cases += [
        CheckpointCase("config vocab_size = 99.0", "ours", "any", _config_edit(vocab_size=99.0)),
        CheckpointCase('config architectures = "BertForPreTraining" (not a list)', "ours", "any",
                       _config_edit(architectures="BertForPreTraining")),
        CheckpointCase("config architectures = []", "ours", "any", _config_edit(architectures=[])),
        CheckpointCase("config num_labels = -1 (a pretraining model)", "ours", "any", _config_edit(num_labels=-1)),
        CheckpointCase("config model_type = gpt2", "ours", "any", _config_edit(model_type="gpt2")),
        CheckpointCase("seqcls id2label of 2 for a 3-way head", "hf-seqcls", "fail",
                       _config_edit(id2label={"0": "a", "1": "b"}, label2id={"a": 0, "b": 1}, num_labels=2)),
        CheckpointCase("seqcls id2label keys not numbers", "hf-seqcls", "fail",
                       _config_edit(id2label={"a": "x", "b": "y", "c": "z"})),
        CheckpointCase("seqcls problem_type = nonsense", "hf-seqcls", "fail", _config_edit(problem_type="nonsense")),
        CheckpointCase("config a JSON list", "ours", "fail", _config_text("[1, 2, 3]")),
        CheckpointCase("config a JSON number", "ours", "fail", _config_text("42")),
        CheckpointCase("config a JSON string", "ours", "fail", _config_text('"bert"')),
        CheckpointCase("config JSON null", "ours", "fail", _config_text("null")),
        CheckpointCase("config {}", "ours", "fail", _config_text("{}")),
        CheckpointCase("config nested 100,000 levels", "ours", "fail", _config_text(deep_json())),
        CheckpointCase("config field nested 100,000 levels", "ours", "fail",
                       _config_text_with(lambda t: t.rstrip().rstrip("}") + ', "deep": ' + deep_json() + "}")),
        CheckpointCase("config with a BOM", "ours", "any", _config_text_with(lambda t: "\ufeff" + t)),
        CheckpointCase("config UTF-16", "ours", "fail", lambda f: (f / "config.json").write_bytes(
            (f / "config.json").read_text().encode("utf-16"))),
        CheckpointCase("config with a Latin-1 byte in a string", "ours", "fail",
                       lambda f: _edit_bytes(f / "config.json", lambda d: d.replace(b'"bert"', b'"b\xe9rt"'))),
        CheckpointCase("config vocab_size twice (last wrong)", "ours", "fail",
                       _config_text_with(lambda t: t.rstrip().rstrip("}") + ', "vocab_size": 98}')),
        CheckpointCase("config a self-loop symlink", "ours", "fail", _path_damage("config.json", "self-loop")),
        CheckpointCase("config 20 MB of spaces then the JSON", "ours", "any",
                       _config_text_with(lambda t: " " * 20_000_000 + t)),
    ]

    # vocab.txt
    for by in (1, 7, 63):
        cases.append(CheckpointCase(f"vocab {by} line(s) short", "ours", "fail",
                                    _vocab_lines(lambda v, by=by: v[:-by])))
        cases.append(CheckpointCase(f"vocab {by} line(s) long", "ours", "fail",
                                    _vocab_lines(lambda v, by=by: v + [f"extra{i}" for i in range(by)])))
        cases.append(CheckpointCase(f"hf-pretraining vocab {by} line(s) short", "hf-pretraining", "fail",
                                    _vocab_lines(lambda v, by=by: v[:-by])))
    cases += [
        CheckpointCase("vocab 99 lines for vocab_size 104 (padding to a multiple of 8)", "ours-104", "any",
                       lambda f: None),
        CheckpointCase("vocab with a BOM", "ours", "any", _vocab_bytes(lambda d: b"\xef\xbb\xbf" + d)),
        CheckpointCase("vocab with CRLF line ends", "ours", "any", _vocab_bytes(lambda d: d.replace(b"\n", b"\r\n"))),
        # transformers keeps a blank line as the token "" with its line's id (WordPiece never produces it), and so
        # does bertcore: the same ids. The word it replaced is [UNK] from then on, which no reader can tell apart
        # from a vocabulary that never had it.
        CheckpointCase("vocab with a blank line in the middle", "ours", "any",
                       _vocab_lines(lambda v: [*v[:50], "", *v[51:]])),
        CheckpointCase("vocab with a token twice", "ours", "fail", _vocab_lines(lambda v: [*v[:60], v[10], *v[61:]])),
        CheckpointCase("vocab without [MASK]", "ours", "fail", _vocab_lines(lambda v: [t if t != "[MASK]" else "zz"
                                                                                     for t in v])),
        CheckpointCase("vocab with a Latin-1 byte", "ours", "fail",
                       _vocab_bytes(lambda d: d.replace(b"w5\n", b"\xe9\n"))),
        CheckpointCase("vocab UTF-16", "ours", "fail", _vocab_bytes(lambda d: d.decode().encode("utf-16"))),
        CheckpointCase("vocab with a NUL byte token", "ours", "any",
                       _vocab_bytes(lambda d: d.replace(b"w5\n", b"\x00\n"))),
        CheckpointCase("vocab a FIFO", "ours", "fail", _path_damage("vocab.txt", "fifo")),
        CheckpointCase("vocab a folder", "ours", "fail", _path_damage("vocab.txt", "folder")),
        CheckpointCase("vocab a symlink to /dev/zero", "ours", "fail", _path_damage("vocab.txt", "dev-zero")),
        CheckpointCase("vocab a dangling symlink", "ours", "fail", _path_damage("vocab.txt", "dangling")),
        CheckpointCase("tokenizer_config a FIFO", "ours", "any", _path_damage("tokenizer_config.json", "fifo")),
        CheckpointCase("tokenizer_config a symlink to /dev/zero", "ours", "any",
                       _path_damage("tokenizer_config.json", "dev-zero")),
        CheckpointCase("tokenizer_config nested 100,000 levels", "ours", "any",
                       lambda f: (f / "tokenizer_config.json").write_text(deep_json())),
        CheckpointCase("tokenizer_config do_lower_case = 'no'", "ours", "any",
                       lambda f: (f / "tokenizer_config.json").write_text('{"do_lower_case": "no"}')),
        CheckpointCase("vocab missing, a tokenizer.json of garbage", "ours", "fail",
                       lambda f: ((f / "vocab.txt").unlink(), (f / "tokenizer.json").write_text("{garbage"))),
        CheckpointCase("vocab missing, a tokenizer.json nested 100,000 levels", "ours", "fail",
                       lambda f: ((f / "vocab.txt").unlink(), (f / "tokenizer.json").write_text(deep_json()))),
        CheckpointCase("vocab missing, a tokenizer.json of a BPE model", "ours", "fail",
                       lambda f: ((f / "vocab.txt").unlink(), (f / "tokenizer.json").write_text(json.dumps(
                           {"model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(TINY_VOCAB)},
                                      "merges": []}})))),
    ]

    # weights in model.safetensors
    cases += [
        CheckpointCase("a NaN in the word embeddings", "ours", "fail",
                       _weights_edit(_set("word_embeddings", _nan_at))),
        CheckpointCase("an inf in a LayerNorm bias", "ours", "fail", _weights_edit(_set("LayerNorm.bias", _inf_at))),
        CheckpointCase("a NaN in the MLM head bias", "ours", "fail",
                       _weights_edit(_set("cls.predictions.bias", _nan_at))),
        CheckpointCase("a NaN in hf-seqcls's classifier", "hf-seqcls", "fail",
                       _weights_edit(_set("classifier.weight", _nan_at))),
        CheckpointCase("a query weight transposed", "ours", "any",  # square (24x24): undetectable by shape
                       _weights_edit(_set("query.weight", lambda t: t.t().contiguous()))),
        CheckpointCase("an intermediate weight transposed", "ours", "fail",
                       _weights_edit(_set("intermediate.dense.weight", lambda t: t.t().contiguous()))),
        CheckpointCase("word embeddings one row short", "ours", "fail", _weights_edit(_set("word_embeddings",
                                                                                        lambda t: t[:-1].clone()))),
        CheckpointCase("a bias 0-d", "ours", "fail", _weights_edit(_set("attention.output.dense.bias",
                                                                        lambda t: t[0].clone()))),
        CheckpointCase("a weight as int64", "ours", "fail", _weights_edit(_set("key.weight",
                                                                               lambda t: t.to(torch.int64)))),
        CheckpointCase("a weight as bool", "ours", "fail", _weights_edit(_set("key.weight", lambda t: t > 0))),
        CheckpointCase("all weights float16", "ours", "any",
                       _weights_edit(lambda d: {n: t.half() for n, t in d.items()})),
        CheckpointCase("all weights bfloat16", "ours", "any",
                       _weights_edit(lambda d: {n: t.bfloat16() for n, t in d.items()})),
        CheckpointCase("all weights float64", "ours", "any",
                       _weights_edit(lambda d: {n: t.double() for n, t in d.items()})),
        CheckpointCase("an extra tensor foo.bar", "ours", "fail",
                       _weights_edit(lambda d: {**d, "foo.bar": torch.zeros(3)})),
        CheckpointCase("an extra encoder layer", "ours", "fail", _weights_edit(lambda d: {
            **d, **{n.replace("layer.1.", "layer.2."): t.clone() for n, t in d.items() if "layer.1." in n}})),
        CheckpointCase("layer 1 missing", "ours", "fail", _weights_edit(_drop(lambda n: "layer.1." in n))),
        CheckpointCase("one tensor missing (value.bias)", "ours", "fail",
                       _weights_edit(_drop(lambda n: "layer.0.attention.self.value.bias" in n))),
        CheckpointCase("MLM/NSP heads missing (a bare encoder)", "ours", "ok",
                       _weights_edit(_drop(lambda n: n.startswith("cls."))), want={"heads": False}),
        CheckpointCase("only the NSP head missing", "ours", "fail",
                       _weights_edit(_drop(lambda n: n.startswith("cls.seq_relationship")))),
        CheckpointCase("hf-seqcls classifier missing", "hf-seqcls", "fail",
                       _weights_edit(_drop(lambda n: n.startswith("classifier.")))),
        CheckpointCase("hf-seqcls pooler missing", "hf-seqcls", "fail",
                       _weights_edit(_drop(lambda n: "pooler" in n))),
        CheckpointCase("no tensors at all", "ours", "fail", _weights_edit(lambda d: {})),
        CheckpointCase("names without the bert. prefix", "ours", "ok",
                       _weights_edit(_rename(lambda n: n[len("bert."):] if n.startswith("bert.") else n))),
        CheckpointCase("TF-era gamma/beta LayerNorm names", "ours", "ok", _weights_edit(_rename(
            lambda n: n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")))),
        CheckpointCase("hf-pretraining: weights of hf-model's shape (heads missing)", "hf-pretraining", "ok",
                       _weights_edit(_drop(lambda n: n.startswith("cls."))), want={"heads": False}),
        CheckpointCase("a 1-element vector in place of the position embeddings", "ours", "fail",
                       _weights_edit(_set("position_embeddings", lambda t: t.reshape(-1)[:1].clone()))),
        CheckpointCase("safetensors a symlink to /dev/zero", "ours", "fail", _path_damage("model.safetensors",
                                                                                          "dev-zero")),
        CheckpointCase("safetensors a symlink to /dev/urandom", "ours", "fail",
                       _path_damage("model.safetensors", "dev-urandom")),
        CheckpointCase("safetensors a FIFO", "ours", "fail", _path_damage("model.safetensors", "fifo")),
        CheckpointCase("safetensors a folder", "ours", "fail", _path_damage("model.safetensors", "folder")),
        CheckpointCase("safetensors a dangling symlink", "ours", "fail", _path_damage("model.safetensors", "dangling")),
    ]
    # safetensors header garbage
    cases += [
        CheckpointCase("safetensors header length 2**63", "ours", "fail", _safetensors_header(length=2**63)),
        CheckpointCase("safetensors header length 0", "ours", "fail", _safetensors_header(length=0)),
        CheckpointCase("safetensors header length past the end", "ours", "fail", _safetensors_header(length=10**8)),
        CheckpointCase("safetensors header not JSON", "ours", "fail",
            _safetensors_header(header=b"{not json" + b" " * 7)),
        CheckpointCase("safetensors header a JSON list", "ours", "fail", _safetensors_header(header=b"[1,2,3] ")),
        CheckpointCase("safetensors header nested 100,000 levels", "ours", "fail",
                       _safetensors_header(header=deep_json().encode())),
        CheckpointCase("safetensors header offsets past the data", "ours", "fail",
                       _header_json_edit(_header_offsets([0, 10**12]))),
        CheckpointCase("safetensors header offsets reversed", "ours", "fail",
                       _header_json_edit(_header_offsets([100, 0]))),
        CheckpointCase("safetensors header offsets negative", "ours", "fail",
                       _header_json_edit(_header_offsets([-8, 0]))),
        CheckpointCase("safetensors header dtype XX", "ours", "fail", _header_json_edit(_header_field("dtype", "XX"))),
        CheckpointCase("safetensors header shape of 10**12 x 10**12", "ours", "fail",
                       _header_json_edit(_header_field("shape", [10**12, 10**12]))),
        CheckpointCase("safetensors header shape negative", "ours", "fail",
                       _header_json_edit(_header_field("shape", [-1, 24]))),
        CheckpointCase("safetensors header metadata not strings", "ours", "any",
                       _header_json_edit(lambda h: {**h, "__metadata__": {"format": {"x": [1]}}})),
        CheckpointCase("safetensors with 1 MB of trailing bytes", "ours", "any",
            _safetensors_header(tail=b"\0" * 2**20)),
    ]
    # pytorch_model.bin
    cases += [
        CheckpointCase(".bin of plain tensors", "ours", "ok", _bin_from(lambda sd, m: sd)),
        CheckpointCase(".bin pickle that runs code (torch.save)", "ours", "fail",
                       _bin_from(lambda sd, m: {**sd, "evil": _RunsCode(m)}), marker=True),
        CheckpointCase(".bin pickle that runs code (plain pickle)", "ours", "fail",
                       _bin_from(lambda sd, m: _RunsCode(m), legacy=True), marker=True),
        CheckpointCase(".bin evil beside a good safetensors", "ours", "ok",
                       _bin_from(lambda sd, m: _RunsCode(m), keep_safetensors=True), marker=True),
        CheckpointCase(".bin holding a list", "ours", "fail", _bin_from(lambda sd, m: list(sd.values()))),
        CheckpointCase(".bin holding ints", "ours", "fail", _bin_from(lambda sd, m: {n: 1 for n in sd})),
        CheckpointCase(".bin holding a training checkpoint", "ours", "fail",
                       _bin_from(lambda sd, m: {"model": sd, "step": 3})),
        CheckpointCase(".bin with int keys", "ours", "fail", _bin_from(lambda sd, m: dict(enumerate(sd.values())))),
        CheckpointCase(".bin with a NaN", "ours", "fail",
                       _bin_from(lambda sd, m: {**sd, "bert.embeddings.word_embeddings.weight":
                                                _nan_at(sd["bert.embeddings.word_embeddings.weight"])})),
        CheckpointCase(".bin of a numpy array", "ours", "fail",
                       _bin_from(lambda sd, m: {n: t.numpy() for n, t in sd.items()})),
        CheckpointCase(".bin cut to half", "ours", "fail", lambda f: (_bin_from(lambda sd, m: sd)(f), _edit_bytes(
            f / "pytorch_model.bin", lambda d: d[: len(d) // 2]))),
        CheckpointCase(".bin of garbage", "ours", "fail", lambda f: (_bin_from(lambda sd, m: sd)(f), _edit_bytes(
            f / "pytorch_model.bin", _garbage))),
        CheckpointCase(".bin a symlink to /dev/zero", "ours", "fail", lambda f: (
            (f / "model.safetensors").unlink(), (f / "pytorch_model.bin").symlink_to("/dev/zero"))),
        CheckpointCase(".bin a FIFO", "ours", "fail", lambda f: (
            (f / "model.safetensors").unlink(), os.mkfifo(f / "pytorch_model.bin"))),
    ]
    # the folder itself
    cases += [
        CheckpointCase("the path is a file", "ours", "fail", lambda f: (shutil.rmtree(f), f.write_text("x"))),
        CheckpointCase("the path does not exist", "ours", "fail", lambda f: shutil.rmtree(f)),
        CheckpointCase("the folder is empty", "ours", "fail", lambda f: (shutil.rmtree(f), f.mkdir())),
        CheckpointCase("the path is a symlink to the checkpoint", "ours", "ok",
                       lambda f: (f.rename(f.with_name("real")), f.symlink_to(f.with_name("real")))),
        CheckpointCase("the path is a FIFO", "ours", "fail", lambda f: (shutil.rmtree(f), os.mkfifo(f))),
    ]
    return cases


def digest_problem(case: CheckpointCase, digest: dict) -> str | None:
    """What is wrong with a successful load (a vocabulary that does not fit, NaN weights, ...), or None."""
    vocab, config_vocab = digest["tokenizer_vocab"], digest["config_vocab"]
    fits = vocab == config_vocab or (vocab < config_vocab and any(
        config_vocab == -(-vocab // m) * m for m in (8, 16, 32, 64, 128, 256, 512, 1024)))
    if not fits:
        return f"loaded a {vocab}-token vocabulary for vocab_size {config_vocab}"
    if not digest["finite"]:
        return "loaded weights holding NaN/inf"
    if digest["token0"] != "[PAD]":
        return f"token 0 is {digest['token0']!r}, not '[PAD]' (a BOM or stray bytes kept in a token)"
    if digest["odd_tokens"]:
        return f"{digest['odd_tokens']} token(s) hold a BOM or a carriage return"
    # One blank line is the token "" at its line's id, as transformers reads it (tests/bertcore/test_faults_round2
    # pins the ids to transformers'); two would give "" two ids.
    if digest.get("blank_tokens", 0) > 1:
        return f"{digest['blank_tokens']} tokens are empty (blank lines in vocab.txt)"
    for key, value in case.want.items():
        if digest.get(key) != value:
            return f"{key} is {digest.get(key)!r}, expected {value!r}"
    return None


def _load_and_describe(folder: str) -> dict:
    """Run in the child: load_pretrained and describe what came back (or what was raised)."""
    import bertcore
    from bertcore.errors import CheckpointError

    try:
        model, tokenizer = bertcore.load_pretrained(folder)
    except CheckpointError as error:
        return {"status": "refused", "message": str(error)}
    except BaseException as error:
        return {"status": "exception", "type": f"{type(error).__module__}.{type(error).__qualname__}",
                "message": str(error)[:400], "traceback": traceback.format_exc()[-3000:]}
    import torch

    tokens = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    return {"status": "loaded", "class": type(model).__name__, "config_vocab": model.config.vocab_size,
            "tokenizer_vocab": tokenizer.vocab_size, "token0": tokens[0] if tokens else None,
            "odd_tokens": sum(1 for t in tokens if "\ufeff" in t or "\r" in t),
            "blank_tokens": sum(1 for t in tokens if not t),
            "finite": all(bool(torch.isfinite(p).all()) for p in model.state_dict().values() if p.is_floating_point()),
            "heads": getattr(model, "has_pretraining_heads", None)}


def _child_load(folder: str, result_path: str, log_path: str) -> None:
    """The forked (or fresh) child: output to a log file, an address-space limit, one load, the result as JSON."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    resource.setrlimit(resource.RLIMIT_AS, (LOAD_MEMORY_BYTES, LOAD_MEMORY_BYTES))
    result = _load_and_describe(folder)
    Path(result_path).write_text(json.dumps(result))


def load_server() -> None:
    """`--_load-server`: import bertcore once, then load each folder named on stdin in a forked child."""
    import bertcore.models.checkpoint  # noqa: F401 - imported once here, shared by every forked child

    for line in sys.stdin:
        request = json.loads(line)
        _answer_in_fork(functools.partial(_child_load, request["folder"], request["result"], request["log"]),
                        LOAD_TIMEOUT_S)


def _answer_in_fork(child, timeout: float) -> None:
    """Run `child()` in a forked child (exit code 0, or 3 if it raised), kill it after `timeout` seconds, and write
    how it ended to stdout as one JSON line: {"timeout", "signal", "code"} (the servers' answer to a request)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            child()
        except BaseException:
            code = 3
        os._exit(code)
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        done, found = os.waitpid(pid, os.WNOHANG)
        if done:  # (0, 0) while the child runs: a hang must leave status None
            status = found
            break
        time.sleep(0.005)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    reply = {"timeout": status is None, "signal": os.WTERMSIG(status) if status and os.WIFSIGNALED(status) else 0,
             "code": os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


class LoadServer:
    def __init__(self):
        self.process = subprocess.Popen([PYTHON, __file__, "--_load-server"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())

    def load(self, folder: Path, workdir: Path) -> tuple[dict, dict]:
        result, log = workdir / "load-result.json", workdir / "load-log.txt"
        self.process.stdin.write(json.dumps({"folder": str(folder), "result": str(result), "log": str(log)}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        outcome = json.loads(result.read_text()) if result.is_file() and result.stat().st_size else {}
        reply["log"] = log.read_text(errors="replace") if log.is_file() else ""
        return reply, outcome

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def load_fresh(folder: Path, workdir: Path) -> tuple[dict, dict]:
    """The same load in a fresh interpreter: confirms that a hang or a crash is not an artefact of forking (or of
    a busy machine). The timeout starts once the interpreter has imported bertcore (it touches `ready`)."""
    result, log, ready = workdir / "fresh-result.json", workdir / "fresh-log.txt", workdir / "fresh-ready"
    process = subprocess.Popen([PYTHON, __file__, "--_load-one", str(folder), str(result), str(log)], cwd=workdir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        process.wait(timeout=LOAD_TIMEOUT_S)
        reply = {"timeout": False, "signal": max(-process.returncode, 0), "code": process.returncode}
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        reply = {"timeout": True, "signal": 0, "code": None}
    outcome = json.loads(result.read_text()) if result.is_file() and result.stat().st_size else {}
    reply["log"] = log.read_text(errors="replace") if log.is_file() else ""
    return reply, outcome


def run_checkpoint_case(case: CheckpointCase, bases: dict[str, Path], root: Path, server: LoadServer) -> Outcome:
    workdir = Path(tempfile.mkdtemp(dir=root, prefix="ckpt-"))
    folder = workdir / "checkpoint"
    shutil.copytree(bases[case.base], folder, symlinks=True)
    case.damage(folder)
    reply, outcome = server.load(folder, workdir)
    if reply["timeout"] or reply["signal"] or not outcome:
        reply, outcome = load_fresh(folder, workdir)
    marker = workdir / "PWNED"
    if marker.exists():
        return Outcome("victim", "the pickle's code RAN (it created a file) while loading")
    if reply["timeout"]:
        return Outcome("hang", f"load_pretrained gave no answer within {LOAD_TIMEOUT_S:.0f} s")
    if not outcome:
        why = f"killed by signal {reply['signal']}" if reply["signal"] else f"exit code {reply['code']}"
        return Outcome("traceback", f"the loading process died ({why}): {last_line(reply['log'])}")
    if outcome["status"] == "exception":
        return Outcome("traceback", f"{outcome['type']}: {outcome['message'][:180]}")
    if outcome["status"] == "refused":
        message = outcome["message"].replace("\n", " ")[:220]
        return Outcome("refused" if case.expect == "ok" else "clear", message)
    problem = digest_problem(case, outcome)
    if problem:
        return Outcome("silent", problem)
    if case.expect == "fail":
        return Outcome("silent", f"loaded as {outcome['class']} although the checkpoint is wrong")
    return Outcome("ok", f"loaded as {outcome['class']}")


# ---- shared: a tiny pretraining run ----------------------------------------------------------------------------

class Workspace:
    """The corpus, vocabulary and finished runs that the run and fine-tuning cases start from (made once)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.corpus = root / "corpus.txt"
        text = (REPO / "assets" / "corpus" / "tinyshakespeare.txt").read_text()
        self.corpus.write_text(text[:20_000])
        self.vocab = REPO / "assets" / "vocab.txt"
        self.finished: Path | None = None  # a finished 4-step run (checkpoints at 2 and 4, final/)
        self.reference: dict[int, float] | None = None  # per-step loss of an uninterrupted LONG_STEPS run
        self.lock = threading.Lock()

    def train_args(self, out: Path, *extra) -> list[str]:
        """A new tiny run; with "--resume" among `extra`, only the options a resume takes (the rest are recorded)."""
        common = ["--no-progress", "--device", "cpu", "--num-threads", "1", "--out", out, *extra]
        if "--resume" in extra:
            return common
        model = [] if "--init-from" in extra else ["--vocab", self.vocab, "--preset", "tiny", "--hidden-size", "32",
                                                   "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "1"]
        return ["--corpus", self.corpus, *model, "--batch-size", "4", "--seq-len", "32", "--eval-batches", "1",
                *common]

    def prepare(self) -> None:
        finished = self.root / "finished-run"
        proc = run_cli("bertcore.cli.train", self.train_args(finished, "--steps", "4", "--checkpoint-every", "2",
                                                       "--eval-every", "2"), self.root, timeout=180)
        if proc.rc != 0:
            raise SystemExit(f"the tiny base run failed (exit {proc.rc}):\n{proc.stderr[-3000:]}")
        self.finished = finished
        reference = self.root / "reference-run"
        proc = run_cli("bertcore.cli.train", self.train_args(reference, *LONG_RUN), self.root, timeout=300)
        if proc.rc != 0:
            raise SystemExit(f"the reference run failed (exit {proc.rc}):\n{proc.stderr[-3000:]}")
        self.reference = step_losses(reference)[0]


LONG_STEPS = 100
LONG_RUN = ["--steps", str(LONG_STEPS), "--checkpoint-every", "10", "--eval-every", "1000", "--keep-checkpoints", "3"]


def step_losses(run: Path) -> tuple[dict[int, float], list[int]]:
    """{step: loss} (the last record of each step) and the steps recorded more than once."""
    losses, seen, twice = {}, set(), []
    path = run / "metrics.jsonl"
    if not path.is_file():
        return {}, []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == "step":
            step = record["step"]
            if step in seen:
                twice.append(step)
            seen.add(step)
            losses[step] = record["loss"]
    return losses, twice


def curve_problem(run: Path, reference: dict[int, float]) -> str | None:
    """How a resumed run's loss curve differs from the uninterrupted one's, or None."""
    losses, twice = step_losses(run)
    if twice:
        return f"metrics.jsonl records step(s) {twice[:3]} twice after the resume"
    missing = sorted(set(reference) - set(losses))
    if missing:
        return f"metrics.jsonl lacks step(s) {missing[:3]}"
    for step in sorted(reference):
        if abs(losses[step] - reference[step]) > 1e-5 * max(1.0, abs(reference[step])):
            return f"resumed loss at step {step} is {losses[step]:.6f}, uninterrupted {reference[step]:.6f}"
    return None


def wait_for_step(run: Path, process: subprocess.Popen, step: int, timeout: float = 60.0) -> int:
    """Wait until metrics.jsonl records `step` (or the process ends); the newest step seen."""
    deadline = time.monotonic() + timeout
    newest = 0
    while time.monotonic() < deadline and process.poll() is None:
        losses, _ = step_losses(run)
        newest = max(losses, default=0)
        if newest >= step:
            return newest
        time.sleep(0.01)
    return newest


def wait_for_folder(run: Path, process: subprocess.Popen, timeout: float = 60.0) -> int:
    """Wait until the run folder holds its first file (so a kill lands before run_config.json is whole)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if run.is_dir() and any(run.iterdir()):
            break
        time.sleep(0.002)
    return 0


def weights_finite(folder: Path, bound: float = float("inf")) -> bool:
    """Whether every weight in the folder's model.safetensors is finite (and, given a bound, below it in size)."""
    import torch
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) and float(t.abs().max()) < bound
               for t in load_file(folder / "model.safetensors").values() if t.numel())


def final_problem(run: Path) -> str | None:
    """Whether a run that says it finished left final/ weights that are NaN/inf or absurdly large (else None)."""
    final = run / "final" / "model.safetensors"
    if final.is_file() and not weights_finite(final.parent):
        return "exit 0, but final/ holds NaN/inf weights"
    if final.is_file() and not weights_finite(final.parent, bound=1e6):
        return "exit 0, but final/ holds weights above 1e6 in size (the settings blew them up)"
    return None


def latest_problem(run: Path) -> str | None:
    """Whether checkpoints/latest names a complete, readable checkpoint inside the run (None when it does)."""
    latest = run / "checkpoints" / "latest"
    if not latest.exists():
        return None
    name = latest.read_text().strip()
    folder = (run / "checkpoints" / name).resolve()
    if not folder.is_relative_to(run.resolve()):
        return f"latest names {name}, outside the run"
    for file in ("config.json", "model.safetensors", "vocab.txt", "trainer_state.pt"):
        if not (folder / file).is_file():
            return f"latest names {name}, which lacks {file}"
    try:
        weights_finite(folder)
    except Exception as error:
        return f"latest names {name}, whose weights do not read ({error})"
    return None


# ---- family 2: run folders -------------------------------------------------------------------------------------

@dataclass
class RunCase:
    name: str
    expect: str
    scenario: Callable[[Workspace, Path, Victims], Outcome]


def _copy_finished(ws: Workspace, case_dir: Path) -> Path:
    run = case_dir / "run"
    shutil.copytree(ws.finished, run, symlinks=True)
    return run


def _train(ws: Workspace, case_dir: Path, run: Path, *extra, timeout: float = CLI_TIMEOUT_S) -> Proc:
    return run_cli("bertcore.cli.train", ws.train_args(run, *extra), case_dir, timeout)


def _resume(ws: Workspace, case_dir: Path, run: Path, *extra, timeout: float = CLI_TIMEOUT_S) -> Proc:
    return _train(ws, case_dir, run, "--resume", "--steps", "8", *extra, timeout=timeout)


def planted(expect: str, plant: Callable[[Path, Victims], None], *, resume: bool) -> Callable:
    """A scenario: plant something in a run folder (a finished one to resume, or a new empty one), run, and
    check the victims outside."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        if resume:
            run = _copy_finished(ws, case_dir)
        else:
            run = case_dir / "run"
            run.mkdir()
        plant(run, victims)
        victims.before = victims.snapshot()  # what the planting itself put beside the victims is no damage
        proc = _resume(ws, case_dir, run) if resume else _train(ws, case_dir, run, "--steps", "2")
        return judge(expect, proc, victim=victims.damage(), wrong=final_problem(run))
    return scenario


def kill_and_resume(at_step: int, *, every: str = "10", sig: int = signal.SIGKILL):
    """Run LONG_STEPS steps, send `sig` once metrics.jsonl reaches `at_step`, then --resume and compare the loss
    curve with the uninterrupted run's."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        run = case_dir / "run"
        extra = [*LONG_RUN[:2], "--checkpoint-every", every, *LONG_RUN[4:]]
        process = start_cli("bertcore.cli.train", ws.train_args(run, *extra), case_dir)
        reached = wait_for_step(run, process, at_step) if at_step > 0 else wait_for_folder(run, process)
        if process.poll() is not None:
            return Outcome("ok", f"(not exercised: the run ended before step {at_step})")
        os.kill(process.pid, sig)
        first = finish(process, CLI_TIMEOUT_S)
        if sig != signal.SIGKILL and (stopped := judge("ok", first)).kind != "ok":
            return Outcome(stopped.kind, f"at the {signal.Signals(sig).name} near step {reached}: {stopped.message}")
        if problem := latest_problem(run):
            return Outcome("silent", f"after the {signal.Signals(sig).name} near step {reached}: {problem}")
        # checkpoints every step are for the kill to land in one; the rest of the run needs no more of them
        faster = ["--checkpoint-every", "50"] if every == "1" else []
        proc = run_cli("bertcore.cli.train", ws.train_args(run, "--resume", *faster), case_dir, timeout=120)
        expect = "any" if at_step < int(every) else "ok"  # killed before its first checkpoint: refusing is right
        wrong = curve_problem(run, ws.reference) if proc.rc == 0 else None
        outcome = judge(expect, proc, victim=victims.damage(), wrong=wrong)
        outcome.message = f"stopped near step {reached}, resumed: {outcome.message}"
        return outcome
    return scenario


def ctrl_c_twice(delay: float) -> Callable:
    """SIGINT, then SIGINT again `delay` s later (during the stopping checkpoint): exit 0/1/2, no traceback."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        run = case_dir / "run"
        process = start_cli("bertcore.cli.train", ws.train_args(run, *LONG_RUN), case_dir)
        reached = wait_for_step(run, process, 15)
        if process.poll() is not None:
            return Outcome("ok", "(not exercised: the run ended first)")
        os.kill(process.pid, signal.SIGINT)
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        proc = finish(process, CLI_TIMEOUT_S)
        outcome = judge("any", proc)
        if outcome.kind in ("ok", "clear") and (problem := latest_problem(run)):
            outcome = Outcome("silent", problem)
        outcome.message = f"two Ctrl-C {delay * 1000:.0f} ms apart near step {reached}: exit {proc.rc}: " \
                          f"{outcome.message}"
        return outcome
    return scenario


def chattr_case(target: str, *, resume: bool = True) -> Callable:
    """Make a file or folder of the run immutable (root ignores permissions; chattr +i binds it too)."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        run = _copy_finished(ws, case_dir) if resume else case_dir / "run"
        run.mkdir(exist_ok=True)
        path = run / target if target else run
        frozen = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if frozen.returncode != 0:
            return Outcome("ok", f"(skipped: chattr +i failed here: {last_line(frozen.stderr)})")
        try:
            proc = _resume(ws, case_dir, run) if resume else _train(ws, case_dir, run, "--steps", "2")
        finally:
            unfreeze(case_dir)
        return judge("fail", proc, victim=victims.damage())
    return scenario


def disk_full(size: str) -> Callable:
    """A new run in a tmpfs of `size`: a clear error, exit 1/2, and the latest checkpoint (if any) whole; then
    the folder copied to a roomy disk resumes."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        mount_point = case_dir / "small-disk"
        mount_point.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            return Outcome("ok", f"(skipped: cannot mount a tmpfs here: {last_line(mounted.stderr)})")
        try:
            run = mount_point / "run"
            proc = _train(ws, case_dir, run, "--steps", "6", "--checkpoint-every", "2", "--eval-every", "2")
            if proc.rc == 0:
                return judge("any", proc)  # it fitted after all
            damaged = latest_problem(run) if run.exists() else None
            outcome = judge("fail", proc, wrong=damaged)
            if damaged and outcome.kind == "clear":
                return Outcome("silent", f"disk full, then: {damaged}")
            if outcome.kind != "clear" or not (run / "checkpoints" / "latest").exists():
                outcome.message = f"tmpfs {size}: {outcome.message}"
                return outcome
            roomy = case_dir / "copied-run"
            shutil.copytree(run, roomy, symlinks=True)
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
        resumed = _train(ws, case_dir, roomy, "--resume")
        after = judge("ok", resumed)
        if after.kind != "ok":
            after.message = f"tmpfs {size}: the run stopped clearly, but its copy did not resume: {after.message}"
            return after
        return Outcome("clear", f"tmpfs {size}: {outcome.message} (and its copy resumed)")
    return scenario


def diverge_then_resume(lr: str) -> Callable:
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        run = case_dir / "run"
        first = _train(ws, case_dir, run, "--steps", "80", "--checkpoint-every", "5", "--eval-every", "1000",
                       "--lr", lr, "--warmup-steps", "0")
        outcome = judge("fail", first)
        if outcome.kind != "clear":
            outcome.message = f"--lr {lr}: {outcome.message}"
            return outcome
        proc = run_cli("bertcore.cli.train", ws.train_args(run, "--resume"), case_dir)
        wrong = None
        if proc.rc == 0 and (run / "final").is_dir() and not weights_finite(run / "final"):
            wrong = "the resumed run finished with NaN/inf weights"
        after = judge("any", proc, wrong=wrong)
        after.message = f"--lr {lr} stopped clearly; plain --resume: exit {proc.rc}: {after.message}"
        return after
    return scenario


def two_runs_one_folder(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
    run = case_dir / "run"
    first = start_cli("bertcore.cli.train", ws.train_args(run, *LONG_RUN), case_dir)
    wait_for_step(run, first, 5)
    # Held stopped (it keeps its lock) while the second runs: under load the first could otherwise finish before
    # the second has imported torch, and a resume of a finished run rightly succeeds.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = run_cli("bertcore.cli.train", ws.train_args(run, "--resume"), case_dir)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    first_done = finish(first, 120)
    if first_done.rc != 0:
        return Outcome("victim", f"the first run failed after the second was refused: {error_line(first_done.stderr)}")
    return judge("fail", second, wrong=curve_problem(run, ws.reference))


def simple(expect: str, make_args: Callable[[Workspace, Path], list[str]], *, prepare=None) -> Callable:
    """A new run with some options or inputs changed."""
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        if prepare:
            prepare(case_dir, victims)
        proc = run_cli("bertcore.cli.train", make_args(ws, case_dir), case_dir)
        return judge(expect, proc, victim=victims.damage(), wrong=final_problem(case_dir / "run"))
    return scenario


def on_finished(expect: str, damage: Callable[[Path, Victims], None], *extra: str) -> Callable:
    """Damage a finished run, then --resume it (to 8 steps)."""
    return planted(expect, damage, resume=True) if not extra else _on_finished_with(expect, damage, extra)


def _on_finished_with(expect, damage, extra):
    def scenario(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
        run = _copy_finished(ws, case_dir)
        damage(run, victims)
        victims.before = victims.snapshot()
        return judge(expect, _train(ws, case_dir, run, *extra), victim=victims.damage())
    return scenario


def _write(relative: str, data: str | bytes) -> Callable[[Path, Victims], None]:
    def damage(run: Path, victims: Victims) -> None:
        path = run / relative
        path.unlink(missing_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return damage


def _latest_state(edit: Callable[[Path], None]) -> Callable[[Path, Victims], None]:
    def damage(run: Path, victims: Victims) -> None:
        name = (run / "checkpoints" / "latest").read_text().strip()
        edit(run / "checkpoints" / name)
    return damage


def _corpus(data: bytes | None = None, *, kind: str = "") -> Callable[[Workspace, Path], list[str]]:
    def make_args(ws: Workspace, case_dir: Path) -> list[str]:
        corpus = case_dir / "corpus.txt"
        if kind == "fifo":
            os.mkfifo(corpus)
        elif kind == "dev-zero":
            corpus.symlink_to("/dev/zero")
        elif kind == "empty-folder":
            corpus.mkdir()
        elif kind == "missing":
            pass
        else:
            corpus.write_bytes(data)
        args = ws.train_args(case_dir / "run", "--steps", "2")
        args[args.index("--corpus") + 1] = corpus
        return args
    return make_args


def _vocab_file(data: bytes) -> Callable[[Workspace, Path], list[str]]:
    def make_args(ws: Workspace, case_dir: Path) -> list[str]:
        vocab = case_dir / "vocab.txt"
        vocab.write_bytes(data)
        args = ws.train_args(case_dir / "run", "--steps", "2")
        args[args.index("--vocab") + 1] = vocab
        return args
    return make_args


def _options(*extra: str) -> Callable[[Workspace, Path], list[str]]:
    return lambda ws, case_dir: ws.train_args(case_dir / "run", "--steps", "2", *extra)


def run_cases() -> list[RunCase]:
    def symlink_victim(relative: str) -> Callable[[Path, Victims], None]:
        return lambda run, victims: replace_with_symlink(run / relative, victims.file)

    def symlink_folder(relative: str) -> Callable[[Path, Victims], None]:
        return lambda run, victims: replace_with_symlink(run / relative, victims.folder)

    cases = [
        RunCase("kill -9 at step 3 (no checkpoint yet), --resume", "any", kill_and_resume(3)),
        RunCase("kill -9 at step 15, --resume: same loss curve", "ok", kill_and_resume(15)),
        RunCase("kill -9 at step 47, --resume: same loss curve", "ok", kill_and_resume(47)),
        RunCase("kill -9 at step 9, checkpoint every step, --resume", "ok", kill_and_resume(9, every="1")),
        RunCase("kill -9 at step 22, checkpoint every step, --resume", "ok", kill_and_resume(22, every="1")),
        RunCase("kill -9 before run_config.json is written, --resume", "any", kill_and_resume(0)),
        RunCase("Ctrl-C at step 20, --resume: same loss curve", "ok", kill_and_resume(20, sig=signal.SIGINT)),
        RunCase("SIGTERM at step 20, --resume: same loss curve", "ok", kill_and_resume(20, sig=signal.SIGTERM)),
        RunCase("Ctrl-C twice, 0 ms apart", "any", ctrl_c_twice(0.0)),
        RunCase("Ctrl-C twice, 30 ms apart", "any", ctrl_c_twice(0.03)),
        RunCase("Ctrl-C twice, 150 ms apart", "any", ctrl_c_twice(0.15)),
        RunCase("a second run in a folder in use", "fail", two_runs_one_folder),
        RunCase("run.lock a symlink to a victim file (new run)", "any", planted("any", symlink_victim("run.lock"),
                                                                                resume=False)),
        RunCase("run.lock a symlink to a victim file (resume)", "any", planted("any", symlink_victim("run.lock"),
                                                                               resume=True)),
        RunCase("run.lock a dangling symlink out of the folder", "any", planted(
            "any", lambda run, v: replace_with_symlink(run / "run.lock", v.missing), resume=False)),
        RunCase("run.lock a FIFO", "any", planted("any", lambda run, v: make_fifo(run / "run.lock"), resume=False)),
        RunCase("run.lock a folder", "any", planted("any", lambda run, v: (run / "run.lock").mkdir(), resume=False)),
        RunCase("metrics.jsonl a symlink to a victim (resume)", "any",
                planted("any", symlink_victim("metrics.jsonl"), resume=True)),
        RunCase("metrics.jsonl a symlink to a victim (new run)", "any",
                planted("any", symlink_victim("metrics.jsonl"), resume=False)),
        RunCase("summary.json a symlink to a victim (resume)", "any",
                planted("any", symlink_victim("summary.json"), resume=True)),
        RunCase("run_config.json a symlink to a victim (new run)", "any",
                planted("any", symlink_victim("run_config.json"), resume=False)),
        RunCase("vocab.txt a symlink to a victim (new run)", "any",
                planted("any", symlink_victim("vocab.txt"), resume=False)),
        RunCase("tokenizer_config.json a symlink to a victim (resume)", "any",
                planted("any", symlink_victim("tokenizer_config.json"), resume=True)),
        RunCase("checkpoints/latest a symlink to a victim (resume)", "any",
                planted("any", symlink_victim("checkpoints/latest"), resume=True)),
        RunCase("final a symlink to a victim folder (resume)", "any",
                planted("any", symlink_folder("final"), resume=True)),
        RunCase("checkpoints a symlink to a victim folder (new run)", "any",
                planted("any", symlink_folder("checkpoints"), resume=False)),
        RunCase("the oldest checkpoint a symlink to a victim folder (resume prunes it)", "any",
                planted("any", symlink_folder("checkpoints/step-000002"), resume=True)),
        RunCase("metrics.jsonl a FIFO (resume)", "any", planted("any", lambda run, v: make_fifo(run / "metrics.jsonl"),
                                                                resume=True)),
        RunCase("metrics.jsonl a folder (resume)", "fail", planted(
            "fail", lambda run, v: ((run / "metrics.jsonl").unlink(), (run / "metrics.jsonl").mkdir()), resume=True)),
        RunCase("metrics.jsonl binary garbage (resume)", "any", on_finished("any", _write("metrics.jsonl",
                                                                                            b"\x00\xff" * 500))),
        RunCase("read-only run folder (chattr +i), resume", "fail", chattr_case("")),
        RunCase("read-only checkpoints folder (chattr +i), resume", "fail", chattr_case("checkpoints")),
        RunCase("read-only metrics.jsonl (chattr +i), resume", "fail", chattr_case("metrics.jsonl")),
        RunCase("read-only empty run folder (chattr +i), new run", "fail", chattr_case("", resume=False)),
        RunCase("latest names a folder outside the run", "fail", on_finished("fail", lambda run, v: (
            run / "checkpoints" / "latest").write_text("../../victims/folder"))),
        RunCase("latest names an absolute path outside the run", "fail", on_finished("fail", lambda run, v: (
            run / "checkpoints" / "latest").write_text(str(v.folder)))),
        RunCase("latest names a missing checkpoint", "any", on_finished("any", _write("checkpoints/latest",
                                                                                       "step-000099"))),
        RunCase("latest empty", "any", on_finished("any", _write("checkpoints/latest", ""))),
        RunCase("latest binary garbage", "any", on_finished("any", _write("checkpoints/latest", b"\xff\x00\xfe"))),
        RunCase("--resume PATH outside the run", "fail", _on_finished_with("fail", lambda run, v: shutil.copytree(
            run / "checkpoints" / "step-000004", v.root / "elsewhere"), ["--resume", "victims/elsewhere"])),
        RunCase("trainer_state.pt cut to half", "fail", on_finished("fail", _latest_state(
            lambda f: _edit_bytes(f / "trainer_state.pt", lambda d: d[: len(d) // 2])))),
        RunCase("trainer_state.pt empty", "fail", on_finished("fail", _latest_state(
            lambda f: (f / "trainer_state.pt").write_bytes(b"")))),
        RunCase("trainer_state.pt garbage", "fail", on_finished("fail", _latest_state(
            lambda f: _edit_bytes(f / "trainer_state.pt", _garbage)))),
        RunCase("trainer_state.pt a pickle that runs code", "fail", _evil_state_case),
        RunCase("trainer_state.pt an empty dict", "fail", on_finished("fail", _latest_state(
            lambda f: _torch_save({}, f / "trainer_state.pt")))),
        RunCase("trainer_state.pt missing (an older checkpoint is whole)", "any", on_finished("any", _latest_state(
            lambda f: (f / "trainer_state.pt").unlink()))),
        RunCase("latest checkpoint's model.safetensors cut to half", "fail", on_finished("fail", _latest_state(
            lambda f: _edit_bytes(f / "model.safetensors", lambda d: d[: len(d) // 2])))),
        RunCase("latest checkpoint's config.json deleted (an older one is whole)", "any", on_finished(
            "any", _latest_state(
            lambda f: (f / "config.json").unlink()))),
        RunCase("run_config.json missing, --resume", "fail", on_finished("fail", lambda run, v: (
            run / "run_config.json").unlink())),
        RunCase("run_config.json garbage, --resume", "fail", on_finished("fail", _write("run_config.json", "{oops"))),
        RunCase("run_config.json nested 100,000 levels, --resume", "fail", on_finished(
            "fail", _write("run_config.json", deep_json()))),
        RunCase("run_config.json a list, --resume", "fail", on_finished("fail", _write("run_config.json", "[]"))),
        RunCase("run_config.json steps = 'x', --resume", "fail", on_finished("fail", _edit_run_config(
            lambda c: c["training"].update(steps="x")))),
        RunCase("run_config.json without 'model', --resume", "any", on_finished("any", _edit_run_config(
            lambda c: c.pop("model")))),
        RunCase("resume a finished run (no new steps)", "any", _on_finished_with("any", lambda r, v: None,
                                                                               ["--resume"])),
        RunCase("resume a folder that does not exist", "fail", simple("fail", lambda ws, d: ws.train_args(
            d / "nowhere", "--resume"))),
        RunCase("a new run in a folder holding a run", "fail", _on_finished_with("fail", lambda r, v: None,
                                                                                ["--steps", "2"])),
        RunCase("diverging (--lr 30), then plain --resume", "any", diverge_then_resume("30")),
        RunCase("NaN loss (--lr 1e30), then plain --resume", "any", diverge_then_resume("1e30")),
        RunCase("disk full: tmpfs 100k", "fail", disk_full("100k")),
        RunCase("disk full: tmpfs 600k", "fail", disk_full("600k")),
        RunCase("disk full: tmpfs 1500k", "fail", disk_full("1500k")),
        RunCase("disk full: tmpfs 4m", "fail", disk_full("4m")),
        RunCase("disk full: tmpfs 9m", "fail", disk_full("9m")),
        RunCase("--out an existing file", "fail", simple("fail", lambda ws, d: ws.train_args(d / "file"),
                                                         prepare=lambda d, v: (d / "file").write_text("x"))),
        RunCase("corpus missing", "fail", simple("fail", _corpus(kind="missing"))),
        RunCase("corpus empty", "fail", simple("fail", _corpus(b""))),
        RunCase("corpus not UTF-8", "fail", simple("fail", _corpus("señor, to be or not\n".encode("latin-1") * 200))),
        RunCase("corpus UTF-16", "fail", simple("fail", _corpus(("to be or not to be\n" * 300).encode("utf-16")))),
        RunCase("corpus a FIFO", "fail", simple("fail", _corpus(kind="fifo"))),
        RunCase("corpus a symlink to /dev/zero", "fail", simple("fail", _corpus(kind="dev-zero"))),
        RunCase("corpus a folder with no .txt", "fail", simple("fail", _corpus(kind="empty-folder"))),
        RunCase("corpus one short line", "fail", simple("fail", _corpus(b"to be\n"))),
        RunCase("--vocab empty", "fail", simple("fail", _vocab_file(b""))),
        RunCase("--vocab not UTF-8", "fail", simple("fail", _vocab_file(b"[PAD]\n[UNK]\n\xff\xfe\n"))),
        RunCase("--vocab without [MASK]", "fail", simple("fail", _vocab_file(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n"))),
        RunCase("--steps 0", "fail", simple("fail", _options("--steps", "0"))),
        RunCase("--steps -5", "fail", simple("fail", _options("--steps", "-5"))),
        RunCase("--batch-size 0", "fail", simple("fail", _options("--batch-size", "0"))),
        RunCase("--seq-len 2", "fail", simple("fail", _options("--seq-len", "2"))),
        RunCase("--seq-len 100000", "fail", simple("fail", _options("--seq-len", "100000"))),
        RunCase("--lr nan", "fail", simple("fail", _options("--lr", "nan"))),
        RunCase("--lr -1", "fail", simple("fail", _options("--lr", "-1"))),
        RunCase("--weight-decay 1e30", "fail", simple("fail", _options("--weight-decay", "1e30"))),
        RunCase("--mlm-probability 0", "fail", simple("fail", _options("--mlm-probability", "0"))),
        RunCase("--mlm-probability 1.5", "fail", simple("fail", _options("--mlm-probability", "1.5"))),
        RunCase("--heldout-fraction 1", "fail", simple("fail", _options("--heldout-fraction", "1"))),
        RunCase("--keep-checkpoints 0", "any", simple("any", _options("--keep-checkpoints", "0"))),
        RunCase("--num-threads 0", "fail", simple("fail", _options("--num-threads", "0"))),
        RunCase("--num-heads 5 (32 not divisible)", "fail", simple("fail", _options("--num-heads", "5"))),
        RunCase("--device cuda:7 (absent)", "fail", simple("fail", _options("--device", "cuda:7"))),
        RunCase("--init-from a checkpoint with NaN weights", "fail", simple(
            "fail", lambda ws, d: _options("--init-from", d / "nan-ckpt")(ws, d), prepare=_nan_checkpoint)),
    ]
    return cases


def _torch_save(obj, path: Path) -> None:
    import torch

    torch.save(obj, path)


def _evil_state_case(ws: Workspace, case_dir: Path, victims: Victims) -> Outcome:
    run = _copy_finished(ws, case_dir)
    name = (run / "checkpoints" / "latest").read_text().strip()
    import torch

    torch.save({"step": 4, "evil": _RunsCode(case_dir / "PWNED")}, run / "checkpoints" / name / "trainer_state.pt")
    proc = _resume(ws, case_dir, run)
    if (case_dir / "PWNED").exists():
        return Outcome("victim", "the pickle in trainer_state.pt RAN (it created a file) on --resume")
    return judge("fail", proc, victim=victims.damage())


def _edit_run_config(edit: Callable[[dict], object]) -> Callable[[Path, Victims], None]:
    def damage(run: Path, victims: Victims) -> None:
        path = run / "run_config.json"
        config = json.loads(path.read_text())
        edit(config)
        path.write_text(json.dumps(config))
    return damage


def _nan_checkpoint(case_dir: Path, victims: Victims) -> None:
    from safetensors.torch import load_file, save_file

    folder = case_dir / "nan-ckpt"
    shutil.copytree(WORKSPACE.finished / "final", folder)
    tensors = load_file(folder / "model.safetensors")
    name = "bert.embeddings.word_embeddings.weight"
    tensors[name] = _nan_at(tensors[name])
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


WORKSPACE: Workspace  # set in main; _nan_checkpoint reads the finished run's weights from it


def run_run_case(case: RunCase, ws: Workspace, root: Path) -> Outcome:
    case_dir = Path(tempfile.mkdtemp(dir=root, prefix="run-"))
    victims = Victims(case_dir)
    try:
        return case.scenario(ws, case_dir, victims)
    finally:
        unfreeze(case_dir)


# ---- family 3: fine-tuning task files --------------------------------------------------------------------------

@dataclass
class FinetuneCase:
    name: str
    expect: str
    task: str
    files: dict[str, bytes | str | None]  # file name -> content (None: made by `make`)
    args: list = field(default_factory=list)  # option, value, ...: "{file}" is the case folder's file, None drops
    make: Callable[[Path], None] | None = None
    examples: int | None = None  # a success must have read this many examples (train + eval)


def _rows_csv(rows: list[list[str]], delimiter: str = ",") -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n",
                        quoting=csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE, escapechar="\\")
    writer.writerows(rows)
    return buffer.getvalue()


def finetune_sources() -> dict:
    import csv

    with open(REPO / "assets" / "tasks" / "mood" / "train.csv", newline="") as handle:
        rows = list(csv.reader(handle))[1:31]
    with open(REPO / "assets" / "tasks" / "next-line" / "train.tsv") as handle:
        pairs = [line.rstrip("\n").split("\t") for line in handle][1:31]
    sentences, current = [], []
    for line in (REPO / "assets" / "tasks" / "names" / "train.conll").read_text().splitlines():
        if not line.strip():
            if current:
                sentences.append(current)
                current = []
            if len(sentences) == 30:
                break
        else:
            current.append(line.split())
    squad = json.loads((REPO / "assets" / "tasks" / "who-says" / "train.json").read_text())
    squad["data"][0]["paragraphs"] = squad["data"][0]["paragraphs"][:3]
    squad["data"] = squad["data"][:1]
    return {"rows": rows, "pairs": pairs, "sentences": sentences, "squad": squad}


def finetune_cases(src: dict) -> list[FinetuneCase]:
    rows, pairs, sentences, squad = src["rows"], src["pairs"], src["sentences"], src["squad"]
    header = [["text", "label"]]
    csv_ok = _rows_csv(header + rows)
    n = len(rows)

    def csv_with(edit: Callable[[list[list[str]]], list[list[str]]], delimiter=",") -> str:
        return _rows_csv(edit([list(r) for r in header + rows]), delimiter)

    def jsonl(records: list) -> str:
        return "".join(json.dumps(r) + "\n" for r in records)

    records = [{"text": t, "label": lab} for t, lab in rows]
    regression = [[t, str(i % 5 + 0.5)] for i, (t, _) in enumerate(rows)]

    def regress_with(bad: str) -> str:
        return _rows_csv(header + regression[:10] + [[rows[10][0], bad]] + regression[11:])

    conll_ok = "\n\n".join("\n".join(" ".join(w) for w in s) for s in sentences) + "\n"

    def conll_with(edit: Callable[[list[list[list[str]]]], None]) -> str:
        copy = [[list(w) for w in s] for s in sentences]
        edit(copy)
        return "\n\n".join("\n".join(" ".join(w) for w in s) for s in copy) + "\n"

    token_records = [{"tokens": [w[0] for w in s], "tags": [w[-1] for w in s]} for s in sentences]

    def squad_with(edit: Callable[[dict], None]) -> str:
        copy = json.loads(json.dumps(squad))
        edit(copy)
        return json.dumps(copy)

    def first_qa(data: dict) -> dict:
        return next(qa for qa in data["data"][0]["paragraphs"][0]["qas"] if qa["answers"])

    def first_paragraph(data: dict) -> dict:
        return data["data"][0]["paragraphs"][0]

    def one_file(task: str, file: str) -> Callable[..., FinetuneCase]:
        def make(name: str, expect: str, content, args=(), examples=None) -> FinetuneCase:
            return FinetuneCase(name, expect, task, {file: content}, ["--train", "{" + file + "}", *args],
                                examples=examples)
        return make

    seq, tsv, jl, qa = (one_file("sequence", "train.csv"), one_file("sequence", "train.tsv"),
                        one_file("sequence", "train.jsonl"), one_file("qa", "train.json"))

    def tok(name: str, expect: str, content, file: str = "train.conll") -> FinetuneCase:
        return one_file("token", file)(name, expect, content)

    deep = deep_json()
    pair_ok = _rows_csv([["text", "text_b", "label"], *pairs], "\t")
    cases = [
        seq("CSV valid", "ok", csv_ok, examples=n),
        tsv("TSV pairs valid", "ok", pair_ok),
        jl("JSONL valid", "ok", jsonl(records), examples=n),
        seq("CSV regression valid", "ok", _rows_csv(header + regression), examples=n),
        tok("CoNLL valid", "ok", conll_ok),
        tok("token JSONL valid", "ok", jsonl(token_records), file="train.jsonl"),
        qa("SQuAD 2.0 valid", "ok", json.dumps(squad)),
        seq("CSV header 'text,text,label'", "fail", csv_with(lambda r: [["text", "text", "label"]] +
                                                                 [[x[0], x[0], x[1]] for x in r[1:]])),
        seq("CSV header 'text,label,label'", "fail", csv_with(lambda r: [["text", "label", "label"]] +
                                                                  [[x[0], x[1], "statement"] for x in r[1:]])),
        seq("CSV no label column", "fail", csv_with(lambda r: [["text", "mood"], *r[1:]])),
        seq("CSV no text column", "fail", csv_with(lambda r: [["sentence", "label"], *r[1:]])),
        seq("CSV no header", "fail", csv_with(lambda r: r[1:])),
        seq("CSV unclosed quote on row 5", "fail", csv_ok.replace(rows[4][0], '"' + rows[4][0].replace('"', ""), 1)),
        seq("CSV empty file", "fail", ""),
        seq("CSV header only", "fail", "text,label\n"),
        seq("CSV with a BOM", "ok", "\ufeff" + csv_ok, examples=n),
        seq("CSV with CRLF line ends", "ok", csv_ok.replace("\n", "\r\n"), examples=n),
        seq("CSV with blank lines between rows", "any", csv_ok.replace("\n", "\n\n"), examples=n),
        seq("CSV UTF-16", "fail", csv_ok.encode("utf-16")),
        seq("CSV with a Latin-1 byte", "fail", csv_ok.encode().replace(b"e", b"\xe9", 1)),
        seq("CSV a row with an extra cell", "fail", csv_with(lambda r: [*r[:6], r[6] + ["surplus"], *r[7:]])),
        seq("CSV a row with one cell", "fail", csv_with(lambda r: [*r[:6], r[6][:1], *r[7:]])),
        seq("CSV an empty label cell", "fail", csv_with(lambda r: [*r[:6], [r[6][0], ""], *r[7:]])),
        seq("CSV a whitespace-only text", "fail", csv_with(lambda r: [*r[:6], ["   ", r[6][1]], *r[7:]])),
        seq("CSV a NUL byte in a row", "any", csv_ok.replace(rows[3][0], rows[3][0] + "\0", 1)),
        seq("CSV labels mixing 1.0 and names", "fail", csv_with(lambda r: [*r[:6], [r[6][0], "1.0"], *r[7:]])),
        seq("CSV regression label 1.5e308", "fail", regress_with("1.5e308")),
        seq("CSV regression label inf", "fail", regress_with("inf")),
        seq("CSV regression label -inf", "fail", regress_with("-inf")),
        seq("CSV regression label nan", "fail", regress_with("nan")),
        seq("CSV regression label '1,5'", "fail", regress_with("1,5")),
        seq("CSV one class only", "any", _rows_csv(header + [[t, "statement"] for t, _ in rows])),
        seq("CSV a 100,000-word text", "ok",
            csv_with(lambda r: [*r[:6], ["word " * 100000, r[6][1]], *r[7:]]), examples=n),
        seq("CSV --text-column that is absent", "fail", csv_ok, ["--text-column", "sentence"]),
        seq("CSV --label-column = the text column", "fail", csv_ok, ["--label-column", "text"]),
        seq("CSV --problem-type regression with names", "fail", csv_ok, ["--problem-type", "regression"]),
        seq("CSV --problem-type nonsense", "fail", csv_ok, ["--problem-type", "nonsense"]),
        tsv("TSV header 'text\\ttext\\tlabel'", "fail", pair_ok.replace("text_b", "text", 1)),
        tsv("TSV a row with an extra tab", "fail", pair_ok.replace("\tnext\n", "\tnext\textra\n", 1)),
        tsv("TSV a row without its label", "fail", pair_ok.replace("\tnext\n", "\n", 1)),
        tsv("TSV an empty text_b", "fail",
            _rows_csv([["text", "text_b", "label"], *pairs[:5], [pairs[5][0], "", pairs[5][2]], *pairs[6:]], "\t")),
        jl("JSONL a broken line", "fail", jsonl(records[:5]) + "{broken\n" + jsonl(records[5:])),
        jl("JSONL a line that is a list", "fail", jsonl(records[:5]) + "[1, 2]\n" + jsonl(records[5:])),
        jl("JSONL a label that is an object", "fail",
           jsonl([*records[:5], {"text": "x y", "label": {"a": 1}}, *records[5:]])),
        jl("JSONL a text that is a number", "fail",
           jsonl([*records[:5], {"text": 5, "label": "statement"}, *records[5:]])),
        jl("JSONL a label true", "fail", jsonl([*records[:5], {"text": "x y", "label": True}, *records[5:]])),
        jl("JSONL a label null", "fail", jsonl([*records[:5], {"text": "x y", "label": None}, *records[5:]])),
        jl("JSONL a line nested 100,000 levels", "fail", jsonl(records[:5]) + deep + "\n" + jsonl(records[5:])),
        jl("JSONL a text nested 100,000 levels", "fail", jsonl(records[:5]) + '{"text": ' + deep
           + ', "label": "statement"}\n' + jsonl(records[5:])),
        jl("JSONL with a BOM", "ok", "\ufeff" + jsonl(records), examples=n),
        jl("JSONL a label 1e999 (inf)", "fail", jsonl(records[:5]) + '{"text": "x y", "label": 1e999}\n'
           + jsonl(records[5:])),
        jl("JSONL a label NaN", "fail", jsonl(records[:5]) + '{"text": "x y", "label": NaN}\n' + jsonl(records[5:])),
        FinetuneCase("a .json array of records", "fail", "sequence", {"train.json": json.dumps(records)},
                     ["--train", "{train.json}"]),
        FinetuneCase("an unknown extension .xlsx", "fail", "sequence", {"train.xlsx": csv_ok},
                     ["--train", "{train.xlsx}"]),
        FinetuneCase("no extension", "fail", "sequence", {"train": csv_ok}, ["--train", "{train}"]),
        FinetuneCase("--format xlsx", "fail", "sequence", {"train.csv": csv_ok},
                     ["--train", "{train.csv}", "--format", "xlsx"]),
        FinetuneCase("--train a folder", "fail", "sequence", {}, ["--train", "{.}"]),
        FinetuneCase("--train missing", "fail", "sequence", {}, ["--train", "{missing.csv}"]),
        FinetuneCase("--train a FIFO", "fail", "sequence", {"train.csv": None}, ["--train", "{train.csv}"],
                     make=lambda d: os.mkfifo(d / "train.csv")),
        FinetuneCase("--train a symlink to /dev/zero", "fail", "sequence", {"train.csv": None},
                     ["--train", "{train.csv}"], make=lambda d: (d / "train.csv").symlink_to("/dev/zero")),
        FinetuneCase("--eval with a label training never saw", "fail", "sequence",
                     {"train.csv": csv_ok, "eval.csv": _rows_csv([*header, [rows[0][0], "sarcasm"], *rows[1:5]])},
                     ["--train", "{train.csv}", "--eval", "{eval.csv}"]),
        FinetuneCase("--eval empty", "fail", "sequence", {"train.csv": csv_ok, "eval.csv": ""},
                     ["--train", "{train.csv}", "--eval", "{eval.csv}"]),
        FinetuneCase("--eval with other columns", "fail", "sequence",
                     {"train.csv": csv_ok, "eval.csv": _rows_csv([["sentence", "mood"], *rows[:5]])},
                     ["--train", "{train.csv}", "--eval", "{eval.csv}"]),
        FinetuneCase("--task token with a CSV", "fail", "token", {"train.csv": csv_ok}, ["--train", "{train.csv}"]),
        FinetuneCase("--task qa with a CSV", "fail", "qa", {"train.csv": csv_ok}, ["--train", "{train.csv}"]),
        tok("CoNLL an extra column on one line", "fail", conll_with(lambda s: s[2].__setitem__(
            1, [*s[2][1][:1], "NN", *s[2][1][1:]]))),
        tok("CoNLL a word without a tag", "fail", conll_with(lambda s: s[2].__setitem__(1, s[2][1][:1]))),
        tok("CoNLL an I- tag after O", "any", conll_with(lambda s: s[0].__setitem__(0, [s[0][0][0], "I-PER"]))),
        tok("CoNLL a tag without a BIO prefix", "any", conll_with(lambda s: s[0].__setitem__(0, [s[0][0][0], "PER"]))),
        tok("CoNLL empty", "fail", ""),
        tok("CoNLL only -DOCSTART-", "fail", "-DOCSTART- O\n\n"),
        tok("CoNLL with a Latin-1 byte", "fail", conll_ok.encode().replace(b"O\n", b"\xe9 O\n", 1)),
        tok("CoNLL with a BOM", "ok", "\ufeff" + conll_ok),
        tok("CoNLL a 3,000-word sentence", "any", conll_with(lambda s: s.__setitem__(0, [["word", "O"]] * 3000))),
        tok("token JSONL tokens and tags of different lengths", "fail", jsonl(
            [*token_records[:3], {"tokens": ["a", "b"], "tags": ["O"]}, *token_records[3:]]), file="train.jsonl"),
        tok("token JSONL tags a string", "fail", jsonl(
            [*token_records[:3], {"tokens": ["a", "b"], "tags": "O O"}, *token_records[3:]]), file="train.jsonl"),
        tok("token JSONL a word with a space", "any", jsonl(
            [*token_records[:3], {"tokens": ["a b", "c"], "tags": ["O", "O"]}, *token_records[3:]]),
            file="train.jsonl"),
        tok("token JSONL nested 100,000 levels", "fail", jsonl(token_records[:3]) + deep + "\n", file="train.jsonl"),
        qa("SQuAD answer outside the context", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            answer_start=len(first_paragraph(d)["context"]) + 50))),
        qa("SQuAD answer_start off by 3", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            answer_start=first_qa(d)["answers"][0]["answer_start"] + 3))),
        qa("SQuAD answer_start negative", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            answer_start=-1))),
        qa("SQuAD answer_start a string", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            answer_start=str(first_qa(d)["answers"][0]["answer_start"])))),
        qa("SQuAD answer_start 1e20", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            answer_start=10**20))),
        qa("SQuAD answer text empty (answerable)", "fail", squad_with(lambda d: first_qa(d)["answers"][0].update(
            text=""))),
        qa("SQuAD no 'data'", "fail", json.dumps({"version": "v2.0"})),
        qa("SQuAD top level a list", "fail", json.dumps(squad["data"])),
        qa("SQuAD no 'context'", "fail", squad_with(lambda d: first_paragraph(d).pop("context"))),
        qa("SQuAD context a number", "fail", squad_with(lambda d: first_paragraph(d).update(context=5))),
        qa("SQuAD no 'qas'", "fail", squad_with(lambda d: first_paragraph(d).pop("qas"))),
        qa("SQuAD a question without 'id'", "fail", squad_with(lambda d: first_qa(d).pop("id"))),
        qa("SQuAD two questions with one id", "fail", squad_with(lambda d: first_paragraph(d)["qas"][1].update(
            id=first_paragraph(d)["qas"][0]["id"]))),
        qa("SQuAD answers not a list", "fail", squad_with(lambda d: first_qa(d).update(answers="Romeo"))),
        qa("SQuAD is_impossible with an answer (the answer is ignored)", "any",
           squad_with(lambda d: first_qa(d).update(is_impossible=True))),
        qa("SQuAD nested 100,000 levels", "fail", deep),
        qa("SQuAD a context nested 100,000 levels", "fail",
           json.dumps(squad)[:-2] + ', "deep": ' + deep + "}]}"),
        qa("SQuAD not JSON", "fail", "{'data': oops"),
        qa("SQuAD with a BOM", "ok", "\ufeff" + json.dumps(squad)),
        qa("SQuAD --doc-stride 0 (windows without overlap)", "any", json.dumps(squad), ["--doc-stride", "0"]),
        qa("SQuAD --doc-stride larger than --seq-len", "fail", json.dumps(squad), ["--doc-stride", "500"]),
        qa("SQuAD --max-answer-length 0", "fail", json.dumps(squad), ["--max-answer-length", "0"]),
        qa("SQuAD --max-query-length 0", "fail", json.dumps(squad), ["--max-query-length", "0"]),
        seq("--weight-decay 1e30 (3 steps)", "fail", csv_ok, ["--weight-decay", "1e30", "--steps", "3"]),
        seq("--weight-decay -1", "fail", csv_ok, ["--weight-decay", "-1"]),
        seq("--lr 1e30 (3 steps)", "fail", csv_ok, ["--lr", "1e30", "--steps", "3"]),
        seq("--lr inf", "fail", csv_ok, ["--lr", "inf"]),
        seq("--lr nan", "fail", csv_ok, ["--lr", "nan"]),
        seq("--lr 0", "fail", csv_ok, ["--lr", "0"]),
        seq("--epochs -1 (no --steps)", "fail", csv_ok, ["--epochs", "-1", "--steps", None]),
        seq("--epochs 0 (no --steps)", "fail", csv_ok, ["--epochs", "0", "--steps", None]),
        seq("--epochs nan (no --steps)", "fail", csv_ok, ["--epochs", "nan", "--steps", None]),
        seq("--steps -1", "fail", csv_ok, ["--steps", "-1"]),
        seq("--batch-size 0", "fail", csv_ok, ["--batch-size", "0"]),
        seq("--seq-len 3", "fail", csv_ok, ["--seq-len", "3"]),
        seq("--seq-len 100000 (the model has 512 positions)", "fail", csv_ok, ["--seq-len", "100000"]),
        seq("--max-grad-norm -1", "fail", csv_ok, ["--max-grad-norm", "-1"]),
        seq("--warmup-steps -3", "fail", csv_ok, ["--warmup-steps", "-3"]),
        seq("--heldout-fraction 1.5", "fail", csv_ok, ["--heldout-fraction", "1.5"]),
        seq("--heldout-fraction 0 (no eval set)", "any", csv_ok, ["--heldout-fraction", "0"]),
        seq("--divergence-factor -1", "fail", csv_ok, ["--divergence-factor", "-1"]),
        seq("--init-from a missing folder", "fail", csv_ok, ["--init-from", "{no-such-checkpoint}"]),
        FinetuneCase("--init-from a checkpoint with NaN weights", "fail", "sequence", {"train.csv": csv_ok},
                     ["--train", "{train.csv}", "--init-from", "{nan-ckpt}"],
                     make=lambda d: _nan_checkpoint(d, None)),
    ]
    return cases


def run_finetune_case(case: FinetuneCase, ws: Workspace, root: Path) -> Outcome:
    case_dir = Path(tempfile.mkdtemp(dir=root, prefix="ft-"))
    victims = Victims(case_dir)
    for name, content in case.files.items():
        if content is not None:
            (case_dir / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    if case.make:
        case.make(case_dir)
    options = {"--task": case.task, "--init-from": str(ws.finished / "final"), "--steps": "1", "--batch-size": "4",
               "--seq-len": "32", "--device": "cpu", "--num-threads": "1", "--out": str(case_dir / "run")}
    for option, value in zip(case.args[::2], case.args[1::2], strict=True):  # every option here takes a value
        if value is None:
            options.pop(option, None)  # None: leave the option out (e.g. --steps, so that --epochs counts)
        else:
            options[option] = str(case_dir / value[1:-1]) if value.startswith("{") and value.endswith("}") else value
    argv = [item for pair in options.items() for item in pair] + ["--no-progress"]
    proc = run_cli("bertcore.cli.finetune", argv, case_dir)
    wrong = final_problem(case_dir / "run") if proc.rc == 0 else None
    if proc.rc == 0 and case.examples is not None:
        counted = _examples_read(proc.stderr)
        if counted is not None and counted != case.examples:
            wrong = f"read {counted} examples of the file's {case.examples}"
    return judge(case.expect, proc, victim=victims.damage(), wrong=wrong)


def _examples_read(stderr: str) -> int | None:
    import re

    match = re.search(r"(\d+) training / (\d+) eval examples", stderr)
    return int(match.group(1)) + int(match.group(2)) if match else None


# ==== family 4: the Hugging Face cache and the Hub download (issue 34) ===========================================
# Each case lays a cache out in a folder of its own, beside a victims/ folder (Victims, plus a site-packages folder
# where a planted .pth file would run at the next Python start), and for a download starts a fake Hub on 127.0.0.1
# (tests/hub_fixtures.FakeHub, loaded by its path) that answers as a broken or hostile endpoint would: names in its
# headers and listing that lead out of the cache, HTML pages, redirect loops, stalls, trickles, cut bodies, wrong
# sizes and hashes, error statuses. One call (resolve_model, the listing, download_model) then runs in a child
# interpreter (`--_hub-case`) that imports bertcore as PYTHONPATH finds it: point PYTHONPATH at another checkout to
# audit that code (the "before" table of issue 34). Cases about permissions drop root's CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH in the child, so permission bits count. The outcomes read, for this family:
#   clear    a CheckpointError; the listing names the repo as not openable (or says the cache cannot be read); a
#            cancel raised DownloadCancelled within HUB_CANCEL_S and left nothing of the download behind
#   silent   opened (or listed) another snapshot than the repo's own, left a broken repo out of the listing without
#            a word, kept bytes that are not the file, finished although cancelled, a cancel that left files
#   hang     no answer within HUB_TIMEOUT_S, or a cancel that took longer than HUB_CANCEL_S to act
#   victim   a file outside the cache was changed or created (a planted .pth among them)

HUB_TIMEOUT_S = 60.0
HUB_CANCEL_S = 1.5  # issue 34: "about a second, whatever the server does"
HUB_READ_TIMEOUT = "2"  # HF_HUB_DOWNLOAD_TIMEOUT / HF_HUB_ETAG_TIMEOUT in the child: a stall is seen in seconds
HUB_REPO, HUB_OTHER = "org/tiny", "org/other"
HUB_A, HUB_B = "a" * 40, "b" * 40
HUB_SERVED = "0123456789abcdef0123456789abcdef01234567"  # the fake Hub's commit (tests/hub_fixtures.HUB_COMMIT)


def _hub_fixtures():
    """tests/hub_fixtures.py of this checkout, loaded by its path: the fake Hub is this audit's, whichever bertcore
    PYTHONPATH makes the child import."""
    return _tests_module("hub_fixtures")


def _tests_module(name: str):
    """tests/<name>.py of this checkout, loaded by its path once (whatever PYTHONPATH says)."""
    with _TESTS_MODULES_LOCK:  # two cases at once must not see it half loaded
        module_name = f"fault_audit_{name}"
        if module_name not in sys.modules:
            import importlib.util

            spec = importlib.util.spec_from_file_location(module_name, REPO / "tests" / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # its dataclasses look themselves up here
            spec.loader.exec_module(module)
        return sys.modules[module_name]


_TESTS_MODULES_LOCK = threading.Lock()


def hub_files() -> dict[str, bytes]:
    """The files of the repo every case serves or caches: small, and valid."""
    fixtures = _hub_fixtures()
    return {"config.json": fixtures.hub_config(architectures=["BertForMaskedLM"]),
            "model.safetensors": fixtures.safetensors_bytes({"bert.embeddings.word_embeddings.weight":
                                                             ((6, 4), "F32")}),
            "vocab.txt": "\n".join([*SPECIALS, "the", "cat"]).encode() + b"\n",
            "tokenizer_config.json": b'{"do_lower_case": true}'}


@dataclass
class HubWorld:
    """One case's folder: the cache, the victims beside it, the fake Hub (for a download)."""

    folder: Path
    cache: Path
    victims: Path
    files: dict[str, bytes]
    hub: object = None

    def storage(self, repo_id: str = HUB_REPO) -> Path:
        return self.cache / ("models--" + repo_id.replace("/", "--"))

    def snapshot(self, repo_id: str = HUB_REPO, commit: str = HUB_A) -> Path:
        return self.storage(repo_id) / "snapshots" / commit


@dataclass
class HubCase:
    name: str
    expect: str  # "ok", "fail" or "any"
    call: str  # "resolve", "list", "download" or "cancel"
    lay_out: Callable[[HubWorld], None] | None = None  # damages the cache (after the hub started, for a download)
    hub: dict | None = None  # FakeHub options; "{victims}" in a string is the victims folder
    revision: str | None = None
    unprivileged: bool = False  # permission bits count in the child
    cancel: tuple[str, float] | None = None  # cancel `seconds` after the first report of `file` ("": the start)
    environment: dict = field(default_factory=dict)


def _ref(content: str | bytes | Callable[[HubWorld], str]) -> Callable[[HubWorld], None]:
    def lay_out(world: HubWorld) -> None:
        value = content(world) if callable(content) else content
        ref = world.storage() / "refs" / "main"
        ref.write_bytes(value if isinstance(value, bytes) else value.encode())
    return lay_out


def _replace(relative: str, kind: str, *, in_storage: bool = True) -> Callable[[HubWorld], None]:
    """Put something else at storage/relative (or cache/relative): fifo, zero (a link to /dev/zero), folder,
    dangling (a link to nothing), outside (a link to a victims file), binary, file, unreadable (mode 0)."""
    def lay_out(world: HubWorld) -> None:
        path = (world.storage() if in_storage else world.cache) / relative if relative else (
            world.storage() if in_storage else world.cache)
        if kind == "unreadable":
            path.chmod(0)
            return
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "zero":
            path.symlink_to("/dev/zero")
        elif kind == "folder":
            path.mkdir()
        elif kind == "dangling":
            path.symlink_to(world.folder / "nothing-here")
        elif kind == "outside":
            path.symlink_to(world.victims / "precious.txt")
        elif kind == "outside folder":
            path.symlink_to(world.victims / "folder")
        elif kind == "binary":
            path.write_bytes(b"\xff\xfe\x00\x81" * 64)
        elif kind == "file":
            path.write_text("a file where a folder belongs")
        elif kind != "missing":
            raise ValueError(kind)
    return lay_out


def _steps(*lay_outs: Callable[[HubWorld], None]) -> Callable[[HubWorld], None]:
    def lay_out(world: HubWorld) -> None:
        for step in lay_outs:
            step(world)
    return lay_out


def _snapshot_links_to_other(world: HubWorld) -> None:
    shutil.rmtree(world.snapshot())
    world.snapshot().symlink_to(world.snapshot(HUB_OTHER, HUB_B))


def _index_naming(shard: str) -> Callable[[HubWorld], None]:
    def lay_out(world: HubWorld) -> None:
        snapshot = world.snapshot()
        (snapshot / "model.safetensors").unlink()
        (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": shard}}))
    return lay_out


def _cache_is(kind: str) -> Callable[[HubWorld], None]:
    def lay_out(world: HubWorld) -> None:
        if kind == "link to a good cache":
            world.cache.rename(world.folder / "real-cache")
            world.cache.symlink_to(world.folder / "real-cache")
            return
        shutil.rmtree(world.cache)
        if kind == "file":
            world.cache.write_text("not a cache")
        elif kind == "fifo":
            os.mkfifo(world.cache)
    return lay_out


def _second_snapshot(commit: str) -> Callable[[HubWorld], None]:
    def lay_out(world: HubWorld) -> None:
        _hub_fixtures().cache_repo(world.cache, HUB_REPO, world.files, commit=commit, ref=None)
    return lay_out


def _hostile_download(name: str, hub: dict, expect: str = "fail", **options) -> HubCase:
    return HubCase(name, expect, "download", hub=hub, **options)


def hub_cases() -> list[HubCase]:
    cases: list[HubCase] = []
    # -- the cache as it is read: each damage resolved by repo id, and listed ----------------------------------
    damages: list[tuple[str, str, str, Callable[[HubWorld], None], bool]] = [
        # (name, resolve expects, list expects, lay-out, unprivileged)
        ("refs/main holds a path into another repo", "fail", "fail",
         _ref(f"../../models--org--other/snapshots/{HUB_B}"), False),
        ("refs/main holds an absolute path to another repo's snapshot", "fail", "fail",
         _ref(lambda world: str(world.snapshot(HUB_OTHER, HUB_B))), False),
        ("refs/main holds binary bytes", "fail", "fail", _ref(b"\xff\xfe\x00\x81" * 8), False),
        ("refs/main is empty", "fail", "fail", _ref(b""), False),
        ("refs/main holds 39 hex digits", "fail", "fail", _ref("a" * 39), False),
        ("refs/main holds the hash in capitals", "fail", "fail", _ref("A" * 40), False),
        ("refs/main holds the hash and a line end (as git writes it)", "ok", "ok", _ref(HUB_A + "\n"), False),
        ("refs/main names a snapshot that is not there", "fail", "fail", _ref("c" * 40), False),
        ("refs/main holds 10 MB", "fail", "fail", _ref(b"a" * 10_000_000), False),
        ("refs/main is a FIFO", "fail", "fail", _replace("refs/main", "fifo"), False),
        ("refs/main links to /dev/zero", "fail", "fail", _replace("refs/main", "zero"), False),
        ("refs/main is a folder", "fail", "fail", _replace("refs/main", "folder"), False),
        ("refs/main is a dangling link", "fail", "fail", _replace("refs/main", "dangling"), False),
        ("refs/main links to a file outside the cache", "fail", "fail", _replace("refs/main", "outside"), False),
        ("refs/main is unreadable", "fail", "fail", _replace("refs/main", "unreadable"), True),
        ("refs/ is unreadable", "fail", "fail", _replace("refs", "unreadable"), True),
        ("no refs/main: the newest snapshot", "ok", "ok", _replace("refs/main", "missing"), False),
        ("the snapshot is a link to another repo's snapshot", "fail", "fail", _snapshot_links_to_other, False),
        ("the snapshot is a file", "fail", "fail", _replace(f"snapshots/{HUB_A}", "file"), False),
        ("the snapshot is unreadable", "fail", "fail", _replace(f"snapshots/{HUB_A}", "unreadable"), True),
        ("snapshots/ is unreadable", "fail", "fail", _replace("snapshots", "unreadable"), True),
        ("blobs/ is unreadable", "fail", "fail", _replace("blobs", "unreadable"), True),
        ("the repo folder is unreadable", "fail", "fail", _replace("", "unreadable"), True),
        ("the repo folder is a file", "fail", "fail", _replace("", "file"), False),
        ("the repo folder is a link to a folder outside the cache", "fail", "fail", _replace("", "outside folder"),
         False),
        ("the repo folder is empty", "fail", "fail", _steps(_replace("", "missing"), _replace("", "folder")), False),
        ("trees/ holds a FIFO", "fail", "ok", _replace(f"trees/{HUB_A}.json", "fifo"), False),
        ("trees/<commit>.json is garbage", "any", "ok", _replace(f"trees/{HUB_A}.json", "binary"), False),
        ("the cache is unreadable", "fail", "fail", _replace("", "unreadable", in_storage=False), True),
        ("the cache is a file", "fail", "fail", _cache_is("file"), False),
        ("the cache is a FIFO", "fail", "fail", _cache_is("fifo"), False),
        ("the cache is a link to a good cache", "ok", "ok", _cache_is("link to a good cache"), False),
    ]
    for file in ("config.json", "model.safetensors"):
        for kind in ("fifo", "zero", "dangling", "binary", "folder", "missing", "unreadable"):
            # resolving looks the files up (a FIFO is not a file); reading them is the loader's (checkpoint family)
            resolve_expect = "fail" if file == "config.json" and kind not in ("binary", "unreadable") else "any"
            damages.append((f"{file}: {kind}", resolve_expect, "fail", _replace(f"snapshots/{HUB_A}/{file}", kind),
                            kind == "unreadable"))
    damages += [
        ("config.json names gpt2", "any", "fail",
         lambda world: _replace(f"snapshots/{HUB_A}/config.json", "missing")(world) or (
             world.snapshot() / "config.json").write_bytes(_hub_fixtures().hub_config("gpt2")), False),
        ("the weights index names a missing shard", "any", "fail", _index_naming("model-1.safetensors"), False),
        ("the weights index names ../x", "any", "fail", _index_naming("../../../x.safetensors"), False),
    ]
    for name, resolve_expect, list_expect, lay_out, unprivileged in damages:
        cases.append(HubCase(f"resolve: {name}", resolve_expect, "resolve", lay_out, unprivileged=unprivileged))
        cases.append(HubCase(f"list: {name}", list_expect, "list", lay_out, unprivileged=unprivileged))
    # -- revisions a user types -------------------------------------------------------------------------------
    for revision, expect, lay_out in [
        ("../../models--org--other/refs/main", "fail", None),
        ("{victims}/precious.txt", "fail", None),
        ("..", "fail", None),
        ("with space", "fail", None),
        ("refs/pr/1", "ok", lambda world: (world.storage() / "refs" / "refs" / "pr").mkdir(parents=True) or (
            world.storage() / "refs" / "refs" / "pr" / "1").write_text(HUB_A)),
        ("aaaaaaa", "ok", None),
        ("aaaaaaa (two snapshots start so)", "fail", _second_snapshot("a" * 39 + "c")),
        ("c" * 40 + " (not cached)", "fail", None),
        ("v9 (a tag never downloaded)", "fail", None),
    ]:
        cases.append(HubCase(f"resolve revision {revision}", expect, "resolve", lay_out,
                             revision=revision.split(" (")[0]))
    # -- downloads from a hostile or broken Hub ----------------------------------------------------------------
    for header in ("ETag", "X-Linked-Etag"):
        for name, etag in [("an absolute path into site-packages", "{victims}/site-packages/x.pth"),
                           ("a relative path out of the cache", "../../../../victims/site-packages/x.pth"),
                           ("'..'", ".."), ("empty", ""), ("a/b", "a/b"), ("not a hash", "x.pth"),
                           ("39 hex digits", "0" * 39), ("a NUL", "a\x00b")]:
            cases.append(_hostile_download(f"{header} of vocab.txt is {name}",
                                           {"file_headers": {"vocab.txt": {header: f'"{etag}"'}}}))
    cases += [
        _hostile_download("ETag of vocab.txt is missing", {"file_headers": {"vocab.txt": {"ETag": None}}}),
        _hostile_download("ETag is weak (W/), otherwise right", {"file_headers": {}}, "ok",
                          lay_out=lambda world: world.hub.file_headers.update(
                              {"vocab.txt": {"ETag": 'W/"' + hashlib.sha256(world.files["vocab.txt"]).hexdigest()
                                             + '"'}})),
        _hostile_download("ETag of the weights names other bytes (the body is substituted)",
                          {"file_headers": {"model.safetensors": {"ETag": '"' + "0" * 64 + '"'}}}),
        _hostile_download("X-Repo-Commit is a path out of the cache",
                          {"file_headers": {"vocab.txt": {"X-Repo-Commit": "../../../../victims/commit"}}}),
        _hostile_download("X-Repo-Commit is an absolute path",
                          {"file_headers": {"vocab.txt": {"X-Repo-Commit": "{victims}/commit"}}}),
        _hostile_download("X-Repo-Commit is another commit",
                          {"file_headers": {"vocab.txt": {"X-Repo-Commit": HUB_B}}}),
        _hostile_download("X-Repo-Commit is missing", {"file_headers": {"vocab.txt": {"X-Repo-Commit": None}}}, "any"),
        _hostile_download("the listing's commit is a path", {"commit": "../../../victims"}),
        _hostile_download("the listing's commit is not hex", {"commit": "z" * 40}),
        _hostile_download("the listing names ../../x", {"extra_listed": {"../../x": 3}}),
        _hostile_download("the listing names an absolute path", {"extra_listed": {"/etc/passwd": 3}}),
        _hostile_download("the listing names a/../../b", {"extra_listed": {"a/../../b": 3}}),
        _hostile_download("the listing is an HTML page", {"info": (200, b"<!DOCTYPE html><html>Sign in</html>",
                                                                   "text/html")}),
        _hostile_download("the listing is empty", {"info": (200, b"", "application/json")}),
        _hostile_download("the listing is a JSON list", {"info": (200, b"[1, 2]", "application/json")}),
        _hostile_download("the listing is cut JSON", {"info": (200, b'{"sha": "01', "application/json")}),
        _hostile_download("the listing's files are a string", {"info": (200, json.dumps(
            {"sha": HUB_A, "siblings": "all"}).encode(), "application/json")}),
        _hostile_download("a listed size is text", {"info": (200, json.dumps(
            {"sha": HUB_A, "siblings": [{"rfilename": "config.json", "size": "big"}]}).encode(), "application/json")}),
        _hostile_download("the listing redirects to itself", {"redirects": {"/api/models/org/tiny":
                                                                            "/api/models/org/tiny"}}),
        _hostile_download("a file redirects to itself", {"redirects": {
            f"/org/tiny/resolve/{HUB_SERVED}/vocab.txt": f"/org/tiny/resolve/{HUB_SERVED}/vocab.txt"}}),
        _hostile_download("a file redirects to file:///etc/passwd", {"redirects": {
            f"/org/tiny/resolve/{HUB_SERVED}/vocab.txt": "file:///etc/passwd"}}),
        _hostile_download("a file redirects to a closed port", {"redirects": {
            f"/org/tiny/resolve/{HUB_SERVED}/vocab.txt": "http://127.0.0.1:9/x"}}),
        _hostile_download("large files come from a CDN on another port", {"cdn": "{cdn}"}, "ok"),
        _hostile_download("the weights stall (no cancel)", {"bodies": {"model.safetensors": "stall"}}),
        _hostile_download("the weights trickle, a byte per 10 ms (no cancel)",
                          {"bodies": {"model.safetensors": "trickle"}, "trickle_seconds": 0.01}, "ok"),
        _hostile_download("the weights are cut every time", {"bodies": {"model.safetensors": "truncated"}}),
        _hostile_download("the weights are cut once", {"bodies": {"model.safetensors": "truncated once"}}, "ok"),
        _hostile_download("the weights come twice under one Content-Length",
                          {"bodies": {"model.safetensors": "longer"}}, "any"),
        _hostile_download("the weights' size disagrees with the listing",
                          {"file_headers": {"model.safetensors": {"Content-Length": "100000"}}}),
        _hostile_download("the weights' Content-Length is not a number",
                          {"file_headers": {"model.safetensors": {"Content-Length": "many"}}}),
        _hostile_download("401 without a token", {"token": "hf_secret"}),
        _hostile_download("401 for a wrong token", {"token": "hf_secret"}, environment={"HF_TOKEN": "hf_wrong"}),
        _hostile_download("the right token", {"token": "hf_secret"}, "ok", environment={"HF_TOKEN": "hf_secret"}),
        _hostile_download("403 everywhere", {"forbidden": True}),
        _hostile_download("404 for vocab.txt", {"status_for": {"vocab.txt": 404}}),
        _hostile_download("500 for the weights", {"status_for": {"model.safetensors": 500}}),
        _hostile_download("429 for the weights", {"status_for": {"model.safetensors": 429}}),
        _hostile_download("no such repo (404)", {}, revision=None, lay_out=lambda world: world.hub.repos.clear()),
        _hostile_download("the repo has no config.json", {}, lay_out=lambda world: world.hub.repos[HUB_REPO].pop(
            "config.json")),
        _hostile_download("revision is an absolute path to a file outside", {}, revision="{victims}/precious.txt"),
        _hostile_download("revision leads out of refs/", {}, revision="../../../../victims/precious.txt"),
        _hostile_download("revision is '..'", {}, revision=".."),
        _hostile_download("revision has a space", {}, revision="a b"),
        _hostile_download("revision ends with .lock", {}, revision="x.lock"),
        _hostile_download("revision v1.0", {}, "ok", revision="v1.0"),
        _hostile_download("revision refs/pr/1", {}, "ok", revision="refs/pr/1"),
        _hostile_download("revision is a commit the Hub answers with another", {}, revision=HUB_B),
        _hostile_download("the cache is read-only", {}, unprivileged=True,
                          lay_out=lambda world: world.cache.chmod(0o555)),
        _hostile_download("the cache is a file", {}, lay_out=_cache_is("file")),
        _hostile_download("blobs/ is a link outside the cache", {}, lay_out=lambda world: (
            world.storage().mkdir(parents=True), (world.storage() / "blobs").symlink_to(world.victims / "folder"))),
        _hostile_download("snapshots/ is a link outside the cache", {}, lay_out=lambda world: (
            world.storage().mkdir(parents=True),
            (world.storage() / "snapshots").symlink_to(world.victims / "folder"))),
        _hostile_download("refs/ is a link outside the cache", {}, lay_out=lambda world: (
            world.storage().mkdir(parents=True), (world.storage() / "refs").symlink_to(world.victims / "folder"))),
        _hostile_download("a blob's .incomplete is a link to a file outside", {}, "any", lay_out=lambda world: (
            (world.storage() / "blobs").mkdir(parents=True),
            (world.storage() / "blobs" / (hashlib.sha256(world.files["vocab.txt"]).hexdigest() + ".incomplete"))
            .symlink_to(world.victims / "precious.txt"))),
        _hostile_download("a snapshot file is a link to a file outside", {}, "ok", lay_out=lambda world: (
            (world.storage() / "snapshots" / HUB_SERVED).mkdir(parents=True),
            (world.storage() / "snapshots" / HUB_SERVED / "vocab.txt").symlink_to(world.victims /
                                                                                      "precious.txt"))),
        _hostile_download("HF_ENDPOINT is ftp://", {}, environment={"HF_ENDPOINT": "ftp://mirror.example"}),
        _hostile_download("HF_ENDPOINT is a closed port", {}, environment={"HF_ENDPOINT": "http://127.0.0.1:9"}),
        _hostile_download("HF_HUB_DOWNLOAD_TIMEOUT is 'soon'", {}, "any",
                          environment={"HF_HUB_DOWNLOAD_TIMEOUT": "soon"}),
        _hostile_download("a plain download", {}, "ok"),
    ]
    # -- cancel, whatever the server does -----------------------------------------------------------------------
    cases += [
        HubCase("cancel while the weights stall", "fail", "cancel",
                hub={"bodies": {"model.safetensors": "stall"}}, cancel=("model.safetensors", 1.0)),
        HubCase("cancel while the weights trickle (a byte every 0.5 s)", "fail", "cancel",
                hub={"bodies": {"model.safetensors": "trickle"}, "trickle_seconds": 0.5},
                cancel=("model.safetensors", 2.0)),
        HubCase("cancel while vocab.txt stalls", "fail", "cancel", hub={"bodies": {"vocab.txt": "stall"}},
                cancel=("vocab.txt", 1.0)),
        HubCase("cancel while the listing never answers", "fail", "cancel", hub={"info_stall": True},
                cancel=("", 1.0)),
        HubCase("cancel as the weights start", "fail", "cancel", hub={}, cancel=("model.safetensors", 0.0)),
    ]
    return cases



def _start_fake_hub(repos: dict, options: dict):
    """A FakeHub serving `repos` on 127.0.0.1, and its server (to shut down)."""
    return _hub_fixtures().start_fake_hub(repos, **options)


def run_hub_case(case: HubCase, root: Path) -> Outcome:
    fixtures = _hub_fixtures()
    folder = Path(tempfile.mkdtemp(dir=root, prefix="hub-"))
    victims = Victims(folder)
    (victims.root / "site-packages").mkdir()
    victims.before = victims.snapshot()
    world = HubWorld(folder, folder / "hf_home" / "hub", victims.root, hub_files())
    world.cache.mkdir(parents=True)
    servers = []
    try:
        if case.call in ("resolve", "list"):
            fixtures.cache_repo(world.cache, HUB_REPO, world.files, commit=HUB_A)
            fixtures.cache_repo(world.cache, HUB_OTHER, {**world.files, "vocab.txt": b"[PAD]\nother\n"}, commit=HUB_B)
        endpoint = "http://127.0.0.1:9"  # nothing listens on the discard port: a look-up never reaches a Hub
        if case.call in ("download", "cancel"):
            options = _formatted(dict(case.hub or {}), world)
            if options.get("cdn") == "{cdn}":
                cdn, server = _start_fake_hub({HUB_REPO: dict(world.files)}, {})
                servers.append((cdn, server))
                options["cdn"] = cdn.url
            world.hub, server = _start_fake_hub({HUB_REPO: dict(world.files)}, options)
            servers.append((world.hub, server))
            endpoint = world.hub.url
        if case.lay_out is not None:
            case.lay_out(world)
        request = {"call": case.call, "repo_id": HUB_REPO, "unprivileged": case.unprivileged,
                   "revision": _formatted(case.revision, world), "cancel": case.cancel,
                   "result": str(folder / "hub-result.json")}
        (folder / "hub-request.json").write_text(json.dumps(request))
        environment = dict(os.environ, HF_HOME=str(world.cache.parent), HF_HUB_CACHE=str(world.cache),
                           HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1",
                           HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DOWNLOAD_TIMEOUT=HUB_READ_TIMEOUT,
                           HF_HUB_ETAG_TIMEOUT=HUB_READ_TIMEOUT, PYTHONUNBUFFERED="1")
        for name in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGINGFACE_HUB_CACHE"):
            environment.pop(name, None)
        environment.update(_formatted(case.environment, world))
        process = subprocess.Popen([PYTHON, __file__, "--_hub-case", str(folder / "hub-request.json")], cwd=folder,
                                   env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        proc = finish(process, HUB_TIMEOUT_S)
    finally:
        for hub, server in servers:
            hub.released.set()
            server.shutdown()
            server.server_close()
        subprocess.run(["chmod", "-R", "u+rwX", str(folder)], capture_output=True)  # what a case made unreadable
    damage = victims.damage()
    if damage:
        return Outcome("victim", damage)
    planted = [str(path.relative_to(folder)) for path in folder.rglob("*.pth")
               if world.cache.parent not in path.parents]  # in the cache it is a blob's name, and never runs
    if planted:
        return Outcome("victim", f"a .pth file was planted: {', '.join(planted[:3])}")
    if proc.timed_out:
        return Outcome("hang", f"no answer within {HUB_TIMEOUT_S:.0f} s; last: {last_line(proc.stderr)}")
    result_path = folder / "hub-result.json"
    result = json.loads(result_path.read_text()) if result_path.is_file() and result_path.stat().st_size else {}
    if not result:
        return Outcome("traceback", f"the child died (exit {proc.rc}): {error_line(proc.stderr)}")
    return _judge_hub(case, world, result)


def _formatted(value, world: HubWorld):
    """'{victims}' in the strings of `value` (any nesting) is the victims folder."""
    if isinstance(value, str):
        return value.replace("{victims}", str(world.victims))
    if isinstance(value, dict):
        return {key: _formatted(item, world) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_formatted(item, world) for item in value)
    return value


def _judge_hub(case: HubCase, world: HubWorld, result: dict) -> Outcome:
    status, message = result["status"], (result.get("message") or "").replace("\n", " ")[:220]
    if status == "exception":
        return Outcome("traceback", f"{result['type']}: {message} ({result.get('where', '')})")
    if case.call == "cancel":
        latency = result.get("latency")
        if status == "cancelled":
            left = _download_leftovers(world)
            if left:
                return Outcome("silent", f"cancelled, but left {', '.join(left[:3])}")
            if latency is None or latency > HUB_CANCEL_S:
                return Outcome("hang", f"cancel took {latency or 0:.1f} s to act")
            return Outcome("clear", f"cancelled {latency:.2f} s after it was asked, nothing left")
        if status == "refused":
            return Outcome("hang", f"cancel did not act: {result['seconds']:.0f} s in, it failed instead: {message}")
        return Outcome("silent", "the download finished although it was cancelled")
    refused = "refused" if case.expect == "ok" else "clear"
    if status == "refused":
        if case.call == "download" and _download_leftovers(world, refs_only=True):
            return Outcome("silent", f"refused, but a ref names the failed download: {message}")
        return Outcome(refused, message)
    value = result.get("value") or {}
    if case.call == "list":
        if value.get("problem"):
            return Outcome(refused, f"the listing says the cache cannot be read: {value['problem'][:180]}")
        models, broken = dict(value["models"]), dict(value["broken"] or [])
        if HUB_REPO in models:
            if Path(os.path.realpath(models[HUB_REPO])).parent != Path(os.path.realpath(world.storage() /
                                                                                      "snapshots")):
                return Outcome("silent", f"listed {HUB_REPO} with {models[HUB_REPO]}, not one of its snapshots")
            if case.expect == "fail":
                return Outcome("silent", f"listed {HUB_REPO} as a model to open although it is broken")
            return Outcome("ok", f"listed {HUB_REPO}")
        if HUB_REPO in broken:
            return Outcome(refused, f"listed as not openable: {broken[HUB_REPO]}")
        return Outcome("silent", f"{HUB_REPO} is left out of the listing without a word")
    problem = _hub_problem(case, world, value)
    if problem:
        return Outcome("silent", problem)
    if case.expect == "fail":
        return Outcome("silent", f"worked although the input is wrong: {json.dumps(value)[:180]}")
    return Outcome("ok", json.dumps(value)[:200])


def _hub_problem(case: HubCase, world: HubWorld, value: dict) -> str | None:
    """What is wrong with a look-up or a download that returned, or None."""
    if case.call == "resolve":
        folder = Path(os.path.realpath(value["folder"]))
        if folder.parent != Path(os.path.realpath(world.storage() / "snapshots")):
            return f"opened {folder} under {HUB_REPO}'s name: not one of its own snapshots"
        return None
    snapshot = Path(value["folder"])
    wrong = [name for name, content in world.files.items()
             if not (snapshot / name).is_file() or (snapshot / name).read_bytes() != content]
    if wrong:
        return f"downloaded, but {', '.join(wrong)} in the snapshot is not the file served"
    return None


def _download_leftovers(world: HubWorld, refs_only: bool = False) -> list[str]:
    storage = world.storage()
    if refs_only:
        refs = storage / "refs"
        return [str(path.relative_to(world.cache)) for path in refs.rglob("*")
                if path.is_file()] if refs.is_dir() and not refs.is_symlink() else []
    left = [str(path.relative_to(world.cache)) for path in storage.rglob("*")] if storage.is_dir() else []
    left += [str(path.relative_to(world.cache)) for path in world.cache.rglob("*.incomplete")]
    return left


def hub_case_child(request_path: str) -> None:
    """`--_hub-case`: one call, its outcome as JSON (run in a child: a hang or a crash is counted, not suffered)."""
    request = json.loads(Path(request_path).read_text())
    outcome: dict = {}
    started = time.monotonic()
    cancel_state: dict = {"seen": None, "at": None}
    file, delay = request["cancel"] or ("", 0.0)

    def progress(done: int, total: int, name: str) -> None:
        if name == file and cancel_state["seen"] is None:
            cancel_state["seen"] = time.monotonic()

    def cancel() -> bool:
        if cancel_state["at"] is None and request["cancel"] is not None:
            since = started if not file else cancel_state["seen"]
            if since is not None and time.monotonic() - since >= delay:
                cancel_state["at"] = time.monotonic()
        return cancel_state["at"] is not None

    enforce = _hub_fixtures().permissions_enforced() if request["unprivileged"] else contextlib.nullcontext()
    try:
        from bertcore.errors import CheckpointError, DownloadCancelled

        with enforce:
            outcome = {"status": "ok", "value": _hub_call(request, progress, cancel)}
    except DownloadCancelled as error:
        outcome = {"status": "cancelled", "message": str(error)}
    except CheckpointError as error:
        outcome = {"status": "refused", "message": str(error)}
    except BaseException as error:
        frames = traceback.extract_tb(error.__traceback__)
        outcome = {"status": "exception", "type": f"{type(error).__module__}.{type(error).__qualname__}",
                   "message": str(error)[:400],
                   "where": f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""}
    outcome["seconds"] = time.monotonic() - started
    if cancel_state["at"] is not None:
        outcome["latency"] = time.monotonic() - cancel_state["at"]
    Path(request["result"]).write_text(json.dumps(outcome))


def _hub_call(request: dict, progress: Callable, cancel: Callable) -> dict:
    if request["call"] == "resolve":
        from bertcore.models.hub import resolve_model

        resolved = resolve_model(request["repo_id"], revision=request["revision"] or "main")
        return {"folder": str(resolved.folder), "name": resolved.display_name}
    if request["call"] == "list":
        try:
            from bertcore.models.hub_listing import scan_cache
        except ImportError:  # before issue 34: the models only, broken repos left out
            from bertcore.models.hub_listing import list_cached_models

            return {"models": [[model.repo_id, str(model.folder)] for model in list_cached_models()], "broken": None}
        listing = scan_cache()
        return {"models": [[model.repo_id, str(model.folder)] for model in listing.models],
                "broken": [[entry.name, entry.reason] for entry in listing.broken], "problem": listing.problem}
    from bertcore.models.hub_download import download_model

    resolved = download_model(request["repo_id"], revision=request["revision"], progress=progress, cancel=cancel)
    return {"folder": str(resolved.folder)}


# ==== families 5 to 7 (issue 34): tokenizer files, corpora and the prepared cache, the Explain API =============
#
# A section of its own: everything below is named probe_*, tok_*, corpus_*, explain_* or Probe*, and main() reaches
# it through PROBE_FAMILIES. Each case runs one probe (a function of this module) in a forked child of a "probe
# server", a process that imported bertcore once (and, for explain, built two tiny models): an address-space
# limit (RLIMIT_AS), a timeout, and a child killed by a signal counted as a crash. A few corpus cases run bert-train
# itself (kill -9 during the preparation, a read-only cache). The children import bertcore from this script's own
# checkout (PYTHONPATH), so the script measures another checkout when copied into it (the "before" of a fix).
#
# A probe returns a digest, {"problem": None or what is wrong with a success}; a bertcore error (any class of
# bertcore.errors) is a refusal; anything else raised (a bare Exception, a TypeError, pyo3's PanicException, a
# MemoryError under the limit) is a traceback.

PROBE_TIMEOUT_S = 30.0
PROBE_MEMORY_BYTES = 3 * 1024**3
PROBE_TEXTS = ["hello world", "the cat sat on the mat.", "Don't stop-believing, 3.14!", "ＡＢ ﬁne Ⅰ", "中文 😀 ½"]


@dataclass
class ProbeCase:
    name: str
    expect: str
    probe: str = ""  # a function of this module, run in the probe server's child: probe(workdir, **params)
    params: dict = field(default_factory=dict)
    make: Callable[[Path, Path], None] | None = None  # (case folder, the family's bases): files for the probe
    timeout: float = PROBE_TIMEOUT_S
    memory: int = PROBE_MEMORY_BYTES
    scenario: Callable[[Path, Path], Outcome] | None = None  # instead of a probe: runs bert-train itself


def checkout_env() -> dict[str, str]:
    """The environment of every child of these families: bertcore from this script's checkout, one thread."""
    return dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
                TOKENIZERS_PARALLELISM="false")


def probe_server(family: str) -> None:
    """`--_probe-server FAMILY`: import what the family needs once, then run each requested probe in a fork."""
    import bertcore.errors  # imported once here, shared by every forked child

    if family == "explain":
        explain_fixture()
    elif family == "tokenizer":
        import bertcore.models.checkpoint
        import bertcore.tokenization.pretrained
    else:
        import bertcore.data.prepare  # noqa: F401 - imported once, shared by every forked child
    for line in sys.stdin:
        request = json.loads(line)
        _answer_in_fork(functools.partial(_probe_child, request), request["timeout"])


def _probe_child(request: dict) -> None:
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    resource.setrlimit(resource.RLIMIT_AS, (request["memory"], request["memory"]))
    import bertcore.errors as errors

    known = tuple(value for value in vars(errors).values() if isinstance(value, type)
                  and issubclass(value, BaseException) and value.__module__ == errors.__name__)
    try:
        digest = globals()[request["probe"]](Path(request["workdir"]), **request["params"]) or {}
        result = {"status": "done", "problem": digest.get("problem"), "detail": str(digest.get("detail", ""))[:300]}
    except known as error:
        result = {"status": "refused", "type": type(error).__name__, "message": str(error)[:600]}
    except BaseException as error:
        result = {"status": "exception", "type": f"{type(error).__module__}.{type(error).__qualname__}",
                  "message": str(error)[:400], "traceback": traceback.format_exc()[-3000:]}
    Path(request["result"]).write_text(json.dumps(result))


class ProbeServer:
    def __init__(self, family: str):
        self.process = subprocess.Popen([PYTHON, str(Path(__file__).resolve()), "--_probe-server", family],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=tempfile.gettempdir(), env=checkout_env())

    def probe(self, case: ProbeCase, workdir: Path) -> tuple[dict, dict]:
        result, log = workdir / "probe-result.json", workdir / "probe-log.txt"
        request = {"probe": case.probe, "params": case.params, "workdir": str(workdir), "result": str(result),
                   "log": str(log), "timeout": case.timeout, "memory": case.memory}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        outcome = json.loads(result.read_text()) if result.is_file() and result.stat().st_size else {}
        reply["log"] = log.read_text(errors="replace") if log.is_file() else ""
        return reply, outcome

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def judge_probe(case: ProbeCase, reply: dict, outcome: dict) -> Outcome:
    if reply["timeout"]:
        return Outcome("hang", f"no answer within {case.timeout:.0f} s")
    if not outcome:
        why = f"killed by signal {reply['signal']}" if reply["signal"] else f"exit code {reply['code']}"
        return Outcome("traceback", f"the process died ({why}): {last_line(reply['log'])}")
    if outcome["status"] == "exception":
        return Outcome("traceback", f"{outcome['type']}: {outcome['message'][:180]}")
    if outcome["status"] == "refused":
        message = f"{outcome['type']}: {outcome['message']}".replace("\n", " ")[:220]
        return Outcome("refused" if case.expect == "ok" else "clear", message)
    if outcome.get("problem"):
        return Outcome("silent", outcome["problem"])
    if case.expect == "fail":
        return Outcome("silent", f"succeeded although the input is wrong ({outcome.get('detail') or 'no detail'})")
    return Outcome("ok", outcome.get("detail") or "worked")


def run_probe_case(case: ProbeCase, family: str, bases: Path, root: Path, server: ProbeServer) -> Outcome:
    workdir = Path(tempfile.mkdtemp(dir=root, prefix=f"{family}-"))
    try:
        if case.make:
            case.make(workdir, bases)
        if case.scenario:
            return case.scenario(workdir, bases)
        return judge_probe(case, *server.probe(case, workdir))
    finally:
        unfreeze(workdir)


def _mutations(data: bytes, count: int, seed: str) -> list[tuple[str, bytes]]:
    """`count` deterministic damages of `data`: a bit or a byte changed, the file cut, bytes deleted, inserted or
    repeated, each with a short description."""
    damaged = []
    for number in range(count):
        rng = random.Random(f"{seed}-{number}")
        at = rng.randrange(len(data))
        kind = rng.randrange(6)
        if kind == 0:
            bit = rng.randrange(8)
            damaged.append((f"bit {bit} of byte {at} flipped", data[:at] + bytes([data[at] ^ (1 << bit)])
                            + data[at + 1:]))
        elif kind == 1:
            value = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
            damaged.append((f"byte {at} set to {value:#04x}", data[:at] + bytes([value]) + data[at + 1:]))
        elif kind == 2:
            damaged.append((f"cut at byte {at}", data[:at]))
        elif kind == 3:
            length = rng.randrange(1, 17)
            damaged.append((f"{length} bytes deleted at {at}", data[:at] + data[at + length:]))
        elif kind == 4:
            length = rng.randrange(1, 9)
            damaged.append((f"{length} random bytes inserted at {at}", data[:at] + rng.randbytes(length) + data[at:]))
        else:
            start, length = rng.randrange(len(data)), rng.randrange(1, 64)
            damaged.append((f"{length} bytes from {start} repeated at {at}",
                            data[:at] + data[start:start + length] + data[at:]))
    return damaged


# ---- family 5: tokenizer files ---------------------------------------------------------------------------------

def build_tokenizer_bases(root: Path) -> Path:
    """roberta (tokenizer.json + vocab.json + merges.txt + configs, as transformers saves it), roberta-files
    (vocab.json + merges.txt + tokenizer_config.json), bert (vocab.txt), spm-unigram and spm-bpe (a spiece.model
    of each kind, trained here, small normalisation table; control pieces for the four roles), roberta-403 (a
    RoBERTa checkpoint of 400 tokens in 403 rows, as transformers writes it)."""
    import io

    import sentencepiece
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # the tests' folder writers, from this checkout
    from tests.bertcore.test_tokenizer_families import save_roberta, save_roberta_files

    bases = root / "tokenizer-bases"
    bases.mkdir(parents=True)
    save_roberta(bases / "roberta", transformers)
    save_roberta_files(bases / "roberta-files", transformers)
    (bases / "bert").mkdir()
    shutil.copy(REPO / "assets" / "vocab.txt", bases / "bert" / "vocab.txt")
    lines = (REPO / "assets" / "corpus" / "tinyshakespeare.txt").read_text(encoding="utf-8").splitlines()[:300]
    rules = bases / "rules.tsv"
    rules.write_text("FF21\t41\nFF41\t61\nFB01\t66 69\nA0\t20\n2160\t49\n", encoding="utf-8")
    for model_type, vocab_size in (("unigram", 120), ("bpe", 420)):
        data = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=data, vocab_size=vocab_size, model_type=model_type,
            character_coverage=0.98, minloglevel=2, normalization_rule_tsv=str(rules), control_symbols=["<mask>"],
            pad_id=3, byte_fallback=model_type == "bpe")
        (bases / f"spm-{model_type}").mkdir()
        (bases / f"spm-{model_type}" / "spiece.model").write_bytes(data.getvalue())
    shutil.copytree(bases / "roberta", bases / "roberta-403")
    tokenizer = transformers.AutoTokenizer.from_pretrained(bases / "roberta")
    torch.manual_seed(0)
    config = transformers.RobertaConfig(vocab_size=403, hidden_size=24, num_hidden_layers=1, num_attention_heads=3,
                                        intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
                                        pad_token_id=tokenizer.pad_token_id)
    transformers.RobertaForMaskedLM(config).save_pretrained(bases / "roberta-403")
    return bases


def tok_copy(base: str, edit: Callable[[Path], None] | None = None) -> Callable[[Path, Path], None]:
    """The case folder's tokenizer folder `tok`: a copy of a base, then edited."""
    def make(workdir: Path, bases: Path) -> None:
        shutil.copytree(bases / base, workdir / "tok", symlinks=True)
        if edit:
            edit(workdir / "tok")
    return make


def tok_json_edit(name: str, change: Callable[[object], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / name
        values = json.loads(path.read_text(encoding="utf-8"))
        result = change(values)
        path.write_text(json.dumps(values if result is None else result), encoding="utf-8")
    return edit


def tok_bytes(name: str, data: bytes | Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / name
        path.write_bytes(data(path.read_bytes()) if callable(data) else data)
    return edit


def _spm_field(number: int, value) -> bytes:
    """One protobuf field of a spiece.model (tests/sentencepiece_files.py)."""
    return _tests_module("sentencepiece_files").proto_field(number, value)


def tok_hand_made_spm(*extra_pieces: bytes, charsmap: bytes = b"", model_type: int = 1) -> bytes:
    """A spiece.model written field by field: <unk>, the four role tokens, "▁", "a", then `extra_pieces`
    (tests/sentencepiece_files.py)."""
    return _tests_module("sentencepiece_files").hand_made_spm(*extra_pieces, charsmap=charsmap, model_type=model_type)


def tok_spm_file(data: bytes) -> Callable[[Path, Path], None]:
    def make(workdir: Path, bases: Path) -> None:
        (workdir / "tok").mkdir()
        (workdir / "tok" / "spiece.model").write_bytes(data)
    return make


def probe_tokenizer(workdir: Path, compare_spm: bool = False) -> dict:
    """tokenizer_from_folder(tok), then what no sound tokenizer does: an id outside its vocabulary, two tokens of
    one id, a role token that is not itself, a vocabulary sized far past its tokens; a SentencePiece model read
    otherwise than sentencepiece reads it, or read although sentencepiece refuses it."""
    from bertcore.tokenization.pretrained import tokenizer_from_folder

    folder = workdir / "tok"
    tokenizer = tokenizer_from_folder(folder)
    size = tokenizer.vocab_size
    backend = tokenizer._tokenizer
    vocab = backend.get_vocab(with_added_tokens=True)
    if size > 4 * len(vocab) + 1000:
        return {"problem": f"vocab_size {size:,} for {len(vocab):,} tokens: a model would be sized by a stray id"}
    if len(set(vocab.values())) != len(vocab):
        shared = sorted(vocab, key=vocab.get)
        twins = next((a, b) for a, b in itertools.pairwise(shared) if vocab[a] == vocab[b])
        return {"problem": f"{twins[0]!r} and {twins[1]!r} share the id {vocab[twins[0]]}"}
    for role in ("cls", "sep", "pad", "mask", "unk"):
        token, token_id = getattr(tokenizer, f"{role}_token"), getattr(tokenizer, f"{role}_token_id")
        if token is not None and token_id is not None and vocab.get(token) != token_id:
            return {"problem": f"the {role} token {token!r} has the id {token_id}, which is "
                               f"{tokenizer.id_to_token(token_id)!r}"}
    for text in PROBE_TEXTS:
        ids = tokenizer.encode(text).input_ids
        if any(not 0 <= i < size for i in ids):
            return {"problem": f"an id outside 0..{size - 1} for {text!r}: {ids}"}
    if compare_spm:
        import sentencepiece

        data = next(folder.glob("*.model")).read_bytes()
        try:
            reference = sentencepiece.SentencePieceProcessor(model_proto=data)
        except Exception as error:
            return {"problem": f"accepted a model sentencepiece refuses ({str(error)[:120]})"}
        for text in PROBE_TEXTS[:4]:
            if tokenizer.encode_ids([text])[0] != reference.encode(text):
                return {"problem": f"encodes {text!r} otherwise than sentencepiece"}
    return {"detail": f"{type(tokenizer).__name__} of {size} ids"}


def probe_checkpoint(workdir: Path) -> dict:
    """load_pretrained(tok), then save_pretrained and load again: a shorter explicit vocabulary round-trips."""
    import bertcore

    model, tokenizer = bertcore.load_pretrained(workdir / "tok")
    saved = bertcore.save_pretrained(model, tokenizer, workdir / "saved")
    again, again_tokenizer = bertcore.load_pretrained(saved)
    if again_tokenizer.vocab_size != tokenizer.vocab_size or again.config.vocab_size != model.config.vocab_size:
        return {"problem": "saved and loaded again with other sizes"}
    return {"detail": f"{tokenizer.vocab_size} tokens, {model.config.vocab_size} rows"}


def tokenizer_cases() -> list[ProbeCase]:
    probe = "probe_tokenizer"

    def vocab_json(change) -> Callable[[Path, Path], None]:
        return tok_copy("roberta-files", tok_json_edit("vocab.json", change))

    def without_mask(folder: Path) -> None:
        tok_json_edit("vocab.json", lambda vocab: vocab.pop("<mask>"))(folder)
        tok_json_edit("tokenizer_config.json", lambda config: config.update(mask_token="<mask>"))(folder)

    def merges(edit) -> Callable[[Path, Path], None]:
        def change(folder: Path) -> None:
            lines = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
            (folder / "merges.txt").write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
        return tok_copy("roberta-files", change)

    def tokenizer_json(change) -> Callable[[Path, Path], None]:
        return tok_copy("roberta", tok_json_edit("tokenizer.json", change))

    def vocab_txt(edit) -> Callable[[Path, Path], None]:
        def change(folder: Path) -> None:
            lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
            (folder / "vocab.txt").write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
        return tok_copy("bert", change)

    cases = [
        ProbeCase("roberta tokenizer.json as saved", "ok", probe, make=tok_copy("roberta")),
        ProbeCase("roberta vocab.json + merges.txt as saved", "ok", probe, make=tok_copy("roberta-files")),
        ProbeCase("vocab.txt as shipped", "ok", probe, make=tok_copy("bert")),
        ProbeCase("spiece.model (unigram) as trained", "ok", probe, {"compare_spm": True},
                  make=tok_copy("spm-unigram")),
        ProbeCase("spiece.model (bpe) as trained", "ok", probe, {"compare_spm": True}, make=tok_copy("spm-bpe")),
        ProbeCase("a RoBERTa checkpoint of 400 tokens in 403 rows loads and round-trips", "ok", "probe_checkpoint",
                  make=tok_copy("roberta-403")),
        # vocab.json
        ProbeCase("vocab.json: one id of 3,000,000", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": 3_000_000}))),
        ProbeCase("vocab.json: one id of 10**9", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": 10**9}))),
        ProbeCase("vocab.json without <mask>, tokenizer_config.json naming it", "fail", probe,
                  make=tok_copy("roberta-files", without_mask)),
        ProbeCase("vocab.json: two tokens of one id", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": vocab["<pad>"]}))),
        ProbeCase("vocab.json: a negative id", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": -1}))),
        ProbeCase("vocab.json: an id that is text", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": "7"}))),
        ProbeCase("vocab.json: an id that is a float", "fail", probe, make=vocab_json(
            lambda vocab: vocab.update({"Ġthe": 7.5}))),
        ProbeCase("vocab.json: a list, not a map", "fail", probe, make=vocab_json(lambda vocab: list(vocab))),
        ProbeCase("vocab.json: empty map", "fail", probe, make=vocab_json(lambda vocab: {})),
        ProbeCase("vocab.json: deep JSON", "fail", probe, make=tok_copy("roberta-files", tok_bytes(
            "vocab.json", deep_json().encode()))),
        ProbeCase("vocab.json: not UTF-8", "fail", probe, make=tok_copy("roberta-files", tok_bytes(
            "vocab.json", b'{"\xff\xfe": 0}'))),
        ProbeCase("vocab.json: a FIFO", "fail", probe, make=tok_copy("roberta-files", lambda f: make_fifo(
            f / "vocab.json"))),
        ProbeCase("vocab.json: a link to /dev/zero", "fail", probe, make=tok_copy("roberta-files", lambda f: (
            replace_with_symlink(f / "vocab.json", "/dev/zero")))),
        # merges.txt
        ProbeCase("merges.txt: a merge of unknown tokens", "fail", probe, make=merges(
            lambda lines: [*lines[:3], "Ġzzq Ġqqz", *lines[3:]])),
        ProbeCase("merges.txt: three pieces on a line", "fail", probe, make=merges(
            lambda lines: [*lines[:3], "a b c", *lines[3:]])),
        ProbeCase("merges.txt: a merge whose join is no token", "fail", probe, make=merges(
            lambda lines: [*lines[:3], "Ġ Ġ", *lines[3:]])),
        ProbeCase("merges.txt: empty", "any", probe, make=merges(lambda lines: [])),
        ProbeCase("merges.txt: not UTF-8", "fail", probe, make=tok_copy("roberta-files", tok_bytes(
            "merges.txt", b"#version: 0.2\n\xff \xfe\n"))),
        # tokenizer.json
        ProbeCase("tokenizer.json: one id of 3,000,000", "fail", probe, make=tokenizer_json(
            lambda values: values["model"]["vocab"].update({"Ġthe": 3_000_000}))),
        ProbeCase("tokenizer.json: two tokens of one id", "fail", probe, make=tokenizer_json(
            lambda values: values["model"]["vocab"].update({"Ġthe": values["model"]["vocab"]["<pad>"]}))),
        ProbeCase("tokenizer.json: an added token on a real token's id", "fail", probe, make=tokenizer_json(
            lambda values: values["added_tokens"].append({**values["added_tokens"][-1], "id": 300,
                                                          "content": "<extra>"}))),
        ProbeCase("tokenizer.json: a merge of unknown tokens", "fail", probe, make=tokenizer_json(
            lambda values: values["model"]["merges"].insert(0, ["Ġzzq", "Ġqqz"]))),
        ProbeCase("tokenizer.json: truncated JSON", "fail", probe, make=tok_copy("roberta", tok_bytes(
            "tokenizer.json", lambda data: data[: len(data) // 2]))),
        ProbeCase("tokenizer.json: a model of an unknown type", "fail", probe, make=tokenizer_json(
            lambda values: values["model"].update(type="Mystery"))),
        ProbeCase("tokenizer_config.json: an added token at another id than the files", "fail", probe,
                  make=tok_copy("roberta-files", tok_json_edit("tokenizer_config.json", lambda config: config.update(
                      added_tokens_decoder={"7": {"content": "<mask>", "special": True}})))),
        # vocab.txt
        ProbeCase("vocab.txt: duplicate token", "fail", probe, make=vocab_txt(lambda lines: [*lines, lines[500]])),
        ProbeCase("vocab.txt: no [MASK]", "fail", probe, make=vocab_txt(
            lambda lines: [line for line in lines if line != "[MASK]"])),
        ProbeCase("vocab.txt: two blank lines", "fail", probe, make=vocab_txt(
            lambda lines: [*lines[:10], "", "", *lines[10:]])),
        ProbeCase("vocab.txt: UTF-16", "fail", probe, make=tok_copy("bert", tok_bytes(
            "vocab.txt", lambda data: data.decode("utf-8").encode("utf-16")))),
        ProbeCase("vocab.txt: a line of 10 MB", "any", probe, make=vocab_txt(lambda lines: [*lines, "x" * 10_000_000])),
        # SentencePiece: the audit's cases
        ProbeCase("spiece.model: one piece of 300,000 characters (unigram)", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"x" * 300_000) + _spm_field(2, -3.0)))),
        ProbeCase("spiece.model: one piece of 300,000 characters (bpe)", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"x" * 300_000) + _spm_field(2, -3.0), model_type=2)), timeout=60),
        ProbeCase("spiece.model: a normalisation table of four zero bytes", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(charsmap=b"\0\0\0\0"))),
        ProbeCase("spiece.model: 814 bytes whose table claims a 4 GB trie", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(charsmap=(0xFFFFFFF0).to_bytes(4, "little") + b"\0" * 700)), memory=1 << 30),
        ProbeCase("spiece.model: a NaN score", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"b") + _spm_field(2, float("nan"))))),
        ProbeCase("spiece.model: a repeated piece", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"a") + _spm_field(2, -1.0)))),
        ProbeCase("spiece.model: an empty piece", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"") + _spm_field(2, -1.0)))),
        ProbeCase("spiece.model: two unknown pieces", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"<unk2>") + _spm_field(3, 2)))),
        ProbeCase("spiece.model: a byte piece without byte fallback", "fail", probe, make=tok_spm_file(
            tok_hand_made_spm(_spm_field(1, b"<0x41>") + _spm_field(3, 6)))),
        ProbeCase("spiece.model: empty file", "fail", probe, make=tok_spm_file(b"")),
        ProbeCase("spiece.model: a FIFO", "fail", probe, make=lambda w, b: ((w / "tok").mkdir(),
                                                                           make_fifo(w / "tok" / "spiece.model"))),
    ]
    return cases


def tokenizer_mutation_cases(bases: Path) -> list[ProbeCase]:
    """Deterministic damages of each kind of tokenizer file: each refused, or a sound tokenizer (a SentencePiece
    model encoding as sentencepiece does)."""
    cases = []
    for base, name, count in (("spm-unigram", "spiece.model", 150), ("spm-bpe", "spiece.model", 150),
                              ("roberta", "tokenizer.json", 40), ("roberta-files", "vocab.json", 40),
                              ("roberta-files", "merges.txt", 30), ("bert", "vocab.txt", 30)):
        data = (bases / base / name).read_bytes()
        for description, damaged in _mutations(data, count, f"{base}/{name}"):
            cases.append(ProbeCase(f"{base}/{name}: {description}", "any", "probe_tokenizer",
                                   {"compare_spm": name == "spiece.model"},
                                   make=tok_copy(base, tok_bytes(name, damaged))))
    return cases


# ---- family 6: corpora and the prepared-corpus cache ------------------------------------------------------------

def build_corpus_bases(root: Path) -> Path:
    """A small text corpus in every format, and a 64 KB .txt.gz of 64 MB of zeros (made once)."""
    import gzip

    bases = root / "corpus-bases"
    bases.mkdir(parents=True)
    text = (REPO / "assets" / "corpus" / "tinyshakespeare.txt").read_text(encoding="utf-8")[:60_000]
    (bases / "corpus.txt").write_text(text, encoding="utf-8")
    documents = [block for block in text.split("\n\n") if block.strip()]
    with gzip.open(bases / "corpus.txt.gz", "wt", encoding="utf-8") as compressed:
        compressed.write(text)
    lines = "".join(json.dumps({"id": number, "text": block}) + "\n" for number, block in enumerate(documents))
    (bases / "corpus.jsonl").write_text(lines, encoding="utf-8")
    with gzip.open(bases / "corpus.jsonl.gz", "wt", encoding="utf-8") as compressed:
        compressed.write(lines)
    with contextlib.suppress(ImportError):
        import pyarrow
        import pyarrow.parquet

        table = pyarrow.table({"text": documents})
        pyarrow.parquet.write_table(table, bases / "corpus.parquet")
        with pyarrow.OSFile(str(bases / "corpus.arrow"), "wb") as sink, pyarrow.ipc.new_file(sink,
                                                                                              table.schema) as writer:
            writer.write_table(table)
    with gzip.open(bases / "zeros.txt.gz", "wb", compresslevel=9) as compressed:
        block = b"0" * (1 << 20)
        for _ in range(64):
            compressed.write(block)
    return bases


def corpus_copy(name: str, as_name: str | None = None) -> Callable[[Path, Path], None]:
    def make(workdir: Path, bases: Path) -> None:
        shutil.copy(bases / name, workdir / (as_name or name))
    return make


def corpus_bytes(name: str, data: bytes | Callable[[], bytes]) -> Callable[[Path, Path], None]:
    def make(workdir: Path, bases: Path) -> None:
        (workdir / name).write_bytes(data() if callable(data) else data)
    return make


def corpus_long_line(name: str, size: int) -> Callable[[Path, Path], None]:
    """One line of `size` bytes of words (a .txt line, or a .jsonl record's text)."""
    def make(workdir: Path, bases: Path) -> None:
        words = (REPO / "assets" / "corpus" / "tinyshakespeare.txt").read_text(encoding="utf-8").split()
        line = " ".join(words * (size // (len(" ".join(words)) + 1) + 1))[:size]
        with open(workdir / name, "w", encoding="utf-8") as file:
            file.write(json.dumps({"id": 1, "text": line}) + "\n" if name.endswith(".jsonl") else line + "\n")
    return make


def _corpus_tokenizer():
    from bertcore.tokenization.wordpiece import BertTokenizer

    return BertTokenizer.from_vocab_file(REPO / "assets" / "vocab.txt")


def probe_prepare(workdir: Path, corpus: str, text_field: str = "text", documents: int | None = None) -> dict:
    """prepare_corpus of workdir/corpus into workdir/cache; `documents`: how many the corpus holds."""
    import numpy as np

    from bertcore.data.prepare import prepare_corpus
    from bertcore.data.sources import CorpusSource

    tokenizer = _corpus_tokenizer()
    prepared = prepare_corpus(CorpusSource.open(workdir / corpus, text_field=text_field), tokenizer,
                              cache_dir=workdir / "cache")
    found = prepared.meta["num_documents"]
    if documents is not None and found != documents:
        return {"problem": f"{found} documents, the corpus holds {documents}"}
    largest = int(np.asarray(prepared.documents.tokens).max()) if prepared.num_tokens else 0
    if largest >= tokenizer.vocab_size:
        return {"problem": f"a token id {largest} past the vocabulary's {tokenizer.vocab_size}"}
    return {"detail": f"{found} documents, {prepared.num_tokens} tokens"}


def _prepare_twice(workdir: Path, damage: Callable[[Path], None]) -> dict:
    """Prepare, damage the preparation, prepare again: the second must give the first's tokens (prepared again,
    or refused), never the damaged ones."""
    import numpy as np

    from bertcore.data.prepare import prepare_corpus
    from bertcore.data.sources import CorpusSource

    def arrays(prepared) -> list:
        documents = prepared.documents
        return [np.array(documents.tokens), np.array(documents.sentence_offsets), np.array(documents.document_offsets)]

    tokenizer = _corpus_tokenizer()
    source = CorpusSource.open(workdir / "corpus.txt")
    first = prepare_corpus(source, tokenizer, cache_dir=workdir / "cache")
    original, folder = arrays(first), first.folder
    del first
    damage(folder)
    again = prepare_corpus(source, tokenizer, cache_dir=workdir / "cache")
    if any(a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(arrays(again), original, strict=True)):
        return {"problem": "the run's tokens or documents are not the corpus's: it read the damaged preparation"}
    notes = list(getattr(again, "notes", ()))
    return {"problem": None if notes else "prepared again without saying so",
            "detail": "; ".join(notes)[:200] or "the same tokens"}


def probe_cache_damage(workdir: Path, damage: str) -> dict:
    import numpy as np

    def tamper(folder: Path) -> None:
        tokens = np.fromfile(folder / "tokens.bin", dtype=np.uint16)
        tokens[::7] = 7999
        tokens.tofile(folder / "tokens.bin")

    damages = {
        "every 7th token set to 7999": tamper,
        "meta.json deleted": lambda folder: (folder / "meta.json").unlink(),
        "meta.json a FIFO": lambda folder: ((folder / "meta.json").unlink(), os.mkfifo(folder / "meta.json")),
        "meta.json garbage": lambda folder: (folder / "meta.json").write_bytes(b"\x00\xff" * 50),
        "meta.json deep JSON": lambda folder: (folder / "meta.json").write_text(deep_json()),
        "tokens.bin cut": lambda folder: os.truncate(folder / "tokens.bin", 100),
        "tokens.bin a link to /dev/zero": lambda folder: replace_with_symlink(folder / "tokens.bin", "/dev/zero"),
        "tokens.bin a FIFO": lambda folder: make_fifo(folder / "tokens.bin"),
        "document_offsets.bin one offset changed": lambda folder: _poke(folder / "document_offsets.bin", 8),
        "the folder replaced by a FIFO": lambda folder: (shutil.rmtree(folder), os.mkfifo(folder)),
        "the folder replaced by a file": lambda folder: (shutil.rmtree(folder), folder.write_text("x")),
    }
    return _prepare_twice(workdir, damages[damage])


def _poke(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def probe_cache_edits(workdir: Path, edits: int = 5) -> dict:
    """`edits` edits of one corpus, each prepared: how many preparations the cache keeps of it."""
    from bertcore.data.prepare import prepare_corpus
    from bertcore.data.sources import CorpusSource

    tokenizer = _corpus_tokenizer()
    path = workdir / "corpus.txt"
    text = path.read_text(encoding="utf-8")
    for number in range(edits):
        path.write_text(text + f"\n\nEdit number {number}.\n", encoding="utf-8")
        stamp = time.time() + number
        os.utime(path, (stamp, stamp))
        prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=workdir / "cache")
    kept = [entry for entry in (workdir / "cache").iterdir() if not entry.name.startswith(".")]
    if len(kept) > 2:
        return {"problem": f"{edits} edits of one corpus left {len(kept)} prepared folders"}
    return {"detail": f"{len(kept)} folders kept"}


def probe_cache_dir(workdir: Path, kind: str) -> dict:
    """--data-cache naming something that is not a writable folder."""
    from bertcore.data.prepare import prepare_corpus
    from bertcore.data.sources import CorpusSource

    cache = workdir / "cache"
    if kind == "a file":
        cache.write_text("x")
    elif kind == "a FIFO":
        os.mkfifo(cache)
    elif kind == "a link to /dev/zero":
        cache.symlink_to("/dev/zero")
    prepared = prepare_corpus(CorpusSource.open(workdir / "corpus.txt"), _corpus_tokenizer(), cache_dir=cache)
    return {"detail": f"prepared in {prepared.folder}"}


def corpus_read_only(with_preparation: bool) -> Callable[[Path, Path], Outcome]:
    """bert-train with --data-cache a read-only folder (chattr +i): refused naming it, or trained on the
    preparation already there."""
    def scenario(workdir: Path, bases: Path) -> Outcome:
        cache = workdir / "cache"
        cache.mkdir()
        args = _corpus_train_args(workdir, cache, "run0")
        if with_preparation:
            proc = run_corpus_cli(args, workdir)
            if proc.rc != 0:
                return Outcome("traceback", f"the first run failed: {error_line(proc.stderr)}")
        subprocess.run(["chattr", "+i", str(cache)], capture_output=True)
        try:
            proc = run_corpus_cli(_corpus_train_args(workdir, cache, "run1"), workdir)
        finally:
            unfreeze(cache)
        return judge("ok" if with_preparation else "fail", proc)
    return scenario


def _corpus_train_args(workdir: Path, cache: Path, out: str, corpus: Path | None = None) -> list[str]:
    return ["--corpus", corpus or workdir / "corpus.txt", "--vocab", REPO / "assets" / "vocab.txt", "--preset", "tiny",
            "--hidden-size", "32", "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "1",
            "--batch-size", "4", "--seq-len", "32", "--eval-batches", "1", "--steps", "1", "--no-progress",
            "--device", "cpu", "--num-threads", "1", "--data-cache", cache, "--out", workdir / out]


def run_corpus_cli(args: list, workdir: Path, timeout: float = CLI_TIMEOUT_S * 3) -> Proc:
    process = subprocess.Popen([PYTHON, "-m", "bertcore.cli.train", *map(str, args)], cwd=workdir,
                               env=checkout_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    return finish(process, timeout)


def corpus_kill_during_preparation(workdir: Path, bases: Path) -> Outcome:
    """kill -9 while the corpus is being prepared (a .partial folder in the cache), then run again: the second run
    trains on a whole preparation."""
    big = workdir / "big.txt"
    text = (bases / "corpus.txt").read_text(encoding="utf-8")
    with open(big, "w", encoding="utf-8") as file:
        for number in range(400):
            file.write(text.replace("the", f"the{number % 7}") + "\n\n")
    cache = workdir / "cache"
    process = subprocess.Popen([PYTHON, "-m", "bertcore.cli.train",
                                *map(str, _corpus_train_args(workdir, cache, "run0", big))],
                               cwd=workdir, env=checkout_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if cache.is_dir() and any(entry.name.startswith(".") and ".partial-" in entry.name
                                  for entry in cache.iterdir()):
            time.sleep(0.5)
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    proc = run_corpus_cli(_corpus_train_args(workdir, cache, "run1", big), workdir, timeout=300)
    return judge("ok", proc)


def corpus_cases() -> list[ProbeCase]:
    probe = "probe_prepare"
    cases = [
        ProbeCase("corpus.txt as written", "ok", probe, {"corpus": "corpus.txt"}, make=corpus_copy("corpus.txt")),
        ProbeCase("corpus.txt.gz", "ok", probe, {"corpus": "corpus.txt.gz"}, make=corpus_copy("corpus.txt.gz")),
        ProbeCase("corpus.jsonl", "ok", probe, {"corpus": "corpus.jsonl"}, make=corpus_copy("corpus.jsonl")),
        ProbeCase("corpus.jsonl.gz", "ok", probe, {"corpus": "corpus.jsonl.gz"}, make=corpus_copy("corpus.jsonl.gz")),
        ProbeCase("corpus.parquet", "ok", probe, {"corpus": "corpus.parquet"}, make=corpus_copy("corpus.parquet")),
        ProbeCase("corpus.arrow", "ok", probe, {"corpus": "corpus.arrow"}, make=corpus_copy("corpus.arrow")),
        ProbeCase(".txt.gz cut in half", "fail", probe, {"corpus": "c.txt.gz"}, make=lambda w, b: (w / "c.txt.gz")
                  .write_bytes((b / "corpus.txt.gz").read_bytes()[:2000])),
        ProbeCase(".txt.gz that is not gzip", "fail", probe, {"corpus": "c.txt.gz"},
                  make=corpus_bytes("c.txt.gz", b"plain text, not gzip\n" * 50)),
        ProbeCase(".txt not UTF-8", "fail", probe, {"corpus": "c.txt"},
                  make=corpus_bytes("c.txt", "déjà vu\n".encode("latin-1") * 100)),
        ProbeCase(".txt empty", "fail", probe, {"corpus": "c.txt"}, make=corpus_bytes("c.txt", b"")),
        ProbeCase(".txt of NUL bytes", "any", probe, {"corpus": "c.txt"}, make=corpus_bytes("c.txt", b"\0" * 10_000)),
        ProbeCase(".jsonl with a line that is not JSON", "fail", probe, {"corpus": "c.jsonl"},
                  make=corpus_bytes("c.jsonl", b'{"text": "a b c."}\n{"text": \n')),
        ProbeCase(".jsonl without the text field", "fail", probe, {"corpus": "c.jsonl"},
                  make=corpus_bytes("c.jsonl", b'{"body": "a b c."}\n')),
        ProbeCase(".jsonl with a text that is a number", "fail", probe, {"corpus": "c.jsonl"},
                  make=corpus_bytes("c.jsonl", b'{"text": 12}\n')),
        ProbeCase(".jsonl with deep JSON", "fail", probe, {"corpus": "c.jsonl"},
                  make=corpus_bytes("c.jsonl", deep_json().encode() + b"\n")),
        ProbeCase(".parquet of garbage", "fail", probe, {"corpus": "c.parquet"},
                  make=corpus_bytes("c.parquet", b"PAR1" + bytes(range(256)) * 20)),
        ProbeCase(".arrow of garbage", "fail", probe, {"corpus": "c.arrow"},
                  make=corpus_bytes("c.arrow", b"ARROW1" + bytes(range(256)) * 20)),
        ProbeCase("the corpus a FIFO", "fail", probe, {"corpus": "c.txt"}, make=lambda w, b: os.mkfifo(w / "c.txt")),
        ProbeCase("the corpus a link to /dev/zero", "fail", probe, {"corpus": "c.txt"},
                  make=lambda w, b: (w / "c.txt").symlink_to("/dev/zero")),
        # one long line, under a 1 GB address-space limit (a preparation holds ~130 MB whatever the line)
        ProbeCase("a .txt of one 64 MB line", "ok", probe, {"corpus": "long.txt"},
                  make=corpus_long_line("long.txt", 64 << 20), memory=1 << 30, timeout=240),
        ProbeCase("a .jsonl of one 160 MB record", "ok", probe, {"corpus": "long.jsonl"},
                  make=corpus_long_line("long.jsonl", 160 << 20), memory=1 << 30, timeout=480),
        # (1 GB of zeros, the audit's, prepares in the time 1 GB of text does: ~15 min on a busy 2-core machine, the
        # tokenizer's ~1.1 MB/s; 64 MB is the same bomb, 1000:1, in a minute)
        ProbeCase("a 64 KB .txt.gz of 64 MB of zeros", "ok", probe, {"corpus": "zeros.txt.gz"},
                  make=corpus_copy("zeros.txt.gz"), memory=1 << 30, timeout=240),
        # the prepared cache
        *(ProbeCase(f"prepared cache: {damage}, then prepared again", "ok", "probe_cache_damage", {"damage": damage},
                    make=corpus_copy("corpus.txt"))
          for damage in ("every 7th token set to 7999", "meta.json deleted", "meta.json a FIFO", "meta.json garbage",
                         "meta.json deep JSON", "tokens.bin cut", "tokens.bin a link to /dev/zero", "tokens.bin a FIFO",
                         "document_offsets.bin one offset changed", "the folder replaced by a FIFO",
                         "the folder replaced by a file")),
        ProbeCase("prepared cache: 5 edits of one corpus", "ok", "probe_cache_edits", make=corpus_copy("corpus.txt")),
        *(ProbeCase(f"--data-cache {kind}", "fail", "probe_cache_dir", {"kind": kind}, make=corpus_copy("corpus.txt"))
          for kind in ("a file", "a FIFO", "a link to /dev/zero")),
        ProbeCase("bert-train with a read-only cache (chattr +i), nothing prepared", "fail",
                  make=corpus_copy("corpus.txt"), scenario=corpus_read_only(False)),
        ProbeCase("bert-train with a read-only cache (chattr +i), the corpus prepared", "ok",
                  make=corpus_copy("corpus.txt"), scenario=corpus_read_only(True)),
        ProbeCase("bert-train killed (kill -9) while preparing, then run again", "ok",
                  make=corpus_copy("corpus.txt"), scenario=corpus_kill_during_preparation),
    ]
    return cases


# ---- family 7: the Explain API ---------------------------------------------------------------------------------

_EXPLAIN: dict = {}


def explain_fixture() -> dict:
    """A tiny masked LM and a tiny classifier over the shipped vocabulary, built once in the probe server."""
    if not _EXPLAIN:
        import torch

        from bertcore.models.bert import BertForMaskedLM
        from bertcore.models.config import BertConfig
        from bertcore.models.task_heads import BertForSequenceClassification
        from bertcore.tokenization.wordpiece import BertTokenizer

        tokenizer = BertTokenizer.from_vocab_file(REPO / "assets" / "vocab.txt")
        sizes = dict(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                     intermediate_size=37, max_position_embeddings=64)
        torch.manual_seed(0)
        _EXPLAIN.update(tokenizer=tokenizer, mlm=BertForMaskedLM(BertConfig(**sizes)).eval(),
                        classifier=BertForSequenceClassification(BertConfig(**sizes, num_labels=3)).eval())
    return _EXPLAIN


def probe_explain(workdir: Path, call: str = "attribute", model: str = "mlm", text: str = "the king is dead",
                  text_b: str | None = None, target=("mlm", 2, None), weights: str | None = None, **options) -> dict:
    """One call of the Explain API on a tiny model; a success whose numbers are NaN (or that says nothing where
    it should) is silent."""
    import dataclasses

    import numpy as np
    import torch

    from bertcore.explain.attribution import attribute
    from bertcore.explain.faithfulness import faithfulness
    from bertcore.explain.mixing import context_mixing
    from bertcore.explain.patching import activation_patching

    fixture = explain_fixture()
    tokenizer, network = fixture["tokenizer"], fixture[model]
    if weights:
        with torch.no_grad():
            weight = network.get_parameter("bert.encoder.layer.0.attention.self.query.weight")
            weight[1, 2] = {"nan": float("nan"), "inf": float("inf"), "huge": 3e38}[weights]
            if weights == "huge":
                for parameter in network.parameters():
                    parameter.fill_(3e38)
    encoding = tokenizer.encode(text, text_b) if text is not None else None
    if options.pop("empty_encoding", False):
        encoding = dataclasses.replace(encoding, **{name: [] for name in (
            "tokens", "input_ids", "segment_ids", "position_ids", "attention_mask", "special_tokens_mask",
            "sequence_ids", "offsets")})
    if target is not None and target[0] == "mlm" and target[2] is None:
        target = ("mlm", target[1], tokenizer.token_to_id("the"))
    target = tuple(target) if isinstance(target, list) else target
    if call == "attribute":
        result = attribute(network, tokenizer, encoding, target, **options)
        values = np.asarray(result.scores, dtype=np.float64)
    elif call == "mixing":
        result = context_mixing(network, tokenizer, encoding, options.pop("method", "alti"))
        values = np.asarray(result.rollout, dtype=np.float64)
    elif call == "patching":
        corrupted = tokenizer.encode(options.pop("corrupted_text"), text_b)
        result = activation_patching(network, tokenizer, encoding, corrupted, target, **options)
        values = np.asarray(result.scores, dtype=np.float64)
        if result.note:
            return {"detail": result.note[:150]}
    else:
        scores = options.pop("scores", None)
        result = faithfulness(network, tokenizer, encoding, target,
                              np.arange(len(encoding), dtype=np.float64) if scores is None else scores, **options)
        values = np.concatenate([result.deletion, result.insertion, [result.full_value]]).astype(np.float64)
    if not np.isfinite(values).all():
        return {"problem": f"{int((~np.isfinite(values)).sum())} of {values.size} numbers are NaN or infinite, "
                           "with no word of why"}
    return {"detail": f"{call} of {len(encoding)} positions"}


def explain_cases() -> list[ProbeCase]:
    probe = "probe_explain"
    ig = {"call": "attribute", "method": "integrated_gradients"}
    cases = [
        ProbeCase("attribute: integrated gradients, 16 steps", "ok", probe, {**ig, "steps": 16}),
        ProbeCase("attribute: steps 2048 with a tolerance", "ok", probe, {**ig, "steps": 2048, "tolerance": 0.01}),
        ProbeCase("attribute: steps 20,000", "fail", probe, {**ig, "steps": 20_000}, timeout=60),
        ProbeCase("attribute: steps 10**7", "fail", probe, {**ig, "steps": 10**7}, timeout=60),
        ProbeCase("attribute: steps 0", "fail", probe, {**ig, "steps": 0}),
        ProbeCase("attribute: steps -5", "fail", probe, {**ig, "steps": -5}),
        ProbeCase("attribute: steps 2.5", "fail", probe, {**ig, "steps": 2.5}),
        ProbeCase("attribute: steps true", "fail", probe, {**ig, "steps": True}),
        ProbeCase("attribute: steps as text", "fail", probe, {**ig, "steps": "64"}),
        ProbeCase("attribute: tolerance 0", "fail", probe, {**ig, "tolerance": 0}),
        ProbeCase("attribute: tolerance 1.5", "fail", probe, {**ig, "tolerance": 1.5}),
        ProbeCase("attribute: tolerance NaN", "fail", probe, {**ig, "tolerance": float("nan")}),
        ProbeCase("attribute: an unknown method", "fail", probe, {"call": "attribute", "method": "lime"}),
        ProbeCase("attribute: target position past the input", "fail", probe, {**ig, "target": ("mlm", 99, None)}),
        ProbeCase("attribute: target position -1", "fail", probe, {**ig, "target": ("mlm", -1, None)}),
        ProbeCase("attribute: target token id past the vocabulary", "fail", probe,
                  {**ig, "target": ("mlm", 2, 10**6)}),
        ProbeCase("attribute: target token id -3", "fail", probe, {**ig, "target": ("mlm", 2, -3)}),
        ProbeCase("attribute: an unknown target kind", "fail", probe, {**ig, "target": ("vibes", 1)}),
        ProbeCase("attribute: an NSP target on a masked LM", "fail", probe, {**ig, "target": ("nsp", 0)}),
        ProbeCase("attribute: a target with too many values", "fail", probe, {**ig, "target": ("mlm", 2, 5, 7)}),
        ProbeCase("attribute: a target that is text", "fail", probe, {**ig, "target": "mlm 2 5"}),
        ProbeCase("attribute: a target that is None", "fail", probe, {**ig, "target": None}),
        ProbeCase("attribute: a class target past the labels", "fail", probe,
                  {**ig, "model": "classifier", "target": ("class", 7)}),
        ProbeCase("attribute: a class target on the classifier", "ok", probe,
                  {**ig, "model": "classifier", "target": ("class", 1), "steps": 8}),
        *(ProbeCase(f"attribute ({method}): NaN weights", "fail", probe,
                    {"call": "attribute", "method": method, "weights": "nan", "steps": 8})
          for method in ("integrated_gradients", "gradient_x_input", "gradient_norm", "grad_attention_rollout")),
        ProbeCase("attribute: infinite weights", "fail", probe, {**ig, "weights": "inf", "steps": 8}),
        ProbeCase("attribute: weights of 3e38 (overflow)", "fail", probe, {**ig, "weights": "huge", "steps": 8}),
        *(ProbeCase(f"context mixing ({method}): NaN weights", "fail", probe,
                    {"call": "mixing", "method": method, "weights": "nan", "target": None})
          for method in ("attention", "value_norm", "globenc", "alti")),
        ProbeCase("context mixing: an unknown method", "fail", probe, {"call": "mixing", "method": "vibes",
                                                                        "target": None}),
        ProbeCase("context mixing: an input past the positions", "fail", probe,
                  {"call": "mixing", "method": "alti", "target": None, "text": "word " * 100}),
        ProbeCase("activation patching: NaN weights", "fail", probe,
                  {"call": "patching", "weights": "nan", "corrupted_text": "the queen is dead"}),
        ProbeCase("activation patching: inputs of other lengths", "fail", probe,
                  {"call": "patching", "corrupted_text": "the old king is dead"}),
        ProbeCase("activation patching: over an unknown part", "fail", probe,
                  {"call": "patching", "corrupted_text": "the queen is dead", "over": "neurons"}),
        ProbeCase("faithfulness: NaN weights", "fail", probe, {"call": "faithfulness", "weights": "nan"}),
        ProbeCase("faithfulness: NaN scores", "fail", probe,
                  {"call": "faithfulness", "scores": [float("nan")] * 6}),
        ProbeCase("faithfulness: scores of the wrong length", "fail", probe, {"call": "faithfulness", "scores": [1.0]}),
        ProbeCase("faithfulness: max_points 1", "fail", probe, {"call": "faithfulness", "max_points": 1}),
        ProbeCase("an empty input (no positions)", "fail", probe, {**ig, "empty_encoding": True}),
        ProbeCase("an empty sentence", "fail", probe, {**ig, "text": "   "}),
        ProbeCase("a sentence of zero-width characters only", "fail", probe, {**ig, "text": "\u200b\u200b"}),
    ]
    return cases


PROBE_FAMILIES = {"tokenizer": (lambda bases: tokenizer_cases() + tokenizer_mutation_cases(bases),
                                build_tokenizer_bases),
                  "corpus": (lambda bases: corpus_cases(), build_corpus_bases),
                  "explain": (lambda bases: explain_cases(), lambda root: root)}


def run_probe_family(family: str, root: Path, pick: Callable[[list], list], jobs: int,
                     list_only: bool = False) -> list[Result]:
    make_cases, build = PROBE_FAMILIES[family]
    bases = build(root)
    cases = pick(make_cases(bases))
    if list_only:
        for case in cases:
            print(f"{family:10s} {case.expect:4s} {case.name}")
        return []
    servers = threading.local()
    made: list[ProbeServer] = []

    def one(case: ProbeCase) -> Outcome:
        if not hasattr(servers, "server"):
            servers.server = ProbeServer(family)
            made.append(servers.server)
        return run_probe_case(case, family, bases, root, servers.server)

    try:
        return run_family(family, cases, one, jobs)
    finally:
        for server in made:
            server.close()


# ---- driving ---------------------------------------------------------------------------------------------------

def run_family(family: str, cases: list, runner: Callable, jobs: int) -> list[Result]:
    results: list[Result] = []

    def one(case) -> Result:
        started = time.monotonic()
        try:
            outcome = runner(case)
        except Exception as error:
            outcome = Outcome("traceback", f"AUDIT ERROR {type(error).__name__}: {error} "
                                           f"({traceback.format_exc().splitlines()[-3].strip()})")
        return Result(family, case.name, case.expect, outcome, time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(one, cases):
            results.append(result)
            mark = "." if result.outcome.kind in ("ok", "clear") else result.outcome.kind[0].upper()
            print(mark, end="", flush=True)
    print(flush=True)
    return results


def report(results: list[Result], family: str, seconds: float) -> None:
    counts = {kind: sum(1 for r in results if r.outcome.kind == kind) for kind in OUTCOMES}
    print(f"\n== {family}: {len(results)} cases in {seconds:.0f} s")
    print("  tried  " + "  ".join(f"{k:>9}" for k in OUTCOMES))
    print(f"  {len(results):5d}  " + "  ".join(f"{counts[k]:9d}" for k in OUTCOMES))
    for result in results:
        if result.outcome.kind not in ("ok", "clear"):
            print(f"  [{result.outcome.kind}] {result.name} (expect {result.expect}): {result.outcome.message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=("checkpoint", "run", "finetune", "hub", *PROBE_FAMILIES, "all"),
                        default="all")
    parser.add_argument("--quick", action="store_true", help="every third case of each family")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--only", metavar="TEXT", help="only the cases whose name contains TEXT")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--verbose", action="store_true", help="print every case's outcome")
    parser.add_argument("--_load-server", action="store_true", dest="load_server", help=argparse.SUPPRESS)
    parser.add_argument("--_load-one", nargs=3, dest="load_one", help=argparse.SUPPRESS)
    parser.add_argument("--_hub-case", dest="hub_case", help=argparse.SUPPRESS)
    parser.add_argument("--_probe-server", dest="probe_server", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load_server:
        load_server()
        return 0
    if args.hub_case:
        hub_case_child(args.hub_case)
        return 0
    if args.probe_server:
        probe_server(args.probe_server)
        return 0
    if args.load_one:
        import bertcore.models.checkpoint  # noqa: F401 - imported before the timeout starts

        Path(args.load_one[1]).with_name("fresh-ready").touch()
        _child_load(*args.load_one)
        return 0

    families = ("checkpoint", "run", "finetune", "hub", *PROBE_FAMILIES) if args.family == "all" else (args.family,)
    def pick(cases: list) -> list:
        cases = [case for case in cases if args.only is None or args.only in case.name]
        return cases[::3] if args.quick else cases

    started = time.monotonic()
    all_results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="fault-audit-") as temp:
        root = Path(temp)
        try:
            global WORKSPACE
            WORKSPACE = Workspace(root / "workspace")
            if args.list:
                for family, cases in (("checkpoint", checkpoint_cases()), ("run", run_cases()),
                                      ("finetune", finetune_cases(finetune_sources())), ("hub", hub_cases())):
                    if family in families:
                        for case in pick(cases):
                            print(f"{family:10s} {case.expect:4s} {case.name}")
                for family in PROBE_FAMILIES:
                    if family in families:
                        run_probe_family(family, root, pick, args.jobs, list_only=True)
                return 0
            if "run" in families or "finetune" in families:
                print("preparing a tiny finished run and an uninterrupted reference run ...", flush=True)
                WORKSPACE.prepare()
            for family in families:
                family_started = time.monotonic()
                print(f"{family}: ", end="", flush=True)
                if family == "checkpoint":
                    bases = build_checkpoint_bases(root / "bases")
                    servers = threading.local()
                    made: list[LoadServer] = []

                    def load_case(case, bases=bases, servers=servers, made=made):
                        if not hasattr(servers, "server"):
                            servers.server = LoadServer()
                            made.append(servers.server)
                        return run_checkpoint_case(case, bases, root, servers.server)

                    results = run_family(family, pick(checkpoint_cases()), load_case, args.jobs)
                    for server in made:
                        server.close()
                elif family == "hub":
                    results = run_family(family, pick(hub_cases()), lambda case: run_hub_case(case, root), args.jobs)
                elif family in PROBE_FAMILIES:
                    results = run_probe_family(family, root, pick, args.jobs)
                elif family == "run":
                    results = run_family(family, pick(run_cases()),
                                         lambda case: run_run_case(case, WORKSPACE, root), args.jobs)
                else:
                    results = run_family(family, pick(finetune_cases(finetune_sources())),
                                         lambda case: run_finetune_case(case, WORKSPACE, root), args.jobs)
                report(results, family, time.monotonic() - family_started)
                if args.verbose:
                    for result in results:
                        print(f"    {result.outcome.kind:9s} {result.seconds:5.1f}s {result.name}: "
                              f"{result.outcome.message}")
                all_results += results
        finally:
            unfreeze(root)
            for mount in Path("/proc/mounts").read_text().splitlines():
                point = mount.split()[1]
                if point.startswith(str(root)):
                    subprocess.run(["umount", "-l", point], capture_output=True)
    total = {kind: sum(1 for r in all_results if r.outcome.kind == kind) for kind in OUTCOMES}
    print(f"\nall: {len(all_results)} cases in {time.monotonic() - started:.0f} s; "
          + ", ".join(f"{k} {v}" for k, v in total.items()))
    with contextlib.suppress(OSError):
        print("load average:", Path("/proc/loadavg").read_text().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
