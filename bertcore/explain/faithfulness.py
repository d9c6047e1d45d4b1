"""How faithful a token attribution is to the model: remove the tokens it ranks highest and see the target move.

Given scores (T,) from any method (bertcore.attribute, a rollout row, a patching row), the candidate tokens are
ranked by score, highest first (signed: a token that pushes the target's logit up ranks above one that pushes it
down). The candidates are every real token but the added specials ([CLS], [SEP]) and, for an MLM target, the
position being predicted. A token is removed by replacing it with the pad token, its position, segment and
attention mask kept: the same replacement as the attribution baseline (bertcore.explain.attribution), so an
explanation is judged on the same scale it was computed on. f is the target's logit (bertcore.explain.targets).

- deletion curve: f with the top k candidates removed, k = 0..n (n candidates); a faithful ranking makes it fall
  fast, so a lower area is better (Petsiuk et al. 2018's deletion, on tokens).
- insertion curve: f with only the top k candidates kept (all others removed), k = 0..n; it should rise fast, so a
  higher area is better.
  The areas are trapezoids over the fraction k/n in [0, 1], in logit units.
- comprehensiveness and sufficiency (ERASER, DeYoung et al. 2020), as its AOPC: for each bin b of 1, 5, 10, 20
  and 50 % the rationale r_b is the top ceil(b·n) candidates; comprehensiveness = mean over bins of
  f(x) − f(x without r_b) (high: the rationale mattered), sufficiency = mean over bins of f(x) − f(r_b alone)
  (low: the rationale suffices). ERASER defines them on the predicted class's probability; here f is the target's
  logit, the quantity every Explain method explains (defined for every head, regression and ELECTRA's single
  logit included).

For n up to `max_points` every k is evaluated; above it, `max_points` + 1 evenly spaced k plus the bins' k, so a
512-token input costs about 2 × 66 forward passes, run as batches.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertcore.analysis._shared import eval_mode
from bertcore.analysis.progress import Progress, run_to_end
from bertcore.errors import ExplainError
from bertcore.explain.targets import Target, check_target, check_weights_finite, target_logit
from bertcore.tokenization.wordpiece import Encoding

ERASER_BINS = (0.01, 0.05, 0.10, 0.20, 0.50)
_BATCH_BUDGET = 1 << 24  # floats of residual stream per batch (64 MB): rows = budget // (T · hidden width)


@dataclass(frozen=True)
class Faithfulness:
    target: Target
    order: np.ndarray  # (n,) int64: the candidate positions, highest score first (removed / added in this order)
    fractions: np.ndarray  # (K,) float32: k / n of the curve points, from 0 to 1
    deletion: np.ndarray  # (K,) float32: f with the top k candidates replaced by the pad token
    insertion: np.ndarray  # (K,) float32: f with only the top k candidates kept
    deletion_auc: float  # area under deletion over [0, 1]: lower is more faithful
    insertion_auc: float  # area under insertion over [0, 1]: higher is more faithful
    comprehensiveness: float  # ERASER AOPC over ERASER_BINS: higher is more faithful
    sufficiency: float  # ERASER AOPC over ERASER_BINS: lower is more faithful
    comprehensiveness_per_bin: np.ndarray  # (5,) f(x) − f(x without r_b)
    sufficiency_per_bin: np.ndarray  # (5,) f(x) − f(r_b alone)
    full_value: float  # f(x)
    empty_value: float  # f with every candidate removed
    replacement_token_id: int  # the pad token's id


def faithfulness(model: nn.Module, tokenizer, encoding: Encoding, target: Target, scores: Sequence[float] | np.ndarray,
                 *, max_points: int = 64) -> Faithfulness:
    """Deletion and insertion curves, their areas, comprehensiveness and sufficiency of a ranking by `scores`
    (see the module docstring); runs faithfulness_progress to its end."""
    return run_to_end(faithfulness_progress(model, tokenizer, encoding, target, scores,
                                            max_points=max_points)).result


def faithfulness_progress(model: nn.Module, tokenizer, encoding: Encoding, target: Target,
                          scores: Sequence[float] | np.ndarray, *,
                          max_points: int = 64) -> Iterator[Progress[Faithfulness | None]]:
    """faithfulness as a generator: one record per batch of inputs evaluated (done = inputs, total = all of
    them), the result None until the last record."""
    target = check_target(model, encoding, target)
    check_weights_finite(model)
    scores = np.asarray(scores, dtype=np.float64)
    seq_len = len(encoding)
    if scores.shape != (seq_len,):
        raise ExplainError(f"the scores have shape {scores.shape} but the input has {seq_len} positions; pass one "
                           "score per position (an Attribution's scores, or a rollout row)")
    if not np.isfinite(scores).all():
        raise ExplainError("the scores hold NaN or infinite values; a ranking needs a finite score per position")
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 2:
        raise ExplainError(f"max_points is {max_points!r}; give an integer of at least 2 curve points")
    pad_id = getattr(tokenizer, "pad_token_id", None)
    if pad_id is None:
        pad_id = model.config.pad_token_id
    excluded = {target[1]} if target[0] == "mlm" else set()
    candidates = [position for position in range(seq_len) if encoding.attention_mask[position]
                  and not encoding.special_tokens_mask[position] and position not in excluded]
    if not candidates:
        raise ExplainError("the input has no token to remove (only the added specials and the predicted position); "
                           "explain a longer input")
    # Highest score first; among equal scores the earlier position first (a stable, reproducible order).
    order = np.array(sorted(candidates, key=lambda position: (-scores[position], position)), dtype=np.int64)
    count = len(order)
    bin_sizes = [max(1, math.ceil(fraction * count)) for fraction in ERASER_BINS]
    if count <= max_points:
        sizes = list(range(count + 1))
    else:
        sizes = sorted({round(value) for value in np.linspace(0, count, max_points + 1)} | set(bin_sizes))
    input_ids = np.asarray(encoding.input_ids, dtype=np.int64)
    rows = []  # deletion inputs, then insertion inputs
    for keep_top in (False, True):
        for size in sizes:
            ids = input_ids.copy()
            removed = order[size:] if keep_top else order[:size]
            ids[removed] = pad_id
            rows.append(ids)
    device = next(model.parameters()).device
    segments = torch.tensor([list(encoding.segment_ids)], dtype=torch.long, device=device)
    mask = torch.tensor([list(encoding.attention_mask)], dtype=torch.long, device=device)
    width = getattr(model.config, "hidden_size", 768)
    batch_rows = max(1, _BATCH_BUDGET // (seq_len * width))
    values = []
    with eval_mode(model), torch.inference_mode():
        full_value = float(target_logit(model, target, input_ids=torch.tensor(input_ids[None], device=device),
                                        token_type_ids=segments, attention_mask=mask)[0])
        for start in range(0, len(rows), batch_rows):
            batch = torch.tensor(np.stack(rows[start:start + batch_rows]), device=device)
            values.append(target_logit(model, target, input_ids=batch, token_type_ids=segments,
                                       attention_mask=mask).float().cpu().numpy())
            done = min(len(rows), start + batch_rows)
            if done < len(rows):
                yield Progress(done, len(rows), None)
    values = np.concatenate(values)
    deletion, insertion = values[:len(sizes)], values[len(sizes):]
    fractions = np.array(sizes, dtype=np.float64) / count
    at = {size: index for index, size in enumerate(sizes)}
    comprehensiveness = np.array([full_value - deletion[at[size]] for size in bin_sizes], dtype=np.float32)
    sufficiency = np.array([full_value - insertion[at[size]] for size in bin_sizes], dtype=np.float32)
    yield Progress(len(rows), len(rows), Faithfulness(
        target=target, order=order, fractions=fractions.astype(np.float32), deletion=deletion.astype(np.float32),
        insertion=insertion.astype(np.float32), deletion_auc=_area(fractions, deletion),
        insertion_auc=_area(fractions, insertion), comprehensiveness=float(comprehensiveness.mean()),
        sufficiency=float(sufficiency.mean()), comprehensiveness_per_bin=comprehensiveness,
        sufficiency_per_bin=sufficiency, full_value=full_value, empty_value=float(deletion[-1]),
        replacement_token_id=int(pad_id)))


def _area(fractions: np.ndarray, values: np.ndarray) -> float:
    """Trapezoid area of values over fractions (ascending, 0 to 1)."""
    values = values.astype(np.float64)
    return float(np.sum(np.diff(fractions) * (values[1:] + values[:-1]) / 2))
