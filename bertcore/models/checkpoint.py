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
(read by bertcore.models.weight_files).
`read_checkpoint` gives the checked tensors without building a model (to start a task
model from them, bertcore.models.weight_transfer.start_from_pretrained).

A folder that cannot be used is a CheckpointError naming the file, field or tensor: a config with a wrong type
or sizes its weights do not have (checked before anything is allocated), a vocabulary that is not UTF-8 or
does not fit vocab_size, weights that are missing, misshapen, NaN/inf, not tensors, or of no BERT architecture.
Every file is read only as a regular file (links followed) of a bounded size (bertcore.files.reading): a FIFO,
a device, a socket or a folder in a file's place is named as what it is, never opened to block or read forever.
Saving writes the whole folder beside the target and swaps it in (bertcore.files.atomic): never half a checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from bertcore.errors import CheckpointError
from bertcore.files.atomic import staged_folder
from bertcore.files.file_names import CONFIG_FILE, PYTORCH_FILE, SAFETENSORS_FILE, TOKENIZER_CONFIG_FILE, VOCAB_FILE
from bertcore.files.reading import CONFIG_JSON_LIMIT, file_kind, read_json
from bertcore.models.bert import BertPreTrainedModel
from bertcore.models.config import BertConfig
from bertcore.models.families import UnsupportedModelError, base_model_name, family_for
from bertcore.models.heads import PretrainingHeads
from bertcore.models.hub import looks_like_repo_id, resolve_model
from bertcore.models.task_heads import model_class_for
from bertcore.models.weight_files import read_weights, some_names
from bertcore.tokenization.pretrained import PretrainedTokenizer, tokenizer_from_folder
from bertcore.tokenization.vocab_files import recorded_vocab_sizes
from bertcore.tokenization.wordpiece import BertTokenizer, TokenizerError

Tokenizer = BertTokenizer | PretrainedTokenizer  # one interface: encode, ids of the specials, vocab_size, save

SAFETENSORS_NAME = SAFETENSORS_FILE  # the names this module had before bertcore.files.file_names named every file
PYTORCH_NAME = PYTORCH_FILE
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
# A vocab.txt may be shorter than vocab_size only by the rows that round it up to a multiple of a power of two:
# NVIDIA's BERTs pad 30522 to 30528 (8), Megatron's to multiples of 128 × tensor-parallel ranks, so that the
# embedding table suits tensor cores; the tokenizer never produces the extra ids. A vocabulary shorter than
# that is another model's, whose ids would index the wrong embeddings: an error naming both numbers. Reading a
# folder, even a padded size must be confirmed by the tokenizer files (tokenizer_config.json's "vocab_size",
# which BertTokenizer.save writes, or a tokenizer.json's token count): a vocab.txt that lost a few lines looks
# the same as a padded one by its line count, and would shift every later id onto the wrong embedding.
VOCAB_PADDING_MULTIPLES = (8, 16, 32, 64, 128, 256, 512, 1024)
# An encoder layer's index in the names of the families that number their layers (BERT, RoBERTa, ELECTRA:
# encoder.layer.N; DistilBERT: transformer.layer.N; ModernBERT: layers.N); ALBERT's shared groups are not layers.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:(?:encoder|transformer)\.layer|layers)\.(\d+)\.")


