"""Which heads matter: the gradient of the loss with respect to a per-head gate (Michel et al. 2019).

Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?", section 4.1: every head's attention
output is multiplied by a gate ξ_h, and the importance of head h is I_h = Σ_x |∂L(x)/∂ξ_h| at ξ = 1, a
first-order estimate of how much the loss moves when the head is switched off. As in their code, x runs over
batches (L is each batch's mean loss) and the absolute value is taken per batch. The gate is the models'
`head_mask`: it scales a head's probabilities (explicit path) or its context (SDPA path), the same thing since
context = P·V. Only the gate's gradient is asked of autograd: no parameter gradients, no optimizer, dropout
off.

    importance = head_importance(model, pretraining_sample(data, 256))   # (layers, heads), raw sums
    shown = normalize_importance(importance)                              # per-layer L2, then min-max

Works for `BertForPreTraining` (loss = MLM + NSP) and for any model whose forward takes `head_mask` and
returns an object with `.loss` and whose `config` names `num_hidden_layers` and `num_attention_heads` (the
task heads with transformers' names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertcore.analysis._shared import eval_mode, is_int_at_least
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.data.batches import PretrainingData
from bertcore.data.masking import Masking
from bertcore.tokenization.wordpiece import Encoding

NextSentenceChoice = Literal["predicted", "is_next", "not_next", "none"]
NEXT_SENTENCE_LABELS = {"is_next": 0, "not_next": 1}  # the paper's / HF convention: 0 = IsNext
Objective = Literal["mlm+nsp", "mlm", "nsp"]
OBJECTIVE_LABELS = {"mlm+nsp": {"labels", "next_sentence_label"}, "mlm": {"labels"}, "nsp": {"next_sentence_label"}}


def head_importance(
    model: nn.Module,
    batches: Iterable[Mapping[str, Any]],
    *,
    head_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Σ over batches of |∂ loss / ∂ head gate|: (layers, heads) float64, not normalised (Michel et al. 2019).

    batches: each a dict of the model's forward keyword arguments with labels (tensors of shape (B, T) and
    (B,)), or a `bertcore.data.batches.Batch`. head_mask (layers, heads): where the gradient is taken; the paper takes
    it at all ones (the default), a partly pruned mask gives the importance of the remaining (and, for
    gates at 0, of the switched-off) heads. To follow progress or cancel, iterate `iter_head_importance`.
    """
    progress = run_to_end(iter_head_importance(model, batches, head_mask=head_mask))
    if progress is None:
        raise ValueError("no batches were given; pass at least one batch (a dict of forward arguments with labels)")
    return progress.result


def iter_head_importance(
    model: nn.Module,
    batches: Iterable[Mapping[str, Any]],
    *,
    total: int | None = None,
    head_mask: np.ndarray | None = None,
) -> Iterator[Progress[np.ndarray]]:
    """`head_importance` one batch at a time: yields Progress(done batches, total, running sum (L, H) float64).

    total defaults to len(batches) when it has one. Stop iterating to cancel; between yields the model is in
    the mode it was found in. Each yielded array is a fresh copy, safe to send to another thread.
    """
    num_layers, num_heads = _head_grid(model)
    gate = _gate_values(head_mask, (num_layers, num_heads))
    if total is None and isinstance(batches, Sized):
        total = len(batches)
    running = np.zeros((num_layers, num_heads), np.float64)
    done = 0
    for index, batch in enumerate(batches):
        inputs = _forward_arguments(batch, index)
        gradient = _gate_gradient(model, inputs, gate, lambda output, i=index: _loss_of(output, i))
        running += np.abs(gradient)
        done += 1
        yield Progress(done=done, total=total, result=running.copy())


