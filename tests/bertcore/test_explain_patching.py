"""Activation patching (bertcore.explain.patching): against patches made by hand with hooks on the whole model,
exact restorations where the answer is known, a planted dependency, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.errors import ExplainError
from bertcore.explain.mixing import encoder_layers
from bertcore.explain.patching import activation_patching, activation_patching_progress, output_projection
from bertcore.explain.targets import SEQUENCE_TARGETS, model_inputs, target_logit
from bertcore.models.bert import BertForPreTraining
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from tests.bertcore.test_explain_mixing import encoding_of, randomise_norms_and_biases, tiny_family_model
from tests.tiny_configs import tiny_bert

CLEAN_IDS = [2, 11, 17, 5, 23, 8, 3]
CORRUPTED_IDS = [2, 11, 29, 5, 23, 8, 3]  # position 2 edited
MLM_TARGET = ("mlm", 4, 9)


def tiny_model(family: str) -> torch.nn.Module:
    if family == "bert":
        torch.manual_seed(5)
        model = BertForPreTraining(tiny_bert(41)).eval()
        randomise_norms_and_biases(model, 6)
        return model
    if family == "modernbert":
        config = ModernBertConfig(vocab_size=41, hidden_size=28, intermediate_size=19, num_hidden_layers=3,
                                  num_attention_heads=2, local_attention=4, global_attn_every_n_layers=2,
                                  max_position_embeddings=32, norm_bias=True, attention_bias=True, pad_token_id=0,
                                  eos_token_id=1, bos_token_id=2, cls_token_id=2, sep_token_id=3)
        torch.manual_seed(5)
        model = ModernBertForMaskedLM(config).eval()
        randomise_norms_and_biases(model, 6)
        return model
    return tiny_family_model(family)


def target_of(family: str):
    return ("rtd", 4) if family == "electra" else MLM_TARGET


def by_hand(model, target, clean, corrupted, over: str) -> np.ndarray:
    """Each patch as one full forward of the whole model with a hook that copies the clean activation in."""
    layers = encoder_layers(model)
    num_heads = model.config.num_attention_heads
    clean_inputs, corrupted_inputs = model_inputs(clean), model_inputs(corrupted)
    seen: list[torch.Tensor] = []

    def run(module, kind, hook, inputs):
        register = module.register_forward_hook if kind == "forward" else module.register_forward_pre_hook
        handle = register(hook)
        try:
            with torch.no_grad():
                return float(target_logit(model, target, **inputs)[0])
        finally:
            handle.remove()

    def nth_call(index, action):  # ALBERT runs one module at several depths: act at depth `index` only
        calls = []
        wanted = 1 + sum(layer is layers[index] for layer in layers[:index])

        def hook(module, args, output=None):
            calls.append(None)
            return action(args if output is None else output) if len(calls) == wanted else None
        return hook

    result = []
    for index, layer in enumerate(layers):
        if over == "residual":
            run(layer, "forward", nth_call(index, lambda output: seen.append(output[0].clone())), clean_inputs)
            clean_output = seen.pop()
            row = []
            for position in range(len(clean)):
                def copy_in(output, position=position, clean_output=clean_output):
                    hidden = output[0]
                    grid = hidden.view(1, -1, hidden.size(-1))
                    if grid.size(1) == 1:  # BERT's last layer at the read position alone ([CLS] for a class)
                        if position == (0 if target[0] in SEQUENCE_TARGETS else target[1]):
                            grid[0] = clean_output.view(1, -1, hidden.size(-1))[0]
                    else:
                        grid[0, position] = clean_output.view(1, -1, hidden.size(-1))[0, position]
                    return output
                row.append(run(layer, "forward", nth_call(index, copy_in), corrupted_inputs))
        else:
            projection = output_projection(layer)
            run(projection, "forward_pre", nth_call(index, lambda args: seen.append(args[0].clone())), clean_inputs)
            clean_context = seen.pop()
            head_dim = clean_context.size(-1) // num_heads
            row = []
            for head in range(num_heads):
                def copy_head(args, head=head, head_dim=head_dim, clean_context=clean_context):
                    context = args[0].clone()
                    columns = slice(head * head_dim, (head + 1) * head_dim)
                    context[..., columns] = clean_context[..., columns]
                    return (context,)
                row.append(run(projection, "forward_pre", nth_call(index, copy_head), corrupted_inputs))
        result.append(row)
    return np.array(result)


@pytest.mark.parametrize("family", ["bert", "modernbert", "roberta", "distilbert", "electra", "albert"])
@pytest.mark.parametrize("over", ["residual", "heads"])
def test_equals_patches_made_by_hand_on_the_whole_model(family, over):
    model = tiny_model(family)
    clean, corrupted = encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS)
    target = target_of(family)
    result = activation_patching(model, None, clean, corrupted, target, over=over)
    expected = by_hand(model, target, clean, corrupted, over)
    np.testing.assert_allclose(result.patched_values, expected, rtol=1e-4, atol=1e-5)
    difference = result.clean_value - result.corrupted_value
    # float32 logits agree to ~1e-6; divided by a small difference, so do the scores
    np.testing.assert_allclose(result.scores, (expected - result.corrupted_value) / difference, rtol=1e-3,
                               atol=max(1e-4, 2e-5 / abs(difference)))
    assert result.layers_done == len(encoder_layers(model)) and result.note is None


@pytest.mark.parametrize("family", ["bert", "modernbert", "albert"])
def test_the_last_layer_at_the_read_position_restores_exactly(family):
    model = tiny_model(family)
    result = activation_patching(model, None, encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS), MLM_TARGET)
    # Exact up to float32 rounding, which differs between batch sizes: compare the logits themselves.
    last = result.patched_values[-1]
    assert last[4] == pytest.approx(result.clean_value, abs=1e-5)
    np.testing.assert_allclose(np.delete(last, 4), result.corrupted_value, atol=1e-5)
    assert result.scores[-1, 4] == pytest.approx(1.0, abs=2e-5 / abs(result.clean_value - result.corrupted_value))
    assert result.scores.shape == (len(encoder_layers(model)), len(CLEAN_IDS))


@pytest.mark.parametrize("over", ["residual", "heads"])
def test_patching_a_run_with_its_own_activations_changes_nothing_and_says_why_there_is_no_score(over):
    model = tiny_model("bert")
    encoding = encoding_of(CLEAN_IDS)
    result = activation_patching(model, None, encoding, encoding, MLM_TARGET, over=over)
    np.testing.assert_allclose(result.patched_values, result.clean_value, rtol=1e-5, atol=1e-5)
    assert result.clean_value == result.corrupted_value
    assert np.isnan(result.scores).all()
    assert "same logit" in result.note and "no difference for a patch to restore" in result.note


def planted_model() -> BertForPreTraining:
    """2 layers of 5 heads where only head 3 of layer 0 moves anything between positions: every other head's
    columns of W_O (and both layers' output biases) are zero. So the MLM logit at position 4 depends on the
    edited position 2 through that head alone."""
    torch.manual_seed(8)
    model = BertForPreTraining(tiny_bert(41, num_hidden_layers=2, initializer_range=0.3)).eval()
    randomise_norms_and_biases(model, 9)
    head_dim = model.config.head_dim
    with torch.no_grad():
        for index, layer in enumerate(model.bert.encoder.layer):
            dense = layer.attention.output.dense
            dense.bias.zero_()
            for head in range(model.config.num_attention_heads):
                columns = slice(head * head_dim, (head + 1) * head_dim)
                dense.weight[:, columns] *= 20 if (index, head) == (0, 3) else 0  # loud enough to matter
    return model


def test_a_planted_dependency_is_found_exactly():
    model = planted_model()
    clean, corrupted = encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS)
    heads = activation_patching(model, None, clean, corrupted, MLM_TARGET, over="heads")
    assert abs(heads.clean_value - heads.corrupted_value) > 0.01  # well above float32 noise (1e-6)
    assert heads.patched_values[0, 3] == pytest.approx(heads.clean_value, abs=1e-5)
    np.testing.assert_allclose(np.delete(heads.patched_values.ravel(), 3), heads.corrupted_value, atol=1e-5)
    assert heads.scores[0, 3] == pytest.approx(1.0, abs=1e-3)
    residual = activation_patching(model, None, clean, corrupted, MLM_TARGET, over="residual")
    # After layer 0 position 4 holds all it will read (layer 1 moves nothing); the edit at 2 is one hop away.
    np.testing.assert_allclose(residual.patched_values[:, 4], residual.clean_value, atol=1e-5)
    np.testing.assert_allclose(np.delete(residual.patched_values, 4, axis=1), residual.corrupted_value, atol=1e-5)


def test_a_sequence_classifier_is_patched_through_its_whole_forward():
    from bertcore.models.task_heads import BertForSequenceClassification

    torch.manual_seed(2)
    model = BertForSequenceClassification(tiny_bert(41, num_labels=3, initializer_range=0.3)).eval()
    randomise_norms_and_biases(model, 3)
    clean, corrupted = encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS)
    result = activation_patching(model, None, clean, corrupted, ("class", 1))
    expected = by_hand(model, ("class", 1), clean, corrupted, "residual")
    np.testing.assert_allclose(result.patched_values, expected, rtol=1e-4, atol=1e-5)
    assert result.note is None
    assert result.patched_values[-1, 0] == pytest.approx(result.clean_value, abs=1e-5)  # the pooler reads [CLS]


def test_progress_yields_each_layer_with_the_rows_still_to_come_as_nan():
    model = tiny_model("bert")
    records = list(activation_patching_progress(model, None, encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS),
                                                MLM_TARGET, over="heads"))
    assert [(record.done, record.total) for record in records] == [(1, 3), (2, 3), (3, 3)]
    first = records[0].result
    assert first.layers_done == 1 and not np.isnan(first.scores[0]).any() and np.isnan(first.scores[1:]).all()


def test_inputs_of_different_lengths_are_refused_with_the_reason():
    model = tiny_model("bert")
    with pytest.raises(ExplainError, match="clean input has 7 positions and the corrupted one 8; patching copies "
                                           "activations position by position"):
        activation_patching(model, None, encoding_of(CLEAN_IDS), encoding_of([*CLEAN_IDS, 4]), MLM_TARGET)
    with pytest.raises(ExplainError, match="over 'layers' is unknown; use 'residual'"):
        activation_patching(model, None, encoding_of(CLEAN_IDS), encoding_of(CLEAN_IDS), MLM_TARGET, over="layers")
    with pytest.raises(ExplainError, match="no head for a 'class' target"):
        activation_patching(model, None, encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS), ("class", 0))


def test_the_model_is_left_as_it_was():
    model = tiny_model("albert")
    before = {name: id(module) for name, module in model.named_modules()}
    model.train()
    activation_patching(model, None, encoding_of(CLEAN_IDS), encoding_of(CORRUPTED_IDS), MLM_TARGET, over="heads")
    assert model.training
    assert {name: id(module) for name, module in model.named_modules()} == before
    assert not any(module._forward_hooks or module._forward_pre_hooks for module in model.modules())
    with torch.no_grad():
        encoding = encoding_of(CLEAN_IDS)
        model.eval()
        hidden = model.albert(torch.tensor([encoding.input_ids]), output_hidden_states=True).hidden_states
    assert len(hidden) == len(encoder_layers(model)) + 1


def test_patching_hooks_leave_other_threads_forward_passes_alone():
    import threading

    from bertcore.explain.patching import this_thread_only

    model = tiny_model("bert")
    layer = encoder_layers(model)[0]
    inputs = model_inputs(encoding_of(CLEAN_IDS))

    def run():
        with torch.no_grad():
            return model.bert(**inputs).last_hidden_state

    plain = run()
    handle = layer.register_forward_hook(this_thread_only(lambda module, args, output: (output[0] * 0, output[1])))
    try:
        elsewhere = []
        worker = threading.Thread(target=lambda: elsewhere.append(run()))
        worker.start()
        worker.join()
        here = run()
    finally:
        handle.remove()
    torch.testing.assert_close(elsewhere[0], plain)  # another thread's pass is untouched
    assert not torch.allclose(here, plain)  # while this thread's is patched
