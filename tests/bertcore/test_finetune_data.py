"""Fine-tuning data: labels, encodings (checked against transformers), deterministic epoch batches, evaluation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from bertcore.errors import TaskDataError
from bertcore.files.resources import default_checkpoint_dir, default_vocab_path
from bertcore.tasks.finetune_data import load_finetuning_data
from bertcore.tasks.qa import QuestionAnsweringData
from bertcore.tasks.sequence import (
    SequenceClassificationData,
    TextExample,
    infer_problem_type,
    label_key,
    label_vocabulary,
)
from bertcore.tasks.task_data import split_heldout
from bertcore.tasks.token import TaggedExample, TokenClassificationData
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.reference_tokenizers import needs_sound_truncation

WORDS = "the king and queen of york speak to romeo juliet in verona at night with swords drawn".split()


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.from_vocab_file(default_vocab_path())


@pytest.fixture(scope="module")
def reference_tokenizer():
    transformers = pytest.importorskip("transformers")
    return transformers.BertTokenizerFast.from_pretrained(str(default_checkpoint_dir()))


def sentence(rng: random.Random, low: int = 1, high: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def text_file(tmp_path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def classification_rows(count: int, seed: int = 0, pairs: bool = False) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        row = {"text": sentence(rng), "label": rng.choice(["neg", "pos", "neutral"])}
        if pairs:
            row["text_b"] = sentence(rng)
        rows.append(row)
    return rows


# ---- labels --------------------------------------------------------------------------------------------------


def test_label_vocabulary_is_sorted_with_integers_in_numeric_order():
    assert label_vocabulary([10, "2", -1, "02"]) == ["-1", "2", "10"]
    assert label_vocabulary(["pos", "neg", "neutral", "neg"]) == ["neg", "neutral", "pos"]
    assert label_vocabulary(["1", "x", "10", "2"]) == ["1", "10", "2", "x"]  # not all integers: text order
    assert label_key(" 07 ") == "7" and label_key("Pos ") == "Pos"


def test_fractional_labels_make_a_regression():
    def ex(label):
        return TextExample("a", None, label, "f line 2")
    assert infer_problem_type([ex(1), ex(0)]) == "single_label_classification"
    assert infer_problem_type([ex("1"), ex("3.8")]) == "regression"
    assert infer_problem_type([ex(1), ex(0.0)]) == "regression"
    assert infer_problem_type([ex("2"), ex("1e3")]) == "regression"
    assert infer_problem_type([ex("nan"), ex("inf")]) == "single_label_classification"  # names, not numbers


def test_regression_data_and_a_label_that_is_not_a_number(tmp_path, tokenizer):
    train = text_file(tmp_path, "train.jsonl", [{"text": "a b", "label": 0.5}, {"text": "c", "label": 3},
                                               {"text": "d", "label": "4.25"}])
    data = load_finetuning_data("sequence", train, train, tokenizer=tokenizer, seq_len=16)
    assert (data.problem_type, data.num_labels, data.main_metric) == ("regression", 1, "pearson")
    batch = data.train_batch(1, 3)
    assert batch.labels.dtype == torch.float32 and sorted(batch.labels.tolist()) == [0.5, 3.0, 4.25]
    bad = text_file(tmp_path, "bad.jsonl", [{"text": "a", "label": 0.5}, {"text": "b", "label": "high"}])
    with pytest.raises(TaskDataError, match=r"bad\.jsonl line 2: the label 'high' is not a number, but .*bad\.jsonl "
                                            r"line 1 has the fractional label 0\.5"):
        load_finetuning_data("sequence", bad, tokenizer=tokenizer)
    bad_eval = text_file(tmp_path, "bad_eval.jsonl", [{"text": "a", "label": "n/a"}])
    with pytest.raises(TaskDataError, match=r"bad_eval\.jsonl line 1: the label 'n/a' is not a number"):
        load_finetuning_data("sequence", train, bad_eval, tokenizer=tokenizer)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("text,label\na,0.5\nb,1.5e308\n", r"line 3: the label '1\.5e308' is too large for a regression score: scores "
                                          r"must lie within ±1e\+15, because the model computes in float32 .* the "
                                          r"squared error of a larger score overflows it \(the loss becomes inf\); "
                                          r"rescale the scores"),
        ("text,label\na,0.5\nb,-1e999\n", r"line 3: the label '-1e999' is too large"),
        ("text,label\na,0.5\nb,2e15\n", r"line 3: the label '2e15' is too large"),
        ("text,label\na,0.5\nb,nan\n", r"line 3: the label 'nan' is not a finite number; .*line 2 has the fractional "
                                       r"label '0\.5', which makes this a regression task, and every row needs a "
                                       r"finite score"),
        ("text,label\na,0.5\nb,-Infinity\n", r"line 3: the label '-Infinity' is not a finite number"),
    ],
)
def test_regression_scores_that_overflow_float32_are_refused_at_load(tmp_path, tokenizer, text, message):
    path = tmp_path / "scores.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"scores\.csv " + message):
        load_finetuning_data("sequence", path, path, tokenizer=tokenizer)


def test_regression_scores_up_to_the_limit_train_with_a_finite_loss(tmp_path, tokenizer):
    huge = text_file(tmp_path, "huge.jsonl", [{"text": "a", "label": 0.5}, {"text": "b", "label": 10**400}])
    with pytest.raises(TaskDataError, match=r"huge\.jsonl line 2: the label 1000000000000000000000000000000000000"
                                            r"\.\.\. is too large"):
        load_finetuning_data("sequence", huge, huge, tokenizer=tokenizer)
    rows = [{"text": f"w{i}", "label": value} for i, value in enumerate([1e15, -1e15, 0.5] * 40)]
    path = text_file(tmp_path, "edge.jsonl", rows)
    data = load_finetuning_data("sequence", path, path, tokenizer=tokenizer)
    labels = data.train_batch(1, 120).labels
    assert torch.isfinite(torch.nn.functional.mse_loss(torch.zeros_like(labels), labels))


def test_an_eval_label_the_training_file_does_not_have(tmp_path, tokenizer):
    train = text_file(tmp_path, "train.jsonl", [{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}])
    evaluation = text_file(tmp_path, "eval.jsonl", [{"text": "a", "label": "pos"}, {"text": "b", "label": "meh"}])
    with pytest.raises(TaskDataError, match=r"eval\.jsonl line 2: the label 'meh' does not occur in the training "
                                            r"data .*train\.jsonl \(its labels: 'neg', 'pos'\)"):
        load_finetuning_data("sequence", train, evaluation, tokenizer=tokenizer)


def test_a_classification_with_one_label_is_refused(tmp_path, tokenizer):
    train = text_file(tmp_path, "train.jsonl", [{"text": "a", "label": "pos"}, {"text": "b", "label": "pos"}])
    with pytest.raises(TaskDataError, match=r"train\.jsonl has only the label 'pos'"):
        load_finetuning_data("sequence", train, train, tokenizer=tokenizer)


def test_given_labels_fix_the_order(tmp_path, tokenizer):
    train = text_file(tmp_path, "train.jsonl", [{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}])
    data = load_finetuning_data("sequence", train, train, tokenizer=tokenizer, labels=["pos", "neg"])
    assert data.id2label == {0: "pos", 1: "neg"} and data.label2id == {"pos": 0, "neg": 1}
    assert [f.label for f in data.train_features] == [0, 1]


# ---- sequence encoding ---------------------------------------------------------------------------------------


@needs_sound_truncation
def test_sequence_features_equal_the_tokenizer_and_transformers(tokenizer, reference_tokenizer):
    rng = random.Random(3)
    examples = [TextExample(sentence(rng, 1, 20), sentence(rng, 1, 20) if i % 2 else None, "x", f"f line {i}")
                for i in range(60)]
    data = SequenceClassificationData(examples, examples[:2], tokenizer, seq_len=16, labels=["x", "y"])
    for example, feature in zip(examples, data.train_features, strict=True):
        encoding = tokenizer.encode(example.text, example.text_b, max_length=16)
        assert feature.input_ids == encoding.input_ids
        assert feature.token_type_ids == encoding.segment_ids
        assert feature.truncated == (encoding.truncation is not None)
        reference = reference_tokenizer(example.text, example.text_b, truncation="longest_first", max_length=16)
        assert feature.input_ids == reference["input_ids"]
        assert feature.token_type_ids == reference["token_type_ids"]
    assert any(f.truncated for f in data.train_features)


def test_a_text_with_no_tokens_names_its_line(tokenizer):
    examples = [TextExample("\u200b", None, "x", "data.csv line 7")]
    with pytest.raises(TaskDataError, match=r"data\.csv line 7: 'text' has no tokens after BERT normalisation"):
        SequenceClassificationData(examples, examples, tokenizer, labels=["x", "y"])
    examples = [TextExample("fine", "\u200b\u200b", "x", "data.csv line 8")]
    with pytest.raises(TaskDataError, match=r"data\.csv line 8: 'text_b' has no tokens"):
        SequenceClassificationData(examples, examples, tokenizer, labels=["x", "y"])


# ---- token encoding ------------------------------------------------------------------------------------------


def tagged(words: str, tags: str, where: str = "f line 1") -> TaggedExample:
    return TaggedExample(words.split(), tags.split(), where)


def test_tags_go_to_the_first_sub_token_of_each_word(tokenizer, reference_tokenizer):
    example = tagged("Tybalt , thou unfaithful Mercutio's sworn-enemy", "B-PER O O O B-PER O")
    data = TokenClassificationData([example], [example], tokenizer, seq_len=64)
    feature = data.train_features[0]
    reference = reference_tokenizer(example.words, is_split_into_words=True)
    assert feature.input_ids == reference["input_ids"]  # each word tokenized on its own, as HF does
    word_ids = reference.word_ids()
    first_positions = [i for i, w in enumerate(word_ids) if w is not None and (i == 0 or word_ids[i - 1] != w)]
    assert feature.word_starts == first_positions
    expected = [-100] * len(feature.input_ids)
    for word, position in enumerate(first_positions):
        expected[position] = data.label2id[example.tags[word]]
    assert feature.labels == expected
    assert len(feature.input_ids) > len(example.words) + 2  # some words really have several pieces


def test_token_truncation_counts_the_words_cut_and_they_are_predicted_o(tokenizer):
    example = tagged("romeo and juliet and tybalt and mercutio", "B-PER O B-PER O B-PER O B-PER")
    data = TokenClassificationData([example], [example], tokenizer, seq_len=6)  # room for 4 tokens
    feature = data.eval_features[0]
    assert (len(feature.input_ids), len(feature.word_starts), feature.words_cut) == (6, 4, 3)
    batches = data.eval_batches(4)
    logits = torch.full((1, 6, data.num_labels), -5.0)
    for position, word in zip(feature.word_starts, range(4), strict=True):
        logits[0, position, data.label2id[example.tags[word]]] = 5.0
    result = data.evaluate(batches, [logits])
    assert result.predictions == [["B-PER", "O", "B-PER", "O", "O", "O", "O"]]
    assert result.metrics["entity_recall"] == pytest.approx(2 / 4) and result.metrics["entity_precision"] == 1.0


def test_a_word_with_no_tokens_becomes_unk_and_unknown_tags_are_named(tokenizer):
    data = TokenClassificationData([tagged("a \u200b b", "O B-X O")], [], tokenizer, seq_len=16)
    assert data.train_features[0].input_ids[2] == tokenizer.unk_token_id
    with pytest.raises(TaskDataError, match=r"eval\.conll line 4: the label 'B-LOC' does not occur"):
        TokenClassificationData([tagged("a b", "O B-X")], [tagged("a b", "O B-LOC", "eval.conll line 4")],
                                tokenizer, train_source="train.conll")


# ---- batches ---------------------------------------------------------------------------------------------------


@pytest.fixture
def sequence_data(tmp_path, tokenizer):
    path = text_file(tmp_path, "train.jsonl", classification_rows(50, pairs=True))
    return lambda **kw: load_finetuning_data("sequence", path, tokenizer=tokenizer, seq_len=24, **kw)


def test_batches_are_a_pure_function_of_seed_and_step_and_padded_to_their_longest(sequence_data):
    first, second = sequence_data(seed=1), sequence_data(seed=1)
    for step in (3, 1, 7, 3):
        a, b = first.train_batch(step, 8), second.train_batch(step, 8)
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
        assert a.input_ids.shape[1] == int(a.attention_mask.sum(dim=1).max())
        assert a.num_tokens == int(a.attention_mask.sum())
        assert torch.equal(a.input_ids[a.attention_mask == 0], torch.zeros_like(a.input_ids[a.attention_mask == 0]))
    assert not torch.equal(sequence_data(seed=2).train_batch(1, 8).feature_index, first.train_batch(1, 8).feature_index)


def test_an_epoch_sees_every_example_once_and_ranks_split_a_step(sequence_data):
    data = sequence_data()
    size = len(data.train_features)  # 45 after holding out 10%
    assert size == 45 and data.steps_per_epoch(5) == 9 and data.steps_per_epoch(5, world_size=2) == 5
    epoch = [i for step in range(1, 10) for i in data.train_batch(step, 5).feature_index.tolist()]
    assert sorted(epoch) == list(range(size))
    next_epoch = [i for step in range(10, 19) for i in data.train_batch(step, 5).feature_index.tolist()]
    assert sorted(next_epoch) == list(range(size)) and next_epoch != epoch
    # two ranks of step s take the two halves of what one process takes at batch size 2 * 5
    for step in (1, 4):
        both = data.train_batch(step, 10).feature_index.tolist()
        ranks = [data.train_batch(step, 5, rank, world_size=2).feature_index.tolist() for rank in (0, 1)]
        assert ranks[0] + ranks[1] == both
    with pytest.raises(ValueError, match=r"rank 2 is outside 0\.\.1"):
        data.train_batch(1, 5, rank=2, world_size=2)


def test_length_buckets_keep_the_epoch_and_cut_padding(tmp_path, tokenizer):
    rows = classification_rows(384, seed=5)
    path = text_file(tmp_path, "train.jsonl", rows)
    plain = load_finetuning_data("sequence", path, path, tokenizer=tokenizer, seq_len=32)
    bucketed = load_finetuning_data("sequence", path, path, tokenizer=tokenizer, seq_len=32, length_buckets=8)
    steps = range(1, 49)  # 48 steps of 8 = one epoch of 384 = 6 groups of 8 steps
    plain_batches = [plain.train_batch(s, 8) for s in steps]
    bucket_batches = [bucketed.train_batch(s, 8) for s in steps]
    assert sorted(i for b in bucket_batches for i in b.feature_index.tolist()) == list(range(384))
    for group in range(0, 48, 8):  # each group of 8 steps holds the same examples either way
        same = [set(i for b in batches[group : group + 8] for i in b.feature_index.tolist())
                for batches in (plain_batches, bucket_batches)]
        assert same[0] == same[1]

    def padding(batches):
        return sum(b.attention_mask.numel() - b.num_tokens for b in batches)
    assert padding(bucket_batches) < padding(plain_batches) / 2
    again = load_finetuning_data("sequence", path, path, tokenizer=tokenizer, seq_len=32, length_buckets=8)
    assert torch.equal(again.train_batch(13, 8).input_ids, bucket_batches[12].input_ids)  # resume mid-group


def test_model_inputs_and_to(sequence_data):
    batch = sequence_data().train_batch(1, 4)
    assert set(batch.model_inputs()) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    moved = batch.to("cpu")
    assert torch.equal(moved.input_ids, batch.input_ids) and moved.example_ids == batch.example_ids
    assert batch.example_ids[0].startswith(str(sequence_data().train_source))
    assert batch.token_type_ids.max() == 1  # pairs


# ---- held-out split ------------------------------------------------------------------------------------------


def test_heldout_split_is_seeded_and_keeps_groups_together():
    train, heldout = split_heldout(20, 0.25, seed=0, source="f")
    assert len(heldout) == 5 and sorted(train + heldout) == list(range(20))
    assert split_heldout(20, 0.25, seed=0, source="f") == (train, heldout)
    assert split_heldout(20, 0.25, seed=1, source="f") != (train, heldout)
    groups = ["a", "a", "b", "b", "b", "c", "d", "d"]
    train, heldout = split_heldout(8, 0.5, seed=0, source="f", groups=groups)
    assert not {groups[i] for i in train} & {groups[i] for i in heldout}
    with pytest.raises(TaskDataError, match="f has 1 examples; holding some out for evaluation needs at least 2"):
        split_heldout(1, 0.1, seed=0, source="f")


# ---- evaluation ------------------------------------------------------------------------------------------------


def test_evaluate_sequence_classification_over_the_whole_eval_set(tmp_path, tokenizer):
    path = text_file(tmp_path, "train.jsonl", classification_rows(37, seed=2))
    data = load_finetuning_data("sequence", path, path, tokenizer=tokenizer, seq_len=24)
    batches = data.eval_batches(8)
    assert len(batches) == 5 and sorted(i for b in batches for i in b.feature_index.tolist()) == list(range(37))
    assert [b.input_ids.tolist() for b in data.eval_batches(8)] == [b.input_ids.tolist() for b in batches]
    oracle = [torch.nn.functional.one_hot(b.labels, data.num_labels).float() for b in batches]
    result = data.evaluate(batches, oracle)
    assert result.metrics == {"accuracy": 1.0, "macro_f1": 1.0}
    assert result.predictions == [row["label"] for row in classification_rows(37, seed=2)]
    rng = np.random.default_rng(0)
    noisy = [rng.normal(size=(len(b.labels), data.num_labels)) for b in batches]
    predicted = {i: data.id2label[int(row.argmax())] for b, logits in zip(batches, noisy, strict=True)
                 for i, row in zip(b.feature_index.tolist(), logits, strict=True)}
    expected = np.mean([predicted[i] == data.id2label[f.label] for i, f in enumerate(data.eval_features)])
    assert data.evaluate(batches, noisy).metrics["accuracy"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="5 batches but 4 outputs"):
        data.evaluate(batches, noisy[:4])


def test_evaluate_takes_model_output_objects(tmp_path, tokenizer):
    class Output:
        def __init__(self, logits):
            self.logits = logits

    path = text_file(tmp_path, "train.jsonl", classification_rows(10))
    data = load_finetuning_data("sequence", path, path, tokenizer=tokenizer)
    batches = data.eval_batches(4)
    outputs = [Output(torch.nn.functional.one_hot(b.labels, data.num_labels).float()) for b in batches]
    assert data.evaluate(batches, outputs).metrics["accuracy"] == 1.0


def squad_document(contexts: list[tuple[str, list[tuple[str, str | None]]]]) -> dict:
    paragraphs = []
    for number, (context, questions) in enumerate(contexts):
        qas = []
        for index, (question, answer) in enumerate(questions):
            qa = {"id": f"p{number}q{index}", "question": question, "is_impossible": answer is None,
                  "answers": [] if answer is None else [{"text": answer, "answer_start": context.index(answer)}]}
            qas.append(qa)
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}


def test_qa_data_batches_and_oracle_evaluation(tmp_path, tokenizer):
    rng = random.Random(0)
    contexts = []
    for _ in range(12):
        words = [rng.choice(WORDS) for _ in range(rng.randint(20, 60))]
        context = " ".join(words) + " Caius Marcius " + " ".join(rng.choice(WORDS) for _ in range(10))
        contexts.append((context, [("who is here?", "Caius Marcius"), ("who is absent?", None)]))
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_document(contexts)), encoding="utf-8")
    data = load_finetuning_data("qa", path, tokenizer=tokenizer, seq_len=40, heldout_fraction=0.25, seed=0)
    assert isinstance(data, QuestionAnsweringData) and data.allow_no_answer and data.main_metric == "f1"
    assert {e.context for e in data.eval_examples}.isdisjoint({e.context for e in data.train_examples})
    assert len(data.eval_features) > len(data.eval_examples)  # contexts longer than one window
    batch = data.train_batch(1, 6)
    assert set(batch.model_inputs()) == {"input_ids", "token_type_ids", "attention_mask", "start_positions",
                                         "end_positions"}
    assert batch.labels is None and all(qid.startswith("p") for qid in batch.example_ids)
    resumed, straight = (load_finetuning_data("qa", path, tokenizer=tokenizer, seq_len=40, heldout_fraction=0.25,
                                              seed=0, length_buckets=3) for _ in range(2))
    assert len(straight.train_features) < 7 * 6
    for step in range(1, 8):  # past an epoch end: the batch of a step is the same however the run got there
        expected = straight.train_batch(step, 6)
    again = resumed.train_batch(7, 6)
    for name in ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions", "feature_index"):
        assert torch.equal(getattr(again, name), getattr(expected, name))
    assert again.example_ids == expected.example_ids and again.num_tokens == expected.num_tokens
    batches = data.eval_batches(5)
    outputs = []
    for b in batches:
        start = torch.full(b.input_ids.shape, -5.0)
        end = torch.full(b.input_ids.shape, -5.0)
        rows = torch.arange(len(b.start_positions))
        start[rows, b.start_positions] = 5.0
        end[rows, b.end_positions] = 5.0
        for row, feature_index in enumerate(b.feature_index.tolist()):
            window = data.eval_features[feature_index]
            if window.start_position == 0 and not data.eval_examples[window.example_index].is_impossible:
                start[row, 0] = end[row, 0] = -20.0
        outputs.append((start, end))
    result = data.evaluate(batches, outputs)
    assert result.metrics["exact_match"] == 1.0 and result.metrics["f1"] == 1.0
    evaluation = data.new_evaluation()  # fed batch by batch, keeping a few numbers a window: the same result
    for batch, output in zip(reversed(batches), reversed(outputs), strict=True):
        evaluation.add(batch, output)
    assert evaluation.result() == result
    with pytest.raises(ValueError, match=r"eval features have no output"):
        data.new_evaluation().result()
    assert result.metrics["no_answer_exact_match"] == 1.0
    assert set(result.predictions) == {e.id for e in data.eval_examples}
    summary = data.summary()
    assert summary["eval"]["questions"] == len(data.eval_examples) and summary["train"]["unanswerable"] > 0


def test_load_finetuning_data_reads_each_format(tmp_path, tokenizer):
    conll = tmp_path / "ner.conll"
    conll.write_text("Romeo B-PER\nspeaks O\n\nJuliet B-PER\nlistens O\n\nTybalt B-PER\nfights O\n", encoding="utf-8")
    data = load_finetuning_data("token", conll, tokenizer=tokenizer, heldout_fraction=0.3)
    assert (data.task, data.main_metric, data.id2label) == ("token", "entity_f1", {0: "B-PER", 1: "O"})
    assert len(data.train_examples) == 2 and len(data.eval_examples) == 1
    assert data.train_batch(1, 2).labels.shape == data.train_batch(1, 2).input_ids.shape
    csv_path = tmp_path / "s.csv"
    csv_path.write_text("sentence,gold\nhi there,1\nbye,0\n", encoding="utf-8")
    data = load_finetuning_data("sequence", csv_path, csv_path, tokenizer=tokenizer, text_column="sentence",
                                label_column="gold")
    assert data.id2label == {0: "0", 1: "1"} and data.summary()["train_labels"] == {"0": 1, "1": 1}
    with pytest.raises(ValueError, match="task 'ner' is not one of"):
        load_finetuning_data("ner", conll, tokenizer=tokenizer)
    with pytest.raises(TypeError, match=r"unknown option.*doc_stride"):
        load_finetuning_data("token", conll, tokenizer=tokenizer, doc_stride=3)
