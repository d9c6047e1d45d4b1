"""Extractive QA's inputs: SQuAD questions cut into model windows. Reading the model's logits back to answer text
is `bertcore.tasks.qa_answers`.

BERT's run_squad and HF's run_qa: each input is the model's pair template over the question and a context window
(`[CLS] question [SEP] context-window [SEP]` for BERT, `<s> question </s></s> context-window </s>` for RoBERTa,
`PairTemplate`); the question
keeps at most `max_query_length` tokens; a context too long for one input is cut into windows that overlap by
`doc_stride` tokens (HF's meaning of stride: 128 of overlap at seq_len 384). A window's target is the token
span of the (first) gold answer when the whole answer lies inside it, else start = end = 0, the [CLS] (<s>) position,
which is also the target of an unanswerable (v2.0) question. `make_qa_windows` keeps all the windows in flat int32
arrays (`QAWindows`): each context's and question's tokens once, five integers per window; `windows[i]` builds
a `QAWindow`, and a batch is padded straight from the arrays. A window's `WindowLayout` (its length, where its
context lies, the context tokens' character offsets and which of them have their "maximum context" here) is what
the answer post-processing reads.
"""

from __future__ import annotations

import array
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bertcore.errors import TaskDataError
from bertcore.tasks.task_files import QAExample
from bertcore.tokenization.wordpiece import TokenizerError

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