def normalize_importance(scores: np.ndarray) -> np.ndarray:
    """Michel et al.'s display normalisation: each layer divided by its L2 norm, then global min–max to [0, 1].

    scores: (layers, heads), non-negative (e.g. from `head_importance`). A layer of zeros stays zero; if every
    normalised score is equal the result is all zeros. Returns (layers, heads) float64.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or 0 in scores.shape:
        raise ValueError(f"importance scores must be a (layers, heads) array, got shape {scores.shape}")
    if not np.all(np.isfinite(scores)) or np.any(scores < 0):
        raise ValueError("importance scores must be finite and non-negative (absolute gradients); got "
                         f"min {np.nanmin(scores)}, max {np.nanmax(scores)}")
    layer_norms = np.sqrt((scores**2).sum(axis=1, keepdims=True))  # (L, 1)
    per_layer = np.divide(scores, layer_norms, out=np.zeros_like(scores), where=layer_norms > 0)
    low, high = per_layer.min(), per_layer.max()
    if high == low:
        return np.zeros_like(per_layer)
    return (per_layer - low) / (high - low)


def input_head_importance(
    model: nn.Module,
    encoding: Encoding,
    masking: Masking | None = None,
    *,
    next_sentence: NextSentenceChoice = "predicted",
    head_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Head importance (Michel et al. 2019) on the one input in the inspector: (layers, heads) float64.

    For a model with an MLM head, an NSP head or both (`has_mlm_head`, `has_nsp_head`). The loss is the MLM
    cross-entropy at the masked positions
    (labels = the original ids, whatever the model saw there: [MASK], a random token or the token itself),
    plus, when the encoding has a sentence B, an NSP cross-entropy against `next_sentence`:
    - "predicted" (default): the model's own NSP decision on this input (argmax of its logits, from the same
      forward pass). A typed pair has no ground truth — the user may pair anything — so the importance then
      says which heads hold up what the model concluded, as a saliency map of its prediction does;
    - "is_next" / "not_next": a label the caller vouches for (e.g. the pair came from the corpus);
    - "none": MLM only.
    A model without an NSP head (BertForMaskedLM, DistilBERT, RoBERTa, ALBERT's SOP is not NSP) gets the MLM
    term alone, pair or not. A single sentence never gets an NSP term: the model was trained on pairs only, so
    NSP on one sentence has no meaning. With no masked position and no NSP term there is nothing to explain
    (ValueError).
    """
    has_mlm_head, has_nsp_head = model.has_mlm_head, model.has_nsp_head
    if not (has_mlm_head or has_nsp_head):
        raise ValueError("this model has no MLM or NSP head (a plain encoder checkpoint), so it has no loss on "
                         "this input; use head_importance with a task model and labelled batches")
    if next_sentence not in ("predicted", "is_next", "not_next", "none"):
        raise ValueError(f"next_sentence={next_sentence!r}; use 'predicted', 'is_next', 'not_next' or 'none'")
    if masking is not None and len(masking.decisions) != len(encoding):
        raise ValueError(f"the masking covers {len(masking.decisions)} positions but the input has "
                         f"{len(encoding)}; mask the current encoding again")
    labels = masking.labels if has_mlm_head and masking is not None and masking.positions else None
    is_pair = 1 in encoding.sequence_ids
    # A masked LM alone (BertForMaskedLM, DistilBERT, RoBERTa…) has no sentence-pair head to put a loss on.
    use_nsp = is_pair and next_sentence != "none" and has_nsp_head
    if labels is None and not use_nsp:
        if not has_nsp_head:
            why, fix = " and this model has no NSP head to score a sentence pair with", "mask a token"
        elif is_pair:
            why, fix = " and NSP is off (next_sentence='none')", "mask a token"
        else:
            why, fix = " and no sentence B", "mask a token (or type sentence B)"
        raise ValueError(f"nothing to explain: the input has no masked position{why}; {fix} to get head importance")
    device = next(model.parameters()).device

    def row(values: list[int]) -> torch.Tensor:
        return torch.tensor([values], dtype=torch.long, device=device)  # (1, T)

    inputs = {
        "input_ids": row(masking.masked_ids if masking is not None else encoding.input_ids),
        "token_type_ids": row(encoding.segment_ids),
        "attention_mask": row(encoding.attention_mask),
    }
    if labels is not None:
        inputs["labels"] = row(labels)

    def loss_of(output: Any) -> torch.Tensor:
        loss = output.loss if labels is not None else None  # the MLM loss: no NSP label was passed
        if use_nsp:
            logits = output.seq_relationship_logits.float()  # (1, 2)
            if next_sentence == "predicted":
                target = logits.argmax(dim=-1).detach()
            else:
                target = torch.tensor([NEXT_SENTENCE_LABELS[next_sentence]], device=logits.device)
            nsp_loss = F.cross_entropy(logits, target)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return loss

    num_layers, num_heads = _head_grid(model)
    gate = _gate_values(head_mask, (num_layers, num_heads))
    return np.abs(_gate_gradient(model, inputs, gate, loss_of))


