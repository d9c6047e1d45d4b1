"""Folders whose tokenizer is only a SentencePiece model (ALBERT's spiece.model, XLM-RoBERTa's
sentencepiece.bpe.model), read by bertcore.tokenization.sentencepiece_model without the `sentencepiece` package:
the parsed pieces and settings equal SentencePiece's own, and ids, tokens, offsets, pairs and truncation equal
transformers.AutoTokenizer on the same folder. The models are trained here with `sentencepiece` (no network), the
folders written as transformers writes each family's, then left with the model file and the configs only."""

import io
import json
import shutil

import pytest

from bertcore.errors import TokenizerError
from bertcore.files.resources import default_corpus_path
from bertcore.tokenization.pretrained import PretrainedTokenizer, tokenizer_from_folder
from bertcore.tokenization.sentencepiece_model import BYTE, CONTROL, UNKNOWN, family_of, parse_model_proto
from tests.reference_tokenizers import needs_sound_truncation
from tests.sentencepiece_files import proto_field

TEXTS = [
    "Hello, world!",
    "The Café served naïve Ångström crème brûlée.",
    "  leading and   multiple   spaces\n\nnewlines\ttabs ",
    "MiXeD CaSe WoRdS and ALLCAPS 3.14159 and 1,000,000",
    "``Quoted'' text, don't stop-believing (ok)",
    "unknown: 中文字符 😀 ① ｆｕｌｌｗｉｄｔｈ ﬁ",
    "the [MASK] sat on the <mask> mat",
]
PAIRS = [
    ("To be, or not to be: that is the question.", "Whether 'tis nobler in the mind to suffer"),
    ("Crème   brûlée", "😀 ?!?! ÀÉÎ"),
    ("one", "two three four five six seven eight nine ten eleven twelve thirteen fourteen"),
]


def corpus_lines() -> list[str]:
    return default_corpus_path().read_text(encoding="utf-8").splitlines()[:300] + TEXTS + [a for pair in PAIRS
                                                                                            for a in pair]


def train_sentencepiece(sentencepiece, vocab_size=300, **settings) -> bytes:
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(corpus_lines()), model_writer=model,
                                             vocab_size=vocab_size, character_coverage=0.98, minloglevel=2,
                                             **settings)
    return model.getvalue()


def spm_only(folder, model_name: str, data: bytes) -> None:
    """Leave what an older Hub folder has: the SentencePiece model and the configs, no tokenizer.json."""
    (folder / "tokenizer.json").unlink(missing_ok=True)
    (folder / model_name).write_bytes(data)


@pytest.fixture(scope="module")
def sentencepiece():
    return pytest.importorskip("sentencepiece")


@pytest.fixture(scope="module")
def models(sentencepiece):
    return {
        # ALBERT's own ids: <pad> <unk> [CLS] [SEP] then [MASK] as a control piece
        "albert": train_sentencepiece(sentencepiece, model_type="unigram", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                      bos_piece="[CLS]", eos_piece="[SEP]", control_symbols=["[MASK]"]),
        # XLM-R's file: <unk> <s> </s> first, which fairseq renumbers
        "xlm-roberta": train_sentencepiece(sentencepiece, model_type="unigram", unk_id=0, bos_id=1, eos_id=2),
        "bpe": train_sentencepiece(sentencepiece, model_type="bpe", unk_id=0, bos_id=-1, eos_id=-1, pad_id=1,
                                   pad_piece="[PAD]", control_symbols=["[CLS]", "[SEP]", "[MASK]"]),
    }


@pytest.fixture(scope="module")
def folders(models, tmp_path_factory, transformers):
    root = tmp_path_factory.mktemp("sentencepiece")
    source = root / "source"
    source.mkdir()
    for name, data in models.items():
        (source / name).write_bytes(data)
    saved = {
        "albert": ("spiece.model", transformers.AlbertTokenizer, {}),
        "albert-cased": ("spiece.model", transformers.AlbertTokenizer, {"do_lower_case": False,
                                                                         "keep_accents": True}),
        "xlm-roberta": ("sentencepiece.bpe.model", transformers.XLMRobertaTokenizer, {}),
    }
    folders = {}
    for name, (model_name, tokenizer_class, settings) in saved.items():
        model = name.removesuffix("-cased")
        tokenizer_class(vocab_file=str(source / model), **settings).save_pretrained(root / name)
        spm_only(root / name, model_name, models[model])
        folders[name] = root / name
    folders["bpe"] = root / "bpe"
    folders["bpe"].mkdir()
    (folders["bpe"] / "spiece.model").write_bytes(models["bpe"])
    return folders


@pytest.fixture(scope="module")
def references(folders, transformers):
    return {name: transformers.AutoTokenizer.from_pretrained(folder) for name, folder in folders.items()
            if name != "bpe"}


