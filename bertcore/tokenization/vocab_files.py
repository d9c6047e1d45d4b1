"""A WordPiece vocabulary's files: a vocab.txt read and checked (byte order mark, blank lines), a tokenizer.json's
WordPiece model, tokenizer_config.json's lower-casing, and what a folder's files record of the vocabulary's size.
bertcore.tokenization.wordpiece builds BertTokenizer from them.
"""

from __future__ import annotations

from pathlib import Path

from bertcore.errors import TokenizerError
from bertcore.files.file_names import TOKENIZER_CONFIG_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.files.reading import (
    TOKENIZER_CONFIG_LIMIT,
    TOKENIZER_JSON_LIMIT,
    VOCAB_LIMIT,
    parse_json,
    present,
    read_bytes,
    read_json,
)

BYTE_ORDER_MARK = "\ufeff"  # kept as part of a vocab.txt's first token, as transformers and `tokenizers` keep it


def read_vocab_txt(path: Path, label: str, special_tokens: tuple[str, ...]) -> list[str]:
    """The tokens of a vocab.txt, one a line (line number = id), read only when it is a regular file of a bounded
    size; TokenizerError naming `label` and `path` for a missing, non-UTF-8, empty or damaged file. A UTF-8 byte
    order mark stays part of the first token, as transformers reads it; where that costs one of
    `special_tokens`, the error names the mark."""
    try:
        data = read_bytes(path, limit=VOCAB_LIMIT, error=TokenizerError, label=label, what="a vocab.txt")
    except FileNotFoundError:
        beside = f" (nor a {TOKENIZER_JSON_FILE} beside it)" if path.name == VOCAB_FILE else ""
        raise TokenizerError(
            f"{label} {path} does not exist{beside}; pass the vocab.txt of a BERT checkpoint "
            "or make one with BertTokenizer.train(...).save(folder)"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise TokenizerError(
                f"{label} {path} is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8; a "
                "vocab.txt is UTF-8, so convert it (e.g. `iconv -f UTF-16 -t UTF-8`)"
            ) from None
        line = data.count(b"\n", 0, error.start) + 1
        raise TokenizerError(
            f"{label} {path} is not UTF-8 text: byte {error.start} (line {line}) is "
            f"{data[error.start:error.start + 1]!r}; a vocab.txt is UTF-8, so convert the file (or use the "
            "vocabulary that came with the model)"
        ) from None
    vocab = text.split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()  # the final newline
    vocab = [token.rstrip("\r") for token in vocab]
    if not any(token.strip() for token in vocab):
        raise TokenizerError(f"{label} {path} is empty; it needs one token per line")
    check_byte_order_mark(vocab, f"{label} {path}", special_tokens)
    check_blank_lines(vocab, f"{label} {path}")
    return vocab


def read_do_lower_case(config_path: Path) -> bool | None:
    values = read_tokenizer_config(config_path)
    value = values.get("do_lower_case") if isinstance(values, dict) else None
    return value if isinstance(value, bool) else None


def read_tokenizer_config(config_path: Path) -> object:
    """tokenizer_config.json's JSON value, or None when there is none; TokenizerError when it cannot be read
    (a FIFO, a folder, a link to a device, too big, not JSON)."""
    if not present(config_path):
        return None
    try:
        return read_json(config_path, limit=TOKENIZER_CONFIG_LIMIT, error=TokenizerError,
                         what="a tokenizer_config.json")
    except FileNotFoundError:
        return None  # removed since we looked: as if it had never been there
    except TokenizerError as error:
        raise TokenizerError(f"{error}; fix or delete it") from None


def wordpiece_vocab(values: object) -> dict | None:
    """The token -> id map of a tokenizer.json's WordPiece model, or None when it holds another model."""
    model = values.get("model") if isinstance(values, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        return None
    return vocab


def check_byte_order_mark(vocab: list[str], source: str, special_tokens: tuple[str, ...]) -> None:
    """A vocab.txt saved with a UTF-8 byte order mark: transformers' BertTokenizer and `tokenizers`' WordPiece
    keep the mark as part of the first token ("\\ufeff[PAD]"), and so does this reader (the same ids). Where that
    costs a special token, the error names the mark rather than only the missing token."""
    if not vocab or not vocab[0].startswith(BYTE_ORDER_MARK):
        return
    missing = [token for token in special_tokens if token not in vocab]
    if missing:
        raise TokenizerError(
            f"{source} starts with a UTF-8 byte order mark (BOM), which is read as part of its first token "
            f"({vocab[0]!r}; transformers' BertTokenizer reads it so too), so it has no {missing[0]} token; "
            "save the file as UTF-8 without a BOM"
        )


def check_blank_lines(vocab: list[str], source: str) -> None:
    """One blank line is read as the token "" with its line's id, as transformers' BertTokenizer reads it (WordPiece
    never produces an empty token, so it only keeps the ids after it on their lines). A second one would give ""
    two ids; transformers then hands out an id equal to its vocabulary size (past the embedding table)."""
    blank = [number for number, token in enumerate(vocab, start=1) if token == ""]
    if len(blank) > 1:
        shown = ", ".join(map(str, blank[:-1])) + f" and {blank[-1]}"
        raise TokenizerError(
            f"{source}: lines {shown} are blank; a vocab.txt holds one token per line and its line number is the "
            "token's id, so the file is damaged (or was edited by hand). Use the vocabulary that came with the "
            "model's weights"
        )


def recorded_vocab_sizes(folder: str | Path) -> list[tuple[Path, int]]:
    """What a checkpoint folder's tokenizer files record about its vocabulary's size, apart from the token
    list itself: tokenizer_config.json's "vocab_size" (BertTokenizer.save writes it), and the number of ids of a
    tokenizer.json (transformers saves one beside vocab.txt; other families' tokenizers are one). [(file, size)],
    empty when none records it; TokenizerError when one of them cannot be read or records something that is no size.

    A vocab.txt's line count alone cannot tell an embedding padded beyond the vocabulary (rows that no token
    uses) from a vocab.txt that lost lines (every later id shifted); these records can."""
    folder = Path(folder)
    records: list[tuple[Path, int]] = []
    config_path = folder / TOKENIZER_CONFIG_FILE
    values = read_tokenizer_config(config_path)
    if isinstance(values, dict) and values.get("vocab_size") is not None:
        size = values["vocab_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise TokenizerError(f"{config_path} records vocab_size {size!r}, which is not a number of tokens; "
                                 "write the vocabulary's size there, or delete the entry")
        records.append((config_path, size))
    json_path = folder / TOKENIZER_JSON_FILE
    if present(json_path):
        try:
            data = read_bytes(json_path, limit=TOKENIZER_JSON_LIMIT, error=TokenizerError, what="a tokenizer.json")
        except FileNotFoundError:
            data = None
        size = _tokenizer_json_size(parse_json(data, json_path, error=TokenizerError)) if data is not None else None
        if size is not None:
            records.append((json_path, size))
    return records


def _tokenizer_json_size(values: object) -> int | None:
    """How many ids a tokenizer.json's vocabulary spans: a WordPiece model's token count; for another model (BPE's
    token → id map, Unigram's list of [piece, score]) one past the largest id of its tokens and added tokens.
    None when the file records no vocabulary."""
    vocab = wordpiece_vocab(values)
    if vocab is not None:
        return len(vocab)
    model = values.get("model") if isinstance(values, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    ids: list[int] = []
    if isinstance(vocab, dict):
        ids = [i for i in vocab.values() if isinstance(i, int)]
    elif isinstance(vocab, list) and vocab:
        ids = [len(vocab) - 1]
    added = values.get("added_tokens") if isinstance(values, dict) else None
    if isinstance(added, list):
        ids += [token["id"] for token in added if isinstance(token, dict) and isinstance(token.get("id"), int)]
    return max(ids) + 1 if ids else None
