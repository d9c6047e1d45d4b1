"""ModernBERT parity with the reference implementation: transformers' ModernBertForMaskedLM (eager attention).

Distinct odd sizes (vocab 99, hidden 80 = 5 heads of 16, intermediate 37, 23 tokens, local window 8) make a wrong
transpose, a wrong rotation or a wrong window edge fail loudly: 23 tokens are far wider than the window.
"""

import pytest
import torch

from bertcore.models.modernbert import GLOBAL_ATTENTION, LOCAL_ATTENTION, ModernBertConfig, ModernBertForMaskedLM

SPECIAL_IDS = dict(pad_token_id=0, bos_token_id=1, cls_token_id=1, eos_token_id=2, sep_token_id=2)
CONFIGS = [
    ModernBertConfig(vocab_size=99, hidden_size=80, intermediate_size=37, num_hidden_layers=4, num_attention_heads=5,
                     local_attention=8, global_attn_every_n_layers=3, max_position_embeddings=64, **SPECIAL_IDS),
    # Other bases, an odd window, explicit layer kinds, biases everywhere, other activations.
    ModernBertConfig(vocab_size=131, hidden_size=84, intermediate_size=53, num_hidden_layers=3, num_attention_heads=3,
                     local_attention=11, layer_types=(LOCAL_ATTENTION, GLOBAL_ATTENTION, LOCAL_ATTENTION),
                     global_rope_theta=5000.0, local_rope_theta=300.0, norm_eps=1e-6, norm_bias=True, mlp_bias=True,
                     attention_bias=True, classifier_bias=True, hidden_activation="gelu_pytorch_tanh",
                     classifier_activation="silu", max_position_embeddings=40, **SPECIAL_IDS),
]
TOLERANCE = dict(rtol=0, atol=1e-4)
SEQ_LEN = 23


def reference_config(transformers, config: ModernBertConfig):
    values = config.to_dict()
    values.pop("model_type")
    return transformers.ModernBertConfig(**values, attn_implementation="eager")


def reference_model(transformers, config: ModernBertConfig, ours: ModernBertForMaskedLM):
    """transformers' ModernBertForMaskedLM holding our model's weights (every name must match: strict)."""
    reference = transformers.ModernBertForMaskedLM(reference_config(transformers, config)).eval()
    reference.load_state_dict(ours.state_dict(), strict=True)
    return reference


