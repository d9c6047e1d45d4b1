"""Context mixing (bertcore.explain.mixing) against the papers' formulas, computed plainly here.

The references run on transformers' BertForPreTraining holding our weights, with forward hooks for what each
formula reads (the value vectors, the LayerNorms' inputs and outputs), and loop over (layer, i, j) in float64
exactly as the papers write them; ModernBERT (pre-LN, no transformers hooks needed) against the same loops on
its own modules' captured activations.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.errors import ExplainError
from bertcore.explain.mixing import MIXING_METHODS, context_mixing, context_mixing_progress
from bertcore.models.bert import BertForPreTraining
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.tokenization.wordpiece import Encoding
from tests.tiny_configs import tiny_bert

TEXT_A, TEXT_B = "the cat sat on the mat", "a dog ran far away"


def encoding_of(input_ids: list[int]) -> Encoding:
    """An encoding of given ids (one segment, no padding), for a model without a tokenizer here."""
    length = len(input_ids)
    return Encoding(tokens=[str(i) for i in input_ids], input_ids=list(input_ids), segment_ids=[0] * length,
                    position_ids=list(range(length)), attention_mask=[1] * length, special_tokens_mask=[0] * length,
                    sequence_ids=[0] * length, offsets=[(0, 0)] * length, truncation=None, unknown_words=[])


def randomise_norms_and_biases(model: torch.nn.Module, seed: int) -> None:
    """Random LayerNorm gains and biases, so that a formula missing γ, β or a bias cannot pass by luck."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "norm" in name:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.2)


def tiny_family_model(family: str) -> torch.nn.Module:
    """A small pretraining model of a family (vocab 41, distinct sizes), random norms and biases, in eval mode."""
    from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
    from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
    from bertcore.models.electra import ElectraConfig, ElectraForPreTraining
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM

    sizes = dict(vocab_size=41, hidden_size=24, num_hidden_layers=2, num_attention_heads=3, intermediate_size=29,
                 max_position_embeddings=20)
    torch.manual_seed(7)
    model = {
        "roberta": lambda: RobertaForMaskedLM(RobertaConfig(**sizes, type_vocab_size=1)),
        "distilbert": lambda: DistilBertForMaskedLM(DistilBertConfig(**sizes)),
        "electra": lambda: ElectraForPreTraining(ElectraConfig(**sizes, embedding_size=16)),
        "albert": lambda: AlbertForPreTraining(AlbertConfig(**sizes, embedding_size=16, num_hidden_groups=1,
                                                            inner_group_num=2)),
    }[family]().eval()
    randomise_norms_and_biases(model, 8)
    return model


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


@pytest.fixture(scope="module")
def bert(tokenizer):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_bert(tokenizer.vocab_size)).eval()
    randomise_norms_and_biases(model, 1)
    return model


