"""What several benchmarks need alike: an input of an exact length, the load they were measured under, and on a
GPU the two things every timed step needs (autocast, waiting for the device before reading the clock)."""

from __future__ import annotations

import contextlib
import os

import torch

_WORDS = ("the quick brown fox jumps over the lazy dog while a bank by the river keeps the money of people "
          "who walk along the water in the evening and talk about the weather and the king").split()


def text_of_length(tokenizer, tokens: int) -> str:
    """A corpus-like text that encodes to exactly `tokens` positions with [CLS] and [SEP]."""
    text, index = "", 0
    while len(tokenizer.encode(text or "a", max_length=4096).tokens) < tokens:
        text = f"{text} {_WORDS[index % len(_WORDS)]}".strip()
        index += 1
    while len(tokenizer.encode(text, max_length=4096).tokens) > tokens:
        text = text.rsplit(" ", 1)[0]
    return text


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages: on a shared machine, read a benchmark's ratios against these."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def synchronize(device: torch.device | str) -> None:
    """Wait for the work queued on `device` (CUDA), so that a clock read next times what the device did; nothing
    elsewhere (the CPU's work is done when its call returns)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, dtype: torch.dtype):
    """Autocast to `dtype` on `device`, as the trainer's bf16 does; no context at all for float32."""
    return torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
