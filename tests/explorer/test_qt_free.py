"""The plain layers stay plain: no module outside the Qt layer imports Qt, and the state works headless."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from bertcore.data.masking import MaskDecision
from explorer.inspector.inspect_job import run_inspection
from explorer.inspector.model_info import describe_model
from explorer.inspector.state import ExplorerState, MaskingMode
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS

REPO_ROOT = Path(__file__).resolve().parents[2]
QT_ENTRY = ("explorer.app", "explorer.__main__")  # with each feature's `_qt` folder: the only modules importing Qt
QT_PACKAGES = ("PySide6", "pyqtgraph", "shiboken6")


def plain_modules() -> list[str]:
    """Every module of bertcore and explorer outside the Qt layer, found on disk: a new one is covered at once."""
    names = []
    for package in ("bertcore", "explorer"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if "_qt" not in parts and name not in QT_ENTRY:
                names.append(name)
    return names


@pytest.mark.slow
def test_no_module_outside_the_qt_layer_imports_qt():
    modules = plain_modules()
    assert {"bertcore.models.bert", "bertcore.training.pretraining", "explorer.inspector.state",
            "explorer.runs.training_run"} <= set(modules)
    code = textwrap.dedent(f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
            leaked = sorted({{m.split('.')[0] for m in sys.modules}} & set({QT_PACKAGES!r}))
            if leaked:
                print(name, 'imports', ' '.join(leaked))
                break
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"Qt leaked below the Qt layer: {result.stdout.strip()}"


@pytest.fixture
def state(tiny_model, tokenizer) -> ExplorerState:
    state = ExplorerState()
    state.set_model(tiny_model, tokenizer, describe_model(tiny_model, "tiny", untrained=True))
    return state


def test_model_info_label_says_untrained_size_and_device(tiny_model):
    info = describe_model(tiny_model, "tiny", untrained=True)
    assert info.label.startswith("tiny (untrained)")
    assert "parameters" in info.label and "cpu" in info.label
    assert (info.num_layers, info.num_heads) == (TINY_LAYERS, TINY_HEADS)


def test_model_info_label_says_when_the_heads_are_missing(tokenizer):
    from tests.explorer.conftest import make_tiny_model

    model = make_tiny_model(tokenizer)
    model.has_pretraining_heads = False
    info = describe_model(model, "encoder-only", path="/models/encoder-only")
    assert info.label.endswith("no MLM or NSP head") and "untrained" not in info.label
    assert info.path == "/models/encoder-only"


def test_set_pair_encodes_and_keeps_previous_on_error(state, tokenizer):
    encoding = state.set_pair("the king is dead", "long live the king")
    assert encoding.tokens == tokenizer.encode("the king is dead", "long live the king", max_length=64).tokens
    with pytest.raises(ValueError, match="empty"):
        state.set_pair("   ", "b")
    assert state.encoding is encoding and state.text_a == "the king is dead"


def test_blank_b_means_single_sentence(state):
    encoding = state.set_pair("to be or not to be", "   ")
    assert state.text_b is None and 1 not in encoding.segment_ids


def test_input_notes_report_truncation_and_unknown_words(state):
    state.set_pair("the king " * 60 + "☃", None)
    assert state.encoding.truncation is not None and len(state.encoding) == 64
    assert state.encoding.truncation.message in state.input_notes()
    state.set_pair("a snowman ☃ here", None)
    assert any(note.startswith("[UNK] for:") and "☃" in note for note in state.input_notes())


def test_bert_masking_follows_the_text_with_the_same_seed(state, tokenizer):
    from bertcore.data.masking import mask_like_bert

    state.set_pair("the king is dead long live the king and the queen too", None)
    masking = state.mask_like_bert(seed=7)
    assert masking.decisions == mask_like_bert(state.encoding, tokenizer, seed=7).decisions
    state.set_pair("the king is dead long live the king and the queen too and all", None)
    assert state.masking_mode is MaskingMode.BERT and len(state.masking.decisions) == len(state.encoding)
    assert state.reroll().seed == 8


def test_toggle_mask_by_hand(state):
    state.set_pair("the king is dead", None)
    state.toggle_mask(2)
    assert state.masking_mode is MaskingMode.MANUAL and state.masking.positions == [2]
    assert state.masking.decisions[2] == MaskDecision.MASK
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        state.toggle_mask(0)
    assert state.masking.positions == [2]  # the failed click changed nothing
    state.toggle_mask(2)
    assert state.masking is None and state.masking_mode is MaskingMode.NONE


def test_manual_masks_survive_an_edit_when_still_valid(state):
    state.set_pair("the king is dead", None)
    state.toggle_mask(1)
    state.toggle_mask(4)
    state.set_pair("the king", None)  # position 4 is gone
    assert state.masking.positions == [1]


def test_head_mask_validation_and_change_detection(state):
    assert not state.set_head_mask(np.ones((TINY_LAYERS, TINY_HEADS)))
    assert state.head_mask is None
    one_off = np.ones((TINY_LAYERS, TINY_HEADS))
    one_off[0, 1] = 0
    assert state.set_head_mask(one_off)
    assert not state.set_head_mask(one_off.copy())
    with pytest.raises(ValueError, match="shape"):
        state.set_head_mask(np.ones((TINY_HEADS, TINY_LAYERS)))


def test_requests_carry_increasing_ids_and_run_headless(state):
    state.set_pair("the king is dead", "long live the king")
    state.mask_like_bert(seed=3)
    first, second = state.inspect_request(), state.inspect_request()
    assert second.request_id == first.request_id + 1 == state.latest_request_id
    inspection = run_inspection(second)
    assert inspection.attentions.shape[:2] == (TINY_LAYERS, TINY_HEADS)
    assert [p.position for p in inspection.predictions] == state.masking.positions
