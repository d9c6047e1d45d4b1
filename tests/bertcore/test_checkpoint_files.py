"""The files of a checkpoint folder are read only as regular files of a bounded size (a FIFO, a link to /dev/zero, a
folder, JSON nested 100,000 deep or a huge file is a CheckpointError naming the file and what it is), and a
vocabulary shorter than the embedding table loads only where the tokenizer files confirm its size.

A load that would hang (a FIFO opened for reading waits for a writer forever) or read without end (/dev/zero)
runs in a child process with a per-case time limit and a memory limit: a regression fails its test, never CI."""

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import torch

import bertcore.files.reading as file_reading
from bertcore.files.resources import default_checkpoint_dir
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import CheckpointError, load_pretrained, read_checkpoint, save_pretrained
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer, TokenizerError
from tests.special_files import CHILD_PREAMBLE, DEEP_JSON, SECONDS_PER_CASE, replace_with, run_in_children
from tests.tiny_configs import two_layer_bert

has_special_files = pytest.mark.skipif(
    not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero") or sys.platform == "win32",
    reason="needs FIFOs and /dev/zero (POSIX)")


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


def small_model(tokenizer, vocab_size: int) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(two_layer_bert(vocab_size))


@pytest.fixture(scope="module")
def saved(tokenizer, tmp_path_factory) -> dict[str, Path]:
    """Two checkpoints written once: 'exact' (vocab_size = the vocabulary's 60 tokens) and 'padded' (64)."""
    root = tmp_path_factory.mktemp("saved")
    padded_size = -(-tokenizer.vocab_size // 16) * 16
    assert padded_size > tokenizer.vocab_size
    return {"exact": save_pretrained(small_model(tokenizer, tokenizer.vocab_size), tokenizer, root / "exact"),
            "padded": save_pretrained(small_model(tokenizer, padded_size), tokenizer, root / "padded")}


def copy_of(folder: Path, tmp_path: Path, name: str = "copy") -> Path:
    return Path(shutil.copytree(folder, tmp_path / name))


def lose_lines(vocab_path: Path, start: int, count: int) -> int:
    """Delete `count` lines of a vocab.txt from line `start` (0-based); the number of lines left."""
    lines = vocab_path.read_text(encoding="utf-8").splitlines()
    del lines[start:start + count]
    vocab_path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def drop_recorded_size(folder: Path) -> None:
    """tokenizer_config.json as bertcore wrote it before it recorded the vocabulary's size (and as NVIDIA's and
    most other checkpoints have it)."""
    path = folder / "tokenizer_config.json"
    values = json.loads(path.read_text())
    values.pop("vocab_size", None)
    path.write_text(json.dumps(values))


# ---- FIFOs, devices, folders: in a child process, each case time-bounded ---------------------------------------

# (case, layout, file): the layout is what the folder holds besides the file replaced.
FILES = [
    ("config", "exact", "config.json"),
    ("vocab", "exact", "vocab.txt"),
    ("tokenizer_config", "exact", "tokenizer_config.json"),
    ("tokenizer_json", "tokenizer.json only", "tokenizer.json"),
    ("tokenizer_json_record", "padded, size unrecorded", "tokenizer.json"),  # read to confirm the padding
    ("safetensors", "exact", "model.safetensors"),
    ("pytorch_bin", "pytorch_model.bin only", "pytorch_model.bin"),
]
KINDS = {
    "fifo": r"is a FIFO \(named pipe\), not a file",
    "dev_zero": r"\(a symbolic link to /dev/zero\) is a character device, not a file",
    "folder": r"is a folder, not a file",
}
CASES = [f"{name}-{kind}" for name, _, _ in FILES for kind in KINDS] + ["vocab_file_argument-fifo"]

CHILD = CHILD_PREAMBLE + r"""
from bertcore.models.checkpoint import load_pretrained
from bertcore.tokenization.wordpiece import BertTokenizer
for name, call, path in cases():
    try:
        (load_pretrained if call == "load_pretrained" else BertTokenizer.from_vocab_file)(path)
        result = ["loaded", ""]
    except BaseException as error:  # MemoryError too: reading /dev/zero until the limit
        result = [type(error).__name__, str(error)]
    print(json.dumps([name, *result]), flush=True)
"""




@pytest.fixture(scope="module")
def special_file_results(saved, tokenizer, tmp_path_factory) -> dict[str, tuple[str, str, Path]]:
    """Every case of CASES loaded once, in children: case -> (error type, message, the file replaced)."""
    root = tmp_path_factory.mktemp("special")
    cases, files = [], {}
    for name, layout, file_name in FILES:
        for kind in KINDS:
            folder = Path(shutil.copytree(saved["padded" if layout.startswith("padded") else "exact"],
                                          root / f"{name}-{kind}"))
            if layout == "tokenizer.json only":
                (folder / "vocab.txt").unlink()
            elif layout == "padded, size unrecorded":
                drop_recorded_size(folder)
            elif layout == "pytorch_model.bin only":
                (folder / "model.safetensors").unlink()
            replace_with(folder / file_name, kind)
            cases.append((f"{name}-{kind}", "load_pretrained", str(folder)))
            files[f"{name}-{kind}"] = folder / file_name
    fifo = root / "a-vocab-fifo.txt"
    os.mkfifo(fifo)
    cases.append(("vocab_file_argument-fifo", "from_vocab_file", str(fifo)))
    files["vocab_file_argument-fifo"] = fifo
    results = run_in_children(CHILD, cases)
    return {name: (*results[name], files[name]) for name in files}


@pytest.mark.slow
@has_special_files
@pytest.mark.parametrize("case", CASES)
def test_a_file_that_is_not_a_regular_file_is_named_without_blocking(special_file_results, case):
    kind, message, path = special_file_results[case]
    assert kind != "hung", f"reading {path} did not finish within {SECONDS_PER_CASE} s (it blocks):\n{message}"
    assert kind == ("TokenizerError" if case.startswith("vocab_file_argument") else "CheckpointError"), message
    assert re.search(re.escape(str(path)) + " " + KINDS[case.rsplit("-", 1)[1]], message), message


@has_special_files
def test_a_fifo_swapped_in_after_the_check_is_caught_by_fstat_not_waited_on(tmp_path, monkeypatch):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(file_reading, "check_regular_file", lambda *args, **kwargs: None)  # the stat saw a file
    outcome = []

    def read():
        try:
            file_reading.read_bytes(fifo, limit=100, error=CheckpointError)
        except Exception as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(SECONDS_PER_CASE)
    if reader.is_alive():  # it blocked in open(): give it a writer so that the thread ends, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("opening the FIFO blocked")
    assert isinstance(outcome[0], CheckpointError) and "is a FIFO (named pipe), not a file" in str(outcome[0])


@has_special_files
def test_sockets_broken_links_and_missing_files():
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # a socket's path must be short
        folder = Path(short)
        server = socket.socket(socket.AF_UNIX)
        try:
            server.bind(str(folder / "vocab.txt"))
            with pytest.raises(CheckpointError, match=r"vocab\.txt is a socket, not a file"):
                file_reading.read_bytes(folder / "vocab.txt", limit=100, error=CheckpointError)
        finally:
            server.close()
        (folder / "config.json").symlink_to(folder / "gone.json")
        with pytest.raises(CheckpointError, match=r"config\.json is a broken symbolic link \(to .*gone\.json\)"):
            file_reading.read_json(folder / "config.json", limit=100, error=CheckpointError)
        with pytest.raises(FileNotFoundError):  # each caller says what the folder needs
            file_reading.read_bytes(folder / "nothing.txt", limit=100)
        (folder / "big.json").write_text(json.dumps(list(range(100))))
        with pytest.raises(ValueError, match=r"big\.json is 0\.0 MiB, but a config\.json holds at most 0 MiB"):
            file_reading.read_json(folder / "big.json", limit=100, what="a config.json")
        assert file_reading.read_json(folder / "big.json", limit=1000) == list(range(100))


# ---- deep, huge or misencoded JSON and text ----------------------------------------------------------------

@pytest.mark.parametrize(("layout", "file_name"), [
    ("exact", "config.json"), ("exact", "tokenizer_config.json"), ("tokenizer.json only", "tokenizer.json"),
    ("padded, size unrecorded", "tokenizer.json")])
def test_json_nested_100000_deep_is_named_not_a_recursion_error(saved, tmp_path, layout, file_name):
    folder = copy_of(saved["padded" if layout.startswith("padded") else "exact"], tmp_path)
    if layout == "tokenizer.json only":
        (folder / "vocab.txt").unlink()
    elif layout.startswith("padded"):
        drop_recorded_size(folder)
    (folder / file_name).write_text(DEEP_JSON)
    with pytest.raises(CheckpointError, match=rf"{re.escape(file_name)} is not usable JSON: its lists or objects "
                                              r"are nested too deeply"):
        load_pretrained(folder)


@pytest.mark.parametrize(("file_name", "limit", "message"), [
    ("config.json", file_reading.CONFIG_JSON_LIMIT, r"config\.json is 64\.0 MiB, but a config\.json holds at most 64"),
    ("vocab.txt", file_reading.VOCAB_LIMIT, r"vocab\.txt is 64\.0 MiB, but a vocab\.txt holds at most 64 MiB"),
    ("tokenizer_config.json", file_reading.TOKENIZER_CONFIG_LIMIT,
     r"tokenizer_config\.json is 16\.0 MiB, but a tokenizer_config\.json holds at most 16 MiB"),
])
def test_a_file_beyond_its_size_bound_is_refused_before_it_is_read(saved, tmp_path, file_name, limit, message):
    folder = copy_of(saved["exact"], tmp_path)
    with open(folder / file_name, "r+b") as file:
        file.truncate(limit + 1)  # sparse: no disk used, and nothing is read
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(folder)


def test_config_json_that_is_not_an_object_or_has_a_bom_or_bad_values(saved, tmp_path):
    folder = copy_of(saved["exact"], tmp_path)
    config_path = folder / "config.json"
    good = config_path.read_bytes()
    config_path.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match=r"config\.json holds a list, not a JSON object of config fields"):
        load_pretrained(folder)
    config_path.write_bytes(b"\xef\xbb\xbf" + good)  # json.load and transformers refuse it alike
    with pytest.raises(CheckpointError, match=r"config\.json is not valid JSON \(Unexpected UTF-8 BOM"):
        load_pretrained(folder)
    config_path.write_bytes(good.replace(b'"hidden_act": "gelu"', b'"hidden_act": "swish"'))
    with pytest.raises(CheckpointError, match=r"config\.json is not a usable BERT config: hidden_act 'swish'"):
        load_pretrained(folder)


