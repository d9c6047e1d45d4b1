"""BERT masking: exact pick counts, the 80/10/10 split within binomial bounds, specials untouched, seeds."""

import math

import pytest
import torch

from bertcore.data.masking import MaskDecision, Masking, mask_exactly, mask_like_bert, mask_tokens
from bertcore.files.resources import default_vocab_path
from bertcore.models.bert import IGNORE_INDEX
from bertcore.tokenization.wordpiece import BertTokenizer

VOCAB_SIZE = 99
SPECIAL_IDS = (0, 1, 2, 3, 4)  # [PAD] [UNK] [CLS] [SEP] [MASK]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = SPECIAL_IDS
NUM_SIGMAS = 5


def expected_picks(num_candidates: int, p: float = 0.15) -> int:
    return 0 if num_candidates == 0 else max(1, round(p * num_candidates))


def make_batch(lengths, seq_len, seed=0):
    """Rows [CLS] w.. [SEP] [PAD]..; lengths count the real positions including [CLS]/[SEP]."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, VOCAB_SIZE, (len(lengths), seq_len), generator=generator)  # (B, T)
    special = torch.zeros(len(lengths), seq_len, dtype=torch.bool)
    for row, length in enumerate(lengths):
        input_ids[row, 0], input_ids[row, length - 1] = CLS_ID, SEP_ID
        input_ids[row, length:] = PAD_ID
        special[row, 0] = special[row, length - 1 :] = True
    return input_ids, special


def run(input_ids, special, seed=0, **kwargs):
    return mask_tokens(
        input_ids,
        special,
        mask_token_id=MASK_ID,
        vocab_size=VOCAB_SIZE,
        special_token_ids=SPECIAL_IDS,
        generator=torch.Generator().manual_seed(seed),
        **kwargs,
    )


def assert_binomial(successes: int, trials: int, p: float):
    sigma = math.sqrt(trials * p * (1 - p))
    assert abs(successes - trials * p) <= NUM_SIGMAS * sigma, f"{successes}/{trials} is far from p={p}"


@pytest.fixture(scope="module")
def big_batch():
    # 3000 rows of very different lengths (3..96 real positions, the rest padding): ~18k picked positions
    lengths = torch.randint(3, 97, (3000,), generator=torch.Generator().manual_seed(1)).tolist()
    input_ids, special = make_batch(lengths, 96)
    return lengths, input_ids, special, run(input_ids, special, seed=7)


@pytest.mark.slow
def test_exact_pick_count_per_row(big_batch):
    lengths, _, _, batch = big_batch
    picked_per_row = (batch.labels != IGNORE_INDEX).sum(dim=1).tolist()
    assert picked_per_row == [expected_picks(length - 2) for length in lengths]
    num_candidates = sum(length - 2 for length in lengths)
    assert abs(sum(picked_per_row) / num_candidates - 0.15) < 0.01  # so the overall rate is 15%


@pytest.mark.parametrize(
    ("num_candidates", "num_picked"), [(0, 0), (1, 1), (3, 1), (6, 1), (10, 2), (30, 4), (100, 15)]
)
def test_pick_count_rounds_like_python(num_candidates, num_picked):
    input_ids, special = make_batch([num_candidates + 2], num_candidates + 5)
    batch = run(input_ids, special)
    assert int((batch.labels != IGNORE_INDEX).sum()) == num_picked == expected_picks(num_candidates)


@pytest.mark.slow
def test_80_10_10_split(big_batch):
    _, _, _, batch = big_batch
    decisions = batch.decisions[batch.labels != IGNORE_INDEX]
    num_picked = len(decisions)
    assert num_picked > 15000
    assert_binomial(int((decisions == MaskDecision.MASK).sum()), num_picked, 0.8)
    assert_binomial(int((decisions == MaskDecision.RANDOM).sum()), num_picked, 0.1)
    assert_binomial(int((decisions == MaskDecision.KEEP).sum()), num_picked, 0.1)
    assert not (decisions == MaskDecision.NONE).any()


def test_decisions_agree_with_ids_and_labels(big_batch):
    _, input_ids, _, batch = big_batch
    picked = batch.labels != IGNORE_INDEX
    assert torch.equal(batch.labels[picked], input_ids[picked])
    assert torch.equal(picked, batch.decisions != MaskDecision.NONE)
    assert batch.decisions.dtype == torch.int8
    is_mask = batch.decisions == MaskDecision.MASK
    is_random = batch.decisions == MaskDecision.RANDOM
    assert (batch.input_ids[is_mask] == MASK_ID).all()
    unchanged = (batch.decisions == MaskDecision.KEEP) | (batch.decisions == MaskDecision.NONE)
    assert torch.equal(batch.input_ids[unchanged], input_ids[unchanged])
    random_ids = batch.input_ids[is_random]
    assert ((random_ids >= 5) & (random_ids < VOCAB_SIZE)).all()  # never a special id


@pytest.mark.slow
def test_random_replacements_are_uniform_over_non_special_ids():
    input_ids, special = make_batch([66] * 2000, 66)
    batch = run(input_ids, special, mlm_probability=1.0, mask_fraction=0.0, random_fraction=1.0)
    assert (batch.decisions[~special] == MaskDecision.RANDOM).all()
    counts = torch.bincount(batch.input_ids[~special], minlength=VOCAB_SIZE)
    assert counts[list(SPECIAL_IDS)].sum() == 0
    num_random = int(counts.sum())
    for count in counts[5:].tolist():
        assert_binomial(count, num_random, 1 / (VOCAB_SIZE - 5))


def test_random_replacements_avoid_each_calls_own_special_ids():
    """The ids a replacement may draw are made once per vocabulary and special set: a second set of specials over
    the same vocabulary gets its own (a cache keyed on the vocabulary alone would hand it the first's)."""
    input_ids, special = make_batch([66] * 300, 66)
    everything_random = dict(mlm_probability=1.0, mask_fraction=0.0, random_fraction=1.0)
    first = run(input_ids, special, **everything_random)
    more_specials = tuple(range(40))
    second = mask_tokens(input_ids, special, mask_token_id=MASK_ID, vocab_size=VOCAB_SIZE,
                         special_token_ids=more_specials, generator=torch.Generator().manual_seed(0),
                         **everything_random)
    drawn_first = first.input_ids[first.decisions == MaskDecision.RANDOM]
    drawn_second = second.input_ids[second.decisions == MaskDecision.RANDOM]
    assert len(drawn_second) > 1000 and int(drawn_first.min()) < 40  # the first call may draw ids 5..39
    assert int(drawn_second.min()) >= 40  # the second may not


@pytest.mark.slow
def test_positions_are_picked_uniformly():
    input_ids, special = make_batch([22] * 4000, 22)  # 20 candidates, 3 picked per row
    picked = run(input_ids, special).labels != IGNORE_INDEX
    per_position = picked.sum(dim=0)
    assert per_position[0] == 0 and per_position[21] == 0
    for count in per_position[1:21].tolist():
        assert_binomial(count, 4000, 3 / 20)


def test_specials_and_padding_never_picked(big_batch):
    _, input_ids, special, batch = big_batch
    assert (batch.labels[special] == IGNORE_INDEX).all()
    assert (batch.decisions[special] == MaskDecision.NONE).all()
    assert torch.equal(batch.input_ids[special], input_ids[special])


def test_special_ids_inside_the_text_are_never_picked():
    input_ids, special = make_batch([12] * 500, 12)
    input_ids[:, 3], input_ids[:, 7] = MASK_ID, UNK_ID  # typed [MASK] and an [UNK], not marked special
    batch = run(input_ids, special, mlm_probability=1.0)
    assert (batch.decisions[:, [3, 7]] == MaskDecision.NONE).all()
    assert (batch.labels != IGNORE_INDEX).sum(dim=1).tolist() == [8] * 500


@pytest.mark.slow
def test_same_seed_same_result_different_seed_differs(big_batch):
    _, input_ids, special, batch = big_batch
    again = run(input_ids, special, seed=7)
    for name in ("input_ids", "labels", "decisions"):
        assert torch.equal(getattr(batch, name), getattr(again, name))
    other = run(input_ids, special, seed=8)
    assert not torch.equal(batch.labels, other.labels)


def test_one_dimensional_input():
    input_ids, special = make_batch([20], 24)
    single = run(input_ids[0], special[0], seed=3)
    batched = run(input_ids, special, seed=3)
    assert single.input_ids.shape == single.labels.shape == single.decisions.shape == (24,)
    assert torch.equal(single.input_ids, batched.input_ids[0])
    assert torch.equal(single.decisions, batched.decisions[0])
    assert int((single.labels != IGNORE_INDEX).sum()) == expected_picks(18)


def test_int_special_tokens_mask_and_no_generator():
    input_ids, special = make_batch([10, 5], 10)
    batch = mask_tokens(input_ids, special.long(), mask_token_id=MASK_ID, vocab_size=VOCAB_SIZE)
    assert (batch.labels != IGNORE_INDEX).sum(dim=1).tolist() == [1, 1]
    assert (batch.labels[special] == IGNORE_INDEX).all()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_runs_on_cuda_with_a_cpu_generator():
    input_ids, special = make_batch([30, 10], 30)
    on_cpu = run(input_ids, special, seed=5)
    on_gpu = run(input_ids.cuda(), special.cuda(), seed=5)
    assert on_gpu.input_ids.is_cuda
    assert torch.equal(on_gpu.labels.cpu(), on_cpu.labels)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mlm_probability": 0.0}, "mlm_probability=0.0"),
        ({"mlm_probability": 1.5}, "mlm_probability=1.5"),
        ({"mask_fraction": 0.95, "random_fraction": 0.1}, "sum to at most 1"),
    ],
)
def test_bad_settings_raise(kwargs, needle):
    input_ids, special = make_batch([10], 10)
    with pytest.raises(ValueError, match=needle):
        run(input_ids, special, **kwargs)


