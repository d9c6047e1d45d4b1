"""The corpus preparation: every input format to the same documents, the cache (reused, invalidated, atomic),
bounded memory, the memory-mapped corpus read as documents of sentences, and training / resuming on it."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from bertcore.data import sources
from bertcore.data.batches import PretrainingData
from bertcore.data.corpus import read_corpus, split_sentences, tokenize_corpus
from bertcore.data.prepare import (
    PreparationCancelled,
    cache_folder,
    default_cache_dir,
    prepare_corpus,
    vocabulary_sample,
)
from bertcore.data.prepared import META_FILE, PreparedCorpus, TokenizedDocuments
from bertcore.data.segments import PairSampler
from bertcore.data.sources import CorpusSource
from bertcore.errors import CorpusError
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from tests.bertcore.test_data import WORDS, synthetic_corpus_text

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True)


def expected_documents(text: str, tokenizer) -> list[list[list[int]]]:
    """What the in-memory path (read_corpus + tokenize_corpus) makes of a .txt corpus."""
    return tokenize_corpus(read_corpus_text(text), tokenizer)


def read_corpus_text(text: str):
    from bertcore.data.corpus import Corpus, split_documents_text

    documents = [split_sentences(block) for block in split_documents_text(text)]
    return Corpus([d for d in documents if d], [], "text")


def prepared_lists(path: Path, tokenizer, cache: Path, **options) -> list[list[list[int]]]:
    text_field = options.pop("text_field", "text")
    prepared = prepare_corpus(CorpusSource.open(path, text_field=text_field), tokenizer, cache_dir=cache, **options)
    return prepared.documents.to_lists()


def test_a_txt_corpus_prepares_to_the_documents_of_the_in_memory_path(tmp_path, tokenizer, monkeypatch):
    text = synthetic_corpus_text(num_documents=50)
    # a document of many lines without a blank line, longer than a piece, and blank lines of spaces and \r
    text += "\n \t\r\n" + "\n".join(f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]}." for i in range(400)) + "\n"
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    expected = expected_documents(text, tokenizer)
    assert prepared_lists(path, tokenizer, tmp_path / "cache") == expected
    # tiny reads, pieces and chunks: documents and sentences cut at every kind of boundary come out whole
    monkeypatch.setattr(sources, "READ_BYTES", 97)
    assert prepared_lists(path, tokenizer, tmp_path / "small", chunk_chars=300) == expected


def test_every_format_gives_the_same_documents(tmp_path, tokenizer):
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.ipc as ipc
    import pyarrow.parquet as parquet

    blocks = synthetic_corpus_text(num_documents=12).strip().split("\n\n")
    expected = expected_documents("\n\n".join(blocks), tokenizer)
    records = [{"id": i, "body": block} for i, block in enumerate(blocks)]
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "a.txt").write_text("\n\n".join(blocks), encoding="utf-8")
    with gzip.open(folder / "b.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n\n".join(blocks))
    (folder / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with gzip.open(folder / "d.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    table = pyarrow.table({"id": [r["id"] for r in records], "body": blocks})
    parquet.write_table(table, folder / "e.parquet", row_group_size=5)
    with ipc.new_file(str(folder / "f.arrow"), table.schema) as writer:  # the Arrow file format
        writer.write_table(table, max_chunksize=4)
    saved = folder / "saved_dataset"  # datasets.save_to_disk writes the Arrow streaming format
    saved.mkdir()
    with ipc.new_stream(str(saved / "data-00000-of-00001.arrow"), table.schema) as writer:
        writer.write_table(table, max_chunksize=4)
    (saved / "state.json").write_text("{}")  # not a corpus file: left alone

    for name in ("a.txt", "b.txt.gz", "c.jsonl", "d.jsonl.gz", "e.parquet", "f.arrow", "saved_dataset"):
        assert prepared_lists(folder / name, tokenizer, tmp_path / "cache", text_field="body") == expected, name
    assert prepared_lists(folder, tokenizer, tmp_path / "cache", text_field="body") == expected * 7  # mixed


def test_format_problems_name_the_file_and_the_fix(tmp_path, tokenizer, monkeypatch):
    cache = tmp_path / "cache"
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"body": "Alpha bravo."}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"line 1, has no 'text' field \(its fields: 'body'\).*--text-field"):
        prepared_lists(jsonl, tokenizer, cache)
    (tmp_path / "bad.jsonl").write_text('{"text": "Alpha."}\nnot json\n', encoding="utf-8")
    with pytest.raises(CorpusError, match="line 2, is not JSON"):
        prepared_lists(tmp_path / "bad.jsonl", tokenizer, cache)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"Alpha bravo.\nCaf\xe9 delta.\n")
    with pytest.raises(CorpusError, match=r"byte 0xe9 at byte offset 16 \(line 2\)"):
        prepared_lists(latin1, tokenizer, cache)
    (tmp_path / "empty.txt").write_text("\n \n")
    with pytest.raises(CorpusError, match="is empty"):
        prepared_lists(tmp_path / "empty.txt", tokenizer, cache)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    (tmp_path / "e.parquet").write_bytes(b"PAR1")
    with pytest.raises(CorpusError, match=r"needs pyarrow.*pip install 'bert-explorer\[data\]'"):
        prepared_lists(tmp_path / "e.parquet", tokenizer, cache)


def test_the_prepared_corpus_is_read_as_documents_of_sentences(tmp_path, tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=20), encoding="utf-8")
    prepared = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=tmp_path / "cache")
    expected = expected_documents(path.read_text(), tokenizer)
    documents = prepared.documents
    assert isinstance(documents.tokens, np.memmap) and documents.tokens.dtype == np.uint16
    assert len(documents) == len(expected) and len(documents[3]) == len(expected[3])
    assert documents[3][1] == expected[3][1] and documents[-1][-1] == expected[-1][-1]
    split = documents.subset(np.array([2, 5]))
    assert split.to_lists() == [expected[2], expected[5]]
    assert split.num_tokens == sum(len(s) for d in (expected[2], expected[5]) for s in d)
    assert prepared.meta["num_tokens"] == documents.num_tokens == sum(len(s) for d in expected for s in d)


def test_batches_from_the_prepared_corpus_are_those_of_the_in_memory_corpus(tmp_path, tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=60), encoding="utf-8")
    prepared = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=tmp_path / "cache")
    for buckets in (1, 4):
        in_memory = PretrainingData(read_corpus(path), tokenizer, seq_len=32, heldout_fraction=0.1, seed=3,
                                    length_buckets=buckets)
        mapped = PretrainingData(prepared, tokenizer, seq_len=32, heldout_fraction=0.1, seed=3, length_buckets=buckets)
        for step in (1, 2, 7):
            a, b = in_memory.train_batch(step, 8, rank=1), mapped.train_batch(step, 8, rank=1)
            assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
        assert torch.equal(in_memory.heldout_batches(1, 4)[0].input_ids, mapped.heldout_batches(1, 4)[0].input_ids)
    # the sampler's index is O(documents): two arrays of documents + 1 running counts, no per-sentence list
    sampler = mapped.train
    assert sampler.starts.cumulative.shape == (len(mapped.train_documents) + 1,)
    assert PairSampler(mapped.train_documents.to_lists(), 32).sample_batch(__import__("random").Random(0), 4) == \
        sampler.sample_batch(__import__("random").Random(0), 4)


def test_the_cache_is_reused_and_invalidated_when_a_file_changes(tmp_path, tokenizer, monkeypatch):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=20), encoding="utf-8")
    cache = tmp_path / "cache"
    first = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache)
    calls = []
    real_encode = BertTokenizer.encode_ids
    monkeypatch.setattr(BertTokenizer, "encode_ids", lambda self, texts: calls.append(1) or real_encode(self, texts))
    again = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache)
    assert again.folder == first.folder and not calls  # nothing tokenized: read from the cache
    path.write_text(synthetic_corpus_text(num_documents=21), encoding="utf-8")
    os.utime(path, ns=(first.meta["corpus"]["files"][0][2] + 10**9,) * 2)
    changed = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache)
    assert changed.folder != first.folder and calls and len(changed.documents) == 21
    other_tokenizer = BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS[:10]], lowercase=True)
    assert cache_folder(CorpusSource.open(path), other_tokenizer, cache) != changed.folder
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.folder.name, changed.folder.name])
    monkeypatch.setenv("BERT_EXPLORER_DATA_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "bert-explorer" / "corpora"


def test_a_cancelled_or_killed_preparation_leaves_nothing_that_is_trusted(tmp_path, tokenizer, monkeypatch):
    monkeypatch.setattr(sources, "READ_BYTES", 1000)  # progress is known per read
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=200), encoding="utf-8")
    cache = tmp_path / "cache"
    seen = []

    def cancel_after_two(progress):
        seen.append(progress)
        if len(seen) == 2:
            raise PreparationCancelled()

    with pytest.raises(PreparationCancelled):
        prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache, progress=cancel_after_two,
                       chunk_chars=500)
    assert list(cache.iterdir()) == []
    assert seen[0].phase == "tokenizing" and 0 < seen[0].fraction < 1 and seen[1].done_bytes > seen[0].done_bytes
    # a process killed while preparing leaves its .partial folder: never opened, removed by the next preparation
    killed = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = cache / f".{cache_folder(CorpusSource.open(path), tokenizer, cache).name}.partial-" \
                       f"{killed.stdout.strip()}-0000"
    leftover.mkdir()
    (leftover / "tokens.bin").write_bytes(b"\0" * 10)
    prepared = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache)
    assert not leftover.exists() and [p.name for p in cache.iterdir()] == [prepared.folder.name]
    (prepared.folder / "tokens.bin").write_bytes(b"\0" * 10)  # damaged afterwards: said, not read
    with pytest.raises(CorpusError, match=r"tokens\.bin holds 10 bytes.*delete the folder"):
        PreparedCorpus.open(prepared.folder)
    with pytest.raises(CorpusError, match="not there; rank 0 prepares it"):
        prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=tmp_path / "elsewhere", create=False)


def test_the_vocabulary_sample_is_bounded_and_drawn_from_the_whole_corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(f"Document {i:03d} alpha bravo charlie delta echo." for i in range(200)) + "\n")
    size = path.stat().st_size
    progress = []
    sample = list(vocabulary_sample(CorpusSource.open(path), size // 10, progress.append))
    numbers = [int(text.split()[1]) for text in sample]
    assert sum(map(len, sample)) <= size // 10 and 15 <= len(numbers) <= 21
    assert min(numbers) < 20 and max(numbers) > 180  # evenly over the corpus, not its beginning
    assert progress[-1].phase == "vocabulary" and progress[-1].fraction == 1.0


MEMORY_CHILD = textwrap.dedent("""
    import json, sys, tracemalloc
    from pathlib import Path
    from bertcore.data import sources
    from bertcore.data.prepare import prepare_corpus
    from bertcore.data.sources import CorpusSource
    from bertcore.tokenization.wordpiece import BertTokenizer
    path, cache, chunk = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    sources.READ_BYTES = chunk  # what is held: one read and one chunk
    tokenizer = BertTokenizer.from_vocab_file(sys.argv[4])
    tracemalloc.start()
    prepared = prepare_corpus(CorpusSource.open(path), tokenizer, cache_dir=cache, chunk_chars=chunk)
    print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], "tokens": prepared.num_tokens}))
