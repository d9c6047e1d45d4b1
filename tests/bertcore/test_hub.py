"""bertcore.models.hub: cache look-ups and listing on hand-built cache layouts, downloads from a fake Hub on 127.0.0.1.

Every test runs with HF_HOME / HF_HUB_CACHE in its own temporary folder and HF_ENDPOINT on a closed local port
unless it sets its own: nothing here reads the real ~/.cache or reaches the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertcore.errors import CheckpointError, DownloadCancelled
from bertcore.models.hub import ResolvedModel, default_cache_dir, looks_like_repo_id, resolve_model
from bertcore.models.hub_download import download_model
from bertcore.models.hub_listing import CachedModel, describe_head, list_cached_models
from tests.hub_fixtures import (
    COMMIT_A,
    COMMIT_B,
    HUB_COMMIT,
    cache_repo,
    closed_port,
    hub_config,
    hub_env_fixture,  # noqa: F401 (a fixture: tests ask for it as `hub_env`)
    safetensors_bytes,
    serve_fixture,  # noqa: F401 (a fixture: tests ask for it as `serve`)
)


@pytest.fixture(autouse=True)
def private_hub(hub_env: Path) -> Path:
    """Every test here runs in its own HF home and cache, with an endpoint that refuses connections."""
    return hub_env


TINY_SHAPES = {"bert.embeddings.word_embeddings.weight": ((10, 8), "F32"),
               "bert.embeddings.position_ids": ((1, 16), "I64"),  # a buffer, not a parameter
               "cls.predictions.bias": ((10,), "F16")}
TINY_PARAMETERS = 10 * 8 + 10


def test_a_cached_repo_id_resolves_to_the_snapshot_refs_main_names(hub_env: Path):
    cache_repo(hub_env, "org/tiny", {"config.json": hub_config(), "model.safetensors": b"old"}, commit=COMMIT_A,
                ref=None)
    newest = cache_repo(hub_env, "org/tiny", {"config.json": hub_config(), "model.safetensors": b"new"},
                         commit=COMMIT_B)

    resolved = resolve_model("org/tiny")

    assert resolved == ResolvedModel(folder=newest, repo_id="org/tiny", revision=COMMIT_B, display_name="org/tiny")
    assert resolve_model("org/tiny", revision=COMMIT_A).folder == hub_env / "models--org--tiny" / "snapshots" / COMMIT_A
    with pytest.raises(CheckpointError, match="no usable snapshot for 'v2'"):
        resolve_model("org/tiny", revision="v2")


def test_the_cache_is_found_from_the_environment_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere" / "hub"
    snapshot = cache_repo(tmp_path / "elsewhere" / "hub", "bert-tiny",
                           {"config.json": hub_config(), "model.safetensors": b"w"})
    assert resolve_model("bert-tiny").folder == snapshot
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"


def test_an_existing_folder_wins_over_a_cached_repo_of_that_name(hub_env: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    cache_repo(hub_env, "org/tiny", {"config.json": hub_config(), "model.safetensors": b"w"})
    (tmp_path / "work" / "org" / "tiny").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")

    resolved = resolve_model("org/tiny")

    assert resolved.folder.resolve() == (tmp_path / "work" / "org" / "tiny").resolve()
    assert (resolved.repo_id, resolved.revision, resolved.display_name) == (None, None, "tiny")


def test_a_snapshot_folder_opened_directly_is_named_by_its_repo_id_not_its_hash(hub_env: Path):
    snapshot = cache_repo(hub_env, "google-bert/bert-base-uncased",
                           {"config.json": hub_config(), "model.safetensors": b"w"})

    by_snapshot = resolve_model(str(snapshot))
    by_repo_folder = resolve_model(snapshot.parent.parent)  # a file dialog may pick models--org--name itself

    assert by_snapshot == ResolvedModel(folder=snapshot, repo_id="google-bert/bert-base-uncased", revision=COMMIT_A,
                                        display_name="google-bert/bert-base-uncased")
    assert by_repo_folder == by_snapshot


def test_a_repo_id_not_in_the_cache_is_an_error_naming_it_and_how_to_get_it(hub_env: Path):
    with pytest.raises(CheckpointError) as caught:
        resolve_model("org/absent")
    message = str(caught.value)
    assert "org/absent" in message and str(hub_env) in message
    assert "Download from the Hub" in message and "hf download org/absent" in message


def test_a_repo_cached_without_weights_says_only_part_was_downloaded(hub_env: Path):
    cache_repo(hub_env, "org/tokenizer-only", {"config.json": hub_config(), "vocab.txt": b"[PAD]\n"})
    with pytest.raises(CheckpointError, match=r"org/tokenizer-only is in the Hugging Face cache .* without weights"):
        resolve_model("org/tokenizer-only")


@pytest.mark.parametrize("path", ["./nothing/here", "/no/such/folder", "a/b/c", "x--y", "bad name"])
def test_a_missing_path_that_is_no_repo_id_is_an_error_naming_the_path(path: str):
    with pytest.raises(CheckpointError, match="does not exist") as caught:
        resolve_model(path)
    assert str(Path(path)) in str(caught.value)


# --- revisions, as huggingface_hub resolves them from the cache -----------------------------------------------

COMMIT_C = "c0ffee" + "0" * 34
COMMIT_C_TWIN = "c0ffee0" + "1" * 33  # shares C's first 7 characters: "c0ffee0" alone names neither


def _weights(tag: bytes) -> dict[str, bytes]:
    return {"config.json": hub_config(), "model.safetensors": tag}


def test_a_tag_a_branch_a_pull_request_and_commits_full_or_short_name_their_own_snapshots(hub_env: Path):
    tagged = cache_repo(hub_env, "org/tiny", _weights(b"v1"), commit=COMMIT_A, ref="v1.0")
    main = cache_repo(hub_env, "org/tiny", _weights(b"main"), commit=COMMIT_B)
    pull = cache_repo(hub_env, "org/tiny", _weights(b"pr"), commit=COMMIT_C, ref=None)
    refs = hub_env / "models--org--tiny" / "refs"
    (refs / "refs" / "pr").mkdir(parents=True)
    (refs / "refs" / "pr" / "1").write_text(COMMIT_C)  # where huggingface_hub keeps revision="refs/pr/1"

    assert resolve_model("org/tiny").folder == main
    assert resolve_model("org/tiny", revision="v1.0") == ResolvedModel(
        folder=tagged, repo_id="org/tiny", revision=COMMIT_A, display_name="org/tiny")
    assert resolve_model("org/tiny", revision="refs/pr/1").folder == pull
    assert resolve_model("org/tiny", revision=COMMIT_C).folder == pull
    assert resolve_model("org/tiny", revision=COMMIT_C[:7]).folder == pull
    assert resolve_model("org/tiny", revision="bbbbbbbbbbbb").folder == main
    with pytest.raises(CheckpointError, match="no usable snapshot for 'refs/pr/2'"):
        resolve_model("org/tiny", revision="refs/pr/2")


def test_a_short_commit_two_snapshots_start_with_is_an_error_naming_both(hub_env: Path):
    cache_repo(hub_env, "org/tiny", _weights(b"c"), commit=COMMIT_C)
    cache_repo(hub_env, "org/tiny", _weights(b"twin"), commit=COMMIT_C_TWIN, ref=None)
    with pytest.raises(CheckpointError, match="'c0ffee0' of org/tiny is ambiguous") as caught:
        resolve_model("org/tiny", revision="c0ffee0")
    assert COMMIT_C in str(caught.value) and COMMIT_C_TWIN in str(caught.value)
    assert resolve_model("org/tiny", revision="c0ffee01").folder.name == COMMIT_C_TWIN


def test_a_partial_download_is_resolved_when_it_has_what_the_loader_needs(hub_env: Path):
    """`hf download org/tiny --include …` leaves huggingface_hub's listing of every file in the repo (trees/): a
    snapshot without the README is still the model; one without config.json is named as partly downloaded."""
    tree_cache = pytest.importorskip("huggingface_hub._tree_cache")
    listed = {name: tree_cache.TreeCacheEntry(size=1, blob_id="0" * 40)
              for name in ("config.json", "model.safetensors", "README.md", "pytorch_model.bin")}
    snapshot = cache_repo(hub_env, "org/tiny", _weights(b"w"), commit=COMMIT_A)
    tree_cache.write_tree_cache(str(hub_env / "models--org--tiny"), COMMIT_A, listed)
    assert resolve_model("org/tiny").folder == snapshot

    cache_repo(hub_env, "org/no-config", {"model.safetensors": b"w"}, commit=COMMIT_B)
    tree_cache.write_tree_cache(str(hub_env / "models--org--no-config"), COMMIT_B, listed)
    with pytest.raises(CheckpointError, match=r"org/no-config is in the Hugging Face cache .* lacks the config.json "
                                              r"the Hub listed for it: only part was downloaded; download it again"):
        resolve_model("org/no-config")


@pytest.mark.parametrize("where", ["refs/main", "trees/" + COMMIT_A + ".json"])
def test_a_fifo_in_the_cache_is_refused_not_waited_on(hub_env: Path, where: str):
    """huggingface_hub opens refs and its cached listings with a blocking open(): a FIFO would hang the window."""
    import threading

    cache_repo(hub_env, "org/tiny", _weights(b"w"), commit=COMMIT_A, ref=None)
    fifo = hub_env / "models--org--tiny" / where
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def resolve() -> None:
        try:
            resolve_model("org/tiny")
        except BaseException as error:  # handed to the test's thread to assert on
            outcome.append(error)

    worker = threading.Thread(target=resolve, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():
        with open(fifo, "wb"):  # lets the blocked reader go before the test fails
            pass
        pytest.fail(f"resolving org/tiny waited on the FIFO at {where}")
    [error] = outcome
    assert isinstance(error, CheckpointError) and "not a file" in str(error) and str(fifo.name) in str(error)


@pytest.mark.parametrize("environment", [
    {"HF_HUB_CACHE": "{tmp}/explicit"},
    {"HF_HOME": "{tmp}/home"},
    {"XDG_CACHE_HOME": "{tmp}/xdg"},
    {"HF_HOME": "{tmp}/home", "HF_HUB_CACHE": "{tmp}/wins"},
    {"HUGGINGFACE_HUB_CACHE": "{tmp}/legacy"},
])
def test_the_cache_folder_is_the_one_huggingface_hub_computes(environment: dict, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    """huggingface_hub computes its cache folder once, at import; ours is read at each call and must agree."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert default_cache_dir() == Path(theirs)


