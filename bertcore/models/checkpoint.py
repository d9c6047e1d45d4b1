"""Load and save the standard checkpoint folder: config.json + model.safetensors + the tokenizer's files, for every
family in bertcore.models.families (BERT, RoBERTa/XLM-RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT).
The tokenizer is read as the folder has it (bertcore.tokenization.pretrained.tokenizer_from_folder): WordPiece
from vocab.txt (or a WordPiece tokenizer.json), any other tokenizer.json (byte-level BPE, Unigram/SentencePiece),
vocab.json + merges.txt, or only a SentencePiece model file (spiece.model, sentencepiece.bpe.model).

Reads what HuggingFace `transformers` writes (with or without the `bert.` prefix, safetensors or a
`pytorch_model.bin` read with `weights_only=True`, old TF-style `gamma`/`beta` LayerNorm names, a
plain `BertModel` without pretraining heads) and writes what `transformers` loads as the same class.
`config.json`'s `model_type` and `architectures` pick the config class and the model class through the family
registry (bertcore.models.families; `bertcore.models.task_heads.model_class_for`): BertForPreTraining (also for
a bare BertModel, with or without its pooler), BertForMaskedLM, BertForSequenceClassification,
BertForTokenClassification or BertForQuestionAnswering, whose head (and, for sequence classification, pooler)
must be in the file; a model_type or architecture of no supported family is refused by name. Weights may be one
file or shards listed by `model.safetensors.index.json` / `pytorch_model.bin.index.json`
(read by bertcore.models.weights).
`read_checkpoint` gives the checked tensors without building a model (to start a task
model from them, bertcore.models.task_heads.start_from_pretrained).

A folder that cannot be used is a CheckpointError naming the file, field or tensor (bertcore.models.checkpoint_checks):
a config with a wrong type or sizes its weights do not have (checked before anything is allocated), a vocabulary
that is not UTF-8 or does not fit vocab_size, weights that are missing, misshapen, NaN/inf, not tensors, or of no
BERT architecture. How the file's tensor names meet the model's is bertcore.models.weights too.
Every file is read only as a regular file (links followed) of a bounded size (bertcore.files.reading): a FIFO,
a device, a socket or a folder in a file's place is named as what it is, never opened to block or read forever.
Saving writes the whole folder beside the target and swaps it in (bertcore.files.atomic): never half a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from bertcore.errors import CheckpointError
from bertcore.files.atomic import staged_folder
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE, VOCAB_FILE
from bertcore.files.reading import file_kind
from bertcore.models.bert import BertPreTrainedModel
from bertcore.models.checkpoint_checks import (
    check_sizes,
    check_vocabulary,
    check_weights,
    read_config,
    vocabulary_mismatch,
)
from bertcore.models.config import BertConfig
from bertcore.models.families import UnsupportedModelError
from bertcore.models.hub import looks_like_repo_id, resolve_model
from bertcore.models.task_heads import model_class_for
from bertcore.models.weights import (
    BUFFER_SUFFIXES,
    encoder_prefix,
    heads_may_be_absent,
    read_weights,
    standard_names,
    tied_names,
)
from bertcore.tokenization.pretrained import PretrainedTokenizer, tokenizer_from_folder
from bertcore.tokenization.wordpiece import BertTokenizer, TokenizerError

Tokenizer = BertTokenizer | PretrainedTokenizer  # one interface: encode, ids of the specials, vocab_size, save


@dataclass(frozen=True)
class CheckpointContents:
    """A checkpoint folder read and checked against the class its config.json names, no model built."""

    folder: Path
    config: BertConfig
    tokenizer: Tokenizer
    state_dict: dict[str, torch.Tensor]  # every tensor of the file under this package's names (float, on CPU)
    model_class: type[BertPreTrainedModel]  # the class config.json's "architectures" names
    has_head: bool  # False only for a pretraining class without MLM/NSP heads (a bare encoder)
    # "400 tokens for 403 embedding rows (3 unused)" where the embedding has rows no token uses; None where they
    # agree. The tokenizer carries it too (its vocabulary_note), for the app's model line.
    vocabulary_note: str | None = None


def read_checkpoint(path: str | Path) -> CheckpointContents:
    """Read a standard BERT folder and check it (CheckpointError naming the file, field or tensor), without
    building a model: the sizes config.json claims are checked against the weights before anything is
    allocated, then every tensor of the class it names (the head and, for sequence classification, the
    pooler; a pretraining checkpoint may lack its heads and pooler) for presence, shape and finiteness."""
    folder = Path(path)
    if not folder.is_dir():
        try:
            found = f"is {file_kind(folder.stat().st_mode)}, not a folder"
        except OSError:
            found = "does not exist (it is not a folder)"
        raise CheckpointError(f"{folder} {found}; a BERT checkpoint is a folder with {CONFIG_FILE}, "
                              f"{SAFETENSORS_FILE} (or {PYTORCH_FILE}) and {VOCAB_FILE} (or the tokenizer.json "
                              "of another family)")
    config = read_config(folder)
    try:
        tokenizer = tokenizer_from_folder(folder)  # vocab.txt (WordPiece), else tokenizer.json, vocab.json + merges
    except TokenizerError as error:
        raise CheckpointError(f"cannot read the vocabulary of {folder}: {error}") from None
    note = check_vocabulary(folder, tokenizer, config.vocab_size)
    tokenizer.vocabulary_note = note
    try:
        model_class = model_class_for(config)
    except UnsupportedModelError as error:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {error}") from None
    weights = read_weights(folder)
    check_sizes(config, weights, folder)  # before anything is allocated
    with torch.device("meta"):  # names and shapes only: no memory, no random init
        skeleton = model_class(config)
    state_dict = standard_names(weights, skeleton)
    has_head = check_weights(skeleton, state_dict, folder)
    return CheckpointContents(folder, config, tokenizer, state_dict, model_class, has_head, note)


def load_pretrained(path: str | Path, device: str | torch.device = "cpu") -> tuple[BertPreTrainedModel, Tokenizer]:
    """The model (in eval mode, of the class config.json's `architectures` names) and tokenizer of a standard
    BERT folder, or of "org/name" in the local Hugging Face cache when no folder has that name (no network:
    bertcore.models.hub.resolve_model, whose CheckpointError says how to download a repo that is not cached).

    A checkpoint without MLM/NSP heads loads as a BertForPreTraining with `model.has_pretraining_heads = False`:
    its heads are freshly initialised and their outputs are not to be shown as predictions. Every way the folder
    can be wrong is a CheckpointError naming the file, field or tensor (see `read_checkpoint`).
    """
    if isinstance(path, str) and looks_like_repo_id(path) and not Path(path).expanduser().exists():
        path = resolve_model(path).folder
    contents = read_checkpoint(path)
    model = _model_with_weights(contents.model_class, contents.config, contents.state_dict)
    if heads_may_be_absent(model):
        model.has_pretraining_heads = contents.has_head
    return model.to(device).eval(), contents.tokenizer


def save_pretrained(model: BertPreTrainedModel, tokenizer: Tokenizer, path: str | Path) -> Path:
    """Write the folder in the standard layout (transformers loads it as the same class); a crash midway leaves
    any previous folder intact. A write that fails (disk full, read-only, permissions), whatever the writing
    library raises, is a CheckpointSaveError (a CheckpointError) naming the folder and the reason; nothing
    half-written is left."""
    from bertcore.errors import CheckpointSaveError
    from bertcore.files.atomic import describe_os_error

    folder = Path(path)
    if reason := vocabulary_mismatch(tokenizer.vocab_size, model.config.vocab_size, tokenizer.explicit_ids):
        raise CheckpointError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is "
                              f"{model.config.vocab_size}: {reason}. They do not belong together")
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} exists and is not a folder; choose another place to save")
    try:
        with staged_folder(folder) as staging:
            write_pretrained_files(model, tokenizer, staging)
    except OSError as error:
        previous = "; the folder that was there is intact" if folder.is_dir() else ""
        raise CheckpointSaveError(
            f"could not save the model to {folder}: {describe_os_error(error)}. Nothing half-written was left"
            f"{previous}. Free disk space (or choose a writable folder) and save again", folder, error.errno,
        ) from error
    return folder


def write_pretrained_files(model: BertPreTrainedModel, tokenizer: Tokenizer, folder: Path) -> None:
    """config.json, model.safetensors, vocab.txt and tokenizer_config.json into an existing (staging) folder.

    Not atomic by itself: `save_pretrained` and a run's checkpoints call it on a staging folder. A failed write
    is an OSError whatever the library met it (safetensors' SafetensorError becomes one: bertcore.files.atomic)."""
    from bertcore.files.atomic import library_write

    model.config.to_json_file(folder / CONFIG_FILE)
    # Only a pretraining model whose heads were never trained leaves them out; every other class saves its own head.
    with_heads = model.has_pretraining_heads or not heads_may_be_absent(model)
    prefix = encoder_prefix(model)
    tied = tied_names(model)
    tensors = {
        name: tensor.detach().to("cpu", torch.float32).contiguous()
        for name, tensor in model.state_dict().items()
        if name not in tied and not name.endswith(BUFFER_SUFFIXES) and (with_heads or name.startswith(prefix))
    }
    with library_write(folder / SAFETENSORS_FILE, "safetensors", SafetensorError):
        save_file(tensors, folder / SAFETENSORS_FILE, metadata={"format": "pt"})
    tokenizer.save(folder)


def _model_with_weights(model_class: type[BertPreTrainedModel], config: BertConfig,
                        state_dict: dict[str, torch.Tensor]) -> BertPreTrainedModel:
    """A model of the class holding the (checked) weights. Where they cover every parameter, the model is built
    without the random initialisation they would overwrite, and takes the tensors read as its parameters instead of
    copies (together half the time of opening a base-size model): on the meta device, then assigned, its tied
    parameters tied again (each name was assigned on its own). A model the checkpoint leaves parameters of (a bare
    encoder's heads) is built as usual, so those keep their fresh initialisation."""
    with torch.device("meta"):
        model = model_class(config)
    tied = tied_names(model)
    expected = [name for name, _ in model.named_parameters() if name not in tied]
    if any(name not in state_dict for name in expected) or any(True for _ in model.buffers()):
        model = model_class(config)
        _copy_weights(model, state_dict)
        return model
    model.load_state_dict({name: state_dict[name].to(torch.float32) for name in expected}, strict=False, assign=True)
    for name, home in tied.items():
        owner, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(owner), attribute, model.get_parameter(home))
    return model


def _copy_weights(model: BertPreTrainedModel, state_dict: dict[str, torch.Tensor]) -> None:
    """Copy the (checked) tensors into the model; parameters the checkpoint lacks keep their fresh init."""
    with torch.no_grad():
        for name, parameter in model.state_dict().items():
            if name in state_dict:  # tied copies are not in it: they follow the tensor they share
                parameter.copy_(state_dict[name].to(torch.float32))
