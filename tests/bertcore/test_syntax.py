"""Heads scored as dependency parsers (bertcore.analysis.syntax) against a plain loop over transformers' own
attention probabilities (eager), for a tiny random model of every family and for MiniLM: per layer, head and
direction, per relation, and Clark et al.'s offset baselines. The loop aligns pieces to words its own way (the
transformers tokenizer's character offsets on the words joined by spaces), so that it checks bertcore's per-word
tokenization too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis.syntax import OFFSETS, syntactic_attention, word_attention
from bertcore.analysis.treebank import Sentence, shipped_treebank, universal_relation
from bertcore.errors import AnalysisError
from bertcore.files.resources import default_vocab_path
from tests.bertcore.analysis_checkpoints import FAMILIES, family_checkpoints

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers):
    return family_checkpoints(tmp_path_factory, transformers)


def piece_owners(reference_tokenizer, words) -> tuple[list[int], list[int]]:
    """(input ids, the word of each position or -1 for a special token) of the words joined by spaces, by the
    transformers tokenizer's offsets: a piece belongs to the word holding its last non-space character; a piece of
    spaces alone (SentencePiece's lone "▁") to the word that follows it."""
    text = " ".join(words)
    starts = np.cumsum([0] + [len(word) + 1 for word in words[:-1]])
    encoded = reference_tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    owners = []
    for (start, end), special in zip(encoded["offset_mapping"], encoded["special_tokens_mask"], strict=True):
        if special:
            owners.append(-1)
            continue
        characters = [index for index in range(start, end) if not text[index].isspace()]
        if characters:
            owners.append(int(np.searchsorted(starts, characters[-1], side="right") - 1))
        else:
            owners.append(int(np.searchsorted(starts, start, side="left")))
    return encoded["input_ids"], owners


def reference_scores(model, reference_tokenizer, sentences, max_positions):
    """Correct predictions (2, L, H) overall and per relation, words scored, sentences skipped: a plain loop."""
    correct, per_relation = None, {}
    words_scored, skipped = 0, 0
    for sentence in sentences:
        input_ids, owners = piece_owners(reference_tokenizer, sentence.words)
        if len(input_ids) > max_positions:
            skipped += 1
            continue
        words_scored += sum(1 for head in sentence.heads if head != 0)
        with torch.no_grad():
            attentions = model(input_ids=torch.tensor([input_ids]), output_attentions=True).attentions
        count = len(sentence.words)
        pieces = [[p for p, owner in enumerate(owners) if owner == word] for word in range(count)]
        for layer, attention in enumerate(attentions):
            probabilities = attention[0].double().numpy()  # (H, T, T)
            if correct is None:
                correct = np.zeros((2, len(attentions), probabilities.shape[0]), np.int64)
            words = np.zeros((probabilities.shape[0], count, count))  # (H, W, W)
            for i in range(count):
                from_word = probabilities[:, pieces[i], :].mean(axis=1)  # (H, T): the mean of word i's rows
                for j in range(count):
                    words[:, i, j] = from_word[:, pieces[j]].sum(axis=1)  # summed over word j's columns
                words[:, i, i] = 0.0
            for i, head_word in enumerate(sentence.heads):
                if head_word == 0:
                    continue
                hits = per_relation.setdefault(sentence.deprels[i], np.zeros_like(correct))
                for direction, predicted in enumerate((words[:, i, :].argmax(axis=1), words[:, :, i].argmax(axis=1))):
                    found = predicted == head_word - 1  # (H,)
                    correct[direction, layer] += found
                    hits[direction, layer] += found
    return correct, per_relation, words_scored, skipped


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_uas_matches_a_plain_loop_over_transformers_attentions(name, checkpoints):
    checkpoint = checkpoints[name]
    model, tokenizer = checkpoint.load()
    sentences = shipped_treebank("dev")[:30]
    limit = 130 - 2 if name in ("roberta", "xlm-roberta") else 128  # RoBERTa's positions start after padding's
    correct, per_relation, words_scored, skipped = reference_scores(checkpoint.reference,
                                                                    checkpoint.reference_tokenizer, sentences, limit)
    result = syntactic_attention(model, tokenizer, sentences)
    assert (result.num_sentences, len(result.skipped)) == (len(sentences) - skipped, skipped)
    assert result.num_words == words_scored
    np.testing.assert_array_equal(np.rint(result.uas_by_direction * result.num_words).astype(int), correct)
    np.testing.assert_array_equal(result.uas, np.maximum(*result.uas_by_direction))
    assert set(result.relations) == set(per_relation)
    for row, relation in enumerate(result.relations):
        counts = np.rint(result.relation_accuracy[row] * result.relation_counts[row]).astype(int)
        np.testing.assert_array_equal(counts, per_relation[relation], err_msg=relation)


@pytest.mark.slow
def test_uas_on_minilm_matches_transformers_per_layer_head_and_direction(minilm_path, transformers):
    reference = transformers.BertModel.from_pretrained(minilm_path, attn_implementation="eager").eval()
    reference_tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path)
    model, tokenizer = bertcore.load_pretrained(minilm_path)
    sentences = shipped_treebank("dev")[:40]
    correct, per_relation, words_scored, _ = reference_scores(reference, reference_tokenizer, sentences, 512)
    result = syntactic_attention(model, tokenizer, sentences)
    assert result.uas_by_direction.shape == (2, 6, 12) and result.num_words == words_scored
    np.testing.assert_array_equal(np.rint(result.uas_by_direction * words_scored).astype(int), correct)
    for row, relation in enumerate(result.relations):
        counts = np.rint(result.relation_accuracy[row] * result.relation_counts[row]).astype(int)
        np.testing.assert_array_equal(counts, per_relation[relation], err_msg=relation)
    best = result.best_head()
    assert best.accuracy == result.uas.max() > result.offset_accuracy.max()  # a trained model beats the baselines
    merged = syntactic_attention(model, tokenizer, sentences, subtypes=False)
    np.testing.assert_array_equal(merged.uas_by_direction, result.uas_by_direction)
    for row, relation in enumerate(merged.relations):  # each universal relation holds the words of its subtypes
        parts = [index for index, name in enumerate(result.relations) if universal_relation(name) == relation]
        assert merged.relation_counts[row] == result.relation_counts[parts].sum()
        np.testing.assert_allclose(merged.relation_accuracy[row] * merged.relation_counts[row],
                                   np.tensordot(result.relation_counts[parts], result.relation_accuracy[parts], 1))
    assert "nmod:poss" in result.relations and "nmod:poss" not in merged.relations


