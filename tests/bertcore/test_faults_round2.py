"""Faults the fault audit (benchmarks/fault_audit.py) found open in its second round, each pinned by a test."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from bertcore.data.corpus import read_corpus
from bertcore.errors import CorpusError, NonFiniteLossError, RunFolderError, TokenizerError
from bertcore.files.run_folder import RunFolder
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from bertcore.training.divergence import learning_rate_advice
from bertcore.training.pretraining import Trainer
from bertcore.training.settings import linear_schedule
from tests.bertcore.test_data import synthetic_corpus_text
from tests.bertcore.test_trainer import TINY_MODEL, make_config, write_vocabulary

# Tiny models are overhead-bound: one thread is faster and does not fight other processes.
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=40), encoding="utf-8")
    write_vocabulary(path.parent)
    return path


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


# ---- 1. checkpoints/ or final/ a link to a folder outside the run ---------------------------------------------
@pytest.mark.parametrize("name", ["checkpoints", "final"])
def test_a_run_folder_whose_checkpoints_or_final_is_a_link_is_refused_naming_it(tmp_path, name):
    outside = tmp_path / "other-disk"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious\n")
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    (run.path / name).symlink_to(outside, target_is_directory=True)
    with pytest.raises(RunFolderError, match=rf"{name} is a symbolic link \(to {outside}\).*--out"):
        run.create()
    assert tree(outside) == ["keep.txt"]


def test_a_new_run_never_writes_checkpoints_through_a_linked_checkpoints_folder(corpus_path, tmp_path):
    outside = tmp_path / "other-disk"
    outside.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(outside, target_is_directory=True)
    config = make_config(corpus_path, run, steps=4, checkpoint_every=1, keep_checkpoints=1)
    with pytest.raises(RunFolderError, match=r"checkpoints is a symbolic link.*make the whole run folder there"):
        list(Trainer(config, model_config=TINY_MODEL).steps())
    assert tree(outside) == []


def test_a_resume_never_prunes_through_a_linked_checkpoints_folder(corpus_path, tmp_path):
    run = tmp_path / "run"
    config = make_config(corpus_path, run, steps=4, checkpoint_every=1, keep_checkpoints=10)
    list(Trainer(config, model_config=TINY_MODEL).steps())
    outside = tmp_path / "other-disk"
    (run / "checkpoints").rename(outside)
    (run / "checkpoints").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    more = make_config(corpus_path, run, steps=6, checkpoint_every=1, keep_checkpoints=1)
    with pytest.raises(RunFolderError, match=r"checkpoints is a symbolic link"):
        list(Trainer(more, model_config=TINY_MODEL, resume=True).steps())
    with pytest.raises(RunFolderError, match=r"checkpoints is a symbolic link"):
        RunFolder(run).prune_checkpoints(1)
    assert tree(outside) == before


# ---- 2. a vocab.txt with a blank line -------------------------------------------------------------------------
def test_a_blank_vocabulary_line_keeps_the_ids_transformers_gives(tmp_path, transformers):
    # transformers keeps a blank line as the token "" (WordPiece never produces it): the lines after it keep
    # their line numbers as ids, so reading it as transformers does is what keeps a checkpoint's ids right.
    lines = [*SPECIAL_TOKENS, "hello", "", "world", "##s", "the"]
    (tmp_path / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ours = BertTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    theirs = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"), do_lower_case=True)
    text = "hello worlds the world"
    assert ours.encode(text).input_ids == theirs(text)["input_ids"]
    assert ours.vocab_size == len(theirs) == len(lines)
    assert [ours.token_to_id(t) for t in lines] == theirs.convert_tokens_to_ids(lines)


def test_two_blank_vocabulary_lines_are_refused_naming_both_lines(tmp_path):
    lines = [*SPECIAL_TOKENS, "hello", "", "world", "", "##s"]
    (tmp_path / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"lines 7 and 9 are blank"):
        BertTokenizer.from_vocab_file(tmp_path / "vocab.txt")


# ---- 3. a corpus that is a FIFO, a device or a broken link ------------------------------------------------------
def read_within(path: Path, seconds: float = 10.0):
    """read_corpus(path) in a thread: the error it raised, or a failure when it hangs."""
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_corpus(path)
            outcome.append(None)
        except BaseException as error:  # handed to the test, which names it
            outcome.append(error)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with open(path, "wb", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)):  # release a reader blocked on it
            pass
        pytest.fail(f"read_corpus({path}) hangs")
    return outcome[0]


def test_a_fifo_corpus_is_named_as_a_fifo_without_hanging(tmp_path):
    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)
    error = read_within(fifo)
    assert isinstance(error, CorpusError) and "FIFO" in str(error) and "does not exist" not in str(error)


def test_a_corpus_linked_to_dev_zero_is_named_as_a_device(tmp_path):
    link = tmp_path / "corpus.txt"
    link.symlink_to("/dev/zero")
    error = read_within(link)
    assert isinstance(error, CorpusError) and "character device" in str(error) and "/dev/zero" in str(error)


def test_a_corpus_that_is_a_broken_link_says_so(tmp_path):
    link = tmp_path / "corpus.txt"
    link.symlink_to(tmp_path / "moved.txt")
    with pytest.raises(CorpusError, match=r"broken symbolic link"):
        read_corpus(link)


# ---- 4. the advice after a NaN or a divergence ----------------------------------------------------------------
def test_learning_rate_advice_names_usual_ranges_not_a_tenth_of_an_absurd_value():
    advice = learning_rate_advice(1e30, pretraining=True)
    assert "1e+29" not in advice and "1e-4 to 1e-3" in advice and "now 1e+30" in advice
    assert "2e-5 to 5e-5" in learning_rate_advice(1e30, pretraining=False)
    # Already usual: a smaller step, and where else to look.
    usual = learning_rate_advice(5e-4, pretraining=True)
    assert "within the usual" in usual and "0.00025" in usual
    low = learning_rate_advice(1e-6, pretraining=True)
    assert "already below" in low and "--max-grad-norm" in low


def test_a_nan_after_an_absurd_learning_rate_suggests_a_usual_one(corpus_path, tmp_path):
    config = make_config(corpus_path, tmp_path / "run", steps=3, lr=1e30, warmup_steps=0, max_grad_norm=0.0)
    with pytest.raises(NonFiniteLossError) as caught:
        list(Trainer(config, model_config=TINY_MODEL).steps())
    assert "1e+29" not in str(caught.value) and "1e-4 to 1e-3" in str(caught.value)


# ---- 5. the learning-rate schedule ----------------------------------------------------------------------------
@pytest.mark.parametrize(("warmup", "total"), [(0, 1), (0, 7), (1, 1), (1, 5), (3, 10), (10, 10), (12, 10),
                                               (100, 10_000)])
def test_the_schedule_equals_transformers_linear_schedule_at_every_step(warmup, total, transformers):
    # transformers calls scheduler.step() after optimizer.step(): optimizer step k (1-based) uses lr_lambda(k-1).
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=0.5)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
    theirs = []
    for _ in range(total):
        theirs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    ours = [linear_schedule(step, lr=0.5, warmup_steps=warmup, total_steps=total) for step in range(1, total + 1)]
    assert ours == pytest.approx(theirs, rel=1e-12, abs=0)


def test_a_run_uses_transformers_learning_rate_at_every_step(corpus_path, tmp_path, transformers):
    config = make_config(corpus_path, tmp_path / "run", steps=6, warmup_steps=2, lr=1e-3)
    used = [stats.learning_rate for stats in Trainer(config, model_config=TINY_MODEL).steps()]
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, 2, 6)
    expected = []
    for _ in range(6):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert used == pytest.approx(expected, rel=1e-12)
    assert used[-1] > 0  # the last step still learns; lr reaches 0 only after it


def test_a_fifo_among_a_corpus_folders_files_is_named_not_skipped(tmp_path):
    (tmp_path / "a.txt").write_text("One sentence here. Another one there.\n", encoding="utf-8")
    os.mkfifo(tmp_path / "b.txt")
    error = read_within(tmp_path)
    assert isinstance(error, CorpusError) and "b.txt" in str(error) and "FIFO" in str(error)
