"""Weights in every layout transformers writes: one safetensors file, shards listed by model.safetensors.index.json,
pytorch_model.bin (read with weights_only=True) and its shards listed by pytorch_model.bin.index.json."""

import json
import pickle

import pytest
import torch

from bertcore.errors import CheckpointError
from bertcore.models.bert import BertForMaskedLM
from bertcore.models.checkpoint import load_pretrained
from bertcore.models.config import BertConfig

TOLERANCE = dict(rtol=0, atol=1e-5)


@pytest.fixture
def reference(small_vocab_tokenizer, transformers):
    torch.manual_seed(5)
    config = BertConfig(vocab_size=small_vocab_tokenizer.vocab_size, hidden_size=24, num_hidden_layers=3,
                        num_attention_heads=3, intermediate_size=40, max_position_embeddings=32)
    model = transformers.BertForMaskedLM(transformers.BertConfig(**config.to_dict())).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    model.config.architectures = ["BertForMaskedLM"]  # save_pretrained writes it; to_json_file alone does not
    return model


def same_logits(ours, theirs, tokenizer):
    encoding = tokenizer.encode("the cat sat on a mat")
    input_ids, segments = torch.tensor([encoding.input_ids]), torch.tensor([encoding.segment_ids])
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids, segments).logits,
                                   theirs(input_ids, token_type_ids=segments).logits, **TOLERANCE)


def test_sharded_safetensors_from_transformers(reference, small_vocab_tokenizer, tmp_path):
    reference.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    small_vocab_tokenizer.save(tmp_path / "sharded")
    shards = sorted(path.name for path in (tmp_path / "sharded").glob("model-*.safetensors"))
    assert len(shards) > 1 and (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    model, _ = load_pretrained(tmp_path / "sharded")
    assert type(model) is BertForMaskedLM
    same_logits(model, reference, small_vocab_tokenizer)


def save_bin_shards(reference, folder, tokenizer):
    """A sharded pickle save as older transformers wrote it: two pytorch_model-0000N-of-00002.bin and an index."""
    folder.mkdir()
    reference.config.to_json_file(folder / "config.json")
    tokenizer.save(folder)
    names = sorted(reference.state_dict())
    weight_map = {}
    for number, part in enumerate((names[: len(names) // 2], names[len(names) // 2:]), start=1):
        shard = f"pytorch_model-{number:05d}-of-00002.bin"
        torch.save({name: reference.state_dict()[name] for name in part}, folder / shard)
        weight_map.update(dict.fromkeys(part, shard))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    return index


def test_sharded_pytorch_bin(reference, small_vocab_tokenizer, tmp_path):
    save_bin_shards(reference, tmp_path / "bins", small_vocab_tokenizer)
    model, _ = load_pretrained(tmp_path / "bins")
    same_logits(model, reference, small_vocab_tokenizer)


def test_single_pytorch_bin(reference, small_vocab_tokenizer, tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    reference.config.to_json_file(folder / "config.json")
    torch.save(reference.state_dict(), folder / "pytorch_model.bin")
    small_vocab_tokenizer.save(folder)
    model, _ = load_pretrained(folder)
    same_logits(model, reference, small_vocab_tokenizer)


class RunsCode:
    def __reduce__(self):
        return (print, ("this ran while loading",))


def test_a_shard_holding_code_is_never_unpickled(reference, small_vocab_tokenizer, tmp_path, capsys):
    index = save_bin_shards(reference, tmp_path / "bins", small_vocab_tokenizer)
    shard = tmp_path / "bins" / sorted(set(index["weight_map"].values()))[1]
    with open(shard, "wb") as file:
        pickle.dump({"x": RunsCode()}, file)
    with pytest.raises(CheckpointError, match="never unpickled"):
        load_pretrained(tmp_path / "bins")
    assert "this ran" not in capsys.readouterr().out


@pytest.mark.parametrize(("damage", "message"), [
    (lambda index: index["weight_map"].update({"bert.embeddings.word_embeddings.weight": "../elsewhere.bin"}),
     "not a file name in the same folder"),
    (lambda index: index["weight_map"].update({"bert.embeddings.word_embeddings.weight": "gone.bin"}),
     "lists the shard gone.bin, which is not in the folder"),
    (lambda index: index["weight_map"].update({"bert.extra.weight": "pytorch_model-00001-of-00002.bin"}),
     "lacks 1 tensor.*bert.extra.weight"),
    (lambda index: index.pop("weight_map"), "no \"weight_map\""),
])
def test_a_damaged_index_is_named(damage, message, reference, small_vocab_tokenizer, tmp_path):
    index = save_bin_shards(reference, tmp_path / "bins", small_vocab_tokenizer)
    damage(index)
    (tmp_path / "bins" / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=message):
        load_pretrained(tmp_path / "bins")


def test_no_weights_names_every_layout(reference, small_vocab_tokenizer, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    reference.config.to_json_file(folder / "config.json")
    small_vocab_tokenizer.save(folder)
    with pytest.raises(CheckpointError, match=r"model\.safetensors\.index\.json"):
        load_pretrained(folder)
