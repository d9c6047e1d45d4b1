"""Checkpoints of task models: config.json's architectures picks the class; folders go both ways with transformers
(id2label included); every head tensor is required; a task model starts from a pretraining checkpoint's file."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertcore.errors import TokenizerError
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import CheckpointError, load_pretrained, read_checkpoint, save_pretrained
from bertcore.models.config import BertConfig
from bertcore.models.task_heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    start_from_pretrained,
)
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.tiny_configs import two_layer_bert

TOLERANCE = dict(rtol=0, atol=1e-5)
TASK_CLASSES = [BertForSequenceClassification, BertForTokenClassification, BertForQuestionAnswering]
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


@pytest.fixture(scope="module")
def tokenizer(small_vocab_tokenizer):
    return small_vocab_tokenizer


def small_config(tokenizer, **changes) -> BertConfig:
    return two_layer_bert(tokenizer.vocab_size, **changes)


def task_model(model_class, tokenizer, seed: int = 0):
    """A task model with non-trivial weights everywhere (a zero bias would hide one that failed to load)."""
    torch.manual_seed(seed)
    config = small_config(tokenizer, id2label=None if model_class is BertForQuestionAnswering else LABELS)
    model = model_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def inputs(tokenizer) -> dict[str, torch.Tensor]:
    encoding = tokenizer.encode("the cat sat on a mat", "the dog ran far away")
    return {"input_ids": torch.tensor([encoding.input_ids]), "token_type_ids": torch.tensor([encoding.segment_ids]),
            "attention_mask": torch.tensor([encoding.attention_mask])}


def logits(output) -> tuple[torch.Tensor, ...]:
    return (output.start_logits, output.end_logits) if hasattr(output, "start_logits") else (output.logits,)


def assert_same_logits(ours, theirs, tokenizer) -> None:
    with torch.no_grad():
        for got, want in zip(logits(ours(**inputs(tokenizer))), logits(theirs(**inputs(tokenizer))), strict=True):
            torch.testing.assert_close(got, want, **TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", TASK_CLASSES, ids=lambda c: c.__name__)
def test_our_task_save_loads_in_transformers_as_the_same_class_and_here_again(model_class, tokenizer, tmp_path,
                                                                             transformers):
    ours = task_model(model_class, tokenizer)
    folder = save_pretrained(ours, tokenizer, tmp_path / "ours")
    auto = transformers.AutoConfig.from_pretrained(folder)
    assert auto.architectures == [model_class.__name__]
    reference = getattr(transformers, model_class.__name__).from_pretrained(folder, attn_implementation="eager")
    assert reference.config.id2label == ours.config.id2label
    assert_same_logits(ours, reference.eval(), tokenizer)
    again, _ = load_pretrained(folder)
    assert type(again) is model_class and again.config == ours.config
    assert_same_logits(again, ours, tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", TASK_CLASSES, ids=lambda c: c.__name__)
def test_transformers_task_save_loads_here_as_the_same_class(model_class, tokenizer, tmp_path, transformers):
    """The hub layout: transformers writes the model (id2label in config.json) and its tokenizer's files."""
    torch.manual_seed(1)
    labels = {} if model_class is BertForQuestionAnswering else {"id2label": LABELS, "label2id": {
        name: index for index, name in LABELS.items()}}
    hf_config = transformers.BertConfig(**small_config(tokenizer).to_dict() | labels)
    reference = getattr(transformers, model_class.__name__)(hf_config).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    folder = tmp_path / "hub"
    reference.save_pretrained(folder)
    tokenizer.save(tmp_path / "vocab")
    transformers.BertTokenizerFast.from_pretrained(tmp_path / "vocab").save_pretrained(folder)
    model, loaded_tokenizer = load_pretrained(folder)
    assert type(model) is model_class and loaded_tokenizer.vocab == tokenizer.vocab
    if model_class is not BertForQuestionAnswering:
        assert dict(model.config.id2label) == LABELS and model.config.num_labels == 3
    assert_same_logits(model, reference, tokenizer)


def test_a_task_checkpoint_without_its_head_is_named(tokenizer, tmp_path):
    folder = save_pretrained(task_model(BertForSequenceClassification, tokenizer), tokenizer, tmp_path / "model")
    tensors = load_file(folder / "model.safetensors")
    del tensors["classifier.weight"], tensors["classifier.bias"]
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"lacks the BertForSequenceClassification head that config\.json's "
                                              r"architectures names \(classifier\.bias, classifier\.weight\)"):
        load_pretrained(folder)


def test_sequence_classification_needs_its_pooler(tokenizer, tmp_path):
    folder = save_pretrained(task_model(BertForSequenceClassification, tokenizer), tokenizer, tmp_path / "model")
    tensors = load_file(folder / "model.safetensors")
    del tensors["bert.pooler.dense.weight"]
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"lacks 1 tensor\(s\) that its config\.json implies "
                                              r"\(BertForSequenceClassification\): bert\.pooler\.dense\.weight"):
        load_pretrained(folder)


def test_a_tagger_saved_with_a_pooler_loads_without_it(tokenizer, tmp_path):
    """Some hub token-classification checkpoints carry the pooler their class does not use."""
    model = task_model(BertForTokenClassification, tokenizer)
    folder = save_pretrained(model, tokenizer, tmp_path / "model")
    tensors = load_file(folder / "model.safetensors")
    tensors["bert.pooler.dense.weight"], tensors["bert.pooler.dense.bias"] = torch.zeros(24, 24), torch.zeros(24)
    save_file(tensors, folder / "model.safetensors")
    loaded, _ = load_pretrained(folder)
    assert_same_logits(loaded, model, tokenizer)


