"""What every training loop is set with, checked alike for every kind of run, and BERT's learning-rate schedule.
Torch-free."""

from __future__ import annotations

import math

from bertcore.checks import check_at_most, check_int, check_number

# Upper bounds of the numeric settings whose huge values overflow somewhere (each check says where):
MAX_STEPS = 10**12  # the schedule divides by the step count as a float; 10^12 steps outlast any machine
MAX_EPOCHS = 1_000_000.0  # steps = epochs × steps per epoch must stay a finite count
MAX_NUM_THREADS = 1024  # torch.set_num_threads overflows (or tries to start that many threads) beyond
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.manual_seed accepts
FLOAT32_TINY = 1.1754944e-38  # the smallest normal float32: a smaller adam_eps is 0 to the optimizer


def linear_schedule(step: int, *, lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of 1-based `step`: linear warm-up to `lr` over `warmup_steps`, then linear decay towards 0
    (BERT's schedule, for pretraining and fine-tuning alike), step for step what transformers'
    `get_linear_schedule_with_warmup` gives: its scheduler steps after the optimizer, so update k uses its factor
    of k - 1. The first update of a warm-up therefore has rate 0 and the last one lr / (total - warmup) (it would
    reach 0 one step after the end)."""
    done = step - 1  # updates applied before this one
    if done < warmup_steps:
        return lr * done / max(1, warmup_steps)
    return lr * max(0.0, (total_steps - done) / max(1, total_steps - warmup_steps))


def check_loop_settings(config, *, lr_hint: str) -> None:
    """The settings every training loop reads (bertcore.training.loop), checked alike for every kind of run."""
    if not (isinstance(config.lr, int | float) and math.isfinite(config.lr) and config.lr > 0):
        raise ValueError(f"lr must be a positive number, got {config.lr!r} ({lr_hint})")
    # (No upper bound on lr: a far too high one is what the loop's NaN and divergence messages name, rightly.)
    for name in ("weight_decay", "max_grad_norm"):
        check_number(name, getattr(config, name))
        if getattr(config, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(config, name)!r}"
                             + (" (0 = no clipping)" if name == "max_grad_norm" else " (0 = no decay)"))
    if config.weight_decay > 1 and config.lr * config.weight_decay >= 1:
        # AdamW's decoupled decay multiplies each decayed weight by (1 - lr × weight_decay) every step: at or past
        # 1 the weights are zeroed or flip sign, past 2 they grow geometrically and overflow. (A weight_decay of 1
        # or less is only pushed there by an lr of 1 or more, which the loop's messages name.)
        factor = 1 - config.lr * config.weight_decay
        damage = "overflow" if factor < -1 else "are zeroed or flip sign every step"
        raise ValueError(
            f"weight_decay is {config.weight_decay:g}, but AdamW multiplies every decayed weight by "
            f"1 - lr × weight_decay = {factor:.3g} each step (lr {config.lr:g}), so the weights {damage}; with this "
            f"lr weight_decay must be in [0, {1 / config.lr:,.4g}) (below 1/lr; usual values are 0.01 to 0.1)"
        )
    betas = config.adam_betas
    if (not isinstance(betas, tuple | list) or len(betas) != 2
            or not all(isinstance(b, int | float) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"adam_betas must be two numbers in [0, 1), such as (0.9, 0.999), got {betas!r}: Adam "
                         "divides by 1 - beta^step, which is 0 for a beta of 1")
    check_number("adam_eps", config.adam_eps)
    if config.adam_eps < FLOAT32_TINY:
        raise ValueError(f"adam_eps is {config.adam_eps!r}; it must be at least {FLOAT32_TINY:.3g} (usual: 1e-8 to "
                         "1e-6): Adam divides by sqrt(v) + eps, and where a weight's gradient is 0 a smaller eps "
                         "(0 in float32) gives 0/0 = NaN")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) \
            or not SEED_RANGE[0] <= config.seed <= SEED_RANGE[1]:
        raise ValueError(f"seed must be an integer from -2**63 to 2**64 - 1 (what torch.manual_seed takes), such "
                         f"as 0, got {config.seed!r}")
    if config.precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision {config.precision!r} is not one of auto, fp32, bf16")
    if config.num_threads is not None:
        check_int("num_threads", config.num_threads, minimum=1)
        check_at_most("num_threads", config.num_threads, MAX_NUM_THREADS,
                       "torch.set_num_threads overflows or starts that many threads")
    check_number("divergence_factor", config.divergence_factor)
    if not (config.divergence_factor == 0 or config.divergence_factor > 1):
        raise ValueError(f"divergence_factor must be 0 (off) or a number above 1 (e.g. 4), got "
                         f"{config.divergence_factor!r}; a factor of 1 or less would stop a healthy run")
    check_int("divergence_patience", config.divergence_patience, minimum=1)
    object.__setattr__(config, "adam_betas", tuple(float(b) for b in config.adam_betas))
