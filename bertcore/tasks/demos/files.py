"""The demo tasks' files (assets/tasks/): each task's train and eval file in the format its reader takes, and the
README that says what each task is, its sizes, label balance and baselines. The files are a pure function of the
corpus: a rerun writes the same bytes (a test compares them with the shipped ones).
"""

from __future__ import annotations

import collections
import csv
import io
import json
from pathlib import Path

from bertcore.files.resources import assets_dir, default_corpus_path
from bertcore.tasks.demos.registry import demo_tasks
from bertcore.tasks.demos.rules import (
    HOW,
    SPLIT,
    character_names,
    mood_rows,
    names_sentences,
    next_line_rows,
    read_speeches,
    split_sides,
    who_says_passages,
)
from bertcore.tasks.metrics import accuracy, entity_scores, macro_f1, squad_metrics, token_classification_metrics

# ---- writing ------------------------------------------------------------------------------------------------


def _csv_text(rows: list[dict], columns: list[str], delimiter: str) -> str:
    buffer = io.StringIO()
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE  # as bertcore.tasks.sequence reads them
    writer = csv.DictWriter(buffer, fieldnames=columns, delimiter=delimiter, lineterminator="\n", quoting=quoting)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def build_demo_files(corpus_path: Path) -> dict[str, str]:
    """{relative path: file text} of every demo task file and the README, a pure function of the corpus text."""
    corpus_text = Path(corpus_path).read_text(encoding="utf-8")
    speeches = read_speeches(corpus_path)
    train, evaluation = split_sides(speeches)
    eval_rows = mood_rows(evaluation, 100, "mood-eval", set())
    mood = (mood_rows(train, 450, "mood-train", {row["text"].lower() for row in eval_rows}), eval_rows)
    next_line = (next_line_rows(train, 750, "next-train"), next_line_rows(evaluation, 150, "next-eval"))
    names = character_names(speeches, corpus_text)
    tagged = (names_sentences(train, names, 450, 200, "names-train"),
              names_sentences(evaluation, names, 100, 50, "names-eval"))
    squad = (who_says_passages(train, 75, "who-train", "t"), who_says_passages(evaluation, 20, "who-eval", "e"))
    files: dict[str, str] = {}
    for side, number in (("train", 0), ("eval", 1)):
        files[f"mood/{side}.csv"] = _csv_text(mood[number], ["text", "label"], ",")
        files[f"next-line/{side}.tsv"] = _csv_text(next_line[number], ["text", "text_b", "label"], "\t")
        files[f"names/{side}.conll"] = _conll(tagged[number])
        files[f"who-says/{side}.json"] = json.dumps(squad[number], ensure_ascii=False) + "\n"
    files["README.md"] = _readme(files, mood, next_line, tagged, squad, len(names))
    return files


def _conll(sentences) -> str:
    return "".join("".join(f"{w} {t}\n" for w, t in zip(words, tags, strict=True)) + "\n"
                   for words, tags in sentences)


def write_demo_tasks(out_dir: Path | None = None, corpus_path: Path | None = None) -> list[Path]:
    out_dir = Path(out_dir) if out_dir is not None else assets_dir() / "tasks"
    files = build_demo_files(corpus_path or default_corpus_path())
    written = []
    for relative, text in files.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# ---- the README: what each task is, its sizes, label balance and baselines ---------------------------------


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _class_lines(rows_by_side) -> list[str]:
    train_rows, eval_rows = rows_by_side
    train_counts = collections.Counter(row["label"] for row in train_rows)
    eval_counts = collections.Counter(row["label"] for row in eval_rows)
    labels = sorted(train_counts)
    majority = max(labels, key=lambda label: (train_counts[label], -labels.index(label)))
    gold = [row["label"] for row in eval_rows]
    guess = [majority] * len(gold)
    balance = ", ".join(f"{label} {train_counts[label]} / {eval_counts[label]}" for label in labels)
    return [f"- Examples (train / eval): {len(train_rows)} / {len(eval_rows)}; labels: {balance}.",
            f"- Majority-class baseline (always `{majority}`): accuracy {_percent(accuracy(guess, gold))}, "
            f"macro F1 {_percent(macro_f1(guess, gold))}."]


