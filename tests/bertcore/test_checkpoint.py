"""Checkpoints in and out: real MiniLM, round trips with transformers, and every way a folder can be bad."""

import json
import os
import pickle

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import CheckpointError, load_pretrained, save_pretrained
from tests.tiny_configs import two_layer_bert

TOLERANCE = dict(rtol=0, atol=1e-5)
SENTENCES = ("The cat sat on the mat.", "Ångström wrote 中文 and 🙂 emoji!?!")


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


@pytest.fixture(scope="module")
def small_model(tokenizer):
    torch.manual_seed(0)
    # vocab_size padded to a multiple of 16 beyond the vocabulary, as some real checkpoints are
    config = two_layer_bert(-(-(tokenizer.vocab_size + 1) // 16) * 16)
    model = BertForPreTraining(config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()  # a zero bias would hide a bias that failed to load
    return model


def assert_same_pretraining_logits(ours, reference, tokenizer):
    """Both MLM and NSP logits of our model and a transformers model agree on one sentence pair."""
    encoding = tokenizer.encode("the cat sat on a mat", "the dog ran far away")
    input_ids, segments, mask = (torch.tensor([values]) for values in
                                 (encoding.input_ids, encoding.segment_ids, encoding.attention_mask))
    with torch.no_grad():
        want = reference(input_ids, attention_mask=mask, token_type_ids=segments)
        got = ours(input_ids, segments, mask)
    torch.testing.assert_close(got.prediction_logits, want.prediction_logits, **TOLERANCE)
    torch.testing.assert_close(got.seq_relationship_logits, want.seq_relationship_logits, **TOLERANCE)


@pytest.mark.slow
def test_minilm_loads_and_matches_transformers(minilm_path, transformers):
    model, tokenizer = load_pretrained(minilm_path)
    assert model.has_pretraining_heads is False  # MiniLM is a bare BertModel
    assert tokenizer.lowercase and tokenizer.vocab_size == 30522
    reference = transformers.BertModel.from_pretrained(minilm_path, attn_implementation="eager").eval()
    reference_tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path)
    for text_a, text_b in [(SENTENCES[0], None), SENTENCES]:
        encoding = tokenizer.encode(text_a, text_b)
        expected_ids = reference_tokenizer(text_a, text_b)
        assert encoding.input_ids == expected_ids["input_ids"]
        assert encoding.segment_ids == expected_ids["token_type_ids"]
        ids = torch.tensor([encoding.input_ids])
        segments = torch.tensor([encoding.segment_ids])
        with torch.no_grad():
            want = reference(ids, token_type_ids=segments, output_hidden_states=True, output_attentions=True)
            got = model(ids, segments, output_hidden_states=True, output_attentions=True)
        assert len(got.hidden_states) == 7
        for ours, theirs in zip(got.hidden_states, want.hidden_states, strict=True):
            torch.testing.assert_close(ours, theirs, **TOLERANCE)
        for ours, theirs in zip(got.attentions, want.attentions, strict=True):
            torch.testing.assert_close(ours, theirs, **TOLERANCE)


@pytest.mark.slow
def test_headless_model_saves_without_pretending_heads(minilm_path, tmp_path):
    model, tokenizer = load_pretrained(minilm_path)
    save_pretrained(model, tokenizer, tmp_path / "minilm")
    assert not any(name.startswith("cls.") for name in load_file(tmp_path / "minilm" / "model.safetensors"))
    again, _ = load_pretrained(tmp_path / "minilm")
    assert again.has_pretraining_heads is False


@pytest.mark.slow
def test_our_save_loads_in_transformers(small_model, tokenizer, tmp_path, transformers):
    save_pretrained(small_model, tokenizer, tmp_path / "ours")
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == [
        "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    reference = transformers.BertForPreTraining.from_pretrained(tmp_path / "ours", attn_implementation="eager").eval()
    assert_same_pretraining_logits(small_model, reference, tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("safe_serialization", [True, False])
def test_transformers_save_loads_in_ours(small_model, tokenizer, tmp_path, safe_serialization, transformers):
    hf_config = transformers.BertConfig(**small_model.config.to_dict())
    reference = transformers.BertForPreTraining(hf_config).eval()
    with torch.no_grad():
        reference.cls.predictions.bias.normal_()
    folder = tmp_path / "theirs"
    if safe_serialization:
        reference.save_pretrained(folder)
    else:  # the older pickle format, with the decoder weight and the bert. prefix stored explicitly
        folder.mkdir()
        hf_config.to_json_file(folder / "config.json")
        torch.save(reference.state_dict(), folder / "pytorch_model.bin")
    tokenizer.save(folder)
    model, loaded_tokenizer = load_pretrained(folder)
    assert model.has_pretraining_heads and loaded_tokenizer.vocab == tokenizer.vocab
    assert_same_pretraining_logits(model, reference, tokenizer)


@pytest.mark.slow
def test_bare_keys_and_tf_layernorm_names(small_model, tokenizer, tmp_path):
    folder = tmp_path / "bare"
    save_pretrained(small_model, tokenizer, folder)
    tensors = load_file(folder / "model.safetensors")
    renamed = {}
    for name, tensor in tensors.items():
        name = name.removeprefix("bert.")
        if name.endswith("LayerNorm.weight"):
            name = name.replace("LayerNorm.weight", "LayerNorm.gamma")
        renamed[name] = tensor
    save_file(renamed, folder / "model.safetensors")
    model, _ = load_pretrained(folder)
    for name, tensor in small_model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)


def test_save_replaces_an_existing_folder_whole(small_model, tokenizer, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "stale.txt").write_text("old")
    save_pretrained(small_model, tokenizer, folder)
    assert not (folder / "stale.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


@pytest.mark.slow
def test_failed_save_leaves_the_previous_checkpoint(small_model, tokenizer, tmp_path, monkeypatch):
    folder = tmp_path / "model"
    save_pretrained(small_model, tokenizer, folder)
    before = (folder / "model.safetensors").read_bytes()

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("bertcore.models.checkpoint.save_file", explode)
    with pytest.raises(CheckpointError, match="disk full"):  # CheckpointSaveError, whatever the library raised
        save_pretrained(small_model, tokenizer, folder)
    assert (folder / "model.safetensors").read_bytes() == before
    load_pretrained(folder)


# ---- every way a folder can be bad ------------------------------------------------------------------------

@pytest.fixture
def good_folder(small_model, tokenizer, tmp_path):
    return save_pretrained(small_model, tokenizer, tmp_path / "good")


def test_not_a_folder(tmp_path):
    with pytest.raises(CheckpointError, match=r"nothing-here does not exist \(it is not a folder\)"):
        load_pretrained(tmp_path / "nothing-here")
    (tmp_path / "a-file").write_text("weights?")
    with pytest.raises(CheckpointError, match=r"a-file is a regular file, not a folder; a BERT checkpoint is a folder"):
        load_pretrained(tmp_path / "a-file")


def test_missing_config(good_folder):
    (good_folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"needs a config\.json"):
        load_pretrained(good_folder)


def test_corrupt_config(good_folder):
    (good_folder / "config.json").write_text("{\"vocab_size\": ")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_pretrained(good_folder)


def test_invalid_config_values(good_folder):
    values = json.loads((good_folder / "config.json").read_text())
    values["num_attention_heads"] = 5
    (good_folder / "config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match="not divisible by num_attention_heads 5"):
        load_pretrained(good_folder)


def test_missing_weights(good_folder):
    (good_folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="has no weights"):
        load_pretrained(good_folder)


def test_truncated_safetensors(good_folder):
    path = good_folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_pretrained(good_folder)


def test_missing_vocab(good_folder):
    (good_folder / "vocab.txt").unlink()
    with pytest.raises(CheckpointError, match=r"vocab\.txt does not exist"):
        load_pretrained(good_folder)


def test_vocab_larger_than_the_embeddings(good_folder, tokenizer):
    extra = [f"extra{i}" for i in range(10)]
    (good_folder / "vocab.txt").write_text("\n".join(tokenizer.vocab + extra) + "\n")
    with pytest.raises(CheckpointError, match="does not belong to these weights"):
        load_pretrained(good_folder)


@pytest.mark.slow
def test_shape_mismatch_names_the_tensor_and_both_shapes(good_folder):
    tensors = load_file(good_folder / "model.safetensors")
    tensors["bert.encoder.layer.1.intermediate.dense.weight"] = torch.zeros(41, 24)
    save_file(tensors, good_folder / "model.safetensors")
    with pytest.raises(CheckpointError,
                       match=r"bert\.encoder\.layer\.1\.intermediate\.dense\.weight has shape \(41, 24\) "
                             r"but the config implies \(40, 24\)"):
        load_pretrained(good_folder)


def test_missing_tensor_is_named(good_folder):
    tensors = load_file(good_folder / "model.safetensors")
    del tensors["bert.encoder.layer.0.attention.self.key.bias"]
    save_file(tensors, good_folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"bert\.encoder\.layer\.0\.attention\.self\.key\.bias"):
        load_pretrained(good_folder)


def test_extra_layer_is_named(good_folder):
    tensors = load_file(good_folder / "model.safetensors")
    tensors["bert.encoder.layer.2.output.dense.bias"] = torch.zeros(24)
    save_file(tensors, good_folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"does not account for: bert\.encoder\.layer\.2\.output\.dense\.bias"):
        load_pretrained(good_folder)


class Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickle_with_code_is_refused(good_folder):
    (good_folder / "model.safetensors").unlink()
    (good_folder / "pytorch_model.bin").write_bytes(pickle.dumps({"weights": Payload()}))
    with pytest.raises(CheckpointError, match="never unpickled"):
        load_pretrained(good_folder)


def test_saved_files_are_not_private(small_model, tokenizer, tmp_path):
    folder = save_pretrained(small_model, tokenizer, tmp_path / "shared")
    umask = os.umask(0)
    os.umask(umask)
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask
    for file in folder.iterdir():
        assert file.stat().st_mode & 0o777 == 0o666 & ~umask, file.name


def test_saving_never_touches_the_umask(small_model, tokenizer, tmp_path, monkeypatch):
    def forbidden(mask):
        raise AssertionError("os.umask was called: setting it, even for a moment, is visible to every thread")

    monkeypatch.setattr(os, "umask", forbidden)
    folder = save_pretrained(small_model, tokenizer, tmp_path / "model")
    save_pretrained(small_model, tokenizer, folder)  # replacing an existing folder too
    load_pretrained(folder)


def test_vocab_shorter_than_vocab_size_beyond_padding(good_folder, tokenizer):
    values = json.loads((good_folder / "config.json").read_text())
    values["vocab_size"] = 80  # 60 tokens rounded up to a multiple of 8, 16, 32 or 64 is 64, of 128 is 128
    (good_folder / "config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match=rf"vocab\.txt has {tokenizer.vocab_size} tokens but config\.json "
                                              r"says vocab_size 80: .*multiple of a power of two from 8 to 1024"):
        load_pretrained(good_folder)


def test_vocab_padded_to_a_multiple_loads(good_folder, small_model, tokenizer):
    assert small_model.config.vocab_size % 16 == 0 and small_model.config.vocab_size > tokenizer.vocab_size
    # the fixture's checkpoint is padded, as NVIDIA's BERTs are, and its tokenizer_config.json records the vocabulary's
    # real size (BertTokenizer.save writes it): that record is what lets a padded table load (test_checkpoint_files)
    model, loaded = load_pretrained(good_folder)
    assert loaded.vocab_size == tokenizer.vocab_size and model.config.vocab_size == small_model.config.vocab_size


def test_a_model_and_tokenizer_that_do_not_belong_together_are_not_saved(small_model, tokenizer, tmp_path):
    model = BertForPreTraining(small_model.config.replace(vocab_size=small_model.config.vocab_size + 1))
    with pytest.raises(CheckpointError, match="do not belong together"):
        save_pretrained(model, tokenizer, tmp_path / "mismatched")
    assert not (tmp_path / "mismatched").exists()


def test_non_finite_weights_are_named(good_folder):
    tensors = load_file(good_folder / "model.safetensors")
    tensors["bert.encoder.layer.1.attention.output.dense.weight"][3, 4] = float("inf")
    tensors["bert.encoder.layer.1.attention.output.dense.weight"][0, 0] = float("nan")
    save_file(tensors, good_folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"bert\.encoder\.layer\.1\.attention\.output\.dense\.weight holds 2 "
                                              r"NaN/inf value"):
        load_pretrained(good_folder)


def test_a_whole_checkpoint_loads_without_random_init_with_its_ties_kept(good_folder, small_model):
    """Built on the meta device and handed the tensors read: the decoder stays tied to the word embeddings (and
    its bias to the head's), every parameter is real, trainable and equal to the saved one."""
    model, _ = load_pretrained(good_folder)
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    assert len(list(model.parameters())) == len(list(small_model.parameters()))
    for (name, got), want in zip(model.named_parameters(), small_model.parameters(), strict=True):
        assert not got.is_meta and got.requires_grad and got.dtype == torch.float32, name
        assert torch.equal(got, want), name


def test_huge_finite_weights_whose_sum_overflows_still_load(good_folder):
    """The finiteness check sums each tensor first; a sum past float32's range is no NaN/inf of the weights."""
    tensors = load_file(good_folder / "model.safetensors")
    tensors["bert.encoder.layer.1.attention.output.dense.weight"][0, :] = 3e38
    save_file(tensors, good_folder / "model.safetensors")
    model, _ = load_pretrained(good_folder)
    assert model.bert.encoder.layer[1].attention.output.dense.weight[0, 0] == torch.tensor(3e38)


def test_tensors_of_no_bert_architecture_are_named(good_folder):
    tensors = load_file(good_folder / "model.safetensors")
    tensors["lm_head.dense.weight"] = torch.zeros(24, 24)
    save_file(tensors, good_folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"belong to no BERT architecture: lm_head\.dense\.weight"):
        load_pretrained(good_folder)


def test_another_architectures_head_is_left_out(good_folder, small_model):
    tensors = load_file(good_folder / "model.safetensors")
    tensors["classifier.weight"], tensors["classifier.bias"] = torch.zeros(3, 24), torch.zeros(3)  # fine-tuned
    save_file(tensors, good_folder / "model.safetensors")
    model, _ = load_pretrained(good_folder)
    torch.testing.assert_close(model.cls.predictions.bias, small_model.cls.predictions.bias, rtol=0, atol=0)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("initializer_range", "x", r"initializer_range must be a finite number \(float\), got 'x' \(str\)"),
    ("hidden_size", 12.5, r"hidden_size must be a positive integer, got 12\.5 \(float\)"),
    ("num_hidden_layers", True, r"num_hidden_layers must be a positive integer, got True \(bool\)"),
    ("layer_norm_eps", None, r"layer_norm_eps must be a finite number \(float\), got None"),
    ("hidden_act", 3, "hidden_act must be a string"),
])
def test_wrong_types_in_the_config_are_named(good_folder, field, value, message):
    values = json.loads((good_folder / "config.json").read_text())
    values[field] = value
    (good_folder / "config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(good_folder)


def test_a_vocab_that_is_not_utf8_names_the_byte(good_folder):
    data = (good_folder / "vocab.txt").read_bytes()
    (good_folder / "vocab.txt").write_bytes(data + b"caf\xe9\n")
    line = len(data.splitlines()) + 1
    with pytest.raises(CheckpointError, match=rf"vocab\.txt is not UTF-8 text: byte {len(data) + 3} \(line {line}\)"):
        load_pretrained(good_folder)


@pytest.mark.parametrize(("payload", "message"), [
    ({"bert.embeddings.word_embeddings.weight": [[0.0]]}, r"'bert\.embeddings\.word_embeddings\.weight' = a list"),
    ({"model": {"weight": torch.zeros(2)}, "optimizer": {}}, r"'model' = a dict.*training checkpoint"),
    ({3: torch.zeros(2)}, r"holds the key 3 \(int\); a state dict maps parameter names \(str\) to tensors"),
])
def test_a_bin_holding_non_tensors_is_named(good_folder, payload, message):
    (good_folder / "model.safetensors").unlink()
    torch.save(payload, good_folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(good_folder)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("num_hidden_layers", 1_000_000, "num_hidden_layers 1000000 but the weights hold 2 encoder layer"),
    ("hidden_size", 10**9, r"hidden_size 1000000000 but the weights say 24 \(bert\.embeddings\.word_embeddings"),
    ("vocab_size", 10**9, r"config\.json says vocab_size 1000000000"),  # the vocabulary's size tells first
    ("max_position_embeddings", 10**8, "max_position_embeddings 100000000 but the weights say 32"),
    ("intermediate_size", 10**9, r"intermediate_size 1000000000 but the weights say 40"),
])
def test_absurd_sizes_are_refused_before_anything_is_allocated(good_folder, monkeypatch, field, value, message):
    values = json.loads((good_folder / "config.json").read_text())
    values[field] = value
    if field == "hidden_size":
        values["num_attention_heads"] = 1
    (good_folder / "config.json").write_text(json.dumps(values))

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built before the sizes were checked")

    monkeypatch.setattr("bertcore.models.checkpoint.model_class_for", lambda config: no_model)
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(good_folder)
