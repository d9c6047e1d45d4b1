"""Pseudo-log-likelihood and BLiMP (bertcore.analysis.likelihood) against transformers' masked LMs scored in a plain
loop (one forward per masked piece) for every family with a masked-LM head; the families and models without one
say why; BLiMP's accuracies against the pairs' PLLs grouped by hand; the shipped BLiMP cut against the shared file;
malformed BLiMP files named with the line."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis.likelihood import (
    MinimalPair,
    blimp,
    pseudo_log_likelihood,
    read_blimp,
    scored_sentences,
    shipped_blimp,
    shipped_blimp_path,
)
from bertcore.errors import AnalysisError, LinguisticDataError
from tests.bertcore.analysis_checkpoints import FAMILIES, WITHOUT_MLM_HEAD, family_checkpoints

SHARED_BLIMP = Path("/work/shared/data/blimp/blimp-100-per-paradigm.jsonl")
SENTENCES = ["Who should Derek hug after shocking Richard?", "The cats that the dog chases are hungry.",
             "These books were read by every student.", "a"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers):
    return family_checkpoints(tmp_path_factory, transformers)


def reference_pll(model, tokenizer, text: str) -> tuple[float, int]:
    """Σ log p(piece | the sentence with that piece masked), one transformers forward per piece, and the pieces."""
    encoded = tokenizer(text, return_special_tokens_mask=True)
    ids = encoded["input_ids"]
    total, pieces = 0.0, 0
    for position, special in enumerate(encoded["special_tokens_mask"]):
        if special:
            continue
        masked = list(ids)
        masked[position] = tokenizer.mask_token_id
        with torch.no_grad():
            output = model(input_ids=torch.tensor([masked]))
        logits = output.prediction_logits if hasattr(output, "prediction_logits") else output.logits
        total += float(torch.log_softmax(logits[0, position].double(), dim=-1)[ids[position]])
        pieces += 1
    return total, pieces


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in FAMILIES if name not in WITHOUT_MLM_HEAD])
def test_pll_matches_transformers_masked_lm_masking_each_piece(name, checkpoints):
    checkpoint = checkpoints[name]
    model, tokenizer = checkpoint.load()
    scores, pieces = scored_sentences(model, tokenizer, SENTENCES)
    for text, score, count in zip(SENTENCES, scores, pieces, strict=True):
        expected, expected_count = reference_pll(checkpoint.reference, checkpoint.reference_tokenizer, text)
        assert count == expected_count
        assert abs(score - expected) < 1e-5 * max(1.0, abs(expected)), (text, score, expected)
    # many masked copies in one forward or a few: the same numbers
    np.testing.assert_allclose(pseudo_log_likelihood(model, tokenizer, SENTENCES, max_tokens=16), scores, rtol=1e-6)


@pytest.mark.slow
def test_models_without_a_masked_lm_head_say_they_have_no_pll(checkpoints, minilm_path):
    discriminator, tokenizer = checkpoints["electra"].load()
    with pytest.raises(AnalysisError, match=r"ElectraForPreTraining is ELECTRA's discriminator.*generator"):
        pseudo_log_likelihood(discriminator, tokenizer, SENTENCES)
    with pytest.raises(AnalysisError, match="discriminator"):
        blimp(discriminator, tokenizer, shipped_blimp(per_paradigm=1)[:2])
    minilm, minilm_tokenizer = bertcore.load_pretrained(minilm_path)
    with pytest.raises(AnalysisError, match=r"loaded without a trained masked-LM head .* no pseudo-log-likelihood"):
        pseudo_log_likelihood(minilm, minilm_tokenizer, SENTENCES)
    classifier = bertcore.BertForSequenceClassification(minilm.config.replace(num_labels=2))
    with pytest.raises(AnalysisError, match="BertForSequenceClassification has no masked-LM head"):
        pseudo_log_likelihood(classifier, minilm_tokenizer, SENTENCES)


def small_masked_lm():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = bertcore.BertForMaskedLM(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16,
                                                             num_hidden_layers=1, num_attention_heads=2,
                                                             intermediate_size=20, max_position_embeddings=40))
    return model.eval(), tokenizer


def test_bad_sentences_are_named():
    model, tokenizer = small_masked_lm()
    with pytest.raises(AnalysisError, match="pass a list of sentences"):
        pseudo_log_likelihood(model, tokenizer, "one sentence")
    with pytest.raises(AnalysisError, match="sentence 1 cannot be scored: sentence A is empty"):
        pseudo_log_likelihood(model, tokenizer, ["fine", " "])
    with pytest.raises(AnalysisError, match="sentence 0 has 52 positions; the model takes 40"):
        pseudo_log_likelihood(model, tokenizer, [" ".join(["the"] * 50)])


def test_blimp_accuracies_are_the_share_of_pairs_whose_good_sentence_scores_higher():
    model, tokenizer = small_masked_lm()
    pairs = shipped_blimp(per_paradigm=2)[:24]
    result = blimp(model, tokenizer, pairs)
    good = pseudo_log_likelihood(model, tokenizer, [pair.good for pair in pairs])
    bad = pseudo_log_likelihood(model, tokenizer, [pair.bad for pair in pairs])
    np.testing.assert_allclose(result.good_pll, good, rtol=1e-6)
    np.testing.assert_allclose(result.bad_pll, bad, rtol=1e-6)
    right = good > bad
    assert result.accuracy == pytest.approx(right.mean())
    for key, table in ((lambda pair: pair.uid, result.by_paradigm), (lambda pair: pair.field, result.by_field),
                       (lambda pair: pair.phenomenon, result.by_phenomenon)):
        groups = defaultdict(list)
        for pair, hit in zip(pairs, right, strict=True):
            groups[key(pair)].append(hit)
        assert table == pytest.approx({name: np.mean(hits) for name, hits in groups.items()})
    assert set(result.pairs_per_paradigm.values()) == {2} and result.num_pairs == 24
    pieces = sum(len(tokenizer.tokenize(text)) for pair in pairs for text in (pair.good, pair.bad))
    assert result.pseudo_perplexity == pytest.approx(math.exp(-(good.sum() + bad.sum()) / pieces))
    with pytest.raises(AnalysisError, match="no minimal pairs were given"):
        blimp(model, tokenizer, [])


def test_the_shipped_blimp_cut_is_the_first_twenty_pairs_of_each_paradigm():
    pairs = shipped_blimp()
    assert len(pairs) == 1_340 and len({pair.uid for pair in pairs}) == 67
    assert shipped_blimp(per_paradigm=3) == [pair for pair in pairs if int(pair.pair_id) < 3]
    assert bertcore.blimp is blimp and bertcore.read_blimp is read_blimp
    if SHARED_BLIMP.is_file():
        records = [json.loads(line) for line in SHARED_BLIMP.read_text(encoding="utf-8").splitlines()]
        kept = [record for record in records if int(record["pairID"]) < 20]
        assert [(pair.good, pair.bad, pair.uid, pair.field, pair.phenomenon) for pair in pairs] == [
            (r["sentence_good"], r["sentence_bad"], r["UID"], r["field"], r["linguistics_term"]) for r in kept]
        shared_lines = SHARED_BLIMP.read_text(encoding="utf-8").splitlines(keepends=True)
        assert shipped_blimp_path().read_text(encoding="utf-8") == "".join(
            line for line in shared_lines if int(json.loads(line)["pairID"]) < 20)


GOOD_LINE = json.dumps({"sentence_good": "A cat sleeps.", "sentence_bad": "A cat sleep.", "field": "morphology",
                        "linguistics_term": "subject_verb_agreement", "UID": "agreement", "pairID": "0"})


@pytest.mark.parametrize(("content", "fault"), [
    (GOOD_LINE + "\n{not json\n", r"line 2: not a JSON object"),
    (GOOD_LINE + "\n[1, 2]\n", r"line 2: a JSON list, not an object"),
    (json.dumps({"sentence_good": "x", "UID": "u"}) + "\n", r"line 1: no text for sentence_bad, field, "
                                                             r"linguistics_term"),
    ("\n\n", r"holds no pair"),
])
def test_a_malformed_blimp_file_names_the_line(tmp_path, content, fault):
    path = tmp_path / "pairs.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LinguisticDataError, match=fault) as caught:
        read_blimp(path)
    assert str(path) in str(caught.value)


def test_blimp_files_that_cannot_be_read_are_named(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(GOOD_LINE.encode() + b"\n" + "\"é\"".encode("latin-1") + b"\n")
    with pytest.raises(LinguisticDataError, match=r"pairs\.jsonl line 2: not UTF-8 text"):
        read_blimp(path)
    with pytest.raises(LinguisticDataError, match="does not exist"):
        read_blimp(tmp_path / "missing.jsonl")
    path.write_text(GOOD_LINE + "\n" + GOOD_LINE + "\n", encoding="utf-8")
    assert read_blimp(path, per_paradigm=1) == [MinimalPair("A cat sleeps.", "A cat sleep.", "agreement",
                                                            "morphology", "subject_verb_agreement", "0")]