@dataclass(frozen=True)
class CheckpointContents:
    """A checkpoint folder read and checked against the class its config.json names, no model built."""

    folder: Path
    config: BertConfig
    tokenizer: Tokenizer
    state_dict: dict[str, torch.Tensor]  # every tensor of the file under this package's names (float, on CPU)
    model_class: type[BertPreTrainedModel]  # the class config.json's "architectures" names
    has_head: bool  # False only for a pretraining class without MLM/NSP heads (a bare encoder)


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
    config = _read_config(folder)
    try:
        tokenizer = tokenizer_from_folder(folder)  # vocab.txt (WordPiece), else tokenizer.json, vocab.json + merges
    except TokenizerError as error:
        raise CheckpointError(f"cannot read the vocabulary of {folder}: {error}") from None
    _check_vocabulary(folder, tokenizer, config.vocab_size)
    try:
        model_class = model_class_for(config)
    except UnsupportedModelError as error:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {error}") from None
    weights = read_weights(folder)
    _check_sizes(config, weights, folder)  # before anything is allocated
    with torch.device("meta"):  # names and shapes only: no memory, no random init
        skeleton = model_class(config)
    state_dict = _standard_names(weights, skeleton)
    has_head = _check_weights(skeleton, state_dict, folder)
    return CheckpointContents(folder, config, tokenizer, state_dict, model_class, has_head)


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
    if _heads_may_be_absent(model):
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
    if reason := _vocabulary_mismatch(tokenizer.vocab_size, model.config.vocab_size):
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
    with_heads = model.has_pretraining_heads or not _heads_may_be_absent(model)
    prefix = _encoder_prefix(model)
    tied = _tied_names(model)
    tensors = {
        name: tensor.detach().to("cpu", torch.float32).contiguous()
        for name, tensor in model.state_dict().items()
        if name not in tied and not name.endswith(BUFFER_SUFFIXES) and (with_heads or name.startswith(prefix))
    }
    with library_write(folder / SAFETENSORS_FILE, "safetensors", SafetensorError):
        save_file(tensors, folder / SAFETENSORS_FILE, metadata={"format": "pt"})
    tokenizer.save(folder)


