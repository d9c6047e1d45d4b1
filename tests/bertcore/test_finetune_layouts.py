"""Fine-tuning batches lay pairs out as the model's own tokenizer does: RoBERTa's `<s> A </s></s> B </s>` with one
segment, not BERT's `[CLS] A [SEP] B [SEP]` (BERT's own layout is checked in test_finetune_data.py)."""

from __future__ import annotations

import random

import pytest

from bertcore.tasks.qa import Answer, QAExample, QuestionAnsweringData
from bertcore.tasks.sequence import SequenceClassificationData, TextExample
from bertcore.tasks.token import TaggedExample, TokenClassificationData
from bertcore.tokenization.pretrained import tokenizer_from_folder
from tests.reference_tokenizers import needs_sound_truncation

WORDS = "the king and queen of york speak to romeo juliet in verona at night with swords drawn".split()


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def test_sequence_batches_equal_transformers_roberta_tokenizer(roberta_folder):
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(str(roberta_folder))
    tokenizer = tokenizer_from_folder(roberta_folder)
    rng = random.Random(5)
    examples = [TextExample(sentence(rng, 1, 20), sentence(rng, 1, 20) if i % 2 else None, "x", f"f line {i}")
                for i in range(24)]
    data = SequenceClassificationData(examples, examples, tokenizer, seq_len=20, labels=["x", "y"])
    rows = {index: row for batch in data.eval_batches(5)
            for index, *row in zip(batch.feature_index.tolist(), batch.input_ids.tolist(),
                                   batch.attention_mask.tolist(), batch.token_type_ids.tolist(), strict=True)}
    assert sorted(rows) == list(range(len(examples)))
    for index, example in enumerate(examples):
        input_ids, attention_mask, token_type_ids = rows[index]
        expected = reference(example.text, example.text_b, truncation="longest_first", max_length=20,
                             padding="max_length")
        width = len(input_ids)
        assert input_ids == expected["input_ids"][:width]
        assert attention_mask == expected["attention_mask"][:width]
        assert set(token_type_ids) == {0}  # RoBERTa has one segment
    assert any(f.truncated for f in data.train_features)
    assert any(example.text_b for example in examples)


def test_token_batches_equal_transformers_roberta_tokenizer_on_words(roberta_folder):
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(str(roberta_folder), add_prefix_space=True)
    tokenizer = tokenizer_from_folder(roberta_folder)
    example = TaggedExample("romeo and juliet speak in verona".split(), "B-PER O B-PER O O B-LOC".split(), "f line 1")
    data = TokenClassificationData([example], [example], tokenizer, seq_len=64)
    feature = data.train_features[0]
    expected = reference(example.words, is_split_into_words=True)
    assert feature.input_ids == expected["input_ids"]  # each word with its leading space, as add_prefix_space does
    word_ids = expected.word_ids()
    assert feature.word_starts == [i for i, w in enumerate(word_ids) if w is not None and word_ids[i - 1] != w]
    assert len(feature.input_ids) == len(feature.token_type_ids) and set(feature.token_type_ids) == {0}


def qa_example(index: int, rng: random.Random, length: int) -> QAExample:
    context = sentence(rng, length, length) + " Caius Marcius " + sentence(rng, 3, 8)
    answer = Answer("Caius Marcius", context.index("Caius Marcius"))
    return QAExample(f"q{index}", "who is here?", context, [answer], False, f"f line {index}")


@needs_sound_truncation
def test_qa_windows_and_batches_equal_transformers_roberta_tokenizer(roberta_folder):
    """Each window is what run_qa's tokenizer call gives (question, context, only_second, stride), the answer
    target lands on the answer's tokens, and a batch row is the window padded."""
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(str(roberta_folder))
    tokenizer = tokenizer_from_folder(roberta_folder)
    rng = random.Random(2)
    examples = [qa_example(i, rng, length) for i, length in enumerate([3, 8, 40, 70])]
    data = QuestionAnsweringData(examples, examples, tokenizer, seq_len=32, max_query_length=8, doc_stride=6)
    expected_windows = []
    for example in examples:
        encoded = reference(example.question, example.context, truncation="only_second", max_length=32, stride=6,
                            return_overflowing_tokens=True, return_offsets_mapping=True)
        expected_windows += list(zip(encoded["input_ids"], encoded["attention_mask"], strict=True))
    windows = list(data.eval_features)
    assert len(windows) == len(expected_windows) > len(examples)
    for window, (input_ids, _) in zip(windows, expected_windows, strict=True):
        assert window.input_ids == input_ids
        assert set(window.token_type_ids) == {0}
        example = examples[window.example_index]
        if window.start_position:
            covered = window.offsets[window.start_position][0], window.offsets[window.end_position][1]
            assert example.context[covered[0]:covered[1]].strip() == "Caius Marcius"
    for batch in data.eval_batches(3):
        for index, row, mask, types in zip(batch.feature_index.tolist(), batch.input_ids.tolist(),
                                           batch.attention_mask.tolist(), batch.token_type_ids.tolist(), strict=True):
            input_ids, attention_mask = expected_windows[index]
            assert row[: len(input_ids)] == input_ids and mask[: len(input_ids)] == attention_mask
            assert set(types) == {0}
    assert sum(bool(w.start_position) for w in windows) >= len(examples)
