"""Extractive question answering (SQuAD v1.1 / v2.0), whole, in the order a question travels: its file, its
windows, its answers, and the data that holds them. One concept, past 700 lines: the windows' layout is what the
answers are read back through, so the two are read best side by side.

The file: SQuAD JSON into `QAExample`s, checked: ids unique, every answer where its offset says.

The windows (BERT's run_squad and HF's run_qa): each input is the model's pair template over the question and a
context window (`[CLS] question [SEP] context-window [SEP]` for BERT, `<s> question </s></s> context-window </s>`
for RoBERTa, `PairTemplate`); the question keeps at most `max_query_length` tokens; a context too long for one
input is cut into windows that overlap by `doc_stride` tokens (HF's meaning of stride: 128 of overlap at seq_len
384). A window's target is the token span of the (first) gold answer when the whole answer lies inside it, else
start = end = 0, the [CLS] (<s>) position, which is also the target of an unanswerable (v2.0) question.
`make_qa_windows` keeps all the windows in flat int32 arrays (`QAWindows`): each context's and question's tokens
once, five integers per window; `windows[i]` builds a `QAWindow`, and a batch is padded straight from the arrays.
A window's `WindowLayout` (its length, where its context lies, the context tokens' character offsets and which of
them have their "maximum context" here) is what the answer post-processing reads.

The answers (BERT's run_squad post-processing): in every window of a question, the top-`n_best_size` start and end
positions are paired; a pair is a candidate when both lie in that window's context, start <= end, the span is at
most `max_answer_length` tokens, and the start token has its "maximum context" in this window (of the windows
holding a token, the one where it sits farthest from an edge). The best candidate by start + end logit is mapped
back to the context text through the tokens' character offsets. With unanswerable questions (`allow_no_answer`),
the null score (start = end = 0, the smallest over the question's windows) wins when it beats the best span by more
than `null_score_diff_threshold`, and the answer is "". A window's logits reduce to a `WindowAnswer` (its null
score and best span) as soon as they are seen, so evaluation need not keep them. `best_spans` ranks the spans of
one typed input, for the inspector.

The data (`QuestionAnsweringData`): the windows held compactly, batched, and decoded back to answer text for the
official EM/F1.
"""

from __future__ import annotations

import array
import json
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from bertcore.errors import TaskDataError
from bertcore.tasks.kinds import QA_TASK
from bertcore.tasks.metrics import (
    squad_metrics,
)
from bertcore.tasks.task_data import FinetuningData, TaskBatch, TaskEvaluation, folder_message, read_task_text, too_deep
from bertcore.tokenization.wordpiece import TokenizerError

# ---- the examples and their file

@dataclass(frozen=True)
class Answer:
    text: str
    answer_start: int  # character offset of `text` in the context


@dataclass(frozen=True)
class QAExample:
    """One SQuAD question with its context; `answers` is empty iff `is_impossible` (v2.0)."""

    id: str
    question: str
    context: str
    answers: list[Answer]
    is_impossible: bool
    where: str


