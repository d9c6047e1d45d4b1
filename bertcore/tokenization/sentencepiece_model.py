"""A SentencePiece model file (ALBERT's spiece.model, XLM-RoBERTa's sentencepiece.bpe.model) read without the
`sentencepiece` package, and the `tokenizers.Tokenizer` that encodes as transformers does from the same folder.

    model = parse_model_proto(data, path)            # pieces, trainer settings, normalizer settings
    tokenizer = tokenizer_from_sentencepiece(model, family_of(tokenizer_config, config_json), tokenizer_config,
                                             {"cls": "[CLS]", "sep": "[SEP]", ...})

The file is a protobuf `ModelProto`; only the fields needed here are read, with a reader of the protobuf wire
format of our own (varints and length-delimited fields), so the `protobuf` and `sentencepiece` packages are not
needed at runtime. The tokenizer is the model's pieces and scores (Unigram, or BPE with merges ranked by score),
the model's precompiled normalisation table, and what each family adds around it:
- ALBERT: `` and '' become ", then NFKD and accents stripped (unless keep_accents), lower case (do_lower_case),
  the precompiled table; `[CLS] A [SEP] B [SEP]` with token types 0 then 1.
- XLM-RoBERTa: fairseq's ids (<s> <pad> </s> <unk>, then the model's pieces from its fourth on, each one id
  higher, then <mask>); `<s> A </s></s> B </s>`, one token type.
- any other: the model's own ids, BERT's layout with the folder's cls and sep tokens.
Words are split at spaces (runs of spaces count once, as SentencePiece's remove_extra_whitespaces does; the
normalisation table has turned tabs, newlines and other Unicode spaces into spaces first, and a model without one
keeps them inside words, as SentencePiece does) and each gets "▁" in front, as the Metaspace pre-tokenizer puts it;
a model trained with remove_extra_whitespaces off is read the same way, as transformers reads it. Folders are
opened by bertcore.tokenization.pretrained (tokenizer_from_folder), which reads the files and their configs; this
module sees only their contents.

A damaged file is a TokenizerError naming it, never a crash or a tokenizer that encodes otherwise than
SentencePiece: the file is refused where SentencePiece (0.2.3) refuses it (an empty, repeated or over-long piece,
a score that is NaN or infinite, no unknown piece or two, byte pieces without byte fallback or not all 256 of them,
a normalisation table whose sizes or trie do not hold together: `_check_charsmap`), and where the Rust `tokenizers`
library could not build it or would panic on it later (a table pointing inside a character, a BPE model whose
merges would take too long to list). Every size the file states is checked against the bytes there are before
anything of that size is made; tests/bertcore/test_sentencepiece_fuzz.py holds it to that on thousands of damaged
copies of a real model.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE, Unigram

from bertcore.errors import TokenizerError

# SentencePiece.Type in sentencepiece_model.proto
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
PIECE_TYPES = (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)
UNIGRAM_MODEL, BPE_MODEL = 1, 2  # TrainerSpec.ModelType (WORD = 3 and CHAR = 4 are not read)
MODEL_TYPES = (1, 2, 3, 4)  # a value of no type leaves the field at its default, UNIGRAM, as protobuf reads enums
MAX_PIECE_BYTES = 8000  # SentencePiece refuses a piece this long or longer ("piece is too long")
# Listing a BPE model's merges compares every piece with the splits of it whose left part has the length of some
# piece: characters compared, at most. Real models need a few million (250,000 pieces of up to 16 characters);
# a file of thousands of pieces of thousands of characters each, all lengths present, would need 10^11.
BPE_MERGE_WORK_LIMIT = 200_000_000
FAMILIES = ("albert", "xlm-roberta", "sentencepiece")
XLM_R_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's first four ids, which XLM-R's vocabulary keeps


class Piece(NamedTuple):  # a tuple, not a dataclass: XLM-R has 250,000 of them
    piece: str
    score: float
    type: int = NORMAL


@dataclass(frozen=True)
class SentencePieceModel:
    """The fields of a ModelProto this module uses; defaults are the proto's own."""

    pieces: tuple[Piece, ...]
    model_type: int = UNIGRAM_MODEL
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    treat_whitespace_as_suffix: bool = False
    denormalizer_charsmap: bytes = b""  # used only to decode; checked as SentencePiece checks it

    @property
    def unknown_id(self) -> int:
        """The id of the piece of type UNKNOWN: what SentencePiece gives text no piece covers (trainer_spec's
        unk_id names the same piece in every file it accepts)."""
        return next(index for index, piece in enumerate(self.pieces) if piece.type == UNKNOWN)


