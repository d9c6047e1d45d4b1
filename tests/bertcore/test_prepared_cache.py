"""The prepared-corpus cache keeps itself sound (issue 34): a preparation changed after it was written is caught
by its checksums and prepared again, one without meta.json is replaced and named, a read-only cache is a clear
error naming it and how to choose another, and old preparations of a corpus are removed, except any a run has
open."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

from bertcore.data.prepare import KEEP_PER_SOURCE, cache_folder, prepare_corpus
from bertcore.data.prepared import META_FILE, TOKENS_FILE, PreparedCorpus
from bertcore.data.sources import CorpusSource
from bertcore.errors import CorpusError, PreparedCorpusDamaged
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from tests.bertcore.test_data import WORDS, synthetic_corpus_text


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=60), encoding="utf-8")
    return path


def prepare(corpus, tokenizer, cache, **options):
    return prepare_corpus(CorpusSource.open(corpus), tokenizer, cache_dir=cache, **options)


def tokens_of(prepared: PreparedCorpus) -> np.ndarray:
    return np.array(prepared.documents.tokens)


def test_a_tampered_preparation_is_refused_then_prepared_again(corpus, tokenizer, tmp_path):
    """The audit's case: every 7th token set to 7999. It trained on without a word; the checksum catches it."""
    cache = tmp_path / "cache"
    first = prepare(corpus, tokenizer, cache)
    original = tokens_of(first)
    del first
    tokens = np.fromfile(cache_folder(CorpusSource.open(corpus), tokenizer, cache) / TOKENS_FILE, dtype=np.uint16)
    tokens[::7] = 7999
    folder = cache_folder(CorpusSource.open(corpus), tokenizer, cache)
    tokens.tofile(folder / TOKENS_FILE)
    with pytest.raises(PreparedCorpusDamaged, match=rf"prepared corpus {folder} is damaged: tokens\.bin does not "
                                                    r"match the checksum its preparation recorded \(crc32:[0-9a-f]{8}, "
                                                    r"not crc32:[0-9a-f]{8}\): it was changed or damaged since; it "
                                                    r"is prepared again by the next run that needs it \(or delete "
                                                    r"the folder\)"):
        PreparedCorpus.open(folder)
    with pytest.raises(PreparedCorpusDamaged):  # another DDP rank does not prepare: it says what is wrong
        prepare(corpus, tokenizer, cache, create=False)
    again = prepare(corpus, tokenizer, cache)
    assert len(again.notes) == 1
    assert again.notes[0].startswith(f"the prepared corpus {folder} could not be used (tokens.bin does not match "
                                     "the checksum its preparation recorded")
    assert again.notes[0].endswith("it was changed or damaged since); it was prepared again")
    np.testing.assert_array_equal(tokens_of(again), original)
    assert prepare(corpus, tokenizer, cache).notes == ()  # whole again: opened as it is


@pytest.mark.parametrize("damage", ["no meta.json", "meta.json a FIFO", "tokens.bin cut", "folder is a file"])
def test_a_preparation_that_is_not_whole_is_replaced_and_named(damage, corpus, tokenizer, tmp_path):
    """A folder without meta.json failed every later run with "free some space", naming nothing; a FIFO in
    meta.json's place must not be waited on."""
    cache = tmp_path / "cache"
    original = tokens_of(prepare(corpus, tokenizer, cache))
    folder = cache_folder(CorpusSource.open(corpus), tokenizer, cache)
    if damage == "no meta.json":
        (folder / META_FILE).unlink()
    elif damage == "meta.json a FIFO":
        (folder / META_FILE).unlink()
        os.mkfifo(folder / META_FILE)
    elif damage == "tokens.bin cut":
        with open(folder / TOKENS_FILE, "r+b") as tokens:
            tokens.truncate(10)
    else:
        shutil.rmtree(folder)
        folder.write_text("not a folder")
    again = prepare(corpus, tokenizer, cache)
    assert len(again.notes) == 1 and again.notes[0].startswith(f"the prepared corpus {folder} could not be used (")
    assert again.notes[0].endswith("); it was prepared again")
    np.testing.assert_array_equal(tokens_of(again), original)
    assert not [entry for entry in cache.iterdir() if entry.name.startswith(".")]  # nothing set aside is left


