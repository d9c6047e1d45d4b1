"""Token classification data: each given word tokenized on its own, its tag on its first sub-token and
IGNORE_INDEX elsewhere; entity-level metrics where the tags are BIO-like."""

from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np
import torch

from bertcore.models.parts import IGNORE_INDEX
from bertcore.tasks.kinds import TOKEN_TASK
from bertcore.tasks.metrics import (
    get_entities,
    is_entity_tagging,
    token_classification_metrics,
)
from bertcore.tasks.task_data import FinetuningData, TaskEvaluation, TokenFeature, pad_rows, unknown_label_error
from bertcore.tasks.task_files import TaggedExample


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