def test_a_classifier_of_another_size_names_the_labels(tokenizer, tmp_path):
    folder = save_pretrained(task_model(BertForSequenceClassification, tokenizer), tokenizer, tmp_path / "model")
    values = json.loads((folder / "config.json").read_text())
    values["id2label"] = {"0": "no", "1": "yes"}
    values.pop("label2id")
    (folder / "config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match=r"classifier\.bias has shape \(3,\) but the config implies \(2,\) "
                                              r"\(3 outputs in the weights, 2 labels"):
        load_pretrained(folder)


def test_an_absurd_num_labels_is_refused_before_anything_is_allocated(tokenizer, tmp_path):
    folder = save_pretrained(task_model(BertForSequenceClassification, tokenizer), tokenizer, tmp_path / "model")
    values = json.loads((folder / "config.json").read_text())
    for field in ("id2label", "label2id"):
        del values[field]
    values["num_labels"] = 10**12  # a label name per class would take terabytes
    (folder / "config.json").write_text(json.dumps(values))
    with pytest.raises(CheckpointError, match=r"num_labels is 1000000000000; at most 1,000,000 classes"):
        load_pretrained(folder)


def test_a_damaged_head_is_named(tokenizer, tmp_path):
    folder = save_pretrained(task_model(BertForQuestionAnswering, tokenizer), tokenizer, tmp_path / "model")
    tensors = load_file(folder / "model.safetensors")
    tensors["qa_outputs.weight"][0, 0] = float("nan")
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"qa_outputs\.weight holds 1 NaN/inf"):
        load_pretrained(folder)


def test_read_checkpoint_names_the_class_and_whether_the_head_is_there(tokenizer, tmp_path):
    save_pretrained(task_model(BertForTokenClassification, tokenizer), tokenizer, tmp_path / "tagger")
    contents = read_checkpoint(tmp_path / "tagger")
    assert contents.model_class is BertForTokenClassification and contents.has_head
    pretrained = BertForPreTraining(small_config(tokenizer))
    pretrained.has_pretraining_heads = False  # a bare encoder: no heads, and (as transformers' BertModel) a pooler
    save_pretrained(pretrained, tokenizer, tmp_path / "encoder")
    contents = read_checkpoint(tmp_path / "encoder")
    assert contents.model_class is BertForPreTraining and not contents.has_head


def test_a_task_model_starts_from_a_bare_encoders_file_saying_the_pooler_is_new(tokenizer, tmp_path):
    """From the file's tensors, not from a loaded BertForPreTraining whose missing pooler was made up."""
    encoder = BertForPreTraining(small_config(tokenizer))
    encoder.has_pretraining_heads = False
    folder = save_pretrained(encoder, tokenizer, tmp_path / "encoder")
    tensors = load_file(folder / "model.safetensors")
    del tensors["bert.pooler.dense.weight"], tensors["bert.pooler.dense.bias"]  # as all-MiniLM-L6-v2 ships
    save_file(tensors, folder / "model.safetensors")
    contents = read_checkpoint(folder)
    config = contents.config.replace(id2label=LABELS)
    model, transfer = start_from_pretrained(BertForSequenceClassification, config, contents.state_dict)
    assert set(transfer.initialised) == {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight",
                                         "classifier.bias"}
    assert transfer.dropped == ()
    torch.testing.assert_close(model.bert.embeddings.word_embeddings.weight,
                               encoder.bert.embeddings.word_embeddings.weight, rtol=0, atol=0)


def test_a_folder_with_only_a_tokenizer_json_gives_its_wordpiece_vocabulary(tokenizer, tmp_path):
    """transformers 5 saves tokenizer.json and no vocab.txt."""
    tokenizer._tokenizer.save(str(tmp_path / "tokenizer.json"))
    loaded = BertTokenizer.from_vocab_file(tmp_path)
    assert loaded.vocab == tokenizer.vocab and loaded.lowercase == tokenizer.lowercase
    assert loaded.encode("the cat sat", "on a mat").input_ids == tokenizer.encode("the cat sat", "on a mat").input_ids
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}}}))
    with pytest.raises(TokenizerError, match=r"tokenizer\.json holds a BPE tokenizer, not BERT's WordPiece"):
        BertTokenizer.from_vocab_file(tmp_path)


def test_only_a_pretraining_model_saved_with_its_heads_says_it_has_them(tokenizer, tmp_path):
    for model_class in TASK_CLASSES:
        model = task_model(model_class, tokenizer)
        assert model.has_pretraining_heads is False
        with pytest.raises(AttributeError):  # a task model cannot be told it has MLM/NSP heads
            model.has_pretraining_heads = True
        assert load_pretrained(save_pretrained(model, tokenizer, tmp_path / model_class.__name__))[0] \
            .has_pretraining_heads is False
    pretraining = BertForPreTraining(small_config(tokenizer))
    assert pretraining.has_pretraining_heads is True
    assert load_pretrained(save_pretrained(pretraining, tokenizer, tmp_path / "with"))[0].has_pretraining_heads is True
    pretraining.has_pretraining_heads = False  # as for a bare encoder: its heads are not saved, nor claimed again
    assert load_pretrained(save_pretrained(pretraining, tokenizer, tmp_path / "bare"))[0].has_pretraining_heads is False