""")


@pytest.mark.slow
def test_preparation_memory_is_a_chunk_not_the_corpus(tmp_path, tokenizer):
    """Python's allocations while preparing (tracemalloc, numpy's included) in a fresh process: the same peak for
    a corpus 3 times larger, and far below the size of the text."""
    tokenizer.save(tmp_path)
    base = synthetic_corpus_text(num_documents=4000)  # ~0.9 MB
    peaks = []
    for copies in (4, 12):
        path = tmp_path / f"corpus{copies}.txt"
        path.write_text("\n\n".join([base] * copies), encoding="utf-8")
        result = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(path), str(tmp_path / f"cache{copies}"),
                                 str(256 * 1024), str(tmp_path / "vocab.txt")], capture_output=True, text=True,
                                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
        assert result.returncode == 0, result.stderr
        peaks.append((json.loads(result.stdout)["peak"], path.stat().st_size))
    (small_peak, _), (large_peak, large_size) = peaks
    assert large_peak < 1.1 * small_peak, peaks  # measured: 3.70 and 3.71 MB for 2.5 and 7.4 MB of text
    assert large_peak < 16 * 256 * 1024 < large_size / 1.5, peaks


@pytest.mark.slow
def test_a_run_records_its_prepared_corpus_and_a_resume_on_a_changed_corpus_says_so(tmp_path):
    from bertcore.training.pretraining import Trainer
    from tests.bertcore.test_trainer import TINY_MODEL, make_config, write_vocabulary

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(synthetic_corpus_text(num_documents=40), encoding="utf-8")
    write_vocabulary(tmp_path)
    config = make_config(corpus, tmp_path / "run", steps=4, data_cache=str(tmp_path / "cache"))
    trainer = Trainer(config, model_config=TINY_MODEL)
    for stats in trainer.steps():
        if stats.step == 2:
            trainer.request_stop()
    trainer.close()
    recorded = json.loads((tmp_path / "run" / "run_config.json").read_text())["corpus"]
    assert recorded["key"] == trainer.task.prepared.key and recorded["num_documents"] == 40
    assert Path(recorded["prepared"]).parent == tmp_path / "cache"
    with Trainer(config, resume=True) as same:
        assert same.resume_note is None
    corpus.write_text(synthetic_corpus_text(num_documents=41), encoding="utf-8")
    with Trainer(config, resume=True) as changed:
        assert f"the corpus changed since this run began ({corpus.resolve()} changed" in changed.resume_note
        list(changed.steps())
    warnings = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "warning" and "corpus changed" in r["message"] for r in warnings)


@pytest.mark.slow
def test_two_ranks_share_one_preparation(tmp_path):
    """torchrun, 2 processes (gloo on the CPU): rank 0 prepares, rank 1 waits and maps the same folder."""
    corpus = tmp_path / "corpus.jsonl"
    blocks = synthetic_corpus_text(num_documents=40).strip().split("\n\n")
    corpus.write_text("".join(json.dumps({"text": b}) + "\n" for b in blocks), encoding="utf-8")
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "bertcore.cli.train", "--corpus", str(corpus), "--vocab-size", "70", "--steps", "2",
               "--device", "cpu", "--seq-len", "32", "--batch-size", "4", "--eval-batches", "1", "--out",
               str(tmp_path / "run"), "--data-cache", str(cache), "--no-progress", "--preset", "tiny",
               "--hidden-size", "24", "--num-layers", "1", "--num-heads", "2", "--intermediate-size", "40"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    folders = [p for p in cache.iterdir()]
    assert len(folders) == 1 and (folders[0] / META_FILE).is_file()  # one preparation, no per-rank copy
    assert json.loads((tmp_path / "run" / "run_config.json").read_text())["corpus"]["prepared"] == str(folders[0])


def test_tokenized_documents_from_lists_keep_wide_vocabularies():
    documents = TokenizedDocuments.from_lists([[[70000, 1], [2]], [[3]]])
    assert documents.tokens.dtype == np.uint32 and documents[0][0] == [70000, 1] and len(documents[1]) == 1