def _names_lines(tagged, num_names: int) -> list[str]:
    train, evaluation = tagged
    lexicon = {w.lower() for words, tags in train for w, t in zip(words, tags, strict=True) if t != "O"}
    gold = [tags for _, tags in evaluation]
    lookup = []
    for words, _ in evaluation:
        tags = []
        for i, word in enumerate(words):
            name = word.lower() in lexicon
            tags.append(("I-PER" if i and tags[-1] != "O" else "B-PER") if name else "O")
        lookup.append(tags)
    all_o_accuracy = token_classification_metrics([["O"] * len(tags) for tags in gold], gold)["accuracy"]
    sides = []
    for sentences in tagged:
        entities = sum(t == "B-PER" for _, tags in sentences for t in tags)
        words = sum(len(tags) for _, tags in sentences)
        sides.append(f"{len(sentences)} sentences, {words} words, {entities} names")
    return [f"- Train: {sides[0]}; eval: {sides[1]}; {num_names} distinct name words in the corpus.",
            f"- Baselines: all `O` gets entity F1 0 (word accuracy {_percent(all_o_accuracy)}); a "
            f"dictionary of the words tagged in train (lower-cased, as the model sees them) gets entity F1 "
            f"{_percent(entity_scores(lookup, gold)['entity_f1'])} on eval."]


def _squad_lines(squad) -> list[str]:
    sides = []
    for document in squad:
        paragraphs = document["data"][0]["paragraphs"]
        questions = [qa for p in paragraphs for qa in p["qas"]]
        impossible = sum(qa["is_impossible"] for qa in questions)
        sides.append((paragraphs, questions, impossible))
    paragraphs, questions, impossible = sides[1]
    references = {qa["id"]: [a["text"] for a in qa["answers"]] for qa in questions}
    first_speaker = {qa["id"]: p["context"].split(":", 1)[0] for p in paragraphs for qa in p["qas"]}
    no_answer = squad_metrics(dict.fromkeys(references, ""), references)
    first = squad_metrics(first_speaker, references)
    lengths = [len(p["context"]) for p in paragraphs]
    return [f"- Train: {len(sides[0][0])} passages, {len(sides[0][1])} questions ({sides[0][2]} unanswerable); "
            f"eval: {len(paragraphs)} passages, {len(questions)} questions ({impossible} unanswerable); passages "
            f"of {min(lengths)} to {max(lengths)} characters.",
            f"- Baselines on eval: always no answer: exact match {_percent(no_answer['exact_match'])}; always the "
            f"first speaker of the passage: exact match {_percent(first['exact_match'])}, F1 {_percent(first['f1'])}."]


def _readme(files, mood, next_line, tagged, squad, num_names: int) -> str:
    def size(name):
        return sum(len(text.encode("utf-8")) for path, text in files.items() if path.startswith(name + "/"))
    sections = {"mood": _class_lines(mood), "next-line": _class_lines(next_line),
                "names": _names_lines(tagged, num_names), "who-says": _squad_lines(squad)}
    lines = ["# Demo fine-tuning tasks", "",
             "Written by `python -m bertcore.tasks.demos` from `assets/corpus/tinyshakespeare.txt` (Tiny Shakespeare, "
             "public domain); do not edit by hand, rerun it (a test checks that the files are what it writes). "
             "Every label is read off the corpus text by the fixed rule given below.", "", SPLIT, ""]
    for demo in demo_tasks(Path(".")):
        train, evaluation = demo.train.name, demo.eval.name
        lines += [f"## {demo.name} ({demo.task})", "",
                  f"`{demo.name}/{train}`, `{demo.name}/{evaluation}` ({size(demo.name) / 1024:.0f} KB). "
                  + HOW[demo.name], "", *sections[demo.name], ""]
    return "\n".join(lines)
