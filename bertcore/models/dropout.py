"""Dropout as every encoder of the family uses it: torch's, with a cheaper keep mask on the CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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
