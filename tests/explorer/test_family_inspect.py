"""A masked LM alone in the Inspect tab and the head lab: its MLM rows are shown without the NSP line, and its
importance and logit lens are computed (they used to be hidden behind has_pretraining_heads)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QLabel, QProgressBar, QTableView

from bertcore.analysis.inspection import inspect_encoding
from bertcore.data.masking import mask_exactly
from bertcore.files.resources import default_corpus_path
from bertcore.models.bert import BertForMaskedLM
from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from bertcore.models.electra import ElectraConfig, ElectraForMaskedLM
from explorer.head_lab.analyses import InputJob, analyse_input, recommend_objective
from explorer.head_lab.corpus_run import CorpusSettings, corpus_run
from explorer.inspector.model_info import describe_model
from explorer.window._qt.main_window import MainWindow
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, open_window
from tests.tiny_configs import explorer_bert

SENTENCE_A, SENTENCE_B = "the king is dead long live the king", "his son shall wear the crown"
WAIT_MS = 10_000
MASKED_LMS = ["BertForMaskedLM", "DistilBertForMaskedLM", "ElectraForMaskedLM"]


def masked_lm(name: str, vocab_size: int) -> torch.nn.Module:
    sizes = dict(vocab_size=vocab_size, hidden_size=48, num_hidden_layers=TINY_LAYERS,
                 num_attention_heads=TINY_HEADS, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    if name == "BertForMaskedLM":
        return BertForMaskedLM(explorer_bert(vocab_size, num_hidden_layers=TINY_LAYERS,
                                             num_attention_heads=TINY_HEADS)).eval()
    if name == "DistilBertForMaskedLM":
        return DistilBertForMaskedLM(DistilBertConfig(**sizes)).eval()
    return ElectraForMaskedLM(ElectraConfig(embedding_size=24, **sizes)).eval()


@pytest.mark.parametrize("name", MASKED_LMS)
def test_the_model_line_says_it_lacks_only_the_nsp_head(name, tokenizer):
    info = describe_model(masked_lm(name, tokenizer.vocab_size), name)
    assert (info.has_mlm_head, info.has_nsp_head, info.has_pretraining_heads) == (True, False, True)
    assert info.label.endswith("MLM head, no NSP head")


@pytest.mark.parametrize("name", MASKED_LMS)
def test_head_lab_ranks_a_masked_lms_heads_by_its_mlm_loss(name, tokenizer):
    model = masked_lm(name, tokenizer.vocab_size)
    choice = recommend_objective(model, None)
    assert choice.objective == "mlm" and "no NSP head" in choice.reason
    encoding = tokenizer.encode(SENTENCE_A, SENTENCE_B)
    inspection = inspect_encoding(model, tokenizer, encoding, masking=mask_exactly(encoding, tokenizer, [2]))
    for objective in ("mlm", "mlm+nsp"):  # a pair with the NSP term asked for: the MLM term alone, no crash
        analysis = analyse_input(InputJob(1, model, tokenizer, inspection, objective))
        importance = analysis.scores.importance
        assert importance is not None and importance.shape == (TINY_LAYERS, TINY_HEADS), analysis.scores
        assert np.all(np.isfinite(importance)) and analysis.lens is not None
        assert analysis.scores.caption == "this input (MLM loss)"
        assert np.all(np.isfinite(analysis.lens.top_probabilities))


@pytest.fixture
def window(qtbot, settings) -> MainWindow:
    return open_window(qtbot, settings)


@pytest.mark.slow
@pytest.mark.parametrize("name", MASKED_LMS)
def test_inspect_tab_shows_mlm_rows_without_the_nsp_line(qtbot, window, tokenizer, name):
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(masked_lm(name, tokenizer.vocab_size), tokenizer, name)
    tab = window.inspect_tab
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as blocker:
        tab.toggle_mask(2)
    inspection = blocker.args[0]
    assert 1 in inspection.encoding.sequence_ids  # the default input is a pair: there is an NSP line to leave out
    assert [prediction.position for prediction in inspection.predictions] == [2]
    assert tab.predictions_shown()
    assert window.findChild(QTableView, "predictionsView").model().rowCount() == 1
    assert not window.findChild(QLabel, "nspLabel").isVisible()
    assert not window.findChild(QProgressBar, "nspBar").isVisible()


@pytest.mark.parametrize("name", ["BertForMaskedLM", "DistilBertForMaskedLM"])
def test_corpus_importance_and_pruning_curve_of_a_masked_lm(name, tokenizer, tmp_path):
    """An MLM-only model takes no NSP label: the corpus loss is its MLM, the curve its MLM accuracy alone."""
    text = default_corpus_path().read_text(encoding="utf-8")
    corpus = tmp_path / "small.txt"
    corpus.write_text("\n\n".join(text.split("\n\n")[:400]), encoding="utf-8")
    settings = CorpusSettings(num_pairs=8, seq_len=32, batch_size=4, corpus_path=str(corpus), pruning=True,
                              objective="mlm+nsp")
    last = list(corpus_run(masked_lm(name, tokenizer.vocab_size), tokenizer, settings))[-1]
    assert last.scores.importance is not None and np.all(np.isfinite(last.scores.importance))
    assert "(MLM loss)" in last.scores.caption
    assert last.curve is not None and last.curve.metric_names == ("mlm_accuracy",)
    assert np.all(np.isfinite(last.curve.metric("mlm_accuracy", "importance")))