def reference_bert_terms(transformers, model: BertForPreTraining, encoding: Encoding):
    """Per layer, from transformers' BERT with our weights: attention α (H, T, T), the layer input x (T, D), the
    value vectors (T, D), LN1's input and output, LN2's input; float64."""
    config = model.config
    reference = transformers.BertForPreTraining(
        transformers.BertConfig(**config.to_dict(), attn_implementation="eager")).eval()
    reference.load_state_dict(model.state_dict(), strict=False)
    captured: dict[str, list[torch.Tensor]] = {"value": [], "ln1_in": [], "ln1_out": [], "ln2_in": [], "ln2_out": []}

    def keep(*names):
        def hook(module, args, output):  # returns None: the forward goes on unchanged
            for name, tensor in zip(names, (output, args[0]), strict=False):
                captured[name].append(tensor[0].double())
        return hook

    handles = []
    for layer in reference.bert.encoder.layer:
        handles.append(layer.attention.self.value.register_forward_hook(keep("value")))
        handles.append(layer.attention.output.LayerNorm.register_forward_hook(keep("ln1_out", "ln1_in")))
        handles.append(layer.output.LayerNorm.register_forward_hook(keep("ln2_out", "ln2_in")))
    with torch.no_grad():
        outputs = reference.bert(torch.tensor([encoding.input_ids]),
                                 token_type_ids=torch.tensor([encoding.segment_ids]),
                                 output_attentions=True, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    layers = []
    for index, layer in enumerate(reference.bert.encoder.layer):
        layers.append(dict(
            probs=outputs.attentions[index][0].double(), x=outputs.hidden_states[index][0].double(),
            value=captured["value"][index], ln1_in=captured["ln1_in"][index], ln1_out=captured["ln1_out"][index],
            ln2_in=captured["ln2_in"][index],
            W_O=layer.attention.output.dense.weight.double(), ln1=layer.attention.output.LayerNorm,
            ln2=layer.output.LayerNorm))
    return layers


def head_vectors(value: torch.Tensor, W_O: torch.Tensor, num_heads: int, j: int) -> list[torch.Tensor]:
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h for each head h: the head's value slice through its columns of W_O."""
    head_dim = value.size(1) // num_heads
    return [W_O[:, h * head_dim:(h + 1) * head_dim] @ value[j, h * head_dim:(h + 1) * head_dim]
            for h in range(num_heads)]


@torch.no_grad()
def reference_mixing(layers: list[dict], num_heads: int, method: str, post_ln: bool = True) -> np.ndarray:
    """The papers' per-layer matrices, one (i, j) at a time."""
    results = []
    for terms in layers:
        probs, x = terms["probs"], terms["x"]
        seq_len = x.size(0)
        f = [head_vectors(terms["value"], terms["W_O"], num_heads, j) for j in range(seq_len)]
        if method == "value_norm":
            norms = torch.zeros(num_heads, seq_len, seq_len, dtype=torch.float64)
            for h in range(num_heads):
                for i in range(seq_len):
                    for j in range(seq_len):
                        norms[h, i, j] = torch.linalg.vector_norm(probs[h, i, j] * f[j][h])
            results.append(norms.numpy())
            continue
        matrix = np.zeros((seq_len, seq_len))
        for i in range(seq_len):
            for j in range(seq_len):
                z = sum(probs[h, i, j] * f[j][h] for h in range(num_heads)) + (x[i] if i == j else 0)
                if post_ln:
                    ln1, ln2 = terms["ln1"], terms["ln2"]
                    sigma1 = torch.sqrt(terms["ln1_in"][i].var(unbiased=False) + ln1.eps)
                    z = ln1.weight.double() * (z - z.mean()) / sigma1  # T_i(x_j), N_ResLN's part
                    output = terms["ln1_out"][i]
                else:
                    output = terms["ln1_out"][i]  # pre-LN: the stream after the attention block
                if method == "alti":
                    matrix[i, j] = max(0.0, float(output.abs().sum() - (output - z).abs().sum()))
                else:  # globenc
                    if post_ln:
                        sigma2 = torch.sqrt(terms["ln2_in"][i].var(unbiased=False) + ln2.eps)
                        z = ln2.weight.double() * (z - z.mean()) / sigma2
                    matrix[i, j] = float(torch.linalg.vector_norm(z))
        results.append(matrix / matrix.sum(axis=1, keepdims=True))
    return np.stack(results)


def product_rollout(per_layer: np.ndarray) -> np.ndarray:
    rollout = [per_layer[0]]
    for matrix in per_layer[1:]:
        rollout.append(matrix @ rollout[-1])
    return np.stack(rollout)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["value_norm", "globenc", "alti"])
def test_bert_equals_the_papers_formulas_on_transformers(method, bert, tokenizer, transformers):
    encoding = tokenizer.encode(TEXT_A, TEXT_B)
    layers = reference_bert_terms(transformers, bert, encoding)
    expected = reference_mixing(layers, bert.config.num_attention_heads, method)
    result = context_mixing(bert, tokenizer, encoding, method)
    assert result.method == method and result.per_layer.dtype == np.float32
    np.testing.assert_allclose(result.per_layer, expected, rtol=1e-4, atol=1e-5)
    if method != "value_norm":
        np.testing.assert_allclose(result.rollout, product_rollout(expected), rtol=1e-4, atol=1e-5)


def test_value_norm_rollout_is_attention_rollout_of_the_summed_norms(bert, tokenizer):
    encoding = tokenizer.encode(TEXT_A)
    result = context_mixing(bert, tokenizer, encoding, "value_norm")
    num_layers, num_heads, seq_len, _ = result.per_layer.shape
    assert (num_layers, num_heads) == (3, 5)
    flow = np.eye(seq_len)
    for layer in range(num_layers):
        summed = result.per_layer[layer].sum(axis=0)
        mixed = 0.5 * summed / summed.sum(axis=1, keepdims=True) + 0.5 * np.eye(seq_len)
        flow = (mixed / mixed.sum(axis=1, keepdims=True)) @ flow
        np.testing.assert_allclose(result.rollout[layer], flow, rtol=1e-4, atol=1e-6)


