"""Folders whose embedding table has more rows than their tokenizer has ids (issue 34), as transformers opens them.

A tokenizer.json, a vocab.json + merges.txt or a SentencePiece model states every token's id, so no id can shift:
such a folder opens, says so in its description (the tokenizer's vocabulary_note, which the app's model line shows),
and saves and opens again. The checkpoints are tiny real transformers ones built here (a RoBERTa of 400 tokens in
403 rows, an ALBERT of 92 in 94), and transformers' own load of the same folder is the reference for the ids and
the outputs. A vocab.txt shorter than the table with nothing to confirm it is still refused: its ids are its line
numbers, which a lost line shifts.
"""

from __future__ import annotations

import json

import pytest
import torch

import bertcore
from bertcore.errors import CheckpointError
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.bertcore.test_sentencepiece_model import spm_only, train_sentencepiece
from tests.bertcore.test_tokenizer_families import save_roberta, save_roberta_files

TEXTS = [("The cat sat on the mat.", None), ("Hello, world!", "Is it raining?"), ("the", "dog ran away")]


def roberta_folder(folder, transformers, rows: int, *, files_only: bool = False):
    """A RoBERTa masked LM of `rows` embedding rows and a byte-level BPE tokenizer of 400 tokens: its tokenizer.json
    (with vocab.json + merges.txt, as transformers saves it), or only vocab.json + merges.txt (older folders)."""
    (save_roberta_files if files_only else save_roberta)(folder, transformers)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert len(tokenizer) == 400
    torch.manual_seed(0)
    config = transformers.RobertaConfig(vocab_size=rows, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                                        intermediate_size=37, max_position_embeddings=66, type_vocab_size=1,
                                        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
                                        eos_token_id=tokenizer.sep_token_id)
    transformers.RobertaForMaskedLM(config).eval().save_pretrained(folder)
    return folder


def albert_folder(folder, transformers, sentencepiece, rows: int):
    """An ALBERT masked LM of `rows` rows whose tokenizer is only its spiece.model of 92 pieces (and the configs)."""
    source = folder.parent / f"{folder.name}-spiece.model"
    data = train_sentencepiece(sentencepiece, vocab_size=92, model_type="unigram", pad_id=0, unk_id=1, bos_id=2,
                               eos_id=3, bos_piece="[CLS]", eos_piece="[SEP]", control_symbols=["[MASK]"])
    source.write_bytes(data)
    transformers.AlbertTokenizer(vocab_file=str(source)).save_pretrained(folder)
    spm_only(folder, "spiece.model", data)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert len(tokenizer) == 92
    torch.manual_seed(0)
    config = transformers.AlbertConfig(vocab_size=rows, embedding_size=10, hidden_size=24, num_hidden_layers=2,
                                       num_attention_heads=3, intermediate_size=37, max_position_embeddings=64,
                                       pad_token_id=tokenizer.pad_token_id)
    transformers.AlbertForMaskedLM(config).eval().save_pretrained(folder)
    return folder


def assert_opens_as_transformers_opens_it(folder, transformers, num_tokens: int, rows: int):
    """bertcore's ids and masked-LM logits equal transformers' on the same folder; the description says why the
    table is longer."""
    model, tokenizer = bertcore.load_pretrained(folder)
    reference_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    reference = transformers.AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert (tokenizer.vocab_size, model.config.vocab_size) == (num_tokens, rows)
    assert tokenizer.vocabulary_note == f"{num_tokens} tokens for {rows} embedding rows ({rows - num_tokens} unused)"
    for text_a, text_b in TEXTS:
        encoding = tokenizer.encode(text_a, text_b)
        expected = reference_tokenizer(text_a, text_b)
        assert encoding.input_ids == expected["input_ids"], (text_a, text_b)
        inputs = {"input_ids": torch.tensor([encoding.input_ids])}
        if "token_type_ids" in expected:
            inputs["token_type_ids"] = torch.tensor([encoding.segment_ids])
        with torch.no_grad():
            ours, theirs = model(**inputs).logits, reference(**inputs).logits
        assert ours.shape[-1] == rows
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    return model, tokenizer


def assert_saves_and_opens_again(model, tokenizer, folder, transformers, num_tokens: int, rows: int):
    saved = bertcore.save_pretrained(model, tokenizer, folder)  # refused as a mismatch before
    again, again_tokenizer = bertcore.load_pretrained(saved)
    assert (again_tokenizer.vocab_size, again.config.vocab_size) == (num_tokens, rows)
    reference = transformers.AutoTokenizer.from_pretrained(saved)
    for text_a, text_b in TEXTS:
        assert again_tokenizer.encode(text_a, text_b).input_ids == reference(text_a, text_b)["input_ids"]
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], tensor, rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("files_only", [False, True], ids=["tokenizer.json", "vocab.json + merges.txt"])
def test_a_roberta_of_400_tokens_in_403_rows_opens_and_round_trips(files_only, tmp_path, transformers):
    folder = roberta_folder(tmp_path / "roberta", transformers, 403, files_only=files_only)
    model, tokenizer = assert_opens_as_transformers_opens_it(folder, transformers, 400, 403)
    assert_saves_and_opens_again(model, tokenizer, tmp_path / "saved", transformers, 400, 403)


@pytest.mark.slow
def test_an_albert_of_92_pieces_in_94_rows_opens_and_round_trips(tmp_path, transformers):
    sentencepiece = pytest.importorskip("sentencepiece")
    folder = albert_folder(tmp_path / "albert", transformers, sentencepiece, 94)
    model, tokenizer = assert_opens_as_transformers_opens_it(folder, transformers, 92, 94)
    assert_saves_and_opens_again(model, tokenizer, tmp_path / "saved", transformers, 92, 94)


