"""A model folder's tokenizer files, read safely, and what they say: the token of each role (cls, sep, pad, mask,
unk), the added tokens, the span of ids, and how the pieces mark where words begin. bertcore.tokenization.pretrained
builds its tokenizer from them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Tokenizer

from bertcore.errors import TokenizerError
from bertcore.files.file_names import TOKENIZER_CONFIG_FILE, TOKENIZER_JSON_FILE
from bertcore.files.reading import TOKENIZER_CONFIG_LIMIT, TOKENIZER_JSON_LIMIT, parse_json, present, read_bytes

VOCAB_JSON_FILE = "vocab.json"  # byte-level BPE's token → id map (RoBERTa, GPT-2)
MERGES_FILE = "merges.txt"  # its merge rules, one "left right" pair a line, in order of priority
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
SENTENCEPIECE_FILES = ("spiece.model", "sentencepiece.bpe.model")  # ALBERT's / XLM-RoBERTa's protobuf models
# The files a folder's tokenizer may have been read from; `save` writes back those it read.
TOKENIZER_FILES = (TOKENIZER_JSON_FILE, TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE, VOCAB_JSON_FILE,
                   MERGES_FILE)
ROLES = ("cls", "sep", "pad", "mask", "unk")
# Where tokenizer_config.json names no token for a role: the names the families use, BERT's first.
ROLE_DEFAULTS = {"cls": ("[CLS]", "<s>"), "sep": ("[SEP]", "</s>"), "pad": ("[PAD]", "<pad>"),
                 "mask": ("[MASK]", "<mask>"), "unk": ("[UNK]", "<unk>")}
PIECE_STYLES = ("wordpiece", "byte_level", "sentencepiece", "plain")  # how a piece marks where words begin


def read_tokenizer_json(path: Path) -> tuple[bytes, Tokenizer]:
    data = read_file(path, TOKENIZER_JSON_LIMIT, "a tokenizer.json")
    try:
        return data, Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # the Rust parser raises plain Exceptions; not UTF-8 is a UnicodeDecodeError
        parse_json(data, path, error=TokenizerError)  # names what is wrong with the JSON itself, where it is
        raise TokenizerError(f"{path} is not a tokenizer the `tokenizers` library reads ({error}); the file is "
                             "damaged or of a newer format: save it again with transformers") from None


def read_configs(folder: Path) -> tuple[dict[str, bytes], dict, dict]:
    """The bytes of tokenizer_config.json and special_tokens_map.json where present, and their JSON objects."""
    files = {name: data for name in (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
             if (data := read_optional(folder / name, TOKENIZER_CONFIG_LIMIT)) is not None}
    return (files, json_object(files.get(TOKENIZER_CONFIG_FILE), folder / TOKENIZER_CONFIG_FILE),
            json_object(files.get(SPECIAL_TOKENS_MAP_FILE), folder / SPECIAL_TOKENS_MAP_FILE))


def read_file(path: Path, limit: int, what: str) -> bytes:
    try:
        return read_bytes(path, limit=limit, error=TokenizerError, what=what)
    except FileNotFoundError:
        raise TokenizerError(f"{path} disappeared while it was being read; is another program changing the "
                             "folder?") from None


def read_optional(path: Path, limit: int) -> bytes | None:
    if not present(path):
        return None
    try:
        return read_bytes(path, limit=limit, error=TokenizerError)
    except FileNotFoundError:
        return None


def json_object(data: bytes | None, path: Path) -> dict:
    if data is None:
        return {}
    values = parse_json(data, path, error=TokenizerError)
    if not isinstance(values, dict):
        raise TokenizerError(f"{path} holds a {type(values).__name__}, not a JSON object; fix or delete it")
    return values


def token_name(value: object) -> str | None:
    """A special token as tokenizer_config.json spells it: "<s>", or {"content": "<s>", ...} (older saves)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def role_token(role: str, config: dict, special_map: dict, processor_tokens: dict, vocab) -> str | None:
    for source in (config, special_map):
        if (name := token_name(source.get(f"{role}_token"))) is not None:
            return name
    if role in processor_tokens:
        return processor_tokens[role]
    return next((name for name in ROLE_DEFAULTS[role] if name in vocab), None)


