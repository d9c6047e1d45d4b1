"""Treebank words as each family's model reads them (bertcore.analysis.word_inputs): every word's pieces, encoded
alone (with the space byte-level BPE carries), are the pieces the family's tokenizer makes of the whole sentence,
for all 1,000 sentences of the shipped EWT cut and every kind of tokenizer; the layout adds the family's specials
as transformers does; batches keep sentences apart and padding small; sentences that cannot be read are skipped."""

from __future__ import annotations

import pytest
import torch

import bertcore
from bertcore.analysis.treebank import shipped_treebank
from bertcore.analysis.word_inputs import MAX_PADDING, batches, layout_words, space_before_words, word_pieces
from tests.bertcore.analysis_checkpoints import save_wordpiece
from tests.bertcore.test_tokenizer_families import save_albert, save_modernbert, save_roberta, save_xlm_roberta

KINDS = {"wordpiece": save_wordpiece, "roberta": save_roberta, "albert": save_albert, "xlm-roberta": save_xlm_roberta,
         "modernbert": save_modernbert}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, transformers):
    root = tmp_path_factory.mktemp("tokenizers")
    for name, save in KINDS.items():
        save(root / name) if name == "wordpiece" else save(root / name, transformers)
    return {name: root / name for name in KINDS}


class FakeModel:
    """What layout_words asks of a model: its config's longest input."""

    def __init__(self, max_positions: int):
        self.config = bertcore.BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=1, num_attention_heads=1,
                                          intermediate_size=4, max_position_embeddings=max_positions)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*KINDS, "minilm"])
def test_each_words_pieces_are_the_pieces_of_the_sentence(name, folders, transformers, minilm_path):
    folder = minilm_path if name == "minilm" else folders[name]
    tokenizer = bertcore.tokenization.pretrained.tokenizer_from_folder(folder)
    reference = transformers.AutoTokenizer.from_pretrained(folder)
    sentences = [sentence.words for sentence in shipped_treebank("dev")]
    assert space_before_words(tokenizer) == (name in ("roberta", "modernbert"))
    texts = [" ".join(words) for words in sentences]
    expected = reference(texts, add_special_tokens=False)["input_ids"]
    pieces = word_pieces(tokenizer, sentences)
    for words, text, ids, per_word in zip(sentences, texts, expected, pieces, strict=True):
        assert [piece for word in per_word for piece in word] == ids, text
        assert len(per_word) == len(words)
    inputs, skipped = layout_words(FakeModel(4096), tokenizer, sentences)
    assert len(skipped) == 0
    laid_out = reference(texts)
    for row, (item, per_word) in enumerate(zip(inputs, pieces, strict=True)):
        assert list(item.input_ids) == laid_out["input_ids"][row]
        owners = [word for word, word_ids in enumerate(per_word) for _ in word_ids]
        assert [index for index in item.word_index if index >= 0] == owners
        # the layout's specials: the positions of no sentence (an unknown piece is a special id, not a special slot)
        assert [index < 0 for index in item.word_index] == [sequence is None
                                                            for sequence in laid_out.sequence_ids(row)]


def test_batches_hold_similar_lengths_and_give_every_sentence_back_once():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    sentences = [sentence.words for sentence in shipped_treebank("dev")[:150]]
    inputs, _ = layout_words(FakeModel(512), tokenizer, sentences)
    seen, padded, real = [], 0, 0
    for batch in batches(inputs, tokenizer, "cpu", max_tokens=1024):
        size, length = batch.input_ids.shape
        assert size * length <= 1024 or size == 1
        rows = batch.attention_mask.sum(dim=1)
        membership, word_mask = batch.membership(), batch.word_mask()
        assert (size * length - int(rows.sum())) <= MAX_PADDING * size * length
        for row, index in enumerate(batch.indices):
            assert batch.input_ids[row, : int(rows[row])].tolist() == list(inputs[index].input_ids)
            assert membership[row].sum().item() == sum(1 for owner in inputs[index].word_index if owner >= 0)
            assert word_mask[row].sum().item() == len(sentences[index])
        seen += batch.indices
        padded += size * length
        real += int(rows.sum())
    assert sorted(seen) == list(range(len(inputs)))
    assert padded <= 1.1 * real


def test_sentences_too_long_or_with_a_word_without_pieces_are_skipped():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    sentences = [("a", "cat"), ("a", "\u200b", "cat"), tuple("the cat sat on the mat".split())]
    inputs, skipped = layout_words(FakeModel(6), tokenizer, sentences)
    assert [item.index for item in inputs] == [0]
    assert skipped.no_pieces == (1,) and skipped.too_long == (2,) and skipped.indices == (1, 2) and len(skipped) == 2
    assert torch.equal(next(batches(inputs, tokenizer, "cpu")).num_words, torch.tensor([2]))


def test_a_runs_sentences_are_laid_out_once_per_tokenizer_and_length_limit(monkeypatch):
    from bertcore.analysis import word_inputs

    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    sentences = [sentence.words for sentence in shipped_treebank("dev")[:5]]
    first = layout_words(FakeModel(64), tokenizer, sentences)
    calls = []
    original = word_inputs._layout
    monkeypatch.setattr(word_inputs, "_layout", lambda *args: calls.append(args) or original(*args))
    assert layout_words(FakeModel(64), tokenizer, sentences) == first and not calls
    shorter = layout_words(FakeModel(16), tokenizer, sentences)
    assert len(calls) == 1 and len(shorter[1].too_long) > 0
    for count in range(1, 6):
        layout_words(FakeModel(64), tokenizer, sentences[:count])
    assert len(word_inputs._layouts[tokenizer]) == word_inputs.KEPT_LAYOUTS
