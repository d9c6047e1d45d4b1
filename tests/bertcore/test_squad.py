"""QA windows (layout, overlap, answer targets, maximum context) and post-processing back to answer text."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.errors import TaskDataError
from bertcore.files.resources import default_checkpoint_dir, default_vocab_path
from bertcore.tasks.qa import (
    Answer,
    QAExample,
    best_spans,
    check_qa_lengths,
    default_qa_lengths,
    make_qa_windows,
    postprocess_qa_predictions,
    window_answer,
)
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.reference_tokenizers import needs_sound_truncation

CONTEXT = ("First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: You "
           "are all resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, you know "
           "Caius Marcius is chief enemy to the people. All: We know't, we know't.")


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.from_vocab_file(default_vocab_path())


def example(question: str, answer: str | None, qid: str = "q", context: str = CONTEXT, nth: int = 0) -> QAExample:
    if answer is None:
        return QAExample(qid, question, context, [], True, f"test {qid}")
    start = -1
    for _ in range(nth + 1):
        start = context.index(answer, start + 1)
    return QAExample(qid, question, context, [Answer(answer, start)], False, f"test {qid}")


def test_windows_layout_overlap_and_answer_targets(tokenizer):
    question = "Who is chief enemy?"
    windows = make_qa_windows([example(question, "Caius Marcius")], tokenizer, seq_len=32, max_query_length=16,
                              doc_stride=8)
    query = tokenizer.encode_ids([question])[0]
    context_ids = tokenizer.encode(CONTEXT, max_length=500).input_ids[1:-1]
    assert len(windows) > 3
    room = 32 - len(query) - 3
    covered = []
    for number, window in enumerate(windows):
        assert window.input_ids[: len(query) + 2] == [tokenizer.cls_token_id, *query, tokenizer.sep_token_id]
        assert window.input_ids[-1] == tokenizer.sep_token_id and len(window) <= 32
        assert window.context_start == len(query) + 2
        assert window.token_type_ids == [0] * window.context_start + [1] * (len(window) - window.context_start)
        part = window.input_ids[window.context_start : -1]
        first = number * (room - 8)  # each window starts room - doc_stride tokens after the last
        assert part == context_ids[first : first + room]
        covered += list(range(first, first + len(part)))
        assert [o is not None for o in window.offsets] == \
            [False] * window.context_start + [True] * len(part) + [False]
    assert sorted(set(covered)) == list(range(len(context_ids)))
    with_answer = [w for w in windows if w.start_position > 0]
    assert with_answer and all(w.start_position == w.end_position == 0 for w in windows if w not in with_answer)
    for window in with_answer:
        start, end = window.offsets[window.start_position][0], window.offsets[window.end_position][1]
        assert CONTEXT[start:end] == "Caius Marcius"


@needs_sound_truncation
def test_windows_match_transformers_overflowing_tokens(tokenizer):
    transformers = pytest.importorskip("transformers")
    reference = transformers.BertTokenizerFast.from_pretrained(str(default_checkpoint_dir()))
    question = "Who speaks first?"
    windows = make_qa_windows([example(question, "All")], tokenizer, seq_len=40, max_query_length=20, doc_stride=10)
    encoded = reference(question, CONTEXT, truncation="only_second", max_length=40, stride=10,
                        return_overflowing_tokens=True, return_offsets_mapping=True)
    assert [w.input_ids for w in windows] == encoded["input_ids"]
    for window, offsets, sequence_ids in zip(windows, encoded["offset_mapping"],
                                             [encoded.sequence_ids(i) for i in range(len(windows))], strict=True):
        assert window.offsets == [tuple(o) if s == 1 else None for o, s in zip(offsets, sequence_ids, strict=True)]


def test_each_token_has_its_maximum_context_in_exactly_one_window(tokenizer):
    windows = make_qa_windows([example("Who?", "All")], tokenizer, seq_len=24, max_query_length=4, doc_stride=10)
    owners: dict[int, int] = {}
    for number, window in enumerate(windows):
        for position, offset in enumerate(window.offsets):
            if offset is not None and window.token_is_max_context[position]:
                assert offset not in owners
                owners[offset] = number
    all_offsets = {o for w in windows for o in w.offsets if o is not None}
    assert set(owners) == all_offsets
    # a token in the overlap of windows 0 and 1 near the end of window 0 belongs to window 1
    last_of_first = windows[0].offsets[-2]
    assert owners[last_of_first] == 1


def test_an_answer_beyond_the_question_length_limit_and_unanswerable_questions(tokenizer):
    long_question = "Who " + "really " * 40 + "speaks?"
    windows = make_qa_windows([example(long_question, "All"), example("Who flies?", None, "n")], tokenizer,
                              seq_len=64, max_query_length=10, doc_stride=5)
    assert all(w.context_start == 12 for w in windows if w.example_index == 0)
    assert all(w.start_position == w.end_position == 0 for w in windows if w.example_index == 1)


def test_lengths_that_leave_no_room_are_refused():
    assert default_qa_lengths(384) == (64, 128)
    assert default_qa_lengths(128) == (62, 42)
    with pytest.raises(ValueError, match="seq_len=16 leaves no room"):
        check_qa_lengths(16, 13, 0)
    with pytest.raises(ValueError, match=r"doc_stride=20 .* must be in \[0, 18\]"):
        check_qa_lengths(32, 10, 20)


def test_an_answer_of_only_spaces_covers_no_token(tokenizer):
    bad = QAExample("q", "Who?", "a  b", [Answer(" ", 1)], False, "file.json question 0")
    with pytest.raises(TaskDataError, match=r"file\.json question 0: the answer ' ' covers no token"):
        make_qa_windows([bad], tokenizer, seq_len=32, max_query_length=8, doc_stride=4)


# ---- post-processing -------------------------------------------------------------------------------------------


def test_best_spans_respects_order_length_and_allowed_positions():
    starts = np.array([9.0, 1.0, 5.0, 0.0, 0.0])
    ends = np.array([9.0, 0.0, 1.0, 4.0, 0.0])
    allowed = [False, True, True, True, True]
    spans = best_spans(starts, ends, allowed, allowed, max_answer_length=2)
    assert (spans[0].start, spans[0].end, spans[0].score) == (2, 3, 9.0)  # (0, 0) is not allowed
    assert all(s.start <= s.end < s.start + 2 for s in spans)
    assert best_spans(starts, ends, allowed, allowed, max_answer_length=1)[0].end == 2


def oracle_logits(windows, examples):
    """Logits that point at each window's target (the answer, or [CLS] when it is not inside)."""
    start_logits, end_logits = [], []
    for window in windows:
        start, end = np.zeros(len(window) + 3), np.zeros(len(window) + 3)  # + padding, ignored
        start[window.start_position] = end[window.end_position] = 10.0
        if window.start_position == 0 and not examples[window.example_index].is_impossible:
            start[0] = end[0] = -10.0  # answerable: the window without the answer says "not here"
        start_logits.append(start)
        end_logits.append(end)
    return start_logits, end_logits