def test_offset_baselines_count_the_heads_a_fixed_distance_away():
    # heads: "the" -> "cat" (next word), "cat" -> "sat" (next), "sat" root, "down" -> "sat" (previous), "." -> "sat"
    sentence = Sentence(words=("the", "cat", "sat", "down", "."), heads=(2, 3, 0, 3, 3),
                        upos=("DET", "NOUN", "VERB", "ADV", "PUNCT"), xpos=("DT", "NN", "VBD", "RB", "."),
                        deprels=("det", "nsubj", "root", "advmod", "punct"))
    other = Sentence(words=("go", "!"), heads=(0, 1), upos=("VERB", "PUNCT"), xpos=("VB", "."),
                     deprels=("root", "punct"))
    tokenizer = bertcore.BertTokenizer([*"[PAD] [UNK] [CLS] [SEP] [MASK]".split(), "the", "cat", "sat", "down", ".",
                                        "go", "!"])
    model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=12,
                                                            num_hidden_layers=1, num_attention_heads=2,
                                                            intermediate_size=16, max_position_embeddings=16))
    result = syntactic_attention(model, tokenizer, [sentence, other])
    assert result.num_words == 5
    expected = {-3: 0, -2: 1, -1: 2, 1: 2, 2: 0, 3: 0}  # "." is two words after "sat"; "down" and "!" one
    assert dict(zip(OFFSETS, np.rint(result.offset_accuracy * 5).astype(int).tolist(), strict=True)) == expected
    punct = result.relations.index("punct")
    assert result.relation_counts[punct] == 2
    assert result.offset_relation_accuracy[punct, OFFSETS.index(-1)] == 0.5
    assert result.offset_relation_accuracy[punct, OFFSETS.index(-2)] == 0.5


