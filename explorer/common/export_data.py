"""Qt-free export of attention data (NPZ arrays and CSV matrices with token labels) and of any table as CSV rows.

A large NPZ (MiniLM's attentions at 512 tokens: 6 × 12 × 512 × 512 floats, compressed, and their rollout) takes
seconds to write, so it is written as a generator of progress (`npz_writing`, `attention_npz_writing`) that a worker
thread runs and can stop between two chunks; `save_attention_npz` is the same writing run to its end. Every file is
written next to its target and moved into place only when complete: a failed or cancelled write leaves nothing.
"""

from __future__ import annotations

import csv
import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHUNK_BYTES = 1 << 20  # written (and compressed) between two progress reports: ~20-40 ms of zlib on a slow core


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


@dataclass(frozen=True)
class Computed:
    """An array computed in the writing thread, just before it is written (a rollout takes seconds at 512 tokens):
    `nbytes` is its size, for the progress, and `what` says it in the progress line."""

    what: str
    nbytes: int
    compute: Callable[[], np.ndarray]


def npz_writing(path, arrays: dict[str, np.ndarray | Computed]) -> Iterator[tuple[float, str]]:
    """Write `arrays` to `path` as `np.savez_compressed` does (a zip of .npy members, deflated; plain `np.load`
    reads it), yielding (fraction done, what is being written) after each chunk. The file is written next to `path`
    and moved into place at the end: stopping the generator (`close()`, a cancel) or a failure leaves no file, and
    any file that was at `path` stays as it was."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot export to {path}: the folder {path.parent} does not exist")
    total = sum(array.nbytes if isinstance(array, Computed) else np.asarray(array).nbytes
                for array in arrays.values()) or 1
    total += sum(array.nbytes for array in arrays.values() if isinstance(array, Computed))  # computed, then written
    done = 0
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED, allowZip64=True) \
                as archive:
            for name, array in arrays.items():
                if isinstance(array, Computed):
                    yield done / total, f"computing {array.what}"
                    done += array.nbytes
                    array = array.compute()
                array = np.ascontiguousarray(array)
                if array.dtype.hasobject:
                    raise ValueError(f"{name} holds Python objects; an NPZ read without pickle cannot hold them")
                with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array_header_2_0(member, np.lib.format.header_data_from_array_1_0(array))
                    data = memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(b"")
                    for start in range(0, len(data), CHUNK_BYTES):
                        member.write(data[start:start + CHUNK_BYTES])
                        done += min(CHUNK_BYTES, len(data) - start)
                        yield done / total, f"writing {name}"
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    yield 1.0, "written"


def attention_npz_arrays(attentions: np.ndarray, tokens: list[str], rollout: np.ndarray | Computed | None = None,
                         head_mask: np.ndarray | None = None) -> dict[str, np.ndarray | Computed]:
    """What the attention NPZ holds: attentions (L, H, T, T) float32, tokens (T,) unicode, head_mask (L, H) and, when
    given, rollout (L, T, T) float32; ValueError when the shapes do not fit together."""
    attentions = np.asarray(attentions, np.float32)
    if attentions.ndim != 4 or attentions.shape[-1] != len(tokens):
        raise ValueError(
            f"attentions has shape {attentions.shape} but there are {len(tokens)} tokens; "
            "expected (L, H, T, T) with T = number of tokens"
        )
    num_layers, num_heads = attentions.shape[:2]
    arrays: dict[str, np.ndarray | Computed] = {"attentions": attentions, "tokens": np.array(tokens, dtype=str)}
    arrays["head_mask"] = (
        np.ones((num_layers, num_heads), np.float32) if head_mask is None else np.asarray(head_mask, np.float32)
    )
    if isinstance(rollout, Computed):
        compute = rollout.compute
        arrays["rollout"] = Computed(rollout.what, rollout.nbytes, lambda: np.asarray(compute(), np.float32))
    elif rollout is not None:
        arrays["rollout"] = np.asarray(rollout, np.float32)
    return arrays


def save_attention_npz(
    path,
    attentions: np.ndarray,
    tokens: list[str],
    rollout: np.ndarray | None = None,
    head_mask: np.ndarray | None = None,
) -> Path:
    """Writes attentions (L, H, T, T), tokens (T,) as unicode, rollout (L, T, T), head_mask (L, H), at once (a
    window writes them in a worker: `npz_writing` over `attention_npz_arrays`).

    Load with plain `np.load(path)` (no pickle needed).
    """
    for _ in npz_writing(path, attention_npz_arrays(attentions, tokens, rollout, head_mask)):
        pass
    return Path(path)


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
