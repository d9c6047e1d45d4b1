"""Explanation targets: every target kind on every head kind gives the logit the model's own forward gives, from
input ids and from the embedding layer's output alike; a target the model or the input cannot answer is refused
with an ExplainError that names it."""


import pytest
import torch

from bertcore.errors import ExplainError
from bertcore.explain.targets import (
    available_targets,
    base_model,
    check_target,
    describe_target,
    model_inputs,
    target_logit,
    target_logit_and_attentions,
)
from bertcore.models.albert import AlbertConfig, AlbertForMaskedLM, AlbertForPreTraining
from bertcore.models.bert import BertForMaskedLM, BertForPreTraining
from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from bertcore.models.electra import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from bertcore.models.families import FAMILIES
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
from bertcore.models.task_heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from tests.tiny_configs import tiny_bert

SIZES = dict(num_hidden_layers=2, num_attention_heads=3, intermediate_size=37)


def build(name: str, vocab_size: int):
    """Each head kind bertcore loads, at tiny distinct sizes, in eval mode: "<family>-<head>"."""
    torch.manual_seed(0)
    if name == "bert-pretraining":
        model = BertForPreTraining(tiny_bert(vocab_size))
    elif name == "bert-mlm":
        model = BertForMaskedLM(tiny_bert(vocab_size))
    elif name == "bert-class":
        model = BertForSequenceClassification(tiny_bert(vocab_size, num_labels=3))
    elif name == "bert-tag":
        model = BertForTokenClassification(tiny_bert(vocab_size, num_labels=4))
    elif name == "bert-qa":
        model = BertForQuestionAnswering(tiny_bert(vocab_size, num_labels=2))
    elif name == "roberta-mlm":
        model = RobertaForMaskedLM(RobertaConfig(vocab_size=vocab_size, hidden_size=24, max_position_embeddings=40,
                                                 **SIZES))
    elif name == "distilbert-mlm":
        model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=vocab_size, hidden_size=27,
                                                       max_position_embeddings=40, **SIZES))
    elif name == "electra-discriminator":
        model = ElectraForPreTraining(ElectraConfig(vocab_size=vocab_size, hidden_size=30, embedding_size=18,
                                                    max_position_embeddings=40, **SIZES))
    elif name == "electra-generator":
        model = ElectraForMaskedLM(ElectraConfig(vocab_size=vocab_size, hidden_size=30, embedding_size=18,
                                                 max_position_embeddings=40, **SIZES))
    elif name == "albert-pretraining":
        model = AlbertForPreTraining(AlbertConfig(vocab_size=vocab_size, hidden_size=33, embedding_size=15,
                                                  max_position_embeddings=40, **SIZES))
    elif name == "albert-mlm":
        model = AlbertForMaskedLM(AlbertConfig(vocab_size=vocab_size, hidden_size=33, embedding_size=15,
                                               max_position_embeddings=40, **SIZES))
    elif name.split("-")[1] in TASK_CLASSES:
        # Another family's task head: its encoder's config from that family's masked LM above.
        family, task = name.split("-")
        config = build("electra-generator" if family == "electra" else f"{family}-mlm", vocab_size).config
        suffix, labels = TASK_CLASSES[task]
        model = FAMILIES[family].model_class(FAMILY_PREFIXES[family] + suffix)(config.replace(num_labels=labels))
    else:
        model = ModernBertForMaskedLM(ModernBertConfig(vocab_size=vocab_size, hidden_size=30, intermediate_size=37,
                                                       num_hidden_layers=2, num_attention_heads=3,
                                                       max_position_embeddings=40, local_attention=8,
                                                       pad_token_id=0, bos_token_id=1, cls_token_id=1,
                                                       eos_token_id=2, sep_token_id=2))
    return model.eval()