@pytest.mark.slow
def test_a_tokenizer_with_more_ids_than_rows_is_still_refused(tmp_path, transformers):
    folder = roberta_folder(tmp_path / "roberta", transformers, 399)
    with pytest.raises(CheckpointError, match=r"tokenizer\.json has 400 tokens but config\.json says vocab_size 399: "
                                              r"some tokens would have no embedding"):
        bertcore.load_pretrained(folder)


# ---- WordPiece: a vocab.txt states ids only by its line numbers --------------------------------------------------

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(95))]  # 100 tokens


def bert_folder(folder, rows: int) -> tuple[BertTokenizer, object]:
    tokenizer = BertTokenizer(WORDS)
    model = bertcore.BertForMaskedLM(bertcore.BertConfig(vocab_size=rows, hidden_size=24, num_hidden_layers=1,
                                                         num_attention_heads=3, intermediate_size=37,
                                                         max_position_embeddings=32))
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.normal_()
    return tokenizer, model


def write_bert(folder, rows: int):
    """A BERT of `rows` rows and a 100-line vocab.txt, written as transformers writes it (no vocab_size record)."""
    from bertcore.models.checkpoint import write_pretrained_files

    tokenizer, model = bert_folder(folder, rows)
    folder.mkdir(parents=True)
    write_pretrained_files(model, tokenizer, folder)
    (folder / "tokenizer_config.json").unlink()
    return tokenizer


def test_a_vocab_txt_shorter_than_the_table_is_still_refused(tmp_path):
    """103 rows for 100 lines: no padding rule makes 103 of 100, and nothing says the lines are all there."""
    write_bert(tmp_path / "bert", 103)
    with pytest.raises(CheckpointError, match=r"vocab\.txt has 100 tokens but config\.json says vocab_size 103: a "
                                              r"vocabulary may be shorter only by the padding"):
        bertcore.load_pretrained(tmp_path / "bert")
    # a record of its size alone (tokenizer_config.json's vocab_size) is today's rule too: a count is no list of ids
    (tmp_path / "bert" / "tokenizer_config.json").write_text(json.dumps({"vocab_size": 100}), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"vocab\.txt has 100 tokens but config\.json says vocab_size 103"):
        bertcore.load_pretrained(tmp_path / "bert")


def test_a_wordpiece_tokenizer_json_states_its_ids_and_round_trips(tmp_path):
    """As transformers 5 saves a BERT: only a tokenizer.json, whose WordPiece model lists every id; then bertcore
    saves vocab.txt and that tokenizer.json, which confirms the vocab.txt line by line."""
    tokenizer = write_bert(tmp_path / "bert", 103)
    (tmp_path / "bert" / "vocab.txt").unlink()
    tokenizer._tokenizer.save(str(tmp_path / "bert" / "tokenizer.json"))
    model, loaded = bertcore.load_pretrained(tmp_path / "bert")
    assert loaded.vocabulary_note == "100 tokens for 103 embedding rows (3 unused)"
    saved = bertcore.save_pretrained(model, loaded, tmp_path / "saved")
    assert (saved / "vocab.txt").is_file() and (saved / "tokenizer.json").is_file()
    again, again_tokenizer = bertcore.load_pretrained(saved)
    assert again_tokenizer.vocab == WORDS and again.config.vocab_size == 103
    assert again_tokenizer.vocabulary_note == loaded.vocabulary_note
    bertcore.save_pretrained(again, again_tokenizer, tmp_path / "saved-twice")  # and again
    assert bertcore.load_pretrained(tmp_path / "saved-twice")[0].config.vocab_size == 103


def test_a_tokenizer_json_of_other_tokens_confirms_nothing(tmp_path):
    write_bert(tmp_path / "bert", 103)
    other = BertTokenizer([*WORDS[:50], *(f"x{i}" for i in range(50))])
    other._tokenizer.save(str(tmp_path / "bert" / "tokenizer.json"))
    with pytest.raises(CheckpointError, match=r"vocab\.txt has 100 tokens but config\.json says vocab_size 103"):
        bertcore.load_pretrained(tmp_path / "bert")


def test_a_model_and_a_vocab_txt_tokenizer_that_do_not_belong_together_are_still_not_saved(tmp_path):
    tokenizer, model = bert_folder(tmp_path, 103)
    with pytest.raises(CheckpointError, match="do not belong together"):
        bertcore.save_pretrained(model, tokenizer, tmp_path / "mismatched")


def test_equal_sizes_have_no_note(tmp_path):
    from bertcore.models.checkpoint import read_checkpoint

    write_bert(tmp_path / "bert", 100)
    contents = read_checkpoint(tmp_path / "bert")
    assert contents.vocabulary_note is None and contents.tokenizer.vocabulary_note is None


def test_the_note_is_on_the_contents_too(tmp_path):
    from bertcore.models.checkpoint import read_checkpoint

    tokenizer = write_bert(tmp_path / "bert", 104)  # 100 rounded up to a multiple of 8, its size recorded
    (tmp_path / "bert" / "tokenizer_config.json").write_text(json.dumps({"vocab_size": 100}), encoding="utf-8")
    contents = read_checkpoint(tmp_path / "bert")
    assert contents.vocabulary_note == "100 tokens for 104 embedding rows (4 unused)"
    assert contents.tokenizer.vocab == tokenizer.vocab