def test_a_vocab_with_a_byte_order_mark_says_so_not_only_that_pad_is_missing(saved, tmp_path):
    folder = copy_of(saved["exact"], tmp_path)
    (folder / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + (folder / "vocab.txt").read_bytes())
    with pytest.raises(CheckpointError, match=r"vocab\.txt starts with a UTF-8 byte order mark \(BOM\), which is "
                                              r"read as part of its first token \('\\ufeff\[PAD\]'.* so it has no "
                                              r"\[PAD\] token; save the file as UTF-8 without a BOM"):
        load_pretrained(folder)


def test_a_folder_in_place_of_the_safetensors_is_named_not_passed_over(saved, tmp_path):
    """Beside a pytorch_model.bin too: a model.safetensors that is not a file is an error, not skipped."""
    folder = copy_of(saved["exact"], tmp_path)
    torch.save({}, folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").mkdir()
    with pytest.raises(CheckpointError, match=r"model\.safetensors is a folder, not a file"):
        load_pretrained(folder)


# ---- a vocabulary shorter than the embedding table ---------------------------------------------------------

def test_the_default_model_with_lines_missing_from_its_vocab_is_refused(tmp_path):
    """The audit's case: 10 lines gone from the middle of an 8000-token vocab.txt shift every later id; 7990 rounds
    up to 8000 (a multiple of 64), so padding alone would have let it load."""
    folder = copy_of(default_checkpoint_dir(), tmp_path)
    left = lose_lines(folder / "vocab.txt", 4000, 10)
    with pytest.raises(CheckpointError, match=rf"vocab\.txt has {left} tokens but config\.json says vocab_size 8000, "
                                              r"and nothing in the folder says which is right.*may have lost 10 lines"
                                              rf".*add \"vocab_size\": {left} to .*tokenizer_config\.json"):
        load_pretrained(folder)


@pytest.mark.slow
def test_the_shipped_default_model_and_minilm_load_as_before(minilm_path):
    model, tokenizer = load_pretrained(default_checkpoint_dir())
    assert model.config.vocab_size == tokenizer.vocab_size == 8000
    model, tokenizer = load_pretrained(minilm_path)  # vocab.txt, tokenizer.json and config agree: 30522
    assert model.config.vocab_size == tokenizer.vocab_size == 30522


def test_a_padded_save_records_the_vocabulary_size_and_loads(saved, tokenizer):
    assert json.loads((saved["padded"] / "tokenizer_config.json").read_text())["vocab_size"] == tokenizer.vocab_size
    model, loaded = load_pretrained(saved["padded"])
    assert loaded.vocab == tokenizer.vocab and model.config.vocab_size == 64


def test_a_padded_folder_whose_vocab_lost_lines_is_named_with_both_counts(saved, tmp_path, tokenizer):
    folder = copy_of(saved["padded"], tmp_path)
    left = lose_lines(folder / "vocab.txt", 20, 3)  # 57 tokens: still rounds up to 64
    with pytest.raises(CheckpointError, match=rf"vocab\.txt has {left} tokens but tokenizer_config\.json records a "
                                              rf"vocabulary of {tokenizer.vocab_size} \(config\.json says vocab_size "
                                              r"64\): vocab\.txt lost lines"):
        load_pretrained(folder)


def test_an_unrecorded_padding_is_refused_until_the_size_is_recorded(saved, tmp_path, tokenizer):
    """As NVIDIA's BERTs come (30522 tokens, vocab_size 30528, no record): a line count alone cannot tell."""
    folder = copy_of(saved["padded"], tmp_path)
    drop_recorded_size(folder)
    with pytest.raises(CheckpointError, match=rf"has {tokenizer.vocab_size} tokens but config\.json says vocab_size "
                                              r"64, and nothing in the folder says which is right: the embedding "
                                              r"table may be padded \(rounded up to a multiple of 8, as NVIDIA"):
        load_pretrained(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "vocab_size": tokenizer.vocab_size}))
    model, _ = load_pretrained(folder)  # what the message says to do
    assert model.config.vocab_size == 64


