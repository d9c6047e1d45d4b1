"""Whether the installed `tokenizers` library truncates soundly, for the tests that take transformers' truncation
as their reference.

tokenizers 0.23.1 and 0.23.2 stop tokenizing a text once `max_length` tokens exist (huggingface/tokenizers#2091).
transformers' fast tokenizers then return overflow windows that stop short of the text's end, and longest-first
truncation of a pair weighs a text by its cut length, so it cuts the other text. Every release before and since
truncates the whole text, and so does bertcore, which runs the library with truncation off and cuts on its own
(`PretrainedTokenizer`). A comparison against a library with the fault would fail on the reference's mistake, so it
is skipped and says why. The fault is probed rather than looked up by version, so a later release with the same
fault is caught too.
"""

from __future__ import annotations

import functools

import pytest


@functools.cache
def truncation_drops_text() -> bool:
    """True when a truncating encode loses the text past max_length instead of returning it as overflow."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    words = [f"w{i}" for i in range(30)]
    tokenizer = Tokenizer(WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    tokenizer.enable_truncation(max_length=8, stride=0)
    encoding = tokenizer.encode(" ".join(words))
    kept = list(encoding.ids) + [i for overflow in encoding.overflowing for i in overflow.ids]
    return len(kept) != len(words)


def _reason() -> str:
    import tokenizers

    return (f"tokenizers {tokenizers.__version__} drops the text past max_length when it truncates "
            "(huggingface/tokenizers#2091, in 0.23.1 and 0.23.2), so transformers' truncation is no reference here")


# A test whose reference is transformers' truncation: skipped, named, where the library has the fault.
needs_sound_truncation = pytest.mark.skipif(truncation_drops_text(), reason=_reason())
