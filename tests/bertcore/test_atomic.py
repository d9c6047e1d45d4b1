"""Atomic writes: all or nothing, ordinary permissions, and the process umask never touched."""

from __future__ import annotations

import json
import os

import pytest

from bertcore.files.atomic import (
    atomic_path,
    current_umask,
    remove_leftovers,
    staged_folder,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


def real_umask() -> int:
    umask = os.umask(0o022)  # only the test itself reads it this way, to compare
    os.umask(umask)
    return umask


@pytest.fixture
def umask_must_not_change(monkeypatch):
    """Every call to os.umask fails: setting it (even for a moment, as reading it does) is visible to all threads."""

    def forbidden(mask):
        raise AssertionError(f"os.umask({mask:#o}) was called; the umask must only be read")

    monkeypatch.setattr(os, "umask", forbidden)


def test_current_umask_reads_without_setting(monkeypatch):
    expected = real_umask()
    monkeypatch.setattr(os, "umask", lambda mask: pytest.fail("os.umask was called"))
    assert current_umask() == expected


def test_current_umask_without_proc(monkeypatch):
    expected = real_umask()
    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_proc)
    assert current_umask() == expected  # from a probe file's mode


def test_writes_replace_whole_files_with_ordinary_permissions(tmp_path, umask_must_not_change):
    path = tmp_path / "values.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"b": [1, 2]})
    assert json.loads(path.read_text()) == {"b": [1, 2]}
    write_text_atomic(tmp_path / "text.txt", "ü\r\nline\n")
    assert (tmp_path / "text.txt").read_bytes() == "ü\r\nline\n".encode()  # newlines as given
    write_bytes_atomic(tmp_path / "data.bin", b"\x00\x01")
    for name in ("values.json", "text.txt", "data.bin"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~current_umask()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin", "text.txt", "values.json"]  # no temporaries


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    path = tmp_path / "summary.json"
    write_json_atomic(path, {"step": 1})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"step": object()})  # fails while serialising
    with pytest.raises(OSError, match="disk full"), atomic_path(path) as temporary:
        temporary.write_text("half")
        raise OSError(28, "disk full")
    assert json.loads(path.read_text()) == {"step": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_private_files_of_a_writer_get_ordinary_permissions(tmp_path):
    path = tmp_path / "weights.bin"
    with atomic_path(path) as temporary:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT, 0o600)  # as tempfile.mkstemp would
        os.close(descriptor)
    assert path.stat().st_mode & 0o777 == 0o666 & ~real_umask()


def test_staged_folder_replaces_whole_or_not_at_all(tmp_path, umask_must_not_change):
    folder = tmp_path / "checkpoint"
    with staged_folder(folder) as staging:
        (staging / "a.txt").write_text("one")
        (staging / "b.txt").write_text("one")
    with pytest.raises(OSError, match="No space"), staged_folder(folder) as staging:
        (staging / "a.txt").write_text("two")
        raise OSError(28, "No space left on device")
    assert (folder / "a.txt").read_text() == "one" and (folder / "b.txt").read_text() == "one"
    with staged_folder(folder) as staging:
        (staging / "c.txt").write_text("three")
    assert [p.name for p in folder.iterdir()] == ["c.txt"]  # nothing of the old folder survives
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint"]  # no staging or retired folder left


def test_staged_folder_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / "model").write_text("a file")
    with pytest.raises(NotADirectoryError, match="is not a folder"), staged_folder(tmp_path / "model"):
        pass


def test_remove_leftovers_clears_only_crash_debris(tmp_path):
    (tmp_path / ".step-000004.1a2b3c4d.partial").mkdir()
    (tmp_path / ".summary.json.1a2b3c4d.tmp").write_text("{")
    (tmp_path / ".tmp-step-000002-123").mkdir()  # the layout before bertcore.files.atomic
    (tmp_path / ".hidden-but-ours").write_text("keep")
    (tmp_path / "step-000002").mkdir()
    removed = remove_leftovers(tmp_path)
    assert len(removed) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden-but-ours", "step-000002"]
