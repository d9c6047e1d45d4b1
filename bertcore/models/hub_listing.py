"""The models the Hugging Face cache holds, for the model picker: each repo described from its config.json and the
headers of its weights (parameters, layers × heads, head, size, last use), no tensor loaded and no file waited on.
Finding the cache and a repo's snapshot is bertcore.models.hub's."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE, TOKENIZER_JSON_FILE, VOCAB_FILE
from bertcore.files.reading import parse_json
from bertcore.models.families import supported_model_types
from bertcore.models.hub import (
    SAFETENSORS_INDEX_FILE,
    default_cache_dir,
    loader_supports,
    open_without_touching,
    read_bytes,
    repo_id_of_storage,
    shard_files,
    snapshot_for,
    weights_file,
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


def list_cached_models(cache_dir: str | Path | None = None) -> list[CachedModel]:
    """Every cached model repo whose config.json names a family of bertcore.models.families and which has weights,
    newest-used first. Reads config.json and the weights' headers only (no tensor is loaded) and never raises for
    a broken repo: one without config.json or weights, with bad JSON, or whose links dangle is left out."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        entries = [entry for entry in os.scandir(cache) if entry.name.startswith("models--")]
    except OSError:
        return []
    models = []
    for entry in entries:
        try:
            model = _describe_repo(Path(entry.path))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, struct.error, RecursionError):
            model = None  # a repo another program is writing, or one damaged by hand: not openable
        if model is not None:
            models.append(model)
    models.sort(key=lambda model: (-model.last_used, model.repo_id))
    return models


def _describe_repo(storage: Path) -> CachedModel | None:
    repo_id = repo_id_of_storage(storage.name)
    if repo_id is None or not storage.is_dir():
        return None
    snapshot = snapshot_for(storage, "main")
    if snapshot is None:
        return None
    config_path = snapshot / CONFIG_FILE
    config = parse_json(read_bytes(config_path, limit=1024 * 1024), config_path)
    if not isinstance(config, dict) or config.get("model_type") not in supported_model_types():
        return None
    weights = weights_file(snapshot)
    if weights is None:
        return None
    parameters, estimated = _count_parameters(weights)
    size_bytes, last_used = _snapshot_usage(snapshot)
    for ref in (storage / "refs").glob("*"):
        last_used = max(last_used, ref.stat().st_mtime)
    return CachedModel(
        repo_id=repo_id, folder=snapshot, revision=snapshot.name, model_type=config["model_type"],
        supported_now=loader_supports(config) and _has_readable_tokenizer(snapshot),
        size_bytes=size_bytes, parameters=parameters,
        parameters_estimated=estimated, num_layers=_int_field(config, "num_hidden_layers", "n_layers"),
        num_heads=_int_field(config, "num_attention_heads", "n_heads"), head=describe_head(config),
        last_used=last_used)



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
    for entry in os.scandir(folder):
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
