"""The models the Hugging Face cache holds, for the model picker: each repo described from its config.json and the
headers of its weights (parameters, layers × heads, head, size, last use), no tensor loaded and no file waited on.
A repo that cannot be opened is listed too, with the reason in a few words ("no config.json", "refs/main names no
snapshot", "model_type 'gpt2' is not a BERT family", "unreadable: permission denied"): a model the user downloaded
never just vanishes from the list. Finding the cache and a repo's snapshot is bertcore.models.hub's.

    listing = scan_cache()                 # CacheListing: models, broken entries, and why the cache could not be read
    models = list_cached_models()          # the models alone
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bertcore.errors import CacheEntryError
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.files.reading import file_kind, parse_json
from bertcore.models.families import supported_model_types
from bertcore.models.hub import (
    DOWNLOAD_HINT,
    PYTORCH_INDEX_FILE,
    SAFETENSORS_INDEX_FILE,
    default_cache_dir,
    loader_supports,
    open_without_touching,
    read_bytes,
    read_ref,
    repo_id_of_storage,
    shard_files,
    snapshot_folder,
    snapshot_for,
    unreadable_reason,
)

_SAFETENSORS_HEADER_LIMIT = 100 * 1024 * 1024  # real headers are kilobytes; a larger length field is corruption
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}  # parameters; I64 position_ids are buffers
_LABELS_SHOWN = 6


@dataclass(frozen=True)
class CachedModel:
    """One cached model repo, described from its config.json and the headers of its weights (nothing loaded)."""

    repo_id: str
    folder: Path  # the snapshot refs/main points to (else the newest snapshot)
    revision: str  # its commit hash
    model_type: str
    supported_now: bool  # whether bertcore.load_pretrained opens it today: its family and its tokenizer
    size_bytes: int  # the blobs this snapshot links to, each counted once
    parameters: int | None  # None when the weights' headers could not be read
    parameters_estimated: bool  # True for pytorch_model.bin: file size / 4, as if every tensor were float32
    num_layers: int | None
    num_heads: int | None
    head: str  # "MLM", "pretraining (MLM + NSP)", "sequence classification: 3 labels (neg, neu, pos)", …
    last_used: float  # seconds since the epoch: the newest access time of the snapshot's files, or refs' mtime
    unsupported_reason: str | None = None  # why it cannot be opened today ("no tokenizer file …"), if not supported_now

    def describe(self) -> str:
        """One line for a list: '110.1M parameters · 12 layers × 12 heads · MLM · 420 MB'."""
        parts = []
        if self.parameters is not None:
            parts.append(f"{'~' if self.parameters_estimated else ''}{_count(self.parameters)} parameters")
        if self.num_layers is not None and self.num_heads is not None:
            parts.append(f"{self.num_layers} layers × {self.num_heads} heads")
        parts.append(self.head)
        parts.append(_megabytes(self.size_bytes))
        if not self.supported_now:
            parts.append(f"{self.model_type}: not loadable yet")
        return " · ".join(parts)


@dataclass(frozen=True)
class BrokenCacheEntry:
    """A repo folder of the cache (models--org--name) that cannot be opened, and why."""

    name: str  # the repo id its folder's name spells, else the folder's name
    folder: Path  # the models--org--name folder
    reason: str  # a few words for a list: "no config.json", "refs/main names no snapshot", …
    detail: str  # the whole story: what is wrong, where, and what to do
    last_used: float  # the folder's modification time (seconds since the epoch), 0 when it cannot be read


@dataclass(frozen=True)
class CacheListing:
    """What the cache at `cache` holds: the models that can be described, newest-used first, the repo folders that
    cannot be opened (with their reasons), and why the cache itself could not be read (None when it could)."""

    cache: Path
    models: list[CachedModel]
    broken: list[BrokenCacheEntry]
    problem: str | None = None


def list_cached_models(cache_dir: str | Path | None = None) -> list[CachedModel]:
    """Every cached model repo whose config.json names a family of bertcore.models.families and which has weights,
    newest-used first. Reads config.json and the weights' headers only (no tensor is loaded) and never raises;
    the repos it leaves out, with their reasons, are in scan_cache(cache_dir).broken."""
    return scan_cache(cache_dir).models


def scan_cache(cache_dir: str | Path | None = None) -> CacheListing:
    """The models of the cache and the repo folders that cannot be opened (each with its reason), newest first.
    Never raises: a cache that cannot be read is said in `problem`; a folder that is not a model repo (datasets--…,
    spaces--…, .locks) is not listed."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        entries = [Path(entry.path) for entry in os.scandir(cache) if entry.name.startswith("models--")]
    except FileNotFoundError:
        return CacheListing(cache, [], [])
    except NotADirectoryError:
        return CacheListing(cache, [], [], f"{cache} is a file, not a folder; set HF_HUB_CACHE (or HF_HOME) to the "
                                           "folder of your Hugging Face cache")
    except OSError as error:
        return CacheListing(cache, [], [], f"{cache} cannot be read ({error.strerror}); check its permissions, or "
                                           "set HF_HUB_CACHE (or HF_HOME) to a cache you can read")
    models: list[CachedModel] = []
    broken: list[BrokenCacheEntry] = []
    for storage in entries:
        examined = _examine(storage)
        (models if isinstance(examined, CachedModel) else broken).append(examined)
    models.sort(key=lambda model: (-model.last_used, model.repo_id))
    broken.sort(key=lambda entry: (-entry.last_used, entry.name))
    return CacheListing(cache, models, broken)


