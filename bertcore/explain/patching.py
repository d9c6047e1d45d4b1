"""Activation patching: which activations carry what makes the clean input's prediction differ from a corrupted one.

Two runs of the same length: the clean input and a corrupted one (a word of A or B edited). The target's logit f
is computed on the corrupted input with one activation copied over from the clean run; the score is normalised,

    score = (f_patched − f_corrupted) / (f_clean − f_corrupted),

so 0 means the patch restored nothing and 1 that it restored the clean logit entirely (values outside [0, 1]
happen: a patch can overshoot or push the other way).

- over="residual": one (layer, position) of the residual stream, the output of layer l (1..L, every layer's
  output, the embeddings not included) at position t. scores (L, T).
- over="heads": one (layer, head): that head's output at every position, the slice of the context that enters
  the output projection (before W_O), as head-level patching does (e.g. Wang et al. 2022, IOI). scores (L, H).

Batched: all patches of one layer run as one batch (split only where a batch would exceed a memory budget), and
a patch at layer l runs only the layers from l (or l + 1) on, from the corrupted run's cached residual stream:
the layers before it are the corrupted run's exactly. This is done on a view of the model that shares its weights
(`_tail_view`), so the model itself is never modified and can serve other callers meanwhile.

When f_clean == f_corrupted there is no difference to restore: the scores are NaN and `note` says why; the raw
patched logits are still there.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.errors import ExplainError
from bertcore.explain.mixing import encoder_layers
from bertcore.explain.targets import (
    SEQUENCE_TARGETS,
    Target,
    base_model,
    check_finite,
    check_target,
    check_weights_finite,
    target_logit,
)
from bertcore.models.families import base_model_name
from bertcore.tokenization.wordpiece import Encoding

PATCH_OVER = ("residual", "heads")

# Floats of residual stream per patched batch (64 MB): MiniLM at 64 tokens patches a whole layer in one batch,
# bert-base at 512 tokens 42 positions at a time.
_BATCH_BUDGET = 1 << 24


@dataclass(frozen=True)
class Patching:
    over: str  # "residual" or "heads"
    target: Target
    scores: np.ndarray  # float32, 0 = corrupted, 1 = clean: residual (L, T) of layer outputs 1..L; heads (L, H)
    patched_values: np.ndarray  # float32, the same shape: the target's raw logit with that patch
    clean_value: float  # f on the clean input
    corrupted_value: float  # f on the corrupted input
    note: str | None = None  # why the scores are NaN (no difference to restore), else None
    layers_done: int = 0  # rows of scores measured so far (all of them in the final result); the rest are NaN


def activation_patching(model: nn.Module, tokenizer, clean: Encoding, corrupted: Encoding, target: Target, *,
                        over: str = "residual") -> Patching:
    """The restoration each patch brings (see the module docstring); runs activation_patching_progress to its end."""
    return run_to_end(activation_patching_progress(model, tokenizer, clean, corrupted, target, over=over)).result


def activation_patching_progress(model: nn.Module, tokenizer, clean: Encoding, corrupted: Encoding, target: Target,
                                 *, over: str = "residual") -> Iterator[Progress[Patching]]:
    """activation_patching as a generator: one record per layer patched (done = layers, total = L), each with
    the Patching so far (rows not yet run are NaN)."""
    del tokenizer  # the encodings hold the ids; the parameter keeps the Explain API's one signature
    if over not in PATCH_OVER:
        raise ExplainError(f"activation patching over {over!r} is unknown; use 'residual' (one layer and position "
                           "at a time) or 'heads' (one layer and head at a time)")
    if len(clean) != len(corrupted):
        raise ExplainError(
            f"the clean input has {len(clean)} positions and the corrupted one {len(corrupted)}; patching copies "
            "activations position by position between the two runs, so both must have the same length — replace "
            "a word by one that splits into as many tokens, or edit a token rather than insert or delete one")
    if list(clean.attention_mask) != list(corrupted.attention_mask):
        raise ExplainError("the clean and corrupted inputs pad different positions; encode both to the same "
                           "real length so that position t means the same place in both runs")
    target = check_target(model, clean, target)
    check_target(model, corrupted, target)
    check_weights_finite(model)
    device = next(model.parameters()).device
    real = int(sum(clean.attention_mask))  # trailing padding is read by no head and is never a key: left out
    if list(clean.attention_mask[:real]) != [1] * real:
        raise ExplainError("the inputs have padding before real tokens; encode them without padding")
    clean_inputs, corrupted_inputs = (_inputs(encoding, real, device) for encoding in (clean, corrupted))
    layers = encoder_layers(model)
    num_layers, seq_len = len(layers), len(clean)
    num_heads = model.config.num_attention_heads
    shape = (num_layers, seq_len) if over == "residual" else (num_layers, num_heads)
    patched = np.full(shape, np.nan, np.float32)
    with eval_mode(model), torch.inference_mode():
        clean_value = float(target_logit(model, target, **clean_inputs)[0])
        corrupted_value = float(target_logit(model, target, **corrupted_inputs)[0])
        check_finite(clean_value, "the target's logit on the clean input")
        check_finite(corrupted_value, "the target's logit on the corrupted input")
        clean_stream = _layer_inputs(model, clean_inputs)  # L of (1, T, D): what enters each layer
        corrupted_stream = _layer_inputs(model, corrupted_inputs)
        difference = clean_value - corrupted_value
        note = None
        if abs(difference) <= 1e-6 * max(1.0, abs(clean_value), abs(corrupted_value)):
            note = (f"the clean and corrupted inputs give the target the same logit ({clean_value:.6g}), so there "
                    "is no difference for a patch to restore and the scores are undefined (NaN); corrupt a token "
                    "the target depends on")

        def result(layers_done: int) -> Patching:
            scores = (np.full(shape, np.nan, np.float32) if note is not None
                      else ((patched - corrupted_value) / difference).astype(np.float32))
            return Patching(over, target, scores, patched.copy(), clean_value, corrupted_value, note, layers_done)

        clean_contexts = _clean_contexts(model, layers, target, clean_inputs) if over == "heads" else None
        for layer in range(num_layers):
            if over == "residual":
                values = _patch_residual(model, layers, target, layer, real, clean_stream, corrupted_stream,
                                         corrupted_inputs)
                patched[layer, :real] = values.cpu().numpy()
            else:
                values = _patch_heads(model, layers, target, layer, num_heads, clean_contexts[layer],
                                      corrupted_stream, corrupted_inputs)
                patched[layer] = values.cpu().numpy()
            yield Progress(layer + 1, num_layers, result(layer + 1))


def _inputs(encoding: Encoding, length: int, device: torch.device) -> dict[str, torch.Tensor]:
    def row(values) -> torch.Tensor:
        return torch.tensor([list(values)[:length]], dtype=torch.long, device=device)  # (1, T)

    return {"input_ids": row(encoding.input_ids), "token_type_ids": row(encoding.segment_ids),
            "attention_mask": row(encoding.attention_mask)}


def _layer_inputs(model: nn.Module, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The residual stream entering each layer, L of (1, T, D) (ALBERT: after its embedding mapping)."""
    outputs = base_model(model)(inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                                attention_mask=inputs["attention_mask"], output_hidden_states=True)
    return list(outputs.hidden_states[:-1])  # the last entry is the output (ModernBERT's after its final norm)


