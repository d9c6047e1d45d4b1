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
Words are split on whitespace (runs of spaces count once, as SentencePiece's remove_extra_whitespaces does) and
each gets "▁" in front, as the Metaspace pre-tokenizer puts it; a model trained with remove_extra_whitespaces off
is read the same way, as transformers reads it. Folders are opened by bertcore.tokenization.pretrained
(tokenizer_from_folder), which reads the files and their configs; this module sees only their contents.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE, Unigram

from bertcore.errors import TokenizerError

# SentencePiece.Type in sentencepiece_model.proto
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM_MODEL, BPE_MODEL = 1, 2  # TrainerSpec.ModelType (WORD = 3 and CHAR = 4 are not read)
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


class _WireError(ValueError):
    """Where and why the bytes are not a protobuf message; turned into a TokenizerError naming the file."""


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
                    return Piece(text, score, data[end + 6])
    text, score, kind = None, 0.0, NORMAL
    for number, _, value in _fields(data):
        if number == 1:
            text = _text(value, f"piece {index}")
        elif number == 2:
            if not isinstance(value, bytes) or len(value) != 4:
                raise _WireError(f"the score of piece {index} is not a 32-bit float")
            score = _FLOAT.unpack(value)[0]
        elif number == 3:
            kind = _number(value, f"the type of piece {index}")
    if text is None:
        raise _WireError(f"piece {index} has no text")
    return Piece(text, score, kind)


def parse_model_proto(data: bytes, path: Path | str) -> SentencePieceModel:
    """The pieces and settings of a SentencePiece model file's bytes; TokenizerError naming `path` when the bytes
    are not one (damaged, truncated, or another kind of file)."""
    try:
        return _parse(data)
    except _WireError as error:
        raise TokenizerError(f"{path} is not a SentencePiece model ({error}); the file is damaged or is not a "
                             "spiece.model: copy it again from the model's download") from None


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
                    settings["model_type"] = _number(setting, "the model type")
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
    if not pieces:
        raise _WireError("it holds no pieces")
    model = SentencePieceModel(pieces=tuple(pieces), **settings)
    if model.model_type not in (UNIGRAM_MODEL, BPE_MODEL):
        raise _WireError(f"its model type is {model.model_type}; only Unigram (1) and BPE (2) models are read")
    if not 0 <= model.unk_id < len(pieces):
        raise _WireError(f"its unknown piece's id {model.unk_id} is outside its {len(pieces)} pieces")
    return model


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
    return [(piece.piece, piece.score) for piece in model.pieces], model.unk_id


def _bpe_merges(vocab: list[tuple[str, float]], model: SentencePieceModel) -> list[tuple[str, str]]:
    """SentencePiece's BPE keeps no merge list: a piece is made by merging two pieces that spell it, and pieces
    learned earlier score higher, so every split of a normal piece into two known pieces is a merge, ranked by the
    merged piece's score (its id breaks ties)."""
    normal = {token: (score, index) for index, (token, score) in enumerate(vocab)
              if index < len(model.pieces) and model.pieces[index].type == NORMAL}
    ranked = sorted((-score, index, token[:split], token[split:]) for token, (score, index) in normal.items()
                    for split in range(1, len(token)) if token[:split] in normal and token[split:] in normal)
    return [(left, right) for _, _, left, right in ranked]


def tokenizer_from_sentencepiece(model: SentencePieceModel, family: str, config: dict,
                                 specials: dict[str, str | None]) -> Tokenizer:
    """The `tokenizers.Tokenizer` for `model` as `family` encodes with it; `config` is tokenizer_config.json (its
    do_lower_case, keep_accents, add_prefix_space), `specials` the role → token map (cls, sep, pad, mask, unk)."""
    if family not in FAMILIES:
        raise ValueError(f"family is {family!r}; expected one of {', '.join(FAMILIES)}")
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
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
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