def _examine(storage: Path) -> CachedModel | BrokenCacheEntry:
    repo_id = repo_id_of_storage(storage.name)

    def broken(reason: str, detail: str) -> BrokenCacheEntry:
        try:
            last_used = os.lstat(storage).st_mtime
        except OSError:
            last_used = 0.0
        return BrokenCacheEntry(repo_id or storage.name, storage, reason, detail, last_used)

    if repo_id is None:
        return broken("not a repo folder", f"{storage} is not named as a download names a model's folder "
                                           "(models--org--name); it was made by hand or by another program")
    try:
        return _describe_repo(storage, repo_id)
    except CacheEntryError as error:
        return broken(error.reason, str(error))
    except OSError as error:  # a folder or file on the way that cannot be read
        where = error.filename or storage
        return broken(unreadable_reason(error), f"{where} cannot be read ({error.strerror}); check its permissions")
    except (ValueError, TypeError, KeyError, AttributeError, struct.error, RecursionError) as error:
        # a repo another program is writing, or one damaged by hand
        return broken("damaged", f"{repo_id} in {storage} is damaged ({_first_line(error)}); download it again with "
                                 f"{DOWNLOAD_HINT.format(repo_id=repo_id)}")


def _describe_repo(storage: Path, repo_id: str) -> CachedModel:
    download = DOWNLOAD_HINT.format(repo_id=repo_id)

    def fault(reason: str, detail: str, path: Path) -> CacheEntryError:
        return CacheEntryError(f"{detail}; download {repo_id} again with {download}", reason=reason, path=path)

    status = os.stat(storage)
    if not stat.S_ISDIR(status.st_mode):
        raise CacheEntryError(f"{storage} is {file_kind(status.st_mode)} where the folder of {repo_id} belongs; it "
                              "is not a download: remove it", reason=f"not a folder ({file_kind(status.st_mode)})",
                              path=storage)
    commit = read_ref(storage, "main", repo_id)
    if commit is not None:
        snapshot = snapshot_folder(storage, commit, repo_id, "refs/main")
    else:
        found = snapshot_for(storage, "main")
        if found is None:
            raise fault("nothing downloaded (no snapshot)", f"{storage} holds no snapshot", storage / "snapshots")
        snapshot = found
    config_path = snapshot / CONFIG_FILE
    _check_file(config_path, repo_id, fault, missing=f"no {CONFIG_FILE}")
    try:
        config = parse_json(read_bytes(config_path, limit=1024 * 1024), config_path)
    except ValueError as error:
        raise fault(f"{CONFIG_FILE} is not valid JSON", str(error), config_path) from None
    if not isinstance(config, dict):
        raise fault(f"{CONFIG_FILE} is not a JSON object", f"{config_path} holds no settings object", config_path)
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise fault(f"{CONFIG_FILE} names no model_type", f"{config_path} has no model_type", config_path)
    if model_type not in supported_model_types():
        raise CacheEntryError(f"{repo_id} is a {model_type!r} model, not one of the BERT family this program opens "
                              f"({', '.join(supported_model_types())})", reason=f"model_type {model_type!r} is not a "
                              "BERT family", path=config_path)
    weights = _weights(snapshot, repo_id, fault)
    try:
        parameters, estimated = _count_parameters(weights)
    except FileNotFoundError as error:
        name = Path(error.filename or "").name or "a shard"
        raise fault(f"{name} is missing", f"{weights.name} names {name}, which is not in {snapshot}",
                    weights) from None
    except (ValueError, TypeError, KeyError, AttributeError, struct.error, RecursionError) as error:
        raise fault(f"{weights.name} is damaged", f"{weights} cannot be read as weights ({_first_line(error)})",
                    weights) from None
    size_bytes, last_used = _snapshot_usage(snapshot)
    for ref in (storage / "refs").glob("*"):
        with contextlib.suppress(OSError):  # another ref that dangles says nothing about this snapshot
            last_used = max(last_used, ref.stat().st_mtime)
    unsupported = _unsupported_reason(config, snapshot)
    return CachedModel(
        repo_id=repo_id, folder=snapshot, revision=snapshot.name, model_type=model_type,
        supported_now=unsupported is None, size_bytes=size_bytes, parameters=parameters,
        parameters_estimated=estimated, num_layers=_int_field(config, "num_hidden_layers", "n_layers"),
        num_heads=_int_field(config, "num_attention_heads", "n_heads"), head=describe_head(config),
        last_used=last_used, unsupported_reason=unsupported)


