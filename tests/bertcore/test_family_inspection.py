"""What the Inspect tab shows of the other families' own heads and layers, as the inspection computes it:
ALBERT's sentence order (P in order, from its SOP head), ELECTRA's discriminator (P replaced per token, on the
masking's corrupted input; a discriminator trained here finds the random tokens) and ModernBERT's local layers
with their window. A BERT has none of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import inspect, inspect_encoding
from bertcore.data.masking import MaskDecision, Masking
from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
from bertcore.models.bert import BertForPreTraining
from bertcore.models.electra import ElectraConfig, ElectraForPreTraining
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from tests.tiny_configs import tiny_bert

SEEN = ("the cat dog sat ran on a mat far away and then came back home to sleep in sun all day").split()
UNSEEN = ("zebra quartz violin glacier pepper lantern ribbon walnut canyon orbit harbor meadow "
          "thimble cobalt saddle").split()  # never in a training sentence: replacements a discriminator can spot


def word_tokenizer() -> BertTokenizer:
    return BertTokenizer([*SPECIAL_TOKENS, ".", *SEEN, *UNSEEN], lowercase=True)


def trained_discriminator(tokenizer: BertTokenizer, steps: int = 40, **sizes) -> ElectraForPreTraining:
    """A tiny ELECTRA discriminator trained for a moment on replaced-token detection: sentences of SEEN words
    with ~15% of their tokens replaced by UNSEEN ones. Seeded; under a second on one CPU thread."""
    sizes = dict(dict(hidden_size=32, embedding_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=48, max_position_embeddings=64), **sizes)
    generator = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = ElectraForPreTraining(ElectraConfig(vocab_size=tokenizer.vocab_size, **sizes))
    seen = torch.tensor([tokenizer.token_to_id(word) for word in SEEN])
    unseen = torch.tensor([tokenizer.token_to_id(word) for word in UNSEEN])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        input_ids = seen[torch.randint(len(seen), (16, 24), generator=generator)]
        replaced = torch.rand(input_ids.shape, generator=generator) < 0.15
        input_ids = torch.where(replaced, unseen[torch.randint(len(unseen), input_ids.shape, generator=generator)],
                                input_ids)
        input_ids[:, 0], input_ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
        replaced[:, 0] = replaced[:, -1] = False
        loss = model(input_ids, labels=replaced.long()).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def random_token_masking(encoding, tokenizer: BertTokenizer, replacements: dict[int, str]) -> Masking:
    """The masking panel's random-token decisions at the given positions (position -> the token put there)."""
    decisions = [MaskDecision.NONE] * len(encoding)
    masked_ids = list(encoding.input_ids)
    for position, token in replacements.items():
        decisions[position] = MaskDecision.RANDOM
        masked_ids[position] = tokenizer.token_to_id(token)
    return Masking(decisions=decisions, original_ids=list(encoding.input_ids), masked_ids=masked_ids,
                   original_tokens=list(encoding.tokens), masked_tokens=tokenizer.convert_ids_to_tokens(masked_ids),
                   seed=None)


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return word_tokenizer()


# Tiny models are overhead-bound: one thread is faster and does not fight other processes.
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow  # a tiny discriminator trains for 40 steps: under a second idle, seconds on a busy machine
def test_electras_discriminator_row_finds_the_tokens_the_masking_replaced(tokenizer):
    model = trained_discriminator(tokenizer)
    encoding = tokenizer.encode("the cat sat on a mat and then ran far away", "the dog came back home to sleep")
    masking = random_token_masking(encoding, tokenizer, {2: "zebra", 6: "violin", 15: "orbit"})
    inspection = inspect_encoding(model, tokenizer, encoding, masking=masking)
    probabilities = inspection.replaced_probabilities
    assert probabilities.shape == (len(encoding),) and probabilities.dtype == np.float32
    with torch.no_grad():
        want = model(torch.tensor([masking.masked_ids]), torch.tensor([encoding.segment_ids])).logits.sigmoid()[0]
    np.testing.assert_allclose(probabilities, want.numpy(), rtol=0, atol=1e-6)
    replaced = np.array([d == MaskDecision.RANDOM for d in masking.decisions])
    assert probabilities[replaced].min() > 0.5 > probabilities[~replaced].max()  # it finds them, and only them
    assert inspection.in_order_probability is None and inspection.local_layers == ()


def test_an_electra_without_its_discriminator_head_shows_no_row(tokenizer):
    model = ElectraForPreTraining(ElectraConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, embedding_size=16,
                                                num_hidden_layers=1, num_attention_heads=2, intermediate_size=48))
    model.has_pretraining_heads = False  # as loaded from a bare ElectraModel
    assert inspect(model, tokenizer, "the cat sat").replaced_probabilities is None


def test_albert_shows_its_sentence_order_probability(tokenizer):
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig(vocab_size=tokenizer.vocab_size, hidden_size=30, embedding_size=14,
                                              num_hidden_layers=2, num_attention_heads=5, intermediate_size=37,
                                              max_position_embeddings=40)).eval()
    inspection = inspect(model, tokenizer, "the cat sat on a mat", "then it ran away")
    encoding = inspection.encoding
    with torch.no_grad():
        sop_logits = model(torch.tensor([encoding.input_ids]), torch.tensor([encoding.segment_ids])).sop_logits
    assert inspection.in_order_probability == pytest.approx(float(sop_logits.softmax(-1)[0, 0]), abs=1e-6)
    assert inspection.is_next_probability is None and not inspection.has_nsp_head  # SOP is not NSP
    assert inspection.predictions == [] and inspection.replaced_probabilities is None


def test_modernbert_says_which_layers_are_local_and_their_window(tokenizer):
    config = ModernBertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=40,
                              num_hidden_layers=4, num_attention_heads=2, local_attention=6,
                              global_attn_every_n_layers=3, max_position_embeddings=64, pad_token_id=0,
                              bos_token_id=2, cls_token_id=2, eos_token_id=3, sep_token_id=3)
    torch.manual_seed(0)
    inspection = inspect(ModernBertForMaskedLM(config), tokenizer, "the cat sat on a mat and then ran far away")
    assert inspection.local_layers == (1, 2) and inspection.sliding_window == 3
    distance = np.abs(np.subtract.outer(np.arange(inspection.attentions.shape[-1]),
                                        np.arange(inspection.attentions.shape[-1])))
    for layer in inspection.local_layers:  # nothing outside the window on a local layer
        assert inspection.attentions[layer][:, distance > 3].max() == 0
    assert inspection.attentions[0][:, distance > 3].max() > 0  # a global one sees everything


def test_a_bert_has_none_of_the_family_views(tokenizer):
    torch.manual_seed(0)
    inspection = inspect(BertForPreTraining(tiny_bert(tokenizer.vocab_size)), tokenizer, "the cat", "sat on a mat")
    assert inspection.in_order_probability is None and inspection.replaced_probabilities is None
    assert inspection.local_layers == () and inspection.sliding_window is None


def test_a_long_input_is_cut_to_robertas_usable_positions(tokenizer):
    """RoBERTa's table holds max_position_embeddings rows, but positions start after the padding index: an input
    cut to the table's size would be refused by the model."""
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM

    config = RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                           num_attention_heads=3, intermediate_size=40, max_position_embeddings=20, pad_token_id=0)
    torch.manual_seed(0)
    inspection = inspect(RobertaForMaskedLM(config), tokenizer, " ".join(SEEN), " ".join(SEEN))
    assert len(inspection.encoding) == config.max_length == 19