def test_load_pretrained_opens_a_cached_repo_by_its_id(hub_env: Path, tmp_path: Path, small_vocab_tokenizer):
    import torch

    import bertcore
    from tests.tiny_configs import two_layer_bert

    torch.manual_seed(0)
    model = bertcore.BertForMaskedLM(two_layer_bert(small_vocab_tokenizer.vocab_size)).eval()
    saved = bertcore.save_pretrained(model, small_vocab_tokenizer, tmp_path / "saved")
    cache_repo(hub_env, "org/tiny-mlm", {path.name: path.read_bytes() for path in saved.iterdir() if path.is_file()},
               commit=COMMIT_B)

    loaded, tokenizer = bertcore.load_pretrained("org/tiny-mlm")

    ids = torch.tensor(tokenizer.encode_ids(["the cat sat"]))
    assert torch.equal(loaded(ids).logits, model(ids).logits)
    with pytest.raises(CheckpointError, match="org/absent is not in the Hugging Face cache"):
        bertcore.load_pretrained("org/absent")


def test_repo_ids_are_told_from_paths():
    assert all(map(looks_like_repo_id, ["bert-base-uncased", "google-bert/bert-base-uncased", "a.b/c_d-1"]))
    assert not any(map(looks_like_repo_id, ["/abs", "./rel", "a/b/c", "-x", "x.", "a--b", "a..b", "", "a/"]))