def test_postprocessing_recovers_the_answers_from_oracle_logits(tokenizer):
    examples = [example("Who is chief enemy?", "Caius Marcius", "a"), example("Who first?", "First Citizen", "b"),
                example("Who knows?", "All", "c", nth=2), example("Who flies?", None, "d")]
    windows = make_qa_windows(examples, tokenizer, seq_len=40, max_query_length=12, doc_stride=10)
    start_logits, end_logits = oracle_logits(windows, examples)
    predictions = postprocess_qa_predictions(examples, windows, start_logits, end_logits, allow_no_answer=True)
    assert predictions == {"a": "Caius Marcius", "b": "First Citizen", "c": "All", "d": ""}
    # SQuAD v1.1: no null answers, the best span is given even when [CLS] scores higher
    v1 = postprocess_qa_predictions(examples, windows, start_logits, end_logits, allow_no_answer=False)
    assert v1["d"] != "" and v1["a"] == "Caius Marcius"
    # a threshold above the null margin keeps the span
    high = postprocess_qa_predictions(examples, windows, start_logits, end_logits, allow_no_answer=True,
                                      null_score_diff_threshold=100.0)
    assert high["d"] != ""
    with pytest.raises(ValueError, match="one of each per window"):
        postprocess_qa_predictions(examples, windows, start_logits[:-1], end_logits)


