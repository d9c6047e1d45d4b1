"""Where a masked word forms: the MLM head read off every layer's hidden state (a logit lens).

nostalgebraist 2020, "interpreting GPT: the logit lens", applies a language model's output head to each
intermediate layer to see the prediction take shape; for BERT's masked LM the head is `cls.predictions`
(dense + GELU + LayerNorm, then the decoder tied to the word embeddings; any family's `mlm_logits`), applied
here at each masked position to the embeddings output and to every layer's output. The last row is exactly the
model's own MLM prediction. An early layer was never trained to be read this way, so its row says what the head
would make of it, not what the layer "means"; the rank of the original token is the steadier signal.

    lens = logit_lens(model, tokenizer, inspection)           # reuses the inspection's hidden states
    lens.top_tokens[:, 0, 0]   # (L + 1,) the best guess at the first masked position, layer by layer
    lens.original_rank[:, 0]   # (L + 1,) where the right word stands, 1 = first
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode, is_int_at_least
from bertcore.analysis.inspection import Inspection
from bertcore.data.masking import Masking
from bertcore.models.families import base_model_name
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding


@dataclass(frozen=True)
class LogitLens:
    """The MLM head at every layer (rows) and every masked position (columns)."""

    positions: np.ndarray  # (P,) int64 masked positions in the sequence
    original_ids: np.ndarray  # (P,) int64 what the text said there
    original_tokens: list[str]  # (P,)
    input_tokens: list[str]  # (P,) what the model saw: [MASK], a random token or the original
    layer_names: list[str]  # (L + 1,) "embeddings", "layer 1", ..., "layer L"
    top_ids: np.ndarray  # (L + 1, P, k) int64, most probable first
    top_tokens: np.ndarray  # (L + 1, P, k) str
    top_probabilities: np.ndarray  # (L + 1, P, k) float32
    original_probability: np.ndarray  # (L + 1, P) float32 probability of the original token
    original_rank: np.ndarray  # (L + 1, P) int64, 1 = the original token is the top prediction
    piece_style: str = "wordpiece"  # the tokenizer's word marks, for readable pieces (bertcore.tokenization.pieces)

    @property
    def num_rows(self) -> int:
        """L + 1: the embeddings output and each layer."""
        return len(self.layer_names)

    @property
    def settled_layer(self) -> np.ndarray:
        """(P,) int64 the first row from which the original token stays the top prediction to the last layer;
        -1 where the model's final prediction is wrong."""
        correct = self.original_rank == 1  # (L + 1, P)
        stays = np.flip(np.logical_and.accumulate(np.flip(correct, axis=0), axis=0), axis=0)  # (L + 1, P)
        first = stays.argmax(axis=0)
        return np.where(stays.any(axis=0), first, -1).astype(np.int64)


def logit_lens(model: nn.Module, tokenizer: BertTokenizer, inspection: Inspection, *, top_k: int = 5) -> LogitLens:
    """The logit lens of an `Inspection`: its hidden states (L + 1, T, D) at its masked positions through the
    model's MLM head (`model.mlm_logits`, any family's), no new forward pass. The inspection must come from this model
    (its head mask, if any, is therefore included); without masking the lens has no columns (P = 0)."""
    hidden_size = model.config.hidden_size
    if inspection.hidden_states.ndim != 3 or inspection.hidden_states.shape[-1] != hidden_size:
        raise ValueError(f"the inspection's hidden states have shape {inspection.hidden_states.shape}, not "
                         f"(layers + 1, tokens, {hidden_size}); inspect the input again with this model")
    hidden_states = torch.from_numpy(inspection.hidden_states)  # (L + 1, T, D)
    return _read_layers(model, tokenizer, hidden_states, inspection.masking, top_k)


