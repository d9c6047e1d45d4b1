"""Parity with the reference implementation: HuggingFace transformers' BertForPreTraining.

Distinct odd sizes (vocab 99, hidden 48, 3 heads, seq 7, batch 3) make a wrong transpose fail loudly.
"""

import pytest
import torch

from bertcore.models.bert import IGNORE_INDEX, BertForPreTraining
from bertcore.models.config import BertConfig
from tests.tiny_configs import parity_bert

CONFIGS = [
    parity_bert(type_vocab_size=2),
    BertConfig(vocab_size=131, hidden_size=60, num_hidden_layers=3, num_attention_heads=5, intermediate_size=71,
               max_position_embeddings=23, type_vocab_size=3, hidden_act="gelu_new", layer_norm_eps=1e-7),
    BertConfig(vocab_size=57, hidden_size=28, num_hidden_layers=1, num_attention_heads=7, intermediate_size=45,
               max_position_embeddings=11, hidden_act="relu"),
]
TOLERANCE = dict(rtol=0, atol=1e-5)


def reference_model(transformers, config: BertConfig, ours: BertForPreTraining):
    """transformers' BertForPreTraining holding our model's weights."""
    hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="eager")
    reference = transformers.BertForPreTraining(hf_config).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected
    assert all(key.endswith(("position_ids", "token_type_ids")) for key in missing), missing
    return reference


