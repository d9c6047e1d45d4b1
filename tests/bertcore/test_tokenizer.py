"""BertTokenizer: parity with HF's BERT tokenizers on MiniLM's uncased vocabulary, layout, truncation, errors."""

import json

import pytest

from bertcore.files.resources import default_corpus_path, default_vocab_path
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer, TokenizerError

SENTENCES = [
    "Hello, world!",
    "The café served naïve Ångström crème brûlée.",
    "Über straße façade, e\u0301 combining",
    "中文字符 and 日本語 and 한국어",
    "I love 🤗 and 😀!!",
    "?!?!... -- --- ((nested)) [brackets] {braces}",
    "a" * 150 + " short " + "b" * 100,  # over 100 characters -> one [UNK]; exactly 100 still splits
    "MiXeD CaSe WoRdS and ALLCAPS",
    "3.14159 and 1,000,000 and the 42nd of 2024",
    "tab\there\x00null\u200bzero\u200dwidth\u00adsoft\ufeffbom\x7f\x85 line\u2028sep",
    "the [MASK] sat on [SEP] the mat, not the [mask]",
    "don't stop-believing (ok)   multiple   spaces\n\nnewlines",
    "İstanbul ﬁ ǅ ß ΣΑΣ",
]
PAIRS = [
    ("To be, or not to be: that is the question.", "Whether 'tis nobler in the mind to suffer"),
    ("中文字符", "café 😀 ?!?!"),
    ("MiXeD", "a" * 120),
    ("one", "two three four five six seven"),
]
SLOW_DISAGREES = {"İstanbul ﬁ ǅ ß ΣΑΣ"}  # Python's str.lower writes a final sigma, the Rust normaliser does not


@pytest.fixture(scope="module")
def ours(minilm_path):
    return BertTokenizer.from_vocab_file(minilm_path / "vocab.txt")


@pytest.fixture(scope="module")
def reference_fast(minilm_path, transformers):
    # transformers 5 names the Rust-backed class BertTokenizer; 4.x called it BertTokenizerFast
    fast_class = getattr(transformers, "BertTokenizerFast", None) or transformers.BertTokenizer
    return fast_class.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def reference_slow(minilm_path, transformers):
    slow_class = getattr(transformers, "BertTokenizerLegacy", None)
    if slow_class is None and hasattr(transformers, "BertTokenizerFast"):
        slow_class = transformers.BertTokenizer  # 4.x: the pure-python one
    if slow_class is None:
        pytest.skip("this transformers has no pure-python BERT tokenizer")
    return slow_class.from_pretrained(minilm_path)


@pytest.fixture(scope="module")
def shakespeare():
    return BertTokenizer.from_vocab_file(default_vocab_path())


def _assert_matches(ours_encoding, reference):
    assert ours_encoding.input_ids == reference["input_ids"]
    assert ours_encoding.segment_ids == reference["token_type_ids"]
    assert ours_encoding.attention_mask == reference["attention_mask"]


# ---- parity with transformers ---------------------------------------------------------------------------


def test_loads_minilm_vocab(ours):
    assert ours.vocab_size == 30522
    assert ours.lowercase is True  # from tokenizer_config.json's do_lower_case
    ids = (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id)
    assert ids == (0, 100, 101, 102, 103)  # a loaded vocabulary keeps its own ids
    assert ours.special_token_ids == frozenset(ids)
    assert ours.id_to_token(2003) == "is" and ours.token_to_id("is") == 2003
    assert ours.token_to_id("not-a-token") is None


@pytest.mark.parametrize("text", SENTENCES)
def test_single_sentence_matches_fast_reference(ours, reference_fast, text):
    encoding = ours.encode(text)
    reference = reference_fast(text, return_special_tokens_mask=True, return_offsets_mapping=True)
    _assert_matches(encoding, reference)
    assert encoding.tokens == reference_fast.convert_ids_to_tokens(reference["input_ids"])
    assert encoding.special_tokens_mask == reference["special_tokens_mask"]
    assert encoding.offsets == [tuple(span) for span in reference["offset_mapping"]]


@pytest.mark.parametrize("text", [t for t in SENTENCES if t not in SLOW_DISAGREES])
def test_single_sentence_matches_slow_reference(ours, reference_slow, text):
    _assert_matches(ours.encode(text), reference_slow(text, return_token_type_ids=True))