def encoding_logit_lens(
    model: nn.Module,
    tokenizer: BertTokenizer,
    encoding: Encoding,
    masking: Masking,
    *,
    top_k: int = 5,
    head_mask: np.ndarray | None = None,
) -> LogitLens:
    """The logit lens of an encoding + masking without an `Inspection`: one forward pass for the hidden states
    only (the fused attention path; no attention maps), then as `logit_lens`."""
    if len(masking.decisions) != len(encoding):
        raise ValueError(f"the masking covers {len(masking.decisions)} positions but the input has "
                         f"{len(encoding)}; mask the current encoding again")
    config = model.config
    shape = (config.num_hidden_layers, config.num_attention_heads)
    if head_mask is not None and np.shape(head_mask) != shape:
        raise ValueError(f"head_mask has shape {np.shape(head_mask)}; this model needs (layers, heads) = {shape}")
    device = next(model.parameters()).device

    def row(values: list[int]) -> torch.Tensor:
        return torch.tensor([values], dtype=torch.long, device=device)  # (1, T)

    with eval_mode(model), torch.inference_mode():
        outputs = getattr(model, base_model_name(model))(  # model.bert, model.distilbert…
            input_ids=row(masking.masked_ids), token_type_ids=row(encoding.segment_ids),
            attention_mask=row(encoding.attention_mask),
            head_mask=None if head_mask is None else torch.as_tensor(np.asarray(head_mask, np.float32)),
            output_hidden_states=True,
        )
        hidden_states = torch.cat(outputs.hidden_states).float()  # (L + 1, T, D)
    return _read_layers(model, tokenizer, hidden_states, masking, top_k)


def _read_layers(
    model: nn.Module, tokenizer: BertTokenizer, hidden_states: torch.Tensor, masking: Masking | None, top_k: int
) -> LogitLens:
    if not model.has_mlm_head:
        raise ValueError(f"this {type(model).__name__} has no MLM head (a plain encoder checkpoint, or a head that "
                         "is not a masked LM); the logit lens reads the MLM head at every layer, so it needs a "
                         "checkpoint with one")
    if not is_int_at_least(top_k, 1):
        raise ValueError(f"top_k is {top_k!r}; ask for at least 1 token per layer")
    num_rows, seq_len, _ = hidden_states.shape
    if masking is not None and len(masking.decisions) != seq_len:
        raise ValueError(f"the masking covers {len(masking.decisions)} positions but the hidden states "
                         f"{seq_len}; mask the current encoding again")
    positions = masking.positions if masking is not None else []
    top_k = min(top_k, model.config.vocab_size)
    original_ids = [masking.original_ids[p] for p in positions] if positions else []
    top_ids = np.zeros((num_rows, len(positions), top_k), np.int64)
    top_probabilities = np.zeros((num_rows, len(positions), top_k), np.float32)
    original_probability = np.zeros((num_rows, len(positions)), np.float32)
    original_rank = np.zeros((num_rows, len(positions)), np.int64)
    if positions:
        parameter = next(model.parameters())
        rows = hidden_states[:, positions].to(parameter.device, parameter.dtype)  # (L + 1, P, D)
        originals = torch.tensor(original_ids, device=parameter.device)  # (P,)
        with torch.inference_mode():
            for layer in range(num_rows):  # (P, D) at a time, the shape the model's own prediction used
                probabilities = model.mlm_logits(rows[layer]).float().softmax(dim=-1)  # (P, V)
                values, ids = probabilities.topk(top_k, dim=-1)  # (P, k)
                original = probabilities.gather(1, originals[:, None])  # (P, 1)
                top_ids[layer], top_probabilities[layer] = ids.cpu().numpy(), values.cpu().numpy()
                original_probability[layer] = original[:, 0].cpu().numpy()
                original_rank[layer] = ((probabilities > original).sum(dim=-1) + 1).cpu().numpy()
    vocab = tokenizer.vocab
    top_tokens = np.array([vocab[i] if i < len(vocab) else f"<id {i}>" for i in top_ids.ravel().tolist()],
                          dtype=str).reshape(top_ids.shape)  # ids past the vocabulary file: a model's padding
    return LogitLens(
        positions=np.asarray(positions, np.int64),
        original_ids=np.asarray(original_ids, np.int64),
        original_tokens=[masking.original_tokens[p] for p in positions] if positions else [],
        input_tokens=[masking.masked_tokens[p] for p in positions] if positions else [],
        layer_names=["embeddings", *(f"layer {index}" for index in range(1, num_rows))],
        top_ids=top_ids,
        top_tokens=top_tokens,
        top_probabilities=top_probabilities,
        original_probability=original_probability,
        original_rank=original_rank,
        piece_style=tokenizer.piece_style,
    )
