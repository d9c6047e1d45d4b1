"""Dependency treebanks in CoNLL-U: the gold words, part-of-speech tags and trees the syntax measurements score.

    sentences = bertcore.read_conllu("en_ewt-ud-dev.conllu")
    sentences[1].words[:2], sentences[1].heads[:2], sentences[1].deprels[:2]
    # ('President', 'Bush'), (2, 5), ('nmod:desc', 'nsubj')

CoNLL-U (universaldependencies.org/format.html): one word per line in ten tab-separated columns (ID, FORM, LEMMA,
UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC); `#` lines are comments (`# text = …` and `# sent_id = …` are kept);
a blank line ends a sentence. Multiword-token lines (`3-4  don't`) and empty nodes (`5.1`) are not words of the
tree and are skipped. A file that breaks the format (a missing column, IDs out of order, a head outside the
sentence, a cycle, no root or two) is a LinguisticDataError naming the file, the line and what is wrong, never a
sentence read half-right.

The shipped cut (assets/data/ud-english-ewt/, CC BY-SA 4.0: see its README) is `shipped_treebank("dev")` and
`shipped_treebank("test")`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bertcore.errors import LinguisticDataError
from bertcore.files.resources import assets_dir

NUM_COLUMNS = 10  # ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
PUNCTUATION_UPOS = "PUNCT"  # UD's tag for punctuation, which the structural probe's UUAS leaves out
SHIPPED_SPLITS = {"dev": "en_ewt-ud-dev.conllu", "test": "en_ewt-ud-test.conllu"}


@dataclass(frozen=True)
class Sentence:
    """One sentence of a treebank; every tuple has one entry per word, in order."""

    words: tuple[str, ...]  # FORM
    heads: tuple[int, ...]  # HEAD: the 1-based index of each word's head, 0 for the root
    upos: tuple[str, ...]  # universal part of speech (NOUN, VERB, PUNCT, …)
    xpos: tuple[str, ...]  # the treebank's own tag (Penn Treebank's NN, VBZ, … for English); "_" where it has none
    deprels: tuple[str, ...]  # DEPREL: the word's relation to its head, subtypes included ("nmod:poss")
    sent_id: str | None = None  # the `# sent_id = …` comment
    text: str | None = None  # the `# text = …` comment: the sentence as written (its own spacing)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def relations(self) -> tuple[str, ...]:
        """Each word's universal relation: DEPREL without its subtype ("nmod:poss" -> "nmod"), as the syntax
        measurements group words."""
        return tuple(universal_relation(deprel) for deprel in self.deprels)


def universal_relation(deprel: str) -> str:
    """A UD relation without its language-specific subtype: "nmod:poss" -> "nmod", "obl:tmod" -> "obl"."""
    return deprel.split(":", 1)[0]


def read_conllu(path: str | Path, *, max_sentences: int | None = None) -> list[Sentence]:
    """The sentences of a CoNLL-U file, in order (the first `max_sentences` only, when given).

    LinguisticDataError naming the file, the line and the fault for a file that is missing, not UTF-8, empty of
    sentences, or breaks the format."""
    path = Path(path)
    if max_sentences is not None and (isinstance(max_sentences, bool) or not isinstance(max_sentences, int)
                                      or max_sentences < 1):
        raise ValueError(f"max_sentences is {max_sentences!r}; ask for at least 1 sentence, or None for all")
    sentences: list[Sentence] = []
    try:
        with path.open("rb") as stream:
            for sentence in _sentences(stream, path):
                sentences.append(sentence)
                if max_sentences is not None and len(sentences) >= max_sentences:
                    break
    except FileNotFoundError:
        raise LinguisticDataError(f"{path} does not exist; give the path of a CoNLL-U treebank (.conllu)",
                                  path) from None
    except IsADirectoryError:
        raise LinguisticDataError(f"{path} is a folder; give the path of a CoNLL-U file (.conllu) in it",
                                  path) from None
    except PermissionError:
        raise LinguisticDataError(f"{path} cannot be read (permission denied)", path) from None
    if not sentences:
        raise LinguisticDataError(f"{path} holds no sentence: a CoNLL-U file has one word per line in 10 tab-separated "
                            "columns, and a blank line after each sentence", path)
    return sentences


def shipped_treebank(split: str = "dev", *, max_sentences: int | None = None) -> list[Sentence]:
    """The cut of UD English EWT shipped in assets/data/ud-english-ewt/: "dev" (its first 1,000 sentences, for
    the analyses and to train probes) or "test" (its first 500, to test probes)."""
    if split not in SHIPPED_SPLITS:
        raise ValueError(f"split is {split!r}; the shipped treebank has {' and '.join(SHIPPED_SPLITS)}")
    return read_conllu(shipped_treebank_path(split), max_sentences=max_sentences)


def shipped_treebank_path(split: str = "dev") -> Path:
    return assets_dir() / "data" / "ud-english-ewt" / SHIPPED_SPLITS[split]


# ---- the format ---------------------------------------------------------------------------------------------


@dataclass
class _Pending:
    """The sentence being read: its words' columns and where each came from."""

    first_line: int = 0
    rows: list[tuple[int, list[str]]] = field(default_factory=list)  # (line number, columns) of each word
    sent_id: str | None = None
    text: str | None = None