def special_tokens_of(config: dict, special_map: dict, tokenizer: Tokenizer) -> dict[str, str | None]:
    """The token of each role: tokenizer_config.json, else special_tokens_map.json, else what the post-processor
    puts first and last (cls, sep), else the families' usual names where the vocabulary has them."""
    processor = component_json(tokenizer.post_processor)
    processor_tokens = {}
    if isinstance(processor, dict):
        for role in ("cls", "sep"):
            pair = processor.get(role)
            if isinstance(pair, list) and pair and isinstance(pair[0], str):
                processor_tokens[role] = pair[0]  # BertProcessing / RobertaProcessing: [token, id]
        single = processor.get("single")
        if isinstance(single, list):
            named = [item["SpecialToken"].get("id") for item in single
                     if isinstance(item, dict) and isinstance(item.get("SpecialToken"), dict)]
            if named:
                processor_tokens.setdefault("cls", named[0])
                processor_tokens.setdefault("sep", named[-1])
    vocab = _Lookup(tokenizer)
    return {role: role_token(role, config, special_map, processor_tokens, vocab) for role in ROLES}


class _Lookup:
    """`token in vocab` through the tokenizer, without copying its 50k-entry map into a dict."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self._tokenizer.token_to_id(token) is not None


def id_span(tokenizer: Tokenizer, source: str = "the tokenizer") -> int:
    """One past the largest id, where every id below it belongs to exactly one token (the model's or an added one);
    TokenizerError naming `source` otherwise: two tokens of one id (the second is read as the first wherever it
    occurs: a <mask> added on top of a real token's id masks as that token), or an id no token has (one id of
    3,000,000 among 50,000 would size a model's embedding by it). Ids are what index the embedding: a file that
    numbers its tokens otherwise than 0, 1, 2, ... once each is damaged."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    if not vocab:
        raise TokenizerError(f"{source} has no tokens; use the tokenizer files that came with the model")
    ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
    distinct = np.unique(ids)
    if len(distinct) < len(ids):
        repeated = _first_repeat(ids)
        tokens = sorted(token for token, token_id in vocab.items() if token_id == repeated)
        raise TokenizerError(f"{source} gives {tokens[0]!r} and {tokens[1]!r} the same id {repeated}, so one would "
                             "be read as the other; the tokenizer files are damaged or of different models: use the "
                             "ones that came with the model")
    span = int(distinct[-1]) + 1
    if span != len(distinct):
        missing = int(np.argmax(distinct != np.arange(len(distinct))))
        largest = max(vocab, key=vocab.__getitem__)
        raise TokenizerError(f"{source} numbers its {len(vocab):,} tokens up to {span - 1:,} ({largest!r}), but no "
                             f"token has the id {missing:,}; a tokenizer numbers its tokens 0, 1, 2, ... each once, "
                             "so the file is damaged: use the tokenizer files that came with the model")
    return span


def _first_repeat(ids: np.ndarray) -> int:
    ordered = np.sort(ids)
    return int(ordered[np.argmax(ordered[1:] == ordered[:-1])])


def check_vocab_json(values: object, path: Path) -> dict[str, int]:
    """A byte-level BPE vocab.json's token → id map, its ids 0 .. n-1 each once (what every trainer writes and
    what indexes the embedding); TokenizerError naming the file and the token otherwise: a negative id (the Rust
    library's TypeError), one of 3,000,000 among 50,000 tokens (a model sized by it), two tokens of one id, or
    an id no token has (a <mask> added later would take it and collide)."""
    if not isinstance(values, dict) or not all(isinstance(i, int) and not isinstance(i, bool)
                                               for i in values.values()):
        raise TokenizerError(f"{path} is not a map of tokens to ids; a BPE vocab.json is "
                             "{\"token\": id, ...}: use the one that came with the model")
    if not values:
        raise TokenizerError(f"{path} lists no tokens; use the vocab.json that came with the model")
    count = len(values)
    by_id: dict[int, str] = {}
    for token, token_id in values.items():
        if not 0 <= token_id < count:
            raise TokenizerError(f"{path} gives {token!r} the id {token_id:,}, but it lists {count:,} tokens, "
                                 f"whose ids are 0 to {count - 1:,}, each once; the file is damaged: use the "
                                 "vocab.json that came with the model")
        if token_id in by_id:
            raise TokenizerError(f"{path} gives {by_id[token_id]!r} and {token!r} the same id {token_id:,}; the "
                                 "file is damaged: use the vocab.json that came with the model")
        by_id[token_id] = token
    return values


def check_merges(merges: list[tuple[str, str]], vocab: dict[str, int], path: Path, lines: list[str]) -> None:
    """Every merge joins two tokens of vocab.json into a third (the Rust library refuses the file with a bare
    Exception otherwise); TokenizerError naming the line."""
    for left, right in merges:
        for token in (left, right, left + right):
            if token not in vocab:
                number = next((n for n, line in enumerate(lines, start=1) if line == f"{left} {right}"), "?")
                raise TokenizerError(f"{path} line {number} merges {left!r} and {right!r}, but "
                                     f"{path.with_name(VOCAB_JSON_FILE).name} has no {token!r}; the two files are "
                                     "of different models, or damaged: use the ones that came with the model")


def check_added_ids(tokenizer: Tokenizer, config: dict, path: Path) -> None:
    """tokenizer_config.json's added_tokens_decoder says which id each added token has: where the files give it
    another, ids would shift silently; TokenizerError naming the token and both ids."""
    entries = config.get("added_tokens_decoder")
    if not isinstance(entries, dict):
        return
    for key, entry in entries.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("content"), str) and str(key).isdigit()):
            continue
        actual = tokenizer.token_to_id(entry["content"])
        if actual is not None and actual != int(key):
            raise TokenizerError(f"{path} gives the added token {entry['content']!r} the id {key}, but the "
                                 f"vocabulary puts it at {actual}; the files are of different models: use the "
                                 "ones that came with the model")


