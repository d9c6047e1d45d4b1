"""Corpus reading, sentence pairs (50/50, IsNext truly consecutive), collation and dynamic masking."""

from __future__ import annotations

import math
import random

import pytest
import torch

from bertcore.data.batches import PretrainingData, collate_pairs, make_batch, step_rng
from bertcore.data.corpus import CorpusError, read_corpus, split_document_ids, split_documents, split_sentences
from bertcore.data.segments import PairExample, PairSampler
from bertcore.tokenization.wordpiece import BertTokenizer

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def synthetic_corpus_text(num_documents: int = 30, seed: int = 0) -> str:
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).capitalize() + "."
                     for _ in range(rng.randint(2, 6))]
        documents.append("\n".join(sentences))
    return "\n\n".join(documents) + "\n"


def numbered_documents(sizes: list[list[int]]) -> list[list[list[int]]]:
    """Documents whose every token id is unique, so a token's position in the corpus is known."""
    next_id, documents = 100, []
    for sentence_lengths in sizes:
        document = []
        for length in sentence_lengths:
            document.append(list(range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return documents


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.train(synthetic_corpus_text().splitlines(), vocab_size=60, min_frequency=1)


def test_split_sentences_joins_lines_and_splits_after_end_punctuation():
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\nYou are all resolved? Yes! Resolved."
    assert split_sentences(text) == [
        "First Citizen: Before we proceed any further, hear me speak.", "You are all resolved?", "Yes!", "Resolved."
    ]


def test_read_corpus_documents_are_separated_by_blank_lines_and_files(tmp_path):
    (tmp_path / "a.txt").write_text("One. Two.\n\nThree.\n \nFour. Five.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Six.\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("ignored.", encoding="utf-8")
    corpus = read_corpus(tmp_path)
    assert corpus.documents == [["One.", "Two."], ["Three."], ["Four.", "Five."], ["Six."]]
    assert [p.name for p in corpus.files] == ["a.txt", "b.txt"]
    assert corpus.num_sentences == 6


def test_corpus_errors_name_the_file_and_the_problem(tmp_path):
    with pytest.raises(CorpusError, match=r"missing\.txt does not exist"):
        read_corpus(tmp_path / "missing.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"Hello.\nCaf\xe9 au lait.\n")
    with pytest.raises(CorpusError, match=r"latin1\.txt is not UTF-8.*0xe9 at byte offset 10 \(line 2\)"):
        read_corpus(latin1)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"empty\.txt is empty"):
        read_corpus(empty)
    folder = tmp_path / "nothing"
    folder.mkdir()
    with pytest.raises(CorpusError, match=r"holds no \.txt files"):
        read_corpus(folder)


def test_corpus_too_small_for_the_sequence_length(tmp_path, tokenizer):
    path = tmp_path / "small.txt"
    path.write_text("Alpha bravo. Charlie delta.\n\nEcho golf. Hotel india.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"small\.txt has only \d+ tokens.*sequence of 128"):
        PretrainingData(read_corpus(path), tokenizer, seq_len=128, heldout_fraction=0.0)
    one_document = tmp_path / "one.txt"
    one_document.write_text("Alpha bravo charlie. " * 50, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"one\.txt.*NotNext pairs need at least 2"):
        PretrainingData(read_corpus(one_document), tokenizer, seq_len=16, heldout_fraction=0.0)


def test_pair_sampling_is_50_50_within_a_statistical_bound():
    documents = numbered_documents([[5, 7, 3, 9], [4, 4], [6, 2, 8], [3, 3, 3, 3, 3], [10]] * 4)
    sampler = PairSampler(documents, seq_len=24)
    rng = random.Random(1)
    n = 4000
    is_next = sum(sampler.sample(rng).is_next for _ in range(n))
    # Binomial(n, 1/2): 5 standard deviations is a bound a correct sampler never crosses in practice
    assert abs(is_next - n / 2) < 5 * math.sqrt(n / 4), is_next


def test_isnext_pairs_are_truly_consecutive_and_notnext_come_from_another_document():
    documents = numbered_documents([[5, 7, 3, 9], [4, 4], [6, 2, 8], [3, 3, 3, 3, 3], [10], [12, 1, 2]] * 3)
    flat = [[token for sentence in document for token in sentence] for document in documents]
    sampler = PairSampler(documents, seq_len=20, short_seq_prob=0.3)
    rng = random.Random(7)
    seen_next = seen_not_next = 0
    for _ in range(1000):
        example = sampler.sample(rng)
        assert example.tokens_a and example.tokens_b
        assert len(example.tokens_a) + len(example.tokens_b) + 3 <= 20
        if example.is_next:
            seen_next += 1
            assert example.document_a == example.document_b
            assert example.sentences_a[1] == example.sentences_b[0]  # B starts where A ends
            joined = example.tokens_a + example.tokens_b
            stream = flat[example.document_a]
            start = stream.index(joined[0])
            assert stream[start : start + len(joined)] == joined  # contiguous text of one document
        else:
            seen_not_next += 1
            assert example.document_a != example.document_b
        assert example.next_sentence_label == (0 if example.is_next else 1)
    assert seen_next > 300 and seen_not_next > 300


def test_collate_lays_out_cls_a_sep_b_sep_and_pads_only_to_the_longest():
    examples = [PairExample([11, 12], [13], True, 0, (0, 1), 0, (1, 2)),
                PairExample([21], [22, 23, 24, 25], False, 0, (0, 1), 1, (0, 1))]
    columns = collate_pairs(examples, cls_token_id=2, sep_token_id=3, pad_token_id=0)
    assert columns["input_ids"].tolist() == [[2, 11, 12, 3, 13, 3, 0, 0], [2, 21, 3, 22, 23, 24, 25, 3]]
    assert columns["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1]]
    assert columns["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8]
    assert columns["special_tokens_mask"].tolist() == [[True, False, False, True, False, True, True, True],
                                                       [True, False, True, False, False, False, False, True]]
    assert columns["next_sentence_label"].tolist() == [0, 1]


def test_masking_is_dynamic_and_never_touches_specials_or_padding(tokenizer):
    documents = [[tokenizer.encode_ids([s])[0] for s in split_sentences(block)]
                 for block in synthetic_corpus_text().split("\n\n")]
    examples = PairSampler(documents, seq_len=32).sample_batch(random.Random(0), 8)
    first = make_batch(examples, tokenizer, torch.Generator().manual_seed(1))
    second = make_batch(examples, tokenizer, torch.Generator().manual_seed(2))
    again = make_batch(examples, tokenizer, torch.Generator().manual_seed(1))
    assert not torch.equal(first.labels, second.labels)  # fresh masks each time an example is drawn
    assert torch.equal(first.labels, again.labels) and torch.equal(first.input_ids, again.input_ids)
    plain = collate_pairs(examples, cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                          pad_token_id=tokenizer.pad_token_id)
    picked = first.labels != -100
    assert not (picked & plain["special_tokens_mask"]).any()
    assert torch.equal(first.labels[picked], plain["input_ids"][picked])
    assert (picked.sum(1) >= 1).all()
    assert first.num_tokens == int(plain["attention_mask"].sum())


def test_batches_are_a_pure_function_of_seed_rank_and_step(tmp_path, tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(), encoding="utf-8")
    data = PretrainingData(read_corpus(path), tokenizer, seq_len=32, heldout_fraction=0.1, seed=3)
    a, b = data.train_batch(5, 4), data.train_batch(5, 4)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(data.train_batch(6, 4).labels, a.labels) or not torch.equal(
        data.train_batch(6, 4).input_ids, a.input_ids)
    assert not torch.equal(data.train_batch(5, 4, rank=1).input_ids, a.input_ids)
    heldout = data.heldout_batches(2, 4)
    assert len(heldout) == 2 and torch.equal(heldout[0].labels, data.heldout_batches(2, 4)[0].labels)
    assert step_rng(0, 0, 1).random() == step_rng(0, 0, 1).random()


def test_length_buckets_cut_padding_and_stay_a_pure_function_of_the_step(tmp_path, tokenizer):
    path = tmp_path / "corpus.txt"
    path.write_text(synthetic_corpus_text(num_documents=60), encoding="utf-8")
    corpus = read_corpus(path)
    plain = PretrainingData(corpus, tokenizer, seq_len=64, heldout_fraction=0.0, short_seq_prob=0.5)
    bucketed = PretrainingData(corpus, tokenizer, seq_len=64, heldout_fraction=0.0, short_seq_prob=0.5,
                               length_buckets=4)

    def padding(data, steps):
        batches = [data.train_batch(step, 8) for step in steps]
        return sum(b.attention_mask.numel() - b.num_tokens for b in batches) / sum(b.num_tokens for b in batches)

    assert padding(bucketed, range(1, 41)) < 0.5 * padding(plain, range(1, 41))
    fresh = PretrainingData(corpus, tokenizer, seq_len=64, heldout_fraction=0.0, short_seq_prob=0.5,
                            length_buckets=4)
    for step in (7, 2, 5, 6):  # any order, any instance: the same batch for the same step
        assert torch.equal(fresh.train_batch(step, 8).input_ids, bucketed.train_batch(step, 8).input_ids)
    # one pool of 4 batches holds 4 × 8 distinct draws; masks differ from step to step
    first_group = [bucketed.train_batch(step, 8) for step in range(1, 5)]
    assert sum(b.input_ids.size(0) for b in first_group) == 32
    with pytest.raises(ValueError, match="length_buckets"):
        PretrainingData(corpus, tokenizer, seq_len=64, length_buckets=0)


def test_heldout_split_is_by_whole_documents_and_seeded():
    documents = numbered_documents([[3, 3]] * 20)
    train, heldout = split_documents(documents, 0.2, seed=0)
    assert len(heldout) == 4 and len(train) == 16
    assert not {d[0][0] for d in train} & {d[0][0] for d in heldout}
    assert split_documents(documents, 0.2, seed=0) == (train, heldout)
    with pytest.raises(CorpusError, match="3 documents"):
        split_documents(documents[:3], 0.5, seed=0)


@pytest.mark.parametrize(("num_documents", "seed"), [(10, 0), (1_000, 3), (54_321, 7)])
def test_the_held_out_split_is_the_draw_runs_have_always_made(num_documents, seed):
    # Recorded runs resume on their split: the array-backed shuffle must draw what shuffling a list drew.
    order = list(range(num_documents))
    random.Random(f"heldout-{seed}").shuffle(order)
    num_heldout = max(2, round(0.02 * num_documents))
    train, heldout = split_document_ids(num_documents, 0.02, seed)
    assert heldout.tolist() == sorted(order[:num_heldout])
    assert train.tolist() == sorted(order[num_heldout:])


@pytest.mark.slow
def test_the_held_out_split_holds_no_python_int_per_document():
    # A 1 GB corpus has ~6.5 M documents: one Python int each was 316 MB of the run's peak.
    import tracemalloc

    tracemalloc.start()
    split_document_ids(1_000_000, 0.02, 0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 30 * 1_000_000, f"{peak / 1e6:.0f} MB for a million documents"