@pytest.mark.parametrize(("text_a", "text_b"), PAIRS)
def test_pair_matches_references(ours, reference_fast, reference_slow, text_a, text_b):
    encoding = ours.encode(text_a, text_b)
    _assert_matches(encoding, reference_fast(text_a, text_b))
    _assert_matches(encoding, reference_slow(text_a, text_b, return_token_type_ids=True))
    num_a = encoding.sequence_ids.count(0)
    assert encoding.segment_ids == [0] * (num_a + 2) + [1] * (len(encoding) - num_a - 2)


@pytest.mark.parametrize(
    ("text_a", "text_b", "max_length"),
    [
        ("word " * 40, "other " * 10, 32),  # only A is cut
        ("word " * 10, "other " * 40, 32),  # only B is cut
        ("word " * 40, "other " * 30, 33),  # both cut, odd budget
        ("word " * 30, "other " * 30, 31),  # tie, even budget
        ("word " * 30, "other " * 30, 32),  # tie, odd budget: the extra position goes to B
        ("word " * 40, "other " * 30, 8),
    ],
)
def test_longest_first_truncation_matches_fast_reference(ours, reference_fast, text_a, text_b, max_length):
    encoding = ours.encode(text_a, text_b, max_length=max_length)
    reference = reference_fast(text_a, text_b, truncation="longest_first", max_length=max_length)
    _assert_matches(encoding, reference)
    assert len(encoding) == max_length


def test_padding_matches_fast_reference(ours, reference_fast):
    text_a, text_b = PAIRS[0]
    encoding = ours.encode(text_a, text_b, pad_to=40)
    reference = reference_fast(text_a, text_b, padding="max_length", max_length=40, return_special_tokens_mask=True)
    _assert_matches(encoding, reference)
    assert encoding.special_tokens_mask == reference["special_tokens_mask"]
    num_real = encoding.num_tokens
    assert encoding.tokens[num_real:] == ["[PAD]"] * (40 - num_real)
    assert encoding.sequence_ids[num_real:] == [None] * (40 - num_real)
    assert encoding.offsets[num_real:] == [(0, 0)] * (40 - num_real)
    assert encoding.position_ids == list(range(40))


def test_saved_vocab_loads_in_transformers(shakespeare, tmp_path, transformers):
    shakespeare.save(tmp_path)
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path)
    for text_a, text_b in PAIRS:
        _assert_matches(shakespeare.encode(text_a, text_b), reference(text_a, text_b))


# ---- layout, offsets, unknown words -------------------------------------------------------------------------


def test_layout_of_a_pair(ours):
    encoding = ours.encode("The cat sat.", "It purred")
    assert encoding.tokens == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "it", "pu", "##rred", "[SEP]"]
    assert encoding.segment_ids == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert encoding.sequence_ids == [None, 0, 0, 0, 0, None, 1, 1, 1, None]
    assert encoding.special_tokens_mask == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert encoding.position_ids == list(range(10))
    assert len(encoding) == encoding.num_tokens == 10
    assert encoding.truncation is None and encoding.unknown_words == []
    assert encoding.offsets[6:9] == [(0, 2), (3, 5), (5, 9)]  # into sentence B's own text


@pytest.mark.parametrize("text", [*SENTENCES, *(a for a, _ in PAIRS)])
def test_offsets_map_back_to_source_text(ours, text):
    encoding = ours.encode(text)
    normalize = ours._tokenizer.normalizer.normalize_str
    pieces_by_span = {}  # several pieces share one span when NFD splits a character (Hangul -> jamo)
    for token, sequence_id, span in zip(encoding.tokens, encoding.sequence_ids, encoding.offsets, strict=True):
        if sequence_id is None:
            assert span == (0, 0)
            continue
        start, end = span
        assert 0 <= start < end <= len(text)
        if token in SPECIAL_TOKENS[2:]:  # typed in the text, matched before normalisation
            assert text[start:end] == token
        elif token != "[UNK]":
            pieces_by_span[span] = pieces_by_span.get(span, "") + token.removeprefix("##")
    for (start, end), pieces in pieces_by_span.items():  # the source span, normalised, is the token text
        assert normalize(text[start:end]).strip() == pieces