def test_a_span_starting_in_the_question_is_never_chosen(tokenizer):
    examples = [example("Who speaks?", "All")]
    windows = make_qa_windows(examples, tokenizer, seq_len=200, max_query_length=12, doc_stride=10)
    assert len(windows) == 1
    start, end = np.zeros(len(windows[0])), np.zeros(len(windows[0]))
    start[1] = end[1] = 50.0  # the first question token
    start[windows[0].start_position] = end[windows[0].end_position] = 5.0
    assert postprocess_qa_predictions(examples, windows, [start], [end]) == {"q": "All"}


# ---- memory: the windows of a big SQuAD file are held compactly ------------------------------------------------


def many_questions(count: int, per_context: int = 20) -> list[QAExample]:
    words = CONTEXT.split()
    examples = []
    for number in range(count):
        shift = number // per_context  # a new context every `per_context` questions, as SQuAD's paragraphs
        context = " ".join(words[shift % len(words) :] + words[: shift % len(words)]) + f" number {shift}."
        answer = words[(number * 7) % len(words)]
        examples.append(QAExample(f"q{number}", f"which word is number {number} here?", context,
                                  [Answer(answer, context.index(answer))], False, f"test {number}"))
    return examples


@pytest.mark.slow
def test_windows_take_a_few_bytes_each_not_python_lists(tokenizer):
    import gc
    import tracemalloc

    examples = many_questions(800)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        windows = make_qa_windows(examples, tokenizer, seq_len=48, max_query_length=16, doc_stride=8)
        held, peak = (value - before for value in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()
    assert len(windows) >= 3 * len(examples)  # several windows a question: the contexts are longer than one window
    # A window as Python lists (ids, segments, offsets, max-context flags: 48 entries each) takes several KB; the
    # compact store keeps ~20 bytes a window plus the tokens of each context and question once.
    assert held / len(windows) < 150, f"{held / len(windows):.0f} bytes a window"
    assert peak / len(windows) < 400, f"building peaked at {peak / len(windows):.0f} bytes a window"
    assert held <= 2 * windows.nbytes + 64 * 1024


def test_a_batch_of_the_compact_windows_is_the_windows_padded(tokenizer):
    examples = many_questions(30, per_context=7)
    windows = make_qa_windows(examples, tokenizer, seq_len=40, max_query_length=12, doc_stride=10)
    rows = [3, 0, len(windows) - 1, 11]
    input_ids, token_type_ids = windows.padded(rows, pad_token_id=tokenizer.pad_token_id)
    width = max(len(windows[i]) for i in rows)
    assert input_ids.shape == token_type_ids.shape == (len(rows), width)
    for row, index in enumerate(rows):
        window = windows[index]
        padding = width - len(window)
        assert input_ids[row].tolist() == window.input_ids + [tokenizer.pad_token_id] * padding
        assert token_type_ids[row].tolist() == window.token_type_ids + [0] * padding
        assert windows.lengths[index] == len(window) and windows.example_index[index] == window.example_index
        assert (windows.start_positions[index], windows.end_positions[index]) == \
            (window.start_position, window.end_position)
    rng = np.random.default_rng(0)
    for index in range(len(windows)):  # decoding from the arrays = decoding the built window
        start, end = rng.normal(size=40), rng.normal(size=40)
        assert window_answer(windows.layout(index), start, end) == window_answer(windows[index].layout, start, end)
    assert windows[-1] == windows[len(windows) - 1] and windows[1:3] == [windows[1], windows[2]]
    with pytest.raises(IndexError, match="out of range"):
        windows[len(windows)]