# head kind -> (the target kinds it offers, one target of each, the forward output's entry for it)
CASES = {
    "bert-pretraining": ("mlm", "nsp"),
    "bert-mlm": ("mlm",),
    "bert-class": ("class",),
    "bert-tag": ("tag",),
    "bert-qa": ("start", "end"),
    "roberta-mlm": ("mlm",),
    "distilbert-mlm": ("mlm",),
    "electra-discriminator": ("rtd",),
    "electra-generator": ("mlm",),
    "albert-pretraining": ("mlm", "sop"),
    "albert-mlm": ("mlm",),
    "modernbert-mlm": ("mlm",),
}
TASK_CLASSES = {"class": ("ForSequenceClassification", 3), "tag": ("ForTokenClassification", 4),
                "qa": ("ForQuestionAnswering", 2)}
FAMILY_PREFIXES = {"roberta": "Roberta", "distilbert": "DistilBert", "electra": "Electra", "albert": "Albert",
                   "modernbert": "ModernBert"}
FAMILY_TASK_CASES = {f"{family}-{task}": ("start", "end") if task == "qa" else (task,)
                     for family in FAMILY_PREFIXES for task in TASK_CLASSES}


def example_target(kind: str) -> tuple:
    return {"mlm": ("mlm", 3, 7), "nsp": ("nsp", 1), "sop": ("sop", 1), "rtd": ("rtd", 2), "class": ("class", 2),
            "tag": ("tag", 4, 3), "start": ("start", 5), "end": ("end", 1)}[kind]


def reference_logit(model, target, inputs) -> torch.Tensor:
    """The target's logit read from the model's own full forward (every position decoded)."""
    outputs = model(inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                    attention_mask=inputs["attention_mask"])
    kind, *values = target
    if kind == "mlm":
        logits = getattr(outputs, "prediction_logits", None)
        return (outputs.logits if logits is None else logits)[:, values[0], values[1]]
    if kind == "nsp":
        return outputs.seq_relationship_logits[:, values[0]]
    if kind == "sop":
        return outputs.sop_logits[:, values[0]]
    if kind == "rtd":
        return outputs.logits[:, values[0]]
    if kind == "class":
        return outputs.logits[:, values[0]]
    if kind == "tag":
        return outputs.logits[:, values[0], values[1]]
    return (outputs.start_logits if kind == "start" else outputs.end_logits)[:, values[0]]


def embedding_layer_output(model, inputs) -> torch.Tensor:
    """What the model's embedding layer gives for these inputs, caught on its way through a forward."""
    caught = []
    handle = base_model(model).embeddings.register_forward_hook(lambda module, args, output: caught.append(output))
    with torch.no_grad():
        model(inputs["input_ids"], token_type_ids=inputs["token_type_ids"], attention_mask=inputs["attention_mask"])
    handle.remove()
    return caught[0]


@pytest.fixture(scope="module")
def pair_encoding(small_vocab_tokenizer):
    return small_vocab_tokenizer.encode("the cat sat on a mat", "the dog ran", pad_to=16)  # 14 tokens, 2 pads


@pytest.mark.parametrize("name", list(CASES) + list(FAMILY_TASK_CASES))
def test_each_target_kind_on_each_head_kind_is_the_forward_logit(name, small_vocab_tokenizer, pair_encoding):
    model = build(name, small_vocab_tokenizer.vocab_size)
    assert available_targets(model) == (CASES | FAMILY_TASK_CASES)[name]
    inputs = model_inputs(pair_encoding)
    embedding_output = embedding_layer_output(model, inputs)
    with torch.no_grad():
        for kind in (CASES | FAMILY_TASK_CASES)[name]:
            target = check_target(model, pair_encoding, example_target(kind))
            expected = reference_logit(model, target, inputs)
            torch.testing.assert_close(target_logit(model, target, **inputs), expected, rtol=1e-5, atol=1e-5)
            # From the embedding layer's output, batched: two rows of the same input give the same logit twice.
            from_embeddings = target_logit(model, target, inputs_embeds=embedding_output.expand(2, -1, -1),
                                           token_type_ids=inputs["token_type_ids"],
                                           attention_mask=inputs["attention_mask"])
            torch.testing.assert_close(from_embeddings, expected.expand(2), rtol=1e-5, atol=1e-5)
            logit, attentions = target_logit_and_attentions(model, target, **inputs)
            torch.testing.assert_close(logit, expected, rtol=1e-5, atol=1e-5)
            assert len(attentions) >= 2 and attentions[0].shape[-1] == len(pair_encoding.input_ids)


