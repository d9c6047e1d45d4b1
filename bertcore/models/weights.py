"""A checkpoint's weights as transformers lays them out, and how their names meet a model's.

Reading: model.safetensors, pytorch_model.bin (plain tensors only, `weights_only=True`), or the shards an index file
of either lists (`read_weights`). Every failure is a CheckpointError naming the file; the tensors are checked
against a model in bertcore.models.checkpoint (bertcore.models.checkpoint_checks).

Names: the encoder's prefix, tied parameters stored once, buffers never read, each family's head names, and the
spellings found in the wild (no prefix, TF-era gamma/beta) mapped onto this package's names (`standard_names`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from bertcore.errors import CheckpointError
from bertcore.files.file_names import PYTORCH_FILE, SAFETENSORS_FILE
from bertcore.files.reading import CONFIG_JSON_LIMIT, check_regular_file, open_regular_file, present, read_json
from bertcore.models.families import base_model_name
from bertcore.models.parts import PretrainingHeads

# ---- reading the files

SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"  # transformers' names for the map of a sharded save
PYTORCH_INDEX_FILE = "pytorch_model.bin.index.json"


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The tensors of the first weights file present: model.safetensors, its shards (model.safetensors.index.json),
    pytorch_model.bin, its shards (pytorch_model.bin.index.json). Anything by one of those names (a folder, a FIFO)
    counts as present and is named, never passed over for the next."""
    for name, index_name, read in ((SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE, _read_safetensors),
                                   (PYTORCH_FILE, PYTORCH_INDEX_FILE, _read_pytorch)):
        if present(folder / name):
            return read(folder / name)
        if present(folder / index_name):
            return _read_shards(folder / index_name, read)
    raise CheckpointError(f"{folder} has no weights: expected {SAFETENSORS_FILE} or {PYTORCH_FILE} (or the "
                          f"{SAFETENSORS_INDEX_FILE} / {PYTORCH_INDEX_FILE} of a sharded save)")


def _read_shards(index_path: Path, read) -> dict[str, torch.Tensor]:
    """The tensors of every shard that a transformers index file (`{"weight_map": {tensor: shard file}}`) lists.
    Shards must be plain file names in the same folder (never a path leading elsewhere), and each must hold the
    tensors the index assigns to it."""
    index = read_json(index_path, limit=CONFIG_JSON_LIMIT, error=CheckpointError, what="a weights index")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index_path} has no \"weight_map\" of tensor names to shard files; it is not the "
                              "index of a sharded save (re-save the model, or remove the file)")
    shards: dict[str, list[str]] = {}
    for tensor_name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
            raise CheckpointError(f"{index_path} places {tensor_name!r} in {shard!r}, which is not a file name in "
                                  "the same folder; shards of a save sit beside their index")
        shards.setdefault(shard, []).append(tensor_name)
    state_dict: dict[str, torch.Tensor] = {}
    for shard, names in shards.items():
        if not present(index_path.parent / shard):
            raise CheckpointError(f"{index_path} lists the shard {shard}, which is not in the folder; the download "
                                  "or copy is incomplete: fetch every file of the model again")
        tensors = read(index_path.parent / shard)
        if absent := sorted(set(names) - tensors.keys()):
            raise CheckpointError(f"{index_path.parent / shard} lacks {len(absent)} tensor(s) that {index_path.name} "
                                  f"places there: {some_names(absent)}; the shard is of another save")
        state_dict.update(tensors)
    return state_dict


def _read_safetensors(safetensors_path: Path) -> dict[str, torch.Tensor]:
    try:
        check_regular_file(safetensors_path, error=CheckpointError)  # (safetensors reads it by its path)
    except FileNotFoundError:
        raise CheckpointError(f"{safetensors_path} disappeared while it was being read; is another program "
                              "changing the folder?") from None
    try:
        return load_file(safetensors_path)
    except OSError as error:  # the file system's answer (permissions, I/O), not the file's content
        raise CheckpointError(f"{safetensors_path} cannot be read ({error.strerror or error})") from None
    except (SafetensorError, ValueError) as error:
        raise CheckpointError(f"{safetensors_path} is corrupt or truncated ({error})") from None


