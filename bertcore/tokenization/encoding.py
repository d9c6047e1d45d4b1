"""What every tokenizer of bertcore.tokenization hands back, and the steps of encoding they share.

`Encoding` is one example laid out for the model. `TokenizerBase` holds what BertTokenizer (WordPiece) and
PretrainedTokenizer (any tokenizer.json) do alike around their Rust `tokenizers.Tokenizer`: the batch path in
chunks, one text's pieces with a TokenizerError for text Rust cannot take, sentences A and B checked and cut
longest-first, and the padding checked. Each says its own layout, its number of special tokens and its messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bertcore.errors import TokenizerError

ENCODE_CHUNK_SIZE = 1000  # texts per encode_batch call; small enough that other threads get the GIL often


@dataclass(frozen=True)
class Truncation:
    tokens_removed_a: int
    tokens_removed_b: int
    message: str  # plain words with the numbers, for the UI


@dataclass(frozen=True)
class Encoding:
    """One example laid out for BERT; every list has one entry per position (length T)."""

    tokens: list[str]
    input_ids: list[int]
    segment_ids: list[int]  # token_type_ids: 0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    position_ids: list[int]  # 0..T-1
    attention_mask: list[int]  # 1 = real token, 0 = [PAD]
    special_tokens_mask: list[int]  # 1 for the [CLS]/[SEP] the layout added and for [PAD]
    sequence_ids: list[int | None]  # 0 = sentence A, 1 = sentence B, None = added special or padding
    offsets: list[tuple[int, int]]  # character span in its own sentence's text; (0, 0) for specials/padding
    truncation: Truncation | None
    unknown_words: list[str]  # the source text behind every [UNK]
    # how the tokens mark words (bertcore.tokenization.pieces): "wordpiece" (##), "byte_level" (Ġ), "sentencepiece"
    piece_style: str = "wordpiece"

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_tokens(self) -> int:
        """Real positions, padding excluded."""
        return sum(self.attention_mask)


class TokenizerBase:
    """The shared steps; a subclass sets `_tokenizer` (Rust), `layouts` and `_num_specials` (single, pair), and
    says `id_to_token`, `_truncation_message` and `_no_tokens_message`."""

    layouts: tuple[str, str]  # the layout in words, single and pair: "[CLS] A [SEP]", "[CLS] A [SEP] B [SEP]"
    _num_specials: tuple[int, int]  # special tokens the layout adds, single and pair
    # Whether its files state every token's id (a tokenizer.json, a vocab.json, a SentencePiece model, a vocab.txt
    # whose tokenizer.json lists the same tokens), rather than only a vocab.txt's line numbers, which a lost line
    # shifts: an embedding table longer than such a vocabulary has rows no token uses, never shifted ids
    # (bertcore.models.checkpoint_checks.check_vocabulary).
    explicit_ids: bool = False
    # Read with a checkpoint whose embedding table has more rows than the tokenizer has ids: that, in words, for
    # the app's model line ("400 tokens for 403 embedding rows, 3 unused"); None otherwise. Set by
    # bertcore.models.checkpoint.read_checkpoint.
    vocabulary_note: str | None = None

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token(int(i)) for i in ids]

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids of many texts at once, no specials: the fast path for the data pipeline."""
        # encode_batch_fast (tokenizers >= 0.21) skips the offsets the pipeline does not need
        encode_batch = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        texts = list(texts)
        ids: list[list[int]] = []
        # Chunks, because one call holds the GIL throughout: a whole corpus at once froze the GUI thread
        # for up to half a second when a run started from the app.
        for start in range(0, len(texts), ENCODE_CHUNK_SIZE):
            batch = texts[start : start + ENCODE_CHUNK_SIZE]
            try:
                chunk = encode_batch(batch, add_special_tokens=False)
            except TypeError:
                for index, text in enumerate(batch, start):
                    _check_text(text, f"text {index}")
                raise
            ids.extend(encoding.ids for encoding in chunk)
        return ids

    def _encode_piece(self, text: str, name: str):
        """The Rust encoding of one text without specials; a TokenizerError for text that is not valid Unicode."""
        try:
            return self._tokenizer.encode(text, add_special_tokens=False)
        except TypeError:
            _check_text(text, name)
            raise

    def _cut_pieces(self, text_a: str, text_b: str | None, max_length: int):
        """(text_b, piece_a, piece_b, keep_a, keep_b, truncation): the texts checked, an empty B as no B, each
        sentence's pieces, and how many of them fit max_length with the specials (longest first)."""
        if not isinstance(text_a, str) or not text_a.strip():
            raise TokenizerError("sentence A is empty — type a sentence to encode")
        if text_b is not None and not isinstance(text_b, str):
            raise TokenizerError(f"sentence B must be text or None, not {type(text_b).__name__}")
        if text_b is not None and not text_b.strip():
            text_b = None  # an empty second box means a single sentence
        is_pair = text_b is not None
        num_specials = self._num_specials[is_pair]
        min_length = num_specials + (2 if is_pair else 1)
        if max_length < min_length:
            raise TokenizerError(
                f"max_length={max_length} cannot hold {self.layouts[is_pair]}: it needs at least {min_length} "
                f"positions ({num_specials} special tokens and one token per sentence)")
        piece_a = self._encode_piece(text_a, "sentence A")
        if not piece_a.ids:
            raise TokenizerError(self._no_tokens_message("A", text_a))
        piece_b = None
        if is_pair:
            piece_b = self._encode_piece(text_b, "sentence B")
            if not piece_b.ids:
                raise TokenizerError(self._no_tokens_message("B", text_b))
        len_a, len_b = len(piece_a.ids), len(piece_b.ids) if piece_b is not None else 0
        keep_a, keep_b = longest_first(len_a, len_b, max_length - num_specials, is_pair)
        truncation = None
        if keep_a < len_a or keep_b < len_b:
            truncation = Truncation(tokens_removed_a=len_a - keep_a, tokens_removed_b=len_b - keep_b,
                                    message=self._truncation_message(len_a, len_b, keep_a, keep_b, max_length))
        return text_b, piece_a, piece_b, keep_a, keep_b, truncation

    def _unknown_words(self, text_a: str, text_b: str | None, input_ids: list[int],
                       sequence_ids: list[int | None], offsets: list[tuple[int, int]]) -> list[str]:
        """The source text behind every unknown token of a sentence (specials and padding are no one's words)."""
        return [(text_a if sequence == 0 else text_b)[start:end]
                for token_id, sequence, (start, end) in zip(input_ids, sequence_ids, offsets, strict=True)
                if token_id == self.unk_token_id and sequence is not None]

    @staticmethod
    def _padding(num_real: int, pad_to: int | None, max_length: int) -> int:
        """[PAD] positions to add after num_real real ones so that the encoding is pad_to long (0 for None)."""
        if pad_to is None:
            return 0
        if pad_to < num_real:
            raise TokenizerError(f"pad_to={pad_to} is shorter than the {num_real} positions of this encoding; "
                                 f"use pad_to >= {num_real} or leave it None")
        if pad_to > max_length:
            raise TokenizerError(f"pad_to={pad_to} is longer than max_length={max_length}; the model accepts "
                                 f"{max_length} positions, so pad to at most that")
        return pad_to - num_real


