"""Mutation audit of minimal_attn.agreement (Snell et al. 2021, Eqs. (10)-(11)): the
default top-5% rule where no test passed ``percent``, and bad inputs a weakened check let
through. Expected values are worked out by hand from Eq. (10): A(u, v) = 1 iff fewer than
k = ceil(0.05 L) entries of v are strictly above v at u's first maximum."""

import math

import numpy as np
import pytest

from minimal_attn.agreement import (
    agreement,
    agreement_rows,
    average_agreement,
    baseline_rows,
    contextualised_agreement,
    kendall_tau,
)
from minimal_attn.errors import InputError

L = 40                      # k = ceil(0.05 * 40) = 2; 10% would give 4 and 2.5% give 1


def _above(count):
    """A v of length L whose entry at l* = L - 1 has exactly ``count`` entries above it."""
    v = np.zeros(L)
    v[-1] = 0.5
    v[:count] = 1.0
    return v


def test_the_default_rule_is_the_top_5_percent():
    ramp = np.arange(L, dtype=float)                     # u's first maximum: l* = L - 1
    # two entries of v above v_l*: not < k = 2, so A = 0; one entry above: A = 1
    assert agreement_rows(np.stack([ramp, ramp]), np.stack([_above(2), _above(1)])).tolist() \
        == [0, 1]
    # the random baseline: the fraction of positions with fewer than 2 entries above
    assert baseline_rows(ramp[None, :]).tolist() == [2 / L]
    out = average_agreement([np.stack([ramp, ramp])], [np.stack([_above(2), _above(1)])])
    # the baseline averages v's rows: 2 of 40 positions pass in each (the test below)
    assert out["agreement"] == 0.5 and out["baseline"] == pytest.approx(2 / L)
    assert out["n_words"] == 2


def test_the_baseline_counts_ties_in_favour():
    # _above(2): the two 1.0 entries have 0 above (pass), 0.5 has 2 above (fails), the 37
    # zeros have 3 above (fail): 2 of 40 pass. _above(1): the 1.0 (0 above) and the 0.5 (1
    # above) pass, the 38 zeros have 2 above: 2 of 40.
    assert baseline_rows(np.stack([_above(2), _above(1)])).tolist() == [2 / L, 2 / L]


def test_contextualised_agreement_uses_the_top_5_percent_by_default():
    ramp = np.arange(L, dtype=float)
    reference = [np.stack([ramp, ramp])]
    probe = [np.stack([_above(2), _above(1)])]           # A = 0 and 1: agreement 0.5
    out = contextualised_agreement(reference, probe, [probe, reference], [0.3, 0.9])
    assert out["probe_agreement"] == 0.5 and out["run_agreements"] == [0.5, 1.0]
    assert out["xi"] == 0.9          # the first checkpoint agreeing more than the probe


def test_average_agreement_reads_nested_lists_as_the_arrays_they_spell():
    u = [[[0.0, 1.0, 2.0]]]
    out = average_agreement(u, u)
    # L = 3, k = 1: u's top (position 2) is v's top, A = 1; only v's top passes: 1/3
    assert out == {"agreement": 1.0, "baseline": pytest.approx(1 / 3), "kendall_tau": 1.0,
                   "n_words": 1}


@pytest.mark.parametrize("kendall", [True, False])
def test_pairs_whose_shapes_differ_are_refused_even_when_their_rows_add_up(kendall):
    """(1, L) with (2, L) and (2, L) with (1, L): stacking would pair rows of different
    words; the pairs must be refused one by one."""
    us = [np.ones((1, 3)), np.ones((2, 3))]
    vs = [np.ones((2, 3)), np.ones((1, 3))]
    with pytest.raises(InputError, match="same non-empty shape"):
        average_agreement(us, vs, kendall=kendall)


@pytest.mark.parametrize("kendall", [True, False])
def test_only_empty_pairs_are_refused(kendall):
    with pytest.raises(InputError, match="no output words to compare"):
        average_agreement([np.zeros((0, 3))], [np.zeros((0, 3))], kendall=kendall)


def test_agreement_of_two_matrices_is_refused():
    with pytest.raises(InputError, match="agreement takes two vectors"):
        agreement(np.eye(3), np.eye(3))


@pytest.mark.parametrize("u, v", [
    ([[np.nan, 1.0, 0.0]], [[0.0, 1.0, 0.0]]),          # one NaN in u, the rest finite
    ([[0.0, 1.0, 0.0]], [[0.0, 1.0, np.nan]]),          # one NaN in v
])
def test_one_nan_is_refused(u, v):
    with pytest.raises(InputError, match="holds NaN"):
        agreement_rows(np.array(u), np.array(v))


def test_kendall_tau_of_two_positions_is_plus_or_minus_one():
    """One pair of positions: concordant (tau = 1) or discordant (tau = -1); one position
    or a constant vector has no tau."""
    assert kendall_tau([0.0, 1.0], [2.0, 5.0]) == 1.0
    assert kendall_tau([0.0, 1.0], [5.0, 2.0]) == -1.0
    assert math.isnan(kendall_tau([1.0], [2.0]))
