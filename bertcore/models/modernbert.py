"""ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer"), in reading order.

What changed since BERT, each in one place below: no position embeddings but rotary ones (RoPE) applied to the
queries and keys, with a large base θ on the global layers and a small one on the local layers; every third layer
(by default) attends globally, the others only to keys within ±local_attention/2 positions (a sliding window);
pre-LayerNorm without biases, the first layer's attention norm left out because the embeddings were just
normalised; a fused query/key/value projection `Wqkv`; a gated GELU feed-forward (GeGLU, `Wi` makes both halves);
a final LayerNorm; no segment embeddings, pooler or NSP head.

Class and parameter names are those of transformers' `modeling_modernbert.py`, so its `state_dict`s load as they
are: embeddings -> rotary embedding -> attention -> feed-forward -> layer -> ModernBertModel -> MLM head
-> ModernBertForMaskedLM; the config and its config.json spellings are in `bertcore.models.modernbert_config`,
the fine-tuning heads (sequence, token, span) in `bertcore.models.modernbert_task_heads`.
As in `bertcore.models.bert`, attention probabilities are materialised only when the caller asks for them
(`output_attentions=True`); otherwise the fused `scaled_dot_product_attention` kernel runs, with the window given
to it as a mask. For training, `skip_padding` (taken by the masked-LM model with
`sparse_prediction` labels) runs the dense layers on the real tokens only, in the spirit of the paper's unpadding;
attention itself still runs on the padded (B, T) grid (no varlen kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.bert import ACTIVATION_FUNCTIONS
from bertcore.models.heads import ModelHeads, PretrainingHeads
from bertcore.models.input_checks import check_inputs
from bertcore.models.modernbert_config import GLOBAL_ATTENTION, LOCAL_ATTENTION, ModernBertConfig
from bertcore.models.token_rows import TokenRows


class ModernBertEmbeddings(nn.Module):
    """Token embeddings, LayerNorm, dropout: positions enter later, as rotations of queries and keys."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.drop = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.norm(self.tok_embeddings(input_ids)))  # (B, T, D)


class ModernBertRotaryEmbedding(nn.Module):
    """cos and sin of each position's rotation angles for one RoPE base; no weights, nothing in the state_dict."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.head_dim = config.head_dim

    def forward(self, seq_len: int, theta: float, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        # Frequency of pair i: theta^(-2i / hs); computed in float32 whatever the model's dtype, as the reference.
        inverse_frequency = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        positions = torch.arange(seq_len, device=device, dtype=torch.float)
        angles = positions[:, None] * inverse_frequency.to(device)  # (T, hs/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, hs): dims i and i + hs/2 form a rotated pair
        return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension: a 90° turn of every pair."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, nh, T, hs) queries or keys by their positions' angles, in float32."""
    rotated = x.float() * cos + rotate_half(x.float()) * sin
    return rotated.to(x.dtype)