def _check_text(text: object, name: str) -> None:
    """TokenizerError for text the Rust tokenizer cannot take (it raises a bare TypeError): a non-string, or a
    string with a lone surrogate (half of a UTF-16 pair, e.g. from bytes decoded with errors='surrogateescape')."""
    if not isinstance(text, str):
        raise TokenizerError(f"{name} must be text (str), not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TokenizerError(
            f"{name} holds a lone surrogate, U+{ord(text[error.start]):04X} at character {error.start}, which is "
            "not a character and cannot be tokenized; remove it (decode the source with errors='replace')"
        ) from None


def longest_first(len_a: int, len_b: int, budget: int, is_pair: bool) -> tuple[int, int]:
    """Tokens kept of A and B when budget positions remain after the specials (HF 'longest_first').

    Tokens come off the end of whichever sentence is longer; when both must be cut they share the budget
    evenly, the odd position going to the longer one (to B on a tie).
    """
    if not is_pair:
        return min(len_a, budget), 0
    if len_a + len_b <= budget:
        return len_a, len_b
    short = min(len_a, len_b)
    keep_long = max(short, budget - short) if short <= budget else short
    keep_short = short
    if keep_short + keep_long > budget:
        keep_short, keep_long = budget // 2, budget // 2 + budget % 2
    return (keep_long, keep_short) if len_a > len_b else (keep_short, keep_long)
