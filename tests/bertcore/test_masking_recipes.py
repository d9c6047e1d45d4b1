"""The three masking recipes over many draws of real text: the budget, the 80/10/10 split, whole words never split
(WordPiece "##" and byte-level BPE "Ġ"), SpanBERT's span lengths, specials untouched, and a seed that reproduces.

Tolerances are five standard deviations of the count under the recipe's own randomness: a binomial over tokens
where each token is decided alone, over units (words, spans) where a unit is decided as a whole; a token-level
share under per-unit decisions has variance p(1-p) Σ size², not p(1-p) n.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from bertcore.data.batches import PretrainingData
from bertcore.data.corpus import read_corpus
from bertcore.data.masking import (
    MaskDecision,
    continuation_mask,
    continues_word,
    infer_piece_style,
    mask_like_bert,
    mask_tokens,
    span_length_distribution,
    span_lengths_from_uniform,
)
from bertcore.data.masking_recipes import check_recipe
from bertcore.files.resources import default_corpus_path, default_vocab_path
from bertcore.models.bert import IGNORE_INDEX
from bertcore.tokenization.pieces import BYTE_LEVEL_SPACE, SENTENCEPIECE_SPACE
from bertcore.tokenization.wordpiece import BertTokenizer

NUM_SIGMAS = 5
RECIPES = ("token", "whole-word", "span")
SPAN_BERT_MEAN_WORDS = 3.8  # SpanBERT, section 3.1: "a mean span length of 3.8 words"


@pytest.fixture(scope="module")
def lines() -> list[str]:
    text = default_corpus_path().read_text(encoding="utf-8")
    return [line for line in text.splitlines() if len(line.split()) >= 4][:6000]


@pytest.fixture(scope="module")
def wordpiece() -> BertTokenizer:
    return BertTokenizer.from_vocab_file(default_vocab_path())


class ByteLevelBpe:
    """A RoBERTa-like byte-level BPE vocabulary (trained here, "Ġ" word starts), with the few names masking uses;
    `words` gives the pre-tokenizer's word of each token, an oracle that knows nothing of "Ġ"."""

    specials = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")

    def __init__(self, texts: list[str]):
        self.tokenizer = Tokenizer(models.BPE())
        self.tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        self.tokenizer.decoder = decoders.ByteLevel()
        self.tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=600, special_tokens=list(self.specials), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.cls_token_id, self.pad_token_id, self.sep_token_id, _, self.mask_token_id = (
            self.tokenizer.token_to_id(token) for token in self.specials)
        self.special_token_ids = frozenset(self.tokenizer.token_to_id(token) for token in self.specials)

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self.tokenizer.id_to_token(int(i)) for i in ids]

    def encode(self, text: str) -> tuple[list[int], list[int]]:
        encoding = self.tokenizer.encode(text)
        return encoding.ids, encoding.word_ids


@pytest.fixture(scope="module")
def bpe(lines) -> ByteLevelBpe:
    return ByteLevelBpe(lines[:3000])


def wordpiece_rows(tokenizer: BertTokenizer, lines: list[str], num_rows: int, sentences_per_side: int = 2):
    """[CLS] A [SEP] B [SEP] [PAD].. rows of consecutive corpus lines: (input_ids, special_tokens_mask) (B, T)."""
    rows = []
    for row in range(num_rows):
        first = row * 2 * sentences_per_side % (len(lines) - 2 * sentences_per_side)
        text_a = " ".join(lines[first : first + sentences_per_side])
        text_b = " ".join(lines[first + sentences_per_side : first + 2 * sentences_per_side])
        rows.append(tokenizer.encode(text_a, text_b, max_length=128))
    seq_len = max(len(encoding) for encoding in rows)
    input_ids = torch.full((num_rows, seq_len), tokenizer.pad_token_id)
    special = torch.ones(num_rows, seq_len, dtype=torch.bool)
    for row, encoding in enumerate(rows):
        input_ids[row, : len(encoding)] = torch.tensor(encoding.input_ids)
        special[row, : len(encoding)] = torch.tensor(encoding.special_tokens_mask, dtype=torch.bool)
    return input_ids, special