def random_batch(config: BertConfig, batch_size: int, seq_len: int, *, pair: bool, padded: bool, seed: int):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (batch_size, seq_len), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    if pair:
        token_type_ids[:, seq_len // 2:] = 1
    attention_mask = torch.ones_like(input_ids)
    if padded:
        lengths = torch.tensor([seq_len, seq_len - 2, 3][:batch_size])
        attention_mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()
        input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
        token_type_ids = token_type_ids.masked_fill(attention_mask == 0, 0)
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    picked = (torch.rand(input_ids.shape, generator=generator) < 0.4) & (attention_mask == 1)
    picked[:, 1] = True
    labels[picked] = input_ids[picked]
    next_sentence_label = torch.randint(0, 2, (batch_size,), generator=generator)
    return input_ids, token_type_ids, attention_mask, labels, next_sentence_label


@pytest.mark.slow
@pytest.mark.parametrize("config_index", range(len(CONFIGS)))
@pytest.mark.parametrize(("pair", "padded"), [(False, False), (True, True), (False, True)])
def test_matches_transformers(config_index, pair, padded, transformers):
    config = CONFIGS[config_index]
    torch.manual_seed(config_index)
    ours = BertForPreTraining(config).eval()
    reference = reference_model(transformers, config, ours)
    input_ids, token_type_ids, attention_mask, labels, nsp_label = random_batch(
        config, 3, 7, pair=pair, padded=padded, seed=config_index
    )
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                             labels=labels, next_sentence_label=nsp_label,
                             output_attentions=True, output_hidden_states=True)
        full = ours(input_ids, token_type_ids, attention_mask, output_attentions=True, output_hidden_states=True)
        fast = ours(input_ids, token_type_ids, attention_mask)  # fused SDPA path
        with_loss = ours(input_ids, token_type_ids, attention_mask, labels=labels, next_sentence_label=nsp_label)

    assert len(full.hidden_states) == config.num_hidden_layers + 1
    for got, want in zip(full.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    assert len(full.attentions) == config.num_hidden_layers
    for got, want in zip(full.attentions, expected.attentions, strict=True):
        assert got.shape == (3, config.num_attention_heads, 7, 7)
        torch.testing.assert_close(got, want, **TOLERANCE)
    for output in (full, fast):
        torch.testing.assert_close(output.prediction_logits, expected.prediction_logits, **TOLERANCE)
        torch.testing.assert_close(output.seq_relationship_logits, expected.seq_relationship_logits, **TOLERANCE)
    assert fast.attentions is None and fast.hidden_states is None
    # With labels only the labelled rows are projected, in row-major order of the labelled positions.
    torch.testing.assert_close(with_loss.prediction_logits, expected.prediction_logits[labels != IGNORE_INDEX],
                               **TOLERANCE)
    torch.testing.assert_close(with_loss.loss, expected.loss, **TOLERANCE)


@pytest.mark.slow
def test_mlm_only_and_nsp_only_losses():
    config = CONFIGS[0]
    model = BertForPreTraining(config).eval()
    input_ids, token_type_ids, attention_mask, labels, nsp_label = random_batch(
        config, 3, 7, pair=True, padded=True, seed=5
    )
    with torch.no_grad():
        both = model(input_ids, token_type_ids, attention_mask, labels=labels, next_sentence_label=nsp_label)
        mlm = model(input_ids, token_type_ids, attention_mask, labels=labels)
        nsp = model(input_ids, token_type_ids, attention_mask, next_sentence_label=nsp_label)
    torch.testing.assert_close(both.loss, mlm.loss + nsp.loss)
    assert nsp.mlm_loss is None and mlm.nsp_loss is None
    assert nsp.prediction_logits.shape == (3, 7, config.vocab_size)


def test_decoder_is_tied_to_word_embeddings():
    model = BertForPreTraining(CONFIGS[0])
    predictions = model.cls.predictions
    assert predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert predictions.decoder.bias is predictions.bias
    unique = {id(p) for p in model.parameters()}
    assert model.num_parameters() == sum(p.numel() for p in model.parameters()) and len(unique) == len(
        list(model.parameters()))


@pytest.mark.slow
@pytest.mark.parametrize("output_attentions", [False, True])
def test_head_mask_equals_zeroing_that_heads_values(output_attentions):
    """Ablating head h must equal a model whose head h has zero value projection (its output is zero)."""
    config = CONFIGS[1]
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    input_ids, token_type_ids, attention_mask, *_ = random_batch(config, 3, 7, pair=True, padded=True, seed=1)
    layer, head = 1, 3
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[layer, head] = 0
    ablated = BertForPreTraining(config).eval()
    ablated.load_state_dict(model.state_dict())
    value = ablated.bert.encoder.layer[layer].attention.self.value
    rows = slice(head * config.head_dim, (head + 1) * config.head_dim)
    with torch.no_grad():
        value.weight[rows] = 0
        value.bias[rows] = 0
        got = model(input_ids, token_type_ids, attention_mask, head_mask=head_mask,
                    output_attentions=output_attentions)
        want = ablated(input_ids, token_type_ids, attention_mask)
        plain = model(input_ids, token_type_ids, attention_mask)
    torch.testing.assert_close(got.prediction_logits, want.prediction_logits, **TOLERANCE)
    assert not torch.allclose(got.prediction_logits, plain.prediction_logits, atol=1e-4)
    if output_attentions:
        assert torch.all(got.attentions[layer][:, head] == 0)


def test_too_long_input_is_a_clear_error():
    config = CONFIGS[2]
    model = BertForPreTraining(config)
    with pytest.raises(ValueError, match="at most 11"):
        model(torch.ones(1, 12, dtype=torch.long))


@pytest.mark.slow
def test_loss_path_gradients_equal_the_full_computation():
    """With labels only [CLS] and the labelled rows go through the last layer; the gradients must not change."""
    config = CONFIGS[1]
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()  # eval: no dropout, so both paths are deterministic
    input_ids, token_type_ids, attention_mask, labels, nsp_label = random_batch(
        config, 3, 7, pair=True, padded=True, seed=2
    )
    sparse = model(input_ids, token_type_ids, attention_mask, labels=labels, next_sentence_label=nsp_label)
    sparse.loss.backward()
    sparse_grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    full = model(input_ids, token_type_ids, attention_mask)
    labelled = labels != IGNORE_INDEX
    loss = torch.nn.functional.cross_entropy(full.prediction_logits[labelled], labels[labelled])
    loss = loss + torch.nn.functional.cross_entropy(full.seq_relationship_logits, nsp_label)
    loss.backward()
    torch.testing.assert_close(sparse.loss, loss, **TOLERANCE)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(sparse_grads[name], parameter.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize(("inputs", "message"), [
    (dict(input_ids=torch.zeros(0, 5, dtype=torch.long)), r"input_ids has shape \(0, 5\).*at least one row"),
    (dict(input_ids=torch.zeros(2, 0, dtype=torch.long)), r"input_ids has shape \(2, 0\)"),
    (dict(input_ids=torch.zeros(5, dtype=torch.long)), r"input_ids has shape \(5,\); the model takes a \(batch"),
    (dict(input_ids=torch.zeros(1, 3)), r"input_ids holds torch\.float32 values; token ids are integers"),
    (dict(input_ids=torch.tensor([[2, 99, 3]])), r"input_ids holds 99; this model takes token ids of its "
                                                 r"vocabulary, 0\.\.98"),
    (dict(input_ids=torch.tensor([[2, -1, 3]])), r"input_ids holds -1"),
    (dict(input_ids=torch.tensor([[2, 5, 3]]), token_type_ids=torch.tensor([[0, 2, 1]])),
     r"token_type_ids holds 2; this model takes segment ids 0\.\.1"),
    (dict(input_ids=torch.tensor([[2, 5, 3]]), token_type_ids=torch.tensor([[0, -1, 1]])), r"token_type_ids holds -1"),
    (dict(input_ids=torch.tensor([[2, 5, 3]]), token_type_ids=torch.tensor([[0, 1]])),
     r"token_type_ids has shape \(1, 2\) but input_ids has \(1, 3\)"),
    (dict(input_ids=torch.tensor([[2, 5, 3]]), attention_mask=torch.ones(2, 3)),
     r"attention_mask has shape \(2, 3\) but input_ids has \(1, 3\)"),
])
def test_bad_inputs_are_a_clear_value_error(inputs, message):
    model = BertForPreTraining(CONFIGS[0]).eval()
    with pytest.raises(ValueError, match=message):
        model(**inputs)
    with pytest.raises(ValueError, match=message):
        model.bert(**inputs)


def test_skipping_padding_keeps_a_label_that_sits_on_padding_exact():
    """The loss path leaves padding out of the dense layers, except positions a head reads: a label on a
    padding position (odd, but transformers scores it) must give the loss of the full computation."""
    config = CONFIGS[0]
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    input_ids, token_type_ids, attention_mask, labels, nsp_label = random_batch(
        config, 3, 7, pair=True, padded=True, seed=3
    )
    labels[2, 5] = 7  # row 2 has 3 real tokens
    with torch.no_grad():
        sparse = model(input_ids, token_type_ids, attention_mask, labels=labels, next_sentence_label=nsp_label)
        full = model(input_ids, token_type_ids, attention_mask, output_hidden_states=True)
    labelled = labels != IGNORE_INDEX
    mlm_loss = torch.nn.functional.cross_entropy(full.prediction_logits[labelled], labels[labelled])
    torch.testing.assert_close(sparse.mlm_loss, mlm_loss, **TOLERANCE)
