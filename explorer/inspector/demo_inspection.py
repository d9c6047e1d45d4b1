"""Made-up and real inspections to open the attention views on, without a window (demos, tests, benchmarks).

`demo_inspection` fakes attention shaped like real heads at any size (512 tokens × 144 heads in a blink), in a real
bertcore `Inspection` (so a view cannot come to rely on a field that only the demo has);
`real_inspection` runs an untrained bertcore model or a checkpoint folder. Qt-free.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bertcore.analysis.inspection import Inspection
from bertcore.tokenization.wordpiece import Encoding
from explorer.common.attention_math import SPECIAL_TOKENS_TO_HIDE

DEMO_TEXT_A = "the quick brown fox jumps over the lazy dog while the cat watches from the warm windowsill"
DEMO_TEXT_B = "later that evening both animals fell asleep beside the fire in the old stone cottage"


def demo_inspection(num_tokens: int = 30, num_layers: int = 12, num_heads: int = 12, seed: int = 0,
                    num_padding: int = 0) -> Inspection:
    """[CLS] A [SEP] B [SEP] [PAD]... with attention shaped like real heads: to [CLS]/[SEP], to the
    previous / next token, to itself, broad, plus noise; every row a probability distribution."""
    if num_tokens < 4:
        raise ValueError(f"num_tokens is {num_tokens}; a demo pair needs at least 4 tokens")
    rng = np.random.default_rng(seed)
    words_a, words_b = DEMO_TEXT_A.split(), DEMO_TEXT_B.split()
    num_real = num_tokens - num_padding
    length_a = (num_real - 3) // 2
    length_b = num_real - 3 - length_a
    sentence_a = [words_a[i % len(words_a)] for i in range(length_a)]
    sentence_b = [words_b[i % len(words_b)] for i in range(length_b)]
    tokens = ["[CLS]", *sentence_a, "[SEP]", *sentence_b, "[SEP]"] + ["[PAD]"] * num_padding
    positions = np.arange(num_tokens)
    offsets = positions[None, :] - positions[:, None]  # (T, T) key - query
    separators = np.array([token == "[SEP]" for token in tokens])
    logits = rng.standard_normal((num_layers, num_heads, num_tokens, num_tokens), dtype=np.float32)
    for layer in range(num_layers):
        for head in range(num_heads):
            kind = rng.integers(0, 5)
            if kind == 0:
                logits[layer, head] += 4.0 * (offsets == -1)
            elif kind == 1:
                logits[layer, head] += 4.0 * (offsets == 1)
            elif kind == 2:
                logits[layer, head, :, 0] += 4.0
                logits[layer, head][:, separators] += 3.0
            elif kind == 3:
                logits[layer, head] += 3.0 * (offsets == 0)
            logits[layer, head] *= np.float32(rng.uniform(0.5, 1.5))
    logits[..., np.array(tokens) == "[PAD]"] = -1e9  # nothing attends to padding
    logits -= logits.max(axis=-1, keepdims=True)
    attentions = np.exp(logits, out=logits)
    attentions /= attentions.sum(axis=-1, keepdims=True)
    encoding = _demo_encoding(sentence_a, sentence_b, num_padding)
    return Inspection(
        encoding=encoding,
        masking=None,
        input_ids=np.array(encoding.input_ids, dtype=np.int64),
        input_tokens=tokens,
        attentions=attentions,
        hidden_states=np.zeros((num_layers + 1, num_tokens, 0), np.float32),  # no model, so no hidden states
        predictions=[],
        is_next_probability=None,
        has_pretraining_heads=False,
        head_mask=np.ones((num_layers, num_heads), np.float32),
    )


def _demo_encoding(sentence_a: list[str], sentence_b: list[str], num_padding: int) -> Encoding:
    """[CLS] A [SEP] B [SEP] [PAD]... laid out as the tokenizer would, each word a token; the ids number the
    distinct tokens in order of appearance ([PAD] is 0), as there is no vocabulary behind them."""
    layout: list[tuple[str, int | None, int]] = [("[CLS]", None, 0)]  # (token, sentence, segment)
    layout += [(word, 0, 0) for word in sentence_a] + [("[SEP]", None, 0)]
    layout += [(word, 1, 1) for word in sentence_b] + [("[SEP]", None, 1)] + [("[PAD]", None, 0)] * num_padding
    ids: dict[str, int] = {"[PAD]": 0}
    offsets: list[tuple[int, int]] = []
    ends = {0: 0, 1: 0}  # where each sentence's text has reached: words are joined by single spaces
    for token, sentence, _ in layout:
        ids.setdefault(token, len(ids))
        if sentence is None:
            offsets.append((0, 0))
        else:
            start = ends[sentence] + (1 if ends[sentence] else 0)
            ends[sentence] = start + len(token)
            offsets.append((start, ends[sentence]))
    tokens = [token for token, _, _ in layout]
    return Encoding(
        tokens=tokens,
        input_ids=[ids[token] for token in tokens],
        segment_ids=[segment for _, _, segment in layout],
        position_ids=list(range(len(tokens))),
        attention_mask=[int(token != "[PAD]") for token in tokens],
        special_tokens_mask=[int(token in SPECIAL_TOKENS_TO_HIDE) for token in tokens],
        sequence_ids=[sentence for _, sentence, _ in layout],
        offsets=offsets,
        truncation=None,
        unknown_words=[],
    )


def real_inspection(text_a: str = DEMO_TEXT_A, text_b: str | None = DEMO_TEXT_B, checkpoint: Path | None = None,
                    preset: str = "mini"):
    """bertcore.analysis.inspection.inspect on a checkpoint folder, or on an untrained `preset` model."""
    import torch

    from bertcore.analysis.inspection import inspect
    from bertcore.files.resources import default_vocab_path
    from bertcore.models.bert import BertForPreTraining
    from bertcore.models.checkpoint import load_pretrained
    from bertcore.models.config import preset as make_config
    from bertcore.tokenization.wordpiece import BertTokenizer

    if checkpoint is not None:
        model, tokenizer = load_pretrained(checkpoint)
    else:
        torch.manual_seed(0)
        tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
        model = BertForPreTraining(make_config(preset, vocab_size=tokenizer.vocab_size)).eval()
    return inspect(model, tokenizer, text_a, text_b)
