"""The Explain tab's data exports, Qt-free: the attributions as a CSV table, everything as one NPZ.

The NPZ loads with plain `np.load(path)` (no pickle): tokens and ids, the target as text, each method's scores and
faithfulness curves, the context mixing shown (per layer and rolled out) and the patching maps, each under a name
that says what it is (`scores/integrated_gradients`, `mixing/value_norm/rollout`, `patching/residual`, …).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from explorer.common.export_data import _replace_atomically, npz_writing


def write_attributions_csv(path, encoding: Any, attributions: dict[str, Any], methods) -> Path:
    """One row per position: position, token, then one score column per method."""
    methods = list(methods)
    if encoding is None or not methods:
        raise ValueError("there are no attributions to export yet; click an output in the Inspect tab first")

    def write(target: Path) -> None:
        with open(target, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["position", "token", *methods])
            for position, token in enumerate(encoding.tokens):
                writer.writerow([position, token, *(f"{float(attributions[method].scores[position]):.6g}"
                                                    for method in methods)])

    return _replace_atomically(Path(path), write)


def explanation_arrays(state: Any) -> dict[str, np.ndarray]:
    """Everything the Explain tab shows, as named arrays (see the module docstring)."""
    if state.encoding is None:
        raise ValueError("there is nothing to export yet; click an output in the Inspect tab first")
    arrays: dict[str, np.ndarray] = {
        "tokens": np.array(state.encoding.tokens, dtype=str),
        "input_ids": np.asarray(state.encoding.input_ids, np.int64),
        "target": np.array(repr(state.target)),
        "target_text": np.array(state.target_text),
    }
    for method, attribution in state.attributions.items():
        arrays[f"scores/{method}"] = np.asarray(attribution.scores, np.float32)
    for method, curves in state.faithfulness.items():
        arrays[f"faithfulness/{method}/fractions"] = np.asarray(curves.fractions, np.float32)
        arrays[f"faithfulness/{method}/deletion"] = np.asarray(curves.deletion, np.float32)
        arrays[f"faithfulness/{method}/insertion"] = np.asarray(curves.insertion, np.float32)
    for result in (state.mixing, state.attention):
        if result is not None:
            arrays[f"mixing/{result.method}/per_layer"] = np.asarray(result.per_layer, np.float32)
            arrays[f"mixing/{result.method}/rollout"] = np.asarray(result.rollout, np.float32)
    for over, result in state.patching.items():
        arrays[f"patching/{over}"] = np.asarray(result.scores, np.float32)
    return arrays


def explanation_npz_writing(path, state: Any):
    """The NPZ of everything shown, as a generator of (fraction, what) for a worker thread (the arrays are taken
    now, in the calling thread): the mixing maps of a 512-token input are tens of megabytes to compress."""
    return npz_writing(path, explanation_arrays(state))


def save_explanation_npz(path, state: Any) -> Path:
    for _ in explanation_npz_writing(path, state):
        pass
    return Path(path)
