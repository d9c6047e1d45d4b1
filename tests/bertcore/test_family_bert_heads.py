"""BERT's other checkpoint shapes: BertForMaskedLM (MLM head, no pooler, no NSP head), a bare BertModel with or
without its pooler, and a config.json of a family bertcore does not load (refused, not loaded as BERT)."""

import json
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertcore.analysis.inspection import inspect
from bertcore.data.masking import mask_exactly
from bertcore.errors import CheckpointError
from bertcore.models import families
from bertcore.models.bert import IGNORE_INDEX, BertForMaskedLM, BertForPreTraining
from bertcore.models.checkpoint import load_pretrained, read_checkpoint, save_pretrained
from bertcore.models.config import BertConfig
from bertcore.models.task_heads import model_class_for

TOLERANCE = dict(rtol=0, atol=1e-5)
CONFIGS = [
    BertConfig(vocab_size=99, hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=37,
               max_position_embeddings=19, type_vocab_size=2),
    BertConfig(vocab_size=131, hidden_size=60, num_hidden_layers=3, num_attention_heads=5, intermediate_size=71,
               max_position_embeddings=23, type_vocab_size=3, hidden_act="gelu_new", layer_norm_eps=1e-7),
]


def padded_batch(config: BertConfig, seed: int):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (3, 7), generator=generator)
    attention_mask = (torch.arange(7)[None, :] < torch.tensor([7, 5, 3])[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, config.pad_token_id)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 2:4] = 1
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, 1] = input_ids[:, 1]
    return input_ids, token_type_ids, attention_mask, labels


@pytest.mark.parametrize("config_index", range(len(CONFIGS)))
def test_masked_lm_matches_transformers(config_index, transformers):
    config = CONFIGS[config_index]
    torch.manual_seed(config_index)
    ours = BertForMaskedLM(config).eval()
    with torch.no_grad():
        ours.cls.predictions.bias.normal_()
    reference = transformers.BertForMaskedLM(
        transformers.BertConfig(**config.to_dict(), attn_implementation="eager")).eval()
    missing, unexpected = reference.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all(key.endswith(("position_ids", "token_type_ids")) for key in missing), missing
    assert not any(name.startswith(("bert.pooler.", "cls.seq_relationship.")) for name in ours.state_dict())
    input_ids, token_type_ids, attention_mask, labels = padded_batch(config, config_index)
    with torch.no_grad():
        expected = reference(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                             output_attentions=True, output_hidden_states=True)
        full = ours(input_ids, token_type_ids, attention_mask, labels=labels, output_attentions=True,
                    output_hidden_states=True)
        fast = ours(input_ids, token_type_ids, attention_mask)  # the fused attention path
    for output in (full, fast):
        assert output.logits.shape == (3, 7, config.vocab_size)
        torch.testing.assert_close(output.logits, expected.logits, **TOLERANCE)
    torch.testing.assert_close(full.loss, expected.loss, **TOLERANCE)
    assert fast.loss is None and fast.hidden_states is None and fast.attentions is None
    assert len(full.hidden_states) == config.num_hidden_layers + 1
    for got, want in zip(full.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    for got, want in zip(full.attentions, expected.attentions, strict=True):
        assert got.shape == (3, config.num_attention_heads, 7, 7)
        torch.testing.assert_close(got, want, **TOLERANCE)
    # transformers 5 ignores head_mask; the analyses' (layers, heads) multipliers reach the MLM logits here
    head_mask = torch.ones(config.num_hidden_layers, config.num_attention_heads)
    head_mask[0, 1] = 0.0
    with torch.no_grad():
        masked = ours(input_ids, token_type_ids, attention_mask, head_mask=head_mask, output_attentions=True)
        fused = ours(input_ids, token_type_ids, attention_mask, head_mask=head_mask)
    assert masked.attentions[0][:, 1].abs().max() == 0 and masked.attentions[0][:, 0].abs().max() > 0
    torch.testing.assert_close(fused.logits, masked.logits, **TOLERANCE)
    assert not torch.allclose(masked.logits, full.logits, atol=1e-4)


def test_masked_lm_heads_say_what_they_are():
    masked_lm, pretraining = BertForMaskedLM(CONFIGS[0]), BertForPreTraining(CONFIGS[0])
    assert (masked_lm.has_mlm_head, masked_lm.has_nsp_head, masked_lm.has_pretraining_heads) == (True, False, False)
    assert (pretraining.has_mlm_head, pretraining.has_nsp_head) == (True, True)
    pretraining.has_pretraining_heads = False  # a bare encoder loaded into the pretraining class
    assert (pretraining.has_mlm_head, pretraining.has_nsp_head) == (False, False)
    assert masked_lm.config.architectures == ("BertForMaskedLM",)
    assert model_class_for(masked_lm.config) is BertForMaskedLM
    assert masked_lm.cls.predictions.decoder.weight is masked_lm.bert.embeddings.word_embeddings.weight


@pytest.fixture
def masked_lm(small_vocab_tokenizer):
    torch.manual_seed(3)
    config = BertConfig(vocab_size=small_vocab_tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                        num_attention_heads=3, intermediate_size=40, max_position_embeddings=32)
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()  # a zero bias would hide a bias that failed to load
    return model


def encoded(tokenizer):
    encoding = tokenizer.encode("the cat sat on a mat", "the dog ran far away")
    return tuple(torch.tensor([values]) for values in
                 (encoding.input_ids, encoding.segment_ids, encoding.attention_mask))


def test_masked_lm_round_trips_with_transformers(masked_lm, small_vocab_tokenizer, tmp_path, transformers):
    save_pretrained(masked_lm, small_vocab_tokenizer, tmp_path / "ours")
    saved = load_file(tmp_path / "ours" / "model.safetensors")
    assert "cls.predictions.transform.dense.weight" in saved and "bert.pooler.dense.weight" not in saved
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    reference = transformers.BertForMaskedLM.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    input_ids, segments, mask = encoded(small_vocab_tokenizer)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=mask, token_type_ids=segments).logits
        torch.testing.assert_close(masked_lm(input_ids, segments, mask).logits, want, **TOLERANCE)
        reference.cls.predictions.bias.normal_()
        reference.save_pretrained(tmp_path / "theirs")
        want = reference(input_ids, attention_mask=mask, token_type_ids=segments).logits
    small_vocab_tokenizer.save(tmp_path / "theirs")
    model, _ = load_pretrained(tmp_path / "theirs")
    assert type(model) is BertForMaskedLM and model.has_mlm_head and not model.has_nsp_head
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids, segments, mask).logits, want, **TOLERANCE)