def assert_same(ours, reference, text_a, text_b=None, max_length=512):
    expected = reference(text_a, text_b, truncation="longest_first", max_length=max_length,
                         return_special_tokens_mask=True, return_token_type_ids=True,
                         return_offsets_mapping=reference.is_fast)
    got = ours.encode(text_a, text_b, max_length=max_length)
    assert got.input_ids == expected["input_ids"], (text_a, text_b)
    assert got.tokens == reference.convert_ids_to_tokens(expected["input_ids"])
    assert got.special_tokens_mask == expected["special_tokens_mask"]
    assert got.segment_ids == expected["token_type_ids"]
    if reference.is_fast:
        assert got.offsets == [tuple(offset) for offset in expected["offset_mapping"]], (text_a, text_b)
    return got


def test_the_model_file_is_read_as_sentencepiece_reads_it(models, sentencepiece):
    for name, data in models.items():
        processor = sentencepiece.SentencePieceProcessor(model_proto=data)
        model = parse_model_proto(data, name)
        assert len(model.pieces) == processor.get_piece_size() == 300
        assert [p.piece for p in model.pieces] == [processor.id_to_piece(i) for i in range(300)]
        assert [p.score for p in model.pieces] == pytest.approx([processor.get_score(i) for i in range(300)])
        assert [p.type == CONTROL for p in model.pieces] == [processor.is_control(i) for i in range(300)]
        assert [p.type == UNKNOWN for p in model.pieces] == [processor.is_unknown(i) for i in range(300)]
        assert (model.unk_id, model.bos_id, model.eos_id, model.pad_id) == (
            processor.unk_id(), processor.bos_id(), processor.eos_id(), processor.pad_id())
        assert model.precompiled_charsmap  # nmt_nfkc's table
        assert model.model_type == (2 if name == "bpe" else 1)
    assert parse_model_proto(models["bpe"], "bpe").pad_id == 1
    assert parse_model_proto(models["albert"], "albert").bos_id == 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["albert", "albert-cased", "xlm-roberta"])
def test_single_sentences_and_pairs_match_transformers(name, folders, references):
    ours = tokenizer_from_folder(folders[name])
    assert isinstance(ours, PretrainedTokenizer)
    assert ours.piece_style == "sentencepiece"
    for text in TEXTS:
        assert_same(ours, references[name], text)
    for text_a, text_b in PAIRS:
        assert_same(ours, references[name], text_a, text_b)
    assert ours.layouts[1] == {"albert": "[CLS] A [SEP] B [SEP]", "albert-cased": "[CLS] A [SEP] B [SEP]",
                               "xlm-roberta": "<s> A </s></s> B </s>"}[name]
    assert ours.vocab_size == len(references[name])
    assert ours.mask_token_id == references[name].mask_token_id
    assert ours.pad_token_id == references[name].pad_token_id
    assert ours.decode(ours.encode(PAIRS[0][0]).input_ids) == references[name].decode(
        references[name](PAIRS[0][0])["input_ids"], skip_special_tokens=True)


@needs_sound_truncation
@pytest.mark.slow
@pytest.mark.parametrize("max_length", [6, 11, 17])
def test_truncation_matches_transformers_longest_first(max_length, folders, references):
    for name in ("albert", "xlm-roberta"):
        ours = tokenizer_from_folder(folders[name])
        for text_a, text_b in PAIRS:
            got = assert_same(ours, references[name], text_a, text_b, max_length=max_length)
            assert len(got.input_ids) <= max_length
        assert_same(ours, references[name], TEXTS[1], max_length=max_length)


@pytest.mark.slow  # the folders are written by transformers, whose import takes seconds
def test_cased_albert_keeps_case_and_accents_as_its_config_says(folders):
    lower = tokenizer_from_folder(folders["albert"]).encode("The naïve")
    cased = tokenizer_from_folder(folders["albert-cased"]).encode("The naïve")
    assert "".join(lower.tokens[1:-1]) == "▁the▁naive"
    assert "".join(cased.tokens[1:-1]).startswith("▁The▁na")


@pytest.mark.slow  # the folders are written by transformers, whose import takes seconds
def test_xlm_roberta_ids_are_sentencepieces_renumbered_as_fairseq_did(folders, models, sentencepiece):
    processor = sentencepiece.SentencePieceProcessor(model_proto=models["xlm-roberta"])
    ours = tokenizer_from_folder(folders["xlm-roberta"])
    for text in (text for text in TEXTS if "<mask>" not in text):  # SentencePiece does not know <mask>
        expected = [3 if i == processor.unk_id() else i + 1 for i in processor.encode(text)]
        assert ours.encode(text).input_ids == [0, *expected, 2], text
    assert ours.mask_token_id == ours.vocab_size - 1 == 301


