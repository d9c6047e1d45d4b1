"""Token attributions of one target logit (targets.py), to the output of the model's embedding layer (after its
LayerNorm, where Captum's LayerIntegratedGradients on the embeddings module takes them), one score per position.

    integrated_gradients     ∫₀¹ ∇f(x' + α(x − x')) dα · (x − x'), summed over the hidden dimension (Sundararajan
                             et al. 2017). The baseline x' is the input with every token but the added specials
                             replaced by the pad token, same positions and segments. Completeness: the scores sum
                             to f(x) − f(x'); `delta` is what they miss. Cost: `steps` forward-and-backward passes.
    gradient_x_input         ∇f(x) · x, summed over the hidden dimension: one pass, exact.
    gradient_norm            ‖∇f(x)‖₂ over the hidden dimension (saliency, unsigned): one pass.
    grad_attention_rollout   Chefer et al. 2021: every layer's attention weighted by the target's gradient with
                             respect to it, positive part, averaged over heads, rolled out through the layers
                             (R ← R + Ā R from R = I); the scores are R − I's row of the target position ([CLS] for
                             a sequence-level target): what flowed into it through attention. One pass.

The integral is our own Gauss–Legendre quadrature. Captum's IntegratedGradients(method="gausslegendre") places the
same nodes with the same weights (the tests compare the scores with Captum's LayerIntegratedGradients) and, over
our target function, costs the same per step (benchmarks/ig_speed.py: 32 steps of MiniLM at 128 tokens 5.2 s
either way); but a Captum call starts over each time, so refining to a tolerance would pay again for every node
already evaluated, and Captum would make matplotlib a runtime dependency. Here, with a tolerance, the panels
already evaluated are kept and only the panels that miss the most of their share of f(x) − f(x') are halved
(f at their ends is known, so each panel's own error is known exactly): 1 % in 24 passes on MiniLM where
Gauss–Legendre over [0, 1] needs 32.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.errors import ExplainError
from bertcore.explain.targets import (
    SEQUENCE_TARGETS,
    Target,
    base_model,
    check_finite,
    check_target,
    check_weights_finite,
    model_inputs,
    target_logit,
    target_logit_and_attentions,
)

ATTRIBUTION_METHODS = ("integrated_gradients", "gradient_x_input", "gradient_norm", "grad_attention_rollout")
# Integrated gradients' evaluations at most. Gauss–Legendre's n nodes come from an n × n eigenproblem (numpy's
# leggauss: 20,000 nodes took 3.5 GB, 10^7 would have asked for 728 TiB), and each node is a forward-and-backward
# pass: 2,048 is ~30 MB for the nodes and minutes of passes on a small model, far past where the scores stop
# changing (64 is usual; a tolerance of 1 % takes ~20 on MiniLM).
MAX_STEPS = 2048

# Positions × steps per forward-and-backward batch: about what fills a CPU's caches without paging the activations
# of a base-size model (128 tokens -> 32 steps at a time).
_TOKENS_PER_BATCH = 4096


@dataclass(frozen=True)
class Attribution:
    method: str  # one of ATTRIBUTION_METHODS
    target: Target  # as check_target returned it
    scores: np.ndarray  # (T,) float32: one score per position (padding scores 0)
    delta: float | None  # integrated_gradients: sum(scores) − (target_value − baseline_value); None otherwise
    target_value: float  # f(x): the target's logit on the input
    baseline_value: float | None  # f(x'): on the baseline (integrated_gradients only)
    steps: int  # forward-and-backward passes used (forward-only passes count as one third)


def attribute(model: nn.Module, tokenizer: Any, encoding: Any, target, *, method: str = "integrated_gradients",
              steps: int = 64, tolerance: float | None = None) -> Attribution:
    """Attributions of `target` (targets.py) on `encoding` by `method` (ATTRIBUTION_METHODS).

    integrated_gradients: with tolerance None, `steps` Gauss–Legendre nodes over [0, 1]; with a tolerance (e.g.
    0.01), nodes are added until |delta| ≤ tolerance × |f(x) − f(x')|, at most `steps` passes (then the
    Attribution says how far it got: see its delta). The other methods take one pass and ignore both."""
    return run_to_end(attribute_progress(model, tokenizer, encoding, target, method=method, steps=steps,
                                         tolerance=tolerance)).result


def attribute_progress(model: nn.Module, tokenizer: Any, encoding: Any, target, *,
                       method: str = "integrated_gradients", steps: int = 64,
                       tolerance: float | None = None) -> Iterator[Progress[Attribution]]:
    """attribute() as a generator of Progress records: `done` and `total` count forward-and-backward passes
    (total is the `steps` budget), `result` is the Attribution so far (its scores are partial sums until the
    last record). Stop by not asking for more; the model is left in the mode it had."""
    if method not in ATTRIBUTION_METHODS:
        raise ExplainError(f"attribution method {method!r} is unknown; the methods are "
                           f"{', '.join(ATTRIBUTION_METHODS)}")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ExplainError(f"steps is {steps!r}; give a whole number from 1 to {MAX_STEPS:,} (64 is usual; with a "
                           "tolerance, fewer are used where they suffice)")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise ExplainError(f"tolerance is {tolerance!r}; give a fraction of f(x) − f(baseline) such as 0.01, or "
                           "None for a fixed number of steps")
    target = check_target(model, encoding, target)
    check_weights_finite(model)
    device = next(model.parameters()).device
    inputs = model_inputs(encoding, device)
    if method == "integrated_gradients":
        baseline_ids = [token_id if special else tokenizer.pad_token_id
                        for token_id, special in zip(encoding.input_ids, encoding.special_tokens_mask, strict=True)]
        work = _integrated_gradients(model, target, inputs, baseline_ids, steps, tolerance)
    elif method == "grad_attention_rollout":
        work = _one(lambda: _grad_attention_rollout(model, target, inputs))
    else:
        work = _one(lambda: _gradient(model, target, inputs, method))
    while True:
        # Eval mode and gradients only while working: between two records the model and the caller's grad mode
        # are as they were.
        with eval_mode(model), torch.enable_grad():
            record = next(work, None)
        if record is None:
            return
        yield record


def _one(compute) -> Iterator[Progress[Attribution]]:
    yield Progress(1, 1, compute())


def embedding_output(model: nn.Module, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T, E): what the model's embedding layer gives for these ids (every family's own way of adding
    positions and segments), without running the encoder after it."""
    caught: list[torch.Tensor] = []
    thread = threading.get_ident()

    def catch(module, args, output):
        if threading.get_ident() == thread:  # another thread's forward of the same model runs on undisturbed
            caught.append(output)
            raise _EmbeddingsDone

    handle = base_model(model).embeddings.register_forward_hook(catch)
    try:
        base_model(model)(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
    except _EmbeddingsDone:
        pass
    finally:
        handle.remove()
    return caught[0]


class _EmbeddingsDone(Exception):
    """Raised from the embedding layer's hook: the rest of the forward is not needed."""


def gauss_legendre(num_nodes: int, start: float = 0.0, stop: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [start, stop]: exact for polynomials of degree 2 × num_nodes − 1."""
    nodes, weights = np.polynomial.legendre.leggauss(num_nodes)
    half = (stop - start) / 2
    return start + half * (nodes + 1), half * weights


def _contributions(model, target, inputs, points: torch.Tensor, difference: torch.Tensor) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
    """At each point (K, T, E) of the path: ∇f · (x − x') summed over the hidden dimension, (K, T) float64, and
    f itself, (K,) float64. The points go through the model in batches of about _TOKENS_PER_BATCH positions."""
    contributions, values = [], []
    per_batch = max(1, _TOKENS_PER_BATCH // points.shape[1])
    for start in range(0, points.shape[0], per_batch):
        chunk = points[start:start + per_batch].detach().requires_grad_(True)
        logit = target_logit(model, target, inputs_embeds=chunk, token_type_ids=inputs["token_type_ids"],
                             attention_mask=inputs["attention_mask"])
        (gradient,) = torch.autograd.grad(logit.sum(), chunk)  # (K, T, E)
        contributions.append((gradient * difference).sum(dim=-1, dtype=torch.float64))  # (K, T)
        values.append(logit.detach().double())
    return torch.cat(contributions), torch.cat(values)


@dataclass(eq=False)  # compared by identity: a panel is one stretch of one run
class _Panel:
    """A stretch [start, stop] of the path, its Gauss–Legendre sum and how far that misses f(stop) − f(start)."""

    start: float
    stop: float
    scores: torch.Tensor  # (T,) float64
    error: float


class _Path:
    """The straight path from the baseline's embedding output to the input's, and the target along it."""

    def __init__(self, model, target, inputs, baseline_ids: list[int]):
        self.model, self.target, self.inputs = model, target, inputs
        both_ids = torch.cat([inputs["input_ids"], torch.tensor([baseline_ids], device=inputs["input_ids"].device)])
        with torch.no_grad():
            both = embedding_output(model, both_ids, inputs["token_type_ids"].expand(2, -1),
                                    inputs["attention_mask"].expand(2, -1))  # (2, T, E)
        self.baseline = both[1]
        self.difference = both[0] - both[1]  # (T, E)
        self.passes = 0.0  # forward-and-backward passes so far; a forward alone counts a third

    def points(self, alphas) -> torch.Tensor:
        alpha = torch.as_tensor(np.asarray(alphas), dtype=self.baseline.dtype, device=self.baseline.device)
        return self.baseline + alpha[:, None, None] * self.difference  # (K, T, E)

    def values(self, alphas: list[float]) -> list[float]:
        """f along the path at these alphas: forward passes only."""
        with torch.no_grad():
            logits = target_logit(self.model, self.target, inputs_embeds=self.points(alphas),
                                  token_type_ids=self.inputs["token_type_ids"],
                                  attention_mask=self.inputs["attention_mask"])
        self.passes += len(alphas) / 3
        return logits.double().tolist()

    def contributions(self, alphas) -> tuple[torch.Tensor, torch.Tensor]:
        """∇f(path(α)) · (x − x') summed over the hidden dimension, (K, T) float64, and f(path(α)), (K,)."""
        self.passes += len(alphas)
        return _contributions(self.model, self.target, self.inputs, self.points(alphas), self.difference)


def _integrated_gradients(model, target, inputs, baseline_ids, steps, tolerance) -> Iterator[Progress[Attribution]]:
    path = _Path(model, target, inputs, baseline_ids)
    target_value, baseline_value = path.values([1.0, 0.0])
    check_finite(target_value, "the target's logit")
    check_finite(baseline_value, "the target's logit on the baseline (every token padding)")
    change = target_value - baseline_value

    def result(scores: torch.Tensor) -> Attribution:
        check_finite(float(scores.sum()), "the sum of the target's gradients along the path")
        return Attribution("integrated_gradients", target, scores.float().cpu().numpy(),
                           float(scores.sum()) - change, target_value, baseline_value, round(path.passes))

    if tolerance is None:
        alphas, weights = gauss_legendre(steps)
        scores = torch.zeros(path.difference.shape[0], dtype=torch.float64, device=path.difference.device)
        per_batch = max(1, _TOKENS_PER_BATCH // path.difference.shape[0])
        for start in range(0, steps, per_batch):
            part = slice(start, start + per_batch)
            contributions, _ = path.contributions(alphas[part])
            scores = scores + (torch.as_tensor(weights[part], dtype=torch.float64, device=scores.device)[:, None]
                               * contributions).sum(dim=0)
            yield Progress(min(start + per_batch, steps), steps, result(scores))
        return
    ends = {0.0: baseline_value, 1.0: target_value}
    yield from _refined_integrated_gradients(path, change, ends, steps, tolerance, result)


def _refined_integrated_gradients(path, change, ends, steps, tolerance, result):
    """Panels halved where the most of f(x) − f(x') is missed, until |delta| ≤ tolerance × |change|.

    First one panel, [0, 1], with three Gauss–Legendre nodes: a smooth path (random weights) is within 1 % there
    (BERT-base at 128 tokens: 0.15 %, where two nodes miss 2.4 %). Rules that would save the two forward passes
    for f(x) and f(x') by putting a node at an end miss more for the same passes (same case: Gauss–Radau with 3
    nodes 1.3–1.4 %) or cost as much (Gauss–Lobatto with 4: 4 passes); a pass is 88 % matrix products (profiled,
    one thread), so the count of passes is the cost. Then the panels missing the most are halved,
    the halves taking one node, their midpoint.
    Measured on MiniLM (benchmarks/ig_speed.py), the path's slope is flat for long stretches and changes sharply in
    a few places; a panel's own error is known exactly (f at its ends is known), so halving only the panels that
    miss the most reaches 1 % with ~20 passes where Gauss–Legendre over [0, 1] needs 24–32. Midpoints, because the
    pass at a panel's midpoint gives f there: its halves' shared end then needs no forward pass of its own."""
    panels: list[_Panel] = []
    to_evaluate = [(0.0, 1.0, 3)]  # (start, stop, nodes)
    while True:
        rules = [gauss_legendre(nodes, start, stop) for start, stop, nodes in to_evaluate]
        contributions, values = path.contributions(np.concatenate([alphas for alphas, _ in rules]))
        first = 0
        for (start, stop, nodes), (_, weights) in zip(to_evaluate, rules, strict=True):
            rows = contributions[first:first + nodes]  # (nodes, T)
            if nodes % 2:  # an odd rule's middle node is the panel's midpoint: f there comes free
                ends[(start + stop) / 2] = float(values[first + nodes // 2])
            first += nodes
            scores = (torch.as_tensor(weights, dtype=torch.float64, device=rows.device)[:, None] * rows).sum(dim=0)
            panels.append(_Panel(start, stop, scores, float(scores.sum()) - (ends[stop] - ends[start])))
        scores = sum(panel.scores for panel in panels)
        done = abs(float(scores.sum()) - change) <= tolerance * abs(change)
        worst = max(abs(panel.error) for panel in panels)
        # Every panel missing at least half as much as the worst is halved in the next batch.
        chosen = [panel for panel in panels if abs(panel.error) >= worst / 2]
        unknown = [(panel.start + panel.stop) / 2 for panel in chosen if (panel.start + panel.stop) / 2 not in ends]
        if done or path.passes + 2 * len(chosen) + len(unknown) / 3 > steps:
            yield Progress(steps, steps, result(scores))
            return
        yield Progress(round(path.passes), steps, result(scores))
        if unknown:
            ends.update(zip(unknown, path.values(unknown), strict=True))
        panels = [panel for panel in panels if panel not in chosen]
        to_evaluate = []
        for panel in chosen:
            middle = (panel.start + panel.stop) / 2
            to_evaluate += [(panel.start, middle, 1), (middle, panel.stop, 1)]


def _gradient(model, target, inputs, method: str) -> Attribution:
    """gradient_x_input or gradient_norm: one forward-and-backward pass at the input."""
    with torch.no_grad():
        embedded = embedding_output(model, inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"])
    embedded.requires_grad_(True)
    logit = target_logit(model, target, inputs_embeds=embedded, token_type_ids=inputs["token_type_ids"],
                         attention_mask=inputs["attention_mask"])
    (gradient,) = torch.autograd.grad(logit.sum(), embedded)  # (1, T, E)
    check_finite(float(logit.detach()), "the target's logit")
    if method == "gradient_x_input":
        scores = (gradient * embedded.detach()).sum(dim=-1, dtype=torch.float64)[0]  # (T,)
    else:
        scores = gradient.double().norm(dim=-1)[0]  # (T,)
    check_finite(float(scores.sum()), "the sum of the target's gradients")
    return Attribution(method, target, scores.float().cpu().numpy(), None, float(logit.detach()), None, 1)


def _grad_attention_rollout(model, target, inputs) -> Attribution:
    """Chefer et al. 2021 (their eqs. 5–6 for self-attention): Ā = mean over heads of (∇A ⊙ A)⁺, R ← R + Ā R."""
    logit, attentions = target_logit_and_attentions(model, target, **inputs)
    check_finite(float(logit.detach().sum()), "the target's logit")
    gradients = torch.autograd.grad(logit.sum(), attentions)  # L of (1, nh, T, T)
    attentions = [attention.detach() for attention in attentions]
    seq_len = inputs["input_ids"].shape[1]
    rollout = torch.eye(seq_len, dtype=torch.float64, device=logit.device)  # (T, T)
    for attention, gradient in zip(attentions, gradients, strict=True):
        weighted = (gradient * attention).clamp(min=0).mean(dim=1)[0].double()  # (T, T): heads averaged
        rollout = rollout + weighted @ rollout
    kind, *values = target
    row = 0 if kind in SEQUENCE_TARGETS else values[0]
    scores = (rollout - torch.eye(seq_len, dtype=torch.float64, device=logit.device))[row]  # (T,)
    return Attribution("grad_attention_rollout", target, scores.float().cpu().numpy(), None, float(logit.detach()),
                       None, 1)
