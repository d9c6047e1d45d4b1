"""BERT's WordPiece tokenizer, over the Rust `tokenizers` library, with every step of an encoding visible.

BERT normalisation (clean control characters, one token per CJK character, lower-case and strip accents for
uncased vocabularies), whitespace-and-punctuation pre-splitting, then greedy longest-match WordPiece. `encode`
lays out `[CLS] A [SEP] (B [SEP])` and says in words what truncation removed.

The default vocabulary (assets/vocab.txt + assets/tokenizer_config.json) was made with, from the repo root:

    .venv/bin/python -c "from bertcore.files.resources import default_corpus_path as c; \
from bertcore.tokenization.wordpiece import BertTokenizer as T; \
T.train(c().read_text(encoding='utf-8').splitlines(), vocab_size=8000, lowercase=True, min_frequency=2).save('assets')"

(The trainer breaks frequency ties in hash order, so a retrain may differ from the shipped file in a few rare tokens.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import WordPiece

from bertcore.errors import TokenizerError
from bertcore.files.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from bertcore.files.file_names import TOKENIZER_CONFIG_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.files.reading import TOKENIZER_JSON_LIMIT, parse_json, present, read_bytes
from bertcore.tokenization.encoding import Encoding, TokenizerBase
from bertcore.tokenization.vocab_files import read_do_lower_case, read_vocab_txt, wordpiece_vocab

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100  # longer words become a single [UNK], as in Google's BERT


class BertTokenizer(TokenizerBase):
    """WordPiece over a fixed vocabulary; build with `from_vocab_file` or `train`."""

    layouts = ("[CLS] A [SEP]", "[CLS] A [SEP] B [SEP]")
    _num_specials = (2, 3)

    def __init__(self, vocab: list[str], lowercase: bool = True, source: str = "the vocabulary"):
        token_ids: dict[str, int] = {}
        for index, token in enumerate(vocab):
            if token in token_ids:
                raise TokenizerError(
                    f"{source} lists the token {token!r} twice (ids {token_ids[token]} and {index}); "
                    "each token must appear on exactly one line"
                )
            token_ids[token] = index
        for token in SPECIAL_TOKENS:
            if token not in token_ids:
                raise TokenizerError(
                    f"{source} has no {token} token; a BERT vocabulary needs all of {', '.join(SPECIAL_TOKENS)}"
                )
        self.vocab = list(vocab)
        self.lowercase = bool(lowercase)
        self.vocab_file: Path | None = None  # the vocab.txt or tokenizer.json it was read from; None when built
        # The WordPiece tokenizer.json it was read from, or that lists the same tokens as its vocab.txt: its ids are
        # then explicit (`explicit_ids`), and `save` writes it back so that they stay so. One beside a vocab.txt is
        # read only when asked (~45 ms for bert-base's 30,522 tokens, which most loads never need).
        self._tokenizer_json: bytes | None = None
        self._unconfirmed: Path | None = None  # a tokenizer.json beside the vocab.txt, not compared with it yet
        self._token_ids = token_ids
        self.pad_token_id = token_ids["[PAD]"]
        self.unk_token_id = token_ids["[UNK]"]
        self.cls_token_id = token_ids["[CLS]"]
        self.sep_token_id = token_ids["[SEP]"]
        self.mask_token_id = token_ids["[MASK]"]
        self.special_token_ids = frozenset(token_ids[t] for t in SPECIAL_TOKENS)
        self.cls_token, self.sep_token, self.pad_token, self.mask_token, self.unk_token = (
            "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
        self.piece_style = "wordpiece"  # continuations start with "##" (bertcore.tokenization.pieces)
        self.layouts = ("[CLS] A [SEP]", "[CLS] A [SEP] B [SEP]")  # single sentence, pair
        self._tokenizer = _build_rust_tokenizer(token_ids, self.lowercase)

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_vocab_file(cls, path: str | Path, lowercase: bool | None = None) -> BertTokenizer:
        """Load a vocab.txt (one token per line, line number = id) or a folder holding one (or, as transformers 5
        saves a tokenizer, only a tokenizer.json with a WordPiece model: its vocabulary is read from there).

        lowercase=None reads "do_lower_case" from a tokenizer_config.json beside the file, else infers it:
        uncased iff no ordinary vocabulary token has an upper-case letter.

        Files are read only when they are regular files of a bounded size (bertcore.files.reading): a FIFO, a
        device or a folder in their place is a TokenizerError naming it. A UTF-8 byte order mark stays part of the
        first token, as transformers' BertTokenizer reads it (the same ids); where that costs a special token, the
        error names the mark.
        """
        path = Path(path)
        if path.is_dir():
            folder = path
            path = folder / VOCAB_FILE
            if not present(path) and present(folder / TOKENIZER_JSON_FILE):
                return cls._from_tokenizer_json(folder / TOKENIZER_JSON_FILE, lowercase)
        label = "the vocabulary file"
        vocab = read_vocab_txt(path, label, SPECIAL_TOKENS)
        if lowercase is None:
            lowercase = read_do_lower_case(path.parent / TOKENIZER_CONFIG_FILE)
        if lowercase is None:
            lowercase = not any(
                any(ch.isupper() for ch in token)
                for token in vocab
                if not (token.startswith("[") and token.endswith("]"))  # [CLS], [unused7], ...
            )
        tokenizer = cls(vocab, lowercase=lowercase, source=f"{label} {path}")
        tokenizer.vocab_file = path
        if present(path.parent / TOKENIZER_JSON_FILE):
            tokenizer._unconfirmed = path.parent / TOKENIZER_JSON_FILE
        return tokenizer

    @property
    def explicit_ids(self) -> bool:
        """Whether its ids are stated by a file (TokenizerBase.explicit_ids): read from a WordPiece tokenizer.json,
        or from a vocab.txt whose tokenizer.json beside it lists the same tokens at the same ids."""
        if self._unconfirmed is not None:
            json_path, self._unconfirmed = self._unconfirmed, None
            self._confirm_ids(json_path)
        return self._tokenizer_json is not None

    def _confirm_ids(self, json_path: Path) -> None:
        """Where a WordPiece tokenizer.json beside the vocab.txt lists the same tokens at the same ids (what
        transformers saves), the ids are explicit. Any other tokenizer.json (damaged, another model's) confirms
        nothing and is left to bertcore.tokenization.vocab_files.recorded_vocab_sizes to judge."""
        try:
            data = read_bytes(json_path, limit=TOKENIZER_JSON_LIMIT, error=TokenizerError, what="a tokenizer.json")
            listed = wordpiece_vocab(parse_json(data, json_path, error=TokenizerError))
        except (TokenizerError, FileNotFoundError):
            return
        if listed is not None and len(listed) == len(self.vocab) and all(
                listed.get(token) == index for index, token in enumerate(self.vocab)):
            self._tokenizer_json = data

    @classmethod
    def _from_tokenizer_json(cls, path: Path, lowercase: bool | None) -> BertTokenizer:
        """The WordPiece vocabulary (and lower-casing) of a `tokenizers` tokenizer.json."""
        label = "the tokenizer file"
        data = read_bytes(path, limit=TOKENIZER_JSON_LIMIT, error=TokenizerError, label=label,
                          what="a tokenizer.json")
        values = parse_json(data, path, error=TokenizerError, label=label)
        vocab = wordpiece_vocab(values)
        if vocab is None:
            model = values.get("model") if isinstance(values, dict) else None
            kind = model.get("type") if isinstance(model, dict) else None
            raise TokenizerError(f"{path} holds a {kind or 'unknown'} tokenizer, not BERT's WordPiece; a BERT "
                                 "checkpoint needs its vocab.txt")
        ids = sorted((index, token) for token, index in vocab.items() if isinstance(index, int))
        if [index for index, _ in ids] != list(range(len(vocab))):
            raise TokenizerError(f"{path}: the WordPiece vocabulary's ids are not 0..{len(vocab) - 1} in turn; the "
                                 "tokenizer file is damaged")
        normalizer = values.get("normalizer")
        if lowercase is None and isinstance(normalizer, dict) and isinstance(normalizer.get("lowercase"), bool):
            lowercase = normalizer["lowercase"]
        if lowercase is None:
            lowercase = read_do_lower_case(path.parent / TOKENIZER_CONFIG_FILE)
        tokenizer = cls([token for _, token in ids], lowercase=True if lowercase is None else lowercase,
                        source=f"{label} {path}")
        tokenizer.vocab_file = path
        tokenizer._tokenizer_json = data
        return tokenizer

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int = 8000, lowercase: bool = True, min_frequency: int = 2
    ) -> BertTokenizer:
        """Learn a WordPiece vocabulary from texts; the specials get ids 0..4 in SPECIAL_TOKENS order.

        Not bit-reproducible: the Rust trainer breaks frequency ties in hash order, so two trainings on the
        same texts may differ in a few rare tokens. Save the result and reuse the file where ids must agree.
        """
        if vocab_size <= len(SPECIAL_TOKENS):
            raise TokenizerError(
                f"vocab_size={vocab_size} leaves no room beside the {len(SPECIAL_TOKENS)} special tokens; "
                "use a few thousand"
            )
        if min_frequency < 1:
            raise TokenizerError(f"min_frequency={min_frequency} must be at least 1")
        scratch = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
        scratch.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
        )
        scratch.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            continuing_subword_prefix="##",
            show_progress=False,
        )
        scratch.train_from_iterator(texts, trainer=trainer)
        token_ids = scratch.get_vocab(with_added_tokens=True)
        if len(token_ids) <= len(SPECIAL_TOKENS):
            raise TokenizerError("the training texts hold no words; pass a non-empty corpus")
        vocab = sorted(token_ids, key=token_ids.__getitem__)  # specials, alphabet, then merges in order
        # the trainer lists the "##x" alphabet in hash order; sorting it keeps those ids stable across retrains
        alphabet_end = len(SPECIAL_TOKENS)
        while alphabet_end < len(vocab) and len(vocab[alphabet_end].removeprefix("##")) == 1:
            alphabet_end += 1
        alphabet = sorted(vocab[len(SPECIAL_TOKENS) : alphabet_end], key=lambda t: (t.startswith("##"), t))
        vocab = [*SPECIAL_TOKENS, *alphabet, *vocab[alphabet_end:]]
        return cls(vocab, lowercase=lowercase, source="the trained vocabulary")

    def save(self, folder: str | Path) -> Path:
        """Write folder/vocab.txt and folder/tokenizer_config.json (loadable by transformers too), each atomically,
        and the tokenizer.json that states its ids where it has one (read from it, or found beside its vocab.txt)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab_path = write_text_atomic(folder / VOCAB_FILE, "".join(token + "\n" for token in self.vocab))
        if self.explicit_ids:  # the tokenizer.json that states its ids, kept beside it
            write_bytes_atomic(folder / TOKENIZER_JSON_FILE, self._tokenizer_json)
        config = {
            # the vocabulary's size apart from its lines: an embedding padded beyond it (vocab_size rounded up)
            # loads only where the tokenizer files say how many tokens there are (see recorded_vocab_sizes)
            "vocab_size": self.vocab_size,
            "do_lower_case": self.lowercase,
            "strip_accents": None,
            "tokenize_chinese_chars": True,
            "tokenizer_class": "BertTokenizer",
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }
        write_json_atomic(folder / TOKENIZER_CONFIG_FILE, config)
        return vocab_path

    # ---- lookup -------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_to_id(self, token: str) -> int | None:
        return self._token_ids.get(token)

    def id_to_token(self, token_id: int) -> str:
        if not 0 <= token_id < len(self.vocab):
            raise TokenizerError(f"token id {token_id} is outside the vocabulary (0..{len(self.vocab) - 1})")
        return self.vocab[token_id]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Token ids back to text, '##' pieces joined to their word."""
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return f"BertTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"

    # ---- encoding -----------------------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of one text, no [CLS]/[SEP]."""
        return self._encode_piece(text, "the text").tokens

    def encode(
        self, text_a: str, text_b: str | None = None, max_length: int = 512, pad_to: int | None = None
    ) -> Encoding:
        """[CLS] A [SEP] (B [SEP]) [PAD]...; longest-first truncation to max_length, padding to pad_to."""
        text_b, piece_a, piece_b, keep_a, keep_b, truncation = self._cut_pieces(text_a, text_b, max_length)

        cls_id, sep_id = self.cls_token_id, self.sep_token_id
        tokens = ["[CLS]", *piece_a.tokens[:keep_a], "[SEP]"]
        input_ids = [cls_id, *piece_a.ids[:keep_a], sep_id]
        sequence_ids: list[int | None] = [None, *([0] * keep_a), None]
        offsets = [(0, 0), *piece_a.offsets[:keep_a], (0, 0)]
        if piece_b is not None:
            tokens += [*piece_b.tokens[:keep_b], "[SEP]"]
            input_ids += [*piece_b.ids[:keep_b], sep_id]
            sequence_ids += [*([1] * keep_b), None]
            offsets += [*piece_b.offsets[:keep_b], (0, 0)]
        num_real = len(input_ids)
        segment_ids = [0] * (keep_a + 2) + [1] * (num_real - keep_a - 2)
        special_tokens_mask = [1, *([0] * keep_a), 1]
        if piece_b is not None:
            special_tokens_mask += [*([0] * keep_b), 1]

        num_pad = self._padding(num_real, pad_to, max_length)
        tokens += ["[PAD]"] * num_pad
        input_ids += [self.pad_token_id] * num_pad
        segment_ids += [0] * num_pad
        sequence_ids += [None] * num_pad
        offsets += [(0, 0)] * num_pad
        special_tokens_mask += [1] * num_pad

        unknown_words = self._unknown_words(text_a, text_b, input_ids, sequence_ids, offsets)
        return Encoding(
            tokens=tokens,
            input_ids=input_ids,
            segment_ids=segment_ids,
            position_ids=list(range(num_real + num_pad)),
            attention_mask=[1] * num_real + [0] * num_pad,
            special_tokens_mask=special_tokens_mask,
            sequence_ids=sequence_ids,
            offsets=offsets,
            truncation=truncation,
            unknown_words=unknown_words,
        )


    def layout_ids(self, ids_a: list[int], ids_b: list[int] | None = None) -> tuple[list[int], list[int], list[int]]:
        """Sentences already tokenized (and truncated) laid out as [CLS] A [SEP] (B [SEP]): (input_ids,
        segment_ids, special_tokens_mask), as every tokenizer of bertcore.tokenization lays out its own model's."""
        input_ids = [self.cls_token_id, *ids_a, self.sep_token_id]
        segment_ids = [0] * len(input_ids)
        special = [1, *([0] * len(ids_a)), 1]
        if ids_b is not None:
            input_ids += [*ids_b, self.sep_token_id]
            segment_ids += [1] * (len(ids_b) + 1)
            special += [*([0] * len(ids_b)), 1]
        return input_ids, segment_ids, special

    def _truncation_message(self, len_a: int, len_b: int, keep_a: int, keep_b: int, max_length: int) -> str:
        return _truncation_message(len_a, len_b, keep_a, keep_b, max_length, is_pair=len_b > 0)

    @staticmethod
    def _no_tokens_message(name: str, text: str) -> str:
        return _no_tokens_message(name, text)


def _build_rust_tokenizer(token_ids: dict[str, int], lowercase: bool) -> Tokenizer:
    tokenizer = Tokenizer(
        WordPiece(vocab=token_ids, unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD)
    )
    # strip_accents=None follows lowercase, as in Google's uncased/cased BERT
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    # typed "[MASK]" etc. stay whole and keep their ids, as in HF's BertTokenizer
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tokenizer


def _truncation_message(len_a: int, len_b: int, keep_a: int, keep_b: int, max_length: int, is_pair: bool) -> str:
    if not is_pair:
        return (
            f"sentence A has {len_a} tokens; the model accepts {max_length} positions in total "
            f"(2 of them for [CLS] and [SEP]), so it was cut to {keep_a} tokens ({len_a - keep_a} removed)"
        )
    cuts = [
        f"{name} was cut to {keep} tokens ({length - keep} removed)"
        for name, length, keep in (("A", len_a, keep_a), ("B", len_b, keep_b))
        if keep < length
    ]
    return (
        f"sentence A has {len_a} tokens and sentence B {len_b}; the model accepts {max_length} positions in "
        f"total (3 of them for [CLS] and [SEP]), so {' and '.join(cuts)}"
    )


def _no_tokens_message(name: str, text: str) -> str:
    return (
        f"sentence {name} ({text[:40]!r}) has no tokens after BERT normalisation — it holds only control, "
        "zero-width or other ignored characters; type some words"
    )
