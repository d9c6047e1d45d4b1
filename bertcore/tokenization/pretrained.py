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

from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from bertcore.errors import TokenizerError
from bertcore.files.atomic import write_bytes_atomic
from bertcore.files.file_names import CONFIG_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.files.reading import (
    CONFIG_JSON_LIMIT,
    TOKENIZER_JSON_LIMIT,
    VOCAB_LIMIT,
    parse_json,
    present,
)
from bertcore.tokenization.encoding import Encoding, TokenizerBase
from bertcore.tokenization.sentencepiece_model import (
    family_of,
    family_vocabulary,
    parse_model_proto,
    tokenizer_from_sentencepiece,
)
from bertcore.tokenization.tokenizer_files import (
    MERGES_FILE,
    ROLE_DEFAULTS,
    ROLES,
    SENTENCEPIECE_FILES,
    VOCAB_JSON_FILE,
    added_token,
    added_tokens,
    check_added_ids,
    check_merges,
    check_stated_added_ids,
    check_vocab_json,
    id_span,
    json_object,
    piece_style_of,
    pipeline_json,
    read_configs,
    read_file,
    read_optional,
    read_tokenizer_json,
    role_token,
    special_tokens_of,
)
from bertcore.tokenization.wordpiece import BertTokenizer


class PretrainedTokenizer(TokenizerBase):
    """A `tokenizers.Tokenizer` (from a folder: `from_folder`) with BERT's encoding interface; the layout of a pair
    is whatever the tokenizer's post-processor adds, the token types included."""

    explicit_ids = True  # every id is stated (and checked: id_span), whatever file it was read from

    def __init__(self, tokenizer: Tokenizer, special_tokens: Mapping[str, str | None], *, source: str = "the tokenizer",
                 files: Mapping[str, bytes] | None = None, vocab_file: Path | None = None):
        tokenizer.no_truncation()  # a tokenizer.json may carry its own; the layout below decides
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self.source = source
        self.vocab_file = vocab_file  # the tokenizer.json or vocab.json it was read from; None when built
        self._files = dict(files or {})  # name → bytes of the files read, written back by `save`
        self._vocab_size = id_span(tokenizer, source)
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
        self.piece_style = piece_style_of(pipeline_json(tokenizer))
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
        self._check_encodes_its_vocabulary()

    def _check_encodes_its_vocabulary(self, probes: int = 64) -> None:
        """A tokenizer without an unknown token drops what it has no piece for. One that gives no piece for any of
        its own first words (a BPE model without merges to build them, say) would turn every input into nothing:
        refused here, where transformers would open it and hand back an empty input. (A special token named
        "[UNK]" is no proof: the model itself may have no unknown token.) 64 short encodings: well under 1 ms."""
        words = [token for token_id in range(self._vocab_size)
                 if token_id not in self.special_token_ids
                 and (token := self._tokenizer.id_to_token(token_id)) is not None
                 and token.strip() and token.isprintable()][:probes]
        if words and not any(self._tokenizer.encode(word, add_special_tokens=False).ids for word in words):
            raise TokenizerError(
                f"{self.source} encodes none of its own first {len(words)} vocabulary entries (e.g. {words[0]!r} "
                "gives no token): it has no unknown token and no pieces to build them from (a BPE model without its "
                "merges?); every input would vanish. Use the tokenizer files that came with the model")

    # ---- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_folder(cls, folder: str | Path) -> PretrainedTokenizer:
        """The tokenizer of a model folder: its tokenizer.json, else its vocab.json + merges.txt (RoBERTa's
        byte-level BPE). TokenizerError naming the folder and what to add when it has neither."""
        folder = Path(folder)
        if present(folder / TOKENIZER_JSON_FILE):
            return cls._from_tokenizer_json(folder, *read_tokenizer_json(folder / TOKENIZER_JSON_FILE))
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
        check_stated_added_ids(data, tokenizer, folder / TOKENIZER_JSON_FILE)
        files, config, special_map = read_configs(folder)
        files[TOKENIZER_JSON_FILE] = data
        specials = special_tokens_of(config, special_map, tokenizer)
        path = folder / TOKENIZER_JSON_FILE
        return cls(tokenizer, specials, source=str(path), files=files, vocab_file=path)

    @classmethod
    def _from_vocab_and_merges(cls, folder: Path) -> PretrainedTokenizer:
        """RoBERTa's byte-level BPE as transformers builds it from vocab.json + merges.txt."""
        files, config, special_map = read_configs(folder)
        vocab_path, merges_path = folder / VOCAB_JSON_FILE, folder / MERGES_FILE
        vocab_data = read_file(vocab_path, VOCAB_LIMIT, "a vocab.json")
        merges_data = read_file(merges_path, VOCAB_LIMIT, "a merges.txt")
        vocab = check_vocab_json(parse_json(vocab_data, vocab_path, error=TokenizerError), vocab_path)
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
        check_merges(merges, vocab, merges_path, lines)
        add_prefix_space = bool(config.get("add_prefix_space", False))
        trim_offsets = bool(config.get("trim_offsets", True))
        tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="",
                                  fuse_unk=False))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        tokenizer.decoder = decoders.ByteLevel()
        specials = {role: role_token(role, config, special_map, {}, vocab) for role in ROLES}
        # as transformers adds them: each with the flags tokenizer_config.json gives it (roberta-base's <mask> takes
        # the space before it: lstrip), plain otherwise, then added_tokens_decoder's, whose flags win
        tokenizer.add_special_tokens([added_token(config.get(f"{role}_token"), token)
                                      for role, token in specials.items() if token is not None])
        for token in added_tokens(config):
            tokenizer.add_special_tokens([token]) if token.special else tokenizer.add_tokens([token])
        check_added_ids(tokenizer, config, folder / TOKENIZER_CONFIG_FILE)
        sep, cls_ = specials["sep"] or "</s>", specials["cls"] or "<s>"
        tokenizer.post_processor = processors.RobertaProcessing(
            (sep, tokenizer.token_to_id(sep) or 0), (cls_, tokenizer.token_to_id(cls_) or 0), trim_offsets,
            add_prefix_space)
        files[VOCAB_JSON_FILE], files[MERGES_FILE] = vocab_data, merges_data
        return cls(tokenizer, specials, source=f"{vocab_path} + {MERGES_FILE}", files=files, vocab_file=vocab_path)

    @classmethod
    def _from_sentencepiece(cls, folder: Path, name: str) -> PretrainedTokenizer:
        """ALBERT's / XLM-RoBERTa's SentencePiece model as transformers builds its tokenizer from the folder (the
        family from tokenizer_config.json's tokenizer_class, else config.json's model_type); `save` adds a
        tokenizer.json beside the model file."""
        files, config, special_map = read_configs(folder)
        path = folder / name
        data = read_file(path, TOKENIZER_JSON_LIMIT, "a SentencePiece model")
        model = parse_model_proto(data, path)
        model_config = json_object(read_optional(folder / CONFIG_FILE, CONFIG_JSON_LIMIT), folder / CONFIG_FILE)
        family = family_of(config, model_config)
        known = {token for token, _ in family_vocabulary(model, family)[0]}
        specials = {role: role_token(role, config, special_map, {}, known) for role in ROLES}
        tokenizer = tokenizer_from_sentencepiece(model, family, config, specials, source=str(path))
        for token in added_tokens(config):
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
        data, tokenizer = read_tokenizer_json(folder / TOKENIZER_JSON_FILE)
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
