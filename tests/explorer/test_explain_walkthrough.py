"""What a new user's walk through the Explain tab found, each pinned: layers counted 1..L as the Inspect tab counts
them, an edit of a masked word kept in the corrupted input, the faithfulness axes in the logit's own units, the
model named as the window names it, a colour bar whose labels fit and differ, and word pieces written "·ed"
(pytest-qt, offscreen: tests/explorer/conftest.py sets QT_QPA_PLATFORM)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bertcore.data.masking import mask_exactly
from explorer.explain._qt.explain_tab import ExplainTab
from explorer.explain._qt.faithfulness_plot import FaithfulnessPlot
from explorer.explain._qt.mixing_view import MixingView
from explorer.explain._qt.patching_view import PatchingView, layer_names
from explorer.explain.jobs import JobRecord
from explorer.explain.state import ExplainRequest, ExplainState, mixing_maps

TEXT = "the king walked on the rug"  # [CLS] the king walk ##ed on the ru ##g [SEP]


def idle_steps(job):
    """The work stood in for: one record, no result (these tests look at what the tab says, not at the work)."""
    yield JobRecord(job.kind, job.request_id, 1.0, "done")


@pytest.fixture
def tab(qtbot, monkeypatch, tiny_model, tokenizer):
    import explorer.explain._qt.job_runner as job_runner
    from explorer.inspector.model_info import LoadedModel, describe_model

    monkeypatch.setattr(job_runner, "job_steps", idle_steps)
    tab = ExplainTab(torch_threads=1)
    qtbot.addWidget(tab)
    tab.on_model_changed(LoadedModel(tiny_model, tokenizer, describe_model(tiny_model, "mood/final")))
    yield tab
    assert tab.shutdown(30_000)


def masked_request(tokenizer, target, masked=(2,), text=TEXT):
    encoding = tokenizer.encode(text)
    return ExplainRequest(target, encoding, mask_exactly(encoding, tokenizer, list(masked)), text, None)


def test_layers_are_counted_from_one_as_the_inspect_tab_counts_them(qtbot):
    view = MixingView()
    qtbot.addWidget(view)
    view.set_choices("value_norm", 5, 6)  # the state's last layer, 0-based
    assert (view.layer_spin.minimum(), view.layer_spin.maximum(), view.layer_spin.text()) == (1, 6, "layer 6")
    with qtbot.waitSignal(view.layerChosen) as chosen:
        view.layer_spin.setValue(1)
    assert chosen.args == [0]  # the state keeps 0-based indices
    rng = np.random.default_rng(0)
    results = [SimpleNamespace(method=method, per_layer=rng.random((6, 4, 4)), rollout=rng.random((6, 4, 4)))
               for method in ("value_norm", "attention")]
    titles = [title for _, title, _ in mixing_maps(*results, 5)]
    assert titles == ["value norm · layer 6", "value norm rolled out to layer 6",
                      "raw attention · layer 6 (mean of heads)", "attention rollout to layer 6"]
    assert layer_names(7, 6) == ["embeddings", "layer 1", "layer 2", "layer 3", "layer 4", "layer 5", "layer 6"]
    patching = PatchingView()
    qtbot.addWidget(patching)
    heads = SimpleNamespace(scores=np.zeros((6, 2), np.float32), clean_value=1.0, corrupted_value=0.0)
    patching.show_patching(["a", "b"], 6, None, heads)
    patching.show_layer(5)
    assert patching.layer_plot.titleLabel.text == "Layer 6: each head's output patched alone"


def test_an_edit_of_a_masked_word_is_the_corruption_and_is_said(qtbot, tab, tokenizer):
    # BERT-style masking hid "king" (position 2); the output explained is the [MASK] at position 7
    request = masked_request(tokenizer, ("mlm", 7, tokenizer.encode(TEXT).input_ids[7]), masked=(2, 7))
    assert tab.explain(request)
    state = tab.state
    state.set_corrupted("the queen walked on the rug", None)
    assert state.corrupted is not None and state.corrupted_problem == ""
    assert state.corrupted.tokens[2] == "queen"  # the user's edit stays
    assert state.corrupted.tokens[7] == "[MASK]"  # the unedited masked position stays masked, as in the clean run
    assert state.corrupted_over_masking == (2,)
    assert state.patching_job() is not None
    tab._show_corrupted()
    note = tab.corrupted_note.text()
    assert note.startswith("Ready: 1 position(s) differ (2 'queen').")
    assert "Position 2 was masked in the clean input (the model saw '[MASK]')" in note
    assert tab.patch_button.isEnabled()
    state.set_corrupted("the king walked on the rug", None)  # back as typed: the masking applies again
    assert state.corrupted.tokens[2] == "[MASK]" and state.corrupted_over_masking == ()
    assert "is the clean one" in state.corrupted_problem


def test_the_faithfulness_axes_read_the_logit_in_its_own_units(qtbot):
    plot = FaithfulnessPlot()
    qtbot.addWidget(plot)
    plot.resize(700, 300)
    plot.show()
    fractions = np.linspace(0, 1, 9)
    curves = SimpleNamespace(fractions=fractions, deletion=np.linspace(0.6, 0.3, 9), insertion=np.linspace(0.3, 0.6, 9),
                             deletion_auc=0.45, insertion_auc=0.45, comprehensiveness=0.1, sufficiency=0.1)
    plot.show_curves({"integrated_gradients": curves})
    for kind in ("deletion", "insertion"):
        axis = plot.plots[kind].getAxis("left")
        plot.plots[kind].vb.autoRange()
        qtbot.waitUntil(lambda axis=axis: axis.range[1] - axis.range[0] > 0.2)
        assert axis.autoSIPrefixScale == 1.0
        assert "x0.001" not in axis.labelString()


def test_the_target_line_names_the_model_as_the_window_does(tab, tokenizer):
    assert tab.explain(masked_request(tokenizer, ("mlm", 2, tokenizer.encode(TEXT).input_ids[2])))
    text = tab.target_label.text()
    assert "mood/final" in text and "BertForPreTraining" not in text
    state = ExplainState()  # a state told no name says so in words, never a class name
    assert state.model_name == ""


def test_the_mixing_colour_bar_fits_and_tells_its_ticks_apart(qtbot):
    view = MixingView()
    qtbot.addWidget(view)
    view.resize(690, 720)
    view.show()
    rng = np.random.default_rng(0)
    tokens, layers = 512, 6
    results = [SimpleNamespace(method=method, per_layer=rng.random((layers, tokens, tokens)) ** 8,
                               rollout=rng.random((layers, tokens, tokens)) ** 8)
               for method in ("value_norm", "attention")]
    view.show_maps([f"[MASK]{position}" for position in range(tokens)], mixing_maps(*results, 5), 5, layers)
    qtbot.waitUntil(lambda: view.bar.axis.width() > 0)
    qtbot.wait(50)
    assert view.levels[1] < 0.05  # shares of 512 tokens: tiny
    right = view.bar.axis.mapRectToScene(view.bar.axis.boundingRect()).right()
    assert right <= view.canvas.viewport().width() + 1  # the labels are drawn inside the view
    axis = view.bar.axis
    shown = [value for spacing, values in axis.tickValues(*view.levels, axis.height())[:2] for value in values]
    labels = axis.tickStrings(sorted(shown), 1.0, min(spacing for spacing, _ in
                                                      axis.tickValues(*view.levels, axis.height())[:2]))
    assert len(set(labels)) == len(labels) > 3  # "0.010", "0.011", … not "0.01" twice


def test_word_pieces_read_as_in_the_inspect_tab(tab, tokenizer):
    assert tab.explain(masked_request(tokenizer, ("mlm", 2, tokenizer.encode(TEXT).input_ids[2])))
    readable = ["[CLS]", "the", "[MASK]", "walk", "·ed", "on", "the", "ru", "·g", "[SEP]"]
    assert tab.attribution_view.tokens == readable
    assert tab.mixing_view.tokens == readable
    assert tab.patching_view.tokens == readable
    tab.state.set_corrupted("the king walker on the rug", None)
    assert tab.corrupted_note.text().startswith("Ready: 1 position(s) differ (4 '·er').")