@pytest.mark.slow  # the folders are written by transformers, whose import takes seconds
def test_a_bpe_model_without_family_encodes_as_sentencepiece(folders, models, sentencepiece):
    processor = sentencepiece.SentencePieceProcessor(model_proto=models["bpe"])
    ours = tokenizer_from_folder(folders["bpe"])
    assert ours.layouts[1] == "[CLS] A [SEP] B [SEP]"
    # a control piece typed in the text is that token (the masking panel's [MASK]); SentencePiece splits it
    assert ours.encode("a [MASK] b").input_ids.count(ours.mask_token_id) == 1
    for text in (text for text in TEXTS if "[MASK]" not in text):
        encoding = ours.encode(text)
        assert encoding.input_ids[1:-1] == processor.encode(text), text
        # SentencePiece names an unknown piece by the text it stands for; we name it <unk>, as transformers does
        assert [token for token in encoding.tokens[1:-1] if token != "<unk>"] == [
            piece for piece, piece_id in zip(processor.encode(text, out_type=str), processor.encode(text), strict=True)
            if piece_id != processor.unk_id()], text


def test_fields_in_any_order_negative_ids_and_unknown_fields_are_read():
    """What SentencePiece never writes but protobuf allows: fields out of order, fields we skip, a two-byte key,
    a negative int32 as ten bytes, a type number of no type (read as protobuf reads an enum: the default, NORMAL)."""
    pieces = [proto_field(3, UNKNOWN) + proto_field(2, 0.0) + proto_field(1, b"<unk>"),
              proto_field(2, -1.5) + proto_field(1, "▁ü".encode()) + proto_field(99, b"skipped"),
              proto_field(1, b"x") + proto_field(2, -2.0) + proto_field(3, 9)]
    pieces += [proto_field(1, f"<0x{byte:02X}>".encode()) + proto_field(3, BYTE) for byte in range(256)]
    trainer = proto_field(43, -1) + proto_field(40, 0) + proto_field(3, 1) + proto_field(35, 1)
    normalizer = proto_field(4, 0) + proto_field(1, b"identity")
    data = b"".join(proto_field(1, piece) for piece in pieces) + proto_field(2, trainer) + proto_field(3, normalizer)
    model = parse_model_proto(data, "hand-made")
    assert [tuple(piece) for piece in model.pieces[:3]] == [("<unk>", 0.0, UNKNOWN), ("▁ü", -1.5, 1), ("x", -2.0, 1)]
    assert (model.pad_id, model.unk_id, model.byte_fallback) == (-1, 0, True)
    assert (model.normalizer_name, model.remove_extra_whitespaces, model.add_dummy_prefix) == ("identity", False, True)
    # SentencePiece takes the piece of type UNKNOWN for unknown text, transformers trainer_spec's unk_id: a file
    # where the two differ is damaged, whichever it is read by
    with pytest.raises(TokenizerError, match=r"hand-made is not a SentencePiece model \(its unknown piece is piece "
                                             r"0, but its trainer settings say 5\)"):
        parse_model_proto(data + proto_field(2, proto_field(40, 5)), "hand-made")


def test_byte_fallback_spells_unknown_characters_as_sentencepiece_does(models, sentencepiece, tmp_path):
    data = train_sentencepiece(sentencepiece, 400, model_type="unigram", byte_fallback=True, unk_id=0, bos_id=-1,
                               eos_id=-1, pad_id=1, pad_piece="[PAD]", control_symbols=["[CLS]", "[SEP]", "[MASK]"])
    (tmp_path / "spiece.model").write_bytes(data)
    processor = sentencepiece.SentencePieceProcessor(model_proto=data)
    ours = tokenizer_from_folder(tmp_path)
    for text in (text for text in TEXTS if "[MASK]" not in text):
        encoding = ours.encode(text)
        assert encoding.input_ids[1:-1] == processor.encode(text), text
        assert encoding.tokens[1:-1] == processor.encode(text, out_type=str), text
    assert "<0xF0>" in ours.encode("😀").tokens
    assert ours.decode(ours.encode("a 😀 b").input_ids) == processor.decode(processor.encode("a 😀 b"))


@pytest.mark.slow  # the folders are written by transformers, whose import takes seconds
@pytest.mark.parametrize("name", ["albert", "xlm-roberta"])
def test_a_folder_without_tokenizer_config_takes_the_family_from_config_json(name, folders, tmp_path):
    """As xlm-roberta-base and albert-base-v2 were first uploaded: the model file and config.json only."""
    model_name = "spiece.model" if name == "albert" else "sentencepiece.bpe.model"
    shutil.copy(folders[name] / model_name, tmp_path / model_name)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": name}), encoding="utf-8")
    bare, full = tokenizer_from_folder(tmp_path), tokenizer_from_folder(folders[name])
    for text_a, text_b in PAIRS:
        assert bare.encode(text_a, text_b).input_ids == full.encode(text_a, text_b).input_ids
    assert bare.layouts == full.layouts


