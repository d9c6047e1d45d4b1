"""What an explanation explains: one logit of one of the model's heads, named as a small tuple.

    ("mlm", position, token_id)   masked-LM score of a vocabulary token at a position
    ("nsp", label)                next-sentence head (BERT): 0 = IsNext, 1 = NotNext
    ("sop", label)                sentence-order head (ALBERT): 0 = in order, 1 = swapped
    ("rtd", position)             ELECTRA discriminator: the "this token was replaced" logit at a position
    ("class", label)              sequence classification (a regression head has one output: label 0)
    ("tag", position, label)      token classification at a position
    ("start", position)           extractive QA: the answer-start score of a position
    ("end", position)             extractive QA: the answer-end score of a position

Which kinds a model has is read from what its class says it carries (bertcore.models.parts: `has_mlm_head`,
`has_nsp_head`, `has_sop_head`, `has_replaced_token_head`), not from a list of classes, and a task head by
transformers' class-name suffix (`...ForSequenceClassification`,
`...ForTokenClassification`, `...ForQuestionAnswering`) read through its forward's `logits` / `start_logits` /
`end_logits`, so every family's task classes work as they arrive.

`target_logit` is the function every explanation differentiates. It computes only what the target reads: the
pretraining heads at one position (the MLM decoder on one row and for one word, not T rows of a 30k-word
vocabulary) and, on BERT's own encoder, the last layer at that position alone.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import operator
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.errors import ExplainError
from bertcore.models.families import base_model_name
from bertcore.models.parts import ModelHeads

Target = tuple  # ("mlm", position, token_id), ("nsp", label), ...: see the module docstring

# kind -> the names of its fields after the kind, in order
TARGET_FIELDS: dict[str, tuple[str, ...]] = {
    "mlm": ("position", "token_id"),
    "nsp": ("label",),
    "sop": ("label",),
    "rtd": ("position",),
    "class": ("label",),
    "tag": ("position", "label"),
    "start": ("position",),
    "end": ("position",),
}
TARGET_KINDS: tuple[str, ...] = tuple(TARGET_FIELDS)
SEQUENCE_TARGETS = frozenset({"nsp", "sop", "class"})  # read the whole sequence through [CLS], no position

_NSP_LABELS = ("IsNext", "NotNext")
_SOP_LABELS = ("in order", "swapped")


def available_targets(model: nn.Module) -> tuple[str, ...]:
    """The target kinds this model's heads can be asked for, in TARGET_KINDS order; () for a bare encoder."""
    name = type(model).__name__
    kinds = []
    # a module built elsewhere (a test's toy classifier) carries none of the pretraining heads bertcore knows
    heads = model if isinstance(model, ModelHeads) else ModelHeads()
    if heads.has_mlm_head:
        kinds.append("mlm")
    if heads.has_nsp_head:
        kinds.append("nsp")
    if heads.has_sop_head:
        kinds.append("sop")
    if heads.has_replaced_token_head:
        kinds.append("rtd")
    if name.endswith("ForSequenceClassification"):
        kinds.append("class")
    if name.endswith("ForTokenClassification"):
        kinds.append("tag")
    if name.endswith("ForQuestionAnswering"):
        kinds += ["start", "end"]
    return tuple(kinds)


def num_labels(model: nn.Module, kind: str) -> int:
    """How many labels a label-taking target kind has on this model (2 for NSP and SOP unless changed)."""
    if kind == "nsp":
        return model.cls.seq_relationship.out_features
    if kind == "sop":
        return model.config.num_labels
    return int(getattr(model, "num_labels", None) or model.config.num_labels)