class _WireError(ValueError):
    """Where and why the bytes are not a protobuf message; turned into a TokenizerError naming the file."""


class _Unsupported(ValueError):
    """A SentencePiece model of a kind this reader does not encode as SentencePiece would; a TokenizerError."""


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise _WireError(f"a number runs past the end of its message (byte {position})")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise _WireError(f"a number is longer than 10 bytes (byte {position})")


def _int32(value: int) -> int:
    """A varint holding a negative int32 is its 64-bit two's complement (pad_id = -1 is 10 bytes)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """A message's (field number, wire type, value) in file order: varints as ints, 32/64-bit fields and
    length-delimited ones as their bytes."""
    position = 0
    size = len(data)
    while position < size:
        key = data[position]
        if key < 0x80:  # every key SentencePiece writes for pieces: one byte
            position += 1
        else:
            key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise _WireError(f"field number 0 at byte {position}")
        if key >= 1 << 32:  # protobuf's field numbers end at 2^29 - 1
            raise _WireError(f"field number {number} at byte {position} is past protobuf's last")
        if wire_type == 0:
            value, position = _varint(data, position)
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            if position + width > size:
                raise _WireError(f"field {number} runs past the end of its message (byte {position})")
            value, position = data[position:position + width], position + width
        elif wire_type == 2:
            length, position = _varint(data, position)
            if position + length > size:
                raise _WireError(f"field {number} says it holds {length} bytes, more than are left (byte {position})")
            value, position = data[position:position + length], position + length
        else:  # 3/4 are the deprecated groups, 6/7 do not exist; SentencePiece writes none of them
            raise _WireError(f"field {number} has wire type {wire_type}, which a SentencePiece model never uses")
        yield number, wire_type, value


def _text(value: int | bytes, what: str) -> str:
    if not isinstance(value, bytes):
        raise _WireError(f"{what} is a number where text was expected")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _WireError(f"{what} is not UTF-8 (byte {error.start})") from None


def _number(value: int | bytes, what: str) -> int:
    if not isinstance(value, int):
        raise _WireError(f"{what} is bytes where a number was expected")
    return value


_FLOAT = struct.Struct("<f")


def _piece(data: bytes, index: int) -> Piece:
    # SentencePiece writes each piece as text (field 1), score (field 2) and a type (field 3) only where it is not
    # NORMAL, each key one byte: read that layout directly (XLM-R's 250,000 pieces in ~0.3 s, not ~0.9 s), anything
    # else field by field
    size = len(data)
    if size >= 7 and data[0] == 0x0A and data[1] < 0x80:
        end = 2 + data[1]
        if end + 5 <= size and data[end] == 0x15:
            try:
                text = data[2:end].decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                score = _FLOAT.unpack_from(data, end + 1)[0]
                if end + 5 == size:
                    return Piece(text, score)
                if end + 7 == size and data[end + 5] == 0x18 and data[end + 6] < 0x80:
                    return Piece(text, score, _piece_type(data[end + 6]))
    text, score, kind = None, 0.0, NORMAL
    for number, _, value in _fields(data):
        if number == 1:
            text = _text(value, f"piece {index}")
        elif number == 2:
            if not isinstance(value, bytes) or len(value) != 4:
                raise _WireError(f"the score of piece {index} is not a 32-bit float")
            score = _FLOAT.unpack(value)[0]
        elif number == 3:
            kind = _piece_type(_number(value, f"the type of piece {index}"))
    if text is None:
        raise _WireError(f"piece {index} has no text")
    return Piece(text, score, kind)


def _piece_type(value: int) -> int:
    """A piece's type as protobuf reads the enum: a number of no type leaves it at its default, NORMAL."""
    return value if value in PIECE_TYPES else NORMAL


