"""Extractive QA data: SQuAD questions cut into windows (bertcore.tasks.qa_windows), held compactly, decoded back to
answer text for the official EM/F1."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from bertcore.tasks.kinds import QA_TASK
from bertcore.tasks.metrics import (
    squad_metrics,
)
from bertcore.tasks.qa_answers import MAX_ANSWER_LENGTH, WindowAnswer, choose_answers, window_answer
from bertcore.tasks.qa_windows import QAWindows, default_qa_lengths, make_qa_windows
from bertcore.tasks.task_data import FinetuningData, TaskBatch, TaskEvaluation
from bertcore.tasks.task_files import QAExample


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