def pretraining_sample(
    data: PretrainingData, num_pairs: int, *, batch_size: int = 32, objective: Objective = "mlm+nsp"
) -> list[dict[str, Any]]:
    """num_pairs held-out sentence pairs of `data` as labelled batches (dicts of forward arguments).

    The held-out pairs and their masks are fixed by the data's seed (`PretrainingData.heldout_batches`), so
    the same call gives the same sample; held-out text is what Michel et al. measure importance on.
    objective picks the labels kept, hence the loss that importance differentiates: "mlm+nsp" (the
    pretraining loss), "mlm" or "nsp". They rank heads differently: on the shipped default model, whose NSP
    head overfit, the NSP term's gradients are the larger and rank heads that the MLM barely needs on top,
    while masking heads in order of MLM importance keeps MLM accuracy far above a random order.
    """
    if objective not in OBJECTIVE_LABELS:
        raise ValueError(f"objective is {objective!r}; use one of {', '.join(OBJECTIVE_LABELS)}")
    if not is_int_at_least(num_pairs, 1):
        raise ValueError(f"num_pairs is {num_pairs!r}; ask for at least 1 pair (the app uses 256)")
    if not is_int_at_least(batch_size, 1):
        raise ValueError(f"batch_size is {batch_size!r}; it must be a positive integer (e.g. 32)")
    if data.heldout is None:
        raise ValueError("this data has no held-out split (heldout_fraction=0); build PretrainingData with "
                         "heldout_fraction > 0 to sample pairs the model was not trained on")
    num_batches = -(-num_pairs // batch_size)
    batches = [batch.model_inputs() for batch in data.heldout_batches(num_batches, batch_size)]
    remainder = num_pairs - (num_batches - 1) * batch_size
    batches[-1] = {name: tensor[:remainder] for name, tensor in batches[-1].items()}
    dropped = {"labels", "next_sentence_label"} - OBJECTIVE_LABELS[objective]
    return [{name: tensor for name, tensor in batch.items() if name not in dropped} for batch in batches]


# ---- internals -----------------------------------------------------------------------------------------------


def _head_grid(model: nn.Module) -> tuple[int, int]:
    config = getattr(model, "config", None)
    try:
        return int(config.num_hidden_layers), int(config.num_attention_heads)
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"{type(model).__name__} has no config with num_hidden_layers and num_attention_heads; "
                         "pass a BERT model (bertcore's or one with transformers' names)") from None


def _gate_values(head_mask: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray:
    if head_mask is None:
        return np.ones(shape, np.float64)
    values = np.asarray(head_mask, dtype=np.float64)
    if values.shape != shape:
        raise ValueError(f"head_mask has shape {values.shape}; this model needs (layers, heads) = {shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("head_mask holds NaN or infinite values; use 1 for a head on and 0 for a head off")
    return values


def _forward_arguments(batch: Any, index: int) -> dict[str, Any]:
    if hasattr(batch, "model_inputs"):
        batch = batch.model_inputs()  # a bertcore.data.batches.Batch
    if not isinstance(batch, Mapping):
        raise ValueError(f"batch {index} is a {type(batch).__name__}; each batch must be a dict of the model's "
                         "forward keyword arguments (input_ids, ..., labels) or a bertcore.data.batches.Batch")
    if "head_mask" in batch:
        raise ValueError(f"batch {index} carries its own head_mask; importance sets the head gates itself — "
                         "pass the point to evaluate at as head_mask= instead")
    return dict(batch)


def _loss_of(output: Any, index: int) -> torch.Tensor:
    loss = getattr(output, "loss", None)
    if loss is None:
        raise ValueError(f"the model returned no loss for batch {index}; include its labels (labels= and, for "
                         "pretraining, next_sentence_label=) so there is a loss to differentiate")
    return loss


def _gate_gradient(
    model: nn.Module,
    inputs: dict[str, Any],
    gate_values: np.ndarray,
    loss_of: Callable[[Any], torch.Tensor],
) -> np.ndarray:
    """∂ loss_of(model(**inputs, head_mask=gate)) / ∂ gate at gate_values, (L, H) float64; model in eval mode."""
    parameter = next(model.parameters())
    device, dtype = parameter.device, parameter.dtype
    inputs = {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in inputs.items()}
    with eval_mode(model), torch.inference_mode(False), torch.enable_grad():
        gate = torch.tensor(gate_values, dtype=dtype, device=device, requires_grad=True)  # (L, H)
        loss = loss_of(model(**inputs, head_mask=gate))
        if not torch.isfinite(loss):
            raise ValueError(f"the loss is {loss.item()}; the model or its labels are broken")
        (gradient,) = torch.autograd.grad(loss, gate, allow_unused=True)
    if gradient is None:
        raise ValueError(f"the loss of {type(model).__name__} does not depend on head_mask; its forward must "
                         "scale each head's attention by head_mask")
    return gradient.detach().to(torch.float64).cpu().numpy()
