"""What makes a checkpoint folder unusable, found before a model is built, each a CheckpointError naming the file,
field or tensor: config.json, the vocabulary against vocab_size, the sizes config.json claims against the weights,
and every tensor's presence, shape and finiteness."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from bertcore.errors import CheckpointError
from bertcore.files.file_names import CONFIG_FILE, TOKENIZER_CONFIG_FILE, VOCAB_FILE
from bertcore.files.reading import CONFIG_JSON_LIMIT, read_json
from bertcore.models.bert import BertPreTrainedModel
from bertcore.models.config import BertConfig
from bertcore.models.families import UnsupportedModelError, family_for
from bertcore.models.weights import (
    BUFFER_SUFFIXES,
    FAMILY_HEAD_PREFIXES,
    encoder_prefix,
    heads_may_be_absent,
    some_names,
    tied_names,
)
from bertcore.tokenization.pretrained import PretrainedTokenizer
from bertcore.tokenization.vocab_files import recorded_vocab_sizes
from bertcore.tokenization.wordpiece import BertTokenizer, TokenizerError

# A tokenizer whose files state every id (tokenizer.json, vocab.json, a SentencePiece model: `explicit_ids`) may
# have fewer ids than vocab_size: its ids cannot shift, and the rows past them are rows no token uses (DeBERTa-v3:
# 128,100 rows for 128,001 ids; a RoBERTa of 400 tokens in 403 rows). Only every id it can produce must have a row.
# A vocab.txt states ids only by its line numbers. It may be shorter than vocab_size only by the rows that round it
# up to a multiple of a power of two: NVIDIA's BERTs pad 30522 to 30528 (8), Megatron's to multiples of 128 ×
# tensor-parallel ranks, so that the embedding table suits tensor cores; the tokenizer never produces the extra ids.
# A vocabulary shorter than that is another model's, whose ids would index the wrong embeddings: an error naming
# both numbers. Reading a folder, even a padded size must be confirmed by the tokenizer files (tokenizer_config.json's
# "vocab_size", which BertTokenizer.save writes, or a tokenizer.json's token count): a vocab.txt that lost a few
# lines looks the same as a padded one by its line count, and would shift every later id onto the wrong embedding.
VOCAB_PADDING_MULTIPLES = (8, 16, 32, 64, 128, 256, 512, 1024)
# An encoder layer's index in the names of the families that number their layers (BERT, RoBERTa, ELECTRA:
# encoder.layer.N; DistilBERT: transformer.layer.N; ModernBERT: layers.N); ALBERT's shared groups are not layers.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:(?:encoder|transformer)\.layer|layers)\.(\d+)\.")


def vocabulary_mismatch(num_tokens: int, vocab_size: int, explicit_ids: bool = False) -> str | None:
    """Why a vocabulary of `num_tokens` ids cannot go with `vocab_size` embeddings, or None when it can; a
    vocabulary whose files state its ids (`explicit_ids`) goes with any table that has a row for each."""
    if num_tokens > vocab_size:
        return "some tokens would have no embedding"
    if explicit_ids:
        return None
    if num_tokens < vocab_size and not any(vocab_size == -(-num_tokens // m) * m for m in VOCAB_PADDING_MULTIPLES):
        return ("a vocabulary may be shorter only by the padding that rounds its size up to a multiple of a power "
                f"of two from {VOCAB_PADDING_MULTIPLES[0]} to {VOCAB_PADDING_MULTIPLES[-1]}")
    return None


def read_config(folder: Path) -> BertConfig:
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


def vocabulary_note(num_tokens: int, vocab_size: int) -> str | None:
    """The vocabulary against the embedding table in words, for a model's description; None when they agree."""
    if num_tokens == vocab_size:
        return None
    unused = vocab_size - num_tokens
    return f"{num_tokens:,} tokens for {vocab_size:,} embedding rows ({unused:,} unused)"


def check_vocabulary(folder: Path, tokenizer: BertTokenizer | PretrainedTokenizer, vocab_size: int) -> str | None:
    """The vocabulary fits the embedding table: as many tokens as rows, or fewer where its files state every id
    (`explicit_ids`: the rows past them are unused), or where the table is padded (its size rounded up,
    VOCAB_PADDING_MULTIPLES) and the tokenizer files record that the vocab.txt really has that many tokens
    (`recorded_vocab_sizes`). Returns what the model's description says of a shorter vocabulary (vocabulary_note);
    CheckpointError naming the files and the counts where it does not fit."""
    vocab_path = tokenizer.vocab_file or folder / VOCAB_FILE
    num_tokens = tokenizer.vocab_size
    if reason := vocabulary_mismatch(num_tokens, vocab_size, tokenizer.explicit_ids):
        raise CheckpointError(f"{vocab_path} has {num_tokens} tokens but {CONFIG_FILE} says vocab_size "
                              f"{vocab_size}: {reason}. The vocabulary does not belong to these weights; use the "
                              f"{vocab_path.name} that came with them")
    if num_tokens == vocab_size or tokenizer.explicit_ids:
        return vocabulary_note(num_tokens, vocab_size)
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
    return vocabulary_note(num_tokens, vocab_size)


def check_sizes(config: BertConfig, state_dict: dict[str, torch.Tensor], folder: Path) -> None:
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


def check_weights(skeleton: BertPreTrainedModel, state_dict: dict[str, torch.Tensor], folder: Path) -> bool:
    """Every tensor the architecture expects is there with its shape, finite, and nothing unknown is; returns
    whether the checkpoint carried the model's head (always True for a task model, whose head is required).
    `skeleton` may live on the meta device."""
    prefix = encoder_prefix(skeleton)
    tied = tied_names(skeleton)
    expected = {name: tensor for name, tensor in skeleton.state_dict().items()
                if name not in tied and not name.endswith(BUFFER_SUFFIXES)}
    head_names = {name for name in expected if not name.startswith(prefix)}
    has_head = bool(head_names & state_dict.keys())
    required = set(expected)
    if heads_may_be_absent(skeleton) and not has_head:
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