def test_a_tokenizer_json_beside_vocab_txt_confirms_or_contradicts_it(saved, tmp_path, tokenizer):
    """What transformers saves beside vocab.txt: its WordPiece model lists every token."""
    folder = copy_of(saved["padded"], tmp_path)
    drop_recorded_size(folder)
    tokenizer._tokenizer.save(str(folder / "tokenizer.json"))
    assert read_checkpoint(folder).config.vocab_size == 64
    left = lose_lines(folder / "vocab.txt", 30, 2)
    with pytest.raises(CheckpointError, match=rf"vocab\.txt has {left} tokens but tokenizer\.json records a "
                                              rf"vocabulary of {tokenizer.vocab_size}"):
        load_pretrained(folder)


def test_a_tokenizer_json_alone_is_its_own_record_and_is_the_file_named(saved, tmp_path, tokenizer):
    folder = copy_of(saved["padded"], tmp_path)
    (folder / "vocab.txt").unlink()
    drop_recorded_size(folder)
    tokenizer._tokenizer.save(str(folder / "tokenizer.json"))
    contents = read_checkpoint(folder)  # transformers 5 saves only a tokenizer.json: it lists every token
    assert contents.tokenizer.vocab_file == folder / "tokenizer.json" and contents.config.vocab_size == 64
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": tokenizer.vocab_size - 1}))
    with pytest.raises(CheckpointError, match=rf"tokenizer\.json has {tokenizer.vocab_size} tokens but config\.json "
                                              rf"says vocab_size {tokenizer.vocab_size - 1}"):
        load_pretrained(folder)  # not "vocab.txt has …": there is no vocab.txt