def run(tokenizer, input_ids, special, recipe, seed=0, mlm_probability=0.15):
    return mask_tokens(
        input_ids, special, mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size,
        special_token_ids=tokenizer.special_token_ids, generator=torch.Generator().manual_seed(seed),
        mlm_probability=mlm_probability, recipe=recipe,
        word_continues=None if recipe == "token" else continues_word(tokenizer),
    )


def wordpiece_words(tokens: list[str], special: list[bool]) -> list[list[int]]:
    """Positions of each word: a token and the "##" pieces after it (the oracle: read off the strings)."""
    words: list[list[int]] = []
    for position, (token, is_special) in enumerate(zip(tokens, special, strict=True)):
        if is_special:
            continue
        if token.startswith("##") and words and words[-1][-1] == position - 1:
            words[-1].append(position)
        else:
            words.append([position])
    return words


def units_of(batch, row: int) -> dict[int, list[int]]:
    units: dict[int, list[int]] = {}
    for position, unit in enumerate(batch.units[row].tolist()):
        if unit:
            units.setdefault(unit, []).append(position)
    return units


def assert_within(count: float, expected: float, variance: float, what: str):
    sigma = math.sqrt(variance)
    assert abs(count - expected) <= NUM_SIGMAS * sigma, f"{what}: {count} is {expected} ± {NUM_SIGMAS}×{sigma:.1f}?"


@pytest.fixture(scope="module")
def wordpiece_draws(wordpiece, lines):
    """600 rows of about 70 tokens, each recipe drawn with three seeds: (input_ids, special, {recipe: [batches]})."""
    input_ids, special = wordpiece_rows(wordpiece, lines, 600)
    return input_ids, special, {recipe: [run(wordpiece, input_ids, special, recipe, seed) for seed in range(3)]
                                for recipe in RECIPES}


# ---- the budget -----------------------------------------------------------------------------------------------


@pytest.mark.slow  # many draws of 600 rows: the statistics
@pytest.mark.parametrize("recipe", RECIPES)
def test_rate_is_the_mlm_probability(wordpiece, wordpiece_draws, recipe):
    input_ids, special, draws = wordpiece_draws
    candidates = ~special
    longest_words = torch.tensor([
        max(len(word) for word in wordpiece_words(wordpiece.convert_ids_to_tokens(row), special_row))
        for row, special_row in zip(input_ids.tolist(), special.tolist(), strict=True)])
    budgets = torch.round(candidates.sum(1).double() * 0.15).long().clamp(min=1)
    for batch in draws[recipe]:
        picked = batch.labels != IGNORE_INDEX
        num_picked, num_candidates = int(picked.sum()), int(candidates.sum())
        assert_within(num_picked, 0.15 * num_candidates, num_candidates * 0.15 * 0.85, f"{recipe} picks")
        assert not picked[special].any()
        per_row = picked.sum(1)
        if recipe == "token":
            assert torch.equal(per_row, budgets)
            continue
        # whole units settle the budget by chance: a row is off it by less than its longest word (a variance of at
        # most that squared), and on it in expectation
        assert ((per_row - budgets).abs() < longest_words).all()
        assert_within(int(per_row.sum()), int(budgets.sum()), float((longest_words**2).sum()),
                      f"{recipe}: the budget in expectation")


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("mlm_probability", [0.05, 0.3])
def test_rate_follows_other_probabilities(wordpiece, lines, recipe, mlm_probability):
    input_ids, special = wordpiece_rows(wordpiece, lines, 100)
    batch = run(wordpiece, input_ids, special, recipe, mlm_probability=mlm_probability)
    num_candidates = int((~special).sum())
    num_picked = int((batch.labels != IGNORE_INDEX).sum())
    assert_within(num_picked, mlm_probability * num_candidates,
                  num_candidates * mlm_probability * (1 - mlm_probability), f"{recipe} at {mlm_probability}")


# ---- what becomes of the picked tokens ------------------------------------------------------------------------