def _batches(count: int, seq_len: int, width: int) -> Iterator[range]:
    rows = max(1, _BATCH_BUDGET // (seq_len * width))
    for start in range(0, count, rows):
        yield range(start, min(count, start + rows))


def _run_tail(model: nn.Module, start: int, target: Target, stream: torch.Tensor, inputs: dict[str, torch.Tensor],
              hooks: list[tuple[nn.Module, str, Callable]]) -> torch.Tensor:
    """The target's logit (B,) running layers start.. on `stream` (B, T, D), the residual stream entering layer
    `start`, with hooks ("forward" or "forward_pre", on modules of those layers) in place for the call."""
    view = _tail_view(model, start)
    batch_size = stream.size(0)
    handles = []
    try:
        for module, kind, hook in hooks:
            register = module.register_forward_hook if kind == "forward" else module.register_forward_pre_hook
            handles.append(register(this_thread_only(hook)))
        return target_logit(view, target, inputs_embeds=stream,
                            **{name: tensor.expand(batch_size, -1) for name, tensor in inputs.items()})
    finally:
        for handle in handles:
            handle.remove()


def this_thread_only(hook: Callable) -> Callable:
    """The hook, acting only on forward passes of the thread that made it: the layers are the model's own, and the
    app may inspect the same model in another thread meanwhile (as targets' embedding override does)."""
    thread = threading.get_ident()

    def guarded(*args):
        return hook(*args) if threading.get_ident() == thread else None
    return guarded


def _tail_view(model: nn.Module, start: int) -> nn.Module:
    """A model that shares `model`'s modules and runs only its layers start.. (start < L), reading the residual
    stream entering layer `start` as its embedding output (target_logit's inputs_embeds). Shallow copies of the
    model, its encoder and the encoder's layer container get their own module tables; nothing of `model` changes."""
    def detached(module: nn.Module) -> nn.Module:
        twin = copy.copy(module)
        twin._modules = dict(module._modules)  # its own table: setting a child here leaves the original alone
        return twin

    view = detached(model)
    name = base_model_name(model)
    base = detached(getattr(model, name))
    view._modules[name] = base
    base._modules["embeddings"] = _SkippedEmbeddings(base.embeddings)
    tail = encoder_layers(model)[start:]
    if hasattr(base, "layers"):  # ModernBERT
        base._modules["layers"] = nn.ModuleList(tail)
    elif hasattr(base, "transformer"):  # DistilBERT
        transformer = detached(base.transformer)
        transformer._modules["layer"] = nn.ModuleList(tail)
        base._modules["transformer"] = transformer
    else:
        encoder = detached(base.encoder)
        if hasattr(encoder, "layers_in_order"):  # ALBERT: the stream is already hidden_size wide
            encoder._modules["embedding_hidden_mapping_in"] = nn.Identity()
            encoder.layers_in_order = lambda: iter(tail)
        else:
            encoder._modules["layer"] = nn.ModuleList(tail)
        base._modules["encoder"] = encoder
        base._modules.pop("embeddings_project", None)  # ELECTRA: the stream is already projected
    return view


class _SkippedEmbeddings(nn.Module):
    """Where a tail view's embedding layer was: computes nothing, since target_logit's inputs_embeds replaces its
    output. It keeps the word embeddings' weight in sight, whose dtype the encoders read."""

    def __init__(self, embeddings: nn.Module):
        super().__init__()
        self.word_embeddings = getattr(embeddings, "word_embeddings", None) or embeddings.tok_embeddings

    def forward(self, *args, **kwargs) -> None:
        return None


def _read_position(target: Target) -> int:
    """The one position a pretraining head reads ([CLS] for NSP and SOP)."""
    kind, *values = target
    return 0 if kind in SEQUENCE_TARGETS else values[0]


def _patch_residual(model, layers, target, layer, real, clean_stream, corrupted_stream, inputs) -> torch.Tensor:
    """f with layer `layer`'s output at one position copied from the clean run, for every position: (T,)."""
    num_layers = len(layers)
    width = clean_stream[0].size(-1)
    values = []
    if layer + 1 < num_layers:
        # The output of layer l is the stream entering layer l + 1: patch it there and run the rest.
        for rows in _batches(real, real, width):
            positions = torch.tensor(list(rows), device=clean_stream[0].device)
            stream = corrupted_stream[layer + 1].expand(len(rows), -1, -1).clone()  # (B, T, D)
            stream[torch.arange(len(rows)), positions] = clean_stream[layer + 1][0, positions]
            values.append(_run_tail(model, layer + 1, target, stream, inputs, []))
        return torch.cat(values)
    # The last layer: its output is patched as it leaves the layer, in whatever layout the layer returns it
    # (BERT's last layer runs at the target's position alone when the head reads one position).
    last = layers[-1]
    recorded = []
    _run_tail(model, layer, target, clean_stream[layer], inputs,
              [(last, "forward", lambda module, args, output: recorded.append(output[0].clone()) and None)])
    clean_output = recorded[0]
    for rows in _batches(real, real, width):
        positions = torch.tensor(list(rows), device=clean_output.device)

        def patch(module, args, output, positions=positions):
            hidden = output[0]
            grid = hidden.view(positions.numel(), -1, hidden.size(-1))  # (B, T or 1, D)
            clean_grid = clean_output.view(1, -1, hidden.size(-1))
            if grid.size(1) == 1:  # only the read position was computed: only its own patch changes it
                hit = positions == _read_position(target)
                grid[hit] = clean_grid[0]
            else:
                grid[torch.arange(positions.numel()), positions] = clean_grid[0, positions]
            return output

        stream = corrupted_stream[layer].expand(len(rows), -1, -1)
        values.append(_run_tail(model, layer, target, stream, inputs, [(last, "forward", patch)]))
    return torch.cat(values)


def output_projection(layer: nn.Module) -> nn.Linear:
    """The layer's attention output projection W_O, whose input is the heads' concatenated outputs."""
    if hasattr(layer, "attn"):  # ModernBERT
        return layer.attn.Wo
    if hasattr(layer, "sa_layer_norm"):  # DistilBERT
        return layer.attention.out_lin
    if hasattr(layer, "ffn_output"):  # ALBERT
        return layer.attention.dense
    return layer.attention.output.dense  # BERT, RoBERTa, ELECTRA


def _clean_contexts(model, layers, target, inputs) -> list[torch.Tensor]:
    """Each layer's heads' outputs on the clean input (the input of W_O), in the layout the run gives them."""
    contexts: list[torch.Tensor] = []
    handles = []
    projections = {id(output_projection(layer)): output_projection(layer) for layer in layers}  # ALBERT: shared
    try:
        for projection in projections.values():
            handles.append(projection.register_forward_pre_hook(
                this_thread_only(lambda module, args: contexts.append(args[0].clone()) and None)))
        target_logit(model, target, **inputs)
    finally:
        for handle in handles:
            handle.remove()
    return contexts  # called in layer order: contexts[l] is layer l's


def _patch_heads(model, layers, target, layer, num_heads, clean_context, corrupted_stream, inputs) -> torch.Tensor:
    """f with one head of layer `layer` copied from the clean run, for every head: (H,)."""
    projection = output_projection(layers[layer])
    width = clean_context.size(-1)
    head_dim = width // num_heads
    seq_len = corrupted_stream[layer].size(1)
    values = []
    for rows in _batches(num_heads, seq_len, width):
        heads = list(rows)
        calls = []

        def patch(module, args, heads=heads, calls=calls):
            calls.append(None)
            if len(calls) > 1:  # ALBERT's later passes through the same weights are not this layer
                return None
            context = args[0].clone()
            grid = context.view(len(heads), -1, width)  # (B, T or M, D)
            clean_grid = clean_context.view(1, -1, width)
            for row, head in enumerate(heads):
                columns = slice(head * head_dim, (head + 1) * head_dim)
                grid[row, :, columns] = clean_grid[0, :, columns]
            return (context, *args[1:])

        stream = corrupted_stream[layer].expand(len(heads), -1, -1)
        values.append(_run_tail(model, layer, target, stream, inputs, [(projection, "forward_pre", patch)]))
    return torch.cat(values)
