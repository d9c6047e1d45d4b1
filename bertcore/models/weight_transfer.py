"""Starting a task model from a pretrained model's weights: the encoder (and pooler) copied over, the head new,
and a WeightTransfer saying which tensors were loaded, newly initialised and dropped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertcore.models.task_heads import TaskModel


@dataclass(frozen=True)
class WeightTransfer:
    """What starting a model from another's weights did, by parameter name."""

    loaded: tuple[str, ...]  # copied from the source
    initialised: tuple[str, ...]  # new: not in the source (the task head; the pooler if the source had none)
    dropped: tuple[str, ...]  # in the source but not in this model (e.g. the pretraining heads cls.*)

    def __str__(self) -> str:
        return (f"{len(self.loaded)} tensors loaded; newly initialised: {_names(self.initialised)}; "
                f"dropped: {_names(self.dropped)}")


def start_from_pretrained(
    model_class: type[TaskModel],
    config: Any,
    source: nn.Module | Mapping[str, torch.Tensor],
) -> tuple[TaskModel, WeightTransfer]:
    """A new `model_class` (a task head) whose encoder (and pooler) come from `source`.

    source: a model (e.g. a loaded BertForPreTraining or RobertaForMaskedLM) or its state dict, with this
    package's parameter names (`bert.embeddings...`, `roberta.encoder...`, as `checkpoint.load_pretrained`
    gives). config: the task's config, usually the source's with the task fields set:
    `pretrained.config.replace(num_labels=3, id2label=...)`. The encoder must be complete and of the same shape;
    the head (and a missing pooler) is freshly initialised from torch's global RNG (seed it for a reproducible
    start).
    """
    state_dict = source.state_dict() if isinstance(source, nn.Module) else dict(source)
    model = model_class(config)
    own = model.state_dict()
    prefix = model_class.base_model_prefix + "."
    missing_encoder = sorted(name for name in own.keys() - state_dict.keys()
                             if name.startswith(prefix) and ".pooler" not in name)
    if missing_encoder:
        raise ValueError(f"the source lacks {len(missing_encoder)} encoder tensor(s), e.g. {_names(missing_encoder)}; "
                         f"start from a {model_class.__name__.split('For')[0]} checkpoint with the same number of "
                         "layers")
    loaded = sorted(own.keys() & state_dict.keys())
    for name in loaded:
        if state_dict[name].shape != own[name].shape:
            raise ValueError(f"tensor {name} has shape {tuple(state_dict[name].shape)} in the source but "
                             f"{tuple(own[name].shape)} in the new model; build the task config from the "
                             "source's config (source.config.replace(num_labels=...))")
    with torch.no_grad():
        for name in loaded:
            own[name].copy_(state_dict[name])
    return model, WeightTransfer(
        loaded=tuple(loaded),
        initialised=tuple(sorted(own.keys() - state_dict.keys())),
        dropped=tuple(sorted(state_dict.keys() - own.keys())),
    )


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "") if names else "none"
