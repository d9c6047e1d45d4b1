"""`bert-finetune --init-from` any family's folder: a short real fine-tune of a tiny random RoBERTa, DistilBERT,
ELECTRA, ALBERT and ModernBERT on the shipped mood demo (question, exclamation or statement?). The run trains the
family's own sequence head, its loss falls, and the saved final/ loads in transformers' AutoModel with the logits
ours gives (the same class name, the same numbers)."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest
import torch
from tokenizers import normalizers, pre_tokenizers

from bertcore.cli.finetune import main
from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.distilbert import DistilBertConfig, DistilBertForMaskedLM
from bertcore.models.electra import ElectraConfig, ElectraForPreTraining
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
from bertcore.tasks.demos.registry import demo_task
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer

SEQ_LEN = 32
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48)


def pretrained_model(family: str, vocab_size: int):
    """A tiny random pretraining model of the family, over the tokenizer's vocabulary ([PAD] = 0)."""
    if family == "roberta":
        return RobertaForMaskedLM(RobertaConfig(vocab_size=vocab_size, pad_token_id=0,
                                                max_position_embeddings=SEQ_LEN + 2, **SIZES))
    if family == "distilbert":
        return DistilBertForMaskedLM(DistilBertConfig(vocab_size=vocab_size, max_position_embeddings=SEQ_LEN, **SIZES))
    if family == "electra":
        return ElectraForPreTraining(ElectraConfig(vocab_size=vocab_size, embedding_size=24,
                                                   max_position_embeddings=SEQ_LEN, **SIZES))
    if family == "albert":
        return AlbertForPreTraining(AlbertConfig(vocab_size=vocab_size, embedding_size=24, hidden_act="gelu",
                                                 max_position_embeddings=SEQ_LEN, **SIZES))
    return ModernBertForMaskedLM(ModernBertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=40,
        local_attention=8, max_position_embeddings=SEQ_LEN, pad_token_id=0, bos_token_id=2, cls_token_id=2,
        eos_token_id=3, sep_token_id=3))


@pytest.fixture(scope="module")
def mood_tokenizer() -> BertTokenizer:
    """A small WordPiece vocabulary of the mood demo's training sentences: the words seen twice or more, and every
    character alone and as "##x". Made here rather than by BertTokenizer.train, whose Rust trainer breaks ties in a
    hash order that differs in every process: with another vocabulary each run, DistilBERT's 80 steps learned the
    task in some processes and not in others."""
    with demo_task("mood").train.open(encoding="utf-8") as file:
        texts = [row["text"] for row in csv.DictReader(file)]
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = Counter(word for text in texts
                    for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    characters = sorted({character for word in words for character in word})
    whole_words = sorted(word for word, count in words.items() if count >= 2 and len(word) > 1)
    return BertTokenizer([*SPECIAL_TOKENS, *characters, *(f"##{c}" for c in characters), *whole_words])


# Tiny models are overhead-bound: one thread is faster and does not fight other processes.
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra", "albert", "modernbert"])
def test_fine_tuning_any_family_from_its_folder(family, mood_tokenizer, tmp_path, capsys, transformers):
    torch.manual_seed(0)
    source = save_pretrained(pretrained_model(family, mood_tokenizer.vocab_size), mood_tokenizer, tmp_path / "base")
    out = tmp_path / "run"
    assert main(["--demo", "mood", "--init-from", str(source), "--out", str(out), "--steps", "80",
                 "--eval-every", "80", "--batch-size", "32", "--seq-len", str(SEQ_LEN), "--lr", "5e-3",
                 "--num-threads", "1", "--no-progress"]) == 0
    model, tokenizer = load_pretrained(out / "final")
    name = type(model).__name__
    assert name.endswith("ForSequenceClassification") and model.config.architectures == (name,)
    assert f"new {name} head for" in capsys.readouterr().err

    losses = [record["loss"] for record in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
              if record["kind"] == "step"]
    assert len(losses) == 80
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 0.02  # it learned something of the task

    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
        out / "final", attn_implementation="eager").eval()
    assert type(theirs).__name__ == name and theirs.config.id2label == dict(model.config.id2label)
    encoding = tokenizer.encode("What say you to this", max_length=SEQ_LEN)
    input_ids = torch.tensor([encoding.input_ids])
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids).logits, theirs(input_ids).logits, rtol=0, atol=1e-4)


@pytest.mark.slow  # learns a WordPiece vocabulary from the demo first
def test_a_family_checkpoint_with_this_task_head_is_trained_further(mood_tokenizer, tmp_path):
    """An ELECTRA already fine-tuned on these labels keeps its head; RoBERTa's usable positions bound seq_len."""
    from bertcore.models.electra import ElectraForSequenceClassification
    from bertcore.training.finetuning import Finetuner
    from bertcore.training.settings import FinetuneConfig

    config = pretrained_model("electra", mood_tokenizer.vocab_size).config.replace(
        id2label={0: "exclamation", 1: "question", 2: "statement"}, architectures=())
    torch.manual_seed(1)
    folder = save_pretrained(ElectraForSequenceClassification(config), mood_tokenizer, tmp_path / "tuned")
    settings = FinetuneConfig.for_demo("mood", init_from=str(folder), out_dir=str(tmp_path / "run"), steps=2,
                                       batch_size=4, seq_len=SEQ_LEN, length_buckets=1, num_threads=1)
    with Finetuner(settings) as finetuner:
        assert finetuner.task.init.continued_head and "already has a ElectraForSequenceClassification head" \
            in finetuner.init_note
        assert isinstance(finetuner.task.model, ElectraForSequenceClassification)

    roberta = pretrained_model("roberta", mood_tokenizer.vocab_size)
    usable = roberta.config.max_length  # the position table less the rows at and below the padding index
    assert usable < roberta.config.max_position_embeddings
    folder = save_pretrained(roberta, mood_tokenizer, tmp_path / "roberta")
    too_long = settings.replace(init_from=str(folder), seq_len=usable + 1, out_dir=str(tmp_path / "run2"))
    with pytest.raises(ValueError, match=rf"seq_len is {usable + 1} but .* has only {usable} positions"):
        Finetuner(too_long)