def test_unknown_words_are_the_source_text(ours):
    long_word = "x" * 101
    encoding = ours.encode(f"I love 😀 and {long_word}", "中 🤗")
    assert encoding.unknown_words == ["😀", long_word, "🤗"]
    assert encoding.tokens.count("[UNK]") == 3
    assert ours.tokenize("y" * 100) != ["[UNK]"]  # exactly 100 characters is still split into pieces


def test_typed_special_tokens_stay_whole(ours):
    encoding = ours.encode("the [MASK] sat")
    assert encoding.tokens == ["[CLS]", "the", "[MASK]", "sat", "[SEP]"]
    assert encoding.input_ids[2] == ours.mask_token_id
    assert encoding.sequence_ids[2] == 0


def test_encode_ids_is_the_batch_form_of_encode(ours, shakespeare):
    texts = [*SENTENCES, *(a for a, _ in PAIRS)]
    for tokenizer in (ours, shakespeare):
        batch = tokenizer.encode_ids(texts)
        assert batch == [tokenizer.encode(text).input_ids[1:-1] for text in texts]
    assert ours.encode_ids([]) == []
    assert ours.encode_ids(["\u200b"]) == [[]]


def test_decode_joins_word_pieces(ours):
    ids = ours.encode("Ångström units").input_ids
    assert ours.decode(ids) == "angstrom units"
    assert ours.convert_ids_to_tokens(ids) == ours.encode("Ångström units").tokens


# ---- truncation, padding, errors ----------------------------------------------------------------------------


def test_truncation_message_names_the_numbers(ours):
    encoding = ours.encode("word " * 600, "other " * 20)
    assert len(encoding) == 512
    assert encoding.truncation.tokens_removed_a == 111 and encoding.truncation.tokens_removed_b == 0
    message = encoding.truncation.message
    assert "sentence A has 600 tokens and sentence B 20" in message
    assert "512 positions" in message and "A was cut to 489 tokens (111 removed)" in message

    both = ours.encode("word " * 40, "other " * 30, max_length=33).truncation
    assert (both.tokens_removed_a, both.tokens_removed_b) == (25, 15)
    assert "A was cut to 15 tokens (25 removed) and B was cut to 15 tokens (15 removed)" in both.message

    single = ours.encode("word " * 20, max_length=12)
    assert single.truncation.tokens_removed_a == 10 and single.truncation.tokens_removed_b == 0
    assert "sentence A has 20 tokens" in single.truncation.message and "cut to 10 tokens" in single.truncation.message
    assert single.tokens[-1] == "[SEP]" and len(single) == 12


def test_no_truncation_at_the_exact_limit(ours):
    encoding = ours.encode("word " * 10, max_length=12)
    assert len(encoding) == 12 and encoding.truncation is None


def test_pad_to(ours):
    encoding = ours.encode("hello", pad_to=8)
    assert encoding.tokens == ["[CLS]", "hello", "[SEP]"] + ["[PAD]"] * 5
    assert encoding.attention_mask == [1, 1, 1, 0, 0, 0, 0, 0]
    assert encoding.special_tokens_mask == [1, 0, 1, 1, 1, 1, 1, 1]
    assert encoding.segment_ids == [0] * 8
    assert len(encoding) == 8 and encoding.num_tokens == 3
    assert ours.encode("hello", pad_to=3).tokens == ["[CLS]", "hello", "[SEP]"]


def test_empty_b_is_absent(ours):
    assert ours.encode("hello", "") == ours.encode("hello")
    assert ours.encode("hello", "   ") == ours.encode("hello")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"text_a": ""}, "sentence A is empty — type a sentence to encode"),
        ({"text_a": "  \n\t "}, "sentence A is empty"),
        ({"text_a": "\u200b\u200d\x00"}, "sentence A"),
        ({"text_a": "hello", "text_b": "\u200b"}, "sentence B"),
        ({"text_a": "hello", "max_length": 2}, "max_length=2"),
        ({"text_a": "hello", "text_b": "world", "max_length": 4}, "at least 5 positions"),
        ({"text_a": "hello world", "pad_to": 3}, "pad_to=3 is shorter than the 4 positions"),
        ({"text_a": "hello", "pad_to": 600}, "pad_to=600 is longer than max_length=512"),
    ],
)
def test_bad_input_raises_a_clear_error(ours, kwargs, needle):
    with pytest.raises(TokenizerError, match=needle):
        ours.encode(**kwargs)


