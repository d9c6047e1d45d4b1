"""How a checkpoint's tensor names meet a model's: the encoder's prefix, tied parameters stored once, buffers never
read, each family's head names, and the spellings found in the wild (no prefix, TF-era gamma/beta) mapped onto
this package's names."""

from __future__ import annotations

import torch

from bertcore.models.families import base_model_name
from bertcore.models.heads import PretrainingHeads

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
