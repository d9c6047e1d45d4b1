"""SentencePiece models written field by field, for tests and the fault audit: `proto_field` writes one protobuf
field (varint, float or length-delimited), `hand_made_spm` a small model of the pieces the app needs. What
SentencePiece itself never writes (fields out of order, odd types, damaged values) is made from `proto_field`."""

from __future__ import annotations

import struct

UNKNOWN, CONTROL = 2, 3  # piece types, as sentencepiece_model.proto numbers them


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 is written as ten bytes, as protobuf does
    out = b""
    while value >= 0x80:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def proto_field(number: int, value: int | bytes | float) -> bytes:
    """Field `number` holding `value`: a float as fixed32, bytes length-delimited, an int as a varint."""
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    return _varint(number << 3) + _varint(value)


def hand_made_spm(*extra_pieces: bytes, charsmap: bytes = b"", model_type: int = 1) -> bytes:
    """A SentencePiece model written field by field: <unk>, the four control tokens the app needs, "▁" and "a",
    then `extra_pieces` (each a piece message); a normalisation table where given."""
    pieces = [proto_field(1, b"<unk>") + proto_field(3, UNKNOWN)]
    pieces += [proto_field(1, token.encode()) + proto_field(2, 0.0) + proto_field(3, CONTROL)
               for token in ("<s>", "</s>", "<pad>", "<mask>")]
    pieces += [proto_field(1, "▁".encode()) + proto_field(2, -1.0), proto_field(1, b"a") + proto_field(2, -2.0),
               *extra_pieces]
    trainer = proto_field(3, model_type) + proto_field(40, 0)
    normalizer = proto_field(1, b"custom") + (proto_field(2, charsmap) if charsmap else b"")
    return b"".join(proto_field(1, piece) for piece in pieces) + proto_field(2, trainer) + proto_field(3, normalizer)