def test_listing_describes_each_supported_repo_and_leaves_out_the_rest(hub_env: Path):
    shared_vocab = b"[PAD]\n[UNK]\nthe\n"
    mlm = cache_repo(hub_env, "org/tiny-mlm", {
        "config.json": hub_config(architectures=["BertForMaskedLM"]),
        "model.safetensors": safetensors_bytes(TINY_SHAPES),
        "vocab.txt": shared_vocab, "copy/vocab.txt": shared_vocab})  # one blob, linked twice: counted once
    cache_repo(hub_env, "org/sentiment", {
        "config.json": hub_config("roberta", ["RobertaForSequenceClassification"],
                               id2label={"0": "neg", "1": "neu", "2": "pos"}),
        "model.safetensors.index.json": json.dumps({"weight_map": {"a": "model-1.safetensors",
                                                                   "b": "model-2.safetensors"}}).encode(),
        "model-1.safetensors": safetensors_bytes({"a": ((3, 4), "F32")}),
        "model-2.safetensors": safetensors_bytes({"b": ((5,), "BF16")})})
    cache_repo(hub_env, "org/old-bin", {"config.json": hub_config(architectures=["BertForPreTraining"]),
                                         "pytorch_model.bin": bytes(4000)})
    cache_repo(hub_env, "org/gpt", {"config.json": hub_config("gpt2"), "model.safetensors": b"w"})  # another family
    cache_repo(hub_env, "org/no-config", {"model.safetensors": b"w"})
    cache_repo(hub_env, "org/bad-json", {"config.json": b"{not json", "model.safetensors": b"w"})
    cache_repo(hub_env, "org/no-weights", {"config.json": hub_config()})
    cache_repo(hub_env, "org/bad-header", {"config.json": hub_config(), "model.safetensors": b"\xff" * 8})
    dangling = cache_repo(hub_env, "org/dangling", {"config.json": hub_config(), "model.safetensors": b"gone"})
    (dangling / "model.safetensors").resolve().unlink()
    lost = cache_repo(hub_env, "org/lost-snapshot", {"config.json": hub_config(), "model.safetensors": b"w"})
    (lost.parent.parent / "refs" / "main").write_text(COMMIT_B)
    (hub_env / "models--not-a-repo").mkdir()
    (hub_env / "datasets--org--data").mkdir()

    models = {model.repo_id: model for model in list_cached_models()}

    assert set(models) == {"org/tiny-mlm", "org/sentiment", "org/old-bin"}
    tiny = models["org/tiny-mlm"]
    assert tiny == CachedModel(
        repo_id="org/tiny-mlm", folder=mlm, revision=COMMIT_A, model_type="bert", supported_now=True,
        size_bytes=sum(len(content) for content in (hub_config(architectures=["BertForMaskedLM"]),
                                                     safetensors_bytes(TINY_SHAPES), shared_vocab)),
        parameters=TINY_PARAMETERS, parameters_estimated=False, num_layers=2, num_heads=4, head="MLM",
        last_used=tiny.last_used)
    sentiment = models["org/sentiment"]
    assert (sentiment.parameters, sentiment.supported_now) == (3 * 4 + 5, False)
    assert sentiment.head == "sequence classification: 3 labels (neg, neu, pos)"
    old = models["org/old-bin"]
    assert (old.parameters, old.parameters_estimated, old.head) == (1000, True, "pretraining (MLM + NSP)")
    assert old.describe().startswith("~1.0K parameters · 2 layers × 4 heads · pretraining (MLM + NSP) · ")


