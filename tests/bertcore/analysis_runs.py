"""Small training runs for the tests of a run's analysis records (tests/bertcore/test_run_analysis.py,
test_training_analysis.py): a corpus of EWT's own sentences, the shipped vocabulary, a model small enough to train
in a blink (distinct sizes), and record settings small enough to measure it often."""

from __future__ import annotations

from pathlib import Path

from bertcore.analysis.records import RecordSettings
from bertcore.analysis.treebank import shipped_treebank
from bertcore.files.resources import default_vocab_path
from bertcore.models.config import preset
from bertcore.training.settings import TrainingConfig

SMALL = RecordSettings(sentences=10, test_sentences=6, pairs_per_paradigm=1, blimp_every=2)
MODEL = preset("tiny", hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
               max_position_embeddings=96)


def ewt_corpus(folder: Path) -> Path:
    """EWT's own sentences (not those the records measure) as a corpus, a document per 8 sentences."""
    path = folder / "ewt.txt"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        texts = [sentence.text or " ".join(sentence.words) for sentence in shipped_treebank("dev")[200:600]]
        documents = ["\n".join(texts[start : start + 8]) for start in range(0, len(texts), 8)]
        path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


def run_config(folder: Path, **changes) -> TrainingConfig:
    """A 6-step run in folder/run, a checkpoint every 2 steps, all kept; its prepared corpus cached in folder."""
    values = dict(corpus=str(ewt_corpus(folder)), vocab=str(default_vocab_path()), out_dir=str(folder / "run"),
                  data_cache=str(folder / "cache"), steps=6, batch_size=4, seq_len=48, lr=2e-3, warmup_steps=1,
                  eval_every=0, eval_batches=1, checkpoint_every=2, keep_checkpoints=10, heldout_fraction=0.1,
                  seed=3)
    return TrainingConfig(**{**values, **changes})