@pytest.mark.slow  # many draws of 600 rows: the statistics
@pytest.mark.parametrize("recipe", RECIPES)
def test_80_10_10_per_unit_and_per_token(wordpiece, wordpiece_draws, recipe):
    input_ids, _, draws = wordpiece_draws
    unit_decisions, unit_sizes = [], []
    for batch in draws[recipe]:
        for row in range(len(input_ids)):
            for positions in units_of(batch, row).values():
                decisions = {int(batch.decisions[row, p]) for p in positions}
                assert len(decisions) == 1, f"{recipe}: one unit got {decisions}"  # a unit is decided as a whole
                unit_decisions.append(decisions.pop())
                unit_sizes.append(len(positions))
        picked = batch.decisions != MaskDecision.NONE
        is_mask, is_random = batch.decisions == MaskDecision.MASK, batch.decisions == MaskDecision.RANDOM
        is_keep = batch.decisions == MaskDecision.KEEP
        assert (batch.input_ids[is_mask] == wordpiece.mask_token_id).all()
        assert (batch.input_ids[is_keep] == input_ids[is_keep]).all()
        assert (batch.input_ids[~picked] == input_ids[~picked]).all()
        assert not torch.isin(batch.input_ids[is_random], torch.tensor(sorted(wordpiece.special_token_ids))).any()
        assert (batch.labels[picked] == input_ids[picked]).all()
    unit_decisions, unit_sizes = np.array(unit_decisions), np.array(unit_sizes)
    num_tokens, squares = unit_sizes.sum(), (unit_sizes.astype(float) ** 2).sum()
    for decision, share in ((MaskDecision.MASK, 0.8), (MaskDecision.RANDOM, 0.1), (MaskDecision.KEEP, 0.1)):
        is_decision = unit_decisions == decision
        assert_within(is_decision.sum(), share * len(unit_decisions), len(unit_decisions) * share * (1 - share),
                      f"{recipe} units → {decision.name}")
        assert_within(unit_sizes[is_decision].sum(), share * num_tokens, squares * share * (1 - share),
                      f"{recipe} tokens → {decision.name}")


# ---- whole words ----------------------------------------------------------------------------------------------


@pytest.mark.slow  # many draws of 600 rows: the statistics
@pytest.mark.parametrize("recipe", ["whole-word", "span"])
def test_long_words_are_picked_nearly_as_often_as_short_ones(wordpiece, wordpiece_draws, recipe):
    """Passing over words that would overrun the budget (Google's whole-word code) picks the tokens of words of two
    or more pieces at ~0.74 of the rate of one-piece words here; whole-word masking keeps it at ~1.0 (words starting
    before a threshold), SpanBERT spans at ~0.9 (the word crossing the budget taken by chance)."""
    input_ids, special, draws = wordpiece_draws
    in_long_word = torch.zeros_like(special)
    for row in range(len(input_ids)):
        for word in wordpiece_words(wordpiece.convert_ids_to_tokens(input_ids[row].tolist()), special[row].tolist()):
            if len(word) > 1:
                in_long_word[row, word] = True
    in_short_word = ~special & ~in_long_word
    long_rate = np.mean([float((b.labels != IGNORE_INDEX)[in_long_word].float().mean()) for b in draws[recipe]])
    short_rate = np.mean([float((b.labels != IGNORE_INDEX)[in_short_word].float().mean()) for b in draws[recipe]])
    low, high = (0.95, 1.1) if recipe == "whole-word" else (0.85, 1.05)
    assert low <= long_rate / short_rate <= high, f"{recipe}: long words {long_rate:.3f}, one-piece {short_rate:.3f}"


@pytest.mark.slow  # many draws of 600 rows: the statistics
@pytest.mark.parametrize("recipe", ["whole-word", "span"])
def test_wordpiece_words_are_never_split(wordpiece, wordpiece_draws, recipe):
    input_ids, special, draws = wordpiece_draws
    multi_piece_words_picked = 0
    for batch in draws[recipe]:
        for row in range(len(input_ids)):
            tokens = wordpiece.convert_ids_to_tokens(input_ids[row].tolist())
            picked = (batch.decisions[row] != MaskDecision.NONE).tolist()
            units = batch.units[row].tolist()
            for word in wordpiece_words(tokens, special[row].tolist()):
                assert len({picked[p] for p in word}) == 1, f"{[tokens[p] for p in word]} split"
                assert len({units[p] for p in word}) == 1  # and in one unit, so decided alike
                multi_piece_words_picked += picked[word[0]] and len(word) > 1
    assert multi_piece_words_picked > 100  # the test saw words it could have split