def parse_model_proto(data: bytes, path: Path | str) -> SentencePieceModel:
    """The pieces and settings of a SentencePiece model file's bytes; TokenizerError naming `path` when the bytes
    are not one (damaged, truncated, or another kind of file)."""
    try:
        model = _parse(data)
        _check_pieces(model)
        _check_charsmap(model.precompiled_charsmap, "its normalisation table")
        _check_charsmap(model.denormalizer_charsmap, "its denormalisation table")
    except _WireError as error:
        raise TokenizerError(f"{path} is not a SentencePiece model ({error}); the file is damaged or is not a "
                             "spiece.model: copy it again from the model's download") from None
    except _Unsupported as error:
        raise TokenizerError(f"{path} is a SentencePiece model this reader cannot encode as SentencePiece does "
                             f"({error}); give the folder a tokenizer.json made from it (transformers' "
                             "AutoTokenizer.from_pretrained(folder).save_pretrained(folder))") from None
    return model


def _parse(data: bytes) -> SentencePieceModel:
    pieces: list[Piece] = []
    settings: dict = {}
    for number, _, value in _fields(data):
        if number == 1:
            if not isinstance(value, bytes):
                raise _WireError(f"piece {len(pieces)} is a number, not a message")
            pieces.append(_piece(value, len(pieces)))
        elif number == 2 and isinstance(value, bytes):
            for inner, _, setting in _fields(value):
                if inner == 3:
                    model_type = _int32(_number(setting, "the model type"))
                    settings["model_type"] = model_type if model_type in MODEL_TYPES else UNIGRAM_MODEL
                elif inner == 24:
                    settings["treat_whitespace_as_suffix"] = bool(_number(setting, "treat_whitespace_as_suffix"))
                elif inner == 35:
                    settings["byte_fallback"] = bool(_number(setting, "byte_fallback"))
                elif inner in (40, 41, 42, 43):
                    name = {40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}[inner]
                    settings[name] = _int32(_number(setting, name))
        elif number == 3 and isinstance(value, bytes):
            for inner, _, setting in _fields(value):
                if inner == 1:
                    settings["normalizer_name"] = _text(setting, "the normalizer's name")
                elif inner == 2:
                    if not isinstance(setting, bytes):
                        raise _WireError("the precompiled charsmap is a number, not bytes")
                    settings["precompiled_charsmap"] = setting
                elif inner in (3, 4, 5):
                    name = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[inner]
                    settings[name] = bool(_number(setting, name))
        elif number == 5 and isinstance(value, bytes):
            for inner, _, setting in _fields(value):
                if inner == 2:
                    if not isinstance(setting, bytes):
                        raise _WireError("the denormalizer's charsmap is a number, not bytes")
                    settings["denormalizer_charsmap"] = setting
    if not pieces:
        raise _WireError("it holds no pieces")
    model = SentencePieceModel(pieces=tuple(pieces), **settings)
    if model.model_type not in (UNIGRAM_MODEL, BPE_MODEL):
        raise _Unsupported(f"its model type is {model.model_type}; only Unigram (1) and BPE (2) models are read")
    if model.treat_whitespace_as_suffix:
        raise _Unsupported("it puts the word boundary after words (treat_whitespace_as_suffix)")
    if not model.escape_whitespaces:
        raise _Unsupported("it keeps spaces as spaces instead of writing them as ▁ (escape_whitespaces off)")
    return model