def test_last_used_is_the_newest_access_and_listing_does_not_touch_it(hub_env: Path):
    snapshot = cache_repo(hub_env, "org/tiny", {"config.json": hub_config(),
                                                 "model.safetensors": safetensors_bytes(TINY_SHAPES)})
    day = 86400.0
    modified = 1_700_000_000.0
    for name, accessed in (("config.json", modified + 2 * day), ("model.safetensors", modified + 5 * day)):
        os.utime(snapshot / name, (accessed, modified))
    os.utime(hub_env / "models--org--tiny" / "refs" / "main", (modified, modified))

    first = list_cached_models()
    second = list_cached_models()

    assert first[0].last_used == second[0].last_used == modified + 5 * day
    assert os.stat(snapshot / "config.json").st_atime == modified + 2 * day


def test_listing_orders_by_last_use_and_copes_with_no_cache(hub_env: Path):
    assert list_cached_models() == []  # the cache folder does not exist yet
    for index, repo_id in enumerate(["org/older", "org/newer"]):
        snapshot = cache_repo(hub_env, repo_id, {"config.json": hub_config(),
                                                  "model.safetensors": safetensors_bytes(TINY_SHAPES)})
        for name in ("config.json", "model.safetensors"):
            os.utime(snapshot / name, (1e9 + index, 1e9 + index))
        os.utime(snapshot.parent.parent / "refs" / "main", (1e9, 1e9))
    assert [model.repo_id for model in list_cached_models()] == ["org/newer", "org/older"]


