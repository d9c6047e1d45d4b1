"""Qt-free export of attention data (NPZ arrays and CSV matrices with token labels) and of any table as CSV rows."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np


def _replace_atomically(path: Path, write) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot export to {path}: the folder {path.parent} does not exist")
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def save_attention_npz(
    path,
    attentions: np.ndarray,
    tokens: list[str],
    rollout: np.ndarray | None = None,
    head_mask: np.ndarray | None = None,
) -> Path:
    """Writes attentions (L, H, T, T), tokens (T,) as unicode, rollout (L, T, T), head_mask (L, H).

    Load with plain `np.load(path)` (no pickle needed).
    """
    attentions = np.asarray(attentions, np.float32)
    if attentions.ndim != 4 or attentions.shape[-1] != len(tokens):
        raise ValueError(
            f"attentions has shape {attentions.shape} but there are {len(tokens)} tokens; "
            "expected (L, H, T, T) with T = number of tokens"
        )
    num_layers, num_heads = attentions.shape[:2]
    arrays = {"attentions": attentions, "tokens": np.array(tokens, dtype=str)}
    arrays["head_mask"] = (
        np.ones((num_layers, num_heads), np.float32) if head_mask is None else np.asarray(head_mask, np.float32)
    )
    if rollout is not None:
        arrays["rollout"] = np.asarray(rollout, np.float32)

    def write(target: Path) -> None:
        with open(target, "wb") as handle:  # a file handle keeps numpy from appending ".npz" to ".partial"
            np.savez_compressed(handle, **arrays)

    return _replace_atomically(Path(path), write)


def save_matrix_csv(path, matrix: np.ndarray, row_labels: list[str], column_labels: list[str],
                    corner: str = "query \\ key") -> Path:
    """One header row of column labels, then one row per label; values with 6 significant digits."""
    matrix = np.asarray(matrix)
    if matrix.shape != (len(row_labels), len(column_labels)):
        raise ValueError(
            f"matrix has shape {matrix.shape} but there are {len(row_labels)} row labels and "
            f"{len(column_labels)} column labels"
        )

    def write(target: Path) -> None:
        with open(target, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow([corner, *column_labels])
            for label, row in zip(row_labels, matrix, strict=True):
                writer.writerow([label, *(f"{value:.6g}" for value in row)])

    return _replace_atomically(Path(path), write)


def read_matrix_csv(path) -> tuple[np.ndarray, list[str], list[str]]:
    """Inverse of save_matrix_csv: (matrix, row_labels, column_labels)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    column_labels = rows[0][1:]
    row_labels = [row[0] for row in rows[1:]]
    matrix = np.array([[float(value) for value in row[1:]] for row in rows[1:]], np.float32)
    return matrix.reshape(len(row_labels), len(column_labels)), row_labels, column_labels


def labelled_tokens(tokens: list[str], positions) -> list[str]:
    """'3:dog' labels, so repeated tokens stay distinguishable in a CSV header."""
    return [f"{int(position)}:{tokens[int(position)]}" for position in positions]


def write_rows_csv(path: str | Path, rows: list[list[str]]) -> Path:
    """Rows of cells as a CSV, written next to the target and moved into place, so a failed write leaves no half
    file."""

    def write(target: Path) -> None:
        with open(target, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)

    return _replace_atomically(Path(path), write)
