"""The Qt-free numbers behind the attention views: slicing, renormalising, downsampling, rollout, export."""


import numpy as np
import pytest

import explorer.common.attention_math as attention_math
from explorer.common.export_data import labelled_tokens, read_matrix_csv, save_attention_npz, save_matrix_csv


def random_attention(shape, seed=0):
    rng = np.random.default_rng(seed)
    weights = rng.random(shape, dtype=np.float32)
    return weights / weights.sum(axis=-1, keepdims=True)


TOKENS = ["[CLS]", "the", "[MASK]", "sat", "[SEP]", "down", "[SEP]", "[PAD]"]


def test_special_tokens_come_from_the_encoding_mask_or_the_token_names():
    by_name = attention_math.special_token_mask(TOKENS)
    np.testing.assert_array_equal(by_name, [1, 0, 0, 0, 1, 0, 1, 1])  # [MASK] is not special
    explicit = attention_math.special_token_mask(TOKENS, [1, 0, 0, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(explicit, [1, 0, 0, 0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="one flag per token"):
        attention_math.special_token_mask(TOKENS, [1, 0])


def test_visible_positions_keep_the_original_numbering():
    special = attention_math.special_token_mask(TOKENS)
    np.testing.assert_array_equal(attention_math.visible_positions(special, False), np.arange(8))
    np.testing.assert_array_equal(attention_math.visible_positions(special, True), [1, 2, 3, 5])


def test_view_matrix_drops_rows_and_columns_then_renormalises():
    attention = random_attention((3, 8, 8))  # (H, T, T)
    positions = np.array([1, 2, 3, 5])
    sliced = attention_math.view_matrix(attention, positions)
    np.testing.assert_array_equal(sliced, attention[:, positions][:, :, positions])
    assert np.all(sliced.sum(axis=-1) < 1)
    renormalised = attention_math.view_matrix(attention, positions, renormalise=True)
    np.testing.assert_allclose(renormalised.sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(renormalised * sliced.sum(axis=-1, keepdims=True), sliced, rtol=1e-6)
    assert attention_math.view_matrix(attention, np.arange(8)) is attention  # nothing hidden: no copy


def test_renormalise_leaves_an_ablated_all_zero_head_at_zero():
    zeros = np.zeros((4, 4), np.float32)
    result = attention_math.renormalise_rows(zeros)
    assert np.all(result == 0) and np.all(np.isfinite(result))


def test_block_mean_averages_equal_and_uneven_blocks():
    matrix = np.arange(36, dtype=np.float32).reshape(6, 6)
    np.testing.assert_allclose(attention_math.block_mean(matrix, 3), matrix.reshape(3, 2, 3, 2).mean(axis=(1, 3)))
    edges = attention_math.bin_edges(7, 3)  # 7 tokens into 3 pixels
    assert edges[0] == 0 and edges[-1] == 7 and np.all(np.diff(edges) >= 2)
    uneven = np.random.default_rng(1).random((7, 7)).astype(np.float32)
    expected = [[uneven[edges[i]:edges[i + 1], edges[j]:edges[j + 1]].mean() for j in range(3)] for i in range(3)]
    np.testing.assert_allclose(attention_math.block_mean(uneven, 3), expected, rtol=1e-6)
    np.testing.assert_array_equal(attention_math.block_mean(uneven, 64), uneven)  # small: untouched


def test_overview_image_puts_head_h_of_layer_l_in_cell_l_h():
    attentions = random_attention((3, 4, 5, 5))  # (L, H, T, T), distinct sizes
    image, cell = attention_math.overview_image(attentions)
    assert cell == 5 and image.shape == (3 * 5, 4 * 5)
    for layer in range(3):
        for head in range(4):
            np.testing.assert_array_equal(image[layer * 5:(layer + 1) * 5, head * 5:(head + 1) * 5],
                                          attentions[layer, head])


def test_overview_image_downsamples_long_inputs_and_respects_hidden_tokens():
    attentions = random_attention((2, 3, 100, 100))
    positions = np.arange(1, 99)  # [CLS] and the last [SEP] hidden
    image, cell = attention_math.overview_image(attentions, positions, renormalise=True, max_cell=16)
    assert cell == 16 and image.shape == (2 * 16, 3 * 16)
    shown = attention_math.view_matrix(attentions[1, 2], positions, renormalise=True)
    np.testing.assert_allclose(image[16:, 32:], attention_math.block_mean(shown, 16), rtol=1e-5)


@pytest.mark.slow
def test_overview_at_512_tokens_and_144_heads_is_64_pixels_a_cell():
    attentions = np.full((12, 12, 512, 512), 1 / 512, np.float32)
    image, cell = attention_math.overview_image(attentions)
    assert cell == 64 and image.shape == (768, 768)
    np.testing.assert_allclose(image, 1 / 512, rtol=1e-5)


def test_rollout_matches_a_hand_computed_two_layer_example():
    identity, swap, first = np.eye(2), np.array([[0, 1], [1, 0]]), np.array([[1, 0], [1, 0]])
    attentions = np.array([[identity, swap], [first, first]], np.float32)  # (L=2, H=2, T=2, T=2)
    rollout = attention_math.compute_rollout(attentions)
    # layer 0: mean of I and swap = all 0.5; 0.5*A + 0.5*I = [[.75, .25], [.25, .75]]
    np.testing.assert_allclose(rollout[0], [[0.75, 0.25], [0.25, 0.75]], rtol=1e-6)
    # layer 1: 0.5*first + 0.5*I = [[1, 0], [.5, .5]], times layer 0
    np.testing.assert_allclose(rollout[1], [[0.75, 0.25], [0.5, 0.5]], rtol=1e-6)
    # switching the swap head off leaves layer 0 = identity, so the rollout is layer 1 alone
    masked = attention_math.compute_rollout(attentions, np.array([[1, 0], [1, 1]], np.float32))
    np.testing.assert_allclose(masked[0], np.eye(2), rtol=1e-6)
    np.testing.assert_allclose(masked[1], [[1.0, 0.0], [0.5, 0.5]], rtol=1e-6)


def test_colour_levels():
    values = np.linspace(0, 0.5, 1001, dtype=np.float32)
    assert attention_math.colour_levels(values, "fixed") == (0.0, 1.0)
    assert attention_math.colour_levels(values, "max") == (0.0, 0.5)
    low, high = attention_math.colour_levels(values, "p99")
    assert low == 0.0 and high == 0.5  # the 99th percentile, 0.495, rounded up to the next step
    assert attention_math.colour_levels(values * 0.356, "p99") == (0.0, 0.2)  # 0.176 -> 0.2
    assert attention_math.colour_levels(values * 0.0371, "p99") == (0.0, 0.02)  # 0.0184 -> 0.02
    assert attention_math.colour_levels(values * 0.303, "p99") == (0.0, 0.16)  # 0.150 -> 0.16
    assert attention_math.colour_levels(values, "sqrt") == (0.0, 0.5)
    assert attention_math.colour_levels(np.zeros(4), "max") == (0.0, 1.0)
    with pytest.raises(ValueError, match="choose one of"):
        attention_math.colour_levels(values, "loud")


def test_the_p99_scale_holds_still_while_the_percentile_moves_a_little():
    """Keystrokes move a head's 99th percentile a little; the colour bar (its ticks, its label) should not move with
    each of them: the top is the percentile rounded up to a step of ~25 %, never below it, at most 28 % above."""
    rng = np.random.default_rng(0)
    tops = set()
    for _ in range(20):
        values = rng.random(900).astype(np.float32) * rng.uniform(0.170, 0.178)
        top = attention_math.colour_levels(values, "p99")[1]
        assert np.percentile(values, 99) <= top <= 1.28 * np.percentile(values, 99)
        tops.add(top)
    assert tops == {0.2}
    for value in np.geomspace(1e-4, 1.0, 200):  # 1.25 -> 1.6 is the widest step: 28 %
        assert value <= attention_math.colour_levels(np.full(10, value, np.float32), "p99")[1] <= 1.28 * value


def test_colours_follow_the_scale_and_the_bar_names_it():
    lookup = np.stack([np.arange(256)] * 4, axis=1).astype(np.uint8)  # colour i is (i, i, i, i)
    values = np.array([0.0, 0.25, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(attention_math.colour_indices(values, (0.0, 1.0)), [0, 64, 255, 255])
    np.testing.assert_array_equal(attention_math.colour_indices(values, (0.0, 1.0), gamma=0.5), [0, 128, 255, 255])
    rgba = attention_math.to_rgba(values.reshape(2, 2), (0.0, 1.0), lookup)
    assert rgba.shape == (2, 2, 4) and rgba.dtype == np.uint8 and rgba[0, 1, 0] == 64
    assert attention_math.colour_gamma("sqrt") == 0.5 and attention_math.colour_gamma("p99") == 1.0
    assert "99th pct" in attention_math.describe_scale("p99", (0.0, 0.0183)) and "0.0183" in \
        attention_math.describe_scale("p99", (0.0, 0.0183))
    # it runs along the colour bar: longer, it was cut off at the top of a head of 512 tokens at 1400 × 900
    assert max(len(attention_math.describe_scale(scale, (0.0, 0.0183))) for scale in attention_math.COLOUR_SCALES) \
        <= 22
    assert attention_math.describe_scale("sqrt", (0.0, 1.0)).startswith("√")


def test_npz_export_round_trips_without_pickle(tmp_path):
    attentions = random_attention((2, 3, 4, 4))
    rollout = attention_math.compute_rollout(attentions)
    mask = np.array([[1, 0, 1], [1, 1, 1]], np.float32)
    tokens = ["[CLS]", "héllo", "##s", "[SEP]"]
    path = save_attention_npz(tmp_path / "attention.npz", attentions, tokens, rollout, mask)
    with np.load(path) as data:  # allow_pickle defaults to False
        np.testing.assert_array_equal(data["attentions"], attentions)
        assert data["tokens"].tolist() == tokens
        np.testing.assert_array_equal(data["rollout"], rollout)
        np.testing.assert_array_equal(data["head_mask"], mask)
    assert not list(tmp_path.glob("*.partial"))
    with pytest.raises(ValueError, match="number of tokens"):
        save_attention_npz(tmp_path / "bad.npz", attentions, tokens[:3])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_attention_npz(tmp_path / "missing" / "a.npz", attentions, tokens)


def test_csv_export_round_trips_with_token_labels(tmp_path):
    matrix = random_attention((4, 4))
    labels = labelled_tokens(["[CLS]", "a,b", '"q"', "[SEP]"], [0, 1, 2, 3])
    assert labels[1] == "1:a,b"
    path = save_matrix_csv(tmp_path / "head.csv", matrix, labels, labels)
    read, rows, columns = read_matrix_csv(path)
    assert rows == labels and columns == labels
    np.testing.assert_allclose(read, matrix, rtol=1e-5)
    with pytest.raises(ValueError, match="row labels"):
        save_matrix_csv(tmp_path / "bad.csv", matrix, labels[:2], labels)


def test_layer_view_is_everything_a_layer_shows():
    from explorer.inspector.demo_inspection import demo_inspection

    inspection = demo_inspection(10, 3, 2, num_padding=1)  # 3 layers x 2 heads: distinct
    head_mask = np.ones((3, 2), np.float32)
    head_mask[1, 0] = 0
    options = attention_math.ViewOptions(hide_special=True, renormalise=True, colour_scale="fixed")
    view = attention_math.layer_view(inspection, 1, options, head_mask)
    special = [token in ("[CLS]", "[SEP]", "[PAD]") for token in inspection.input_tokens]
    keep = [i for i, is_special in enumerate(special) if not is_special]
    assert (view.layer, view.num_layers, view.num_heads) == (1, 3, 2) and view.options == options
    np.testing.assert_array_equal(view.positions, keep)
    assert view.labels == [inspection.input_tokens[i] for i in keep] and len(view.tokens) == 10
    sliced = inspection.attentions[1][:, keep][:, :, keep]
    np.testing.assert_allclose(view.matrices, sliced / sliced.sum(-1, keepdims=True), rtol=1e-5)
    assert view.matrices.shape == (2, len(keep), len(keep)) and view.matrices.dtype == np.float32
    assert view.levels == (0.0, 1.0)
    np.testing.assert_array_equal(view.heads_on, [False, True])
    np.testing.assert_array_equal(view.special_mask, special)
    plain = attention_math.layer_view(inspection, 0)  # no options: every position, the inspection's own mask
    np.testing.assert_array_equal(plain.matrices, inspection.attentions[0])
    assert plain.options.colour_scale == attention_math.DEFAULT_COLOUR_SCALE == "p99"
    assert plain.levels == attention_math.colour_levels(inspection.attentions[0], "p99") and plain.heads_on.all()
    with pytest.raises(ValueError, match="layer 3 does not exist"):
        attention_math.layer_view(inspection, 3)
    with pytest.raises(ValueError, match="colour scale"):
        attention_math.ViewOptions(colour_scale="rainbow")
