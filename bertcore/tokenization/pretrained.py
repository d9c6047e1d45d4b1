"""A model folder's own tokenizer, whatever its kind: byte-level BPE (RoBERTa), Unigram/SentencePiece (ALBERT,
XLM-RoBERTa), ModernBERT's BPE, read through the Rust `tokenizers` library as the folder has it, with the pair
template the folder's post-processor defines (`<s> A </s></s> B </s>`, `[CLS] A [SEP] B [SEP]`, ...).

    tokenizer = tokenizer_from_folder("roberta-base/")   # vocab.txt → BertTokenizer; anything else → this class
    encoding = tokenizer.encode("The cat sat.", "It purred.", max_length=128)

It produces the same `Encoding` as BERT's WordPiece tokenizer (bertcore.tokenization.wordpiece) and answers the
same questions (ids of the special tokens, vocab_size, ids ↔ tokens, decode, save), so every caller works with
either. Its ids equal `transformers.AutoTokenizer.from_pretrained(folder)`'s on single sentences and pairs,
truncated longest-first: the pieces come from the folder's normalizer, pre-tokenizer and model, the layout from
its post-processor, and the truncation is the Rust library's rule (`longest_first`), applied before the
post-processor adds the special tokens, as transformers applies it.

What a folder may hold, in the order looked for: tokenizer.json (any model: BPE, Unigram, WordLevel; a WordPiece
one is read by BertTokenizer), else vocab.json + merges.txt (byte-level BPE laid out as RoBERTa). A folder with
only a SentencePiece model (spiece.model, sentencepiece.bpe.model) is read by bertcore.tokenization.
sentencepiece_model, without the `sentencepiece` package, as ALBERT's or XLM-RoBERTa's tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from bertcore.errors import TokenizerError
from bertcore.files.atomic import write_bytes_atomic
from bertcore.files.reading import (
    CONFIG_JSON_LIMIT,
    TOKENIZER_CONFIG_LIMIT,
    TOKENIZER_JSON_LIMIT,
    VOCAB_LIMIT,
    parse_json,
    present,
    read_bytes,
)
from bertcore.files.run_folder import CONFIG_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.tokenization.encoding import Encoding, TokenizerBase
from bertcore.tokenization.sentencepiece_model import (
    family_of,
    family_vocabulary,
    parse_model_proto,
    tokenizer_from_sentencepiece,
)
from bertcore.tokenization.wordpiece import BertTokenizer

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


class PretrainedTokenizer(TokenizerBase):
    """A `tokenizers.Tokenizer` (from a folder: `from_folder`) with BERT's encoding interface; the layout of a pair
    is whatever the tokenizer's post-processor adds, the token types included."""

    def __init__(self, tokenizer: Tokenizer, special_tokens: Mapping[str, str | None], *, source: str = "the tokenizer",
                 files: Mapping[str, bytes] | None = None, vocab_file: Path | None = None):
        tokenizer.no_truncation()  # a tokenizer.json may carry its own; the layout below decides
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.source = source
        self.vocab_file = vocab_file  # the tokenizer.json or vocab.json it was read from; None when built
        self._files = dict(files or {})  # name → bytes of the files read, written back by `save`
        self._vocab_size = _id_span(tokenizer)
        ids: dict[str, int | None] = {}
        for role in ROLES:
            token = special_tokens.get(role)
            token_id = tokenizer.token_to_id(token) if token is not None else None
            if token is not None and token_id is None:
                raise TokenizerError(f"{source} names {token!r} as its {role} token, but it is not in the vocabulary; "
                                     "the tokenizer files are of different models")
            ids[role] = token_id
        for role in ("cls", "sep", "pad", "mask"):
            if ids[role] is None:
                raise TokenizerError(
                    f"{source} has no {role} token (tried {', '.join(ROLE_DEFAULTS[role])}); name it in "
                    f"{TOKENIZER_CONFIG_FILE} as \"{role}_token\": the app needs one to lay out, pad and mask inputs")
        self.cls_token_id: int = ids["cls"]
        self.sep_token_id: int = ids["sep"]
        self.pad_token_id: int = ids["pad"]
        self.mask_token_id: int = ids["mask"]
        self.unk_token_id: int | None = ids["unk"]  # None: byte-level BPE without <unk> has no unknown pieces
        self.cls_token, self.sep_token, self.pad_token, self.mask_token, self.unk_token = (
            special_tokens.get(role) for role in ROLES)
        added_special = {token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special}
        self.special_token_ids = frozenset(added_special | {i for i in ids.values() if i is not None})
        self.piece_style = _piece_style(_pipeline_json(tokenizer))
        self._layout = tokenizer.post_processor
        if self._layout is None:  # a bare tokenizer.json: BERT's layout with the folder's tokens
            self._layout = processors.TemplateProcessing(
                single=f"{self.cls_token}:0 $A:0 {self.sep_token}:0",
                pair=f"{self.cls_token}:0 $A:0 {self.sep_token}:0 $B:1 {self.sep_token}:1",
                special_tokens=[(self.cls_token, self.cls_token_id), (self.sep_token, self.sep_token_id)])
        # Pieces are encoded without the post-processor and laid out by it once: RoBERTa's trims the space off a
        # "Ġw" piece's offsets, and running it on the pieces too would trim it twice ((6, 8) → (7, 8) → (8, 8)).
        tokenizer.post_processor = None
        self._num_specials = (self._layout.num_special_tokens_to_add(False),
                              self._layout.num_special_tokens_to_add(True))
        self._templates = (self._template(False), self._template(True))
        self.layouts = (self._describe_layout(False), self._describe_layout(True))  # "<s> A </s>", pair's

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_folder(cls, folder: str | Path) -> PretrainedTokenizer:
        """The tokenizer of a model folder: its tokenizer.json, else its vocab.json + merges.txt (RoBERTa's
        byte-level BPE). TokenizerError naming the folder and what to add when it has neither."""
        folder = Path(folder)
        if present(folder / TOKENIZER_JSON_FILE):
            return cls._from_tokenizer_json(folder, *_read_tokenizer_json(folder / TOKENIZER_JSON_FILE))
        if present(folder / VOCAB_JSON_FILE) and present(folder / MERGES_FILE):
            return cls._from_vocab_and_merges(folder)
        kept = [name for name in SENTENCEPIECE_FILES if present(folder / name)]
        if kept:
            return cls._from_sentencepiece(folder, kept[0])
        raise TokenizerError(f"{folder} has no tokenizer: {VOCAB_FILE} does not exist (WordPiece), nor a "
                             f"{TOKENIZER_JSON_FILE}, nor {VOCAB_JSON_FILE} + {MERGES_FILE} (byte-level BPE); copy the "
                             "tokenizer files that came with the model into the folder")

    @classmethod
    def _from_tokenizer_json(cls, folder: Path, data: bytes, tokenizer: Tokenizer) -> PretrainedTokenizer:
        files, config, special_map = _read_configs(folder)
        files[TOKENIZER_JSON_FILE] = data
        specials = _special_tokens(config, special_map, tokenizer)
        path = folder / TOKENIZER_JSON_FILE
        return cls(tokenizer, specials, source=str(path), files=files, vocab_file=path)

    @classmethod
    def _from_vocab_and_merges(cls, folder: Path) -> PretrainedTokenizer:
        """RoBERTa's byte-level BPE as transformers builds it from vocab.json + merges.txt."""
        files, config, special_map = _read_configs(folder)
        vocab_path, merges_path = folder / VOCAB_JSON_FILE, folder / MERGES_FILE
        vocab_data = _read(vocab_path, VOCAB_LIMIT, "a vocab.json")
        merges_data = _read(merges_path, VOCAB_LIMIT, "a merges.txt")
        vocab = parse_json(vocab_data, vocab_path, error=TokenizerError)
        if not isinstance(vocab, dict) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                  for i in vocab.values()):
            raise TokenizerError(f"{vocab_path} is not a map of tokens to ids; a BPE vocab.json is "
                                 "{\"token\": id, ...}: use the one that came with the model")
        try:
            lines = merges_data.decode("utf-8").splitlines()
        except UnicodeDecodeError as error:
            raise TokenizerError(f"{merges_path} is not UTF-8 text (byte {error.start}); use the merges.txt that "
                                 "came with the model") from None
        merges = []
        for number, line in enumerate(lines, start=1):
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise TokenizerError(f"{merges_path} line {number} ({line[:40]!r}) is not two pieces separated by "
                                     "one space; the file is damaged")
            merges.append((parts[0], parts[1]))
        add_prefix_space = bool(config.get("add_prefix_space", False))
        trim_offsets = bool(config.get("trim_offsets", True))
        tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="",
                                  fuse_unk=False))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        tokenizer.decoder = decoders.ByteLevel()
        specials = {role: _role_token(role, config, special_map, {}, vocab) for role in ROLES}
        # as transformers adds them: each with the flags tokenizer_config.json gives it (roberta-base's <mask> takes
        # the space before it: lstrip), plain otherwise, then added_tokens_decoder's, whose flags win
        tokenizer.add_special_tokens([_added_token(config.get(f"{role}_token"), token)
                                      for role, token in specials.items() if token is not None])
        for token in _added_tokens(config):
            tokenizer.add_special_tokens([token]) if token.special else tokenizer.add_tokens([token])
        tokenizer.post_processor = processors.RobertaProcessing(
            (specials["sep"] or "</s>", vocab.get(specials["sep"], 2)),
            (specials["cls"] or "<s>", vocab.get(specials["cls"], 0)), trim_offsets, add_prefix_space)
        files[VOCAB_JSON_FILE], files[MERGES_FILE] = vocab_data, merges_data
        return cls(tokenizer, specials, source=f"{vocab_path} + {MERGES_FILE}", files=files, vocab_file=vocab_path)

    @classmethod
    def _from_sentencepiece(cls, folder: Path, name: str) -> PretrainedTokenizer:
        """ALBERT's / XLM-RoBERTa's SentencePiece model as transformers builds its tokenizer from the folder (the
        family from tokenizer_config.json's tokenizer_class, else config.json's model_type); `save` adds a
        tokenizer.json beside the model file."""
        files, config, special_map = _read_configs(folder)
        path = folder / name
        data = _read(path, TOKENIZER_JSON_LIMIT, "a SentencePiece model")
        model = parse_model_proto(data, path)
        model_config = _json_object(_read_optional(folder / CONFIG_FILE, CONFIG_JSON_LIMIT), folder / CONFIG_FILE)
        family = family_of(config, model_config)
        known = {token for token, _ in family_vocabulary(model, family)[0]}
        specials = {role: _role_token(role, config, special_map, {}, known) for role in ROLES}
        tokenizer = tokenizer_from_sentencepiece(model, family, config, specials)
        for token in _added_tokens(config):
            if tokenizer.token_to_id(token.content) is None:
                tokenizer.add_special_tokens([token]) if token.special else tokenizer.add_tokens([token])
        files[name] = data
        return cls(tokenizer, specials, source=str(path), files=files, vocab_file=path)

    def save(self, folder: str | Path) -> Path:
        """Write the tokenizer files it was read from (byte for byte, so transformers reads them as before), or a
        tokenizer.json and tokenizer_config.json when it was built in memory; returns the main file's path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        files = dict(self._files)
        if TOKENIZER_JSON_FILE not in files and VOCAB_JSON_FILE not in files:
            self._tokenizer.post_processor = self._layout
            try:
                files[TOKENIZER_JSON_FILE] = self._tokenizer.to_str().encode("utf-8")
            finally:
                self._tokenizer.post_processor = None
        if TOKENIZER_CONFIG_FILE not in files:
            config = {"tokenizer_class": "PreTrainedTokenizerFast",
                      **{f"{role}_token": getattr(self, f"{role}_token") for role in ROLES
                         if getattr(self, f"{role}_token") is not None}}
            files[TOKENIZER_CONFIG_FILE] = json.dumps(config, indent=2).encode("utf-8")
        for name, data in files.items():
            write_bytes_atomic(folder / name, data)
        return folder / (TOKENIZER_JSON_FILE if TOKENIZER_JSON_FILE in files else VOCAB_JSON_FILE)

    # ---- lookup -------------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Ids 0..vocab_size-1: the model's tokens and the added ones (its embedding table may be larger)."""
        return self._vocab_size

    @cached_property
    def vocab(self) -> list[str]:
        """Every token by its id ("" for an id no token has)."""
        return [self._tokenizer.id_to_token(i) or "" for i in range(self._vocab_size)]

    def token_to_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def id_to_token(self, token_id: int) -> str:
        token = self._tokenizer.id_to_token(int(token_id)) if 0 <= token_id < self._vocab_size else None
        if token is None:
            raise TokenizerError(f"token id {token_id} is outside the vocabulary (0..{self._vocab_size - 1})")
        return token

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Token ids back to text, through the folder's decoder (byte-level bytes and ▁ become text and spaces)."""
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def __repr__(self) -> str:
        return f"PretrainedTokenizer({self.layouts[1]!r}, vocab_size={self.vocab_size}, pieces={self.piece_style})"

    # ---- encoding -----------------------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """The pieces of one text, no special tokens (an unknown piece as the unknown token)."""
        pieces = self._encode_piece(text, "the text")
        return [self.unk_token if token_id == self.unk_token_id else token
                for token, token_id in zip(pieces.tokens, pieces.ids, strict=True)]

    def encode(self, text_a: str, text_b: str | None = None, max_length: int = 512,
               pad_to: int | None = None) -> Encoding:
        """The model's layout of A (and B), longest-first truncation to max_length, padding to pad_to."""
        text_b, piece_a, piece_b, keep_a, keep_b, truncation = self._cut_pieces(text_a, text_b, max_length)
        if truncation is not None:
            piece_a.truncate(keep_a)
            if piece_b is not None:
                piece_b.truncate(keep_b)
        laid_out = self._layout.process(piece_a, piece_b, add_special_tokens=True)
        input_ids = list(laid_out.ids)
        # Unigram reports an unknown piece by its text; the token of its id is <unk>, as transformers shows it
        tokens = [self.unk_token if token_id == self.unk_token_id else token
                  for token, token_id in zip(laid_out.tokens, input_ids, strict=True)]
        num_real = len(input_ids)
        num_pad = self._padding(num_real, pad_to, max_length)
        sequence_ids = list(laid_out.sequence_ids)
        offsets = [offset if sequence is not None else (0, 0)
                   for offset, sequence in zip(laid_out.offsets, sequence_ids, strict=True)]
        unknown_words = self._unknown_words(text_a, text_b, input_ids, sequence_ids, offsets)
        return Encoding(
            tokens=tokens + [self.pad_token] * num_pad,
            input_ids=input_ids + [self.pad_token_id] * num_pad,
            segment_ids=list(laid_out.type_ids) + [0] * num_pad,
            position_ids=list(range(num_real + num_pad)),
            attention_mask=[1] * num_real + [0] * num_pad,
            special_tokens_mask=list(laid_out.special_tokens_mask) + [1] * num_pad,
            sequence_ids=sequence_ids + [None] * num_pad,
            offsets=offsets + [(0, 0)] * num_pad,
            truncation=truncation,
            unknown_words=unknown_words,
            piece_style=self.piece_style,
        )

    def _template(self, is_pair: bool) -> list[tuple[int | None, str, int, int]]:
        """The post-processor's layout as (sentence or None for a special, token, id, token type) slots, read off
        what it makes of a one-word sentence (a sentence's run of pieces is one slot)."""
        piece = self._tokenizer.encode("a", add_special_tokens=False)
        laid_out = self._layout.process(piece, piece if is_pair else None, add_special_tokens=True)
        slots: list[tuple[int | None, str, int, int]] = []
        for token, token_id, sequence, type_id in zip(laid_out.tokens, laid_out.ids, laid_out.sequence_ids,
                                                      laid_out.type_ids, strict=True):
            if sequence is None or not slots or slots[-1][0] != sequence:
                slots.append((sequence, token, token_id, type_id))
        return slots

    def _describe_layout(self, is_pair: bool) -> str:
        """The template in words: "<s> A </s></s> B </s>"."""
        words = [token if sequence is None else "AB"[sequence] for sequence, token, _, _ in self._templates[is_pair]]
        return " ".join(words).replace(f"{self.sep_token} {self.sep_token}", self.sep_token * 2)

    def layout_ids(self, ids_a: list[int], ids_b: list[int] | None = None) -> tuple[list[int], list[int], list[int]]:
        """Sentences already tokenized (and truncated) laid out as the model expects: (input_ids, segment_ids,
        special_tokens_mask), e.g. <s> A </s></s> B </s> with all segments 0 for RoBERTa. For batches built from
        `encode_ids`, where `encode` would tokenize again."""
        input_ids: list[int] = []
        segment_ids: list[int] = []
        special: list[int] = []
        for sequence, _, token_id, type_id in self._templates[ids_b is not None]:
            ids = [token_id] if sequence is None else list(ids_a if sequence == 0 else ids_b)
            input_ids += ids
            segment_ids += [type_id] * len(ids)
            special += [int(sequence is None)] * len(ids)
        return input_ids, segment_ids, special

    @staticmethod
    def _no_tokens_message(name: str, text: str) -> str:
        return (f"sentence {name} ({text[:40]!r}) has no tokens after the tokenizer's normalisation — it holds only "
                "control, zero-width or other ignored characters; type some words")

    def _truncation_message(self, len_a: int, len_b: int, keep_a: int, keep_b: int, max_length: int) -> str:
        is_pair = len_b > 0
        specials = f"{self._num_specials[is_pair]} of them for the special tokens of {self.layouts[is_pair]}"
        if not is_pair:
            return (f"sentence A has {len_a} tokens; the model accepts {max_length} positions in total ({specials}), "
                    f"so it was cut to {keep_a} tokens ({len_a - keep_a} removed)")
        cuts = [f"{name} was cut to {keep} tokens ({length - keep} removed)"
                for name, length, keep in (("A", len_a, keep_a), ("B", len_b, keep_b)) if keep < length]
        return (f"sentence A has {len_a} tokens and sentence B {len_b}; the model accepts {max_length} positions in "
                f"total ({specials}), so {' and '.join(cuts)}")