def _read_pytorch(pytorch_path: Path) -> dict[str, torch.Tensor]:
    try:
        with open_regular_file(pytorch_path, error=CheckpointError) as file:
            state_dict = torch.load(file, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"{pytorch_path} disappeared while it was being read; is another program "
                              "changing the folder?") from None
    except OSError as error:  # the file system's answer (permissions, I/O), not the file's content
        raise CheckpointError(f"{pytorch_path} cannot be read ({error.strerror or error})") from None
    except Exception as error:  # an unpickling error carries many types; all mean the same here
        raise CheckpointError(
            f"{pytorch_path} cannot be read as plain tensors ({type(error).__name__}: {error}); it is "
            "corrupt or holds code, which is never unpickled"
        ) from None
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{pytorch_path} holds a {type(state_dict).__name__}, not a state dict")
    for name, value in state_dict.items():
        if not isinstance(name, str):
            raise CheckpointError(f"{pytorch_path} holds the key {name!r} ({type(name).__name__}); a state dict "
                                  "maps parameter names (str) to tensors")
        if not isinstance(value, torch.Tensor):
            hint = "; is it a training checkpoint? Save its model's state_dict()" if isinstance(value, dict) else ""
            raise CheckpointError(f"{pytorch_path} holds {name!r} = a {type(value).__name__}, not a tensor: a "
                                  f"state dict maps parameter names to tensors{hint}")
    return state_dict


def some_names(names: list[str], shown: int = 5) -> str:
    """The first few of a list of names, and how many more: an error message stays readable."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


# ---- how a checkpoint's tensor names meet a model's

HEAD_PREFIXES = ("cls.predictions.", "cls.seq_relationship.")
BUFFER_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")  # rebuilt at load time, never read
# The heads of the BERT architectures (transformers' names), and the pooler that tagging and QA models lack.
# A checkpoint of one of them loads into a model of another: its head is left out (a fine-tuned classifier's
# encoder can be inspected; a pretrained checkpoint starts a fine-tuning). Any other tensor outside the model's
# own names is an error naming it.
KNOWN_HEAD_PREFIXES = (*HEAD_PREFIXES, "classifier.", "qa_outputs.", "bert.pooler.")
# The same for each family, by the prefix of its encoder's names (transformers' names of its classes' heads).
FAMILY_HEAD_PREFIXES = {
    "bert.": KNOWN_HEAD_PREFIXES,
    "roberta.": ("lm_head.", "classifier.", "qa_outputs."),
    "distilbert.": ("vocab_transform.", "vocab_layer_norm.", "vocab_projector.", "pre_classifier.", "classifier.",
                    "qa_outputs."),
    "electra.": ("generator_predictions.", "generator_lm_head.", "discriminator_predictions.", "classifier.",
                 "qa_outputs."),
    "albert.": ("predictions.", "sop_classifier.", "classifier.", "qa_outputs."),
    "model.": ("head.", "decoder.", "classifier.", "qa_outputs."),  # ModernBERT
}


def encoder_prefix(model: torch.nn.Module) -> str:
    """"bert.", "roberta.", "distilbert.", "model."…: the name of the encoder every class of a family shares, with
    its dot (bertcore.models.families.base_model_name)."""
    return base_model_name(model) + "."


def tied_names(model: torch.nn.Module) -> dict[str, str]:
    """Names under which a tied parameter appears a second time (the MLM decoder's weight and bias), each mapped
    to the name it is stored under: the one registered first, as transformers' _tied_weights_keys point."""
    home: dict[int, str] = {}
    tied = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        if id(parameter) in home:
            tied[name] = home[id(parameter)]
        else:
            home[id(parameter)] = name
    return tied


def heads_may_be_absent(model: torch.nn.Module) -> bool:
    """A class that says whether its checkpoint had its heads (a settable has_pretraining_heads): it loads a bare
    encoder, whose heads are then marked absent. Every other class requires its head."""
    return isinstance(model, PretrainingHeads)


def standard_names(state_dict: dict[str, torch.Tensor], skeleton: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Map the spellings found in the wild onto the model's parameter names: a bare encoder's names (no "bert."),
    TF-era LayerNorm gamma/beta, a tied tensor stored only under its second name; buffers and tied copies go."""
    expected = skeleton.state_dict().keys()
    prefix = encoder_prefix(skeleton)
    tied = tied_names(skeleton)
    # what a bare encoder's names begin with: its own parts (embeddings, encoder…), and the pooler it may have
    encoder_parts = {name for name, _ in getattr(skeleton, prefix[:-1]).named_children()} | {"pooler"}
    renamed = {}
    for name, tensor in state_dict.items():
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"  # TF-era LayerNorm names
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        if name not in expected and name.split(".", 1)[0] in encoder_parts:
            name = prefix + name  # a bare encoder (BertModel) saved without its prefix
        renamed[name] = tensor
    for name, stored_as in tied.items():
        if stored_as not in renamed and name in renamed:
            renamed[stored_as] = renamed[name]  # e.g. only cls.predictions.decoder.bias was written
    return {name: tensor for name, tensor in renamed.items()
            if name not in tied and not name.endswith(BUFFER_SUFFIXES)}