def test_the_family_comes_from_the_tokenizer_class_else_the_model_type():
    assert family_of({"tokenizer_class": "AlbertTokenizerFast"}, {"model_type": "xlm-roberta"}) == "albert"
    assert family_of({}, {"model_type": "xlm-roberta"}) == "xlm-roberta"
    assert family_of({}, {}) == "sentencepiece"


@pytest.mark.slow  # the folders are written by transformers, whose import takes seconds
def test_a_saved_tokenizer_reads_back_in_bertcore_and_transformers(folders, references, tmp_path, transformers):
    ours = tokenizer_from_folder(folders["albert"])
    assert ours.save(tmp_path).name == "tokenizer.json"
    assert (tmp_path / "spiece.model").read_bytes() == (folders["albert"] / "spiece.model").read_bytes()
    text_a, text_b = PAIRS[1]
    assert tokenizer_from_folder(tmp_path).encode(text_a, text_b).input_ids == ours.encode(text_a, text_b).input_ids
    again = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert again(text_a, text_b)["input_ids"] == references["albert"](text_a, text_b)["input_ids"]


@pytest.mark.parametrize("damage", ["truncated", "text", "empty", "bad utf-8"])
def test_a_damaged_model_file_is_a_tokenizer_error_naming_it(damage, models, tmp_path):
    data = models["albert"]
    damaged = {"truncated": data[: len(data) // 2], "text": json.dumps({"model": "spiece"}).encode(),
               "empty": b"", "bad utf-8": b"\x0a\x04\x0a\x02\xff\xfe"}[damage]
    (tmp_path / "spiece.model").write_bytes(damaged)
    with pytest.raises(TokenizerError, match=r"spiece\.model is not a SentencePiece model \(.+\); the file is "
                                             r"damaged"):
        tokenizer_from_folder(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["albert", "xlm-roberta"])
def test_a_model_folder_with_only_a_sentencepiece_model_loads(name, folders, references, tmp_path, transformers):
    import torch

    import bertcore
    from bertcore.analysis.inspection import inspect
    from bertcore.data.masking import mask_exactly

    folder = tmp_path / name
    shutil.copytree(folders[name], folder)
    reference = references[name]
    sizes = dict(vocab_size=len(reference), hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                 intermediate_size=37, pad_token_id=reference.pad_token_id)
    torch.manual_seed(0)
    if name == "albert":
        reference_model = transformers.AlbertForMaskedLM(
            transformers.AlbertConfig(**sizes, embedding_size=10, max_position_embeddings=64))
    else:
        reference_model = transformers.XLMRobertaForMaskedLM(transformers.XLMRobertaConfig(
            **sizes, max_position_embeddings=66, bos_token_id=reference.cls_token_id,
            eos_token_id=reference.sep_token_id))
    reference_model.eval().save_pretrained(folder)

    model, tokenizer = bertcore.load_pretrained(folder)

    encoding = tokenizer.encode(*PAIRS[1])
    assert encoding.input_ids == reference(*PAIRS[1])["input_ids"]
    with torch.no_grad():
        expected = reference_model(torch.tensor([encoding.input_ids]),
                                   token_type_ids=torch.tensor([encoding.segment_ids])).logits
        got = model(torch.tensor([encoding.input_ids]), token_type_ids=torch.tensor([encoding.segment_ids])).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # what the Inspect tab asks of the folder: a masked position predicted by the model's own MLM head
    masking = mask_exactly(encoding, tokenizer, [2])
    assert masking.masked_tokens[2] == reference.mask_token
    inspection = inspect(model, tokenizer, *PAIRS[1], masking=masking, top_k=3)
    assert inspection.attentions.shape[-1] == len(encoding.input_ids)
    with torch.no_grad():
        masked_logits = reference_model(torch.tensor([masking.masked_ids]),
                                        token_type_ids=torch.tensor([encoding.segment_ids])).logits[0]
    assert inspection.predictions[0].top_ids[0] == int(masked_logits[2].argmax())
    saved = tmp_path / f"{name}-saved"
    bertcore.save_pretrained(model, tokenizer, saved)
    assert transformers.AutoTokenizer.from_pretrained(saved)(*PAIRS[1])["input_ids"] == encoding.input_ids
    assert bertcore.load_pretrained(saved)[1].encode(*PAIRS[1]).input_ids == encoding.input_ids
