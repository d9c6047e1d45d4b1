"""Load and save the standard BERT checkpoint folder: config.json + model.safetensors + vocab.txt.

Reads what HuggingFace `transformers` writes (with or without the `bert.` prefix, safetensors or a
`pytorch_model.bin` read with `weights_only=True`, old TF-style `gamma`/`beta` LayerNorm names, a
plain `BertModel` without pretraining heads) and writes what `transformers.BertForPreTraining` loads.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bertcore.config import BertConfig
from bertcore.model import BertForPreTraining
from bertcore.tokenizer import BertTokenizer, TokenizerError

SAFETENSORS_NAME = "model.safetensors"
PYTORCH_NAME = "pytorch_model.bin"
HEAD_PREFIXES = ("cls.predictions.", "cls.seq_relationship.")
# Keys that are either buffers rebuilt at load time or tensors tied to another parameter.
DERIVED_KEYS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
BUFFER_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, incomplete, corrupt or does not fit its config."""


def load_pretrained(path: str | Path, device: str | torch.device = "cpu") -> tuple[BertForPreTraining, BertTokenizer]:
    """The model (in eval mode) and tokenizer of a standard BERT folder.

    A checkpoint without MLM/NSP heads loads with `model.has_pretraining_heads = False`: its heads
    are freshly initialised and their outputs are not to be shown as predictions.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder; a BERT checkpoint is a folder with config.json, "
                              f"{SAFETENSORS_NAME} (or {PYTORCH_NAME}) and vocab.txt")
    try:
        config = BertConfig.from_json_file(folder / "config.json")
    except (FileNotFoundError, ValueError, TypeError) as error:
        raise CheckpointError(f"cannot read the config of {folder}: {error}") from None
    try:
        tokenizer = BertTokenizer.from_vocab_file(folder / "vocab.txt")
    except TokenizerError as error:
        raise CheckpointError(f"cannot read the vocabulary of {folder}: {error}") from None
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(
            f"{folder / 'vocab.txt'} has {tokenizer.vocab_size} tokens but config.json says vocab_size "
            f"{config.vocab_size}; the vocabulary does not belong to these weights"
        )
    state_dict = _standard_names(_read_weights(folder))
    model = BertForPreTraining(config)
    model.has_pretraining_heads = _load_into(model, state_dict, folder)
    return model.to(device).eval(), tokenizer


def save_pretrained(model: BertForPreTraining, tokenizer: BertTokenizer, path: str | Path) -> Path:
    """Write the folder in the standard layout; a crash midway leaves any previous folder intact."""
    folder = Path(path)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {model.config.vocab_size} "
            "embeddings; they do not belong together"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.partial")
    staging.mkdir()  # not mkdtemp: its 0700 would make the saved folder private
    try:
        model.config.to_json_file(staging / "config.json")
        tensors = {
            name: tensor.detach().to("cpu", torch.float32).contiguous()
            for name, tensor in model.state_dict().items()
            if name not in DERIVED_KEYS and (model.has_pretraining_heads or not name.startswith(HEAD_PREFIXES))
        }
        save_file(tensors, staging / SAFETENSORS_NAME, metadata={"format": "pt"})
        tokenizer.save(staging)
        _fsync_and_share(staging)
        _swap_into_place(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    safetensors_path, pytorch_path = folder / SAFETENSORS_NAME, folder / PYTORCH_NAME
    if safetensors_path.is_file():
        try:
            return load_file(safetensors_path)
        except (SafetensorError, OSError, ValueError) as error:
            raise CheckpointError(f"{safetensors_path} is corrupt or truncated ({error})") from None
    if pytorch_path.is_file():
        try:
            state_dict = torch.load(pytorch_path, map_location="cpu", weights_only=True)
        except Exception as error:  # an unpickling error carries many types; all mean the same here
            raise CheckpointError(
                f"{pytorch_path} cannot be read as plain tensors ({type(error).__name__}: {error}); it is "
                "corrupt or holds code, which is never unpickled"
            ) from None
        if not isinstance(state_dict, dict):
            raise CheckpointError(f"{pytorch_path} holds a {type(state_dict).__name__}, not a state dict")
        return state_dict
    raise CheckpointError(f"{folder} has no weights: expected {SAFETENSORS_NAME} or {PYTORCH_NAME}")


def _standard_names(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map the spellings found in the wild onto this model's parameter names."""
    renamed = {}
    for name, tensor in state_dict.items():
        if name.startswith(("embeddings.", "encoder.", "pooler.")):
            name = "bert." + name  # a bare BertModel
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"  # TF-era LayerNorm names
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        renamed[name] = tensor
    if "cls.predictions.bias" not in renamed and "cls.predictions.decoder.bias" in renamed:
        renamed["cls.predictions.bias"] = renamed["cls.predictions.decoder.bias"]
    return {name: tensor for name, tensor in renamed.items()
            if name not in DERIVED_KEYS and not name.endswith(BUFFER_SUFFIXES)}


def _load_into(model: BertForPreTraining, state_dict: dict[str, torch.Tensor], folder: Path) -> bool:
    """Copy the tensors in; return whether the checkpoint carried the pretraining heads."""
    expected = {name: tensor for name, tensor in model.state_dict().items() if name not in DERIVED_KEYS}
    head_names = {name for name in expected if name.startswith(HEAD_PREFIXES)}
    found_heads = head_names & state_dict.keys()
    has_heads = bool(found_heads)
    required = set(expected) if has_heads else set(expected) - head_names
    pooler_names = {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    if not has_heads:
        required -= pooler_names  # a headless encoder may come without its pooler too
    missing = sorted(required - state_dict.keys())
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise CheckpointError(
            f"{folder} lacks {len(missing)} tensor(s) that its config.json implies: {shown}; "
            "the weights and the config do not match"
        )
    unexpected = sorted(name for name in state_dict.keys() - expected.keys() if name.startswith("bert."))
    if unexpected:
        raise CheckpointError(
            f"{folder} has tensor(s) its config.json does not account for: {', '.join(unexpected[:5])}; "
            "check num_hidden_layers and the other sizes in config.json"
        )
    for name in expected.keys() & state_dict.keys():
        got, want = tuple(state_dict[name].shape), tuple(expected[name].shape)
        if got != want:
            raise CheckpointError(f"{folder}: tensor {name} has shape {got} but the config implies {want}")
        if not state_dict[name].is_floating_point():
            raise CheckpointError(f"{folder}: tensor {name} has dtype {state_dict[name].dtype}, not floating point")
    with torch.no_grad():
        for name in expected.keys() & state_dict.keys():
            expected[name].copy_(state_dict[name].to(torch.float32))
    return has_heads


def _swap_into_place(staging: Path, folder: Path) -> None:
    if not folder.exists():
        os.replace(staging, folder)
        return
    if not folder.is_dir():
        raise CheckpointError(f"{folder} exists and is not a folder; choose another place to save")
    retired = folder.with_name(f".{folder.name}.old")
    shutil.rmtree(retired, ignore_errors=True)
    os.replace(folder, retired)
    os.replace(staging, folder)
    shutil.rmtree(retired, ignore_errors=True)


def _fsync_and_share(folder: Path) -> None:
    """Flush every file to disk and give it the permissions of a plainly created file."""
    umask = os.umask(0)
    os.umask(umask)
    for file in folder.iterdir():
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())
        os.chmod(file, 0o666 & ~umask)