@pytest.mark.parametrize("recipe", ["whole-word", "span"])
def test_byte_level_bpe_words_are_never_split(bpe, lines, recipe):
    rows = [bpe.encode(" ".join(lines[i : i + 3])) for i in range(0, 1500, 3)]
    seq_len = 2 + max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), seq_len), bpe.pad_token_id)
    special = torch.ones(len(rows), seq_len, dtype=torch.bool)
    for row, (ids, _) in enumerate(rows):
        input_ids[row, : len(ids) + 2] = torch.tensor([bpe.cls_token_id, *ids, bpe.sep_token_id])
        special[row, 1 : len(ids) + 1] = False
    batch = run(bpe, input_ids, special, recipe, seed=5)
    multi_piece_words_picked = 0
    for row, (_, word_ids) in enumerate(rows):
        picked = (batch.decisions[row, 1 : len(word_ids) + 1] != MaskDecision.NONE).tolist()
        units = batch.units[row, 1 : len(word_ids) + 1].tolist()
        for word in set(word_ids):
            positions = [i for i, w in enumerate(word_ids) if w == word]
            assert len({picked[p] for p in positions}) == 1 and len({units[p] for p in positions}) == 1
            multi_piece_words_picked += picked[positions[0]] and len(positions) > 1
    assert multi_piece_words_picked > 50
    num_candidates = int((~special).sum())
    assert_within(int(batch.labels.ne(IGNORE_INDEX).sum()), 0.15 * num_candidates, num_candidates * 0.15 * 0.85,
                  f"{recipe} picks over BPE")


def test_whole_words_are_those_starting_before_the_threshold(wordpiece, lines):
    """The vectorised pick against the rule written out row by row: words laid end to end in priority order, picked
    while they start before budget - Σ L² / 2 Σ L - 1/2 + u (at least one), with the generator's draws in order."""
    input_ids, special = wordpiece_rows(wordpiece, lines, 40, sentences_per_side=1)
    batch = run(wordpiece, input_ids, special, "whole-word", seed=6)
    generator = torch.Generator().manual_seed(6)
    priority = torch.rand(input_ids.shape, generator=generator)
    torch.rand(input_ids.shape, generator=generator)  # the 80/10/10 draw
    excluded = wordpiece.special_token_ids | {wordpiece.mask_token_id}
    torch.randint(wordpiece.vocab_size - len(excluded), input_ids.shape, generator=generator)  # replacements
    threshold_draw = torch.rand(len(input_ids), generator=generator)
    for row in range(len(input_ids)):
        tokens = wordpiece.convert_ids_to_tokens(input_ids[row].tolist())
        words = sorted(wordpiece_words(tokens, special[row].tolist()), key=lambda word: float(priority[row, word[0]]))
        lengths = [len(word) for word in words]
        budget = max(1, round(0.15 * sum(lengths)))
        threshold = budget - sum(n * n for n in lengths) / (2 * sum(lengths)) - 0.5 + float(threshold_draw[row])
        expected, start = [], 0
        for word, length in zip(words, lengths, strict=True):
            if start < threshold or not expected:
                expected.append(word)
            start += length
        assert units_of(batch, row) == {number: word for number, word in enumerate(expected, start=1)}


def test_piece_styles_from_the_vocabulary(wordpiece, bpe):
    assert infer_piece_style(wordpiece.vocab) == "wordpiece"
    assert infer_piece_style(bpe.convert_ids_to_tokens(range(bpe.vocab_size))) == "byte_level"
    sentencepiece = ["<pad>", "[CLS]", f"{SENTENCEPIECE_SPACE}the", "s", f"{SENTENCEPIECE_SPACE}king", "."]
    assert infer_piece_style(sentencepiece) == "sentencepiece"
    assert continuation_mask(sentencepiece).tolist() == [True, True, False, True, False, True]
    assert continuation_mask(["[PAD]", "the", "##s", "##", "king"]).tolist() == [False, False, True, False, False]
    assert continuation_mask([f"{BYTE_LEVEL_SPACE}the", "s", "<s>"]).tolist() == [False, True, True]
    assert infer_piece_style(["a", "b", "c"]) == "plain" and not continuation_mask(["a", "b"]).any()
    # the tokenizer's own style wins over counting: a byte-level vocabulary that happens to hold "##" pieces
    assert continuation_mask(["##", "##ab", f"{BYTE_LEVEL_SPACE}x", "y"], "byte_level").tolist() == [
        True, True, False, True]