def test_masked_lm_folder_lacking_its_head_is_named(masked_lm, small_vocab_tokenizer, tmp_path):
    folder = save_pretrained(masked_lm, small_vocab_tokenizer, tmp_path / "ours")
    weights = load_file(folder / "model.safetensors")
    save_file({name: tensor for name, tensor in weights.items() if not name.startswith("cls.")},
              folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="lacks the BertForMaskedLM head"):
        load_pretrained(folder)


def test_inspection_predicts_masked_tokens_without_nsp(masked_lm, small_vocab_tokenizer):
    text = "the cat sat on a mat"
    encoding = small_vocab_tokenizer.encode(text, "the dog ran far away")
    masking = mask_exactly(encoding, small_vocab_tokenizer, [2])
    inspection = inspect(masked_lm, small_vocab_tokenizer, text, "the dog ran far away", masking=masking, top_k=3)
    assert inspection.has_mlm_head and not inspection.has_nsp_head and inspection.has_pretraining_heads
    assert inspection.is_next_probability is None
    assert [prediction.position for prediction in inspection.predictions] == [2]
    input_ids = torch.tensor([masking.masked_ids])
    with torch.no_grad():
        logits = masked_lm(input_ids, torch.tensor([encoding.segment_ids]))
    assert inspection.predictions[0].top_ids[0] == int(logits.logits[0, 2].argmax())


@pytest.mark.parametrize("with_pooler", [True, False])
def test_bare_bert_model_loads_with_or_without_pooler(with_pooler, small_vocab_tokenizer, tmp_path, transformers):
    config = BertConfig(vocab_size=small_vocab_tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                        num_attention_heads=3, intermediate_size=40, max_position_embeddings=32)
    reference = transformers.BertModel(transformers.BertConfig(**config.to_dict()),
                                       add_pooling_layer=with_pooler).eval()
    reference.save_pretrained(tmp_path / "bare")
    small_vocab_tokenizer.save(tmp_path / "bare")
    model, _ = load_pretrained(tmp_path / "bare")
    assert type(model) is BertForPreTraining and not model.has_mlm_head and not model.has_nsp_head
    input_ids, segments, mask = encoded(small_vocab_tokenizer)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=mask, token_type_ids=segments).last_hidden_state
        got = model.bert(input_ids, segments, mask).last_hidden_state
    torch.testing.assert_close(got, want, **TOLERANCE)