def _check_pieces(model: SentencePieceModel) -> None:
    """What SentencePiece refuses of a model's pieces (model_interface.cc, unigram_model.cc), plus what the
    `tokenizers` vocabulary cannot hold: a text twice (SentencePiece keeps a control piece and a normal piece of
    one text apart; a token → id map cannot). Whole-list checks first (XLM-R's 250,000 pieces in ~0.1 s), the
    piece at fault found only when one fails."""
    texts = [piece.piece for piece in model.pieces]
    if "" in texts:
        raise _WireError(f"piece {texts.index('')} is empty")
    if max(map(len, texts)) * 4 >= MAX_PIECE_BYTES:  # a character is 4 UTF-8 bytes at most
        for index, text in enumerate(texts):
            if (size := len(text.encode("utf-8"))) >= MAX_PIECE_BYTES:
                raise _WireError(f"piece {index} is {size:,} bytes long; SentencePiece refuses pieces of "
                                 f"{MAX_PIECE_BYTES:,} bytes or more")
    if "\0" in "".join(texts):
        index = next(index for index, text in enumerate(texts) if "\0" in text)
        raise _WireError(f"piece {index} holds a null character")
    if len(set(texts)) != len(texts):
        seen: dict[str, int] = {}
        for index, text in enumerate(texts):
            if text in seen:
                raise _WireError(f"piece {index} ({text[:40]!r}) repeats piece {seen[text]}")
            seen[text] = index
    if not all(map(math.isfinite, (piece.score for piece in model.pieces))):
        index, (text, score, _) = next((i, piece) for i, piece in enumerate(model.pieces)
                                       if not math.isfinite(piece.score))
        raise _WireError(f"the score of piece {index} ({text[:40]!r}) is {score}; scores are finite numbers")
    unknown = [index for index, piece in enumerate(model.pieces) if piece.type == UNKNOWN]
    if not unknown:
        raise _WireError("it has no unknown piece (a piece of type UNKNOWN, <unk>)")
    if len(unknown) > 1:
        raise _WireError(f"pieces {unknown[0]} and {unknown[1]} are both its unknown piece")
    if model.unk_id != unknown[0]:
        raise _WireError(f"its unknown piece is piece {unknown[0]}, but its trainer settings say {model.unk_id}")
    byte_pieces = set()
    for index, piece in enumerate(model.pieces):
        if piece.type == BYTE:
            if not model.byte_fallback:
                raise _WireError(f"piece {index} ({piece.piece[:40]!r}) is a byte piece, but byte fallback is off")
            if not _BYTE_PIECE.fullmatch(piece.piece):
                raise _WireError(f"byte piece {index} is {piece.piece[:40]!r}, not <0x00>..<0xFF>")
            byte_pieces.add(piece.piece)
    if model.byte_fallback and len(byte_pieces) != 256:
        raise _WireError(f"byte fallback is on but it has {len(byte_pieces)} of the 256 byte pieces")
    if not any(piece.type in (NORMAL, USER_DEFINED, UNUSED) for piece in model.pieces):
        raise _WireError("it has no normal pieces, only control, unknown or byte ones")


_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