def test_shape_mismatch_raises():
    input_ids, special = make_batch([10], 10)
    with pytest.raises(ValueError, match="must match"):
        run(input_ids, special[:, :5])
    with pytest.raises(ValueError, match=r"\(T,\) or \(B, T\)"):
        run(input_ids[None], special[None])


# ---- the per-example view -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_vocab_file(default_vocab_path())


@pytest.fixture(scope="module")
def encoding(tokenizer):
    return tokenizer.encode(
        "To be, or not to be: that is the question, whether tis nobler in the mind",
        "to suffer the slings and arrows of outrageous fortune",
        pad_to=40,
    )


def test_mask_like_bert(tokenizer, encoding):
    masking = mask_like_bert(encoding, tokenizer, seed=11)
    assert isinstance(masking, Masking) and masking.seed == 11
    num_candidates = len(encoding) - encoding.special_tokens_mask.count(1)
    assert len(masking.positions) == expected_picks(num_candidates)
    assert masking == mask_like_bert(encoding, tokenizer, seed=11)
    for position, decision in enumerate(masking.decisions):
        original, put_in = masking.original_tokens[position], masking.masked_tokens[position]
        assert original == encoding.tokens[position]
        assert put_in == tokenizer.id_to_token(masking.masked_ids[position])
        if decision == MaskDecision.NONE:
            assert put_in == original and masking.labels[position] == IGNORE_INDEX
        else:
            assert encoding.special_tokens_mask[position] == 0
            assert masking.labels[position] == encoding.input_ids[position]
        if decision == MaskDecision.MASK:
            assert put_in == "[MASK]"
        if decision == MaskDecision.RANDOM:
            assert masking.masked_ids[position] not in tokenizer.special_token_ids