def random_batch(config: ModernBertConfig, seed: int, padded: bool = True):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(3, config.vocab_size, (3, SEQ_LEN), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    if padded:
        lengths = torch.tensor([SEQ_LEN, SEQ_LEN - 6, 4])  # row 2's late padding sees no real token in its window
        attention_mask = (torch.arange(SEQ_LEN)[None, :] < lengths[:, None]).long()
        input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    return input_ids, attention_mask


def randomised(config: ModernBertConfig, seed: int) -> ModernBertForMaskedLM:
    """A model whose norms and biases are random too, so that a missing bias or gain cannot hide."""
    torch.manual_seed(seed)
    model = ModernBertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


@pytest.mark.parametrize("config_index", range(len(CONFIGS)))
@pytest.mark.parametrize("padded", [False, True])
def test_matches_transformers(config_index, padded, transformers):
    config = CONFIGS[config_index]
    ours = randomised(config, config_index)
    reference = reference_model(transformers, config, ours)
    input_ids, attention_mask = random_batch(config, seed=config_index, padded=padded)
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask, output_attentions=True,
                             output_hidden_states=True)
        full = ours(input_ids, attention_mask, output_attentions=True, output_hidden_states=True)
        fast = ours(input_ids, attention_mask)  # fused SDPA path

    assert len(full.hidden_states) == config.num_hidden_layers + 1
    for got, want in zip(full.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    assert len(full.attentions) == config.num_hidden_layers
    for got, want in zip(full.attentions, expected.attentions, strict=True):
        assert got.shape == (3, config.num_attention_heads, SEQ_LEN, SEQ_LEN)
        torch.testing.assert_close(got, want, **TOLERANCE)
    for output in (full, fast):
        assert output.logits.shape == (3, SEQ_LEN, config.vocab_size)
        torch.testing.assert_close(output.logits, expected.logits, **TOLERANCE)
    assert fast.attentions is None and fast.hidden_states is None


def test_local_layers_attend_only_within_the_window():
    config = CONFIGS[0]
    model = randomised(config, 0)
    input_ids, _ = random_batch(config, seed=1, padded=False)
    with torch.no_grad():
        attentions = model(input_ids, output_attentions=True).attentions
    assert model.local_layers() == config.local_layers() == (1, 2)
    distance = (torch.arange(SEQ_LEN)[:, None] - torch.arange(SEQ_LEN)[None, :]).abs()
    outside = distance > config.local_attention // 2
    for index, probs in enumerate(attentions):
        if index in model.local_layers():
            assert torch.all(probs[..., outside] == 0)
            assert torch.all(probs[..., distance == config.local_attention // 2] > 0)  # the edge is inside
        else:
            assert torch.all(probs > 0)


def test_both_attention_paths_agree_with_a_head_mask_and_padding():
    config = CONFIGS[1]
    model = randomised(config, 3)
    input_ids, attention_mask = random_batch(config, seed=3)
    head_mask = torch.rand(config.num_hidden_layers, config.num_attention_heads, generator=torch.Generator()
                           .manual_seed(0))
    with torch.no_grad():
        explicit = model(input_ids, attention_mask, head_mask=head_mask, output_attentions=True,
                         output_hidden_states=True)
        fused = model(input_ids, attention_mask, head_mask=head_mask, output_hidden_states=True)
    for got, want in zip(fused.hidden_states, explicit.hidden_states, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    torch.testing.assert_close(fused.logits, explicit.logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("output_attentions", [False, True])
def test_head_mask_equals_transformers_with_heads_scaled_by_hooks(output_attentions, transformers):
    """Our head_mask multiplies each head's output; transformers has no head_mask for ModernBERT, so the same is
    done to it by a hook that scales each head's slice of the input of its attention's output projection Wo."""
    config = CONFIGS[0]
    ours = randomised(config, 4)
    reference = reference_model(transformers, config, ours)
    input_ids, attention_mask = random_batch(config, seed=4)
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[1, 3] = 0  # a local layer
    head_mask[3, 0] = 0  # a global layer
    head_mask[0, 2] = 0.5

    def scale_heads(layer_index):
        def hook(module, args):
            (context,) = args  # (B, T, D): the heads side by side
            batch_size, seq_len, _ = context.shape
            heads = context.view(batch_size, seq_len, config.num_attention_heads, config.head_dim)
            return (heads * head_mask[layer_index][:, None]).view_as(context)
        return hook

    handles = [layer.attn.Wo.register_forward_pre_hook(scale_heads(index))
               for index, layer in enumerate(reference.model.layers)]
    try:
        with torch.no_grad():
            expected = reference(input_ids, attention_mask=attention_mask, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    with torch.no_grad():
        got = ours(input_ids, attention_mask, head_mask=head_mask, output_attentions=output_attentions,
                   output_hidden_states=True)
        plain = ours(input_ids, attention_mask)
    for got_state, want_state in zip(got.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got_state, want_state, **TOLERANCE)
    torch.testing.assert_close(got.logits, expected.logits, **TOLERANCE)
    assert not torch.allclose(got.logits, plain.logits, atol=1e-3)
    if output_attentions:
        assert torch.all(got.attentions[1][:, 3] == 0) and torch.all(got.attentions[3][:, 0] == 0)


def test_state_dict_names_round_trip_with_transformers(transformers):
    config = CONFIGS[1]
    ours = randomised(config, 5)
    reference = transformers.ModernBertForMaskedLM(reference_config(transformers, config)).eval()
    assert set(ours.state_dict()) == set(reference.state_dict())
    reference.load_state_dict(ours.state_dict(), strict=True)
    fresh = ModernBertForMaskedLM(config).eval()
    fresh.load_state_dict(reference.state_dict(), strict=True)
    for name, tensor in ours.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name


def test_decoder_is_tied_to_the_token_embeddings_and_has_its_own_bias():
    model = ModernBertForMaskedLM(CONFIGS[0])
    assert model.decoder.weight is model.model.embeddings.tok_embeddings.weight
    assert model.decoder.bias is not None and model.decoder.bias.shape == (CONFIGS[0].vocab_size,)
    assert isinstance(model.model.layers[0].attn_norm, torch.nn.Identity)
    assert isinstance(model.model.layers[1].attn_norm, torch.nn.LayerNorm)
    assert model.config.architectures == ("ModernBertForMaskedLM",)
    assert model.has_pretraining_heads


def test_token_type_ids_are_accepted_and_ignored_and_labels_give_the_reference_loss(transformers):
    config = CONFIGS[0]
    ours = randomised(config, 6)
    reference = reference_model(transformers, config, ours)
    input_ids, attention_mask = random_batch(config, seed=6)
    labels = torch.full_like(input_ids, -100)
    labels[:, 1:3] = input_ids[:, 1:3]
    with torch.no_grad():
        with_segments = ours(input_ids, attention_mask, token_type_ids=torch.ones_like(input_ids), labels=labels)
        plain = ours(input_ids, attention_mask)
        expected = reference(input_ids, attention_mask=attention_mask, labels=labels)
    torch.testing.assert_close(with_segments.logits, plain.logits, rtol=0, atol=0)
    torch.testing.assert_close(with_segments.loss, expected.loss, **TOLERANCE)


def test_config_reads_transformers_config_json_in_both_spellings(transformers):
    config = CONFIGS[1]
    new_style = reference_config(transformers, config).to_dict()  # rope_parameters per layer kind
    assert ModernBertConfig.from_dict(new_style) == config
    old_style = {key: value for key, value in config.to_dict().items() if key not in ("rope_parameters",
                                                                                      "layer_types")}
    old_style["global_attn_every_n_layers"] = 2
    read = ModernBertConfig.from_dict(old_style)
    assert read.layer_types == (GLOBAL_ATTENTION, LOCAL_ATTENTION, GLOBAL_ATTENTION)
    assert (read.global_rope_theta, read.local_rope_theta) == (5000.0, 300.0)
    with pytest.raises(ValueError, match="model_type is 'bert'"):
        ModernBertConfig.from_dict({"model_type": "bert"})
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        ModernBertConfig.from_dict({"rope_parameters": {GLOBAL_ATTENTION: {"rope_type": "yarn"}}})


@pytest.mark.parametrize(("changes", "message"), [
    (dict(hidden_size=60, num_attention_heads=4), r"each head is 15 wide.*must be even"),
    (dict(hidden_size=80, num_attention_heads=3), "not divisible by num_attention_heads 3"),
    (dict(layer_types=(GLOBAL_ATTENTION,) * 3), "names 3 layers but num_hidden_layers is 4"),
    (dict(layer_types=("global",) * 4), "layer_types must list 'full_attention' or 'sliding_attention'"),
    (dict(local_attention=0), "local_attention must be a positive integer"),
    (dict(hidden_activation="swish"), "hidden_activation 'swish' is not supported"),
    (dict(pad_token_id=99), "pad_token_id 99 is outside the vocabulary of 99"),
    (dict(global_rope_theta=0.0), "global_rope_theta must be positive"),
    (dict(classifier_pooling="max"), "classifier_pooling 'max'"),
    (dict(mlp_dropout=1.0), r"mlp_dropout must be in \[0, 1\)"),
])
def test_bad_config_is_a_clear_value_error(changes, message):
    with pytest.raises(ValueError, match=message):
        CONFIGS[0].replace(**changes)


def test_bad_inputs_are_a_clear_value_error():
    model = ModernBertForMaskedLM(CONFIGS[0]).eval()
    with pytest.raises(ValueError, match="input_ids holds 99"):
        model(torch.tensor([[1, 99, 2]]))
    with pytest.raises(ValueError, match="at most 64"):
        model(torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match=r"head_mask has shape \(5,\).*\(4, 5\)"):
        model(torch.ones(1, 5, dtype=torch.long), head_mask=torch.ones(5))


def test_the_family_registry_loads_modernbert_config_json_as_our_classes():
    from bertcore.models.families import resolve

    values = {**CONFIGS[0].to_dict(), "architectures": ["ModernBertModel"]}
    family, architecture = resolve(values)
    assert family.model_class(architecture) is ModernBertForMaskedLM
    assert family.config_class().from_dict(values) == CONFIGS[0].replace(architectures=("ModernBertModel",))
    assert family.architecture_for({**values, "architectures": ["ModernBertForMultipleChoice"]}) == (
        "ModernBertForMaskedLM")  # a head without a class here: its encoder


def test_both_attention_paths_give_the_same_gradients():
    """For a loss on the real tokens, as training computes it. (A padding query whose window holds only padding
    attends uniformly in both paths, but the two kernels differentiate that degenerate row differently; no real
    token ever reads it, since padding is never a key.)"""
    config = CONFIGS[0]
    model = randomised(config, 7)
    input_ids, attention_mask = random_batch(config, seed=7)
    gradients = []
    for output_attentions in (False, True):
        model.zero_grad()
        logits = model(input_ids, attention_mask, output_attentions=output_attentions).logits
        logits[attention_mask.bool()].square().mean().backward()
        gradients.append({name: parameter.grad.clone() for name, parameter in model.named_parameters()})
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, rtol=1e-4, atol=1e-6, msg=name)


def test_config_json_round_trip(tmp_path):
    config = CONFIGS[1].replace(architectures=("ModernBertForMaskedLM",))
    config.to_json_file(tmp_path / "config.json")
    assert ModernBertConfig.from_json_file(tmp_path / "config.json") == config
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a list, not a JSON object"):
        ModernBertConfig.from_json_file(tmp_path / "list.json")


# The fields of answerdotai/ModernBERT-base's config.json as released (written by transformers 4.48): θ pair and
# global_attn_every_n_layers, no layer_types or rope_parameters, and keys of flash-attention and training that
# bertcore has no use for.
RELEASED_BASE_CONFIG = {
    "architectures": ["ModernBertForMaskedLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 50281, "classifier_activation": "gelu", "classifier_bias": False, "classifier_dropout": 0.0,
    "classifier_pooling": "mean", "cls_token_id": 50281, "decoder_bias": True, "deterministic_flash_attn": False,
    "embedding_dropout": 0.0, "eos_token_id": 50282, "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
    "gradient_checkpointing": False, "hidden_activation": "gelu", "hidden_size": 768,
    "initializer_cutoff_factor": 2.0, "initializer_range": 0.02, "intermediate_size": 1152, "layer_norm_eps": 1e-05,
    "local_attention": 128, "local_rope_theta": 10000.0, "max_position_embeddings": 8192, "mlp_bias": False,
    "mlp_dropout": 0.0, "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05, "num_attention_heads": 12,
    "num_hidden_layers": 22, "pad_token_id": 50283, "position_embedding_type": "absolute", "reference_compile": None,
    "sep_token_id": 50282, "sparse_pred_ignore_index": -100, "sparse_prediction": False, "torch_dtype": "float32",
    "transformers_version": "4.48.0", "vocab_size": 50368,
}


def test_the_released_base_config_reads_as_transformers_reads_it(transformers):
    ours = ModernBertConfig.from_dict(RELEASED_BASE_CONFIG)
    assert ours == ModernBertConfig(classifier_pooling="mean", architectures=("ModernBertForMaskedLM",))
    reference = transformers.ModernBertConfig.from_dict(dict(RELEASED_BASE_CONFIG))
    assert list(ours.layer_types) == list(reference.layer_types)
    assert ours.local_layers() == tuple(index for index in range(22) if index % 3)
    assert ours.sliding_window == reference.sliding_window == 64
    assert (ours.global_rope_theta, ours.local_rope_theta) == (
        reference.rope_parameters["full_attention"]["rope_theta"],
        reference.rope_parameters["sliding_attention"]["rope_theta"])


def test_sparse_prediction_projects_only_the_labelled_positions_as_transformers(transformers):
    config = CONFIGS[0].replace(sparse_prediction=True)
    ours = randomised(config, 8)
    reference = reference_model(transformers, config, ours)
    input_ids, attention_mask = random_batch(config, seed=8)
    labels = torch.full_like(input_ids, -100)
    labels[:, [1, 2, 7]] = input_ids[:, [1, 2, 7]]
    labels[2, 7] = -100  # padding in row 2
    with torch.no_grad():
        got = ours(input_ids, attention_mask, labels=labels)
        expected = reference(input_ids, attention_mask=attention_mask, labels=labels)
        dense = ours(input_ids, attention_mask)
    assert got.logits.shape == (8, config.vocab_size)
    torch.testing.assert_close(got.logits, expected.logits, **TOLERANCE)
    torch.testing.assert_close(got.logits, dense.logits[labels != -100], **TOLERANCE)
    torch.testing.assert_close(got.loss, expected.loss, **TOLERANCE)


def test_skipping_padding_is_exact_for_real_tokens_and_their_gradients():
    config = CONFIGS[1].replace(sparse_prediction=True)
    model = randomised(config, 9)
    input_ids, attention_mask = random_batch(config, seed=9)
    real = attention_mask.bool()
    with torch.no_grad():
        skipped = model.model(input_ids, attention_mask, skip_padding=True).last_hidden_state
        full = model.model(input_ids, attention_mask).last_hidden_state
    torch.testing.assert_close(skipped[real], full[real], rtol=0, atol=1e-5)
    assert torch.all(skipped[~real] == 0)

    labels = torch.full_like(input_ids, -100)
    labels[:, [0, 2, 3]] = input_ids[:, [0, 2, 3]]
    sparse = model(input_ids, attention_mask, labels=labels)  # padding skipped: no label sits on padding
    sparse.loss.backward()
    sparse_gradients = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    model.zero_grad()
    dense_logits = model(input_ids, attention_mask).logits
    labelled = labels != -100
    loss = torch.nn.functional.cross_entropy(dense_logits[labelled], labels[labelled])
    loss.backward()
    torch.testing.assert_close(sparse.loss, loss, rtol=0, atol=1e-5)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(sparse_gradients[name], parameter.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_label_on_padding_keeps_the_full_computation():
    config = CONFIGS[0].replace(sparse_prediction=True)
    model = randomised(config, 10)
    input_ids, attention_mask = random_batch(config, seed=10)
    labels = torch.full_like(input_ids, -100)
    labels[2, 15] = 7  # row 2 has 4 real tokens: odd, but transformers scores it
    with torch.no_grad():
        sparse = model(input_ids, attention_mask, labels=labels)
        dense = model(input_ids, attention_mask).logits
    torch.testing.assert_close(sparse.logits, dense[2:3, 15], rtol=0, atol=1e-5)
