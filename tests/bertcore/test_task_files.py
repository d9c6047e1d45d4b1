"""Reading task files: CSV / TSV / JSONL, CoNLL, SQuAD; and every kind of bad data named with file, line and fix."""

from __future__ import annotations

import json

import pytest

from bertcore.errors import TaskDataError
from bertcore.tasks.qa import read_squad
from bertcore.tasks.sequence import read_text_examples
from bertcore.tasks.token import read_tagged_examples


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def squad_file(tmp_path, qas, context="The cat sat on the mat.", name="squad.json"):
    document = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}
    return write(tmp_path, name, json.dumps(document))


# ---- sequence files ----------------------------------------------------------------------------------------


def test_csv_tsv_and_jsonl_read_the_same_rows(tmp_path):
    csv_path = write(tmp_path, "a.csv", 'text,text_b,label,idx\n"Hello, world",Bye,pos,1\nAgain,And again,neg,2\n')
    tsv_path = write(tmp_path, "a.tsv",
                     "idx\ttext\ttext_b\tlabel\n1\tHello, world\tBye\tpos\n2\tAgain\tAnd again\tneg\n")
    jsonl_path = write(tmp_path, "a.jsonl", '{"text": "Hello, world", "text_b": "Bye", "label": "pos"}\n\n'
                                            '{"text": "Again", "text_b": "And again", "label": "neg"}\n')
    for path in (csv_path, tsv_path, jsonl_path):
        examples = read_text_examples(path)
        assert [(e.text, e.text_b, e.label) for e in examples] == [("Hello, world", "Bye", "pos"),
                                                                   ("Again", "And again", "neg")]
    assert read_text_examples(jsonl_path)[1].where == f"{jsonl_path} line 3"
    assert read_text_examples(csv_path)[1].where == f"{csv_path} line 3"


def test_tsv_has_no_quoting_and_csv_has(tmp_path):
    tsv_path = write(tmp_path, "glue.tsv", 'text\tlabel\n"A stray quote\tpos\nit \'s "fine" \tneg\n')
    assert [e.text for e in read_text_examples(tsv_path)] == ['"A stray quote', 'it \'s "fine" ']
    csv_path = write(tmp_path, "q.csv", 'text,label\n"say ""hi"", then go",pos\n')
    assert read_text_examples(csv_path)[0].text == 'say "hi", then go'


def test_single_sentences_json_numbers_and_renamed_columns(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"sentence": "a b", "score": 0.5}\n{"sentence": "c", "score": 3}\n')
    examples = read_text_examples(path, text_column="sentence", label_column="score")
    assert [(e.text, e.text_b, e.label) for e in examples] == [("a b", None, 0.5), ("c", None, 3)]


def test_a_utf8_bom_and_a_quoted_multiline_cell_are_fine(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes('\ufefftext,label\n"two\nlines",x\nnext,y\n'.encode())
    examples = read_text_examples(path)
    assert [e.text for e in examples] == ["two\nlines", "next"]
    assert examples[1].where.endswith("line 4")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("missing.csv", "text,labl\nhi,x\n", r"missing\.csv line 1: the header \['text', 'labl'\] has no 'label'"),
        ("semi.csv", "text\tlabel\nhi\tx\n", r"is the file tab-separated"),
        ("cells.csv", "text,label\nhi,there,x\n", r"cells\.csv line 2 has 3 cells but the header has 2; quote"),
        ("few.tsv", "text\tlabel\nhi\n", r"few\.tsv line 2 has 1 cells.*fill in"),
        ("empty_text.csv", "text,label\n  ,x\n", r"empty_text\.csv line 2: 'text' is empty"),
        ("no_label.csv", "text,label\nhi,\n", r"no_label\.csv line 2: 'label' is ''; every row needs a label"),
        ("header_only.csv", "text,label\n", r"has a header but no rows"),
        ("bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 2\n', r"bad\.jsonl line 2 is not valid JSON"),
        ("list.jsonl", '["a", 1]\n', r"list\.jsonl line 1 holds a JSON list, not an object"),
        ("nofield.jsonl", '{"txt": "a", "label": 1}\n', r"nofield\.jsonl line 1 has no 'text' field.*'txt'"),
        ("pairs.jsonl", '{"text": "a", "text_b": "b", "label": 1}\n{"text": "c", "label": 0}\n',
         r"pairs\.jsonl line 2 lacks a 'text_b' field"),
        ("multi.jsonl", '{"text": "a", "label": ["x", "y"]}\n', r"multi-label data is not supported"),
        ("blank.jsonl", "\n\n", r"blank\.jsonl is empty"),
        ("data.txt", "text,label\n", r"cannot tell the format.*'\.txt'; give the file one of the extensions \.csv"),
    ],
)
def test_bad_sequence_files_name_the_file_the_line_and_the_fix(tmp_path, name, text, message):
    with pytest.raises(TaskDataError, match=message):
        read_text_examples(write(tmp_path, name, text))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("dup.csv", "text,text,label\na,b,x\nc,d,y\n",
         r"dup\.csv line 1: the header names the column 'text' twice \(columns 1 and 2\); only one can be read"),
        ("dup.tsv", "text\tlabel\tidx\tlabel\na\tx\t1\ty\n", r"dup\.tsv line 1: .*'label' twice \(columns 2 and 4\)"),
        ("dup_b.csv", "text,text_b,label,text_b\na,b,x,c\n", r"names the column 'text_b' twice"),
        ("dup.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "y", "text": "c"}\n',
         r"dup\.jsonl line 2 gives the field 'text' twice; JSON would keep only the last one"),
    ],
)
def test_a_column_named_twice_is_refused_not_read_from_the_last(tmp_path, name, text, message):
    with pytest.raises(TaskDataError, match=message):
        read_text_examples(write(tmp_path, name, text))


