"""Token classification, whole: its files, its examples and its data.

Reading: JSONL with `tokens` and `tags`, or CoNLL (`word ... tag` lines, a blank line between sentences,
`-DOCSTART-` skipped), into `TaggedExample`s. The data: each given word tokenized on its own, its tag on its first
sub-token and IGNORE_INDEX elsewhere; entity-level metrics where the tags are BIO-like.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertcore.errors import TaskDataError
from bertcore.models.parts import IGNORE_INDEX
from bertcore.tasks.kinds import TOKEN_TASK
from bertcore.tasks.metrics import (
    get_entities,
    is_entity_tagging,
    token_classification_metrics,
)
from bertcore.tasks.task_data import (
    FinetuningData,
    TaskEvaluation,
    file_format,
    jsonl_records,
    pad_rows,
    read_task_text,
    unknown_label_error,
)

# ---- the examples and their files

TOKEN_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".conll": "conll", ".txt": "conll", ".iob": "conll",
                 ".bio": "conll", ".tsv": "conll"}


DOCSTART = "-DOCSTART-"


@dataclass(frozen=True)
class TaggedExample:
    """One sentence of a token-classification file: pre-split words and one tag per word."""

    words: list[str]
    tags: list[str]
    where: str


def read_tagged_examples(
    path: str | Path, *, format: str | None = None, tokens_field: str = "tokens", tags_field: str = "tags",
) -> list[TaggedExample]:
    """Sentences of a JSONL (`tokens`, `tags`) or CoNLL (`word ... tag` lines) file."""
    path = Path(path)
    kind = file_format(path, TOKEN_FORMATS, format, "token-classification")
    text = read_task_text(path)
    examples = _conll_examples(path, text) if kind == "conll" else _jsonl_tagged(path, text, tokens_field, tags_field)
    if not examples:
        raise TaskDataError(f"task file {path} holds no sentences (only {DOCSTART} or blank lines)")
    return examples


def _conll_examples(path: Path, text: str) -> list[TaggedExample]:
    examples: list[TaggedExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    widths: dict[int, tuple[int, int, str]] = {}  # columns -> (lines with that many, first such line, its text)

    def close() -> None:
        if words:
            examples.append(TaggedExample(list(words), list(tags), f"{path} line {start}"))
            words.clear()
            tags.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        cells = line.split()
        if not cells:
            close()
            continue
        if cells[0] == DOCSTART:
            close()
            continue
        if len(cells) < 2:
            raise TaskDataError(
                f"{path} line {number} has one column ({line.strip()!r}); CoNLL lines are `word tag` "
                "(or `word pos chunk tag`), separated by spaces or tabs, with a blank line between sentences"
            )
        count, first, sample = widths.get(len(cells), (0, number, line))
        widths[len(cells)] = (count + 1, first, sample)
        if not words:
            start = number
        words.append(cells[0])
        tags.append(cells[-1])
    close()
    if len(widths) > 1:
        raise TaskDataError(_conll_width_message(path, widths))
    return examples


def _conll_width_message(path: Path, widths: dict[int, tuple[int, int, str]]) -> str:
    """A CoNLL file whose lines have different numbers of columns: the odd line, the usual count, the fix.

    An error, not a guess: the word is the first column and the tag the last, so a line with a column too many
    (`New York B-LOC`) would drop a word (`York`) and one too few would take a POS column for the tag."""
    usual = max(widths, key=lambda width: (widths[width][0], -widths[width][1]))
    odd = min((width for width in widths if width != usual), key=lambda width: widths[width][1])
    count, number, line = widths[odd]
    usual_count, usual_first, _ = widths[usual]
    if odd > usual:
        fix = (f"columns are split at spaces and tabs, so a word cannot contain a space: give each word its own "
               f"line (e.g. `{line.split()[0]} ...` then `{line.split()[1]} ...`), or remove the extra column")
    else:
        fix = "add the missing column(s): the word is read from the first column and the tag from the last"
    others = f" ({count - 1} more line{'s' if count > 2 else ''} like it)" if count > 1 else ""
    return (f"{path} line {number} has {odd} columns ({line.strip()!r}) but the file's other lines have {usual} "
            f"({usual_count} lines, from line {usual_first}){others}; {fix}")


def _jsonl_tagged(path: Path, text: str, tokens_field: str, tags_field: str) -> list[TaggedExample]:
    examples = []
    for number, record in jsonl_records(path, text, (tokens_field, tags_field)):
        where = f"{path} line {number}"
        for field in (tokens_field, tags_field):
            if field not in record:
                raise TaskDataError(
                    f"{where} has no {field!r} field (found {', '.join(map(repr, record)) or 'none'}); "
                    f"each line needs {tokens_field!r} (the words) and {tags_field!r} (one tag per word)"
                )
        words, tags = record[tokens_field], record[tags_field]
        for field, values in ((tokens_field, words), (tags_field, tags)):
            if not isinstance(values, list) or not all(isinstance(v, str | int) and not isinstance(v, bool)
                                                       for v in values):
                raise TaskDataError(f"{where}: {field!r} must be a list of strings, not {values!r:.60}")
        if len(words) != len(tags):
            raise TaskDataError(
                f"{where}: {len(words)} {tokens_field} but {len(tags)} {tags_field}; give exactly one tag per word"
            )
        if not words:
            raise TaskDataError(f"{where}: {tokens_field!r} is empty; delete the line or add the sentence's words")
        for index, word in enumerate(words):
            if not str(word).strip():
                raise TaskDataError(f"{where}: word {index} is blank; words must be non-empty, with no spaces")
        examples.append(TaggedExample([str(w) for w in words], [str(t) for t in tags], where))
    return examples


# ---- the data

@dataclass(frozen=True)
class TokenFeature:
    input_ids: list[int]
    token_type_ids: list[int]
    labels: list[int]  # per position: the word's tag id at its first sub-token, -100 elsewhere
    word_starts: list[int]  # position of each kept word's first sub-token, in word order
    words_cut: int  # words of the sentence that truncation removed (they get no prediction: "O")
    example_index: int


class TokenClassificationData(FinetuningData):
    """Sentences of pre-split words with one tag per word (NER, POS, ...)."""

    task = TOKEN_TASK
    problem_type = "single_label_classification"

    def __init__(
        self, train_examples: Sequence[TaggedExample], eval_examples: Sequence[TaggedExample], tokenizer, *,
        seq_len: int = 128, seed: int = 0, length_buckets: int = 1, labels: Sequence[str] | None = None,
        train_source: str = "the training data", eval_source: str = "the eval data",
    ):
        super().__init__(tokenizer, seq_len=seq_len, seed=seed, length_buckets=length_buckets,
                         train_source=train_source, eval_source=eval_source)
        self.train_examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        names = list(labels) if labels is not None else sorted({t for e in train_examples for t in e.tags})
        self.id2label = dict(enumerate(names))
        self.main_metric = "entity_f1" if _bio_like(names) else "accuracy"
        word_ids = self._word_pieces([*self.train_examples, *self.eval_examples])
        self.train_features = [self._encode(e, i, word_ids, train_source) for i, e in enumerate(self.train_examples)]
        self.eval_features = [self._encode(e, i, word_ids, train_source) for i, e in enumerate(self.eval_examples)]

    def _word_pieces(self, examples: Sequence[TaggedExample]) -> dict[str, list[int]]:
        """Token ids of every distinct word, tokenized on its own (one batched call)."""
        words = list(dict.fromkeys(w for e in examples for w in e.words))
        # byte-level BPE marks a word start by its space: each word gets one, as transformers' add_prefix_space
        prefix = " " if getattr(self.tokenizer, "piece_style", "wordpiece") == "byte_level" else ""
        ids = self.tokenizer.encode_ids([prefix + word for word in words])
        return {word: pieces or [self.tokenizer.unk_token_id] for word, pieces in zip(words, ids, strict=True)}

    def _encode(self, example: TaggedExample, index: int, word_ids: dict[str, list[int]], source: str
                ) -> TokenFeature:
        label2id = self.label2id
        tokenizer = self.tokenizer
        budget = self.seq_len - len(tokenizer.layout_ids([])[0])
        input_ids = []
        labels = []
        word_starts = []
        for word, tag in zip(example.words, example.tags, strict=True):
            if tag not in label2id:
                raise unknown_label_error(example.where, tag, list(self.id2label.values()), source)
            if len(input_ids) >= budget:
                continue  # cut: checked for unknown tags all the same
            pieces = word_ids[word][: budget - len(input_ids)]
            word_starts.append(len(input_ids))
            input_ids.extend(pieces)
            labels.extend([label2id[tag]] + [IGNORE_INDEX] * (len(pieces) - 1))
        laid_out, segment_ids, special = tokenizer.layout_ids(input_ids)
        lead = special.index(0) if 0 in special else special.count(1)  # specials before the words ([CLS], <s>)
        labels = [IGNORE_INDEX] * lead + labels + [IGNORE_INDEX] * (len(laid_out) - lead - len(labels))
        return TokenFeature(laid_out, segment_ids, labels, [lead + start for start in word_starts],
                            len(example.words) - len(word_starts), index)

    def _targets(self, features: Sequence[TokenFeature], width: int):
        return torch.tensor(pad_rows([f.labels for f in features], width, IGNORE_INDEX)), None, None

    def _reduce(self, feature_index: int, arrays: tuple[np.ndarray, ...]) -> list[int]:
        word_starts = self.eval_features[feature_index].word_starts
        return arrays[0][word_starts].argmax(axis=-1).tolist() if word_starts else []  # a tag id per kept word

    def _score(self, reduced) -> TaskEvaluation:
        fallback = "O" if "O" in self.label2id else self.id2label[0]
        predicted = []
        for feature, ids in zip(self.eval_features, reduced, strict=True):
            predicted.append([self.id2label[i] for i in ids] + [fallback] * feature.words_cut)
        gold = [e.tags for e in self.eval_examples]
        return TaskEvaluation(token_classification_metrics(predicted, gold), predicted)

    def summary(self) -> dict:
        def counts(examples):
            tags = collections.Counter(t for e in examples for t in e.tags)
            return {name: tags.get(name, 0) for name in self.id2label.values()}

        def entities(examples):
            return dict(sorted(collections.Counter(t for e in examples for t, _, _ in get_entities(e.tags)).items()))
        return {
            "task": self.task,
            "train_examples": len(self.train_features), "eval_examples": len(self.eval_features),
            "train_words": sum(len(e.words) for e in self.train_examples),
            "eval_words": sum(len(e.words) for e in self.eval_examples),
            "train_tags": counts(self.train_examples), "eval_tags": counts(self.eval_examples),
            "train_entities": entities(self.train_examples) if self.main_metric == "entity_f1" else {},
            "eval_entities": entities(self.eval_examples) if self.main_metric == "entity_f1" else {},
            "words_cut_train": sum(f.words_cut for f in self.train_features),
            "words_cut_eval": sum(f.words_cut for f in self.eval_features),
        }


def _bio_like(names: Sequence[str]) -> bool:
    return is_entity_tagging(names) and any(name != "O" for name in names)
