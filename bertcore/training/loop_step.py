"""One optimisation step of the training loop (a base class of bertcore.training.loop.TrainingLoop): the learning
rate, dropout re-seeded per step, forward and backward, gradient clipping, the step's numbers summed over ranks, and
the faults that end a run before its update is applied (NaN/inf, a diverging loss, out of memory).
"""

from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist
from torch import nn

from bertcore.data.batches import step_rng
from bertcore.errors import DivergenceError, NonFiniteLossError, OutOfMemoryTrainingError, TrainingError
from bertcore.training.loop_settings import linear_schedule
from bertcore.training.setup import is_out_of_memory


class LoopStep:
    """The step of `TrainingLoop`, which sets what this reads: config, task, model, optimizer, device, rank,
    world_size, step, total_steps, _train_model, _batches (the step's batch), _lock, _divergence,
    _unconfirmed_checkpoint, last_good_checkpoint, `_autocast()`, `_elapsed()` and the checkpoint verdicts of
    LoopCheckpoints."""

    def learning_rate(self, step: int) -> float:
        """Learning rate of 1-based `step`: linear warm-up to config.lr, then linear decay towards 0, step for step
        transformers' linear schedule (`linear_schedule`)."""
        return linear_schedule(step, lr=self.config.lr, warmup_steps=self.task.warmup_steps,
                               total_steps=self.total_steps)

    def _train_one_step(self):
        config, task = self.config, self.task
        step = self.step + 1
        started = time.perf_counter()
        learning_rate = self.learning_rate(step)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        try:
            batch = self._batches.batch(step).to(self.device, non_blocking=True)
            # Dropout draws from the global RNG: re-seed it per step (resume-exact) without disturbing the caller's.
            with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_available() else []):
                torch.manual_seed(step_rng(config.seed, self.rank, step, "dropout").getrandbits(63))
                with self._autocast():
                    output = self._train_model(**batch.model_inputs())
            output.loss.backward()
            if config.max_grad_norm > 0:
                grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), config.max_grad_norm, foreach=True)
            else:
                grads = [p.grad for p in self.model.parameters() if p.grad is not None]
                grad_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            sums = torch.cat([task.batch_sums(output, batch).float(),
                              torch.stack([grad_norm.float(), torch.tensor(float(batch.num_tokens),
                                                                           device=grad_norm.device)])])
            if self.world_size > 1:
                dist.all_reduce(sums)
            *task_sums, grad_norm_sum, tokens = sums.tolist()
            grad_norm_value = grad_norm_sum / self.world_size  # identical on every rank after DDP's all-reduce
            loss = task.loss_of(task_sums)
            if not (math.isfinite(loss) and math.isfinite(grad_norm_value)):
                self.optimizer.zero_grad(set_to_none=True)
                what = "loss" if not math.isfinite(loss) else "gradient norm"
                value = loss if what == "loss" else grad_norm_value
                self._discredit_unconfirmed(f"its weights gave a {what} of {value} at step {step}")
                raise NonFiniteLossError(
                    f"the {what} became {value} at step {step}; training stopped before applying that update. "
                    + self._restart_advice(), step, self.last_good_checkpoint)
            warning = self._watch_divergence(step, loss)
            with self._lock:
                self.optimizer.step()
                self.step = step
            self.optimizer.zero_grad(set_to_none=True)
        except TrainingError:
            raise
        except RuntimeError as error:
            if not is_out_of_memory(error):
                raise
            self.optimizer.zero_grad(set_to_none=True)
            raise OutOfMemoryTrainingError(
                f"{self.device} ran out of memory at step {step} with batch size {config.batch_size} × sequence "
                f"length {config.seq_len}; use a smaller --batch-size (e.g. {max(1, config.batch_size // 2)}) "
                f"or --seq-len (e.g. {max(8, config.seq_len // 2)}){task.smaller_model_hint}") from error
        seconds = time.perf_counter() - started
        return task.step_stats(
            task_sums, step=step, total_steps=self.total_steps, loss=loss, learning_rate=learning_rate,
            grad_norm=grad_norm_value, tokens=int(tokens), tokens_per_second=tokens / seconds,
            elapsed_seconds=self._elapsed(), warning=warning)

    def _watch_divergence(self, step: int, loss: float) -> str | None:
        """Feed the loss to the divergence monitor: DivergenceError (before the update is applied) when the run
        has diverged; a warning text on the first step the smoothed loss is far above its best."""
        monitor, config = self._divergence, self.config
        monitor.update(step, loss)
        if self._unconfirmed_checkpoint is not None:  # this loss is the one of the weights it holds
            if monitor.confirms(loss):
                self._confirm_checkpoint()
            else:
                self._discredit_unconfirmed(f"its weights gave a loss of {loss:.4g} at step {step}, with the smoothed "
                                            f"loss at {monitor.smoothed:.4g} against a best of {monitor.best:.4g}")
        if monitor.diverged:
            self.optimizer.zero_grad(set_to_none=True)
            raise DivergenceError(
                f"the loss diverged: {monitor.describe(step)}, above {config.divergence_factor:g}× its best for "
                f"{monitor.steps_above} steps — it explodes without becoming NaN. Training stopped before applying "
                f"that update. {self._restart_advice()}. (To turn this check off: divergence_factor=0, "
                f"{self.task.command} --divergence-factor 0.)",
                step, monitor.smoothed, monitor.best, monitor.best_step, self.last_good_checkpoint)
        if monitor.started_rising:
            return (f"the loss is rising far: {monitor.describe(step)}; the run stops if it stays above "
                    f"{config.divergence_factor:g}× its best for {config.divergence_patience} steps. Is the learning "
                    f"rate ({config.lr:g}) too high?")
        return None
