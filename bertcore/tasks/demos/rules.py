"""The demo tasks' labels, each read off the corpus by a fixed rule (`HOW` says which), so that it is exactly right
and a model can learn it from the words it is given: the corpus as speeches (`SPEAKER:` on one line, the speech
below it, a blank line between speeches), split into train and eval by runs of speeches (`SPLIT`), then each task's
examples. A pure function of the corpus text and the fixed seeds: a rerun draws the same examples.
"""

from __future__ import annotations

import collections
import random
import re
from dataclasses import dataclass
from pathlib import Path

from bertcore.data.corpus import split_documents_text, split_sentences

RUN_LENGTH = 100  # speeches per run; every EVAL_EVERY-th run is eval
EVAL_EVERY = 8
_END = re.compile(r"(.*?)([.?!])[\"'”’)\]]*")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^\sA-Za-z]")

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


def split_sides(speeches: list[Speech]) -> tuple[list[Speech], list[Speech]]:
    return [s for s in speeches if not s.is_eval], [s for s in speeches if s.is_eval]


def _words(text: str) -> int:
    return len(text.split())


# ---- mood ---------------------------------------------------------------------------------------------------

MOODS = {"?": "question", "!": "exclamation", ".": "statement"}


def mood_rows(speeches: list[Speech], per_class: int, seed: str, exclude: set[str]) -> list[dict]:
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


def next_line_rows(speeches: list[Speech], count: int, seed: str) -> list[dict]:
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


def names_sentences(speeches: list[Speech], names: set[str], with_names: int, without: int, seed: str):
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


# ---- who-says -----------------------------------------------------------------------------------------------


def _quote(sentence: str, max_words: int = 8) -> str:
    words = sentence.split()
    return " ".join(words[:max_words]).rstrip(",;:-")


def who_says_passages(speeches: list[Speech], num_contexts: int, seed: str, prefix: str) -> dict:
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