def test_columns_named_twice_that_are_not_read_are_fine(tmp_path):
    path = write(tmp_path, "extra.csv", "id,id,text,label,,\n1,2,hello,x,,\n")
    assert [(e.text, e.label) for e in read_text_examples(path)] == [("hello", "x")]
    jsonl = write(tmp_path, "extra.jsonl", '{"text": "a", "note": 1, "note": 2, "label": "x"}\n')
    assert read_text_examples(jsonl)[0].text == "a"


def test_a_field_named_twice_inside_a_nested_object_is_not_the_records(tmp_path):
    path = write(tmp_path, "nested.jsonl", '{"text": "a", "meta": {"text": 1, "text": 2}, "label": "x"}\n')
    assert read_text_examples(path)[0].text == "a"
    tagged = write(tmp_path, "ner.jsonl", '{"tokens": ["a"], "tags": ["O"], "tokens": ["b"]}\n')
    with pytest.raises(TaskDataError, match=r"ner\.jsonl line 1 gives the field 'tokens' twice"):
        read_tagged_examples(tagged)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('text,label\n"hello,1\nbye,0\nok,1\n', 2),  # swallows the rest of the file: 1 cell, "fill in" blamed
        ('text,label\nok,1\nhi "there",0\n"bad,0\nx,1\n', 4),  # a quote inside a cell opens nothing
        ('text,label\nok,1\n"bad,0', 3),  # the last line itself
        ('text,label\r\n"two\r\nlines",1\r\n"bad,0\r\nx,1\r\n', 4),  # after a closed multi-line cell, CRLF
        ('text,label\nok,"say ""hi"" and ""bye"", then\ngo,1\n', 2),  # escaped quotes, never closed
        ('"text,label\nok,1\n', 1),  # the header
    ],
)
def test_an_unclosed_csv_quote_is_named_with_the_line_it_opens_on(tmp_path, text, line):
    path = write(tmp_path, "quote.csv", text)
    with pytest.raises(TaskDataError, match=rf"quote\.csv line {line}: the quote opened on line {line} is never "
                                            r"closed.*add the closing \""):
        read_text_examples(path)


def test_closed_quotes_and_unicode_line_separators_stay_inside_cells(tmp_path):
    path = write(tmp_path, "ok.csv", 'text,label\n"a ""quoted"" word",1\n"""",0\nsee\u2028this,1\n"two\nlines",0\n')
    assert [e.text for e in read_text_examples(path)] == ['a "quoted" word', '"', "see\u2028this", "two\nlines"]


def test_a_folder_instead_of_a_task_file_names_the_file_to_give(tmp_path):
    folder = tmp_path / "mood"
    folder.mkdir()
    with pytest.raises(TaskDataError, match=r"task file .*mood is a folder, not a file, and holds no \.csv, "):
        read_text_examples(folder)
    for name in ("eval.csv", "train.csv", "notes.md"):
        write(folder, name, "text,label\na,x\n")
    with pytest.raises(TaskDataError, match=r"mood is a folder, not a file; name the data file in it, e\.g\. "
                                            r".*mood/train\.csv \(it holds train\.csv, eval\.csv\)"):
        read_text_examples(folder)
    with pytest.raises(TaskDataError, match=r"is a folder, not a file; .*mood/train\.csv"):
        read_text_examples(folder, format="csv")
    write(folder, "ner.conll", "a O\n")
    with pytest.raises(TaskDataError, match=r"is a folder, not a file; name the data file in it, e\.g\. .*ner\.conll"):
        read_tagged_examples(folder)
    write(folder, "train-v2.0.json", "{}")
    with pytest.raises(TaskDataError, match=r"is a folder, not a file; .*e\.g\. .*mood/train-v2\.0\.json"):
        read_squad(folder)