@pytest.mark.parametrize("changes", [
    {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"},
    {"architectures": ["GPT2LMHeadModel"]},  # model_type "bert" kept: the class alone is foreign
    {"architectures": ["GPT2LMHeadModel"], "model_type": None},
])
def test_config_of_another_family_is_refused_by_name(changes, masked_lm, small_vocab_tokenizer, tmp_path):
    folder = save_pretrained(masked_lm, small_vocab_tokenizer, tmp_path / "ours")
    values = json.loads((folder / "config.json").read_text())
    values.update(changes)
    values = {key: value for key, value in values.items() if value is not None}
    (folder / "config.json").write_text(json.dumps(values))
    named = "gpt2" if changes.get("model_type") else "GPT2LMHeadModel"
    with pytest.raises(CheckpointError, match=named) as caught:
        read_checkpoint(folder)
    supported = str(caught.value).split("supported", 1)[1]  # the message goes on to say what is supported
    assert "BertForMaskedLM" in supported or "bert" in supported


def test_family_registry_is_torch_free_and_resolves_lazily():
    import subprocess

    code = ("import sys; from bertcore.models import families as f; "
            "assert f.supports({'model_type': 'bert', 'architectures': ['BertForMaskedLM']}); "
            "assert not f.supports({'model_type': 'gpt2'}); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    family, name = families.resolve({"model_type": "bert", "architectures": ["BertForNextSentencePrediction"]})
    assert name == "BertForPreTraining" and family.model_class(name) is BertForPreTraining
    assert families.resolve({"architectures": ["BertForMaskedLM"]})[1] == "BertForMaskedLM"  # no model_type
    assert families.family_for({"architectures": ["RobertaForMaskedLM"]}) is families.FAMILIES["roberta"]
    assert families.family_for({"architectures": ["DistilBertModel"]}) is families.FAMILIES["distilbert"]
    assert families.family_for({"model_type": "xlm-roberta"}) is families.FAMILIES["roberta"]
    with pytest.raises(families.UnsupportedModelError, match="RobertaForCausalLM"):
        families.resolve({"model_type": "roberta", "architectures": ["RobertaForCausalLM"]})  # no class here


def test_hub_listing_asks_the_registry():
    from bertcore.models.hub import loader_supports

    assert loader_supports({"model_type": "bert", "architectures": ["BertForMaskedLM"]})
    assert loader_supports({"model_type": "bert"})  # no architectures: the pretraining class
    assert not loader_supports({"model_type": "bert", "architectures": ["GPT2LMHeadModel"]})
    assert not loader_supports({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    assert not loader_supports({"model_type": ["bert"], "architectures": 5})  # damaged JSON is "no", not a crash


@pytest.mark.parametrize("family", ["electra", "albert"])
def test_the_loader_reads_other_families_by_their_own_names(family, small_vocab_tokenizer, tmp_path, transformers):
    """The checks (sizes, tied decoder, heads, encoder prefix) follow the class that config.json names, not BERT's
    names: another family's transformers save loads with its head and gives transformers' outputs."""
    sizes = dict(vocab_size=small_vocab_tokenizer.vocab_size, embedding_size=16, hidden_size=24, num_hidden_layers=2,
                 num_attention_heads=3, intermediate_size=37, max_position_embeddings=32)
    reference = {"electra": lambda: transformers.ElectraForPreTraining(transformers.ElectraConfig(**sizes)),
                 "albert": lambda: transformers.AlbertForMaskedLM(transformers.AlbertConfig(**sizes))}[family]()
    reference.eval().save_pretrained(tmp_path / family)
    small_vocab_tokenizer.save(tmp_path / family)
    model, _ = load_pretrained(tmp_path / family)
    assert type(model).__name__ == type(reference).__name__ and model.has_pretraining_heads
    input_ids, segments, mask = encoded(small_vocab_tokenizer)
    with torch.no_grad():
        want = reference(input_ids, attention_mask=mask, token_type_ids=segments).logits
        got = model(input_ids, token_type_ids=segments, attention_mask=mask).logits
    torch.testing.assert_close(got, want, **TOLERANCE)
