"""Analysis records made up in a test, shaped as bertcore.analysis_record writes them (the fields the Train tab's
timelines read), for a model of `layers` × `heads`."""

from __future__ import annotations

import numpy as np


def record(step, *, layers=2, heads=3, best=0.1, uas=None, entropy=None, tokens=200, sentences=10, skipped=0,
           blimp=None, probe=None, **extra):
    """A record as bertcore.analysis_record writes it (the fields the timeline reads), for a model of layers × heads."""
    uas = np.full((layers, heads), best / 2) if uas is None else np.asarray(uas)
    entropy = np.full((layers, heads), 2.5) if entropy is None else np.asarray(entropy)
    probe = probe or {"task": "upos", "accuracy": [0.5] * (layers + 1), "control_accuracy": [0.3] * (layers + 1),
                      "selectivity": [0.2] * (layers + 1), "majority_baseline": 0.15, "test_words": 99}
    return {"kind": "analysis", "step": step, "sentences": sentences, "skipped_sentences": skipped,
            "words": 150, "uas": uas.tolist(),
            "best_head": {"layer": 1, "head": 2, "direction": 0, "uas": best},
            "offset_baselines": {"-1": 0.07, "+1": 0.29, "+2": 0.15},
            "health": {"tokens": tokens, "anisotropy": [0.1] * (layers + 1),
                       "effective_rank": [50.0] * (layers + 1), "attention_entropy": entropy.tolist()},
            "probe": probe, "blimp": blimp, **extra}