class ModernBertAttention(nn.Module):
    """Multi-head attention with RoPE; on a local layer, each query sees only keys within the window."""

    def __init__(self, config: ModernBertConfig, layer_index: int):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.is_local = config.layer_types[layer_index] == LOCAL_ATTENTION
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_prob = config.attention_dropout
        self.out_drop = nn.Dropout(config.attention_dropout)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rows: TokenRows,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        attention_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states (N, D) placed on the (B, T) grid by `rows`; attention_bias (B or 1, 1, T, T) of 0 and
        -max (left out), or None. Returns the output (N, D) and, if asked, the probabilities (B, nh, T, T)."""
        batch_size, seq_len = rows.batch_size, rows.seq_len
        qkv = rows.pad(self.Wqkv(hidden_states)).view(batch_size, seq_len, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, nh, T, hs)
        cos, sin = cos_sin
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)
        attention_probs = None
        if output_attentions:
            # The explicit path: the caller wants to see the probabilities.
            # Scaling the (T, hs) queries rather than the (T, T) scores, and adding the bias in place, saves two
            # passes over the largest tensor of the layer.
            scores = (query * self.head_dim ** -0.5) @ key.transpose(-2, -1)  # (B, nh, T, T)
            if attention_bias is not None:
                scores += attention_bias
            attention_probs = scores.softmax(dim=-1, dtype=torch.float32).to(query.dtype)
            if head_mask is not None:
                attention_probs = attention_probs * head_mask  # what an ablated head contributes: nothing
            context = F.dropout(attention_probs, self.dropout_prob, self.training) @ value  # (B, nh, T, hs)
        else:
            context = F.scaled_dot_product_attention(
                query, key, value,
                attn_mask=attention_bias,
                dropout_p=self.dropout_prob if self.training else 0.0,
            )  # (B, nh, T, hs)
            if head_mask is not None:
                context = context * head_mask  # scaling a head's probabilities scales its output alike
        context = rows.unpad(context.transpose(1, 2).reshape(batch_size, seq_len, -1))  # (N, D)
        return self.out_drop(self.Wo(context)), attention_probs


class ModernBertMLP(nn.Module):
    """GeGLU: Wi makes an input half and a gate half; act(input) * gate goes back through Wo."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = ACTIVATION_FUNCTIONS[config.hidden_activation]
        self.drop = nn.Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        inputs, gate = self.Wi(hidden_states).chunk(2, dim=-1)  # each (B, T, intermediate_size)
        return self.Wo(self.drop(self.act(inputs) * gate))


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN: x + attn(attn_norm(x)), then x + mlp(mlp_norm(x))."""

    def __init__(self, config: ModernBertConfig, layer_index: int):
        super().__init__()
        # Layer 0 reads the embeddings, which were just normalised: a second LayerNorm would add nothing.
        self.attn_norm = (nn.Identity() if layer_index == 0
                          else nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias))
        self.attn = ModernBertAttention(config, layer_index)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config)
        self.attention_type = config.layer_types[layer_index]

    def forward(self, hidden_states, rows, cos_sin, attention_bias, head_mask, output_attentions):
        attention_output, attention_probs = self.attn(
            self.attn_norm(hidden_states), rows, cos_sin, attention_bias, head_mask, output_attentions
        )
        hidden_states = hidden_states + attention_output
        hidden_states = hidden_states + self.mlp(self.mlp_norm(hidden_states))
        return hidden_states, attention_probs


@dataclass
class ModernBertModelOutput:
    last_hidden_state: torch.Tensor  # (B, T, D), after final_norm
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D): embeddings, each layer; the last normed
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T); zero outside a local layer's window


@dataclass
class ModernBertMaskedLMOutput:
    loss: torch.Tensor | None  # () mean cross-entropy over the labelled positions
    logits: torch.Tensor  # (B, T, V); (N_labelled, V) with labels when config.sparse_prediction
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


def attention_biases(
    config: ModernBertConfig, attention_mask: torch.Tensor | None, seq_len: int, dtype: torch.dtype,
    device: torch.device,
) -> dict[str, torch.Tensor | None]:
    """Per layer kind, an additive (B or 1, 1, T, T) bias: 0 where a query may attend, the dtype's lowest value
    where not (padding keys; on local layers, keys further than sliding_window). None where nothing is hidden.

    A row with nothing left (a padding query whose window holds only padding) becomes uniform over all keys, as
    in the reference; a float bias keeps the fused kernel from returning NaN there."""
    lowest = torch.finfo(dtype).min
    allowed = None
    if attention_mask is not None and not bool(attention_mask.all()):
        allowed = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    positions = torch.arange(seq_len, device=device)
    in_window = (positions[:, None] - positions[None, :]).abs() <= config.sliding_window  # (T, T)
    local_allowed = in_window[None, None] if allowed is None else allowed & in_window  # (B or 1, 1, T, T)

    def bias(mask: torch.Tensor | None) -> torch.Tensor | None:
        if mask is None or bool(mask.all()):
            return None
        return torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, lowest)

    return {GLOBAL_ATTENTION: bias(allowed), LOCAL_ATTENTION: bias(local_allowed)}


class ModernBertPreTrainedModel(ModelHeads, nn.Module):
    """What every model around a ModernBERT encoder shares: a config that names its class, weight init, size."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config.replace(architectures=(type(self).__name__,))

    def _init_weights(self, module: nn.Module) -> None:
        """Truncated normals as the paper: inputs at initializer_range, outputs (Wo, head, decoder) scaled down
        by sqrt(2 × layers) so that the residual stream's variance does not grow with depth."""
        config = self.config
        std_in = config.initializer_range
        std_out = config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers)

        def truncated_normal(layer: nn.Module, std: float) -> None:
            cutoff = config.initializer_cutoff_factor * std
            nn.init.trunc_normal_(layer.weight, mean=0.0, std=std, a=-cutoff, b=cutoff)
            if getattr(layer, "bias", None) is not None:
                nn.init.zeros_(layer.bias)

        if isinstance(module, ModernBertEmbeddings):
            truncated_normal(module.tok_embeddings, std_in)
        elif isinstance(module, (ModernBertMLP, ModernBertAttention)):
            truncated_normal(module.Wi if isinstance(module, ModernBertMLP) else module.Wqkv, std_in)
            truncated_normal(module.Wo, std_out)
        elif isinstance(module, ModernBertPredictionHead):
            truncated_normal(module.dense, std_out)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def local_layers(self) -> tuple[int, ...]:
        """The indices of the layers that attend within the sliding window (the others attend globally)."""
        return self.config.local_layers()

    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())  # tied tensors count once


