"""The tiny BERT configs the tests build their models from: one home for their sizes.

Each family's sizes are distinct from one another (hidden, heads, head size, FFN, layers, positions), as in
transformers' own test config (vocab 99, 2 layers, 4 heads), so that a swapped axis or a transposed weight breaks
a shape or a number instead of passing by coincidence. A test that depends on a size passes it by name
(`tiny_bert(vocab, num_hidden_layers=1)`), so that the dependency shows where it is used.

vocab_size is the tokenizer's wherever a test feeds real text (`tokenizer.vocab_size`).
"""

from __future__ import annotations

from bertcore.models.config import BertConfig


def tiny_bert(vocab_size: int, **overrides) -> BertConfig:
    """3 layers of 5 heads of 6 (hidden 30), FFN 37, 40 positions: the analyses' model (inspection, lens, task
    outputs, importance, embedding views), with five heads to tell apart."""
    return _sized(vocab_size, 30, 3, 5, 37, 40, overrides)


def two_layer_bert(vocab_size: int, **overrides) -> BertConfig:
    """2 layers of 3 heads of 8 (hidden 24), FFN 40, 32 positions: checkpoints written, read and converted."""
    return _sized(vocab_size, 24, 2, 3, 40, 32, overrides)


def training_bert(vocab_size: int, **overrides) -> BertConfig:
    """2 layers of 2 heads of 12 (hidden 24), FFN 40, 64 positions: fine-tuned for a few steps, on sentence pairs
    longer than 32 tokens."""
    return _sized(vocab_size, 24, 2, 2, 40, 64, overrides)


def explorer_bert(vocab_size: int, **overrides) -> BertConfig:
    """3 layers of 2 heads of 16 (hidden 32), FFN 48, 64 positions: the app's tests, fast enough for every widget
    test to build one, with a layer slider that moves (3) and a head grid with more than one head (2)."""
    return _sized(vocab_size, 32, 3, 2, 48, 64, overrides)


def parity_bert(**overrides) -> BertConfig:
    """vocab 99, 2 layers of 3 heads of 16 (hidden 48), FFN 37, 19 positions: compared weight for weight with
    transformers' BERT (no tokenizer: the inputs are random ids)."""
    return _sized(overrides.pop("vocab_size", 99), 48, 2, 3, 37, 19, overrides)


def _sized(vocab_size: int, hidden: int, layers: int, heads: int, ffn: int, positions: int, overrides) -> BertConfig:
    sizes = {"vocab_size": vocab_size, "hidden_size": hidden, "num_hidden_layers": layers,
             "num_attention_heads": heads, "intermediate_size": ffn, "max_position_embeddings": positions}
    return BertConfig(**(sizes | overrides))