def check_target(model: nn.Module, encoding: Any, target: Sequence) -> Target:
    """The target as a plain tuple of a kind and Python ints, checked against the model's heads and the encoding
    (positions inside it and not on padding, token ids inside the vocabulary, labels inside the head).
    ExplainError naming the value, what the model has and the fix, otherwise."""
    if isinstance(target, (str, bytes)) or not isinstance(target, Sequence) or not target:
        raise ExplainError(f"a target is a tuple such as ('mlm', position, token_id) or ('class', label), not "
                           f"{target!r}; the kinds are {', '.join(TARGET_KINDS)}")
    kind, *values = target
    if kind not in TARGET_FIELDS:
        raise ExplainError(f"target kind {kind!r} is unknown; the kinds are {', '.join(TARGET_KINDS)}")
    fields = TARGET_FIELDS[kind]
    if len(values) != len(fields):
        example = ", ".join((repr(kind), *fields))
        raise ExplainError(f"a {kind!r} target is ({example}); {tuple(target)!r} has {len(values)} value(s) after "
                           "the kind")
    available = available_targets(model)
    if kind not in available:
        has = ", ".join(available) if available else "none (a bare encoder: its heads were not in the checkpoint)"
        raise ExplainError(f"{type(model).__name__} has no head for a {kind!r} target; its targets are: {has}")
    checked: list[int] = []
    seq_len = len(encoding.input_ids)
    for field, value in zip(fields, values, strict=True):
        if isinstance(value, bool) or not hasattr(value, "__index__"):  # ints, numpy and 0-d torch integers
            raise ExplainError(f"the {kind!r} target's {field} is {value!r}; it must be an integer")
        value = operator.index(value)
        if field == "position":
            if not 0 <= value < seq_len:
                raise ExplainError(f"the {kind!r} target's position is {value}, but the input has {seq_len} "
                                   f"positions (0..{seq_len - 1}); pick a position inside it")
            if not encoding.attention_mask[value]:
                raise ExplainError(f"the {kind!r} target's position {value} is padding, which no head reads; pick "
                                   f"one of the {sum(encoding.attention_mask)} real positions")
        elif field == "token_id":
            vocab_size = model.config.vocab_size
            if not 0 <= value < vocab_size:
                raise ExplainError(f"the MLM target's token id is {value}, outside the vocabulary of {vocab_size} "
                                   f"(0..{vocab_size - 1}); take it from the tokenizer")
        elif field == "label":
            labels = num_labels(model, kind)
            if not 0 <= value < labels:
                raise ExplainError(f"the {kind!r} target's label is {value}, but {type(model).__name__}'s head has "
                                   f"{labels} output(s) (0..{labels - 1})")
        checked.append(value)
    return (kind, *checked)


def describe_target(target: Target, tokenizer: Any = None, model: nn.Module | None = None) -> str:
    """The target in words for a caption: "MLM: 'cat' at position 3", "NSP: IsNext", "class 'positive'".
    tokenizer names MLM tokens; model (optional) names class and tag labels through config.id2label."""
    kind, *values = target
    if kind == "mlm":
        position, token_id = values
        token = tokenizer.id_to_token(token_id) if tokenizer is not None else f"token {token_id}"
        return f"MLM: {token!r} at position {position}"
    if kind == "nsp":
        return f"NSP: {_label_name(_NSP_LABELS, values[0])}"
    if kind == "sop":
        return f"SOP: {_label_name(_SOP_LABELS, values[0])}"
    if kind == "rtd":
        return f"replaced token at position {values[0]}"
    if kind == "class":
        return f"class {_class_name(model, values[0])}"
    if kind == "tag":
        return f"tag {_class_name(model, values[1])} at position {values[0]}"
    return f"answer {kind} at position {values[0]}"


def check_weights_finite(model: nn.Module) -> None:
    """ExplainError naming the model's NaN or infinite weights (how many, the first by name), before an
    explanation is computed from them: its scores would be NaN, or finite and meaningless (the fused attention
    kernel skips a NaN query where the explicit softmax would spread it). One reduction per tensor (MiniLM's 22 M
    weights: ~15 ms); the values are counted only where one is bad."""
    bad, first = 0, None
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor.sum(dtype=torch.float32))):
                count = int((~torch.isfinite(tensor)).sum())
                if count:
                    bad += count
                    first = first or name
    if bad:
        raise ExplainError(f"the model's weights hold {bad:,} NaN or infinite value(s), the first in {first}, so "
                           "every score made from them would be NaN or meaningless; load a checkpoint whose weights "
                           "are finite (a run that diverged saves NaN weights)")


