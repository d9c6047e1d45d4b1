"""What any training loop is set up with: the device, bf16 autocast, the process group, AdamW and its decay
groups, and the checkpoint's trainer state. Shared by pretraining and fine-tuning (bertcore.training.loop)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from bertcore.errors import RunFolderError
from bertcore.files.reading import open_regular_file

TRAINER_STATE_VERSION = 1


def warm_up() -> float:
    """Pay one-off import/first-call costs (AdamW's first construction imports torch._dynamo, ~1 s holding the
    GIL) so a GUI can do it before its window shows. Returns the seconds spent."""
    start = time.perf_counter()
    import bertcore.models.bert  # noqa: F401

    parameter = nn.Parameter(torch.zeros(4))
    parameter.grad = torch.zeros(4)
    make_optimizer([parameter], lr=1e-3).step()
    return time.perf_counter() - start


def make_optimizer(param_groups, lr: float, betas=(0.9, 0.999), eps: float = 1e-6) -> torch.optim.AdamW:
    """AdamW, fused where the device supports it (CPU, CUDA, MPS), else the multi-tensor (foreach) kernel."""
    try:
        return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(param_groups, lr=lr, betas=betas, eps=eps, foreach=True)


def weight_decay_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW groups: decayed weights, and biases + LayerNorm parameters without decay (tied tensors once)."""
    decay, no_decay, seen = [], [], set()
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad or id(parameter) in seen:
            continue
        seen.add(id(parameter))
        (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """'auto' -> CUDA (this process's local rank), then MPS, then CPU; an explicit name must be available."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"device {name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} was asked for but this PyTorch sees no CUDA GPU; use --device cpu")
        if device.index is None:
            device = torch.device("cuda", local_rank % torch.cuda.device_count())
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} was asked for but MPS is not available; use --device cpu")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 for "bf16", and for "auto" on a CUDA device that supports it; None (fp32) otherwise."""
    use_bf16 = precision == "bf16" or (
        precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.bfloat16 if use_bf16 else None


def process_group_backend() -> str | None:
    """The backend of the torch.distributed process group this process joined ("nccl", "gloo"), or None."""
    return dist.get_backend() if dist.is_available() and dist.is_initialized() else None


def distributed() -> tuple[int, int, int]:
    """(rank, world_size, local_rank); (0, 1, 0) unless torch.distributed is initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    return 0, 1, 0


def is_out_of_memory(error: BaseException) -> bool:
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", ())
    return isinstance(error, oom_type) or "out of memory" in str(error).lower()


def read_trainer_state(path: Path) -> dict[str, Any]:
    """A checkpoint's trainer_state.pt, checked; RunFolderError naming the file when it is damaged, or is not a
    regular file (a FIFO is refused, never waited on; a link to a device is never read)."""
    advice = "resume from an earlier checkpoint (--resume <run>/checkpoints/step-…) or start a new run"
    try:
        with open_regular_file(path, error=RunFolderError, label="the trainer state") as file:
            state = torch.load(file, map_location="cpu", weights_only=True)
    except RunFolderError as error:  # what is there is not a file: say so, not "damaged"
        raise RunFolderError(f"{error}; {advice}") from None
    except Exception as error:  # truncated, garbage or code: torch raises many types, all meaning "damaged"
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        raise RunFolderError(f"{path} cannot be read ({type(error).__name__}: {first_line}); the trainer state "
                             f"is damaged: {advice}") from None
    if not isinstance(state, dict):
        raise RunFolderError(f"{path} holds a {type(state).__name__}, not a trainer state; {advice}")
    if state.get("version") != TRAINER_STATE_VERSION:
        raise RunFolderError(f"{path} has an unknown format (version {state.get('version')!r}); it cannot be "
                             f"resumed: {advice}")
    expected = {"step": int, "optimizer": dict, "elapsed_seconds": (int, float)}
    wrong = [key for key, kind in expected.items() if not isinstance(state.get(key), kind)
             or isinstance(state.get(key), bool)]
    if wrong:
        raise RunFolderError(f"{path} lacks a valid {', '.join(wrong)}; the trainer state is damaged: {advice}")
    return state