def test_a_pretrained_byte_level_tokenizer_masks_whole_words(tmp_path, bpe, lines):
    """A RoBERTa-like folder read as the app reads it (tokenization.pretrained): its piece style decides."""
    from bertcore.tokenization.pretrained import PretrainedTokenizer

    bpe.tokenizer.save(str(tmp_path / "tokenizer.json"))
    tokenizer = PretrainedTokenizer.from_folder(tmp_path)
    assert tokenizer.piece_style == "byte_level"
    continues = continues_word(tokenizer)
    assert not continues[tokenizer.token_to_id(f"{BYTE_LEVEL_SPACE}the")]
    encoding = tokenizer.encode(lines[0], lines[1])
    for seed in range(10):
        masking = mask_like_bert(encoding, tokenizer, seed=seed, recipe="whole-word")
        assert masking.positions and all(not encoding.special_tokens_mask[p] for p in masking.positions)
        for position in masking.positions:  # a picked piece's word is picked whole
            if position + 1 < len(encoding) and not encoding.special_tokens_mask[position + 1] \
                    and not encoding.tokens[position + 1].startswith(BYTE_LEVEL_SPACE):
                assert masking.units[position + 1] == masking.units[position]


def test_continuations_are_cached_per_tokenizer(wordpiece):
    assert continues_word(wordpiece) is continues_word(wordpiece)
    other = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "king", "##s"])
    assert continues_word(other).tolist() == [False] * 6 + [True]


def test_a_word_after_a_special_starts_a_word():
    # byte-level BPE's first word has no "Ġ"; a continuation-looking token after [SEP] must not join the word before
    input_ids = torch.tensor([[0, 5, 6, 1, 6, 6, 1]])  # <s> Ġa b </s> b b </s>
    special = torch.tensor([[1, 0, 0, 1, 0, 0, 1]], dtype=torch.bool)
    continues = torch.tensor([True, True, True, True, True, False, True])  # id 5 starts a word, 6 continues
    batch = mask_tokens(input_ids, special, mask_token_id=4, vocab_size=7, special_token_ids=(0, 1, 2, 3, 4),
                        generator=torch.Generator().manual_seed(0), mlm_probability=0.9, recipe="whole-word",
                        word_continues=continues)
    assert batch.units[0, 4] == batch.units[0, 5] != batch.units[0, 1] == batch.units[0, 2]


# ---- spans ----------------------------------------------------------------------------------------------------


def test_span_lengths_drawn_are_spanbert_s_distribution():
    rng = np.random.default_rng(0)
    lengths = span_lengths_from_uniform(rng.random(200_000))
    pmf = span_length_distribution()
    assert lengths.min() == 1 and lengths.max() == 10
    counts = np.bincount(lengths, minlength=11)[1:]
    for length, (count, p) in enumerate(zip(counts, pmf, strict=True), start=1):
        assert_within(count, p * len(lengths), len(lengths) * p * (1 - p), f"spans of {length} words")
    assert abs(float(pmf @ np.arange(1, 11)) - SPAN_BERT_MEAN_WORDS) < 0.005  # 3.797: the paper's 3.8
    assert abs(lengths.mean() - SPAN_BERT_MEAN_WORDS) < 0.03
    one_word = pmf[0]  # 0.224: p = 0.2 renormalised over 1..10
    assert span_lengths_from_uniform(np.array([0.0, one_word - 1e-9, one_word, 1 - 1e-12])).tolist() == [1, 1, 2, 10]