def _check_file(path: Path, repo_id: str, fault, *, missing: str) -> None:
    """CacheEntryError (via `fault`) unless a regular file is at `path` (links followed), never opening it."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise fault(f"{path.name} is a broken link (its blob is missing)", f"{path} links to "
                        f"{os.readlink(path)}, which is not there", path) from None
        raise fault(missing, f"{path.parent} has no {path.name}: only part of the repo was downloaded",
                    path) from None
    if not stat.S_ISREG(status.st_mode):
        raise fault(f"{path.name} is {file_kind(status.st_mode)}", f"{path} is {file_kind(status.st_mode)}, not a "
                    "file", path)


def _weights(snapshot: Path, repo_id: str, fault) -> Path:
    names = (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, PYTORCH_FILE, PYTORCH_INDEX_FILE)
    for name in names:
        if os.path.lexists(snapshot / name):
            _check_file(snapshot / name, repo_id, fault, missing=f"no {name}")
            return snapshot / name
    raise fault(f"no weights ({SAFETENSORS_FILE} or {PYTORCH_FILE})", f"{snapshot} has no weights "
                f"({', '.join(names)}): only part of the repo was downloaded (e.g. a tokenizer alone)", snapshot)


def _unsupported_reason(config: Mapping, snapshot: Path) -> str | None:
    if not loader_supports(config):
        architectures = config.get("architectures")
        name = architectures[0] if isinstance(architectures, list) and architectures else config.get("model_type")
        return f"{name} is not supported yet"
    if not _has_readable_tokenizer(snapshot):
        return ("no tokenizer file this program reads (vocab.txt, tokenizer.json, vocab.json with merges.txt, or a "
                "SentencePiece model)")
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def _has_readable_tokenizer(snapshot: Path) -> bool:
    """Whether the snapshot has a tokenizer bertcore reads (bertcore.tokenization.pretrained): a vocab.txt, a
    tokenizer.json (WordPiece, BPE, Unigram), vocab.json + merges.txt, or a SentencePiece model file.
    Names only: nothing is parsed (a damaged file is named when the model is opened)."""
    return (snapshot / VOCAB_FILE).exists() or (snapshot / TOKENIZER_JSON_FILE).exists() or (
        (snapshot / "vocab.json").exists() and (snapshot / "merges.txt").exists()) or any(
        (snapshot / name).exists() for name in ("spiece.model", "sentencepiece.bpe.model"))


def _snapshot_usage(snapshot: Path) -> tuple[int, float]:
    """Bytes of the distinct blobs the snapshot links to, and their newest access time. A dangling link to a
    file the loader does not need (e.g. an ONNX export) is ignored; one to config.json or weights was caught
    earlier by reading them."""
    seen: set[tuple[int, int]] = set()
    size_bytes = 0
    last_used = 0.0
    for path in _files_under(snapshot):
        try:
            status = os.stat(path)
        except OSError:
            continue
        last_used = max(last_used, status.st_atime, status.st_mtime)
        if (status.st_dev, status.st_ino) not in seen:
            seen.add((status.st_dev, status.st_ino))
            size_bytes += status.st_size
    return size_bytes, last_used


def _files_under(folder: Path) -> Iterator[str]:
    """The files under `folder`; a subfolder that cannot be read (an ONNX export's, say) is left out of the count,
    not taken for a broken model: config.json and the weights were read already."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _files_under(Path(entry.path))
        else:
            yield entry.path


def _int_field(config: Mapping, *names: str) -> int | None:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def describe_head(config: Mapping) -> str:
    """What sits on the encoder, from config.json's `architectures` (and id2label for a classifier)."""
    architectures = config.get("architectures") or []
    name = architectures[0] if isinstance(architectures, list) and architectures else None
    if not isinstance(name, str):
        return "encoder (config.json names no architecture)"
    if name.endswith("ForPreTraining"):
        return {"AlbertForPreTraining": "pretraining (MLM + SOP)",
                "ElectraForPreTraining": "replaced-token detection (ELECTRA discriminator)"}.get(
                    name, "pretraining (MLM + NSP)")
    if name.endswith("ForMaskedLM"):
        return "MLM"
    if name.endswith("ForSequenceClassification"):
        return f"sequence classification: {_labels(config)}"
    if name.endswith("ForTokenClassification"):
        return f"token classification: {_labels(config)}"
    if name.endswith("ForQuestionAnswering"):
        return "extractive question answering (span start/end)"
    if name.endswith("ForNextSentencePrediction"):
        return "next-sentence prediction"
    if name.endswith("ForMultipleChoice"):
        return "multiple choice"
    if name.endswith(("ForCausalLM", "LMHeadModel")):
        return "causal LM"
    if name.endswith("Model"):
        return "encoder only"
    return name


def _labels(config: Mapping) -> str:
    id2label = config.get("id2label")
    names: list[str] = []
    if isinstance(id2label, dict):
        def position(key: object) -> tuple[int, str]:
            text = str(key)
            return (int(text), text) if text.lstrip("-").isdigit() else (1 << 30, text)
        names = [str(id2label[key]) for key in sorted(id2label, key=position)]
    count = len(names) or _int_field(config, "num_labels") or 2  # transformers' default num_labels is 2
    label_word = "label" if count == 1 else "labels"
    # transformers fills id2label with LABEL_0, LABEL_1, … when a checkpoint names none: nothing to show
    if not names or all(re.fullmatch(r"LABEL_\d+", name) for name in names):
        return f"{count} {label_word}"
    shown = ", ".join(names[:_LABELS_SHOWN])
    more = f", … {len(names) - _LABELS_SHOWN} more" if len(names) > _LABELS_SHOWN else ""
    return f"{count} {label_word} ({shown}{more})"


def _count_parameters(weights: Path) -> tuple[int | None, bool]:
    """(parameters, estimated) from the weights' headers: exact for safetensors (shapes of floating-point
    tensors), file size / 4 for pytorch_model.bin, which cannot be read without unpickling it."""
    folder = weights.parent
    if weights.name in (SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE):
        shards = [weights] if weights.name == SAFETENSORS_FILE else shard_files(weights)
        return sum(_safetensors_parameters(shard) for shard in shards), False
    shards = [weights] if weights.name == PYTORCH_FILE else shard_files(weights)
    return sum(os.stat(folder / shard.name).st_size for shard in shards) // 4, True


def _safetensors_parameters(path: Path) -> int:
    with open_without_touching(path) as handle:
        (header_length,) = struct.unpack("<Q", handle.read(8))
        if header_length > _SAFETENSORS_HEADER_LIMIT:
            raise ValueError(f"{path}: header length {header_length} is not a safetensors header")
        header = parse_json(handle.read(header_length), path)
    total = 0
    for name, tensor in header.items():
        if name == "__metadata__" or tensor["dtype"] not in _FLOAT_DTYPES:
            continue
        count = 1
        for dimension in tensor["shape"]:
            count *= int(dimension)
        total += count
    return total


def _count(parameters: int) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= scale:
            return f"{parameters / scale:.1f}{suffix}"
    return str(parameters)


def _megabytes(size_bytes: int) -> str:
    if size_bytes >= 1e9:
        return f"{size_bytes / 1e9:.2f} GB"
    return f"{size_bytes / 1e6:.1f} MB"
