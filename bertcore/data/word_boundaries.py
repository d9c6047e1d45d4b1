"""Where words begin, from a tokenizer's vocabulary: the whole-word and span masking recipes pick whole words.

WordPiece marks continuations with "##", byte-level BPE (RoBERTa, ModernBERT) and SentencePiece (ALBERT, XLM-R)
mark word starts with "Ġ" and "▁"; a vocabulary without marks counts every token as a word.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

import torch

from bertcore.tokenization.pieces import BYTE_LEVEL_SPACE, SENTENCEPIECE_SPACE, WORDPIECE_CONTINUATION


def infer_piece_style(tokens: Iterable[str]) -> str:
    """How a bare vocabulary marks words, by counting its marks (a tokenizer says it as `piece_style`):
    "wordpiece" ("##" continuations), "byte_level" ("Ġ" after a space), "sentencepiece" ("▁" word starts), or
    "plain" (no marks: every token counts as a word)."""
    counts = {"wordpiece": 0, "byte_level": 0, "sentencepiece": 0}
    for token in tokens:
        if token.startswith(WORDPIECE_CONTINUATION) and len(token) > len(WORDPIECE_CONTINUATION):
            counts["wordpiece"] += 1
        elif token.startswith(BYTE_LEVEL_SPACE):
            counts["byte_level"] += 1
        elif token.startswith(SENTENCEPIECE_SPACE):
            counts["sentencepiece"] += 1
    style, count = max(counts.items(), key=lambda item: item[1])
    return style if count else "plain"


def continuation_mask(tokens: list[str], piece_style: str | None = None) -> torch.Tensor:
    """(V,) bool: True at the ids whose token carries on the word of the token before it. piece_style is the
    tokenizer's (bertcore.tokenization.pieces); None infers it from the tokens."""
    style = piece_style or infer_piece_style(tokens)
    if style == "wordpiece":
        continues = [token.startswith(WORDPIECE_CONTINUATION) and len(token) > 2 for token in tokens]
    elif style in ("byte_level", "sentencepiece"):
        marker = BYTE_LEVEL_SPACE if style == "byte_level" else SENTENCEPIECE_SPACE
        continues = [not token.startswith(marker) for token in tokens]
    else:
        continues = [False] * len(tokens)
    return torch.tensor(continues, dtype=torch.bool)


def _vocabulary(tokenizer) -> list[str]:
    """Every id's token; "" for an id the tokenizer has no token for (a gap among added tokens)."""
    try:
        return tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    except ValueError:
        tokens = []
        for token_id in range(tokenizer.vocab_size):
            try:
                tokens.append(tokenizer.id_to_token(token_id))
            except ValueError:
                tokens.append("")
        return tokens


# One mask per tokenizer object, computed on first use: a 250k-token vocabulary takes ~50 ms to scan. Weak keys, so
# a tokenizer the app drops takes its mask with it; the lock because the app's training thread and its GUI thread
# can ask at once.
_continuations: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_continuations_lock = threading.Lock()


def continues_word(tokenizer) -> torch.Tensor:
    """(V,) bool for `tokenizer`'s vocabulary: True where a token continues the previous token's word
    (`continuation_mask`, by the tokenizer's `piece_style` where it has one), cached per tokenizer. Treat it as
    read-only."""
    def compute() -> torch.Tensor:
        return continuation_mask(_vocabulary(tokenizer), getattr(tokenizer, "piece_style", None))

    with _continuations_lock:
        try:
            cached = _continuations.get(tokenizer)
        except TypeError:  # not weakly referable: computed every time
            return compute()
        if cached is None:
            cached = _continuations[tokenizer] = compute()
        return cached