def test_spans_are_contiguous_whole_words_of_spanbert_s_length(wordpiece, lines):
    """On long single-segment rows the budget cuts only the last span of a row, so the spans seen have nearly the
    drawn length; runs into a word picked before shorten a few more."""
    rows = []
    for row in range(40):
        text = " ".join(lines[row * 60 : row * 60 + 60])
        ids = wordpiece.encode(text, max_length=2000).input_ids
        rows.append(ids[:1500])
    seq_len = max(len(ids) for ids in rows)
    input_ids = torch.full((len(rows), seq_len), wordpiece.pad_token_id)
    special = torch.ones(len(rows), seq_len, dtype=torch.bool)
    for row, ids in enumerate(rows):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        special[row, 1 : len(ids) - 1] = False
    span_words = []
    for seed in range(3):
        batch = run(wordpiece, input_ids, special, "span", seed=seed)
        for row in range(len(rows)):
            tokens = wordpiece.convert_ids_to_tokens(input_ids[row].tolist())
            word_of = {p: i for i, word in enumerate(wordpiece_words(tokens, special[row].tolist())) for p in word}
            for positions in units_of(batch, row).values():
                assert positions == list(range(positions[0], positions[-1] + 1))  # contiguous
                span_words.append(len({word_of[p] for p in positions}))
    span_words = np.array(span_words)
    assert span_words.max() <= 10
    print(f"{len(span_words)} spans, mean {span_words.mean():.3f} words")  # shown with -s
    # drawn mean 3.80; measured 3.6-3.7 (the cut last span of each row and runs into picked words)
    assert 3.45 <= span_words.mean() <= SPAN_BERT_MEAN_WORDS + 0.1
    shares = np.bincount(span_words, minlength=11)[1:] / len(span_words)
    assert shares[0] == pytest.approx(span_length_distribution()[0], abs=0.04)  # one-word spans, 20 %


# ---- reproducibility ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_seed_reproduces_the_draw(wordpiece, lines, recipe):
    input_ids, special = wordpiece_rows(wordpiece, lines, 20)
    first, again = run(wordpiece, input_ids, special, recipe, seed=9), run(wordpiece, input_ids, special, recipe, 9)
    for name in ("input_ids", "labels", "decisions", "units"):
        assert torch.equal(getattr(first, name), getattr(again, name))
    assert not torch.equal(first.labels, run(wordpiece, input_ids, special, recipe, seed=10).labels)


def test_the_token_recipe_draws_as_before(wordpiece, lines):
    """The token recipe is the default: its masks must not change, or runs recorded before would resume on other
    batches. Pinned by a digest of a draw made with the code before the recipes came."""
    input_ids, special = wordpiece_rows(wordpiece, lines, 8)
    batch = mask_tokens(input_ids, special, mask_token_id=wordpiece.mask_token_id, vocab_size=wordpiece.vocab_size,
                        special_token_ids=wordpiece.special_token_ids, generator=torch.Generator().manual_seed(3))
    digest = hashlib.sha256(batch.input_ids.numpy().tobytes() + batch.labels.numpy().tobytes()
                            + batch.decisions.numpy().tobytes()).hexdigest()[:16]
    assert digest == "0927b96d7c5bb06f"


@pytest.mark.parametrize("recipe", ["whole-word", "span"])
def test_the_batch_of_a_step_is_a_function_of_seed_rank_and_step(wordpiece, tmp_path, recipe):
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text(default_corpus_path().read_text(encoding="utf-8")[:60_000], encoding="utf-8")

    def data():
        return PretrainingData(read_corpus(corpus_file), wordpiece, seq_len=64, seed=4, length_buckets=3,
                               masking=recipe)

    first, second = data(), data()
    for step in (5, 1, 2):  # out of order, as a resumed run asks
        for rank in (0, 1):
            a, b = first.train_batch(step, 6, rank), second.train_batch(step, 6, rank)
            assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.labels, b.labels)
    assert not torch.equal(first.train_batch(1, 6).labels, first.train_batch(2, 6).labels)
    heldout = first.heldout_batches(2, 6)
    assert all(torch.equal(x.labels, y.labels) for x, y in zip(heldout, second.heldout_batches(2, 6), strict=True))