def test_attention_is_the_head_mean_and_its_rollout(bert, tokenizer):
    from bertcore.analysis.inspection import attention_rollout, inspect_encoding

    encoding = tokenizer.encode(TEXT_A, TEXT_B)
    inspection = inspect_encoding(bert, tokenizer, encoding)
    result = context_mixing(bert, tokenizer, encoding, "attention")
    np.testing.assert_allclose(result.per_layer, inspection.attentions.mean(axis=1), atol=1e-6)
    np.testing.assert_allclose(result.rollout, attention_rollout(inspection.attentions), atol=1e-6)


@pytest.mark.parametrize("method", ["value_norm", "globenc", "alti"])
def test_modernbert_pre_ln_equals_the_formulas_on_its_captured_activations(method):
    config = ModernBertConfig(vocab_size=61, hidden_size=28, intermediate_size=19, num_hidden_layers=3,
                              num_attention_heads=2, local_attention=4, global_attn_every_n_layers=2,
                              max_position_embeddings=32, norm_bias=True, attention_bias=True, pad_token_id=0,
                              eos_token_id=1, bos_token_id=2, cls_token_id=2, sep_token_id=1)
    torch.manual_seed(3)
    model = ModernBertForMaskedLM(config).eval()
    randomise_norms_and_biases(model, 4)
    encoding = encoding_of([2, 15, 9, 33, 41, 7, 20, 1])
    values, inputs = [], []
    handles = []
    for layer in model.model.layers:
        handles.append(layer.attn.Wqkv.register_forward_hook(
            lambda m, args, out: values.append(out[..., 2 * config.hidden_size:].reshape(-1, config.hidden_size))
            and None))
        handles.append(layer.attn.register_forward_hook(lambda m, args, out: inputs.append(out[0]) and None))
    with torch.no_grad():
        outputs = model.model(torch.tensor([encoding.input_ids]), output_attentions=True, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    layers = []
    for index, layer in enumerate(model.model.layers):
        x = outputs.hidden_states[index][0].double()
        attention_output = inputs[index].double()  # Wo(attention) + b_O, before the residual
        layers.append(dict(probs=outputs.attentions[index][0].double(), x=x, value=values[index].double(),
                           W_O=layer.attn.Wo.weight.double(), ln1_out=x + attention_output))
    expected = reference_mixing(layers, config.num_attention_heads, method, post_ln=False)
    result = context_mixing(model, None, encoding, method)
    np.testing.assert_allclose(result.per_layer, expected, rtol=1e-4, atol=1e-5)
    window = config.local_attention // 2
    local = np.abs(np.subtract.outer(range(8), range(8))) > window  # layer 1 is local: nothing from far away
    if method == "value_norm":
        assert np.all(result.per_layer[1][:, local] == 0)
    else:
        assert np.all(result.per_layer[1][local] == 0)


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "albert"])
@pytest.mark.parametrize("method", MIXING_METHODS)
def test_every_family_gives_rows_that_sum_to_one(family, method):
    model = tiny_family_model(family)
    encoding = encoding_of([3, 11, 17, 5, 23, 8, 4])
    result = context_mixing(model, None, encoding, method)
    layers = model.config.num_hidden_layers * getattr(model.config, "inner_group_num", 1)
    assert result.rollout.shape == (layers, 7, 7)
    np.testing.assert_allclose(result.rollout.sum(axis=-1), 1.0, atol=1e-5)
    if method == "value_norm":
        assert result.per_layer.shape == (layers, model.config.num_attention_heads, 7, 7)
    else:
        np.testing.assert_allclose(result.per_layer.sum(axis=-1), 1.0, atol=1e-5)


def test_progress_counts_layers_and_ends_with_the_result(bert, tokenizer):
    records = list(context_mixing_progress(bert, tokenizer, tokenizer.encode(TEXT_A), "alti"))
    assert [record.done for record in records] == [1, 2, 3]
    assert all(record.total == 3 for record in records)
    assert records[0].result is None and records[-1].result.per_layer.shape[0] == 3


def test_unknown_method_and_long_input_are_explain_errors(bert, tokenizer):
    with pytest.raises(ExplainError, match="'rollout' is unknown; use one of attention, value_norm"):
        context_mixing(bert, tokenizer, tokenizer.encode(TEXT_A), "rollout")
    with pytest.raises(ExplainError, match="41 positions but the model accepts 40"):
        context_mixing(bert, tokenizer, encoding_of([5] * 41), "alti")


def test_leaves_the_training_mode_as_it_was(bert, tokenizer):
    bert.train()
    try:
        context_mixing(bert, tokenizer, tokenizer.encode(TEXT_A), "globenc")
        assert bert.training
    finally:
        bert.eval()
