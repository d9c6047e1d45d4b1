"""Reading CoNLL-U treebanks (bertcore.analysis.treebank): the shared UD English EWT files counted against a plain
count of their word lines, multiword tokens and empty nodes left out of the tree, the shipped cut equal to the first
sentences of the shared files, and every malformed file named with its line and its fault."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bertcore
from bertcore.analysis.treebank import read_conllu, shipped_treebank, shipped_treebank_path, universal_relation
from bertcore.errors import LinguisticDataError

SHARED_EWT = Path("/work/shared/data/ud-english-ewt")
needs_shared_ewt = pytest.mark.skipif(not (SHARED_EWT / "en_ewt-ud-dev.conllu").is_file(),
                                      reason="the shared UD English EWT files are not on this machine")

GOOD = """# sent_id = one
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t4:nsubj\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t4:aux\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t0:root\t_
4.1\tknown\tknow\tVERB\tVBN\t_\t_\t_\t4:conj\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_

# sent_id = two
1\tGo\tgo\tVERB\tVB\t_\t0\troot\t0:root\t_
2\thome\thome\tADV\tRB\t_\t1\tadvmod:lmod\t1:advmod\t_
"""


def plain_counts(path: Path) -> tuple[int, int]:
    """Sentences and words of a CoNLL-U file counted without bertcore: blank-line-separated blocks, and the lines
    whose first column is a whole number."""
    text = path.read_text(encoding="utf-8")
    blocks = [block for block in text.split("\n\n") if block.strip()]
    words = sum(1 for line in text.splitlines() if line.split("\t", 1)[0].isdigit())
    return len(blocks), words


@needs_shared_ewt
def test_the_shared_ewt_files_read_as_a_plain_count_finds_them():
    dev = read_conllu(SHARED_EWT / "en_ewt-ud-dev.conllu")
    # The data README says 25,148 words; its file has 25,147 word lines (a plain count, below, agrees).
    assert (len(dev), sum(len(sentence) for sentence in dev)) == (2_001, 25_147)
    assert (len(dev), sum(len(sentence) for sentence in dev)) == plain_counts(SHARED_EWT / "en_ewt-ud-dev.conllu")
    test = read_conllu(SHARED_EWT / "en_ewt-ud-test.conllu")
    assert (len(test), sum(len(sentence) for sentence in test)) == plain_counts(SHARED_EWT / "en_ewt-ud-test.conllu")
    assert len(test) == 2_077
    first = dev[0]
    assert first.words == ("From", "the", "AP", "comes", "this", "story", ":")
    assert first.heads == (3, 3, 4, 0, 6, 4, 4)
    assert first.upos == ("ADP", "DET", "PROPN", "VERB", "DET", "NOUN", "PUNCT")
    assert first.xpos == ("IN", "DT", "NNP", "VBZ", "DT", "NN", ":")
    assert first.deprels == ("case", "det", "obl", "root", "det", "nsubj", "punct")
    assert first.text == "From the AP comes this story :"
    assert first.sent_id.endswith("-0001")


@needs_shared_ewt
def test_the_shipped_cut_is_the_first_sentences_of_the_shared_files():
    for split, count in (("dev", 1_000), ("test", 500)):
        shipped = shipped_treebank(split)
        assert len(shipped) == count
        assert shipped == read_conllu(SHARED_EWT / f"en_ewt-ud-{split}.conllu", max_sentences=count)
        original = (SHARED_EWT / f"en_ewt-ud-{split}.conllu").read_bytes()
        assert original.startswith(shipped_treebank_path(split).read_bytes())  # lines unchanged
    assert shipped_treebank("dev", max_sentences=3) == shipped_treebank("dev")[:3]
    with pytest.raises(ValueError, match="split is 'train'"):
        shipped_treebank("train")


def test_multiword_tokens_and_empty_nodes_are_not_words(tmp_path):
    path = tmp_path / "good.conllu"
    path.write_text(GOOD, encoding="utf-8")
    one, two = read_conllu(path)
    assert one.words == ("I", "do", "n't", "know", ".")
    assert one.heads == (4, 4, 4, 0, 4)
    assert one.deprels == ("nsubj", "aux", "advmod", "root", "punct")
    assert (one.sent_id, one.text) == ("one", "I don't know.")
    assert two.words == ("Go", "home") and two.text is None
    assert two.deprels == ("root", "advmod:lmod") and two.relations == ("root", "advmod")
    assert universal_relation("nmod:poss") == "nmod"
    assert read_conllu(path, max_sentences=1) == [one]
    assert bertcore.read_conllu is read_conllu


def test_windows_line_ends_a_byte_order_mark_and_no_final_blank_line_are_read(tmp_path):
    path = tmp_path / "windows.conllu"
    path.write_bytes(("\ufeff" + GOOD.rstrip("\n")).replace("\n", "\r\n").encode("utf-8"))
    reference = tmp_path / "plain.conllu"
    reference.write_text(GOOD, encoding="utf-8")
    assert read_conllu(path) == read_conllu(reference)


def broken(tmp_path, text: str) -> LinguisticDataError:
    path = tmp_path / "broken.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LinguisticDataError) as caught:
        read_conllu(path)
    assert str(path) in str(caught.value) and caught.value.path == path
    return caught.value


LINE = "{id}\t{form}\t_\tNOUN\tNN\t_\t{head}\t{rel}\t_\t_"


@pytest.mark.parametrize(("lines", "line", "fault"), [
    (["1 cat _ NOUN NN _ 0 root _ _"], 1, "1 tab-separated column; a CoNLL-U word line has 10"),
    ([LINE.format(id=1, form="a", head=0, rel="root"), LINE.format(id=3, form="b", head=1, rel="dep")], 2,
     "word ID '3' where 2 comes next"),
    ([LINE.format(id="x", form="a", head=0, rel="root")], 1, "word ID 'x' where 1 comes next"),
    ([LINE.format(id=1, form="a", head=0, rel="root"), LINE.format(id=2, form="b", head=7, rel="dep")], 2,
     "word 2 \\('b'\\) has HEAD 7, but its sentence has 2 words"),
    ([LINE.format(id=1, form="a", head="_", rel="root")], 1, "has HEAD '_'; it must be the number"),
    ([LINE.format(id=1, form="a", head=1, rel="root")], 1, "word 1 \\('a'\\) is its own head"),
    ([LINE.format(id=1, form="a", head=0, rel="root"), LINE.format(id=2, form="b", head=0, rel="root")], 2,
     "has words 1, 2 with HEAD 0; a dependency tree has exactly one root"),
    ([LINE.format(id=1, form="a", head=2, rel="dep"), LINE.format(id=2, form="b", head=1, rel="dep")], 1,
     "has no word with HEAD 0"),
    ([LINE.format(id=1, form="a", head=0, rel="root"), LINE.format(id=2, form="b", head=3, rel="dep"),
      LINE.format(id=3, form="c", head=2, rel="dep")], 2, "the heads of words 2, 3 form a cycle"),
    ([LINE.format(id=1, form="a", head=0, rel="_")], 1, "has no DEPREL"),
    ([LINE.format(id="1-x", form="a", head=0, rel="root")], 1, "ID '1-x' is neither"),
])
def test_a_malformed_file_names_the_line_and_the_fault(tmp_path, lines, line, fault):
    error = broken(tmp_path, "# a comment\n" + "\n".join(lines) + "\n\n")
    assert error.line == line + 1  # after the comment
    assert f"line {line + 1}: " in str(error)
    assert re.search(fault, str(error)), str(error)


def test_files_that_are_no_treebank_are_named(tmp_path):
    assert "holds no sentence" in str(broken(tmp_path, "# only a comment\n\n"))
    latin1 = tmp_path / "latin1.conllu"
    latin1.write_bytes(LINE.format(id=1, form="café", head=0, rel="root").encode("latin-1") + b"\n")
    with pytest.raises(LinguisticDataError, match=r"latin1\.conllu line 1: not UTF-8 text \(byte 6 of the line\)"):
        read_conllu(latin1)
    with pytest.raises(LinguisticDataError, match=r"missing\.conllu does not exist"):
        read_conllu(tmp_path / "missing.conllu")
    with pytest.raises(LinguisticDataError, match="is a folder"):
        read_conllu(tmp_path)
    with pytest.raises(ValueError, match="max_sentences is 0"):
        read_conllu(latin1, max_sentences=0)
