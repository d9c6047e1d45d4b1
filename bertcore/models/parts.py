"""What every family's model is built from, in one home: the pieces the six families share, whatever their layout.

In reading order: the label a loss leaves out (`IGNORE_INDEX`) and the activations config.json names; dropout
with a cheaper CPU mask; the checks every model's inputs pass before the first layer, and what every encoder
derives from its inputs (`prepare_encoder_inputs`); which positions the encoder's flat hidden
states hold (`TokenRows`); reading a family's config.json values (`fields_of_family`); and which pretraining heads
a model class carries and whether they came trained with its weights (`ModelHeads`, `PretrainingHeads`).

Each family's own classes live in its module (bert.py, roberta.py, distilbert.py, electra.py, albert.py,
modernbert.py), the task heads every family shares in task_heads.py, and the registry of families in families.py.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.config import BertConfig

IGNORE_INDEX = -100  # the label of a position left out of a loss (MLM, tagging): masking, data and heads share it

# The activations config.json's hidden_act names, as transformers computes them.
ACTIVATION_FUNCTIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


# ---- dropout as every encoder of the family uses it: torch's, with a cheaper keep mask on the CPU

_LEVELS = 1 << 16  # a CPU keep mask reads 16 random bits per value


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout: zero each value with probability p, scale the rest by 1 / (1 - p), in training only.

    On the CPU the keep mask reads 16 random bits per value, four to each 64-bit draw of torch's generator, and
    keeps a value where they are at least p · 2^16: Bernoulli(1 - p) with p rounded to a multiple of 2^-16
    (0.1 -> 0.100006). torch's bernoulli_ spends a whole draw and a float conversion on each value: 5.8 ms per
    million values on one thread here, a float32 uniform 3.2, these bits 0.8; the masks were 8 % of a pretraining
    step. Elsewhere (CUDA's fused kernel) F.dropout.
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, True)
    draws = torch.empty((x.numel() + 3) // 4, dtype=torch.int64).random_(torch.iinfo(torch.int64).min, None)
    bits = draws.view(torch.int16)[: x.numel()].view(x.shape)  # uniform on [-2^15, 2^15)
    keep = torch.empty(x.shape, dtype=x.dtype)  # the comparison written as 1.0 / 0.0 straight into x's dtype
    torch.ge(bits, round(p * _LEVELS) - _LEVELS // 2, out=keep)  # probability 1 - round(p * 2^16) / 2^16
    return x * keep.mul_(1.0 / (1.0 - p))  # 1 / (1 - p) or 0


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout` (the cheaper CPU mask); no parameters, so the module tree stays HF's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


# ---- what a model's inputs must be, checked before the first layer, so that a wrong input gets a clear message

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


def prepare_encoder_inputs(
    config: BertConfig,
    input_ids: torch.Tensor,
    token_type_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    head_mask: torch.Tensor | None,
    num_attention_layers: int,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """What every model checks and derives from its inputs before its embeddings (BertModel and the families
    around another encoder alike): (token_type_ids (B, T), key_padding_mask (B, 1, 1, T) or None, head_mask in the
    model's dtype or None)."""
    check_inputs(config, input_ids, token_type_ids, attention_mask)
    seq_len = input_ids.size(1)
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"the input has {seq_len} positions; this model accepts at most "
                         f"{config.max_position_embeddings} — truncate it (tokenizer.encode(max_length=...))")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    key_padding_mask = None
    if attention_mask is not None and not bool(attention_mask.all()):
        key_padding_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): True = may attend
    if head_mask is not None:
        expected = (num_attention_layers, config.num_attention_heads)
        if tuple(head_mask.shape) != expected:
            raise ValueError(f"head_mask has shape {tuple(head_mask.shape)}; this model takes one multiplier per "
                             f"(attention layer, head): {expected}")
        head_mask = head_mask.to(device=input_ids.device, dtype=dtype)
    return token_type_ids, key_padding_mask, head_mask


# ---- which positions of a padded (B, T) batch the encoder's flat (N, D) hidden states hold: every one, or only those
# a head will read (and the real tokens), so that the dense layers skip the rest

