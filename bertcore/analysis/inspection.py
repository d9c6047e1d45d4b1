"""What the explorer draws, as plain numpy: one call from a sentence pair to everything inside the model.

text -> Encoding (+ Masking) -> model in eval mode without gradients -> Inspection of numpy arrays:
the input table, the masking decisions, attention probabilities of every layer and head, hidden states,
the top-k MLM predictions at each masked position and the NSP probability of IsNext (a model with pretraining
heads), or the task head's output (a fine-tuned model: bertcore.tasks.outputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertcore.data.masking import MaskDecision, Masking
from bertcore.models.bert import BertForPreTraining, BertPreTrainedModel
from bertcore.models.families import base_model_name
from bertcore.tasks.outputs import TaskOutput, task_output
from bertcore.tokenization.wordpiece import BertTokenizer, Encoding


@dataclass(frozen=True)
class MaskedPrediction:
    position: int  # index into the sequence
    original_token: str  # what the text said
    input_token: str  # what the model saw: [MASK], a random token, or the original
    decision: MaskDecision
    top_tokens: list[str]  # most probable first
    top_ids: list[int]
    top_probabilities: np.ndarray  # (k,) float32


@dataclass(frozen=True)
class Inspection:
    encoding: Encoding
    masking: Masking | None
    input_ids: np.ndarray  # (T,) int64, what the model saw (after masking)
    input_tokens: list[str]  # (T,) after masking
    attentions: np.ndarray  # (L, H, T, T) float32, rows are queries, columns keys
    hidden_states: np.ndarray  # (L + 1, T, D) float32: embeddings output, then each layer
    predictions: list[MaskedPrediction]  # one per masked position; empty without masking or heads
    is_next_probability: float | None  # P(B follows A); None when the model has no NSP head
    has_pretraining_heads: bool  # an MLM or an NSP head (a BertForMaskedLM has the MLM head alone)
    head_mask: np.ndarray  # (L, H) float32, 1 = head on, 0 = ablated
    # A fine-tuned model's answer (bertcore.tasks.outputs): SequenceTaskOutput, TokenTaskOutput or
    # QuestionAnsweringTaskOutput (sentence A = the question, B = the context); None for pretraining models.
    task_output: TaskOutput | None = None
    has_mlm_head: bool = False  # predictions for masked positions are the model's own
    has_nsp_head: bool = False  # is_next_probability is the model's own
    # The other families' pretraining heads and layer kinds (None / () where the model has none):
    in_order_probability: float | None = None  # ALBERT's sentence-order head: P(A then B is their order)
    replaced_probabilities: np.ndarray | None = None  # (T,) float32, ELECTRA's discriminator: P(token replaced)
    local_layers: tuple[int, ...] = ()  # layers that attend within a sliding window (ModernBERT); the rest global
    sliding_window: int | None = None  # how many positions a local layer's token sees to each side

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1]


def max_input_length(config) -> int:
    """The longest input a model takes: its position table, less RoBERTa's rows at and below the padding index
    (RobertaConfig.max_length), which no input reaches."""
    return int(getattr(config, "max_length", config.max_position_embeddings))


def inspect(
    model: BertPreTrainedModel,
    tokenizer: BertTokenizer,
    text_a: str,
    text_b: str | None = None,
    *,
    masking: Masking | None = None,
    top_k: int = 5,
    head_mask: np.ndarray | None = None,
    max_length: int | None = None,
) -> Inspection:
    encoding = tokenizer.encode(text_a, text_b, max_length=max_length or max_input_length(model.config))
    return inspect_encoding(model, tokenizer, encoding, masking=masking, top_k=top_k, head_mask=head_mask,
                            context_text=text_b)


def inspect_encoding(
    model: BertPreTrainedModel,
    tokenizer: BertTokenizer,
    encoding: Encoding,
    *,
    masking: Masking | None = None,
    top_k: int = 5,
    head_mask: np.ndarray | None = None,
    context_text: str | None = None,
) -> Inspection:
    """Everything the model computes for one encoded input, for any of bertcore's model classes. MLM predictions
    and the NSP probability need pretraining heads; a task model gives its `task_output` instead.
    `context_text` (sentence B's text) is where a QA answer's text is cut from (else its tokens are decoded)."""
    config = model.config
    if len(encoding) > max_input_length(config):
        raise ValueError(
            f"the input has {len(encoding)} positions but the model accepts {max_input_length(config)}; "
            "encode with max_length to truncate it"
        )
    if masking is not None and len(masking.decisions) != len(encoding):
        raise ValueError(
            f"the masking covers {len(masking.decisions)} positions but the input has {len(encoding)}; "
            "mask the current encoding again"
        )
    mask_shape = (config.num_hidden_layers, config.num_attention_heads)
    head_mask = np.ones(mask_shape, np.float32) if head_mask is None else np.asarray(head_mask, np.float32)
    if head_mask.shape != mask_shape:
        raise ValueError(f"head_mask has shape {head_mask.shape}; this model needs (layers, heads) = {mask_shape}")
    input_ids = masking.masked_ids if masking is not None else encoding.input_ids
    device = next(model.parameters()).device

    def as_batch(values: list[int]) -> torch.Tensor:
        return torch.tensor([values], dtype=torch.long, device=device)  # (1, T)

    was_training = model.training
    # eval() and train() set an attribute on every submodule (~1 ms of Python a call, which a live inspection
    # pays twice per keystroke); a model already wholly in eval mode is left alone.
    switch = any(module.training for module in model.modules())
    if switch:
        model.eval()
    try:
        with torch.inference_mode():
            encoder = getattr(model, base_model_name(model))  # model.bert, model.roberta, model.distilbert…
            outputs = encoder(
                as_batch(input_ids),
                token_type_ids=as_batch(encoding.segment_ids),  # a family without segments ignores them
                attention_mask=as_batch(encoding.attention_mask),
                head_mask=None if head_mask.all() else torch.from_numpy(head_mask),
                output_attentions=True,
                output_hidden_states=True,
            )
            predictions: list[MaskedPrediction] = []
            is_next_probability = None
            has_mlm_head, has_nsp_head = model.has_mlm_head, model.has_nsp_head
            if has_mlm_head and masking is not None and masking.positions:
                predictions = _top_predictions(model, tokenizer, outputs.last_hidden_state[0], masking, top_k)
            if has_nsp_head:
                nsp_logits = model.cls.seq_relationship(outputs.pooler_output)  # (1, 2)
                is_next_probability = float(nsp_logits.float().softmax(dim=-1)[0, 0])
            family_heads = _family_heads(model, outputs)
            attentions = torch.cat(outputs.attentions).float().cpu().numpy()  # (L, H, T, T)
            hidden_states = torch.cat(outputs.hidden_states).float().cpu().numpy()  # (L + 1, T, D)
            task = task_output(model, tokenizer, encoding, outputs, context_text)
    finally:
        if switch:
            model.train(was_training)
    return Inspection(
        encoding=encoding,
        masking=masking,
        input_ids=np.asarray(input_ids, dtype=np.int64),
        input_tokens=masking.masked_tokens if masking is not None else list(encoding.tokens),
        attentions=attentions,
        hidden_states=hidden_states,
        predictions=predictions,
        is_next_probability=is_next_probability,
        has_pretraining_heads=has_mlm_head or has_nsp_head,
        head_mask=head_mask,
        task_output=task,
        has_mlm_head=has_mlm_head,
        has_nsp_head=has_nsp_head,
        **family_heads,
        **_layer_kinds(config),
    )


def _family_heads(model, outputs) -> dict:
    """What the other families' own pretraining heads say of this input: ALBERT's sentence order (read for a
    pair; the views say so), ELECTRA's replaced-or-original per token."""
    heads = {}
    if model.has_sop_head:
        sop_logits = model.sentence_order_logits(outputs.pooler_output)  # (1, 2)
        heads["in_order_probability"] = float(sop_logits.float().softmax(dim=-1)[0, 0])
    if model.has_replaced_token_head:
        logits = model.replaced_token_logits(outputs.last_hidden_state)[0]  # (T,)
        heads["replaced_probabilities"] = logits.float().sigmoid().cpu().numpy()
    return heads


def _layer_kinds(config) -> dict:
    """ModernBERT's local layers and their window; nothing for a model whose every layer attends globally."""
    if not hasattr(config, "local_layers"):
        return {}
    return {"local_layers": tuple(config.local_layers()), "sliding_window": int(config.sliding_window)}


def _top_predictions(
    model: BertForPreTraining, tokenizer: BertTokenizer, sequence_output: torch.Tensor, masking: Masking, top_k: int
) -> list[MaskedPrediction]:
    positions = masking.positions
    logits = model.mlm_logits(sequence_output[positions])  # (P, V): only the masked rows
    probabilities, ids = logits.float().softmax(dim=-1).topk(min(top_k, logits.size(-1)), dim=-1)  # (P, k)
    probabilities, ids = probabilities.cpu().numpy(), ids.cpu().tolist()
    return [
        MaskedPrediction(
            position=position,
            original_token=masking.original_tokens[position],
            input_token=masking.masked_tokens[position],
            decision=masking.decisions[position],
            top_tokens=tokenizer.convert_ids_to_tokens(ids[row]),
            top_ids=ids[row],
            top_probabilities=probabilities[row],
        )
        for row, position in enumerate(positions)
    ]


def attention_rollout(attentions: np.ndarray, *, head_mask: np.ndarray | None = None) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): how much each input token flows into each position.

    Per layer: mean over the (active) heads, add the residual as 0.5·I + 0.5·A, renormalise rows, then
    multiply up the layers. Returns (L, T, T): entry [l] is the rollout through layers 0..l.
    """
    num_layers, num_heads, seq_len, _ = attentions.shape
    weights = np.ones((num_layers, num_heads), np.float32) if head_mask is None else np.asarray(head_mask, np.float32)
    active = np.maximum(weights.sum(axis=1), 1.0)[:, None, None]  # (L, 1, 1); an all-off layer is identity
    mean_attention = np.einsum("lh,lhqk->lqk", weights, attentions.astype(np.float32)) / active  # (L, T, T)
    identity = np.eye(seq_len, dtype=np.float32)
    rollout = np.empty((num_layers, seq_len, seq_len), np.float32)
    flow = identity
    for layer in range(num_layers):
        mixed = 0.5 * mean_attention[layer] + 0.5 * identity
        mixed /= mixed.sum(axis=-1, keepdims=True)
        flow = mixed @ flow
        rollout[layer] = flow
    return rollout
