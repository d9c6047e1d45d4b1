"""The shipped demo tasks: exactly what the generator writes, loadable by our own readers, honest labels."""

from __future__ import annotations

import collections
import json

import pytest

from bertcore.files.resources import assets_dir, default_corpus_path, default_vocab_path
from bertcore.tasks.demos.files import build_demo_files
from bertcore.tasks.demos.registry import demo_task, demo_tasks
from bertcore.tasks.demos.rules import character_names, read_speeches
from bertcore.tasks.finetune_data import load_finetuning_data
from bertcore.tasks.qa import read_squad
from bertcore.tasks.sequence import read_text_examples
from bertcore.tasks.token import read_tagged_examples
from bertcore.tokenization.wordpiece import BertTokenizer


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return build_demo_files(default_corpus_path())


@pytest.mark.slow
def test_the_shipped_files_are_what_the_generator_writes(generated):
    folder = assets_dir() / "tasks"
    shipped = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file()}
    assert sorted(shipped) == sorted(generated)
    for name, text in generated.items():
        assert shipped[name] == text, f"assets/tasks/{name} differs; rerun `python -m bertcore.tasks.demos`"


def test_the_demo_tasks_are_small(generated):
    sizes = {name: len(text.encode("utf-8")) for name, text in generated.items()}
    assert sum(sizes.values()) < 410_000 and max(sizes.values()) < 110_000


@pytest.mark.slow
def test_every_demo_task_loads_with_the_default_vocabulary():
    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    tasks = {demo.name: demo for demo in demo_tasks()}
    assert sorted(tasks) == ["mood", "names", "next-line", "who-says"]
    assert {demo.task for demo in tasks.values()} == {"sequence", "token", "qa"}
    for demo in tasks.values():
        data = load_finetuning_data(demo.task, demo.train, demo.eval, tokenizer=tokenizer, seq_len=128)
        summary = data.summary()
        if demo.task == "sequence":
            for side in ("train_labels", "eval_labels"):
                counts = list(summary[side].values())
                assert max(counts) == min(counts)  # balanced
            assert summary["truncated_train"] == summary["truncated_eval"] == 0
        elif demo.task == "token":
            assert summary["train_entities"]["PER"] > 400 and summary["eval_entities"]["PER"] > 100
            assert summary["words_cut_train"] == summary["words_cut_eval"] == 0
        else:
            for side in ("train", "eval"):
                assert 0.25 < summary[side]["unanswerable"] / summary[side]["questions"] < 0.4
                assert summary[side]["windows"] > summary[side]["questions"]  # some contexts need two windows
                assert summary[side]["windows_with_answer"] >= summary[side]["answerable"]
        batch = data.train_batch(1, 8)
        assert batch.input_ids.shape[0] == 8 and batch.input_ids.shape[1] <= 128
    with pytest.raises(ValueError, match="there is no demo task 'nope'; the demo tasks are mood, next-line"):
        demo_task("nope")


def test_mood_labels_are_the_removed_punctuation():
    demo = demo_task("mood")
    train, evaluation = read_text_examples(demo.train), read_text_examples(demo.eval)
    assert {e.label for e in train} == {"question", "exclamation", "statement"}
    assert not any(e.text.rstrip()[-1] in ".?!" for e in train + evaluation)
    assert not {e.text.lower() for e in train} & {e.text.lower() for e in evaluation}
    corpus = default_corpus_path().read_text(encoding="utf-8")
    ends = {"question": "?", "exclamation": "!", "statement": "."}
    lines = " ".join(corpus.split())
    for example in evaluation[:40]:  # the sentence really ends so in the corpus
        assert example.text + ends[example.label] in lines


def test_next_line_pairs_are_consecutive_exactly_when_labelled_next():
    demo = demo_task("next-line")
    speeches = read_speeches(default_corpus_path())
    consecutive = {(s.sentences[i], s.sentences[i + 1]) for s in speeches for i in range(len(s.sentences) - 1)}
    examples = read_text_examples(demo.train) + read_text_examples(demo.eval)
    for example in examples:
        assert ((example.text, example.text_b) in consecutive) == (example.label == "next")


def test_names_tags_mark_exactly_the_character_names():
    speeches = read_speeches(default_corpus_path())
    names = character_names(speeches, default_corpus_path().read_text(encoding="utf-8"))
    assert {"Romeo", "Juliet", "Bolingbroke", "Coriolanus"} <= names
    assert not {"King", "Nurse", "Citizen", "Gaunt", "Duke", "Iii"} & names
    demo = demo_task("names")
    for example in read_tagged_examples(demo.train) + read_tagged_examples(demo.eval):
        for word, tag in zip(example.words, example.tags, strict=True):
            assert (tag != "O") == (word in names)


def test_who_says_answers_are_the_speakers_of_the_quoted_lines():
    demo = demo_task("who-says")
    assert json.loads(demo.eval.read_text(encoding="utf-8"))["version"] == "v2.0"
    train, evaluation = read_squad(demo.train), read_squad(demo.eval)
    assert not {e.context for e in train} & {e.context for e in evaluation}
    kinds = collections.Counter()
    for example in train + evaluation:
        quote = example.question.removeprefix('Who says "').removesuffix('"?')
        lines = example.context.split("\n")
        if example.is_impossible:
            assert quote not in example.context
            kinds["none"] += 1
            continue
        answer = example.answers[0]
        line = example.context[answer.answer_start :].split("\n", 1)[0]
        assert line.startswith(f"{answer.text}: {quote}")  # the speech opens with the quoted words
        assert sum(quote in other for other in lines) == 1
        kinds["answer"] += 1
    assert kinds["answer"] > kinds["none"] > 100