def test_a_bare_encoder_offers_no_target(small_vocab_tokenizer, pair_encoding):
    model = build("bert-pretraining", small_vocab_tokenizer.vocab_size)
    model.has_pretraining_heads = False
    assert available_targets(model) == ()
    with pytest.raises(ExplainError, match="bare encoder"):
        check_target(model, pair_encoding, ("mlm", 1, 5))


@pytest.mark.parametrize(("name", "target", "message"), [
    ("bert-mlm", ("nsp", 0), r"BertForMaskedLM has no head for a 'nsp' target; its targets are: mlm"),
    ("albert-pretraining", ("nsp", 0), r"its targets are: mlm, sop"),
    ("bert-mlm", ("mlm", 16, 5), r"position is 16, but the input has 16 positions \(0..15\)"),
    ("bert-mlm", ("mlm", -1, 5), r"position is -1"),
    ("bert-mlm", ("mlm", 15, 5), r"position 15 is padding"),
    ("bert-mlm", ("mlm", 2, 60), r"token id is 60, outside the vocabulary of 60"),
    ("bert-class", ("class", 3), r"label is 3, but BertForSequenceClassification's head has 3 output"),
    ("bert-pretraining", ("nsp", 2), r"label is 2"),
    ("bert-tag", ("tag", 2), r"a 'tag' target is \('tag', position, label\)"),
    ("bert-mlm", ("mlm", 2.5, 5), r"position is 2.5; it must be an integer"),
    ("bert-mlm", ("guess", 1), r"target kind 'guess' is unknown"),
    ("bert-mlm", "mlm", r"a target is a tuple"),
])
def test_a_bad_target_is_refused_by_name(name, target, message, small_vocab_tokenizer, pair_encoding):
    model = build(name, small_vocab_tokenizer.vocab_size)
    with pytest.raises(ExplainError, match=message):
        check_target(model, pair_encoding, target)


def test_a_checked_target_is_plain_ints(small_vocab_tokenizer, pair_encoding):
    model = build("bert-mlm", small_vocab_tokenizer.vocab_size)
    assert check_target(model, pair_encoding, ["mlm", torch.tensor(3), 7]) == ("mlm", 3, 7)


def test_targets_in_words(small_vocab_tokenizer):
    model = build("bert-class", small_vocab_tokenizer.vocab_size)
    cat = small_vocab_tokenizer.token_to_id("cat")
    assert describe_target(("mlm", 3, cat), small_vocab_tokenizer) == "MLM: 'cat' at position 3"
    assert describe_target(("nsp", 0)) == "NSP: IsNext"
    assert describe_target(("sop", 1)) == "SOP: swapped"
    assert describe_target(("class", 2), model=model) == "class 'LABEL_2'"
    assert describe_target(("start", 4)) == "answer start at position 4"


def test_the_embedding_override_holds_only_in_its_own_thread(small_vocab_tokenizer, pair_encoding):
    import threading

    from bertcore.explain.targets import _embedding_output

    model = build("bert-mlm", small_vocab_tokenizer.vocab_size)
    inputs = model_inputs(pair_encoding)
    target = ("mlm", 3, 7)
    with torch.no_grad():
        expected = target_logit(model, target, **inputs)
        elsewhere = []
        with _embedding_output(base_model(model), torch.zeros(1, 16, 30)):
            overridden = target_logit(model, target, **inputs)
            worker = threading.Thread(target=lambda: elsewhere.append(target_logit(model, target, **inputs)))
            worker.start()
            worker.join()
    assert not torch.allclose(overridden, expected)
    torch.testing.assert_close(elsewhere[0], expected)
