"""SQuAD v1.1 / v2.0 files into `QAExample`s, checked: ids unique, every answer where its offset says."""

from __future__ import annotations

import json
from pathlib import Path

from bertcore.errors import TaskDataError
from bertcore.tasks.task_files import (
    Answer,
    QAExample,
    folder_message,
    read_task_text,
    too_deep,
)


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
