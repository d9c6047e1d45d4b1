"""From the user's task files to fine-tuning batches, and from the model's outputs on them to the task's metrics.

    tokenizer = BertTokenizer.from_vocab_file("assets/default-model")
    data = load_finetuning_data("sequence", "assets/tasks/mood/train.csv", "assets/tasks/mood/eval.csv",
                                tokenizer=tokenizer, seq_len=128)
    batch = data.train_batch(step, batch_size=32)              # TaskBatch; model(**batch.model_inputs())
    batches = data.eval_batches(64)                            # fixed: the same batches at every evaluation
    result = data.evaluate(batches, [model(**b.model_inputs()) for b in batches])
    evaluation = data.new_evaluation()                         # or batch by batch, holding no logits:
    for b in batches: evaluation.add(b, model(**b.model_inputs()))
    result = evaluation.result()
    result.metrics    # {"accuracy": 0.71, "macro_f1": 0.69}
    result.predictions  # per eval example: label names / tag lists; QA: {question id: answer} (predictions.json)

Three kinds of task, named as the model heads they feed:
- "sequence" (`SequenceClassificationData`): `[CLS] A [SEP] (B [SEP])`, truncated longest-first as the
  tokenizer does; a class id per example, or a float for regression (`problem_type`).
- "token" (`TokenClassificationData`): the words are given; each word is tokenized on its own (what HF does
  for `is_split_into_words=True`, so the word of every sub-token is known exactly), the word's tag goes to its
  first sub-token and every other position is labelled -100 (ignored by the loss). A word that normalises
  to nothing (e.g. a lone zero-width character) becomes one [UNK] so that every word has a position.
- "qa" (`QuestionAnsweringData`): SQuAD questions cut into windows (`bertcore.tasks.qa`); one feature per
  window, held compactly (`QAWindows`: int32 arrays, a window built only when a batch or a decoding reads it), so a
  SQuAD-sized file costs its tokens' bytes, not Python lists per window.

Labels: the label vocabulary comes from the training file (all of it, before any held-out split), sorted, with
integer labels in numeric order; labels that are numbers with a fraction (0.5, "3.8") make a regression task
unless `problem_type` says otherwise; the eval file must use only the training file's labels. Regression scores
must be finite and within ±MAX_REGRESSION_SCORE (1e15): the squared error of a larger one overflows float32.

Batches follow bertcore.data.batches's habits: padded to the batch's longest sequence, and a pure function of
(seed, step, rank, world size) so a resumed run sees exactly the batches an uninterrupted one would. Training
goes through the examples in epochs (each epoch a seeded permutation, one continuous stream across epoch
ends), so every example is seen once per epoch; `length_buckets = k > 1` sorts each group of k steps' examples
by length before cutting it into batches (in a seeded random order), so little of a batch is padding. Without
an eval file, `heldout_fraction` of the training file (whole contexts for QA) is held out, seeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bertcore.tasks.kinds import SEQUENCE_TASK, TASK_KINDS, TOKEN_TASK
from bertcore.tasks.qa import QuestionAnsweringData, read_squad
from bertcore.tasks.sequence import SequenceClassificationData, infer_problem_type, label_vocabulary, read_text_examples
from bertcore.tasks.task_data import FinetuningData, split_heldout
from bertcore.tasks.token import TokenClassificationData, read_tagged_examples


def load_finetuning_data(
    task: str, train: str | Path, eval: str | Path | None = None, *, tokenizer, seq_len: int = 128,
    heldout_fraction: float = 0.1, seed: int = 0, length_buckets: int = 1, format: str | None = None,
    problem_type: str | None = None, labels: Sequence[str] | None = None, **task_options,
) -> FinetuningData:
    """Read the task's files and build its data object. Without `eval`, a seeded `heldout_fraction` of the
    training file is held out (by whole context for QA). `labels` fixes the label order (e.g. a fine-tuned
    checkpoint's id2label); else it comes from the training file. `task_options`: for "sequence"
    text_column / text_b_column / label_column; for "token" tokens_field / tags_field; for "qa"
    max_query_length / doc_stride / max_answer_length / null_score_diff_threshold / allow_no_answer."""
    if task not in TASK_KINDS:
        raise ValueError(f"task {task!r} is not one of {TASK_KINDS}")
    train = Path(train)
    common = {"tokenizer": tokenizer, "seq_len": seq_len, "seed": seed, "length_buckets": length_buckets,
              "train_source": str(train)}
    if task == SEQUENCE_TASK:
        columns = {k: task_options.pop(k) for k in ("text_column", "text_b_column", "label_column")
                   if k in task_options}
        _no_more_options(task, task_options)
        examples = read_text_examples(train, format=format, **columns)
        if problem_type is None:
            problem_type = infer_problem_type(examples)  # from the whole file, before any split
        if labels is None and problem_type != "regression":
            labels = label_vocabulary([e.label for e in examples])
        train_examples, eval_examples, eval_source = _eval_side(
            examples, eval, heldout_fraction, seed, train, lambda p: read_text_examples(p, format=format, **columns))
        return SequenceClassificationData(train_examples, eval_examples, problem_type=problem_type, labels=labels,
                                          eval_source=eval_source, **common)
    if task == TOKEN_TASK:
        fields = {k: task_options.pop(k) for k in ("tokens_field", "tags_field") if k in task_options}
        _no_more_options(task, task_options)
        examples = read_tagged_examples(train, format=format, **fields)
        if labels is None:
            labels = sorted({t for e in examples for t in e.tags})
        train_examples, eval_examples, eval_source = _eval_side(
            examples, eval, heldout_fraction, seed, train, lambda p: read_tagged_examples(p, format=format, **fields))
        return TokenClassificationData(train_examples, eval_examples, labels=labels, eval_source=eval_source,
                                       **common)
    examples = read_squad(train)
    train_examples, eval_examples, eval_source = _eval_side(
        examples, eval, heldout_fraction, seed, train, read_squad, groups=[e.context for e in examples])
    return QuestionAnsweringData(train_examples, eval_examples, eval_source=eval_source, **common, **task_options)


def _no_more_options(task: str, options: dict) -> None:
    if options:
        raise TypeError(f"unknown option(s) for the {task!r} task: {', '.join(sorted(options))}")


def _eval_side(examples, eval_path, fraction, seed, train_path, read, groups=None):
    if eval_path is not None:
        return examples, read(Path(eval_path)), str(eval_path)
    unit = "contexts" if groups is not None else "examples"
    train_indices, heldout_indices = split_heldout(len(examples), fraction, seed, source=f"task file {train_path}",
                                                   unit=unit, groups=groups)
    source = f"held-out {fraction:.0%} of {train_path} ({len(heldout_indices)} examples, seed {seed})"
    return [examples[i] for i in train_indices], [examples[i] for i in heldout_indices], source
