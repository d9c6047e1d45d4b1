"""Tokenizer files whose ids are wrong (issue 34): each a TokenizerError naming the file (a CheckpointError naming it
when a checkpoint is loaded), never a model sized by a stray id, a <mask> that is a real token, or the Rust
library's bare Exception or TypeError."""

from __future__ import annotations

import json

import pytest

import bertcore
from bertcore.errors import CheckpointError, TokenizerError
from bertcore.tokenization.pretrained import tokenizer_from_folder
from tests.bertcore.test_tokenizer_families import save_roberta_files


@pytest.fixture
def roberta(tmp_path, transformers):
    """vocab.json + merges.txt + tokenizer_config.json, as older RoBERTa folders are (400 tokens, <mask> = 4)."""
    folder = tmp_path / "roberta"
    save_roberta_files(folder, transformers)
    return folder


def edit_vocab(folder, edit) -> dict:
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    edit(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return vocab


def test_the_undamaged_folder_reads(roberta):
    tokenizer = tokenizer_from_folder(roberta)
    assert tokenizer.vocab_size == 400 and tokenizer.id_to_token(tokenizer.mask_token_id) == "<mask>"


@pytest.mark.parametrize("stray_id", [3_000_000, 10**9])
def test_one_stray_id_is_named_not_a_model_sized_by_it(stray_id, roberta):
    """One id of 3,000,000 sized the model's embedding by it (3.5 GB; 10**9: a 1 TB allocation)."""
    edit_vocab(roberta, lambda vocab: vocab.update({"Ġthe": stray_id}))
    with pytest.raises(TokenizerError, match=rf"vocab\.json gives 'Ġthe' the id {stray_id:,}, but it lists 400 "
                                             r"tokens, whose ids are 0 to 399, each once"):
        tokenizer_from_folder(roberta)


def test_a_vocab_json_without_mask_does_not_give_mask_a_real_tokens_id(roberta):
    """<mask> removed, and tokenizer_config.json naming it: it was added at id 399, which 'ust' holds, so every
    masked position read as a real token (roberta-base: 599 = 'Ġbl')."""
    edit_vocab(roberta, lambda vocab: vocab.pop("<mask>"))
    config = json.loads((roberta / "tokenizer_config.json").read_text(encoding="utf-8"))
    (roberta / "tokenizer_config.json").write_text(json.dumps({**config, "mask_token": "<mask>"}), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"vocab\.json gives '.+' the id 399, but it lists 399 tokens"):
        tokenizer_from_folder(roberta)


def test_two_tokens_of_one_id_are_named(roberta):
    vocab = edit_vocab(roberta, lambda vocab: vocab.update({"Ġthe": vocab["<pad>"]}))
    with pytest.raises(TokenizerError, match=rf"vocab\.json gives '(<pad>|Ġthe)' and '(<pad>|Ġthe)' the same id "
                                             rf"{vocab['<pad>']}"):
        tokenizer_from_folder(roberta)


def test_a_negative_id_is_named_not_a_type_error(roberta):
    edit_vocab(roberta, lambda vocab: vocab.update({"Ġthe": -1}))
    with pytest.raises(TokenizerError, match=r"vocab\.json gives 'Ġthe' the id -1"):
        tokenizer_from_folder(roberta)


def test_a_merge_of_unknown_tokens_is_named_with_its_line(roberta):
    lines = (roberta / "merges.txt").read_text(encoding="utf-8").splitlines()
    lines[3] = "Ġzzq Ġqqz"
    (roberta / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"merges\.txt line 4 merges 'Ġzzq' and 'Ġqqz', but vocab\.json has no "
                                             r"'Ġzzq'"):
        tokenizer_from_folder(roberta)


def test_an_added_token_at_another_id_than_the_config_says_is_named(roberta):
    config = json.loads((roberta / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {"7": {"content": "<mask>", "special": True}}  # vocab.json says 4
    (roberta / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json gives the added token '<mask>' the id 7, but "
                                             r"the vocabulary puts it at 4"):
        tokenizer_from_folder(roberta)


def test_a_tokenizer_json_with_a_stray_id_or_a_shared_id_is_named(tmp_path, roberta_folder):
    """The same in a tokenizer.json: the Rust library takes any ids; the span of them is checked."""
    values = json.loads((roberta_folder / "tokenizer.json").read_text(encoding="utf-8"))
    for name, edit, pattern in (
            ("stray", lambda vocab: vocab.update({"Ġthe": 3_000_000}),
             r"tokenizer\.json numbers its 400 tokens up to 3,000,000 \('Ġthe'\), but no token has the id \d+"),
            ("shared", lambda vocab: vocab.update({"Ġthe": vocab["<pad>"]}),
             r"tokenizer\.json gives '(<pad>|Ġthe)' and '(<pad>|Ġthe)' the same id")):
        folder = tmp_path / name
        folder.mkdir()
        changed = json.loads(json.dumps(values))
        edit(changed["model"]["vocab"])
        (folder / "tokenizer.json").write_text(json.dumps(changed), encoding="utf-8")
        with pytest.raises(TokenizerError, match=pattern):
            tokenizer_from_folder(folder)


def test_an_added_token_a_tokenizer_json_places_on_a_taken_id_is_named(tmp_path, roberta_folder):
    """The Rust library reads it at the next free id (400) instead of the stated 300, which 'Ġg' has."""
    values = json.loads((roberta_folder / "tokenizer.json").read_text(encoding="utf-8"))
    values["added_tokens"].append({**values["added_tokens"][-1], "id": 300, "content": "<extra>"})
    (tmp_path / "tokenizer.json").write_text(json.dumps(values), encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer\.json gives the added token '<extra>' the id 300, but '.+' "
                                             r"has that id, so it would be read at 400"):
        tokenizer_from_folder(tmp_path)


@pytest.mark.slow
def test_a_checkpoint_with_such_a_vocab_json_is_a_checkpoint_error_naming_it(roberta, transformers):
    tokenizer = transformers.AutoTokenizer.from_pretrained(roberta)
    config = transformers.RobertaConfig(vocab_size=400, hidden_size=24, num_hidden_layers=1, num_attention_heads=3,
                                        intermediate_size=37, max_position_embeddings=66,
                                        pad_token_id=tokenizer.pad_token_id)
    transformers.RobertaForMaskedLM(config).save_pretrained(roberta)
    edit_vocab(roberta, lambda vocab: vocab.update({"Ġthe": 3_000_000}))
    with pytest.raises(CheckpointError, match=rf"cannot read the vocabulary of {roberta}: .*vocab\.json gives 'Ġthe' "
                                              r"the id 3,000,000"):
        bertcore.load_pretrained(roberta)


def test_a_bpe_tokenizer_json_that_encodes_none_of_its_vocabulary_is_refused(tmp_path):
    """The fault audit's "vocab missing, a tokenizer.json of a BPE model": no merges and no unknown token, so every
    word vanished; the folder loaded and each input then failed with a message blaming the text."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(20))]
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"model": {"type": "BPE", "vocab": {word: i for i, word in enumerate(words)}, "merges": []}}))
    with pytest.raises(TokenizerError, match="encodes none of its own first 20 vocabulary entries"):
        tokenizer_from_folder(tmp_path)


def test_a_bpe_tokenizer_json_whose_merges_build_its_words_reads(tmp_path):
    """The same file with the merges that build its words is a tokenizer (the check refuses only vanishing)."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w", "0", "1", "w0", "w1"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"model": {"type": "BPE", "vocab": {word: i for i, word in enumerate(words)}, "merges": ["w 0", "w 1"]}}))
    tokenizer = tokenizer_from_folder(tmp_path)
    assert tokenizer.tokenize("w1") == ["w1"]