def test_word_attention_sums_over_the_key_pieces_and_averages_over_the_query_pieces():
    # positions: [CLS] w0a w0b w1 [SEP]; word 0 has two pieces
    attention = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0],
                              [0.0, 0.5, 0.1, 0.2, 0.2],
                              [0.0, 0.1, 0.1, 0.6, 0.2],
                              [0.3, 0.3, 0.2, 0.1, 0.1],
                              [0.2, 0.2, 0.2, 0.2, 0.2]], dtype=torch.float64)[None, None]  # (1, 1, T, T)
    membership = torch.tensor([[[0, 1, 1, 0, 0], [0, 0, 0, 1, 0]]], dtype=torch.float64)  # (1, W, T)
    words = word_attention(attention, membership)[0, 0]
    expected = np.array([[((0.5 + 0.1) + (0.1 + 0.1)) / 2, (0.2 + 0.6) / 2],
                         [0.3 + 0.2, 0.1]])
    np.testing.assert_allclose(words.numpy(), expected)


def test_a_head_that_attends_to_each_words_head_scores_one_in_its_direction(monkeypatch):
    """A model whose attention is built to follow the gold tree: direction 0 finds every head, the transpose does
    not (each word has one head, but a head has many dependents)."""
    sentence = shipped_treebank("dev")[1]
    vocab = sorted({word.lower() for word in sentence.words})
    tokenizer = bertcore.BertTokenizer([*"[PAD] [UNK] [CLS] [SEP] [MASK]".split(), *vocab])
    model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                                            num_hidden_layers=1, num_attention_heads=1,
                                                            intermediate_size=8, max_position_embeddings=40))
    count = len(sentence.words)
    probabilities = torch.full((1, 1, count + 2, count + 2), 0.01, dtype=torch.float32)
    for word, head in enumerate(sentence.heads):
        if head:
            probabilities[0, 0, word + 1, head] = 1.0  # position = word + 1 after [CLS]

    from bertcore.analysis import syntax

    class Output:
        attentions = (probabilities,)

    def fake_batches(model, tokenizer, inputs, **_):
        from bertcore.analysis.word_inputs import batches

        for batch in batches(inputs, tokenizer, "cpu"):
            yield batch, Output

    monkeypatch.setattr(syntax, "encoded_batches", fake_batches)
    result = syntactic_attention(model, tokenizer, [sentence])
    assert result.uas_by_direction[0, 0, 0] == 1.0
    assert result.uas_by_direction[1, 0, 0] < 1.0
    assert result.best_head().direction == 0


def test_sentences_that_do_not_fit_are_skipped_and_counted_and_none_fitting_is_an_error():
    sentences = shipped_treebank("dev")[:6]
    tokenizer = bertcore.BertTokenizer.from_vocab_file(default_vocab_path())
    lengths = [len(tokenizer.encode(" ".join(sentence.words), max_length=4096)) for sentence in sentences]
    limit = sorted(lengths)[3]
    model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                                            num_hidden_layers=1, num_attention_heads=2,
                                                            intermediate_size=8, max_position_embeddings=limit))
    result = syntactic_attention(model, tokenizer, sentences)
    too_long = tuple(index for index, length in enumerate(lengths) if length > limit)
    assert result.skipped.too_long == too_long and result.num_sentences == len(sentences) - len(too_long)
    longest = [sentences[index] for index in too_long]
    with pytest.raises(AnalysisError, match=f"none of the {len(longest)} sentences can be scored: {len(longest)} "
                                            "are longer than the model takes"):
        syntactic_attention(model, tokenizer, longest)
    with pytest.raises(AnalysisError, match="no sentences were given"):
        syntactic_attention(model, tokenizer, [])
    with pytest.raises(AnalysisError, match="no word of relation 'nope' was scored"):
        result.best_head("nope")