def test_normalises_to_nothing_is_really_empty(ours, reference_fast):
    assert reference_fast("\u200b\u200d\x00")["input_ids"] == [101, 102]
    with pytest.raises(TokenizerError, match="no tokens after BERT normalisation"):
        ours.encode("\u200b\u200d\x00")


def test_tokenizer_error_is_a_value_error():
    assert issubclass(TokenizerError, ValueError)


# ---- vocabulary files ---------------------------------------------------------------------------------------


def test_missing_vocab_file(tmp_path):
    with pytest.raises(TokenizerError, match=r"does not exist") as error:
        BertTokenizer.from_vocab_file(tmp_path / "nope.txt")
    assert "nope.txt" in str(error.value)


def test_empty_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="is empty") as error:
        BertTokenizer.from_vocab_file(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("missing", SPECIAL_TOKENS)
def test_vocab_without_a_special_token(tmp_path, missing):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in [*SPECIAL_TOKENS, "a", "b"] if t != missing), encoding="utf-8")
    with pytest.raises(TokenizerError, match=rf"has no \{missing[:-1]}\] token") as error:
        BertTokenizer.from_vocab_file(path)
    assert str(path) in str(error.value)


def test_lowercase_inference(tmp_path):
    (tmp_path / "uncased").mkdir()
    (tmp_path / "cased").mkdir()
    uncased = tmp_path / "uncased" / "vocab.txt"
    uncased.write_text("\n".join([*SPECIAL_TOKENS, "[unused0]", "cafe", "##s"]) + "\n", encoding="utf-8")
    cased = tmp_path / "cased" / "vocab.txt"
    cased.write_text("\n".join([*SPECIAL_TOKENS, "Café", "café", "##s"]) + "\n", encoding="utf-8")

    assert BertTokenizer.from_vocab_file(uncased).lowercase is True  # [PAD], [unused0] do not count
    cased_tokenizer = BertTokenizer.from_vocab_file(cased)
    assert cased_tokenizer.lowercase is False
    assert cased_tokenizer.tokenize("Café cafés") == ["Café", "café", "##s"]  # case and accents kept
    assert BertTokenizer.from_vocab_file(uncased, lowercase=False).lowercase is False  # explicit wins

    (tmp_path / "cased" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    assert BertTokenizer.from_vocab_file(cased).lowercase is True  # the config beside the file wins
    assert BertTokenizer.from_vocab_file(tmp_path / "cased").lowercase is True  # a folder works too


# ---- training -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained():
    lines = default_corpus_path().read_text(encoding="utf-8").splitlines()[:3000]
    return BertTokenizer.train(lines, vocab_size=600, min_frequency=2)


def test_train_puts_specials_first(trained):
    assert trained.vocab[:5] == list(SPECIAL_TOKENS)
    ids = (trained.pad_token_id, trained.unk_token_id, trained.cls_token_id, trained.sep_token_id)
    assert (*ids, trained.mask_token_id) == (0, 1, 2, 3, 4)
    assert 300 < trained.vocab_size <= 600
    assert trained.lowercase is True
    assert any(token.startswith("##") for token in trained.vocab)
    assert all(token == token.lower() for token in trained.vocab[5:])
    assert trained.encode("First Citizen").tokens[1:-1] == ["first", "citizen"]


def test_train_save_load_round_trip(trained, tmp_path):
    vocab_path = trained.save(tmp_path / "tok")
    assert vocab_path == tmp_path / "tok" / "vocab.txt"
    assert json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())["do_lower_case"] is True
    loaded = BertTokenizer.from_vocab_file(vocab_path)
    assert loaded.vocab == trained.vocab and loaded.lowercase == trained.lowercase
    for text_a, text_b in PAIRS:
        assert loaded.encode(text_a, text_b) == trained.encode(text_a, text_b)


def test_train_rejects_bad_settings():
    with pytest.raises(TokenizerError, match="vocab_size=5"):
        BertTokenizer.train(["hello world"], vocab_size=5)
    with pytest.raises(TokenizerError, match="no words"):
        BertTokenizer.train(["", "   "], vocab_size=100)


def test_default_vocabulary(shakespeare):
    assert shakespeare.vocab_size == 8000
    assert shakespeare.vocab[:5] == list(SPECIAL_TOKENS)
    assert shakespeare.lowercase is True
    assert shakespeare.tokenize("ROMEO: Wherefore art thou?") == ["romeo", ":", "wherefore", "art", "thou", "?"]