def test_json_nested_too_deeply_is_named_not_a_recursion_error(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(TaskDataError, match=r"deep\.jsonl line 2 holds JSON nested too deeply"):
        read_text_examples(write(tmp_path, "deep.jsonl", '{"text": "a", "label": "x"}\n' + deep + "\n"))
    with pytest.raises(TaskDataError, match=r"ner\.jsonl line 1 holds JSON nested too deeply"):
        read_tagged_examples(write(tmp_path, "ner.jsonl", '{"tokens": ' + deep + "}\n"))
    with pytest.raises(TaskDataError, match=r"squad\.json holds JSON nested too deeply"):
        read_squad(write(tmp_path, "squad.json", deep))


def test_a_cell_longer_than_the_csv_module_default_limit_is_read(tmp_path):
    path = write(tmp_path, "long.csv", "text,label\n" + "word " * 40_000 + ",x\n\"" + "quoted " * 30_000 + '",y\n')
    assert [len(e.text) for e in read_text_examples(path)] == [200_000, 210_000]


def test_one_column_named_as_two_roles_is_refused(tmp_path):
    path = write(tmp_path, "a.csv", "text,label\nhi,x\n")
    with pytest.raises(TaskDataError, match=r"text_column and label_column are both 'text'; one column cannot be"):
        read_text_examples(path, label_column="text")
    with pytest.raises(TaskDataError, match=r"text_b_column and label_column are both 'label'"):
        read_text_examples(path, text_b_column="label")


def test_a_json_boolean_among_named_labels_is_refused_but_a_true_false_task_is_fine(tmp_path):
    mixed = write(tmp_path, "m.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b", "label": "neg"}\n'
                                       '{"text": "c", "label": true}\n')
    with pytest.raises(TaskDataError, match=r"m\.jsonl line 3: 'label' is true, a JSON boolean, but the other labels "
                                            r"are not booleans \(e\.g\. 'pos' at .*m\.jsonl line 1\)"):
        read_text_examples(mixed)
    odd_name = write(tmp_path, "o.jsonl", '{"text": "a", "label": true}\n{"text": "b", "label": false}\n'
                                          '{"text": "c", "label": "x"}\n')
    with pytest.raises(TaskDataError, match=r"o\.jsonl line 3: 'label' is 'x' but most labels are JSON booleans"):
        read_text_examples(odd_name)
    booleans = write(tmp_path, "b.jsonl", '{"text": "a", "label": true}\n{"text": "b", "label": false}\n')
    assert [e.label for e in read_text_examples(booleans)] == ["true", "false"]


def test_missing_empty_and_non_utf8_files(tmp_path):
    with pytest.raises(TaskDataError, match=r"task file .*nope\.csv does not exist"):
        read_text_examples(tmp_path / "nope.csv")
    # a missing file is named as missing, whatever its extension says to a reader that does not take it
    with pytest.raises(TaskDataError, match=r"task file .*missing\.csv does not exist"):
        read_tagged_examples(tmp_path / "missing.csv")
    with pytest.raises(TaskDataError, match=r"task file .*empty\.csv is empty"):
        read_text_examples(write(tmp_path, "empty.csv", "  \n"))
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(b"text,label\nCaf\xe9,x\n")
    with pytest.raises(TaskDataError, match=r"task file .*latin1\.csv is not UTF-8.*0xe9.*\(line 2\).*iconv"):
        read_text_examples(latin1)


# ---- token files ---------------------------------------------------------------------------------------------