# ---- one encoding, as the Inspect tab shows it ----------------------------------------------------------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_mask_like_bert_with_a_recipe(wordpiece, recipe):
    encoding = wordpiece.encode("the unbelievably enormous kingdom of denmark perished, long live the king",
                                "his son shall take the crown tomorrow")
    masking = mask_like_bert(encoding, wordpiece, seed=2, recipe=recipe)
    assert masking.recipe == recipe and masking == mask_like_bert(encoding, wordpiece, seed=2, recipe=recipe)
    assert len(masking.units) == len(encoding) and masking.num_units == max(masking.units) >= 1
    assert [p for p, unit in enumerate(masking.units) if unit] == masking.positions
    for position in masking.positions:
        assert not encoding.special_tokens_mask[position]
        if masking.decisions[position] == MaskDecision.MASK:
            assert masking.masked_tokens[position] == "[MASK]"


def test_unknown_recipe_and_missing_words_are_named(wordpiece):
    encoding = wordpiece.encode("the king")
    with pytest.raises(ValueError, match="not one of token, whole-word, span"):
        mask_like_bert(encoding, wordpiece, seed=0, recipe="spans")
    with pytest.raises(ValueError, match=r"needs word_continues of shape \(8000,\).*continues_word"):
        mask_tokens(torch.tensor([2, 5, 3]), torch.tensor([1, 0, 1]), mask_token_id=4, vocab_size=8000,
                    recipe="span")


# ---- the run's configuration and bert-train -----------------------------------------------------------------


def test_the_training_config_checks_the_recipe():
    from bertcore.training.settings import TrainingConfig

    assert TrainingConfig().masking == "token"
    assert TrainingConfig(masking="span", mlm_probability=0.3).masking == "span"
    with pytest.raises(ValueError) as refused:
        TrainingConfig(masking="spans")
    with pytest.raises(ValueError) as checked:
        check_recipe("spans")
    assert str(refused.value) == str(checked.value)  # one message, from one place
    assert str(refused.value).startswith("masking recipe 'spans' is not one of token, whole-word, span")
    with pytest.raises(ValueError, match=r"mlm_probability must be in \(0, 1\), got 1.5; BERT uses 0.15"):
        TrainingConfig(mlm_probability=1.5)
    recorded_before_the_recipes = {key: value for key, value in TrainingConfig().to_dict().items() if key != "masking"}
    assert TrainingConfig.from_dict(recorded_before_the_recipes).masking == "token"  # resumes as it ran


def test_bert_train_takes_masking_and_mlm_probability(capsys):
    from bertcore.cli.train import build_parser, make_config

    config = make_config(build_parser().parse_args(["--masking", "whole-word", "--mlm-probability", "0.3"]))
    assert (config.masking, config.mlm_probability) == ("whole-word", 0.3)
    assert make_config(build_parser().parse_args([])).masking == "token"
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--masking", "words"])
    assert exit_info.value.code == 2 and "choose from 'token', 'whole-word', 'span'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(("recipe", "objective"), [("whole-word", "mlm+nsp"), ("span", "mlm")])
def test_a_run_resumes_on_the_same_masks(tmp_path, recipe, objective):
    """Stopped at step 3 and resumed, a whole-word or span run continues exactly as one that never stopped."""
    from bertcore.models.config import preset
    from bertcore.training.settings import TrainingConfig
    from tests.bertcore.resume_check import assert_resumes_exactly

    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text(default_corpus_path().read_text(encoding="utf-8")[:40_000], encoding="utf-8")
    sizes = preset("tiny", hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48,
                   vocab_size=BertTokenizer.from_vocab_file(default_vocab_path()).vocab_size)
    config = TrainingConfig(corpus=str(corpus_file), out_dir=str(tmp_path / "straight"),
                            vocab=str(default_vocab_path()), steps=6, batch_size=4, seq_len=32, lr=5e-3,
                            warmup_steps=2, eval_every=3, eval_batches=1, checkpoint_every=0, heldout_fraction=0.1,
                            seed=5, masking=recipe, objective=objective)
    interrupted = assert_resumes_exactly(config, sizes, stop_after=3)
    recorded = json.loads((interrupted / "run_config.json").read_text(encoding="utf-8"))
    assert json.dumps(recorded).count(f'"masking": "{recipe}"') == 1  # the run folder says how it was masked