def _vocabulary_mismatch(num_tokens: int, vocab_size: int) -> str | None:
    """Why a vocabulary of `num_tokens` cannot go with `vocab_size` embeddings, or None when it can."""
    if num_tokens > vocab_size:
        return "some tokens would have no embedding"
    if num_tokens < vocab_size and not any(vocab_size == -(-num_tokens // m) * m for m in VOCAB_PADDING_MULTIPLES):
        return ("a vocabulary may be shorter only by the padding that rounds its size up to a multiple of a power "
                f"of two from {VOCAB_PADDING_MULTIPLES[0]} to {VOCAB_PADDING_MULTIPLES[-1]}")
    return None


def _read_config(folder: Path) -> BertConfig:
    """config.json, read only as a regular file of bounded size (never a FIFO, a device or a folder), as a
    BertConfig; CheckpointError naming the file and what is wrong with it."""
    path = folder / CONFIG_FILE
    try:
        values = read_json(path, limit=CONFIG_JSON_LIMIT, error=CheckpointError, what="a config.json")
    except FileNotFoundError:
        raise CheckpointError(f"{path} does not exist; a BERT checkpoint needs a config.json") from None
    if not isinstance(values, dict):
        raise CheckpointError(f"{path} holds a {type(values).__name__}, not a JSON object of config fields")
    try:
        family = family_for(values)
    except UnsupportedModelError as error:
        raise CheckpointError(f"{path}: {error}") from None
    try:
        return family.config_class().from_dict(values)
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"{path} is not a usable BERT config: {error}") from None
    except RecursionError:
        raise CheckpointError(f"{path} is not a usable BERT config: a value in it is nested too deeply") from None


def _check_vocabulary(folder: Path, tokenizer: Tokenizer, vocab_size: int) -> None:
    """The vocabulary fits the embedding table: as many tokens as rows, or fewer only where the table is padded
    (its size rounded up, VOCAB_PADDING_MULTIPLES) and the tokenizer files record that the vocabulary really has
    that many tokens (`recorded_vocab_sizes`). CheckpointError naming the files and the counts otherwise."""
    vocab_path = tokenizer.vocab_file or folder / VOCAB_FILE
    num_tokens = tokenizer.vocab_size
    if reason := _vocabulary_mismatch(num_tokens, vocab_size):
        raise CheckpointError(f"{vocab_path} has {num_tokens} tokens but {CONFIG_FILE} says vocab_size "
                              f"{vocab_size}: {reason}. The vocabulary does not belong to these weights; use the "
                              "vocab.txt that came with them")
    if num_tokens == vocab_size:
        return
    try:
        records = recorded_vocab_sizes(folder)
    except TokenizerError as error:
        raise CheckpointError(f"cannot read the vocabulary of {folder}: {error}") from None
    for record_path, recorded in records:
        if recorded != num_tokens:
            change = "lost lines" if recorded > num_tokens else "gained lines"
            raise CheckpointError(
                f"{vocab_path} has {num_tokens} tokens but {record_path.name} records a vocabulary of {recorded} "
                f"({CONFIG_FILE} says vocab_size {vocab_size}): {vocab_path.name} {change}, which moves every "
                "later token onto another token's embedding. Use the vocabulary files that came with the weights")
    if not records:
        multiple = next(m for m in VOCAB_PADDING_MULTIPLES if -(-num_tokens // m) * m == vocab_size)
        raise CheckpointError(
            f"{vocab_path} has {num_tokens} tokens but {CONFIG_FILE} says vocab_size {vocab_size}, and nothing in "
            f"the folder says which is right: the embedding table may be padded (rounded up to a multiple of "
            f"{multiple}, as NVIDIA pads BERT's 30522 to 30528), or {vocab_path.name} may have lost "
            f"{vocab_size - num_tokens} lines, which would move every later token onto another token's embedding. "
            f"If the vocabulary is complete, record its size: add \"vocab_size\": {num_tokens} to "
            f"{folder / TOKENIZER_CONFIG_FILE} (bertcore's saves write it); otherwise use the vocab.txt that came "
            "with the weights")


def _encoder_prefix(model: torch.nn.Module) -> str:
    """"bert.", "roberta.", "distilbert.", "model."…: the name of the encoder every class of a family shares, with
    its dot (bertcore.models.families.base_model_name)."""
    return base_model_name(model) + "."


def _tied_names(model: torch.nn.Module) -> dict[str, str]:
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


def _heads_may_be_absent(model: torch.nn.Module) -> bool:
    """A class that says whether its checkpoint had its heads (a settable has_pretraining_heads): it loads a bare
    encoder, whose heads are then marked absent. Every other class requires its head."""
    return isinstance(model, PretrainingHeads)


def _standard_names(state_dict: dict[str, torch.Tensor], skeleton: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Map the spellings found in the wild onto the model's parameter names: a bare encoder's names (no "bert."),
    TF-era LayerNorm gamma/beta, a tied tensor stored only under its second name; buffers and tied copies go."""
    expected = skeleton.state_dict().keys()
    prefix = _encoder_prefix(skeleton)
    tied = _tied_names(skeleton)
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


def _check_sizes(config: BertConfig, state_dict: dict[str, torch.Tensor], folder: Path) -> None:
    """The sizes config.json claims against the shapes of the weights (as found in the file, any prefix), before a
    model of those sizes is built (a config saying num_hidden_layers 1000000 or hidden_size 10**9 must not allocate
    anything)."""

    def rows_and_columns(suffix: str) -> tuple[str, tuple[int, ...]]:
        for name, tensor in state_dict.items():
            if (name == suffix or name.endswith("." + suffix)) and isinstance(tensor, torch.Tensor) \
                    and tensor.dim() == 2:
                return name, tuple(tensor.shape)
        return "", ()

    claims = []  # (field, what the weights say, the tensor that says it)
    word, shape = rows_and_columns("embeddings.word_embeddings.weight")
    embedding_field = "embedding_size" if hasattr(config, "embedding_size") else "hidden_size"
    if shape:
        claims += [("vocab_size", shape[0], word), (embedding_field, shape[1], word)]
    for field, suffix in (("max_position_embeddings", "embeddings.position_embeddings.weight"),
                          ("type_vocab_size", "embeddings.token_type_embeddings.weight"),
                          ("intermediate_size", "layer.0.intermediate.dense.weight")):
        name, shape = rows_and_columns(suffix)
        if shape:
            claims.append((field, shape[0], name))
    for field, found, source in claims:
        if hasattr(config, field) and getattr(config, field) != found:
            raise CheckpointError(f"{folder}: config.json says {field} {getattr(config, field)} but the weights "
                                  f"say {found} ({source}); the config does not belong to these weights")
    layers = {int(match.group(1)) for name in state_dict if (match := _LAYER_INDEX.search(name))}
    claimed = getattr(config, "num_hidden_layers", getattr(config, "n_layers", None))
    if layers and isinstance(claimed, int) and claimed > len(layers):  # more in the weights: named as unexpected
        raise CheckpointError(f"{folder}: config.json says num_hidden_layers {claimed} but the "
                              f"weights hold {len(layers)} encoder layer(s); the config does not belong to these "
                              "weights")


def _check_weights(skeleton: BertPreTrainedModel, state_dict: dict[str, torch.Tensor], folder: Path) -> bool:
    """Every tensor the architecture expects is there with its shape, finite, and nothing unknown is; returns
    whether the checkpoint carried the model's head (always True for a task model, whose head is required).
    `skeleton` may live on the meta device."""
    prefix = _encoder_prefix(skeleton)
    tied = _tied_names(skeleton)
    expected = {name: tensor for name, tensor in skeleton.state_dict().items()
                if name not in tied and not name.endswith(BUFFER_SUFFIXES)}
    head_names = {name for name in expected if not name.startswith(prefix)}
    has_head = bool(head_names & state_dict.keys())
    required = set(expected)
    if _heads_may_be_absent(skeleton) and not has_head:
        # a bare encoder (BertModel) loads without its pretraining heads, and may lack its pooler
        required -= head_names | {name for name in expected if name.startswith(prefix + "pooler.")}
    missing = sorted(required - state_dict.keys())
    architecture = type(skeleton).__name__
    if missing and set(missing) <= head_names:
        raise CheckpointError(
            f"{folder} lacks the {architecture} head that config.json's architectures names ({some_names(missing)}); "
            "the weights are of another class: correct architectures in config.json, or load a checkpoint that "
            "has this head")
    if missing:
        raise CheckpointError(
            f"{folder} lacks {len(missing)} tensor(s) that its config.json implies ({architecture}): "
            f"{some_names(missing)}; the weights and the config do not match"
        )
    unexpected = sorted(state_dict.keys() - expected.keys())
    in_encoder = [name for name in unexpected if name.startswith(prefix) and not name.startswith(prefix + "pooler.")]
    if in_encoder:
        raise CheckpointError(
            f"{folder} has tensor(s) its config.json does not account for: {some_names(in_encoder)}; "
            "check num_hidden_layers and the other sizes in config.json"
        )
    known = (*FAMILY_HEAD_PREFIXES.get(prefix, ()), prefix + "pooler.")
    unknown = [name for name in unexpected if not name.startswith(known)]
    if unknown:
        raise CheckpointError(
            f"{folder} has tensor(s) that belong to no BERT architecture: {some_names(unknown)}; is it a BERT "
            "checkpoint (model_type 'bert', parameters named as transformers names them)?"
        )
    for name in sorted(expected.keys() & state_dict.keys()):  # a stable order: the first bad one is named
        tensor = state_dict[name]
        got, want = tuple(tensor.shape), tuple(expected[name].shape)
        if got != want:
            raise CheckpointError(f"{folder}: tensor {name} has shape {got} but the config implies {want}"
                                  + _label_hint(name, got, want))
        if not tensor.is_floating_point():
            raise CheckpointError(f"{folder}: tensor {name} has dtype {tensor.dtype}, not floating point")
        # One pass without a mask: a NaN or inf anywhere makes the sum NaN or inf. Only then (or when finite values
        # add up past float32's range) are the bad values counted, which reads the tensor twice and allocates.
        if torch.isfinite(tensor.sum(dtype=torch.float32)):
            continue
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise CheckpointError(f"{folder}: tensor {name} holds {bad} NaN/inf value(s); the weights are damaged "
                                  "(saved from a run that diverged?); load an earlier checkpoint")
    return has_head


def _label_hint(name: str, got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """For a classifier of another size: the config's labels do not match the head's outputs."""
    if not name.startswith(("classifier.", "qa_outputs.")) or got[1:] != want[1:]:
        return ""
    return (f" ({got[0]} outputs in the weights, {want[0]} labels in config.json's num_labels / id2label; "
            "make id2label name one label per output)")


def _model_with_weights(model_class: type[BertPreTrainedModel], config: BertConfig,
                        state_dict: dict[str, torch.Tensor]) -> BertPreTrainedModel:
    """A model of the class holding the (checked) weights. Where they cover every parameter, the model is built
    without the random initialisation they would overwrite, and takes the tensors read as its parameters instead of
    copies (together half the time of opening a base-size model): on the meta device, then assigned, its tied
    parameters tied again (each name was assigned on its own). A model the checkpoint leaves parameters of (a bare
    encoder's heads) is built as usual, so those keep their fresh initialisation."""
    with torch.device("meta"):
        model = model_class(config)
    tied = _tied_names(model)
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