def tokenizer_from_folder(folder: str | Path) -> BertTokenizer | PretrainedTokenizer:
    """The tokenizer a model folder has: WordPiece (vocab.txt, or a tokenizer.json with a WordPiece model) as
    BertTokenizer; any other tokenizer.json, or vocab.json + merges.txt, as PretrainedTokenizer."""
    folder = Path(folder)
    if present(folder / VOCAB_FILE):
        return BertTokenizer.from_vocab_file(folder)
    if present(folder / TOKENIZER_JSON_FILE):
        data, tokenizer = _read_tokenizer_json(folder / TOKENIZER_JSON_FILE)
        if type(tokenizer.model).__name__ == "WordPiece":
            return BertTokenizer.from_vocab_file(folder)
        return PretrainedTokenizer._from_tokenizer_json(folder, data, tokenizer)
    return PretrainedTokenizer.from_folder(folder)


def tokenizer_from_path(path: str | Path) -> BertTokenizer | PretrainedTokenizer:
    """A tokenizer named as a user names it: a folder (as `tokenizer_from_folder`), its tokenizer.json, vocab.json
    or merges.txt (the folder's tokenizer), or a vocab.txt."""
    path = Path(path)
    if path.is_dir():
        return tokenizer_from_folder(path)
    if path.name in (TOKENIZER_JSON_FILE, VOCAB_JSON_FILE, MERGES_FILE):
        return tokenizer_from_folder(path.parent)
    return BertTokenizer.from_vocab_file(path)