def test_mask_like_bert_decisions_over_many_seeds(tokenizer, encoding):
    decisions = [d for seed in range(400) for d in mask_like_bert(encoding, tokenizer, seed).decisions if d]
    assert_binomial(decisions.count(MaskDecision.MASK), len(decisions), 0.8)


def test_mask_like_bert_draws_what_mask_tokens_draws_for_that_row(tokenizer):
    """mask_like_bert masks one sentence in plain Python around the same three draws (it runs on every keystroke in
    the window); it must pick, decide and replace exactly as mask_tokens does for a batch of that one row: any
    text, pair, padding, special ids typed in, probability and seed."""
    pairs = [("To be, or not to be: that is the question", "whether tis nobler in the mind to suffer"),
             ("the [MASK] of [UNK] is [SEP] here", None), ("a", None), ("[CLS] [SEP]", None),  # no candidates
             (" ".join(["outrageous fortune"] * 300), "the slings and arrows")]  # truncated to 512
    seen = set()
    for index, (text_a, text_b) in enumerate(pairs):
        for pad_to in (None, 512):
            encoding = tokenizer.encode(text_a, text_b, max_length=512, pad_to=pad_to)
            ids = torch.tensor(encoding.input_ids, dtype=torch.long)
            special = torch.tensor(encoding.special_tokens_mask, dtype=torch.bool)
            for seed in range(40 if index < 3 else 5):
                for probability in (0.15, 0.5, 1.0):
                    masking = mask_like_bert(encoding, tokenizer, seed, mlm_probability=probability)
                    batch = mask_tokens(ids, special, mask_token_id=tokenizer.mask_token_id,
                                        vocab_size=tokenizer.vocab_size, special_token_ids=tokenizer.special_token_ids,
                                        generator=torch.Generator().manual_seed(seed), mlm_probability=probability)
                    assert masking.masked_ids == batch.input_ids.tolist()
                    assert [int(d) for d in masking.decisions] == batch.decisions.tolist()
                    assert list(masking.units) == batch.units.tolist()
                    seen.update(int(d) for d in masking.decisions)
    assert seen == {0, 1, 2, 3}  # every decision was made somewhere