def test_conll_with_four_columns_docstart_and_blank_lines(tmp_path):
    path = write(tmp_path, "ner.conll", "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
                                        "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    examples = read_tagged_examples(path)
    assert [(e.words, e.tags) for e in examples] == [(["EU", "rejects"], ["B-ORG", "O"]),
                                                     (["Peter", "Blackburn"], ["B-PER", "I-PER"])]
    assert [e.where for e in examples] == [f"{path} line 3", f"{path} line 7"]


def test_jsonl_tokens_and_tags(tmp_path):
    path = write(tmp_path, "ner.jsonl", '{"tokens": ["Romeo", "speaks"], "tags": ["B-PER", "O"]}\n')
    assert [(e.words, e.tags) for e in read_tagged_examples(path)] == [(["Romeo", "speaks"], ["B-PER", "O"])]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("New B-LOC\nYork I-LOC\n\nNew York B-LOC\nis O\n",
         r"ner\.conll line 4 has 3 columns \('New York B-LOC'\) but the file's other lines have 2 \(3 lines, from "
         r"line 1\); columns are split at spaces and tabs, so a word cannot contain a space"),
        ("New York B-LOC\nis O\nhere O\n", r"line 1 has 3 columns .* other lines have 2 \(2 lines, from line 2\)"),
        ("EU NNP B-NP B-ORG\nrejects O\nit PRP B-NP O\n",
         r"line 2 has 2 columns \('rejects O'\) but the file's other lines have 4 .*add the missing column"),
        ("-DOCSTART- -X- -X- O\n\nEU B-ORG\nrejects O\n\nNew York\tB-LOC\n", r"line 6 has 3 columns"),
    ],
)
def test_a_conll_line_with_another_number_of_columns_is_refused_not_cut(tmp_path, text, message):
    with pytest.raises(TaskDataError, match=message):
        read_tagged_examples(write(tmp_path, "ner.conll", text))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("short.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n', r"short\.jsonl line 1: 2 tokens but 1 tags"),
        ("notags.jsonl", '{"tokens": ["a"]}\n', r"notags\.jsonl line 1 has no 'tags' field"),
        ("str.jsonl", '{"tokens": "a b", "tags": ["O", "O"]}\n', r"'tokens' must be a list of strings"),
        ("none.jsonl", '{"tokens": [], "tags": []}\n', r"none\.jsonl line 1: 'tokens' is empty"),
        ("blankword.jsonl", '{"tokens": ["a", " "], "tags": ["O", "O"]}\n', r"word 1 is blank"),
        ("one.conll", "EU B-ORG\nrejects\n", r"one\.conll line 2 has one column \('rejects'\)"),
        ("doc.conll", "-DOCSTART- O\n\n", r"holds no sentences"),
    ],
)
def test_bad_token_files(tmp_path, name, text, message):
    with pytest.raises(TaskDataError, match=message):
        read_tagged_examples(write(tmp_path, name, text))


# ---- SQuAD ---------------------------------------------------------------------------------------------------


def test_squad_v1_and_v2_questions(tmp_path):
    path = squad_file(tmp_path, [
        {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0},
                                                         {"text": "cat", "answer_start": 4}]},
        {"id": "q2", "question": "Who flew?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "cat", "answer_start": 4}]},
    ])
    first, second = read_squad(path)
    assert (first.id, first.question, [a.text for a in first.answers], first.is_impossible) == \
        ("q1", "Who sat?", ["The cat", "cat"], False)
    assert (second.answers, second.is_impossible) == ([], True)
    assert first.context == "The cat sat on the mat."


def test_squad_answer_start_that_does_not_match_its_text(tmp_path):
    path = squad_file(tmp_path, [{"id": "q1", "question": "Where?", "answers": [{"text": "mat", "answer_start": 3}]}])
    with pytest.raises(TaskDataError, match=r"article 0 \('T'\) paragraph 0 question 0 \(id 'q1'\) answer 0: the "
                                            r"context at answer_start 3 reads ' ca', not the answer 'mat' \(the text "
                                            r"occurs at offset 19\)"):
        read_squad(path)


@pytest.mark.parametrize(
    ("qas", "message"),
    [
        ([{"id": "q1", "question": "Who?", "answers": []}], r"has no answers; .*is_impossible"),
        ([{"question": "Who?", "answers": []}], r"question 0 has no 'id'"),
        ([{"id": "q1", "answers": [{"text": "cat", "answer_start": 4}]}], r"\(id 'q1'\) has no 'question'"),
        ([{"id": "q1", "question": "Who?", "answers": [{"text": "cat", "answer_start": "4"}]}],
         r"'answer_start' is '4'"),
        ([{"id": "q1", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]},
          {"id": "q1", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]}], r"'q1' is used twice"),
        ([{"id": "q1", "question": "Who?", "answers": [{"text": "dog", "answer_start": 4}]}],
         r"does not occur in the context at all"),
    ],
)
def test_bad_squad_questions(tmp_path, qas, message):
    with pytest.raises(TaskDataError, match=message):
        read_squad(squad_file(tmp_path, qas))


def test_bad_squad_files(tmp_path):
    with pytest.raises(TaskDataError, match=r"is not valid JSON .*line 1, column 2"):
        read_squad(write(tmp_path, "a.json", "{oops"))
    with pytest.raises(TaskDataError, match=r"has no 'data' list"):
        read_squad(write(tmp_path, "b.json", '{"version": "v2.0"}'))
    with pytest.raises(TaskDataError, match=r"paragraph 0 has no 'context'"):
        read_squad(write(tmp_path, "c.json", '{"data": [{"paragraphs": [{"qas": []}]}]}'))
    with pytest.raises(TaskDataError, match=r"holds no questions"):
        read_squad(write(tmp_path, "d.json", '{"data": [{"paragraphs": [{"context": "x", "qas": []}]}]}'))

