"""What a model's inputs must be, checked before the first layer, so that a wrong input gets a clear message."""

from __future__ import annotations

import torch

from bertcore.models.config import BertConfig


def check_inputs(config: BertConfig, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                 attention_mask: torch.Tensor | None) -> None:
    """A clear ValueError for inputs that would otherwise fail deep inside the model with an IndexError (or, on
    a GPU, a device-side assert that ends the process): an empty batch, ids outside the vocabulary, segment ids
    outside type_vocab_size, tensors of different shapes. Cheap: shapes, then one min and max per tensor, read
    back together; the value check is skipped while torch.compile or torch.jit traces the model."""
    if input_ids.dim() != 2 or input_ids.numel() == 0:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; the model takes a (batch, positions) "
                         "tensor of token ids with at least one row and one position")
    if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids holds {input_ids.dtype} values; token ids are integers (torch.long)")
    for name, tensor in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
        if tensor is not None and tensor.shape != input_ids.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {tuple(input_ids.shape)}; "
                             "both give one value per (row, position)")
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return
    checked = [(input_ids, "input_ids", config.vocab_size,
                "token ids of its vocabulary, 0..{}; were the ids made by another tokenizer?")]
    if token_type_ids is not None:
        checked.append((token_type_ids, "token_type_ids", config.type_vocab_size,
                        "segment ids 0..{} (0 for sentence A, 1 for sentence B)"))
    extremes = torch.stack([torch.stack([tensor.min(), tensor.max()]).long() for tensor, *_ in checked]).tolist()
    for (lowest, highest), (_, name, size, what) in zip(extremes, checked, strict=True):
        if lowest < 0 or highest >= size:
            raise ValueError(f"{name} holds {lowest if lowest < 0 else highest}; this model takes "
                             + what.format(size - 1))