def _read_tokenizer_json(path: Path) -> tuple[bytes, Tokenizer]:
    data = _read(path, TOKENIZER_JSON_LIMIT, "a tokenizer.json")
    try:
        return data, Tokenizer.from_str(data.decode("utf-8"))
    except Exception as error:  # the Rust parser raises plain Exceptions; not UTF-8 is a UnicodeDecodeError
        parse_json(data, path, error=TokenizerError)  # names what is wrong with the JSON itself, where it is
        raise TokenizerError(f"{path} is not a tokenizer the `tokenizers` library reads ({error}); the file is "
                             "damaged or of a newer format: save it again with transformers") from None


def _read_configs(folder: Path) -> tuple[dict[str, bytes], dict, dict]:
    """The bytes of tokenizer_config.json and special_tokens_map.json where present, and their JSON objects."""
    files = {name: data for name in (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
             if (data := _read_optional(folder / name, TOKENIZER_CONFIG_LIMIT)) is not None}
    return (files, _json_object(files.get(TOKENIZER_CONFIG_FILE), folder / TOKENIZER_CONFIG_FILE),
            _json_object(files.get(SPECIAL_TOKENS_MAP_FILE), folder / SPECIAL_TOKENS_MAP_FILE))


def _read(path: Path, limit: int, what: str) -> bytes:
    try:
        return read_bytes(path, limit=limit, error=TokenizerError, what=what)
    except FileNotFoundError:
        raise TokenizerError(f"{path} disappeared while it was being read; is another program changing the "
                             "folder?") from None


def _read_optional(path: Path, limit: int) -> bytes | None:
    if not present(path):
        return None
    try:
        return read_bytes(path, limit=limit, error=TokenizerError)
    except FileNotFoundError:
        return None


def _json_object(data: bytes | None, path: Path) -> dict:
    if data is None:
        return {}
    values = parse_json(data, path, error=TokenizerError)
    if not isinstance(values, dict):
        raise TokenizerError(f"{path} holds a {type(values).__name__}, not a JSON object; fix or delete it")
    return values


def _token_name(value: object) -> str | None:
    """A special token as tokenizer_config.json spells it: "<s>", or {"content": "<s>", ...} (older saves)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _role_token(role: str, config: dict, special_map: dict, processor_tokens: dict, vocab) -> str | None:
    for source in (config, special_map):
        if (name := _token_name(source.get(f"{role}_token"))) is not None:
            return name
    if role in processor_tokens:
        return processor_tokens[role]
    return next((name for name in ROLE_DEFAULTS[role] if name in vocab), None)


def _special_tokens(config: dict, special_map: dict, tokenizer: Tokenizer) -> dict[str, str | None]:
    """The token of each role: tokenizer_config.json, else special_tokens_map.json, else what the post-processor
    puts first and last (cls, sep), else the families' usual names where the vocabulary has them."""
    processor = _component_json(tokenizer.post_processor)
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
    return {role: _role_token(role, config, special_map, processor_tokens, vocab) for role in ROLES}


class _Lookup:
    """`token in vocab` through the tokenizer, without copying its 50k-entry map into a dict."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self._tokenizer.token_to_id(token) is not None


def _id_span(tokenizer: Tokenizer) -> int:
    """One past the largest id. Gaps come from added tokens placed beyond the model's ids (their few ids are
    known), so the count of tokens, or one past the largest added id, is it when that id has a token and the next
    has none; otherwise the whole map is read."""
    added = tokenizer.get_added_tokens_decoder()
    span = max(tokenizer.get_vocab_size(with_added_tokens=True), max(added, default=-1) + 1)
    if span and tokenizer.id_to_token(span - 1) is not None and tokenizer.id_to_token(span) is None:
        return span
    return max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1


def _added_token(entry: object, content: str, special: bool = True) -> AddedToken:
    """An AddedToken with the flags of a tokenizer_config.json entry ({"content", "lstrip", ...}), else plain."""
    flags = entry if isinstance(entry, dict) else {}
    return AddedToken(content, single_word=bool(flags.get("single_word", False)),
                      lstrip=bool(flags.get("lstrip", False)), rstrip=bool(flags.get("rstrip", False)),
                      normalized=bool(flags.get("normalized", False)), special=bool(flags.get("special", special)))


def _added_tokens(config: dict) -> list[AddedToken]:
    """tokenizer_config.json's added_tokens_decoder, as AddedTokens (a vocab.json + merges.txt folder's extras)."""
    entries = config.get("added_tokens_decoder")
    if not isinstance(entries, dict):
        return []
    return [_added_token(entry, entry["content"])
            for _, entry in sorted(entries.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else 0)
            if isinstance(entry, dict) and isinstance(entry.get("content"), str)]


def _component_json(component: object) -> object:
    """A pipeline component (pre-tokenizer, post-processor...) as its JSON, without serialising the vocabulary."""
    return json.loads(component.__getstate__()) if component is not None else None


def _pipeline_json(tokenizer: Tokenizer) -> dict:
    """The parts of the tokenizer that say how pieces mark words."""
    return {"pre_tokenizer": _component_json(tokenizer.pre_tokenizer), "decoder": _component_json(tokenizer.decoder),
            "model": {"type": type(tokenizer.model).__name__}}


def _piece_style(values: dict) -> str:
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
