"""The index a run keeps of a prepared corpus (document numbers, sentence counts, the samplers' running counts):
a few bytes per document, since a 1 GB corpus of short documents has millions of them."""

import tracemalloc

import numpy as np
import pytest

from bertcore.data.corpus import split_document_ids
from bertcore.data.prepared import SentenceStarts, TokenizedDocuments, running_counts
from bertcore.data.segments import PairSampler


@pytest.mark.slow
def test_a_runs_index_costs_a_few_bytes_per_document():
    n = 300_000  # documents of 3 sentences of 5 tokens, as memory-mapped arrays would hold them
    document_offsets = np.arange(n + 1, dtype=np.int64) * 3
    sentence_offsets = np.arange(3 * n + 1, dtype=np.int64) * 5
    tokens = np.full(15 * n, 7, dtype=np.uint16)
    tracemalloc.start()
    try:
        documents = TokenizedDocuments(tokens, sentence_offsets, document_offsets)
        train, _ = split_document_ids(len(documents), 0.02, seed=0, source="the corpus")
        train_documents = documents.subset(train)
        del train
        samplers = PairSampler(train_documents, 64), SentenceStarts(train_documents, first=1)  # noqa: F841
        retained, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # measured: 23.6 and 31.4 bytes per document (87 and 96 with int64 arrays and the Python list of the
    # sentence-order sampler)
    assert retained / n < 32 and peak / n < 48


def test_running_counts_widen_only_when_the_total_needs_it():
    small = running_counts(np.array([3, 0, 2]))
    assert small.tolist() == [0, 3, 3, 5] and small.dtype == np.int32
    large = running_counts(np.array([2**30, 2**30, 5], dtype=np.int64))
    assert large[-1] == 2**31 + 5 and large.dtype == np.int64


def test_sentence_starts_draw_as_the_list_version_drew():
    import bisect
    import random
    from itertools import accumulate

    counts = [4, 1, 0, 7, 2, 9]
    documents = [[[1]] * count for count in counts]
    starts = SentenceStarts(documents, first=1)
    cumulative = list(accumulate(max(0, count - 1) for count in counts))
    rng, reference = random.Random(5), random.Random(5)
    for _ in range(200):
        index = reference.randrange(cumulative[-1])
        document = bisect.bisect_right(cumulative, index)
        expected = document, 1 + index - (cumulative[document - 1] if document else 0)
        assert starts.draw(rng) == expected