def check_stated_added_ids(data: bytes, tokenizer: Tokenizer, path: Path) -> None:
    """A tokenizer.json states each added token's id; the Rust library places one whose id is taken (or out of
    turn) at the next free id instead, silently: a token the model learned at the stated id would be read at
    another. TokenizerError naming the token and both ids."""
    try:
        stated = json.loads(data).get("added_tokens")
    except (ValueError, AttributeError, RecursionError):
        return  # the library read it, so it is JSON; anything odder is the library's to judge
    for entry in stated if isinstance(stated, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("content"), str) and isinstance(entry.get("id"), int):
            actual = tokenizer.token_to_id(entry["content"])
            if actual is not None and actual != entry["id"]:
                raise TokenizerError(f"{path} gives the added token {entry['content']!r} the id {entry['id']}, but "
                                     f"{tokenizer.id_to_token(entry['id'])!r} has that id, so it would be read at "
                                     f"{actual}; the file is damaged: use the tokenizer.json that came with the model")


def added_token(entry: object, content: str, special: bool = True) -> AddedToken:
    """An AddedToken with the flags of a tokenizer_config.json entry ({"content", "lstrip", ...}), else plain."""
    flags = entry if isinstance(entry, dict) else {}
    return AddedToken(content, single_word=bool(flags.get("single_word", False)),
                      lstrip=bool(flags.get("lstrip", False)), rstrip=bool(flags.get("rstrip", False)),
                      normalized=bool(flags.get("normalized", False)), special=bool(flags.get("special", special)))


def added_tokens(config: dict) -> list[AddedToken]:
    """tokenizer_config.json's added_tokens_decoder, as AddedTokens (a vocab.json + merges.txt folder's extras)."""
    entries = config.get("added_tokens_decoder")
    if not isinstance(entries, dict):
        return []
    return [added_token(entry, entry["content"])
            for _, entry in sorted(entries.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else 0)
            if isinstance(entry, dict) and isinstance(entry.get("content"), str)]


def component_json(component: object) -> object:
    """A pipeline component (pre-tokenizer, post-processor...) as its JSON, without serialising the vocabulary."""
    return json.loads(component.__getstate__()) if component is not None else None


def pipeline_json(tokenizer: Tokenizer) -> dict:
    """The parts of the tokenizer that say how pieces mark words."""
    return {"pre_tokenizer": component_json(tokenizer.pre_tokenizer), "decoder": component_json(tokenizer.decoder),
            "model": {"type": type(tokenizer.model).__name__}}


def piece_style_of(values: dict) -> str:
    """"byte_level" (Ġ before a word), "sentencepiece" (▁), "wordpiece" (## on continuations) or "plain"."""
    kinds: set[str] = set()

    def collect(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                kinds.add(node["type"])
            for value in node.values():
                if isinstance(value, (dict, list)):
                    collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for name in ("pre_tokenizer", "decoder"):
        collect(values.get(name))
    if "ByteLevel" in kinds:
        return "byte_level"
    if "Metaspace" in kinds:
        return "sentencepiece"
    model = values.get("model")
    if (isinstance(model, dict) and model.get("type") == "WordPiece") or "WordPiece" in kinds:
        return "wordpiece"
    return "plain"