def read_squad(path: str | Path) -> list[QAExample]:
    """Every question of a SQuAD v1.1 / v2.0 file, checked: ids unique, answers where their offsets say."""
    path = Path(path)
    if path.is_dir():
        raise TaskDataError(folder_message(path, {".json": "squad"}))
    text = read_task_text(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskDataError(
            f"{path} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}); "
            "a SQuAD file is one JSON object with a 'data' list"
        ) from None
    except RecursionError:
        raise TaskDataError(too_deep(str(path)) + "; a SQuAD file nests data > paragraphs > qas > answers") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise TaskDataError(
            f"{path} has no 'data' list at the top; a SQuAD file looks like "
            '{"version": "v2.0", "data": [{"title": ..., "paragraphs": [{"context": ..., "qas": [...]}]}]}'
        )
    examples: list[QAExample] = []
    seen: dict[str, str] = {}
    for article_index, article in enumerate(document["data"]):
        title = article.get("title", "") if isinstance(article, dict) else ""
        article_where = f"{path} article {article_index}" + (f" ({title!r:.40})" if title else "")
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise TaskDataError(f"{article_where} has no 'paragraphs' list; each article needs one")
        for paragraph_index, paragraph in enumerate(paragraphs):
            where_p = f"{article_where} paragraph {paragraph_index}"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                raise TaskDataError(f"{where_p} has no 'context' text; each paragraph needs the passage to read")
            qas = paragraph.get("qas")
            if not isinstance(qas, list):
                raise TaskDataError(f"{where_p} has no 'qas' list; give the paragraph's questions under 'qas'")
            for qa_index, qa in enumerate(qas):
                example = _squad_question(qa, context, f"{where_p} question {qa_index}")
                if example.id in seen:
                    raise TaskDataError(
                        f"{example.where}: the id {example.id!r} is used twice (also at {seen[example.id]}); "
                        "question ids must be unique, predictions are keyed by them"
                    )
                seen[example.id] = example.where
                examples.append(example)
    if not examples:
        raise TaskDataError(f"{path} holds no questions; add paragraphs with 'qas' under 'data'")
    return examples


def _squad_question(qa: object, context: str, where: str) -> QAExample:
    if not isinstance(qa, dict):
        raise TaskDataError(f"{where} is not an object; each entry of 'qas' needs 'id', 'question' and 'answers'")
    qid = qa.get("id")
    if not isinstance(qid, str | int) or isinstance(qid, bool) or str(qid) == "":
        raise TaskDataError(f"{where} has no 'id'; give every question a unique id")
    qid = str(qid)
    where = f"{where} (id {qid!r})"
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        raise TaskDataError(f"{where} has no 'question' text")
    is_impossible = bool(qa.get("is_impossible", False))
    raw_answers = qa.get("answers", [])
    if not isinstance(raw_answers, list):
        raise TaskDataError(f"{where}: 'answers' must be a list of {{'text', 'answer_start'}} objects")
    answers = []
    for answer_index, raw in enumerate(raw_answers):
        answer_where = f"{where} answer {answer_index}"
        if not isinstance(raw, dict) or not isinstance(raw.get("text"), str) or not raw["text"].strip():
            raise TaskDataError(f"{answer_where} has no 'text'; an answer is {{'text': ..., 'answer_start': ...}}")
        start = raw.get("answer_start")
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise TaskDataError(f"{answer_where}: 'answer_start' is {start!r}; it must be a character offset >= 0")
        answer_text = raw["text"]
        found = context[start : start + len(answer_text)]
        if found != answer_text:
            elsewhere = context.find(answer_text)
            hint = (f"the text occurs at offset {elsewhere}" if elsewhere >= 0
                    else "the text does not occur in the context at all")
            raise TaskDataError(
                f"{answer_where}: the context at answer_start {start} reads {found!r}, not the answer "
                f"{answer_text!r} ({hint}); answer_start must be the character offset of the answer "
                "in the context (Python string index, not bytes)"
            )
        answers.append(Answer(answer_text, start))
    if is_impossible:
        answers = []  # v2.0 keeps 'plausible_answers' apart; an unanswerable question has no gold span
    elif not answers:
        raise TaskDataError(
            f"{where} has no answers; give at least one, or mark it 'is_impossible': true (SQuAD v2.0)"
        )
    return QAExample(qid, question, context, answers, is_impossible, where)


# ---- the windows

MAX_QUERY_LENGTH = 64  # BERT's run_squad default, capped for short sequence lengths (see default_qa_lengths)


def default_qa_lengths(seq_len: int) -> tuple[int, int]:
    """(max_query_length, doc_stride) for a sequence length: 64 and 128 at 384 as in HF's run_qa; for shorter
    inputs the question gets at most half the positions and the overlap a third of the sequence length."""
    return min(MAX_QUERY_LENGTH, (seq_len - 3) // 2), seq_len // 3


@dataclass(frozen=True)
class PairTemplate:
    """The special tokens a tokenizer's pair layout puts around the question (A) and the context (B), and the
    segment id of each part, read off its `layout_ids`: every window is lead + question + middle + context + tail."""

    lead: tuple[int, ...]  # before the question: [CLS] / <s>
    middle: tuple[int, ...]  # between question and context: [SEP] / </s></s>
    tail: tuple[int, ...]  # after the context: [SEP] / </s>
    lead_types: tuple[int, ...]
    question_type: int
    middle_types: tuple[int, ...]
    context_type: int
    tail_types: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer) -> PairTemplate:
        # -1 and -2 are no token's id: they mark where the question's and the context's tokens go
        ids, types, _ = tokenizer.layout_ids([-1], [-2])
        question, context = ids.index(-1), ids.index(-2)
        return cls(tuple(ids[:question]), tuple(ids[question + 1 : context]), tuple(ids[context + 1 :]),
                   tuple(types[:question]), types[question], tuple(types[question + 1 : context]), types[context],
                   tuple(types[context + 1 :]))

    @property
    def num_specials(self) -> int:
        return len(self.lead) + len(self.middle) + len(self.tail)

    def context_start(self, query_length: int) -> int:
        return len(self.lead) + query_length + len(self.middle)


@dataclass(frozen=True, eq=False)
class WindowLayout:
    """Where a window's context lies: all that reading its start/end logits back to text needs."""

    length: int  # tokens of the window
    context_start: int  # position of its first context token
    offsets: np.ndarray  # (n, 2) each context token's characters in the context, [start, end)
    is_max_context: np.ndarray  # (n,) bool: this window gives the token its widest context (BERT's rule)


@dataclass(frozen=True)
class QAWindow:
    """One model input for one question: `[CLS] question [SEP] context[a:b] [SEP]` (the model's template), with
    what decoding needs."""

    example_index: int  # into the list of QAExamples the windows were made from
    input_ids: list[int]
    token_type_ids: list[int]
    context_start: int  # position of the window's first context token
    offsets: list[tuple[int, int] | None]  # per position: character span in the context; None off the context
    token_is_max_context: list[bool]  # per position: this window gives the token its widest context
    start_position: int  # target token span of the first gold answer; 0, 0 ([CLS]) when not inside
    end_position: int

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def layout(self) -> WindowLayout:
        context = [offset for offset in self.offsets if offset is not None]
        is_max = self.token_is_max_context[self.context_start : self.context_start + len(context)]
        return WindowLayout(len(self), self.context_start, np.asarray(context, dtype=np.int64).reshape(-1, 2),
                            np.asarray(is_max, dtype=bool))


class QAWindows(Sequence[QAWindow]):
    """Every window of a list of questions, stored compactly; `windows[i]` builds the i-th `QAWindow` when asked.

    Token ids and character offsets are kept once per distinct context and once per question, in flat int32
    arrays, and a window is five integers (its question, its context token range [first, last), its answer
    target): a SQuAD-sized file takes a few bytes per token, not a Python list per window and position. The
    arrays `example_index`, `start_positions`, `end_positions` and `lengths` (tokens of each window) answer
    questions about all windows without building them."""

    def __init__(self, *, seq_len: int, doc_stride: int, template: PairTemplate,
                 context_ids: np.ndarray, context_offsets: np.ndarray, context_bounds: np.ndarray,
                 query_ids: np.ndarray, query_bounds: np.ndarray, example_context: np.ndarray,
                 example_index: np.ndarray, first: np.ndarray, last: np.ndarray, start_positions: np.ndarray,
                 end_positions: np.ndarray):
        self.seq_len, self.doc_stride = seq_len, doc_stride
        self.template = template
        self._context_ids, self._context_offsets, self._context_bounds = context_ids, context_offsets, context_bounds
        self._query_ids, self._query_bounds, self._example_context = query_ids, query_bounds, example_context
        self.example_index = example_index  # (W,) the question (index into the examples) of each window
        self._first, self._last = first, last  # (W,) the window's context tokens, [first, last)
        self.start_positions = start_positions  # (W,) QAWindow.start_position of each window
        self.end_positions = end_positions
        # (W,) tokens of each window
        self.lengths = np.diff(query_bounds)[example_index] + template.num_specials + (last - first)

    def __len__(self) -> int:
        return len(self.example_index)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"window {index} is out of range: there are {len(self)} windows")
        index %= len(self)
        query, context = self._query(index), self._context(index)
        template = self.template
        context_start = template.context_start(len(query))
        context_ids = self._context_ids[context].tolist()
        input_ids = [*template.lead, *query.tolist(), *template.middle, *context_ids, *template.tail]
        token_type_ids = [*template.lead_types, *[template.question_type] * len(query), *template.middle_types,
                          *[template.context_type] * len(context_ids), *template.tail_types]
        offsets = [tuple(pair) for pair in self._context_offsets[context].tolist()]
        after = [None] * len(template.tail)
        return QAWindow(
            int(self.example_index[index]), input_ids, token_type_ids, context_start,
            [None] * context_start + offsets + after,
            [False] * context_start + self._is_max_context(index, len(query)).tolist() + [False] * len(after),
            int(self.start_positions[index]), int(self.end_positions[index]),
        )

    def __iter__(self) -> Iterator[QAWindow]:
        for index in range(len(self)):
            yield self[index]

    def _query(self, index: int) -> np.ndarray:
        """The question's token ids in window `index`."""
        example_index = self.example_index[index]
        return self._query_ids[self._query_bounds[example_index] : self._query_bounds[example_index + 1]]

    def _context(self, index: int) -> slice:
        """Where window `index`'s context tokens lie in the flat context arrays."""
        base = self._context_bounds[self._example_context[self.example_index[index]]]
        return slice(int(base + self._first[index]), int(base + self._last[index]))

    def _is_max_context(self, index: int, query_length: int) -> np.ndarray:
        """Per context token of window `index`: is this window the token's maximum context (bool array)."""
        context = self._example_context[self.example_index[index]]
        num_tokens = int(self._context_bounds[context + 1] - self._context_bounds[context])
        room = self.seq_len - query_length - self.template.num_specials
        first, last = int(self._first[index]), int(self._last[index])
        return _max_context_owners(num_tokens, room, self.doc_stride)[first:last] == first // (room - self.doc_stride)

    def padded(self, indices: Sequence[int], pad_token_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, token_type_ids) of the windows `indices`, (B, T) int64, padded to the longest of them
        with `pad_token_id` (and 0): a batch's arrays without building its QAWindows."""
        lengths = self.lengths[np.asarray(indices, dtype=np.int64)]
        width = int(lengths.max()) if len(lengths) else 0
        input_ids = np.full((len(indices), width), pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros((len(indices), width), dtype=np.int64)
        template = self.template
        lead, middle = len(template.lead), len(template.middle)
        for row, index in enumerate(indices):
            query, context = self._query(index), self._context(index)
            query_end = lead + len(query)
            context_start = query_end + middle
            context_end = context_start + context.stop - context.start
            tail_end = context_end + len(template.tail)
            input_ids[row, :lead] = template.lead
            input_ids[row, lead:query_end] = query
            input_ids[row, query_end:context_start] = template.middle
            input_ids[row, context_start:context_end] = self._context_ids[context]
            input_ids[row, context_end:tail_end] = template.tail
            token_type_ids[row, :lead] = template.lead_types
            token_type_ids[row, lead:query_end] = template.question_type
            token_type_ids[row, query_end:context_start] = template.middle_types
            token_type_ids[row, context_start:context_end] = template.context_type
            token_type_ids[row, context_end:tail_end] = template.tail_types
        return input_ids, token_type_ids

    def layout(self, index: int) -> WindowLayout:
        """`self[index].layout`, without building the QAWindow."""
        query_length = len(self._query(index))
        return WindowLayout(int(self.lengths[index]), self.template.context_start(query_length),
                            self._context_offsets[self._context(index)],
                            self._is_max_context(index, query_length))

    def __repr__(self) -> str:
        return f"QAWindows({len(self)} windows of {len(self._query_bounds) - 1} questions, {self.nbytes:,} bytes)"

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays that hold the windows (the examples' text aside)."""
        return sum(value.nbytes for value in vars(self).values() if isinstance(value, np.ndarray))


def check_qa_lengths(seq_len: int, max_query_length: int, doc_stride: int, num_specials: int = 3) -> None:
    """ValueError naming the fix when the lengths leave no room for windows that move forward (`num_specials`:
    the special tokens of the model's pair template, 3 for BERT's [CLS]/[SEP]/[SEP], 4 for RoBERTa's)."""
    if max_query_length < 1:
        raise ValueError(f"max_query_length is {max_query_length}; it must be at least 1 token")
    room = seq_len - max_query_length - num_specials
    if room < 1:
        raise ValueError(
            f"seq_len={seq_len} leaves no room for the context after a question of up to {max_query_length} "
            f"tokens and the template's {num_specials} special tokens; use a longer seq_len or a smaller "
            "max_query_length"
        )
    if not 0 <= doc_stride < room:
        raise ValueError(
            f"doc_stride={doc_stride} (the overlap between context windows) must be in [0, {room - 1}]: at "
            f"seq_len={seq_len} with questions of up to {max_query_length} tokens a window holds {room} context "
            "tokens and each next window must start at least one token later"
        )


QUESTION_CHUNK = 1024  # questions tokenized at a time: the Python lists of one chunk are all that is held at once


def make_qa_windows(
    examples: Sequence[QAExample], tokenizer, *, seq_len: int, max_query_length: int, doc_stride: int,
) -> QAWindows:
    """Every window of every question, in question order (a compact `QAWindows`; see there)."""
    template = PairTemplate.of(tokenizer)
    check_qa_lengths(seq_len, max_query_length, doc_stride, template.num_specials)
    contexts: dict[str, int] = {}  # context text -> its index; questions over one context share its tokens
    # grown a question at a time as C int arrays: no Python object per token, question or window is kept
    context_ids = array.array("i")
    context_offsets = array.array("i")  # start, end, start, end, ...
    context_bounds = array.array("q", [0])
    last_context: tuple[int, np.ndarray] | None = None  # (index, offsets): the questions of a context come together
    query_ids = array.array("i")
    query_lengths = array.array("q")
    example_context = array.array("i")
    table = array.array("i")  # per window: example, first, last, start position, end position
    for chunk_start in range(0, len(examples), QUESTION_CHUNK):
        chunk = examples[chunk_start : chunk_start + QUESTION_CHUNK]
        questions = tokenizer.encode_ids([example.question for example in chunk])
        for example_index, example, ids in zip(range(chunk_start, chunk_start + len(chunk)), chunk, questions,
                                               strict=True):
            query = ids[:max_query_length]
            if not query:
                raise TaskDataError(f"{example.where}: the question has no tokens after normalisation; write it out")
            query_ids.extend(query)
            query_lengths.append(len(query))
            context = contexts.get(example.context)
            if context is None:
                context = contexts[example.context] = len(context_bounds) - 1
                ids_of_context, offsets_of_context = _context_tokens(example, tokenizer)
                context_ids.frombytes(ids_of_context.tobytes())  # int32 both: "i" is a C int
                context_offsets.frombytes(offsets_of_context.tobytes())
                context_bounds.append(len(context_ids))
                last_context = (context, offsets_of_context)
            elif last_context is None or last_context[0] != context:
                begin, end = context_bounds[context], context_bounds[context + 1]
                offsets_of_context = np.array(context_offsets[2 * begin : 2 * end], dtype=np.int32).reshape(-1, 2)
                last_context = (context, offsets_of_context)
            example_context.append(context)
            offsets_of_context = last_context[1]
            answer_span = _answer_token_span(example, offsets_of_context)
            context_start = template.context_start(len(query))
            room = seq_len - len(query) - template.num_specials
            for first, last in _window_spans(len(offsets_of_context), room, doc_stride):
                start_position = end_position = 0
                if answer_span is not None and first <= answer_span[0] and answer_span[1] < last:
                    start_position = context_start + answer_span[0] - first
                    end_position = context_start + answer_span[1] - first
                table.extend((example_index, first, last, start_position, end_position))
    windows = _int_array(table).reshape(-1, 5)
    position_type = np.int16 if seq_len <= np.iinfo(np.int16).max else np.int32
    return QAWindows(
        seq_len=seq_len, doc_stride=doc_stride, template=template, context_ids=_int_array(context_ids),
        context_offsets=_int_array(context_offsets).reshape(-1, 2), context_bounds=_int_array(context_bounds),
        query_ids=_int_array(query_ids), query_bounds=_bounds(_int_array(query_lengths)),
        example_context=_int_array(example_context),
        example_index=windows[:, 0].copy(), first=windows[:, 1].copy(), last=windows[:, 2].copy(),
        start_positions=windows[:, 3].astype(position_type), end_positions=windows[:, 4].astype(position_type),
    )


def _int_array(values: array.array) -> np.ndarray:
    """The numpy view of a filled `array.array` (no copy); an empty one for an empty array."""
    dtype = np.dtype(values.typecode)
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)


def _bounds(lengths) -> np.ndarray:
    """[0, l0, l0 + l1, ...]: where each of a run of flat-stored sequences starts (and the last ends)."""
    bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    return bounds


def _context_tokens(example: QAExample, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (n,) and character offsets (n, 2) of the whole context (no specials); never truncated."""
    try:
        # the public encoder, given room for every token (a WordPiece token covers at least one character)
        encoding = tokenizer.encode(example.context, max_length=2 * len(example.context) + 8)
    except TokenizerError as error:
        raise TaskDataError(f"{example.where}: the context cannot be tokenized ({error})") from None
    text = [i for i, sequence in enumerate(encoding.sequence_ids) if sequence == 0]  # the template's specials aside
    return (np.asarray([encoding.input_ids[i] for i in text], dtype=np.int32),
            np.asarray([encoding.offsets[i] for i in text], dtype=np.int32).reshape(-1, 2))


def _answer_token_span(example: QAExample, offsets: np.ndarray) -> tuple[int, int] | None:
    """First and last context token overlapping the first gold answer's characters; None if unanswerable."""
    if not example.answers:
        return None
    answer = example.answers[0]
    begin, end = answer.answer_start, answer.answer_start + len(answer.text)
    overlapping = np.flatnonzero((offsets[:, 0] < end) & (offsets[:, 1] > begin))
    if not len(overlapping):
        raise TaskDataError(
            f"{example.where}: the answer {answer.text!r} covers no token of the context (only spaces or "
            "ignored characters?); give an answer that contains words"
        )
    return int(overlapping[0]), int(overlapping[-1])


def _window_spans(num_tokens: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
    """[first, last) context token ranges: `room` tokens each, the next starting `room - doc_stride` later."""
    spans = []
    first = 0
    while True:
        last = min(first + room, num_tokens)
        spans.append((first, last))
        if last >= num_tokens:
            return spans
        first += room - doc_stride


@lru_cache(maxsize=1024)  # the windows of one context (and of many of the same length) share it
def _max_context_owners(num_tokens: int, room: int, doc_stride: int) -> np.ndarray:
    """For each context token, the window that gives it the most context (BERT's rule: score =
    min(tokens to the left, tokens to the right) + 0.01 * window length; the first window wins a tie)."""
    best_scores = np.full(num_tokens, -np.inf)
    owners = np.zeros(num_tokens, dtype=np.int64)
    for index, (first, last) in enumerate(_window_spans(num_tokens, room, doc_stride)):
        tokens = np.arange(first, last)
        scores = np.minimum(tokens - first, last - 1 - tokens) + 0.01 * (last - first)
        better = scores > best_scores[first:last]
        best_scores[first:last][better] = scores[better]
        owners[first:last][better] = index
    owners.flags.writeable = False  # shared by every caller through the cache
    return owners


# ---- the answers

MAX_ANSWER_LENGTH = 30  # tokens; BERT's run_squad and HF's run_qa
N_BEST_SIZE = 20


@dataclass(frozen=True)
class SpanCandidate:
    score: float  # start logit + end logit
    start: int  # token positions in the window
    end: int


def best_spans(
    start_logits: np.ndarray, end_logits: np.ndarray, allowed_starts: Sequence[bool], allowed_ends: Sequence[bool],
    *, max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> list[SpanCandidate]:
    """Valid spans of one input, best first: top-n starts × top-n ends, start <= end, length within the limit,
    start and end where allowed (the context part). Also what the inspector needs for one typed input."""
    scores, starts, ends = _span_scores(start_logits, end_logits, allowed_starts, allowed_ends,
                                        max_answer_length, n_best_size)
    order = np.argsort(-scores, kind="stable")  # best first; equal scores in (start rank, end rank) order
    return [SpanCandidate(float(scores[i]), int(starts[i]), int(ends[i])) for i in order]


def _span_scores(start_logits, end_logits, allowed_starts, allowed_ends, max_answer_length: int, n_best_size: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score, start, end) of every valid pair of the top-n starts × top-n ends, in that nested order."""
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    pair_starts = np.repeat(starts, len(ends))
    pair_ends = np.tile(ends, len(starts))
    valid = (np.asarray(allowed_starts, dtype=bool)[pair_starts] & np.asarray(allowed_ends, dtype=bool)[pair_ends]
             & (pair_starts <= pair_ends) & (pair_ends < pair_starts + max_answer_length))
    pair_starts, pair_ends = pair_starts[valid], pair_ends[valid]
    return start_logits[pair_starts] + end_logits[pair_ends], pair_starts, pair_ends


@dataclass(frozen=True)
class WindowAnswer:
    """What one window's logits say, all that choosing a question's answer needs (BERT's run_squad rule)."""

    null_score: float  # start + end logit at [CLS]: "no answer in this window"
    score: float | None  # start + end logit of the window's best valid span; None when it has none
    start_char: int  # that span's characters in the context, [start_char, end_char)
    end_char: int


def window_answer(
    layout: WindowLayout, start_logits: np.ndarray, end_logits: np.ndarray, *,
    max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> WindowAnswer:
    """The best span of one window (`QAWindow.layout`, `QAWindows.layout(i)`) and its null score, from its logits
    (at least as long as the window; padding beyond it is ignored). Keeping this instead of the logits lets an
    evaluation hold a few numbers per window."""
    length, context_start, offsets = layout.length, layout.context_start, layout.offsets
    starts = np.asarray(start_logits)[:length]
    ends = np.asarray(end_logits)[:length]
    null = float(starts[0] + ends[0])
    in_context = np.zeros(length, dtype=bool)
    in_context[context_start : context_start + len(offsets)] = True
    allowed_starts = np.zeros(length, dtype=bool)
    allowed_starts[context_start : context_start + len(offsets)] = layout.is_max_context
    scores, span_starts, span_ends = _span_scores(starts, ends, allowed_starts, in_context, max_answer_length,
                                                  n_best_size)
    if not len(scores):
        return WindowAnswer(null, None, 0, 0)
    best = int(np.argmax(scores))  # the first of equal scores, as a stable sort puts it
    return WindowAnswer(null, float(scores[best]), int(offsets[span_starts[best] - context_start, 0]),
                        int(offsets[span_ends[best] - context_start, 1]))


def choose_answers(
    examples: Sequence[QAExample], window_examples: Sequence[int], answers: Sequence[WindowAnswer], *,
    allow_no_answer: bool = False, null_score_diff_threshold: float = 0.0,
) -> dict[str, str]:
    """{question id: answer text} ("" for no answer) from every window's `WindowAnswer`; `window_examples[i]` is
    the question of window i. The best span over a question's windows wins (the first on a tie); with
    `allow_no_answer`, "" wins when the smallest null score beats it by more than the threshold."""
    by_example: dict[int, list[int]] = {}
    for window_index, example_index in enumerate(window_examples):
        by_example.setdefault(int(example_index), []).append(window_index)
    predictions: dict[str, str] = {}
    for example_index, example in enumerate(examples):
        best: WindowAnswer | None = None
        null_score = None
        for window_index in by_example.get(example_index, []):
            answer = answers[window_index]
            null_score = answer.null_score if null_score is None else min(null_score, answer.null_score)
            if answer.score is not None and (best is None or answer.score > best.score):
                best = answer
        if best is None:
            predictions[example.id] = ""
        elif allow_no_answer and null_score is not None and null_score - best.score > null_score_diff_threshold:
            predictions[example.id] = ""
        else:
            predictions[example.id] = example.context[best.start_char : best.end_char]
    return predictions


def postprocess_qa_predictions(
    examples: Sequence[QAExample], windows: Sequence[QAWindow], start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray], *, allow_no_answer: bool = False, null_score_diff_threshold: float = 0.0,
    max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> dict[str, str]:
    """{question id: answer text} ("" for no answer) from each window's logits (one array per window, at least
    as long as the window; padding beyond it is ignored)."""
    if not len(windows) == len(start_logits) == len(end_logits):
        raise ValueError(f"{len(windows)} windows but {len(start_logits)} start and {len(end_logits)} end logit "
                         "arrays; give one of each per window")
    answers = []
    window_examples = []
    for window, starts, ends in zip(windows, start_logits, end_logits, strict=True):
        answers.append(window_answer(window.layout, starts, ends, max_answer_length=max_answer_length,
                                     n_best_size=n_best_size))
        window_examples.append(window.example_index)
    return choose_answers(examples, window_examples, answers, allow_no_answer=allow_no_answer,
                          null_score_diff_threshold=null_score_diff_threshold)


# ---- the data

class QuestionAnsweringData(FinetuningData):
    """SQuAD questions over contexts, as windows; evaluation writes {question id: answer text}."""

    task = QA_TASK
    problem_type = None
    main_metric = "f1"

    def __init__(
        self, train_examples: Sequence[QAExample], eval_examples: Sequence[QAExample], tokenizer, *,
        seq_len: int = 384, seed: int = 0, length_buckets: int = 1, max_query_length: int | None = None,
        doc_stride: int | None = None, max_answer_length: int = MAX_ANSWER_LENGTH,
        null_score_diff_threshold: float = 0.0, allow_no_answer: bool | None = None,
        train_source: str = "the training data", eval_source: str = "the eval data",
    ):
        super().__init__(tokenizer, seq_len=seq_len, seed=seed, length_buckets=length_buckets,
                         train_source=train_source, eval_source=eval_source)
        default_query, default_stride = default_qa_lengths(seq_len)
        self.max_query_length = default_query if max_query_length is None else max_query_length
        self.doc_stride = default_stride if doc_stride is None else doc_stride
        if max_answer_length < 1:
            raise ValueError(f"max_answer_length is {max_answer_length}; it must be at least 1 token")
        self.max_answer_length = max_answer_length
        self.null_score_diff_threshold = null_score_diff_threshold
        self.train_examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        if allow_no_answer is None:  # SQuAD v2.0: some question is unanswerable
            allow_no_answer = any(e.is_impossible for e in [*self.train_examples, *self.eval_examples])
        self.allow_no_answer = allow_no_answer
        self.id2label = {0: "start", 1: "end"}  # qa_outputs has two outputs per token
        settings = {"seq_len": seq_len, "max_query_length": self.max_query_length, "doc_stride": self.doc_stride}
        self.train_features = make_qa_windows(self.train_examples, tokenizer, **settings)
        self.eval_features = make_qa_windows(self.eval_examples, tokenizer, **settings)

    def _collate(self, indices: Sequence[int], features: QAWindows, examples: Sequence[QAExample]) -> TaskBatch:
        """The batch straight from the compact windows (no QAWindow is built)."""
        rows = np.asarray(indices, dtype=np.int64)
        input_ids, token_type_ids = features.padded(rows, self.tokenizer.pad_token_id)
        lengths = features.lengths[rows]
        attention_mask = (np.arange(input_ids.shape[1]) < lengths[:, None]).astype(np.int64)
        return TaskBatch(
            input_ids=torch.from_numpy(input_ids), token_type_ids=torch.from_numpy(token_type_ids),
            attention_mask=torch.from_numpy(attention_mask), labels=None,
            start_positions=torch.from_numpy(features.start_positions[rows].astype(np.int64)),
            end_positions=torch.from_numpy(features.end_positions[rows].astype(np.int64)),
            feature_index=torch.from_numpy(rows),
            example_ids=tuple(examples[i].id for i in features.example_index[rows].tolist()),
            num_tokens=int(lengths.sum()),
        )

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]) -> WindowAnswer:
        start_logits, end_logits = arrays
        return window_answer(self.eval_features.layout(feature_index), start_logits, end_logits,
                             max_answer_length=self.max_answer_length)

    def _score(self, reduced) -> TaskEvaluation:
        predictions = choose_answers(
            self.eval_examples, self.eval_features.example_index, reduced, allow_no_answer=self.allow_no_answer,
            null_score_diff_threshold=self.null_score_diff_threshold,
        )
        references = {e.id: [a.text for a in e.answers] for e in self.eval_examples}
        return TaskEvaluation(squad_metrics(predictions, references), predictions)

    def summary(self) -> dict:
        def side(examples, windows: QAWindows):
            answerable = sum(not e.is_impossible for e in examples)
            found = int(np.count_nonzero(windows.start_positions > 0))
            return {"questions": len(examples), "answerable": answerable,
                    "unanswerable": len(examples) - answerable, "contexts": len({e.context for e in examples}),
                    "windows": len(windows), "windows_with_answer": found}
        return {"task": self.task, "allow_no_answer": self.allow_no_answer, "max_query_length": self.max_query_length,
                "doc_stride": self.doc_stride, "train": side(self.train_examples, self.train_features),
                "eval": side(self.eval_examples, self.eval_features)}