class ModernBertModel(ModernBertPreTrainedModel):
    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.embeddings = ModernBertEmbeddings(self.config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(self.config, index)
                                    for index in range(self.config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(self.config.hidden_size, eps=self.config.norm_eps, bias=self.config.norm_bias)
        self.rotary_emb = ModernBertRotaryEmbedding(self.config)
        if type(self) is ModernBertModel:
            self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT's callers; ModernBERT has no segments
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        skip_padding: bool = False,
    ) -> ModernBertModelOutput:
        """head_mask (layers, heads) multiplies each head's output (0 ablates it).

        skip_padding: the projections, feed-forward and norms run on the real tokens only (attention alone sees
        the padded grid), and the padding positions' outputs are zeros. Exact for every real token, since padding
        is never a key; the unpadded path of the paper, for training. Ignored when hidden states or attentions
        are asked for, which show every position."""
        config = self.config
        check_inputs(config, input_ids, None, attention_mask)
        seq_len = input_ids.size(1)
        if seq_len > config.max_position_embeddings:
            raise ValueError(f"the input has {seq_len} positions; this model was trained on at most "
                             f"{config.max_position_embeddings} — truncate it (tokenizer max_length)")
        if head_mask is not None and tuple(head_mask.shape) != (config.num_hidden_layers, config.num_attention_heads):
            raise ValueError(f"head_mask has shape {tuple(head_mask.shape)}; it takes one multiplier per "
                             f"(layer, head): ({config.num_hidden_layers}, {config.num_attention_heads})")
        kept = None
        if skip_padding and attention_mask is not None and not (output_attentions or output_hidden_states):
            kept = attention_mask.bool()  # (B, T)
        rows = TokenRows(input_ids.size(0), seq_len, kept)
        hidden_states = rows.unpad(self.embeddings(input_ids))  # (N, D)
        dtype, device = hidden_states.dtype, hidden_states.device
        biases = attention_biases(config, attention_mask, seq_len, dtype, device)
        cos_sin = {}
        for kind, theta in ((GLOBAL_ATTENTION, config.global_rope_theta), (LOCAL_ATTENTION, config.local_rope_theta)):
            if kind in config.layer_types:
                cos, sin = self.rotary_emb(seq_len, theta, device)  # (T, hs) each, float32
                cos_sin[kind] = (cos, sin)
        if head_mask is not None:
            head_mask = head_mask.to(device=device, dtype=dtype)
        all_hidden_states = [rows.pad(hidden_states)] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layers):
            layer_head_mask = None if head_mask is None else head_mask[index].view(1, -1, 1, 1)  # (1, nh, 1, 1)
            kind = layer.attention_type
            hidden_states, attention_probs = layer(
                hidden_states, rows, cos_sin[kind], biases[kind], layer_head_mask, output_attentions
            )
            if output_hidden_states:
                all_hidden_states.append(rows.pad(hidden_states))
            if output_attentions:
                all_attentions.append(attention_probs)
        hidden_states = rows.pad(self.final_norm(hidden_states))  # (B, T, D)
        if output_hidden_states:
            all_hidden_states[-1] = hidden_states  # transformers' convention: the last entry is the normed output
        return ModernBertModelOutput(
            hidden_states,
            tuple(all_hidden_states) if output_hidden_states else None,
            tuple(all_attentions) if output_attentions else None,
        )


class ModernBertPredictionHead(nn.Module):
    """dense -> activation -> LayerNorm, before the MLM decoder (or a classifier)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = ACTIVATION_FUNCTIONS[config.classifier_activation]
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden_states)))


class ModernBertForMaskedLM(PretrainingHeads, ModernBertPreTrainedModel):
    """ModernBERT with its masked-LM head: `head`, then `decoder` tied to tok_embeddings, with its own bias."""

    PRETRAINING_HEADS = frozenset({"mlm"})

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.model = ModernBertModel(self.config)
        self.head = ModernBertPredictionHead(self.config)
        self.decoder = nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=self.config.decoder_bias)
        self.apply(self._init_weights)
        if self.decoder.bias is not None:
            nn.init.zeros_(self.decoder.bias)
        if self.config.tie_word_embeddings:
            self.decoder.weight = self.model.embeddings.tok_embeddings.weight
        else:
            std = self.config.initializer_range / math.sqrt(2.0 * self.config.num_hidden_layers)
            cutoff = self.config.initializer_cutoff_factor * std
            nn.init.trunc_normal_(self.decoder.weight, std=std, a=-cutoff, b=cutoff)

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.decoder(self.head(sequence_output))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT's callers; ModernBERT has no segments
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModernBertMaskedLMOutput:
        ignore_index = self.config.sparse_pred_ignore_index
        sparse = labels is not None and self.config.sparse_prediction
        labelled = labels != ignore_index if sparse else None  # (B, T)
        # Padding that no label reads needs no dense work in any layer (padding is never a key): exact.
        skip_padding = sparse and attention_mask is not None and not bool((labelled & ~attention_mask.bool()).any())
        outputs = self.model(input_ids, attention_mask, token_type_ids, head_mask, output_attentions,
                             output_hidden_states, skip_padding=skip_padding)
        sequence_output = outputs.last_hidden_state  # (B, T, D)
        if sparse:
            # Only the ~15% labelled rows pay for the vocabulary projection; logits are then (N_labelled, V)
            # in row-major order of the labelled positions, as in transformers.
            sequence_output, labels = sequence_output[labelled], labels[labelled]  # (N, D), (N,)
        logits = self.decoder(self.head(sequence_output))  # (B, T, V) or (N, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(), ignore_index=ignore_index)
        return ModernBertMaskedLMOutput(loss, logits, outputs.hidden_states, outputs.attentions)