def _sentences(stream, path: Path) -> Iterator[Sentence]:
    pending = _Pending()
    number = 0
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise _fault(path, number, f"not UTF-8 text (byte {error.start + 1} of the line); CoNLL-U files are "
                               "UTF-8: convert the file") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark some editors write
        line = line.rstrip("\r\n")
        if not line.strip():
            if pending.rows:
                yield _sentence(pending, path)
            pending = _Pending()
            continue
        if line.startswith("#"):
            if not pending.rows:  # comments belong to the sentence that follows them
                key, _, value = line[1:].partition("=")
                if key.strip() == "sent_id":
                    pending.sent_id = value.strip()
                elif key.strip() == "text":
                    pending.text = value.strip()
            continue
        columns = line.split("\t")
        if len(columns) != NUM_COLUMNS:
            raise _fault(path, number, f"{len(columns)} tab-separated column{'s' if len(columns) != 1 else ''}; a "
                               f"CoNLL-U word line has {NUM_COLUMNS} (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS "
                               "MISC), separated by tabs, not spaces")
        word_id = columns[0]
        if "-" in word_id or "." in word_id:
            _check_other_id(word_id, path, number)  # a multiword token or an empty node: not a word of the tree
            continue
        if not pending.rows:
            pending.first_line = number
        pending.rows.append((number, columns))
    if pending.rows:
        yield _sentence(pending, path)


def _check_other_id(word_id: str, path: Path, number: int) -> None:
    separator = "-" if "-" in word_id else "."
    parts = word_id.split(separator)
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise _fault(path, number, f"ID {word_id!r} is neither a word's number (7), a multiword token's range (7-8) "
                           "nor an empty node (7.1)")


def _sentence(pending: _Pending, path: Path) -> Sentence:
    rows = pending.rows
    words, heads, upos, xpos, deprels = [], [], [], [], []
    for expected, (number, columns) in enumerate(rows, start=1):
        word_id, form, _, tag, own_tag, _, head, deprel = columns[:8]
        if not word_id.isdigit() or int(word_id) != expected:
            raise _fault(path, number, f"word ID {word_id!r} where {expected} comes next; the words of a sentence "
                               f"are numbered 1, 2, 3, … (the sentence begins on line {pending.first_line})")
        if not form:
            raise _fault(path, number, f"word {expected} has an empty FORM (column 2)")
        if not head.isdigit():
            raise _fault(path, number, f"word {expected} ({form!r}) has HEAD {head!r}; it must be the number of the "
                               "word it depends on, or 0 for the root")
        if not deprel or deprel == "_":
            raise _fault(path, number, f"word {expected} ({form!r}) has no DEPREL (column 8); the syntax "
                               "measurements need every word's relation")
        words.append(form)
        heads.append(int(head))
        upos.append(tag)
        xpos.append(own_tag)
        deprels.append(deprel)
    _check_tree(heads, words, [number for number, _ in rows], path, pending.first_line)
    return Sentence(words=tuple(words), heads=tuple(heads), upos=tuple(upos), xpos=tuple(xpos),
                    deprels=tuple(deprels), sent_id=pending.sent_id, text=pending.text)


def _check_tree(heads: Sequence[int], words: Sequence[str], lines: Sequence[int], path: Path, first_line: int) -> None:
    """The heads form one tree: each in range, not the word itself, exactly one root, every word reaching it."""
    count = len(heads)
    for index, head in enumerate(heads):
        if head > count:
            raise _fault(path, lines[index], f"word {index + 1} ({words[index]!r}) has HEAD {head}, but its sentence "
                               f"has {count} words")
        if head == index + 1:
            raise _fault(path, lines[index], f"word {index + 1} ({words[index]!r}) is its own head")
    roots = [index for index, head in enumerate(heads) if head == 0]
    if len(roots) != 1:
        where = (f"words {', '.join(str(index + 1) for index in roots)}" if roots else "no word")
        line = lines[roots[1]] if len(roots) > 1 else first_line
        raise _fault(path, line, f"the sentence beginning on line {first_line} has {where} with HEAD 0; a dependency "
                           "tree has exactly one root")
    state = [0] * count  # 0 unvisited, 1 on the current path, 2 known to reach the root
    for start in range(count):
        path_words = []
        node = start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            path_words.append(node)
            node = heads[node] - 1
        if node >= 0 and state[node] == 1:
            cycle = path_words[path_words.index(node):]
            raise _fault(path, lines[node], f"the heads of words {', '.join(str(index + 1) for index in cycle)} form "
                               "a cycle; every word must reach the root by following its heads")
        for index in path_words:
            state[index] = 2


def _fault(path: Path, line: int, what: str) -> LinguisticDataError:
    return LinguisticDataError(f"{path} line {line}: {what}", path, line)