@pytest.mark.parametrize("config, head", [
    ({"architectures": ["BertForPreTraining"]}, "pretraining (MLM + NSP)"),
    ({"architectures": ["AlbertForPreTraining"]}, "pretraining (MLM + SOP)"),
    ({"architectures": ["BertModel"]}, "encoder only"),
    ({"architectures": ["XLMRobertaForMaskedLM"]}, "MLM"),
    ({"architectures": ["BertForTokenClassification"], "id2label": {"1": "B-PER", "0": "O"}},
     "token classification: 2 labels (O, B-PER)"),
    ({"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0", "1": "LABEL_1"}},
     "sequence classification: 2 labels"),
    ({"architectures": ["BertForSequenceClassification"], "id2label": {str(i): f"c{i}" for i in range(8)}},
     "sequence classification: 8 labels (c0, c1, c2, c3, c4, c5, … 2 more)"),
    ({"architectures": ["BertForQuestionAnswering"]}, "extractive question answering (span start/end)"),
    ({}, "encoder (config.json names no architecture)"),
])
def test_the_head_is_described_from_architectures_and_labels(config: dict, head: str):
    assert describe_head(config) == head


def test_importing_hub_imports_neither_torch_nor_huggingface_hub():
    code = ("import sys, bertcore.models.hub, bertcore.models.hub_listing; "
            "print(sorted({'torch', 'huggingface_hub'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --- downloads from a fake Hub on 127.0.0.1 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, transformers) -> dict[str, bytes]:
    """A BertForMaskedLM saved by transformers (2 layers, 4 heads), with a matching vocab.txt: the files of a repo."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"word{i}" for i in range(94))]
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(config)
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    files["parameters"] = str(model.num_parameters()).encode()  # not a repo file: the count to expect
    return files


def _repo(checkpoint: dict[str, bytes], **extra: bytes) -> dict[str, bytes]:
    files = {name: content for name, content in checkpoint.items() if name != "parameters"}
    files.update(extra)
    return files


@pytest.mark.slow
def test_a_download_is_found_by_repo_id_with_the_network_off(serve, tiny_checkpoint, hub_env: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    repo = _repo(tiny_checkpoint, **{"pytorch_model.bin": b"not wanted: safetensors exist",
                                     "flax_model.msgpack": b"not wanted", "README.md": b"# tiny"})
    hub = serve({"org/tiny-bert": repo})
    reports: list[tuple[int, int, str]] = []

    resolved = download_model("org/tiny-bert", progress=lambda *report: reports.append(report))

    snapshot = hub_env / "models--org--tiny-bert" / "snapshots" / HUB_COMMIT
    assert resolved == ResolvedModel(folder=snapshot, repo_id="org/tiny-bert", revision=HUB_COMMIT,
                                     display_name="org/tiny-bert")
    fetched = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}
    assert set(os.listdir(snapshot)) == fetched
    assert all((snapshot / name).read_bytes() == repo[name] for name in fetched)
    assert (hub_env / "models--org--tiny-bert" / "refs" / "main").read_text() == HUB_COMMIT
    total = sum(len(repo[name]) for name in fetched)
    assert reports[-1] == (total, total, "tokenizer_config.json")
    assert [done for done, _, _ in reports] == sorted(done for done, _, _ in reports)
    assert {name for _, _, name in reports} == fetched
    assert not any("msgpack" in path or "pytorch_model" in path for _, path in hub.requests)

    hub_requests = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert resolve_model("org/tiny-bert") == resolved
    [listed] = list_cached_models()
    assert (listed.repo_id, listed.parameters, listed.head) == ("org/tiny-bert",
                                                                int(tiny_checkpoint["parameters"]), "MLM")
    assert len(hub.requests) == hub_requests


@pytest.mark.slow
def test_pytorch_weights_are_fetched_only_when_the_repo_has_no_safetensors(serve, tiny_checkpoint):
    repo = _repo(tiny_checkpoint, **{"pytorch_model.bin": b"\x00" * 400})
    del repo["model.safetensors"]
    serve({"org/old": repo})

    resolved = download_model("org/old")

    assert (resolved.folder / "pytorch_model.bin").read_bytes() == b"\x00" * 400
    assert "model.safetensors" not in os.listdir(resolved.folder)


@pytest.mark.slow
def test_a_sharded_checkpoint_brings_its_shards_and_they_are_counted(serve, tiny_checkpoint, hub_env: Path):
    header = safetensors_bytes
    repo = _repo(tiny_checkpoint)
    del repo["model.safetensors"]
    repo["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    repo["model-00001-of-00002.safetensors"] = header({"a": ((6, 7), "F32")})
    repo["model-00002-of-00002.safetensors"] = header({"b": ((5,), "F32")})
    repo["model-00003-of-00003.safetensors"] = b"a stale shard no index names"
    serve({"org/sharded": repo})
    reports: list[tuple[int, int, str]] = []

    resolved = download_model("org/sharded", progress=lambda *report: reports.append(report))

    shards = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    assert shards <= set(os.listdir(resolved.folder))
    assert "model-00003-of-00003.safetensors" not in os.listdir(resolved.folder)
    fetched = shards | {"config.json", "model.safetensors.index.json", "vocab.txt", "tokenizer_config.json"}
    assert reports[-1][:2] == (sum(len(repo[name]) for name in fetched),) * 2
    [listed] = list_cached_models(hub_env)
    assert listed.parameters == 6 * 7 + 5


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["inside the weights", "after the config"])
def test_cancelling_leaves_nothing_of_the_download_in_the_cache(serve, tiny_checkpoint, hub_env: Path,
                                                               monkeypatch: pytest.MonkeyPatch, stop_at: str):
    from bertcore.models import hub_download

    monkeypatch.setattr(hub_download, "_READ_BYTES", 1024)  # the weights arrive in many reads,
    monkeypatch.setattr(hub_download, "_PROGRESS_BYTES", 1024)  # each of them reported
    hub = serve({"org/tiny-bert": _repo(tiny_checkpoint)})
    reports: list[tuple[int, int, str]] = []

    def cancel() -> bool:
        if stop_at == "inside the weights":
            weights = [done for done, _, name in reports if name == "model.safetensors"]
            return len(weights) >= 3  # a few reads of it written, many to come
        return any(name == "config.json" for _, _, name in reports) and reports[-1][0] > 0

    with pytest.raises(DownloadCancelled, match="org/tiny-bert") as caught:
        download_model("org/tiny-bert", progress=lambda *report: reports.append(report), cancel=cancel)

    assert caught.value.repo_id == "org/tiny-bert"
    storage = hub_env / "models--org--tiny-bert"
    left = sorted(str(path.relative_to(hub_env)) for path in storage.rglob("*")) if storage.exists() else []
    assert left == []
    assert not [path for path in hub_env.rglob("*") if path.name.endswith(".incomplete")]
    if stop_at == "inside the weights":
        weights_gets = [path for method, path in hub.requests if method == "GET" and "model.safetensors" in path]
        weights_done = [done for done, _, name in reports if name == "model.safetensors"]
        weights_size = len(tiny_checkpoint["model.safetensors"])
        assert weights_gets and weights_done[-1] - weights_done[0] < weights_size  # stopped part-way through it
    with pytest.raises(CheckpointError, match="not in the Hugging Face cache"):
        resolve_model("org/tiny-bert")
    assert download_model("org/tiny-bert").folder == storage / "snapshots" / HUB_COMMIT  # and it can start over


@pytest.mark.slow
def test_a_failed_file_leaves_no_snapshot_and_a_retry_fetches_only_the_rest(serve, tiny_checkpoint, hub_env: Path):
    hub = serve({"org/tiny-bert": _repo(tiny_checkpoint)}, failing_files={"vocab.txt"})

    with pytest.raises(CheckpointError, match=r"answered 500 while downloading org/tiny-bert; try again later"):
        download_model("org/tiny-bert")

    storage = hub_env / "models--org--tiny-bert"
    assert not (storage / "snapshots").exists() and not (storage / "refs").exists()
    hub.failing_files.clear()
    hub.requests.clear()
    download_model("org/tiny-bert")
    assert [path for method, path in hub.requests if method == "GET" and "/resolve/" in path] == [
        f"/org/tiny-bert/resolve/{HUB_COMMIT}/{name}" for name in ("vocab.txt", "tokenizer_config.json")]


def test_an_unreachable_endpoint_says_to_check_the_connection_or_open_a_copied_folder():
    with pytest.raises(CheckpointError) as caught:
        download_model("org/tiny-bert")
    message = str(caught.value)
    assert message.startswith(f"cannot reach {os.environ['HF_ENDPOINT']} to download org/tiny-bert")
    assert "HF_ENDPOINT" in message and "open the folder" in message


@pytest.mark.slow
def test_offline_mode_refuses_before_any_request(serve, tiny_checkpoint, monkeypatch: pytest.MonkeyPatch):
    hub = serve({"org/tiny-bert": _repo(tiny_checkpoint)})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match=r"offline mode is on \(HF_HUB_OFFLINE .*open the folder"):
        download_model("org/tiny-bert")
    assert hub.requests == []


@pytest.mark.slow
def test_a_missing_repo_is_named(serve):
    serve({})
    with pytest.raises(CheckpointError, match=r"there is no model org/missing on http://127\.0\.0\.1:\d+ \(404\)"):
        download_model("org/missing")


@pytest.mark.slow
def test_a_private_repo_says_a_token_is_needed_and_hf_token_is_read_at_call_time(serve, tiny_checkpoint,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    hub = serve({"org/private": _repo(tiny_checkpoint)}, token="hf_secret")
    with pytest.raises(CheckpointError, match=r"org/private without a token \(401\).*set HF_TOKEN"):
        download_model("org/private")
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(CheckpointError, match=r"refused the token sent for org/private \(401\)"):
        download_model("org/private")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert download_model("org/private").repo_id == "org/private"
    hub.token = None


@pytest.mark.slow
def test_a_forbidden_repo_says_the_token_needs_read_access(serve, tiny_checkpoint):
    serve({"org/gated": _repo(tiny_checkpoint)}, forbidden=True)
    with pytest.raises(CheckpointError, match=r"forbids reading org/gated with this token \(403\).*HF_TOKEN"):
        download_model("org/gated", token="hf_some")


@pytest.mark.slow
def test_a_repo_without_pytorch_weights_is_refused_before_downloading(serve):
    hub = serve({"org/tf-only": {"config.json": hub_config(), "tf_model.h5": b"h5", "vocab.txt": b"[PAD]\n"}})
    with pytest.raises(CheckpointError, match="org/tf-only has no weights in PyTorch form"):
        download_model("org/tf-only")
    assert [method for method, _ in hub.requests] == ["GET"]  # the listing only


def test_a_repo_is_loadable_now_only_with_a_tokenizer_the_loader_reads(hub_env: Path):
    """WordPiece, byte-level BPE (tokenizer.json or vocab.json + merges.txt), Unigram and a SentencePiece model file
    alone are read; a repo with no tokenizer at all is listed but not loadable."""
    weights = safetensors_bytes(TINY_SHAPES)
    wordpiece_json = json.dumps({"model": {"type": "WordPiece", "vocab": {"[PAD]": 0}}}).encode()
    bpe_json = json.dumps({"model": {"type": "BPE", "vocab": {"<pad>": 0}, "merges": []}}).encode()
    cache_repo(hub_env, "org/vocab-txt", {"config.json": hub_config(architectures=["BertForMaskedLM"]),
                                          "model.safetensors": weights, "vocab.txt": b"[PAD]\n"})
    cache_repo(hub_env, "org/wordpiece-json", {"config.json": hub_config(architectures=["BertForMaskedLM"]),
                                               "model.safetensors": weights, "tokenizer.json": wordpiece_json})
    cache_repo(hub_env, "org/roberta-bpe", {"config.json": hub_config("roberta", ["RobertaForMaskedLM"]),
                                            "model.safetensors": weights, "tokenizer.json": bpe_json,
                                            "vocab.json": b"{}", "merges.txt": b""})
    cache_repo(hub_env, "org/roberta-files", {"config.json": hub_config("roberta", ["RobertaForMaskedLM"]),
                                              "model.safetensors": weights, "vocab.json": b"{}", "merges.txt": b""})
    cache_repo(hub_env, "org/albert-spiece", {"config.json": hub_config("albert", ["AlbertForMaskedLM"]),
                                              "model.safetensors": weights, "spiece.model": b"\n"})
    cache_repo(hub_env, "org/no-tokenizer", {"config.json": hub_config(architectures=["BertForMaskedLM"]),
                                             "model.safetensors": weights})

    loadable = {model.repo_id: model.supported_now for model in list_cached_models()}

    assert loadable == {"org/vocab-txt": True, "org/wordpiece-json": True, "org/roberta-bpe": True,
                        "org/roberta-files": True, "org/albert-spiece": True, "org/no-tokenizer": False}