def test_mask_like_bert_checks_what_mask_tokens_checks(tokenizer, encoding):
    for probability in (0.0, 1.5):
        with pytest.raises(ValueError, match="mlm_probability"):
            mask_like_bert(encoding, tokenizer, seed=0, mlm_probability=probability)


def test_mask_exactly(tokenizer, encoding):
    masking = mask_exactly(encoding, tokenizer, [5, 2, 5])
    assert masking.positions == [2, 5] and masking.seed is None
    assert masking.masked_tokens[2] == masking.masked_tokens[5] == "[MASK]"
    assert masking.decisions[2] == MaskDecision.MASK
    assert masking.labels[2] == encoding.input_ids[2] and masking.labels[3] == IGNORE_INDEX
    assert mask_exactly(encoding, tokenizer, []).masked_ids == encoding.input_ids


@pytest.mark.parametrize(
    ("position", "needle"),
    [
        (0, r"position 0 is \[CLS\], a special token"),
        (-1, "position -1 is out of range; this encoding has 40 positions"),
        (40, "position 40 is out of range"),
        (39, r"position 39 is padding"),
    ],
)
def test_mask_exactly_rejects(tokenizer, encoding, position, needle):
    with pytest.raises(ValueError, match=needle):
        mask_exactly(encoding, tokenizer, [2, position])


def test_mask_exactly_rejects_sep(tokenizer, encoding):
    sep = encoding.tokens.index("[SEP]")
    with pytest.raises(ValueError, match=rf"position {sep} is \[SEP\]"):
        mask_exactly(encoding, tokenizer, [sep])