def check_finite(value: float, what: str) -> None:
    """ExplainError where `value` (an output an explanation is made of, of a model whose weights are finite:
    check_weights_finite) is NaN or infinite: the computation overflowed, and every score made of it would be NaN."""
    if not math.isfinite(value):
        raise ExplainError(f"{what} is {value} on this input although every weight of the model is finite: the "
                           "computation overflowed (weights far too large for float32?), so every score made of it "
                           "would be NaN; check the model")


def model_inputs(encoding: Any, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """An encoding as the model's keyword inputs, batch of one: input_ids, token_type_ids, attention_mask (1, T)."""
    def row(values) -> torch.Tensor:
        return torch.tensor([list(values)], dtype=torch.long, device=device)

    return {"input_ids": row(encoding.input_ids), "token_type_ids": row(encoding.segment_ids),
            "attention_mask": row(encoding.attention_mask)}


def base_model(model: nn.Module) -> nn.Module:
    """The model's encoder (the child with the embeddings: model.bert, model.roberta, model.model, ...)."""
    return getattr(model, base_model_name(model))


def target_logit(
    model: nn.Module,
    target: Target,
    *,
    input_ids: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    head_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The target's logit (B,) for a batch of inputs; differentiable, run under the caller's grad mode and
    train/eval mode (explanations call it in eval mode). `target` must have passed check_target.

    inputs_embeds (B, T, E), if given, is the output of the embedding layer (after its LayerNorm, what
    attributions are taken to, as Captum's LayerIntegratedGradients on the embeddings module): it replaces what
    the embedding layer computes, so positions and segments are already in it; this is not transformers'
    `inputs_embeds` (word vectors before positions are added). input_ids then only give the shape (pad ids if
    absent). Inputs with a batch of one are broadcast to the others' batch."""
    return _run(model, target, input_ids, inputs_embeds, token_type_ids, attention_mask, head_mask, False)[0]


def target_logit_and_attentions(
    model: nn.Module,
    target: Target,
    **model_inputs: torch.Tensor | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """target_logit and every layer's attention probabilities (L of (B, nh, T, T)), in one graph, so that a
    gradient of the logit can be taken with respect to the attentions (gradient-weighted rollout)."""
    keys = ("input_ids", "inputs_embeds", "token_type_ids", "attention_mask", "head_mask")
    logit, attentions = _run(model, target, *(model_inputs.get(key) for key in keys), True)
    return logit, attentions


def _run(model, target, input_ids, inputs_embeds, token_type_ids, attention_mask, head_mask, output_attentions):
    if input_ids is None and inputs_embeds is None:
        raise ExplainError("target_logit needs input_ids or inputs_embeds; pass model_inputs(encoding)")
    base = base_model(model)
    batch_size = max(tensor.size(0) for tensor in (input_ids, inputs_embeds, token_type_ids, attention_mask)
                     if tensor is not None)
    if input_ids is None:
        pad_id = getattr(model.config, "pad_token_id", None) or 0
        input_ids = torch.full(inputs_embeds.shape[:2], pad_id, dtype=torch.long, device=inputs_embeds.device)
    input_ids, token_type_ids, attention_mask = (
        None if tensor is None else tensor.expand(batch_size, -1) for tensor in (input_ids, token_type_ids,
                                                                                 attention_mask))
    kind, *values = target
    inputs = {"token_type_ids": token_type_ids, "attention_mask": attention_mask, "head_mask": head_mask}
    with _embedding_output(base, inputs_embeds):
        if kind in ("class", "tag", "start", "end"):
            outputs = model(input_ids, output_attentions=output_attentions, **inputs)
            if kind == "class":
                logit = outputs.logits[:, values[0]]
            elif kind == "tag":
                logit = outputs.logits[:, values[0], values[1]]
            else:
                logit = (outputs.start_logits if kind == "start" else outputs.end_logits)[:, values[0]]
            return logit, outputs.attentions
        position = 0 if kind in SEQUENCE_TARGETS else values[0]
        query_positions = None
        if not output_attentions and _takes_query_positions(base):
            # BERT's encoder runs its last layer at the positions read alone; the pooler reads row 0.
            query_positions = torch.full((batch_size, 1), position, dtype=torch.long, device=input_ids.device)
        if query_positions is not None:
            outputs = base(input_ids, query_positions=query_positions, **inputs)
            hidden = outputs.last_hidden_state[:, 0]  # (B, D) at the position
        else:
            outputs = base(input_ids, output_attentions=output_attentions, **inputs)
            hidden = outputs.last_hidden_state[:, position]  # (B, D)
        if kind == "mlm":
            logit = _mlm_logit(model, hidden, values[1])
        elif kind == "nsp":
            logit = model.cls.seq_relationship(outputs.pooler_output)[:, values[0]]
        elif kind == "sop":
            logit = model.sop_classifier(outputs.pooler_output)[:, values[0]]
        else:  # rtd
            logit = model.discriminator_predictions(hidden[:, None])[:, 0]  # (B, 1) -> (B,)
        return logit, outputs.attentions


@contextlib.contextmanager
def _embedding_output(base: nn.Module, inputs_embeds: torch.Tensor | None) -> Iterator[None]:
    """Within the block, the embedding layer's output is `inputs_embeds` (None: left as computed). Only for this
    thread: the app may run an inspection of the same model in another thread meanwhile."""
    if inputs_embeds is None:
        yield
        return
    thread = threading.get_ident()

    def replace(module, args, output):
        return inputs_embeds if threading.get_ident() == thread else None

    handle = base.embeddings.register_forward_hook(replace)
    try:
        yield
    finally:
        handle.remove()


class _DecoderReached(Exception):
    """Raised from the vocabulary decoder's pre-hook: its input is all the target needs."""


def _vocabulary_decoder(model: nn.Module) -> nn.Linear | None:
    """The MLM head's last layer: the Linear outside the encoder whose outputs are the vocabulary (every family's
    head ends in one: cls.predictions.decoder, lm_head.decoder, vocab_projector, generator_lm_head, decoder)."""
    inside_encoder = {id(module) for module in base_model(model).modules()}
    for module in model.modules():
        if (isinstance(module, nn.Linear) and module.out_features == model.config.vocab_size
                and id(module) not in inside_encoder):
            return module
    return None


def _mlm_logit(model: nn.Module, hidden: torch.Tensor, token_id: int) -> torch.Tensor:
    """The MLM logit of one token (B,) from final hidden states (B, D): the head up to its decoder, then the
    decoder's one row for that token instead of all V (30,522 rows of which the target reads one)."""
    decoder = _vocabulary_decoder(model)
    if decoder is None:
        return _mlm_logits(model, hidden)[:, token_id]
    thread, caught = threading.get_ident(), []

    def catch(module, args):
        if threading.get_ident() == thread:
            caught.append(args[0])
            raise _DecoderReached

    handle = decoder.register_forward_pre_hook(catch)
    try:
        _mlm_logits(model, hidden)
    except _DecoderReached:
        pass
    finally:
        handle.remove()
    bias = None if decoder.bias is None else decoder.bias[token_id:token_id + 1]
    return F.linear(caught[0], decoder.weight[token_id:token_id + 1], bias)[:, 0]  # (B,)


def _takes_query_positions(base: nn.Module) -> bool:
    return "query_positions" in inspect.signature(base.forward).parameters


def _mlm_logits(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    if hasattr(model, "mlm_logits"):
        return model.mlm_logits(hidden)
    return model.decoder(model.head(hidden))


def _label_name(names: tuple[str, ...], label: int) -> str:
    return names[label] if label < len(names) else f"label {label}"


def _class_name(model: nn.Module | None, label: int) -> str:
    id2label = getattr(getattr(model, "config", None), "id2label", None) or {}
    name = id2label.get(label)
    return repr(name) if name is not None else str(label)