def _check_charsmap(blob: bytes, what: str) -> None:
    """A precompiled normalisation table, checked as SentencePiece 0.2.3 checks it (normalizer.cc,
    darts.h DoubleArray::validate) before any of it is used: <trie size: 4 bytes><trie: units of 4 bytes>
    <replacement texts, each ending with a zero byte>; the trie a whole number of blocks of 256 units, every unit's
    children inside the trie, every leaf pointing into the texts. And, for the Rust `tokenizers` library that reads
    it, texts that are UTF-8 and leaves that point at a character's first byte (it panics otherwise, mid-encoding).
    Empty: no table (no normalisation)."""
    if not blob:
        return
    if len(blob) <= 4:
        raise _WireError(f"{what} is {len(blob)} bytes, too short to hold one")
    trie_size = int.from_bytes(blob[:4], "little")
    if trie_size >= len(blob) - 4:
        raise _WireError(f"{what} says its trie takes {trie_size:,} bytes, but it holds {len(blob) - 4:,} in all")
    if trie_size < 1024 or trie_size % 1024:
        raise _WireError(f"{what} says its trie takes {trie_size:,} bytes, which is not whole blocks of 1,024")
    texts = blob[4 + trie_size:]
    if texts[-1] != 0:
        raise _WireError(f"{what}'s replacement texts do not end with a zero byte")
    try:
        texts.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _WireError(f"{what}'s replacement texts are not UTF-8 (byte {error.start})") from None
    units = np.frombuffer(blob, dtype="<u4", count=trie_size // 4, offset=4).astype(np.int64)
    size = len(units)
    # darts-clone's unit: label = bits 0-7 and 31 (set: a leaf), has_leaf = bit 8, offset = bits 10-31 shifted
    # left by 8 where bit 9 is set
    labels = units & 0x800000FF
    offsets = (units >> 10) << ((units & (1 << 9)) >> 6)
    root = units[0]
    if labels[0] != 0 or (root >> 8) & 1 or offsets[0] == 0 or (offsets[0] | 0xFF) >= size:
        raise _WireError(f"{what}'s trie has a damaged root")
    leaves = labels > 0xFF  # a leaf unit holds a value: where its key's replacement text starts
    inner = ~leaves
    inner[0] = False  # the root, checked above
    children = np.arange(size, dtype=np.int64) ^ offsets
    outside = inner & ((children | 0xFF) >= size)
    if outside.any():
        raise _WireError(f"{what}'s trie leads outside itself (unit {int(np.argmax(outside))})")
    has_leaf = inner & ((units >> 8) & 1 == 1)
    if np.any(labels[children[has_leaf]] <= 0xFF):
        raise _WireError(f"{what}'s trie marks a leaf where there is none")
    values = units[leaves] & 0x7FFFFFFF
    if np.any(values >= len(texts)):
        raise _WireError(f"{what}'s trie points past its replacement texts")
    if np.any((np.frombuffer(texts, dtype=np.uint8)[values] & 0xC0) == 0x80):
        raise _WireError(f"{what}'s trie points inside a character of its replacement texts")


def family_of(config: dict, model_config: dict) -> str:
    """"albert", "xlm-roberta" or "sentencepiece" (the model's own ids): tokenizer_config.json's tokenizer_class,
    else config.json's model_type."""
    tokenizer_class = str(config.get("tokenizer_class") or "")
    if tokenizer_class.startswith("Albert"):
        return "albert"
    if tokenizer_class.startswith("XLMRoberta"):
        return "xlm-roberta"
    model_type = str(model_config.get("model_type") or "")
    if model_type == "albert":
        return "albert"
    if model_type in ("xlm-roberta", "xlm_roberta"):
        return "xlm-roberta"
    return "sentencepiece"


def family_vocabulary(model: SentencePieceModel, family: str) -> tuple[list[tuple[str, float]], int]:
    """(piece, score) by id, and the unknown piece's id, in the family's numbering."""
    if family == "xlm-roberta":
        # fairseq numbered <s> <pad> </s> <unk> first and kept the SentencePiece pieces from the fourth on (its
        # first three are <unk> <s> </s>), then appended <mask>
        vocab = [(token, 0.0) for token in XLM_R_SPECIALS]
        vocab += [(piece.piece, piece.score) for piece in model.pieces[3:]]
        return [*vocab, ("<mask>", 0.0)], XLM_R_SPECIALS.index("<unk>")
    return [(piece.piece, piece.score) for piece in model.pieces], model.unknown_id


def _bpe_merges(vocab: list[tuple[str, float]], model: SentencePieceModel) -> list[tuple[str, str]]:
    """SentencePiece's BPE keeps no merge list: a piece is made by merging two pieces that spell it, and pieces
    learned earlier score higher, so every split of a normal piece into two known pieces is a merge, ranked by the
    merged piece's score (its id breaks ties).

    Only the splits whose two parts have lengths some piece has are tried (a real model's pieces have 1 to 16
    characters, so a piece of 7,000 tries at most 16, not 7,000 slices of up to 7,000 characters each); where even
    those would compare more than BPE_MERGE_WORK_LIMIT characters, the model is refused before any is made."""
    normal = {token: (score, index) for index, (token, score) in enumerate(vocab)
              if index < len(model.pieces) and model.pieces[index].type == NORMAL}
    lengths = sorted({len(token) for token in normal})
    present = set(lengths)
    splits_of: dict[int, list[int]] = {}
    work = 0
    for length in lengths:
        splits_of[length] = [split for split in lengths if split < length and length - split in present]
    for token in normal:
        work += len(splits_of[len(token)]) * len(token)
    if work > BPE_MERGE_WORK_LIMIT:
        raise _Unsupported(f"listing the merges of its {len(normal):,} BPE pieces would compare {work:,} "
                           f"characters (at most {BPE_MERGE_WORK_LIMIT:,}): its pieces are far longer and more "
                           "varied in length than a trained model's")
    ranked = sorted((-score, index, token[:split], token[split:]) for token, (score, index) in normal.items()
                    for split in splits_of[len(token)] if token[:split] in normal and token[split:] in normal)
    # Every longer piece of a trained model was made by a merge, so splits into two of its pieces; one that does
    # not (a character of it is no piece: edited or damaged) is a piece SentencePiece can still reach by merging
    # what the text holds, and a merge list cannot.
    merged = {index for _, index, _, _ in ranked}
    for token, (_, index) in normal.items():
        if len(token) > 1 and index not in merged:
            raise _WireError(f"BPE piece {index} ({token[:40]!r}) is not a merge of two of its pieces")
    return [(left, right) for _, _, left, right in ranked]


def tokenizer_from_sentencepiece(model: SentencePieceModel, family: str, config: dict,
                                 specials: dict[str, str | None], source: str = "the SentencePiece model") -> Tokenizer:
    """The `tokenizers.Tokenizer` for `model` as `family` encodes with it; `config` is tokenizer_config.json (its
    do_lower_case, keep_accents, add_prefix_space), `specials` the role → token map (cls, sep, pad, mask, unk).
    TokenizerError naming `source` where the Rust library cannot build it (whatever it raises, its panics too)."""
    if family not in FAMILIES:
        raise ValueError(f"family is {family!r}; expected one of {', '.join(FAMILIES)}")
    try:
        return _build(model, family, config, specials)
    except _WireError as error:
        raise TokenizerError(f"{source} is not a SentencePiece model ({error}); the file is damaged: copy it "
                             "again from the model's download") from None
    except _Unsupported as error:
        raise TokenizerError(f"{source} is a SentencePiece model this reader cannot encode as SentencePiece does "
                             f"({error})") from None
    except BaseException as error:
        if not is_rust_failure(error):
            raise
        raise TokenizerError(f"{source} cannot be read as a tokenizer ({type(error).__name__}: {error}); the file "
                             "is damaged: copy it again from the model's download") from None


def is_rust_failure(error: BaseException) -> bool:
    """Whether `error` is what the Rust `tokenizers` library raises for input it cannot take: a plain Exception,
    or pyo3's PanicException, which derives from BaseException (so `except Exception` lets it through) and which
    no module exports for an `except` clause."""
    return type(error) is Exception or type(error).__name__ == "PanicException"


def _build(model: SentencePieceModel, family: str, config: dict, specials: dict[str, str | None]) -> Tokenizer:
    vocab, unk_id = family_vocabulary(model, family)
    if model.model_type == BPE_MODEL:
        tokenizer = Tokenizer(BPE(vocab={token: index for index, (token, _) in enumerate(vocab)},
                                  merges=_bpe_merges(vocab, model), unk_token=vocab[unk_id][0], fuse_unk=True,
                                  byte_fallback=model.byte_fallback))
    else:
        tokenizer = Tokenizer(Unigram(vocab, unk_id=unk_id, byte_fallback=model.byte_fallback))
    steps = []
    if family == "albert":
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
        if not config.get("keep_accents", False):
            steps += [normalizers.NFKD(), normalizers.StripAccents()]
        if config.get("do_lower_case", True):
            steps.append(normalizers.Lowercase())
    if model.precompiled_charsmap:
        steps.append(normalizers.Precompiled(model.precompiled_charsmap))
    if steps:
        tokenizer.normalizer = normalizers.Sequence(steps)
    prepend = "always" if config.get("add_prefix_space", model.add_dummy_prefix) else "never"
    # words split at spaces only: SentencePiece's one word boundary (its table, where it has one, has made spaces of
    # tabs, newlines and other Unicode spaces already)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(" ", "removed"),
                                                       pre_tokenizers.Metaspace(replacement="▁",
                                                                                prepend_scheme=prepend)])
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=prepend)
    if model.byte_fallback:
        tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                               decoders.Strip(content=" ", left=1 if prepend == "always" else 0)])
    # The model's control and unknown pieces, and the folder's role tokens, match whole in the raw text and never
    # split; user-defined pieces match whole too, but are ordinary tokens.
    known = {token for token, _ in vocab}
    special = [token for token in [*(token for token, _ in vocab[:len(XLM_R_SPECIALS)] if family == "xlm-roberta"),
                                   *(p.piece for p in model.pieces if p.type in (UNKNOWN, CONTROL)),
                                   *(token for token in specials.values() if token is not None)]
               if token in known]
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True)
                                  for token in dict.fromkeys(special)])
    user_defined = [p.piece for p in model.pieces if p.type == USER_DEFINED]
    if user_defined:
        tokenizer.add_tokens([AddedToken(token, normalized=False, special=False) for token in user_defined])
    cls_token, sep_token = specials.get("cls"), specials.get("sep")
    if cls_token in known and sep_token in known:
        cls, sep = (cls_token, tokenizer.token_to_id(cls_token)), (sep_token, tokenizer.token_to_id(sep_token))
        if family == "xlm-roberta":
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{cls_token} $A {sep_token}", pair=f"{cls_token} $A {sep_token} {sep_token} $B {sep_token}",
                special_tokens=[cls, sep])
        else:
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{cls_token}:0 $A:0 {sep_token}:0",
                pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1", special_tokens=[cls, sep])
    return tokenizer
