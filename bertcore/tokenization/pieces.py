"""Tokens as a reader sees them, whatever the family's way of marking words.

WordPiece (BERT, DistilBERT, ELECTRA) marks a piece that continues a word with "##"; byte-level BPE (RoBERTa,
ModernBERT) marks a piece that follows a space with "Ġ" and writes every byte as a printable stand-in ("Ã©" is
"é", "Ċ" a newline); SentencePiece (ALBERT, XLM-RoBERTa) marks a word's first piece with "▁". One rendering for
all of them:

    readable_piece("##ing", "wordpiece")      -> "·ing"     glued to the piece before it
    readable_piece("Ġcat", "byte_level")      -> "␣cat"     a space before it: a new word
    readable_piece("Ã©", "byte_level")        -> "é"
    readable_piece("▁cat", "sentencepiece")   -> "␣cat"

`describe_piece` says the same in words, with the raw piece, for a tooltip; `readable_tokens` renders an
encoding's whole token row. Plain Python: the token table, the Explain tab and any other view call them.
"""

from __future__ import annotations

WORD_START = "\u2423"  # "␣": a space comes before this piece, so it begins a word
CONTINUATION = "\u00b7"  # "·": this piece is glued to the one before it
WORDPIECE_CONTINUATION = "##"
BYTE_LEVEL_SPACE = "\u0120"  # "Ġ"
SENTENCEPIECE_SPACE = "\u2581"  # "▁"
# Bytes that cannot be shown as themselves: a newline and a tab get a sign, others their hex value.
_SHOWN_BYTES = {"\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d", " ": WORD_START}


def _byte_level_alphabet() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte → the byte: printable Latin-1 bytes stand for themselves,
    the other 68 (controls, space, NBSP, soft hyphen) for U+0100 onwards, in byte order (GPT-2's table)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins = {chr(byte): byte for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in printable:
            stand_ins[chr(256 + extra)] = byte
            extra += 1
    return stand_ins


_BYTE_OF = _byte_level_alphabet()


def readable_piece(token: str, piece_style: str) -> str:
    """The piece as text with one visible mark: "␣" where a space precedes it, "·" where it continues a word
    (WordPiece's "##"). `piece_style` is the tokenizer's ("wordpiece", "byte_level", "sentencepiece", "plain")."""
    if piece_style == "wordpiece":
        if token.startswith(WORDPIECE_CONTINUATION) and len(token) > len(WORDPIECE_CONTINUATION):
            return CONTINUATION + token[len(WORDPIECE_CONTINUATION):]
        return token
    if piece_style == "sentencepiece":
        return token.replace(SENTENCEPIECE_SPACE, WORD_START)
    if piece_style == "byte_level":
        return _byte_level_text(token)
    return token


def readable_tokens(encoding) -> list[str]:
    """An encoding's token row as people read it (bertcore.tokenization.wordpiece.Encoding, any family's): each
    piece of a sentence through `readable_piece`, the layout's special tokens ([CLS], </s>) as they are."""
    return [token if sequence is None else readable_piece(token, encoding.piece_style)
            for token, sequence in zip(encoding.tokens, encoding.sequence_ids, strict=True)]


def continues_word(token: str, piece_style: str) -> bool:
    """The piece is glued to the one before it: WordPiece's "##…", a byte-level or SentencePiece piece without its
    space mark. The first piece of a text has no mark either: a caller knows where the text starts."""
    if piece_style == "wordpiece":
        return token.startswith(WORDPIECE_CONTINUATION) and len(token) > len(WORDPIECE_CONTINUATION)
    if piece_style == "byte_level":
        return not token.startswith(BYTE_LEVEL_SPACE)
    if piece_style == "sentencepiece":
        return not token.startswith(SENTENCEPIECE_SPACE)
    return False


def piece_text(token: str, piece_style: str) -> str:
    """The piece's own text without its word mark, to join pieces back into words ("##ing" -> "ing",
    "Ġcat" -> "cat", "Ã©" -> "é")."""
    if piece_style == "wordpiece":
        return token[len(WORDPIECE_CONTINUATION):] if continues_word(token, piece_style) else token
    if piece_style == "byte_level":
        return readable_piece(token, piece_style).removeprefix(WORD_START)
    if piece_style == "sentencepiece":
        return token.removeprefix(SENTENCEPIECE_SPACE)
    return token


def describe_piece(token: str, piece_style: str) -> str:
    """The raw piece and what its mark means, in words: "'Ġcat': follows a space (a new word)"."""
    if piece_style == "wordpiece" and token.startswith(WORDPIECE_CONTINUATION) and len(token) > 2:
        return f"{token!r}: continues the word before it (WordPiece's ##)"
    if piece_style == "byte_level" and token.startswith(BYTE_LEVEL_SPACE):
        return f"{token!r}: follows a space, so it begins a word (byte-level BPE's Ġ)"
    if piece_style == "byte_level" and readable_piece(token, piece_style) != token:
        return f"{token!r}: byte-level BPE's stand-ins for the bytes of {readable_piece(token, piece_style)!r}"
    if piece_style == "sentencepiece" and token.startswith(SENTENCEPIECE_SPACE):
        return f"{token!r}: begins a word (SentencePiece's ▁)"
    if piece_style in ("byte_level", "sentencepiece"):
        return f"{token!r}: no space before it, so it continues a word (or starts the text)"
    return repr(token)


def _byte_level_text(token: str) -> str:
    """A byte-level piece decoded to its bytes, then to text; bytes that are half a character are shown as <0xNN>
    and whitespace by a sign. A piece holding characters outside the stand-in alphabet (an added token) stays."""
    if any(char not in _BYTE_OF for char in token):
        return token
    data = bytes(_BYTE_OF[char] for char in token)
    shown = []
    position = 0
    while position < len(data):
        for width in (1, 2, 3, 4):
            try:
                char = data[position : position + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            shown.append(_SHOWN_BYTES.get(char, char) if char.isprintable() or char in _SHOWN_BYTES
                         else f"<0x{data[position]:02X}>")
            position += width
            break
        else:
            shown.append(f"<0x{data[position]:02X}>")
            position += 1
    return "".join(shown)
