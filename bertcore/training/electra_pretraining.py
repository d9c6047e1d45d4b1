"""ELECTRA's pretraining model (Clark et al. 2020): a small generator fills the masked positions with samples from
its softmax, the discriminator says of every token whether it was replaced; both train together as one module,
sharing the embeddings. The "rtd" objective (bertcore.training.objectives) builds, saves and scores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.bert import IGNORE_INDEX


@dataclass
class ReplacedTokenDetectionOutput:
    loss: torch.Tensor  # () generator_loss + discriminator_weight × discriminator_loss
    generator_loss: torch.Tensor  # () mean cross-entropy over the masked positions
    discriminator_loss: torch.Tensor  # () mean binary cross-entropy over the real (unpadded) positions
    generator_logits: torch.Tensor  # (N, V) at the masked positions, in the row-major order of labels[labelled]
    discriminator_logits: torch.Tensor  # (B, T): > 0 says "replaced"
    replaced: torch.Tensor  # (B, T) bool: the discriminator's input differs from the original there


class ElectraPretraining(nn.Module):
    """ELECTRA's generator and discriminator trained together, sharing one embedding module (token, position and
    segment tables and their LayerNorm, as the paper shares them); the generator's decoder is tied to the shared
    word embeddings. `config` is the discriminator's: it is the model people fine-tune."""

    def __init__(self, discriminator: nn.Module, generator: nn.Module, discriminator_weight: float = 50.0):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.discriminator_weight = discriminator_weight
        shared = discriminator.electra.embeddings
        generator.electra.embeddings = shared
        generator.generator_lm_head.weight = shared.word_embeddings.weight  # tied; the bias stays the generator's
        self.config = discriminator.config

    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())  # shared tensors count once

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                ) -> ReplacedTokenDetectionOutput:
        """input_ids (B, T) masked; labels (B, T) the original ids at the masked positions, -100 elsewhere."""
        if labels is None:
            raise ValueError("replaced-token detection needs labels: the original ids at the masked positions")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        labelled = labels != IGNORE_INDEX  # (B, T)
        hidden = self.generator.electra(input_ids, token_type_ids, attention_mask).last_hidden_state  # (B, T, Dg)
        generator_logits = self.generator.mlm_logits(hidden[labelled])  # (N, V): the masked rows only
        generator_loss = F.cross_entropy(generator_logits.float(), labels[labelled])
        with torch.no_grad():  # the sample is an input to the discriminator, not a path for gradients
            sampled = torch.multinomial(F.softmax(generator_logits.detach().float(), dim=-1), 1).squeeze(1)  # (N,)
        originals = torch.where(labelled, labels, input_ids)  # (B, T)
        corrupted = originals.masked_scatter(labelled, sampled.to(originals.dtype))  # (B, T)
        real = attention_mask.bool()
        replaced = (corrupted != originals) & real  # a sample equal to the original counts as original
        discriminator_logits = self.discriminator(corrupted, token_type_ids, attention_mask).logits  # (B, T)
        discriminator_loss = F.binary_cross_entropy_with_logits(discriminator_logits[real].float(),
                                                                replaced[real].float())
        loss = generator_loss + self.discriminator_weight * discriminator_loss
        return ReplacedTokenDetectionOutput(loss, generator_loss, discriminator_loss, generator_logits,
                                            discriminator_logits, replaced)


def generator_config(discriminator_config, width: float):
    """The generator's config: the discriminator's with hidden size, heads and FFN scaled by `width` (the paper's
    1/4 for small, 1/3 for base), the same depth and embedding width (the embeddings are shared)."""
    hidden = max(1, round(discriminator_config.hidden_size * width))
    heads = max(1, min(hidden, round(discriminator_config.num_attention_heads * width)))
    while hidden % heads:
        heads -= 1
    return discriminator_config.replace(hidden_size=hidden, num_attention_heads=heads,
                                        intermediate_size=max(1, round(discriminator_config.intermediate_size * width)))
