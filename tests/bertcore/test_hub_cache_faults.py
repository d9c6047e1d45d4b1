"""Faults round 3 (issue 34) in the Hugging Face cache as it is read: a ref must hold a commit hash naming a snapshot of
its own repo (a ref holding a path opened another model under the repo's name), a revision must be a ref name,
anything unreadable is a CheckpointError (never a raw PermissionError or UnicodeDecodeError), and the listing names
every repo it cannot open, with the reason, instead of hiding it.

Every test runs in its own cache (HF_HOME in tmp_path); `permissions_enforced` makes permission bits count although
the tests run as root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bertcore.errors import CacheEntryError, CheckpointError
from bertcore.models.hub import resolve_model
from bertcore.models.hub_listing import BrokenCacheEntry, list_cached_models, scan_cache
from tests.hub_fixtures import (
    COMMIT_A,
    COMMIT_B,
    cache_repo,
    hub_config,
    hub_env_fixture,  # noqa: F401 (a fixture: tests ask for it as `hub_env`)
    permissions_enforced,
    safetensors_bytes,
)

REPO = "org/tiny"
WEIGHTS = safetensors_bytes({"bert.embeddings.word_embeddings.weight": ((10, 8), "F32")})


@pytest.fixture(autouse=True)
def private_hub(hub_env: Path) -> Path:
    return hub_env


# ---- resolving a repo id: refs, snapshots, revisions, permissions ---------------------------------------------

def _two_repos(hub_env: Path) -> tuple[Path, Path]:
    tiny = cache_repo(hub_env, REPO, {"config.json": hub_config(), "model.safetensors": b"tiny"}, commit=COMMIT_A)
    other = cache_repo(hub_env, "org/other", {"config.json": hub_config(), "model.safetensors": b"other"},
                       commit=COMMIT_B)
    return tiny, other


@pytest.mark.parametrize("content", [f"../../models--org--other/snapshots/{COMMIT_B}",
                                     f"/abs/models--org--other/snapshots/{COMMIT_B}", "main", COMMIT_B[:39]])
def test_a_ref_holding_anything_but_a_commit_hash_opens_nothing(hub_env: Path, content: str):
    """refs/main holding a path opened org/other under org/tiny's name, while the picker listed org/tiny's own."""
    tiny, _ = _two_repos(hub_env)
    ref = tiny.parent.parent / "refs" / "main"
    ref.write_text(content)

    with pytest.raises(CheckpointError, match=rf"org/tiny's ref {ref} holds .* where a commit hash \(40 hex digits\) "
                                              "belongs"):
        resolve_model(REPO)
    [broken] = [entry for entry in scan_cache().broken if entry.name == REPO]
    assert broken.reason == "refs/main holds no commit hash"


def test_a_ref_with_git_s_line_end_names_its_snapshot(hub_env: Path):
    tiny, _ = _two_repos(hub_env)
    (tiny.parent.parent / "refs" / "main").write_text(COMMIT_A + "\n")
    assert resolve_model(REPO).folder == tiny


def test_a_binary_ref_is_a_clear_error(hub_env: Path):
    """It was a UnicodeDecodeError."""
    tiny, _ = _two_repos(hub_env)
    (tiny.parent.parent / "refs" / "main").write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(CheckpointError, match=r"org/tiny's ref .*refs/main is not text: it should hold a commit hash"):
        resolve_model(REPO)


def test_a_ref_naming_a_missing_snapshot_says_so(hub_env: Path):
    tiny, _ = _two_repos(hub_env)
    (tiny.parent.parent / "refs" / "main").write_text("c" * 40)
    with pytest.raises(CheckpointError, match=r"org/tiny's refs/main names the commit c{40}, which has no snapshot"):
        resolve_model(REPO)


def test_a_snapshot_that_links_into_another_repo_is_not_this_models(hub_env: Path):
    tiny, other = _two_repos(hub_env)
    shutil.rmtree(tiny)
    tiny.symlink_to(other)
    with pytest.raises(CheckpointError, match=rf"org/tiny's snapshot {tiny} is a link to {other}, outside org/tiny's "
                                              "own snapshots"):
        resolve_model(REPO)


@pytest.mark.parametrize("revision", ["../../models--org--other/refs/main", "/etc/hostname", "..", "a b"])
def test_a_revision_that_is_no_ref_name_reads_nothing_outside_the_repo(hub_env: Path, revision: str):
    _two_repos(hub_env)
    with pytest.raises(CheckpointError, match="is not a revision"):
        resolve_model(REPO, revision=revision)


@pytest.mark.parametrize("unreadable", ["cache", "repo folder", "refs/main", "snapshot"])
def test_an_unreadable_cache_is_a_clear_error(hub_env: Path, unreadable: str):
    """It was a raw PermissionError."""
    tiny, _ = _two_repos(hub_env)
    path = {"cache": hub_env, "repo folder": tiny.parent.parent, "refs/main": tiny.parent.parent / "refs" / "main",
            "snapshot": tiny}[unreadable]
    path.chmod(0)
    try:
        with permissions_enforced(), pytest.raises(CheckpointError, match="Permission denied") as caught:
            resolve_model(REPO)
    finally:
        path.chmod(0o755)
    assert not isinstance(caught.value, PermissionError)


def test_a_cache_reached_through_a_link_is_the_cache(hub_env: Path, tmp_path: Path):
    """A cache moved to another disk and linked back: huggingface_hub answers with the real path, which is the
    same snapshot (the containment check compared a resolved path with an unresolved one and refused it)."""
    snapshot = cache_repo(hub_env, REPO, {"config.json": hub_config(architectures=["BertForMaskedLM"]),
                                          "model.safetensors": WEIGHTS, "vocab.txt": b"[PAD]\n"})
    hub_env.rename(tmp_path / "other-disk")
    hub_env.symlink_to(tmp_path / "other-disk")
    assert resolve_model(REPO).folder == snapshot
    assert [(model.repo_id, model.folder) for model in list_cached_models()] == [(REPO, snapshot)]


@pytest.mark.slow
def test_an_hf_variable_huggingface_hub_cannot_read_is_named(hub_env: Path):
    """huggingface_hub reads HF_* variables when first imported; HF_HUB_ETAG_TIMEOUT=soon was a raw ValueError."""
    _two_repos(hub_env)
    code = ("from bertcore.models.hub import resolve_model\n"
            "try:\n    resolve_model('org/tiny')\nexcept Exception as error:\n"
            "    print(type(error).__name__, error)\n")
    environment = {**os.environ, "HF_HUB_ETAG_TIMEOUT": "soon"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=120)
    assert result.stdout.startswith("CheckpointError huggingface_hub cannot start: invalid literal for int()")
    assert "HF_HUB_DOWNLOAD_TIMEOUT and HF_HUB_ETAG_TIMEOUT are whole seconds" in result.stdout


# ---- the listing: every repo, openable or not -------------------------------------------------------------------

def _config(**fields: object) -> bytes:
    return hub_config(architectures=["BertForMaskedLM"], **fields)


def test_the_listing_names_every_repo_it_cannot_open_with_its_reason(hub_env: Path):
    """It left them out silently: a model the user had downloaded just was not there."""
    good = {"config.json": _config(), "model.safetensors": WEIGHTS, "vocab.txt": b"[PAD]\n"}
    cache_repo(hub_env, "org/good", good)
    cache_repo(hub_env, "org/gpt", {"config.json": hub_config("gpt2"), "model.safetensors": WEIGHTS})
    cache_repo(hub_env, "org/no-config", {"model.safetensors": WEIGHTS})
    cache_repo(hub_env, "org/bad-json", {"config.json": b"{not json", "model.safetensors": WEIGHTS})
    cache_repo(hub_env, "org/no-type", {"config.json": b"{}", "model.safetensors": WEIGHTS})
    cache_repo(hub_env, "org/no-weights", {"config.json": _config()})
    cache_repo(hub_env, "org/bad-header", {"config.json": _config(), "model.safetensors": b"\xff" * 8})
    dangling = cache_repo(hub_env, "org/dangling", {"config.json": _config(), "model.safetensors": b"gone"})
    (dangling / "model.safetensors").resolve().unlink()
    lost = cache_repo(hub_env, "org/lost-snapshot", good)
    (lost.parent.parent / "refs" / "main").write_text(COMMIT_B)
    path_ref = cache_repo(hub_env, "org/path-ref", good)
    (path_ref.parent.parent / "refs" / "main").write_text(f"../../models--org--good/snapshots/{COMMIT_A}")
    binary = cache_repo(hub_env, "org/binary-ref", good)
    (binary.parent.parent / "refs" / "main").write_bytes(b"\xff\xfe\x00")
    fifo = cache_repo(hub_env, "org/fifo-ref", good, ref=None)
    (fifo.parent.parent / "refs").mkdir()
    os.mkfifo(fifo.parent.parent / "refs" / "main")
    sharded = cache_repo(hub_env, "org/lost-shard", {"config.json": _config(), "model.safetensors.index.json":
                                                     json.dumps({"weight_map": {"a": "model-1.safetensors"}}).encode()})
    (hub_env / "models--org--empty").mkdir()
    (hub_env / "models--a--b--c").mkdir()
    (hub_env / "models--org--file").write_text("x")
    (hub_env / "datasets--org--data").mkdir()  # not a model repo: not listed at all
    (hub_env / ".locks").mkdir()

    listing = scan_cache()

    assert [model.repo_id for model in listing.models] == ["org/good"] and listing.problem is None
    assert {entry.name: entry.reason for entry in listing.broken} == {
        "org/gpt": "model_type 'gpt2' is not a BERT family",
        "org/no-config": "no config.json",
        "org/bad-json": "config.json is not valid JSON",
        "org/no-type": "config.json names no model_type",
        "org/no-weights": "no weights (model.safetensors or pytorch_model.bin)",
        "org/bad-header": "model.safetensors is damaged",
        "org/dangling": "model.safetensors is a broken link (its blob is missing)",
        "org/lost-snapshot": "refs/main names no snapshot",
        "org/path-ref": "refs/main holds no commit hash",
        "org/binary-ref": "refs/main is not text",
        "org/fifo-ref": "refs/main is a FIFO (named pipe)",
        "org/lost-shard": "model-1.safetensors is missing",
        "org/empty": "nothing downloaded (no snapshot)",
        "models--a--b--c": "not a repo folder",
        "org/file": "not a folder (a regular file)",
    }
    path_entry = next(entry for entry in listing.broken if entry.name == "org/path-ref")
    assert path_entry.folder == hub_env / "models--org--path-ref"
    assert "holds '../../models--org--good/snapshots/" in path_entry.detail and "40 hex digits" in path_entry.detail
    assert "Download from the Hub" in path_entry.detail
    assert sharded.exists() and [model.repo_id for model in list_cached_models()] == ["org/good"]


def test_a_repo_that_cannot_be_read_is_listed_as_unreadable(hub_env: Path):
    cache_repo(hub_env, "org/good", {"config.json": _config(), "model.safetensors": WEIGHTS, "vocab.txt": b"[PAD]\n"})
    locked = cache_repo(hub_env, "org/locked", {"config.json": _config(), "model.safetensors": WEIGHTS}).parent.parent
    locked.chmod(0)
    try:
        with permissions_enforced():
            listing = scan_cache()
    finally:
        locked.chmod(0o755)
    assert [model.repo_id for model in listing.models] == ["org/good"]
    [entry] = listing.broken
    assert (entry.name, entry.reason) == ("org/locked", "unreadable: permission denied")
    assert str(locked) in entry.detail and "check its permissions" in entry.detail


def test_an_unreadable_cache_is_said_not_taken_for_an_empty_one(hub_env: Path):
    cache_repo(hub_env, "org/good", {"config.json": _config(), "model.safetensors": WEIGHTS})
    hub_env.chmod(0)
    try:
        with permissions_enforced():
            listing = scan_cache()
            models = list_cached_models()
    finally:
        hub_env.chmod(0o755)
    assert (listing.models, listing.broken, models) == ([], [], [])
    assert listing.problem == (f"{hub_env} cannot be read (Permission denied); check its permissions, or set "
                               "HF_HUB_CACHE (or HF_HOME) to a cache you can read")


def test_a_missing_cache_is_an_empty_listing_without_a_problem(hub_env: Path):
    assert scan_cache() == scan_cache(hub_env) and scan_cache().problem is None and not hub_env.exists()


def test_a_model_that_cannot_be_opened_yet_says_why(hub_env: Path):
    cache_repo(hub_env, "org/no-tokenizer", {"config.json": _config(), "model.safetensors": WEIGHTS})
    cache_repo(hub_env, "org/good", {"config.json": _config(), "model.safetensors": WEIGHTS, "vocab.txt": b"[PAD]\n"})
    reasons = {model.repo_id: (model.supported_now, model.unsupported_reason) for model in list_cached_models()}
    assert reasons["org/good"] == (True, None)
    assert reasons["org/no-tokenizer"][0] is False
    assert reasons["org/no-tokenizer"][1].startswith("no tokenizer file this program reads (vocab.txt")


def test_the_reasons_are_cache_entry_errors_with_the_path_at_fault(hub_env: Path):
    snapshot = cache_repo(hub_env, REPO, {"config.json": _config(), "model.safetensors": WEIGHTS})
    ref = snapshot.parent.parent / "refs" / "main"
    ref.write_text("nonsense")
    with pytest.raises(CacheEntryError) as caught:
        resolve_model(REPO)
    assert (caught.value.reason, caught.value.path) == ("refs/main holds no commit hash", ref)
    [entry] = scan_cache().broken
    assert entry == BrokenCacheEntry(REPO, snapshot.parent.parent, caught.value.reason, str(caught.value),
                                     entry.last_used)
    shutil.rmtree(snapshot.parent.parent)


def test_a_dangling_extra_ref_or_an_unreadable_subfolder_does_not_break_a_model(hub_env: Path):
    snapshot = cache_repo(hub_env, REPO, {"config.json": _config(), "model.safetensors": WEIGHTS,
                                          "vocab.txt": b"[PAD]\n", "onnx/model.onnx": b"onnx"})
    (snapshot.parent.parent / "refs" / "v1.0").symlink_to(snapshot.parent.parent / "refs" / "gone")
    (snapshot / "onnx").chmod(0)
    try:
        with permissions_enforced():
            listing = scan_cache()
    finally:
        (snapshot / "onnx").chmod(0o755)
    assert [model.repo_id for model in listing.models] == [REPO] and listing.broken == []
