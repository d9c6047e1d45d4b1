"""Pretraining with another family's tokenizer: `--vocab` takes a tokenizer folder (or its tokenizer.json), not only
a vocab.txt, and the run's checkpoints, final/ and a resumed run keep that tokenizer."""

from __future__ import annotations

import argparse

import pytest

from bertcore.cli.train import make_model_config
from bertcore.models.checkpoint import load_pretrained
from bertcore.tokenization.pretrained import PretrainedTokenizer, tokenizer_from_folder, tokenizer_from_path
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from bertcore.training.pretraining import Trainer
from tests.bertcore.test_data import WORDS
from tests.bertcore.test_objectives import SIZES, make_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ordered_corpus(tmp_path_factory):
    """Sixty documents of whole sentences beside a WordPiece vocab.txt of their words."""
    sentences = [" ".join(WORDS[i % 12 : i % 12 + 4]).capitalize() + "." for i in range(8)]
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "corpus.txt").write_text("\n\n".join("\n".join(sentences[: 4 + i % 5]) for i in range(60)) + "\n",
                                       encoding="utf-8")
    BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True).save(folder)
    return folder / "corpus.txt"


def test_tokenizer_from_path_reads_a_folder_a_tokenizer_json_or_a_vocab_txt(roberta_folder, ordered_corpus):
    for path in (roberta_folder, roberta_folder / "tokenizer.json"):
        tokenizer = tokenizer_from_path(path)
        assert isinstance(tokenizer, PretrainedTokenizer) and tokenizer.piece_style == "byte_level"
    assert isinstance(tokenizer_from_path(ordered_corpus.parent / "vocab.txt"), BertTokenizer)


def test_the_command_line_sizes_a_model_to_a_tokenizer_folder(roberta_folder, tmp_path):
    config = make_config(tmp_path / "corpus.txt", tmp_path / "run", arch="roberta", vocab=str(roberta_folder))
    args = argparse.Namespace(resume=None, hidden_size=32, num_hidden_layers=None, num_attention_heads=None,
                              intermediate_size=None)
    assert make_model_config(args, config).vocab_size == tokenizer_from_folder(roberta_folder).vocab_size


@pytest.mark.slow
def test_a_roberta_run_trains_saves_and_resumes_with_its_tokenizer_json(roberta_folder, ordered_corpus, tmp_path):
    run = tmp_path / "run"
    config = make_config(ordered_corpus, run, arch="roberta", vocab=str(roberta_folder), steps=2, warmup_steps=0,
                         checkpoint_every=1)
    list(Trainer(config, model_config=SIZES).steps())
    model, tokenizer = load_pretrained(run / "final")
    assert isinstance(tokenizer, PretrainedTokenizer) and tokenizer.layouts[1] == "<s> A </s></s> B </s>"
    assert type(model).__name__ == "RobertaForMaskedLM"
    assert (run / "tokenizer.json").is_file() and not (run / "vocab.txt").exists()
    with Trainer(config.replace(steps=3), model_config=SIZES, resume=True) as resumed:
        assert isinstance(resumed.task.tokenizer, PretrainedTokenizer)
        list(resumed.steps())
    assert isinstance(load_pretrained(run / "final")[1], PretrainedTokenizer)


@pytest.mark.parametrize(("objective", "arch"), [("mlm+nsp", "bert"), ("mlm+sop", "albert")])
def test_a_pair_objective_refuses_a_tokenizer_with_another_pair_layout(roberta_folder, ordered_corpus, tmp_path,
                                                                       objective, arch):
    # RoBERTa lays a pair out as <s> A </s></s> B </s> in one segment: NSP / SOP batches in BERT's layout would
    # teach the model a layout its tokenizer never produces.
    config = make_config(ordered_corpus, tmp_path / "run", arch=arch, objective=objective,
                         vocab=str(roberta_folder), steps=1, warmup_steps=0)
    with pytest.raises(ValueError, match="lays a pair out as <s> A </s> </s> B </s>"):
        list(Trainer(config, model_config=SIZES).steps())