def test_a_recorded_size_that_is_no_size_is_named(saved, tmp_path):
    folder = copy_of(saved["padded"], tmp_path)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "vocab_size": "60"}))
    with pytest.raises(CheckpointError, match=r"tokenizer_config\.json records vocab_size '60', which is not a "
                                              "number of tokens"):
        load_pretrained(folder)


@pytest.mark.slow
def test_the_recorded_size_does_not_disturb_transformers(saved, tokenizer, transformers):
    reference = transformers.AutoTokenizer.from_pretrained(saved["padded"])
    for text in ("the cat sat on a mat", "a dog ran far away and then came back"):
        assert reference(text)["input_ids"] == tokenizer.encode(text).input_ids


def test_a_vocab_file_of_special_tokens_only_still_loads_beside_no_record(tmp_path):
    """A vocab.txt read on its own (bert-train --vocab) needs no record: only a padded checkpoint does."""
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in [*SPECIAL_TOKENS, "a", "b"]), encoding="utf-8")
    assert BertTokenizer.from_vocab_file(tmp_path / "vocab.txt").vocab_size == 7
    with pytest.raises(TokenizerError, match=r"does not exist \(nor a tokenizer\.json beside it\)"):
        BertTokenizer.from_vocab_file(tmp_path / "sub" / "vocab.txt")


def test_weights_the_file_system_refuses_are_not_called_corrupt(saved, tmp_path, monkeypatch):
    """Permission denied (or an I/O error) says so; "corrupt or truncated" is for what the file holds."""
    folder = copy_of(saved["exact"], tmp_path)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("bertcore.models.weights.load_file", refused)
    with pytest.raises(CheckpointError, match=r"model\.safetensors cannot be read \(Permission denied\)"):
        load_pretrained(folder)
    torch.save({}, folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    monkeypatch.setattr("bertcore.models.weights.torch.load", refused)
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin cannot be read \(Permission denied\)"):
        load_pretrained(folder)


@has_special_files
def test_files_that_are_links_to_regular_files_load_as_the_hugging_face_cache_lays_them_out(saved, tmp_path):
    """A cache snapshot's files are relative links into blobs/: links are followed, to regular files only."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for file in saved["padded"].iterdir():
        shutil.copy(file, blobs / f"blob-{file.name}")
        (snapshot / file.name).symlink_to(Path("..", "..", "blobs", f"blob-{file.name}"))
    model, tokenizer = load_pretrained(snapshot)
    assert model.config.vocab_size == 64 and tokenizer.vocab_file == snapshot / "vocab.txt"
