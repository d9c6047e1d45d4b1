"""Probing a run while it trains: the probe thread loads a weights snapshot (`WeightsJob`) of the running engine,
or a watched run's checkpoint (`CheckpointJob`), into its own model and inspects the probe pairs
(`SnapshotProber`), masked as the run masks (`ProbeMasking`); a watched run's checkpoints are probed once each,
oldest first (`CheckpointProbeQueue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.runs.probe_history import ProbePair


@dataclass(frozen=True)
class ProbeMasking:
    """How a run masks its text (bertcore.training.settings's `masking` and `mlm_probability`): the probe
    pairs are masked the same way, so the predictions shown are the kind the run is learning to make."""

    recipe: str = "token"
    mlm_probability: float = 0.15

    @classmethod
    def of_checkpoint(cls, folder: str | Path) -> ProbeMasking:
        """The masking recorded by the run a checkpoint folder (RUN/checkpoints/step-N) belongs to; BERT's when the
        run records none (a run from before the recipes, a fine-tuning run). ValueError naming the file when the
        run's run_config.json cannot be read."""
        from bertcore.files.run_folder import read_run_config

        recorded = read_run_config(Path(folder).parent.parent).get("training")
        recorded = recorded if isinstance(recorded, dict) else {}
        return cls(recorded.get("masking", cls.recipe), recorded.get("mlm_probability", cls.mlm_probability))


@dataclass(frozen=True)
class WeightsJob:
    """Probe a running engine's weights (a CPU snapshot of its state dict)."""

    state: dict
    config: Any  # bertcore.models.config.BertConfig
    tokenizer: Any
    pairs: tuple[ProbePair, ...]
    masking: ProbeMasking = ProbeMasking()


@dataclass(frozen=True)
class CheckpointJob:
    """Probe a watched run's checkpoint folder (masked as its run's run_config.json says)."""

    folder: str
    pairs: tuple[ProbePair, ...]


class SnapshotProber:
    """Runs in the probe thread: loads a job's weights into its own model and inspects every probe pair;
    returns {pair: Inspection}."""

    def __init__(self):
        self._model = None
        self._config = None
        self._encodings: dict[tuple[int, ProbePair, ProbeMasking], tuple[Any, Any]] = {}

    def __call__(self, job: WeightsJob | CheckpointJob) -> dict[ProbePair, Any]:
        import torch

        from bertcore.analysis.inspection import inspect_encoding, max_input_length
        from bertcore.data.masking import mask_like_bert
        from bertcore.models.task_heads import model_class_for

        if isinstance(job, CheckpointJob):
            from bertcore.models.checkpoint import load_pretrained

            model, tokenizer = load_pretrained(job.folder)
            state, config = model.state_dict(), model.config
            run_masking = ProbeMasking.of_checkpoint(job.folder)
        else:
            state, config, tokenizer, run_masking = job.state, job.config, job.tokenizer, job.masking
        pairs = job.pairs
        if self._model is None or self._config != config:
            with torch.device("meta"):  # no random init: the snapshot overwrites every weight
                model = model_class_for(config)(config)  # a pretraining or a fine-tuning run's class
            self._model = model.to_empty(device="cpu").eval()
            self._config = config
            self._encodings.clear()
        self._model.load_state_dict(state)
        results = {}
        with torch.inference_mode():
            for pair in pairs:
                key = (id(tokenizer), pair, run_masking)
                if key not in self._encodings:
                    # Truncated to what this model takes, as the Inspect tab does (RoBERTa's table is 2 rows longer).
                    encoding = tokenizer.encode(pair.text_a, pair.text_b, max_length=max_input_length(config))
                    # The same positions are masked at every snapshot, so predictions can be compared.
                    masking = mask_like_bert(encoding, tokenizer, seed=0, recipe=run_masking.recipe,
                                             mlm_probability=run_masking.mlm_probability)
                    self._encodings[key] = (encoding, masking)
                encoding, masking = self._encodings[key]
                results[pair] = inspect_encoding(self._model, tokenizer, encoding, masking=masking)
        return results


class CheckpointProbeQueue:
    """A watched run's checkpoints to probe: each one once, oldest first, one in flight at a time."""

    def __init__(self):
        self._seen: set[str] = set()  # checkpoint folder names already queued
        self._waiting: list[tuple[int, Path]] = []
        self.in_flight = False

    def add(self, checkpoints: list[tuple[int | None, Path]]) -> None:
        """Queue the checkpoints (`run_watch.list_checkpoints`, oldest first) not seen before."""
        for step, folder in checkpoints:
            if folder.name not in self._seen and step is not None:
                self._seen.add(folder.name)
                self._waiting.append((step, folder))

    def take(self) -> tuple[int, Path] | None:
        """The next checkpoint to probe, now in flight; None while one is in flight or none waits."""
        if self.in_flight or not self._waiting:
            return None
        self.in_flight = True
        return self._waiting.pop(0)

    def done(self) -> bool:
        """The checkpoint in flight was probed (or failed); False when none was in flight."""
        was_in_flight, self.in_flight = self.in_flight, False
        return was_in_flight