@pytest.mark.parametrize(("call", "needle"), [
    (lambda t: t.encode("caf\ud800e"), r"sentence A holds a lone surrogate, U\+D800 at character 3"),
    (lambda t: t.encode("fine", "\udcff"), r"sentence B holds a lone surrogate, U\+DCFF at character 0"),
    (lambda t: t.tokenize("\ud83d"), r"the text holds a lone surrogate"),
    (lambda t: t.encode_ids(["fine", "also fine", "x\udc80"]), r"text 2 holds a lone surrogate, U\+DC80"),
])
def test_lone_surrogates_are_a_clear_error(shakespeare, call, needle):
    with pytest.raises(TokenizerError, match=needle):
        call(shakespeare)


def test_a_vocab_file_that_is_not_utf8_names_the_byte(tmp_path):
    (tmp_path / "vocab.txt").write_bytes("\n".join(SPECIAL_TOKENS).encode() + b"\ncaf\xe9\n")
    with pytest.raises(TokenizerError, match=r"vocab\.txt is not UTF-8 text: byte 34 \(line 6\) is b'\\xe9'"):
        BertTokenizer.from_vocab_file(tmp_path)


# ---- what a vocab.txt's bytes say, named as what they are ---------------------------------------------------


def test_a_vocab_with_a_byte_order_mark_names_the_mark(tmp_path):
    """Not only "no [PAD] token": the mark glued to the first token is why."""
    (tmp_path / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + "".join(t + "\n" for t in [*SPECIAL_TOKENS, "a"]).encode())
    with pytest.raises(TokenizerError, match=r"vocab\.txt starts with a UTF-8 byte order mark \(BOM\), which is read "
                                             r"as part of its first token \('\\ufeff\[PAD\]'; transformers' "
                                             r"BertTokenizer reads it so too\), so it has no \[PAD\] token"):
        BertTokenizer.from_vocab_file(tmp_path)


def test_a_byte_order_mark_stays_part_of_the_first_token_as_transformers_reads_it(tmp_path, transformers):
    """transformers' BertTokenizer (and `tokenizers`' WordPiece.read_file) keep the mark in token 0, so the ids
    stay theirs: "hello" is [UNK] in both, every other token keeps its line number."""
    from tokenizers.models import WordPiece

    vocab = ["hello", *SPECIAL_TOKENS, "world", "##s"]
    (tmp_path / "vocab.txt").write_bytes(b"\xef\xbb\xbf" + "".join(t + "\n" for t in vocab).encode())
    ours = BertTokenizer.from_vocab_file(tmp_path)
    assert ours.vocab[0] == "\ufeffhello" and ours.vocab[1:] == vocab[1:]
    assert WordPiece.read_file(str(tmp_path / "vocab.txt"))["\ufeffhello"] == 0
    reference_class = getattr(transformers, "BertTokenizerFast", None) or transformers.BertTokenizer
    reference = reference_class.from_pretrained(tmp_path)
    assert reference.convert_ids_to_tokens(0) == "\ufeffhello"
    for text in ("hello world", "worlds hello", "\ufeffhello"):
        assert ours.encode(text).input_ids == reference(text)["input_ids"], text


def test_a_utf16_vocab_is_named_as_utf16(tmp_path):
    (tmp_path / "vocab.txt").write_bytes("".join(t + "\n" for t in [*SPECIAL_TOKENS, "a"]).encode("utf-16"))
    with pytest.raises(TokenizerError, match=r"vocab\.txt is UTF-16 text \(it starts with a UTF-16 byte order mark\), "
                                             "not UTF-8"):
        BertTokenizer.from_vocab_file(tmp_path)


def test_save_records_the_vocabulary_size_and_the_file_read(trained, tmp_path):
    """tokenizer_config.json's "vocab_size" lets a checkpoint padded beyond the vocabulary be told from a vocab.txt
    that lost lines (bertcore.models.checkpoint)."""
    trained.save(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["vocab_size"] == trained.vocab_size
    assert trained.vocab_file is None and BertTokenizer.from_vocab_file(tmp_path).vocab_file == tmp_path / "vocab.txt"


def test_a_tokenizer_config_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in [*SPECIAL_TOKENS, "a"]), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").mkdir()  # was silently passed over
    with pytest.raises(TokenizerError, match=r"tokenizer_config\.json is a folder, not a file; fix or delete it"):
        BertTokenizer.from_vocab_file(tmp_path)
