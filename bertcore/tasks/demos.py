"""Demo fine-tuning tasks made from the built-in corpus (Tiny Shakespeare, public domain), offline and small.

    python -m bertcore.tasks.demos            # rewrites assets/tasks/ from assets/corpus/tinyshakespeare.txt

The corpus is a run of speeches, `SPEAKER:` on one line and the speech below it, a blank line between
speeches. Every label is read off that text by a fixed rule (`HOW` says which, and assets/tasks/README.md,
written by this module with the counts and baselines, repeats it), so it is exactly right and a model can
learn it from the words it is given. The files are a pure function of the corpus: a rerun writes the same bytes.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bertcore.data.corpus import split_documents_text, split_sentences
from bertcore.files.resources import assets_dir, default_corpus_path
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.tasks.metrics import accuracy, entity_scores, macro_f1, squad_metrics, token_classification_metrics

RUN_LENGTH = 100  # speeches per run; every EVAL_EVERY-th run is eval
EVAL_EVERY = 8
_END = re.compile(r"(.*?)([.?!])[\"'”’)\]]*")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^\sA-Za-z]")


@dataclass(frozen=True)
class DemoTask:
    name: str
    task: str  # one of bertcore.tasks.kinds.TASK_KINDS
    train: Path
    eval: Path
    description: str


_DEMOS = {
    "mood": (SEQUENCE_TASK, "csv", "question, exclamation or statement? (one sentence, final punctuation removed)"),
    "next-line": (SEQUENCE_TASK, "tsv", "does sentence B directly follow sentence A in the same speech? (pairs)"),
    "names": (TOKEN_TASK, "conll", "BIO tags for characters mentioned by name (PER)"),
    "who-says": (QA_TASK, "json", 'Who says "..."? over a passage of speeches (SQuAD v2.0 format)'),
}

SPLIT = (f"Eval examples come from other parts of the corpus than training examples: the speeches are cut into "
         f"runs of {RUN_LENGTH} and every {EVAL_EVERY}th run is eval, so no sentence, speech or dialogue is on both "
         "sides. The default model was pretrained on the whole corpus (MLM + NSP): these are in-domain demos of "
         "fine-tuning, not tests of generalisation to unseen text.")

HOW = {
    "mood": "Is the sentence a question, an exclamation or a statement? The label is the sentence's final "
            "punctuation (? ! .), which is then removed from the text (with any trailing , ; : -); sentences with "
            "another ? or ! inside are left out. The model has to tell from the words (\"what\", \"art thou\", "
            "\"alas\", \"O\", ...). Sentences of 3 to 20 words, balanced classes, no text on both sides.",
    "next-line": "Does sentence B directly follow sentence A in the same speech? Half of the pairs are "
                 "consecutive sentences of one speech (`next`); in the other half B is a sentence from another "
                 "speech of the same split (`not-next`). Sentences of 3 to 20 words. This is next-sentence "
                 "prediction at the level of single sentences, which the default model's NSP pretraining helps.",
    "names": "BIO tags for mentions of characters by name (`PER`). A word is a name when it is a word of a named "
             "character's speaker label (ROMEO, KING RICHARD III, HENRY BOLINGBROKE; not roles such as \"First "
             "Citizen\" or \"Nurse\", not titles such as KING or DUKE, not numerals), written capitalised in the "
             "speeches, and never written in lower case anywhere in the corpus (so \"Gaunt\", \"Green\" and "
             "\"Grey\", which are also ordinary words, are left out). Consecutive name words form one entity "
             "(\"Henry Bolingbroke\"). Words are split off punctuation (CoNLL style). Two thirds of the sentences "
             "mention a name. The tokenizer is uncased, so capitals are no clue: the model has to learn which "
             "words are names, which is mostly learning the list (see the dictionary baseline).",
    "who-says": "The context is a passage of 3 to 5 consecutive speeches written `Speaker: text`, one a line; the "
                "question quotes the opening words (at most 8) of a speech, `Who says \"...\"?`, and the answer is "
                "that speech's speaker label, just before the quoted words (answer_start points at it). "
                "A third of the questions quote the opening of a speech from outside the passage and are unanswerable "
                "(`is_impossible`, answer \"\"), as in SQuAD 2.0. Contexts longer than one input are cut into "
                "windows, so this also exercises the window logic. It is a demo of the QA path (windows, unanswerable "
                "questions, predictions.json) more than a solved task: the shipped 4-layer default model fine-tuned "
                "for up to 800 steps (a busy 2-core CPU, 15 minutes) stayed near the baselines below.",
}


def demo_tasks(folder: Path | None = None) -> list[DemoTask]:
    """The shipped demo tasks (assets/tasks/<name>/{train,eval}.<ext>)."""
    folder = Path(folder) if folder is not None else assets_dir() / "tasks"
    return [DemoTask(name, task, folder / name / f"train.{ext}", folder / name / f"eval.{ext}", description)
            for name, (task, ext, description) in _DEMOS.items()]


def demo_task(name: str, folder: Path | None = None) -> DemoTask:
    for demo in demo_tasks(folder):
        if demo.name == name:
            return demo
    raise ValueError(f"there is no demo task {name!r}; the demo tasks are {', '.join(_DEMOS)}")


# ---- the corpus as speeches ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Speech:
    index: int
    speaker: str  # as written, without the colon: "First Citizen", "KING RICHARD III"
    sentences: list[str]

    @property
    def is_eval(self) -> bool:
        return (self.index // RUN_LENGTH) % EVAL_EVERY == EVAL_EVERY - 1


def read_speeches(corpus_path: Path) -> list[Speech]:
    speeches = []
    for block in split_documents_text(Path(corpus_path).read_text(encoding="utf-8")):
        lines = block.strip().splitlines()
        if len(lines) < 2 or not lines[0].endswith(":"):
            continue
        sentences = split_sentences("\n".join(lines[1:]))
        if sentences:
            speeches.append(Speech(len(speeches), lines[0][:-1].strip(), sentences))
    return speeches


def _split(speeches: list[Speech]) -> tuple[list[Speech], list[Speech]]:
    return [s for s in speeches if not s.is_eval], [s for s in speeches if s.is_eval]


def _words(text: str) -> int:
    return len(text.split())


# ---- mood ---------------------------------------------------------------------------------------------------

MOODS = {"?": "question", "!": "exclamation", ".": "statement"}


def _mood_rows(speeches: list[Speech], per_class: int, seed: str, exclude: set[str]) -> list[dict]:
    by_mood: dict[str, list[str]] = collections.defaultdict(list)
    seen = set(exclude)
    for speech in speeches:
        for sentence in speech.sentences:
            match = _END.fullmatch(sentence)
            if not match:
                continue
            body = match.group(1).strip().rstrip(",;:-").strip()
            if "?" in body or "!" in body or not 3 <= _words(body) <= 20 or body.lower() in seen:
                continue
            seen.add(body.lower())
            by_mood[MOODS[match.group(2)]].append(body)
    rng = random.Random(seed)
    rows = []
    for mood in sorted(by_mood):
        texts = by_mood[mood]
        rng.shuffle(texts)
        rows += [{"text": text, "label": mood} for text in texts[:per_class]]
    rng.shuffle(rows)
    return rows


# ---- next-line ----------------------------------------------------------------------------------------------


def _next_line_rows(speeches: list[Speech], count: int, seed: str) -> list[dict]:
    rng = random.Random(seed)
    pairs = [(s.index, s.sentences[i], s.sentences[i + 1]) for s in speeches for i in range(len(s.sentences) - 1)
             if 3 <= _words(s.sentences[i]) <= 20 and 3 <= _words(s.sentences[i + 1]) <= 20]
    pool = [(s.index, sentence) for s in speeches for sentence in s.sentences if 3 <= _words(sentence) <= 20]
    rng.shuffle(pairs)
    rows = []
    for number, (speech_index, first, second) in enumerate(pairs[:count]):
        if number % 2 == 0:
            rows.append({"text": first, "text_b": second, "label": "next"})
            continue
        other_index, other = pool[rng.randrange(len(pool))]
        while other_index == speech_index:
            other_index, other = pool[rng.randrange(len(pool))]
        rows.append({"text": first, "text_b": other, "label": "not-next"})
    return rows


# ---- names --------------------------------------------------------------------------------------------------


# Words of upper-case speaker labels that are titles or roles, not names.
TITLES = frozenset("ALL ANOTHER ARCHBISHOP BISHOP CARDINAL DUCHESS DUKE EARL FRIAR GARDENER GENTLEMEN KING LADY "
                   "LORD LORDS MISTRESS NURSE OF PAGE PRINCE QUEEN SERVING-MEN SIR".split())


def character_names(speeches: list[Speech], corpus_text: str) -> set[str]:
    """Name words of the named characters' (upper-case) speaker labels, as the speeches write them
    (capitalised), leaving out titles, roman numerals and any word the corpus also writes in lower case."""
    lower_words = set(re.findall(r"\b[a-z][a-z']*\b", corpus_text))
    speech_words = {w for s in speeches for sentence in s.sentences for w in _WORD.findall(sentence)}
    names = set()
    for speaker in {s.speaker for s in speeches if s.speaker.isupper()}:  # "First Citizen", "Nurse": roles
        for word in speaker.split():
            name = word.capitalize()
            roman = set(word) <= set("IVXLC")
            if word not in TITLES and word.isalpha() and not roman and name in speech_words \
                    and name.lower() not in lower_words:
                names.add(name)
    return names


def _tagged(sentence: str, names: set[str]) -> tuple[list[str], list[str]]:
    words = _WORD.findall(sentence)
    tags = []
    for i, word in enumerate(words):
        if word in names:
            tags.append("I-PER" if i > 0 and words[i - 1] in names else "B-PER")
        else:
            tags.append("O")
    return words, tags


def _names_sentences(speeches: list[Speech], names: set[str], with_names: int, without: int, seed: str):
    rng = random.Random(seed)
    positive, negative = [], []
    for speech in speeches:
        for sentence in speech.sentences:
            if not 3 <= _words(sentence) <= 30:
                continue
            words, tags = _tagged(sentence, names)
            (positive if "B-PER" in tags else negative).append((words, tags))
    rng.shuffle(positive)
    rng.shuffle(negative)
    chosen = positive[:with_names] + negative[:without]
    rng.shuffle(chosen)
    return chosen


def _conll(sentences) -> str:
    return "".join("".join(f"{w} {t}\n" for w, t in zip(words, tags, strict=True)) + "\n"
                   for words, tags in sentences)


# ---- who-says -----------------------------------------------------------------------------------------------


def _quote(sentence: str, max_words: int = 8) -> str:
    words = sentence.split()
    return " ".join(words[:max_words]).rstrip(",;:-")


def _who_says(speeches: list[Speech], num_contexts: int, seed: str, prefix: str) -> dict:
    rng = random.Random(seed)
    starts = list(range(0, len(speeches) - 5))
    rng.shuffle(starts)
    used: set[int] = set()
    paragraphs = []
    for start in starts:
        if len(paragraphs) == num_contexts:
            break
        run = []
        for speech in speeches[start : start + 5]:
            if speech.index in used or (run and speech.index != run[-1].index + 1):
                break
            run.append(speech)
            if sum(len(s.speaker) + len(" ".join(s.sentences)) + 3 for s in run) >= 350:
                break
        if len(run) < 3:
            continue
        lines, label_starts = [], []
        offset = 0
        for speech in run:
            label_starts.append(offset)
            line = f"{speech.speaker}: {' '.join(speech.sentences)}"
            lines.append(line)
            offset += len(line) + 1
        context = "\n".join(lines)
        if len(context) > 900:
            continue
        used.update(s.index for s in run)
        qas = []
        for position, speech in enumerate(run):  # every speech of the passage is asked about once
            quote = _quote(speech.sentences[0])  # a speech's opening words: the answer sits just before them
            if _words(quote) < 3 or context.count(quote) != 1:
                continue
            qas.append({"id": f"{prefix}-{speech.index}", "question": f'Who says "{quote}"?',
                        "answers": [{"text": speech.speaker, "answer_start": label_starts[position]}],
                        "is_impossible": False})
        inside = {s.index for s in run}
        num_impossible = (len(qas) + 1) // 2  # a third of the questions
        for _ in range(50):
            if num_impossible == 0:
                break
            other = speeches[rng.randrange(len(speeches))]
            quote = _quote(other.sentences[0])
            if other.index not in inside and _words(quote) >= 3 and quote not in context:
                qas.append({"id": f"{prefix}-{run[0].index}-none{num_impossible}", "question": f'Who says "{quote}"?',
                            "answers": [], "is_impossible": True})
                num_impossible -= 1
        rng.shuffle(qas)
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0", "data": [{"title": "Tiny Shakespeare", "paragraphs": paragraphs}]}


# ---- writing ------------------------------------------------------------------------------------------------


def _csv_text(rows: list[dict], columns: list[str], delimiter: str) -> str:
    buffer = io.StringIO()
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE  # as task_files reads them
    writer = csv.DictWriter(buffer, fieldnames=columns, delimiter=delimiter, lineterminator="\n", quoting=quoting)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def build_demo_files(corpus_path: Path) -> dict[str, str]:
    """{relative path: file text} of every demo task file and the README, a pure function of the corpus text."""
    corpus_text = Path(corpus_path).read_text(encoding="utf-8")
    speeches = read_speeches(corpus_path)
    train, evaluation = _split(speeches)
    eval_rows = _mood_rows(evaluation, 100, "mood-eval", set())
    mood = (_mood_rows(train, 450, "mood-train", {row["text"].lower() for row in eval_rows}), eval_rows)
    next_line = (_next_line_rows(train, 750, "next-train"), _next_line_rows(evaluation, 150, "next-eval"))
    names = character_names(speeches, corpus_text)
    tagged = (_names_sentences(train, names, 450, 200, "names-train"),
              _names_sentences(evaluation, names, 100, 50, "names-eval"))
    squad = (_who_says(train, 75, "who-train", "t"), _who_says(evaluation, 20, "who-eval", "e"))
    files: dict[str, str] = {}
    for side, number in (("train", 0), ("eval", 1)):
        files[f"mood/{side}.csv"] = _csv_text(mood[number], ["text", "label"], ",")
        files[f"next-line/{side}.tsv"] = _csv_text(next_line[number], ["text", "text_b", "label"], "\t")
        files[f"names/{side}.conll"] = _conll(tagged[number])
        files[f"who-says/{side}.json"] = json.dumps(squad[number], ensure_ascii=False) + "\n"
    files["README.md"] = _readme(files, mood, next_line, tagged, squad, len(names))
    return files


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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0]) if argv else None
    for path in write_demo_tasks(out_dir):
        print(f"{path}  {path.stat().st_size / 1024:.1f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
