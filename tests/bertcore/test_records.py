"""One analysis record for a training run (bertcore.analysis.records): plain JSON, the same for the same weights
whatever mode the model is in, equal to the measurements run one by one, without BLiMP for a model without a
masked-LM head (saying why), part by part with progress, for every family."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import bertcore
from bertcore.analysis.health import representation_health
from bertcore.analysis.likelihood import blimp, shipped_blimp
from bertcore.analysis.probes import probe_layers
from bertcore.analysis.records import RecordSettings, analysis_record, iter_analysis_record, shipped_analysis_data
from bertcore.analysis.syntax import syntactic_attention
from bertcore.analysis.treebank import shipped_treebank
from bertcore.errors import AnalysisError
from tests.bertcore.analysis_checkpoints import FAMILIES, family_checkpoints

pytestmark = pytest.mark.usefixtures("one_thread")
SMALL = RecordSettings(sentences=24, test_sentences=16, pairs_per_paradigm=1)


@pytest.fixture(scope="module")
def small_model():
    tokenizer = bertcore.BertTokenizer.from_vocab_file(bertcore.files.resources.default_vocab_path())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = bertcore.BertForPreTraining(bertcore.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16,
                                                                num_hidden_layers=2, num_attention_heads=2,
                                                                intermediate_size=24, max_position_embeddings=128))
    return model, tokenizer


@pytest.fixture(scope="module")
def data():
    treebank, test, pairs = shipped_analysis_data()
    return treebank[:40], test[:20], [pair for pair in pairs if pair.pair_id == "0"][:6]


def without_seconds(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "seconds"}


@pytest.mark.slow
def test_a_record_is_plain_json_and_the_same_for_the_same_weights_in_any_mode(small_model, data):
    model, tokenizer = small_model
    treebank, test, pairs = data
    model.train()
    record = analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=SMALL)
    assert model.training  # given back in the mode it came in
    model.eval()
    again = analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=SMALL)
    assert without_seconds(again) == without_seconds(record)
    text = json.dumps(record, allow_nan=False)
    assert json.loads(text) == record
    assert record["sentences"] == 24 and record["test_sentences"] == 16 and record["settings"] == SMALL.to_dict()
    assert np.array(record["uas"]).shape == (2, 2) and np.array(record["uas_by_direction"]).shape == (2, 2, 2)
    assert len(record["probe"]["accuracy"]) == 3 and len(record["health"]["anisotropy"]) == 3
    assert np.array(record["health"]["attention_entropy"]).shape == (2, 2)
    assert record["blimp"]["pairs"] == 6 and "blimp_unavailable" not in record
    assert set(record["offset_baselines"]) == {"-3", "-2", "-1", "+1", "+2", "+3"}
    assert set(record["seconds"]) == {"treebank", "test", "probe", "blimp", "total"}


@pytest.mark.slow
def test_a_record_holds_what_the_measurements_give_one_by_one(small_model, data):
    model, tokenizer = small_model
    treebank, test, pairs = data
    settings = RecordSettings(sentences=24, test_sentences=16, pairs_per_paradigm=1, probe_task="xpos", seed=3,
                              relation_min_count=5)
    record = analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=settings)
    syntax = syntactic_attention(model, tokenizer, treebank[:24])
    assert record["uas"] == syntax.uas.tolist() and record["uas_by_direction"] == syntax.uas_by_direction.tolist()
    assert record["words"] == syntax.num_words
    best = syntax.best_head()
    assert record["best_head"] == {"layer": best.layer, "head": best.head, "direction": best.direction,
                                   "uas": best.accuracy}
    assert list(record["relations"]) == [head.relation for head in syntax.best_heads(5)]
    health = representation_health(model, tokenizer, [" ".join(sentence.words) for sentence in treebank[:24]])
    np.testing.assert_allclose(record["health"]["anisotropy"], health.anisotropy, rtol=1e-7)
    np.testing.assert_allclose(record["health"]["effective_rank"], health.effective_rank, rtol=1e-7)
    np.testing.assert_allclose(record["health"]["attention_entropy"], health.attention_entropy, rtol=1e-7)
    assert record["health"]["outlier_dimensions"] == [list(layer) for layer in health.outlier_dimensions]
    assert record["health"]["tokens"] == health.num_tokens
    probes = probe_layers(model, tokenizer, treebank[:24], test[:16], task="xpos", seed=3)
    # the record's hidden states come from the forward that returns attentions too: equal to float rounding, so a
    # word whose two best labels tie at the 7th digit may go either way
    np.testing.assert_allclose(record["probe"]["accuracy"], probes.accuracy, atol=1.5 / probes.num_test_words)
    np.testing.assert_allclose(record["probe"]["control_accuracy"], probes.control_accuracy,
                               atol=1.5 / probes.num_test_words)
    assert record["probe"]["majority_baseline"] == probes.majority_baseline
    result = blimp(model, tokenizer, pairs)
    assert record["blimp"]["accuracy"] == result.accuracy
    assert record["blimp"]["pseudo_perplexity"] == pytest.approx(result.pseudo_perplexity, rel=1e-12)


def test_without_a_masked_lm_head_the_record_says_why_it_has_no_blimp(small_model, data):
    model, tokenizer = small_model
    treebank, test, pairs = data
    headless = bertcore.BertForPreTraining(model.config)
    headless.load_state_dict(model.state_dict())
    headless.has_pretraining_heads = False  # as a bare encoder's checkpoint loads
    record = analysis_record(headless, tokenizer, treebank, pairs, test_treebank=test,
                             settings=RecordSettings(sentences=8, test_sentences=6))
    assert record["blimp"] is None and "no pseudo-log-likelihood" in record["blimp_unavailable"]
    assert "blimp" not in record["seconds"]
    quiet = analysis_record(model, tokenizer, treebank, (), test_treebank=test,
                            settings=RecordSettings(sentences=8, test_sentences=6))
    assert quiet["blimp"] is None and "blimp_unavailable" not in quiet


def test_a_run_scores_blimp_on_every_blimp_every_th_record(small_model, data):
    model, tokenizer = small_model
    treebank, test, pairs = data
    settings = RecordSettings(sentences=6, test_sentences=4, blimp_every=3)
    records = [analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=settings, index=index)
               for index in range(4)]
    assert [record["blimp"] is not None for record in records] == [True, False, False, True]
    assert [record["index"] for record in records] == [0, 1, 2, 3]
    assert without_seconds(records[0])["blimp"] == without_seconds(records[3])["blimp"]
    assert analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=settings)["blimp"]
    assert [settings.has_blimp(index) for index in (None, 0, 2, 6)] == [True, True, False, True]
    assert not RecordSettings(pairs_per_paradigm=0).has_blimp(0)
    with pytest.raises(ValueError, match="index is -1"):
        analysis_record(model, tokenizer, treebank, pairs, settings=settings, index=-1)


@pytest.mark.slow
def test_progress_comes_part_by_part_and_the_test_sentences_default_to_the_next_ones(small_model, data):
    model, tokenizer = small_model
    treebank, _, pairs = data
    settings = RecordSettings(sentences=8, test_sentences=6, structural_steps=3)
    parts = list(iter_analysis_record(model, tokenizer, treebank, pairs, settings=settings))
    assert [(progress.done, progress.total) for progress in parts] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    record = parts[-1].result
    assert record["test_sentences"] == 6 and len(record["structural"]["uuas"]) == 3
    model.train()
    steps = iter_analysis_record(model, tokenizer, treebank, pairs, settings=settings)
    first = next(steps)
    assert "uas" in first.result and "probe" not in first.result and model.training
    steps.close()
    model.eval()


def test_bad_settings_and_too_little_data_are_named(small_model):
    model, tokenizer = small_model
    treebank = shipped_treebank("dev")[:10]
    with pytest.raises(ValueError, match="sentences is 0; it must be a whole number of at least 1"):
        RecordSettings(sentences=0)
    with pytest.raises(ValueError, match="probe_task is 'lemma'"):
        RecordSettings(probe_task="lemma")
    with pytest.raises(AnalysisError, match="no test sentences for the probe: the treebank has only 10 sentences"):
        analysis_record(model, tokenizer, treebank, settings=RecordSettings(sentences=10))
    with pytest.raises(AnalysisError, match="the treebank holds no sentence"):
        analysis_record(model, tokenizer, [])
    assert bertcore.analysis_record is analysis_record and bertcore.RecordSettings is RecordSettings


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, transformers):
    return family_checkpoints(tmp_path_factory, transformers)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_gives_a_record(name, checkpoints):
    model, tokenizer = checkpoints[name].load()
    treebank, test, _ = shipped_analysis_data()
    record = analysis_record(model, tokenizer, treebank[:12], shipped_blimp(per_paradigm=1)[:3],
                             test_treebank=test[:8], settings=RecordSettings(sentences=12, test_sentences=8,
                                                                             structural_steps=2))
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    assert np.array(record["uas"]).shape == (layers, heads)
    assert len(record["probe"]["selectivity"]) == len(record["structural"]["uuas"]) == layers + 1
    assert np.array(record["health"]["attention_entropy"]).shape == (layers, heads)
    if checkpoints[name].has_mlm_head:
        assert record["blimp"]["pairs"] == 3
    else:
        assert record["blimp"] is None and "discriminator" in record["blimp_unavailable"]
    json.dumps(record, allow_nan=False)