class TokenRows:
    """Which (sequence, position) of the padded batch each row of the encoder's (N, D) hidden states holds.

    Either every position (N = B × T; pad and unpad are free reshapes) or only the `kept` ones: then the
    projections, feed-forward and LayerNorms run on real tokens only, and attention alone sees the padded
    (B, T) grid, where a left-out position is a zero row that the key padding mask hides.
    """

    def __init__(self, batch_size: int, seq_len: int, kept: torch.Tensor | None = None):
        self.batch_size, self.seq_len = batch_size, seq_len
        self.index = None if kept is None else kept.flatten().nonzero().squeeze(1)  # (N,) of b * T + t
        self.row_of_position = None if kept is None else kept.flatten().cumsum(0) - 1  # (B * T,) -> row in N

    def pad(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, F) -> (B, T, F), zeros at the positions left out."""
        if self.index is None:
            return rows.view(self.batch_size, self.seq_len, -1)
        grid = rows.new_zeros(self.batch_size * self.seq_len, rows.size(-1)).index_copy(0, self.index, rows)
        return grid.view(self.batch_size, self.seq_len, -1)

    def unpad(self, grid: torch.Tensor) -> torch.Tensor:
        """(B, T, F) -> (N, F)."""
        flat = grid.reshape(self.batch_size * self.seq_len, -1)
        return flat if self.index is None else flat.index_select(0, self.index)

    def at(self, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The rows (N, F) at positions (B, M) of each sequence: (B, M, F). Each position must be kept."""
        flat_positions = positions + torch.arange(self.batch_size, device=positions.device)[:, None] * self.seq_len
        return rows[flat_positions if self.index is None else self.row_of_position[flat_positions]]


# ---- a family's config.json values

def fields_of_family(config_class: type, values: dict[str, Any], model_type: str) -> dict[str, Any]:
    """A config.json's values without model_type, for BertConfig.from_dict to read; an error naming the
    family when they belong to another one."""
    if values.get("model_type", model_type) != model_type:
        raise ValueError(f"model_type is {values['model_type']!r}; {config_class.__name__} reads {model_type!r} "
                         "configs — build this model from the config class of its own family")
    return {key: value for key, value in values.items() if key != "model_type"}


# ---- which pretraining heads a model class carries, and whether they came trained with its weights: said once.
# A class whose heads may be missing from a checkpoint (BertForPreTraining, RobertaForMaskedLM, ALBERT's and
# ELECTRA's pretraining classes…) mixes in `PretrainingHeads` before its family's base and names its heads in
# `PRETRAINING_HEADS`. The loader sets `has_pretraining_heads = False` when the weights were a bare encoder's (the
# heads' outputs then mean nothing, and they are not saved); the pretraining Trainer sets it back to True. What the
# analyses and views ask, each `has_*_head`, follows from the two.

HEAD_KINDS = ("mlm", "nsp", "sop", "rtd")  # masked LM, next sentence, sentence order, replaced-token detection


class ModelHeads:
    """Every model's answers, from its class: a bare encoder or a task model names no pretraining heads."""

    PRETRAINING_HEADS: ClassVar[frozenset[str]] = frozenset()  # a subset of HEAD_KINDS

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        unknown = set(cls.PRETRAINING_HEADS) - set(HEAD_KINDS)
        if unknown:
            raise TypeError(f"{cls.__name__}.PRETRAINING_HEADS names {sorted(unknown)}; the kinds are {HEAD_KINDS}")

    @property
    def has_pretraining_heads(self) -> bool:
        """Whether this class's own pretraining head(s) came trained with its weights: the flag the loader sets
        (False for a bare encoder loaded into a class that can lack its heads; then they are not saved) and the
        pretraining Trainer sets back to True. A task model carries its own head instead, so it answers False.

        It is not the question "what can this model predict?": analyses and views ask the `has_*_head` below.
        ALBERT's sentence-order head is not an NSP head: its has_nsp_head is False."""
        return False

    @property
    def _heads_trained(self) -> bool:
        return True  # a class whose heads cannot be missing from its checkpoint

    @property
    def trained_heads(self) -> frozenset[str]:
        """The pretraining heads it carries trained (a subset of HEAD_KINDS): empty for a bare encoder, a task model
        or a class loaded without its heads."""
        return frozenset(self.PRETRAINING_HEADS) if self._heads_trained else frozenset()

    @property
    def has_mlm_head(self) -> bool:
        """A trained masked-LM head (`mlm_logits`)."""
        return "mlm" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_nsp_head(self) -> bool:
        """A trained next-sentence head (`cls.seq_relationship` on the pooled [CLS] vector)."""
        return "nsp" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_sop_head(self) -> bool:
        """A trained sentence-order head (ALBERT's `sop_classifier`, read with `sentence_order_logits`)."""
        return "sop" in self.PRETRAINING_HEADS and self._heads_trained

    @property
    def has_replaced_token_head(self) -> bool:
        """A trained replaced-token discriminator (ELECTRA's `replaced_token_logits`)."""
        return "rtd" in self.PRETRAINING_HEADS and self._heads_trained


class PretrainingHeads(ModelHeads):
    """A class whose heads may be missing from a checkpoint: the flag is settable, and every answer follows it."""

    _has_pretraining_heads = True  # until the loader finds the checkpoint without them

    @property
    def has_pretraining_heads(self) -> bool:
        return self._has_pretraining_heads

    @has_pretraining_heads.setter
    def has_pretraining_heads(self, value: bool) -> None:
        self._has_pretraining_heads = bool(value)

    @property
    def _heads_trained(self) -> bool:
        return self._has_pretraining_heads