def test_a_preparation_by_an_earlier_version_is_prepared_again_under_its_key(corpus, tokenizer, tmp_path):
    """Made before preparations carried checksums: prepared again in place, the same key (a resumed run sees the
    same corpus, not a changed one), and said so."""
    cache = tmp_path / "cache"
    folder = prepare(corpus, tokenizer, cache).folder
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    del meta["checksums"], meta["source_path"], meta["created_ns"]
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    again = prepare(corpus, tokenizer, cache)
    assert again.folder == folder and again.key == meta["key"]
    assert again.notes == (f"the prepared corpus {folder} could not be used (it was made by an earlier version, "
                           "without checksums); it was prepared again",)


@contextlib.contextmanager
def read_only(folder):
    """The folder made read-only for this process: immutable for root (who ignores permissions), else 0o555."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: cannot make a folder read-only")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    else:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)


def test_a_read_only_cache_is_named_with_how_to_choose_another(corpus, tokenizer, tmp_path):
    """It was a PermissionError traceback."""
    cache = tmp_path / "cache"
    cache.mkdir()
    with read_only(cache), pytest.raises(CorpusError, match=rf"the corpus cache {cache} cannot be written \(.+\); "
                                                            r"make it writable, or point \$BERT_EXPLORER_DATA_CACHE "
                                                            r"or --data-cache at a folder that is"):
        prepare(corpus, tokenizer, cache)


def test_a_preparation_in_a_read_only_cache_is_read(corpus, tokenizer, tmp_path):
    cache = tmp_path / "cache"
    original = tokens_of(prepare(corpus, tokenizer, cache))
    with read_only(cache):
        np.testing.assert_array_equal(tokens_of(prepare(corpus, tokenizer, cache)), original)


def edit(corpus, number: int) -> None:
    corpus.write_text(synthetic_corpus_text(num_documents=60, seed=number), encoding="utf-8")
    stamp = time.time() + number  # a new modification time whatever the clock's resolution
    os.utime(corpus, (stamp, stamp))


def prepared_folders(cache) -> list:
    return sorted(entry.name for entry in cache.iterdir() if not entry.name.startswith("."))


def test_five_edits_of_a_corpus_leave_its_newest_preparations(corpus, tokenizer, tmp_path):
    """5 edits left 5 folders; the cache keeps the newest KEEP_PER_SOURCE of a corpus, and each run says what it
    removed."""
    cache = tmp_path / "cache"
    other = tmp_path / "other.txt"
    other.write_text(synthetic_corpus_text(num_documents=20, seed=99), encoding="utf-8")
    prepare(other, tokenizer, cache)  # another corpus: never removed for this one's sake
    made = []
    for number in range(5):
        edit(corpus, number)
        prepared = prepare(corpus, tokenizer, cache)
        made.append(prepared.folder.name)
        if number >= KEEP_PER_SOURCE:
            assert len(prepared.notes) == 1 and prepared.notes[0].startswith(
                f"removed an older preparation of this corpus, {made[number - KEEP_PER_SOURCE]} (")
        del prepared
    assert prepared_folders(cache) == sorted([*made[-KEEP_PER_SOURCE:], cache_folder(
        CorpusSource.open(other), tokenizer, cache).name])


def test_a_preparation_a_run_has_open_is_kept(corpus, tokenizer, tmp_path):
    """Runs record the folder they train on; while one has it open (its PreparedCorpus), it is not removed. A
    resume after its removal prepares the same tokens again."""
    cache = tmp_path / "cache"
    edit(corpus, 0)
    in_use = prepare(corpus, tokenizer, cache)  # a run training on it
    original = tokens_of(in_use)
    for number in range(1, 4):
        edit(corpus, number)
        prepare(corpus, tokenizer, cache)
    assert in_use.folder.is_dir() and len(prepared_folders(cache)) == KEEP_PER_SOURCE + 1
    np.testing.assert_array_equal(tokens_of(in_use), original)  # still readable
    del in_use
    edit(corpus, 4)
    prepare(corpus, tokenizer, cache)
    assert len(prepared_folders(cache)) == KEEP_PER_SOURCE
    edit(corpus, 0)  # the first corpus back (another modification time, so another key): prepared again, the same
    np.testing.assert_array_equal(tokens_of(prepare(corpus, tokenizer, cache)), original)
