"""Mutation audit of minimal_attn.saif (V&R Section 2.4): the bad-input checks and edges a
weakened comparison got past. Expected values follow the definitions: a_z and s_y are
attention weights and probabilities in [0, 1]; focus is true iff a_z > tau (strict);
the heat map has ``bins`` x ``bins`` cells of width 1/bins."""

import numpy as np
import pytest

from minimal_attn.errors import InputError
from minimal_attn.saif import focus_prediction_counts, foreground_scores, heatmap, saif


@pytest.mark.parametrize("a_z, s_y, bad", [
    ([-0.5, 0.9], [0.9, 0.9], "a_z"),          # one value below 0 among good ones
    ([0.9, 1.5], [0.9, 0.9], "a_z"),           # one value above 1 among good ones
    ([0.9, 0.9], [0.2, -0.3], "s_y"),
    ([0.9, 0.9], [1.2, 0.5], "s_y"),
])
def test_one_value_outside_the_unit_interval_is_refused(a_z, s_y, bad):
    """Not clipped into [0, 1] and counted: a negative focus or a probability of 1.5 is a
    caller's bug (logits passed as weights), whichever position it sits at."""
    with pytest.raises(InputError, match=rf"{bad} must hold finite values in \[0, 1\]"):
        focus_prediction_counts(a_z, s_y)
    with pytest.raises(InputError, match=rf"{bad} must hold finite values in \[0, 1\]"):
        heatmap(a_z, s_y)


def test_a_float32_overshoot_reads_as_one_under_the_strict_threshold():
    """A softmax weight of 1 + 5e-7 (float32 rounding) is the weight 1: at tau = 1 nothing
    is above the threshold, so neither focus nor prediction is true."""
    over = 1.0 + 5e-7
    c = focus_prediction_counts([over, over], [over, 0.5], threshold=1.0)
    assert (c["ftpt"], c["ftpf"], c["ffpt"], c["ffpf"]) == (0, 0, 0, 2)
    assert saif([over], [over], threshold=1.0) == 0.0


def test_one_bin_holds_everything_and_zero_bins_are_refused():
    """bins >= 1: one bin is the whole square (100 %); zero bins has no cell to count in."""
    np.testing.assert_array_equal(heatmap([0.0, 0.5, 1.0], [1.0, 0.3, 0.0], bins=1),
                                  [[100.0]])
    with pytest.raises(InputError, match=r"bins must be an integer >= 1, got 0"):
        heatmap([0.5], [0.5], bins=0)


def test_foreground_scores_check_labels_against_classes_and_positions_against_segments():
    """y indexes the C classes of s (N, C) and z the m segments of a (N, m), whatever N is:
    one instance of class 2 of 3 at segment 2 of 3 is fine; label 2 with C = 2 is not."""
    a_z, s_y = foreground_scores([[0.0, 0.25, 0.75]], [[0.1, 0.2, 0.7]], [2], [2])
    assert a_z.tolist() == [0.75] and s_y.tolist() == [0.7]
    a = np.full((3, 2), 0.5)
    s = np.full((3, 2), 0.5)
    with pytest.raises(InputError, match=r"y must hold integers in 0\.\.1"):
        foreground_scores(a, s, [0, 1, 2], [0, 0, 0])
    with pytest.raises(InputError, match=r"z must hold integers in 0\.\.1"):
        foreground_scores(a, s, [0, 0, 0], [0, 1, 2])


def test_a_matrix_where_a_vector_belongs_is_refused():
    with pytest.raises(InputError, match=r"a_z must be a vector \(N,\), got shape \(1, 2\)"):
        saif([[0.9, 0.9]], [0.9, 0.9])
    with pytest.raises(InputError, match=r"attention must be \(N, m\) and scores \(N, C\)"):
        foreground_scores([0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]], [0, 1], [0, 1])
    with pytest.raises(InputError, match=r"attention must be \(N, m\) and scores \(N, C\)"):
        foreground_scores([[0.5, 0.5], [0.5, 0.5]], [0.5, 0.5], [0, 1], [0, 1])
