import pytest

from bertcore.tokenizer import BertTokenizer


@pytest.fixture(scope="module")
def small_vocab_tokenizer() -> BertTokenizer:
    """A 60-token vocabulary over one short made-up sentence: enough to build small models on."""
    words = "the cat sat on a mat dog ran far away and then came back home to sleep".split()
    return BertTokenizer.train([" ".join(words)] * 20, vocab_size=60, min_frequency=1)
