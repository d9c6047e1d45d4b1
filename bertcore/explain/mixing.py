"""Context mixing: how much of each token's representation after a layer came from each input token of that layer.

Raw attention weights α say where a head looks, not how much it moves: a head that attends to [SEP] with a tiny
value vector moves almost nothing ("Attention is not only a weight", Kobayashi et al. 2020). The measures here
account for what attention weights leave out, each as its paper defines it:

- "attention": the attention probabilities averaged over heads, per layer; rolled out as Abnar & Zuidema (2020)
  do (0.5·A + 0.5·I per layer, rows renormalised, multiplied up the layers): the baseline the others improve on.
- "value_norm" (Kobayashi et al. 2020, "Attention is Not Only a Weight: Analyzing Transformers with Vector
  Norms"): per layer and head, ‖α_ij^h f^h(x_j)‖ with f^h(x) = (x W_V^h + b_V^h) W_O^h, the vector head h adds
  to token i from token j. The output bias b_O is left out (it comes from no token), as in the paper. Shape
  (L, H, T, T). Its rollout: per layer the heads' norms added up, rows normalised to 1, then Abnar & Zuidema's
  rollout as for attention (the residual, which value norms leave out, enters as the 0.5·I).
- "globenc" (Modarressi et al. 2022, "GlobEnc: Quantifying Global Token Attribution by Incorporating the Whole
  Encoder Layer in Transformers"): the attention block, its residual and the first LayerNorm decomposed per
  source token (Kobayashi et al. 2021's N_ResLN), then passed through the second LayerNorm's scaling with the
  feed-forward left out (GlobEnc's N_Enc). For a post-LN layer (BERT, RoBERTa, ELECTRA, ALBERT, DistilBERT):
      z_ij  = Σ_h α_ij^h f^h(x_j) + δ_ij x_i                          (the residual belongs to token i itself)
      z'_ij = γ1 ⊙ (z_ij − mean(z_ij)) / σ1_i                        (LN1 applied to each part; σ1_i from the sum)
      z"_ij = γ2 ⊙ (z'_ij − mean(z'_ij)) / σ2_i                      (LN2, σ2_i from its real input a_i + FFN(a_i))
      N_ij  = ‖z"_ij‖, each row normalised to sum to 1.
  σ is each LayerNorm's own denominator sqrt(var + eps) of the vector it really normalised (biased variance), so
  that the parts, with the biases, add up to the LayerNorm's output exactly. Rolled out by plain matrix products
  through the layers, R_l = N̂_l R_(l-1), without an added identity: the residual is inside N already.
- "alti" (Ferrando, Gállego & Costa-jussà 2022, "Measuring the Mixing of Contextual Information in the
  Transformer"): the attention block's output y_i = LN1(x_i + Σ_j α_ij f(x_j) + b_O) decomposed as
  y_i = Σ_j T_i(x_j) + γ1 ⊙ (b_O − mean(b_O)) / σ1_i + β1 with T_i(x_j) = z'_ij above (the feed-forward is taken
  as not mixing). Contribution by Manhattan distance: c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), each row
  normalised to sum to 1. Rolled out by plain matrix products, as GlobEnc.

Pre-LN layers (ModernBERT: x_(l+1) = x + Wo·attn(LN(x)) + MLP(...), no biases by default) have no LayerNorm after
the residual. There, f^h(x_j) reads the normalised input LN_attn(x_j) (a per-token map that mixes nothing), and
the parts are z_ij = Σ_h α_ij^h f^h(LN_attn(x_j)) + δ_ij x_i with y_i = Σ_j z_ij + b_O, the residual stream
after the attention block: GlobEnc is ‖z_ij‖ (no LayerNorm scaling to apply) and ALTI uses T_i(x_j) = z_ij,
as ALTI's extension to pre-LN models does. ALBERT counts every pass through a shared layer as a layer.

Everything comes from one forward pass (the attention probabilities and hidden states an inspection reads) and
the layer weights; nothing is sampled, and the model's mode is left as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.errors import ExplainError
from bertcore.explain.targets import check_finite, check_weights_finite
from bertcore.models.families import base_model_name
from bertcore.tokenization.wordpiece import Encoding

MIXING_METHODS = ("attention", "value_norm", "globenc", "alti")

# The (i, j, D) parts of GlobEnc and ALTI are built a block of query rows at a time, at most this many floats
# each (64 MB): a 512-token base model would need 800 MB per layer at once.
_PART_BUDGET = 1 << 24


@dataclass(frozen=True)
class ContextMixing:
    method: str  # one of MIXING_METHODS
    per_layer: np.ndarray  # float32: value_norm (L, H, T, T); attention, globenc, alti (L, T, T); rows = receivers
    rollout: np.ndarray  # (L, T, T) float32: entry [l] is the mixing through layers 0..l, rows sum to 1


@dataclass(frozen=True)
class AttentionBlock:
    """What the mixing measures read of one attention layer, whatever the family calls its modules."""

    value: nn.Linear  # the projection whose output holds the values x_j W_V + b_V (pre-LN: of LN_attn(x_j))
    value_columns: slice  # which of its output features are the values; head h's are h·hs..(h+1)·hs of them
    output_weight: torch.Tensor  # (D, D) W_O as nn.Linear stores it: column block h is head h's
    output_bias: torch.Tensor | None  # (D,)
    attention_norm: nn.LayerNorm | None  # post-LN: LN1 after the attention's residual; None for pre-LN
    feed_forward: Callable[[torch.Tensor], torch.Tensor] | None  # post-LN: the FFN without its residual
    output_norm: nn.LayerNorm | None  # post-LN: LN2 after the feed-forward's residual

    @property
    def is_pre_ln(self) -> bool:
        return self.attention_norm is None


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """The encoder layer modules in the order the model runs them (ALBERT: one entry per pass through a shared
    layer, the same module several times)."""
    encoder = getattr(model, base_model_name(model))
    if hasattr(encoder, "layers"):  # ModernBERT
        return list(encoder.layers)
    if hasattr(encoder, "transformer"):  # DistilBERT
        return list(encoder.transformer.layer)
    if hasattr(encoder.encoder, "layers_in_order"):  # ALBERT: shared weights, one entry per pass
        return list(encoder.encoder.layers_in_order())
    return list(encoder.encoder.layer)


def attention_blocks(model: nn.Module) -> list[AttentionBlock]:
    """One AttentionBlock per attention layer the model runs, in order (ALBERT: one per pass through a shared
    layer). ExplainError for a model whose layers are none of the families bertcore loads."""
    from bertcore.models.albert import AlbertLayer
    from bertcore.models.bert import BertLayer
    from bertcore.models.distilbert import TransformerBlock
    from bertcore.models.modernbert import ModernBertEncoderLayer

    blocks = []
    for layer in encoder_layers(model):
        if isinstance(layer, BertLayer):
            blocks.append(AttentionBlock(
                layer.attention.self.value, slice(None),
                layer.attention.output.dense.weight, layer.attention.output.dense.bias,
                layer.attention.output.LayerNorm,
                lambda a, layer=layer: layer.output.dense(layer.intermediate(a)), layer.output.LayerNorm))
        elif isinstance(layer, TransformerBlock):
            attention = layer.attention
            blocks.append(AttentionBlock(
                attention.v_lin, slice(None), attention.out_lin.weight, attention.out_lin.bias,
                layer.sa_layer_norm, layer.ffn, layer.output_layer_norm))
        elif isinstance(layer, AlbertLayer):
            attention = layer.attention
            blocks.append(AttentionBlock(
                attention.value, slice(None), attention.dense.weight, attention.dense.bias,
                attention.LayerNorm,
                lambda a, layer=layer: layer.ffn_output(layer.activation(layer.ffn(a))), layer.full_layer_layer_norm))
        elif isinstance(layer, ModernBertEncoderLayer):
            width = layer.attn.Wo.in_features
            blocks.append(AttentionBlock(layer.attn.Wqkv, slice(2 * width, 3 * width), layer.attn.Wo.weight,
                                         layer.attn.Wo.bias, None, None, None))
        else:
            raise ExplainError(f"{type(model).__name__}'s layers are {type(layer).__name__}, which the mixing "
                               "measures do not know how to read; they read the layers of the families bertcore "
                               "loads (BERT, RoBERTa, DistilBERT, ELECTRA, ALBERT, ModernBERT)")
    return blocks


def context_mixing(model: nn.Module, tokenizer, encoding: Encoding, method: str) -> ContextMixing:
    """How much each token of the input mixes into each other token, layer by layer and rolled out (see the
    module docstring for each method's definition). Runs `context_mixing_progress` to its end."""
    return run_to_end(context_mixing_progress(model, tokenizer, encoding, method)).result


def context_mixing_progress(model: nn.Module, tokenizer, encoding: Encoding,
                            method: str) -> Iterator[Progress[ContextMixing | None]]:
    """context_mixing as a generator: one record per layer measured (done = layers finished, total = L), the
    result None until the last record, which holds the ContextMixing. The forward pass comes before the first."""
    del tokenizer  # the encoding holds the ids; the parameter keeps the Explain API's one signature
    if method not in MIXING_METHODS:
        raise ExplainError(f"context-mixing method {method!r} is unknown; use one of {', '.join(MIXING_METHODS)}")
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and len(encoding) > limit:
        raise ExplainError(f"the input has {len(encoding)} positions but the model accepts {limit}; encode it with "
                           "max_length to truncate it")
    check_weights_finite(model)
    blocks = attention_blocks(model) if method != "attention" else []
    device = next(model.parameters()).device
    with eval_mode(model), torch.inference_mode():
        attentions, hidden_states, values = _forward(model, encoding, device, blocks)  # L of (H, T, T), L + 1
        # of (T, D), L of (T, D)
        num_layers = len(attentions)
        if method == "attention":
            per_layer = torch.stack(attentions).float().mean(dim=1)  # (L, T, T)
            check_finite(float(per_layer.sum()), "the sum of the attention weights")
            yield Progress(num_layers, num_layers, ContextMixing(
                method, per_layer.cpu().numpy(), _residual_rollout(per_layer).cpu().numpy()))
            return
        measured = []
        for index, (block, probs) in enumerate(zip(blocks, attentions, strict=True)):
            if method == "value_norm":
                norms = _transformed_norms(block, values[index].float(), probs.size(0))  # (H, T)
                measured.append(probs.float() * norms[:, None, :])  # ‖α f(x_j)‖ = α ‖f(x_j)‖, α ≥ 0
            else:
                transformed = _transformed(block, values[index].float(), probs.size(0))  # (H, T, D)
                measured.append(_decomposed(block, hidden_states[index].float(), probs.float(), transformed,
                                            method))
            if index + 1 < num_layers:
                yield Progress(index + 1, num_layers, None)
        per_layer = torch.stack(measured)  # (L, H, T, T) or (L, T, T)
        check_finite(float(per_layer.sum()), "the sum of the mixing scores")
        if method == "value_norm":
            summed = per_layer.sum(dim=1)  # (L, T, T)
            rollout = _residual_rollout(summed / summed.sum(dim=-1, keepdim=True).clamp(min=1e-30))
        else:
            rollout = _product_rollout(per_layer)
    yield Progress(num_layers, num_layers, ContextMixing(method, per_layer.cpu().numpy(), rollout.cpu().numpy()))


def _forward(model: nn.Module, encoding: Encoding, device: torch.device, blocks: list[AttentionBlock]):
    """One forward pass as an inspection runs it: the attention probabilities (L of (H, T, T)), the hidden states
    (L + 1 of (T, D): each layer's input, then the last output) and, caught on their way through the value
    projections, the value vectors of each layer (L of (T, D); none for no blocks)."""
    def as_batch(values) -> torch.Tensor:
        return torch.tensor([list(values)], dtype=torch.long, device=device)  # (1, T)

    values: list[torch.Tensor] = []
    columns = {id(block.value): block.value_columns for block in blocks}  # ALBERT: one module, several layers

    thread = threading.get_ident()

    def keep(module, args, output):
        if threading.get_ident() == thread:  # another thread may run the same model meanwhile (the app's tabs)
            values.append(output.reshape(-1, output.size(-1))[:, columns[id(module)]])
        return None

    handles = [module.register_forward_hook(keep) for module in {id(b.value): b.value for b in blocks}.values()]
    try:
        encoder = getattr(model, base_model_name(model))
        outputs = encoder(as_batch(encoding.input_ids), token_type_ids=as_batch(encoding.segment_ids),
                          attention_mask=as_batch(encoding.attention_mask), output_attentions=True,
                          output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    return [a[0] for a in outputs.attentions], [h[0] for h in outputs.hidden_states], values


def _transformed(block: AttentionBlock, values: torch.Tensor, num_heads: int) -> torch.Tensor:
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head and token: (H, T, D), output bias left out."""
    seq_len, width = values.shape
    head_values = values.view(seq_len, num_heads, width // num_heads)  # (T, H, hs)
    output_weight = block.output_weight.float().view(-1, num_heads, width // num_heads)  # (D, H, hs)
    return torch.einsum("thk,dhk->htd", head_values, output_weight)  # (H, T, D)


def _transformed_norms(block: AttentionBlock, values: torch.Tensor, num_heads: int) -> torch.Tensor:
    """‖f^h(x_j)‖ for every head and token (H, T). Past hs tokens through each head's Gram matrix W_O^hᵀ W_O^h
    (‖v W_O^hᵀ‖² = v G^h vᵀ: H·hs²·D to build, T·D·hs to apply) rather than the (H, T, D) vectors (T·D²)."""
    seq_len, width = values.shape
    head_dim = width // num_heads
    if seq_len <= head_dim:
        return _transformed(block, values, num_heads).norm(dim=-1)
    output_weight = block.output_weight.float().view(-1, num_heads, head_dim).transpose(0, 1)  # (H, D, hs)
    gram = output_weight.transpose(1, 2) @ output_weight  # (H, hs, hs)
    head_values = values.view(seq_len, num_heads, head_dim).transpose(0, 1)  # (H, T, hs)
    squared = ((head_values @ gram) * head_values).sum(dim=-1)  # (H, T)
    return squared.clamp(min=0).sqrt()


def _decomposed(block: AttentionBlock, layer_input: torch.Tensor, probs: torch.Tensor, transformed: torch.Tensor,
                method: str) -> torch.Tensor:
    """GlobEnc's N̂ or ALTI's c for one layer (T, T), rows summing to 1, from f^h(x_j) (H, T, D)."""
    seq_len, width = layer_input.shape
    output_bias = (torch.zeros(width, device=layer_input.device) if block.output_bias is None
                   else block.output_bias.float())
    rows_per_block = max(1, _PART_BUDGET // (seq_len * width))
    result = torch.empty(seq_len, seq_len, device=layer_input.device)
    for start in range(0, seq_len, rows_per_block):
        rows = slice(start, min(seq_len, start + rows_per_block))
        parts = torch.einsum("hij,hjd->ijd", probs[:, rows], transformed)  # (c, T, D): Σ_h α_ij^h f^h(x_j)
        count = parts.size(0)
        receivers = torch.arange(start, start + count, device=layer_input.device)
        parts[torch.arange(count), receivers] += layer_input[rows]  # the residual: token i's own part
        summed = parts.sum(dim=1) + output_bias  # (c, D): what the block adds up before any LayerNorm
        if block.is_pre_ln:
            output = summed  # the residual stream after the attention block
        else:
            parts = _scale_like(block.attention_norm, parts, summed)  # T_i(x_j)
            output = block.attention_norm(summed)  # y_i, LN1's output
        if method == "alti":
            distance = (output[:, None, :] - parts).abs().sum(dim=-1)  # (c, T): ‖y_i − T_i(x_j)‖₁
            scores = (output.abs().sum(dim=-1, keepdim=True) - distance).clamp(min=0)
        else:
            if not block.is_pre_ln:
                pre_output_norm = output + block.feed_forward(output)  # LN2's real input
                parts = _scale_like(block.output_norm, parts, pre_output_norm)
            scores = parts.norm(dim=-1)  # (c, T)
        result[rows] = scores / scores.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)
    return result


def _scale_like(norm: nn.LayerNorm, parts: torch.Tensor, normalised: torch.Tensor) -> torch.Tensor:
    """The linear part of `norm` applied to each part (c, T, D) of the vector `normalised` (c, D): centred, divided
    by the denominator the LayerNorm used for the whole, times its weight. The bias belongs to no part."""
    denominator = (normalised.var(dim=-1, unbiased=False) + norm.eps).sqrt()  # (c,)
    centred = parts - parts.mean(dim=-1, keepdim=True)
    return centred / denominator[:, None, None] * norm.weight.float()


def _residual_rollout(mixing: torch.Tensor) -> torch.Tensor:
    """Abnar & Zuidema's rollout of row-stochastic (L, T, T) matrices that leave the residual out: per layer
    0.5·A + 0.5·I, rows renormalised, multiplied up the layers (as bertcore.analysis.inspection.attention_rollout,
    in torch: numpy's einsum there takes ~30 ms per layer at 128 tokens)."""
    identity = torch.eye(mixing.size(-1), dtype=torch.float64, device=mixing.device)
    rollout = torch.empty(mixing.shape, dtype=torch.float32, device=mixing.device)
    flow = identity
    for layer, matrix in enumerate(mixing.double()):
        mixed = 0.5 * matrix + 0.5 * identity
        flow = (mixed / mixed.sum(dim=-1, keepdim=True)) @ flow
        rollout[layer] = flow
    return rollout


def _product_rollout(per_layer: torch.Tensor) -> torch.Tensor:
    """R_0 = M_0, R_l = M_l R_(l-1): (L, T, T), float32."""
    rollout = torch.empty(per_layer.shape, dtype=torch.float32, device=per_layer.device)
    flow = None
    for layer, mixing in enumerate(per_layer.double()):
        flow = mixing if flow is None else mixing @ flow
        rollout[layer] = flow
    return rollout
