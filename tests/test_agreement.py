"""Agreement metrics of Section 3.1: A of Eq. (10), its baseline, Kendall's tau, xi of Eq. (11)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples, vector_pair

from minimal_attn import agreement as agr
from minimal_attn.errors import InputError


# ----------------------------------------------------------------- Eq. (10)
def test_agreement_on_hand_made_vectors():
    u = [0.1, 0.7, 0.2]
    assert agr.agreement(u, [0.3, 0.5, 0.2]) == 1       # same top position
    assert agr.agreement(u, [0.5, 0.3, 0.2]) == 0       # second in v, and k = 1 for L = 3


def test_ties_in_v_count_in_favour_and_ties_in_u_take_the_first():
    assert agr.agreement([0.0, 1.0, 0.0], [0.4, 0.4, 0.2]) == 1   # strict >: tie with the top
    assert agr.agreement([0.5, 0.5, 0.0], [0.1, 0.9, 0.0]) == 0   # u's top is position 0
    assert agr.agreement([0.5, 0.5, 0.0], [0.9, 0.1, 0.0]) == 1
    assert agr.agreement([1.0, 0.0], [0.3, 0.3]) == 1             # constant v: every l is top


def test_short_sequences():
    assert agr.agreement([0.2], [5.0]) == 1                      # L = 1 always agrees
    assert agr.agreement([0.2, 0.1], [0.1, 0.2]) == 0
    assert agr.agreement_baseline([3.0]) == 1.0
    assert agr.agreement_baseline([1.0, 2.0]) == 0.5


def test_top_five_percent_rounds_up():
    assert [agr.top_k(L) for L in (1, 19, 20, 21, 40, 41, 60)] == [1, 1, 1, 2, 2, 3, 3]
    # u's top is v's second largest: out of the top 5% at L = 20, in at L = 21
    for L, expected in ((20, 0), (21, 1)):
        v = np.arange(L, dtype=float)
        u = np.zeros(L)
        u[L - 2] = 1.0
        assert agr.agreement(u, v) == expected
    assert agr.agreement(np.eye(41)[38], np.arange(41.0)) == 1   # third largest, k = 3
    assert agr.agreement(np.eye(41)[37], np.arange(41.0)) == 0


def test_baseline_exact_values():
    assert agr.agreement_baseline(np.arange(10.0)) == pytest.approx(0.1)     # k / L
    assert agr.agreement_baseline(np.arange(21.0)) == pytest.approx(2 / 21)
    assert agr.agreement_baseline([1.0, 3.0, 3.0, 0.0]) == pytest.approx(0.5)  # two tied tops
    assert agr.agreement_baseline(np.ones(7)) == 1.0


def test_baseline_is_the_mean_over_shuffles():
    # the authors estimate A-hat by shuffling v; the exact value is the average over all shifts
    rng = np.random.default_rng(0)
    u, v = rng.random(30), np.round(rng.random(30), 1)          # ties in v
    shifts = [agr.agreement(u, np.roll(v, s)) for s in range(30)]
    assert agr.agreement_baseline(v) == pytest.approx(np.mean(shifts))


@settings(deadline=None, max_examples=examples(60))
@given(data=st.data())
def test_agreement_properties(data):
    L = data.draw(st.integers(1, 50))
    u, v = data.draw(vector_pair(L))
    a = agr.agreement(u, v)
    assert a in (0, 1)
    assert agr.agreement(u, u) == 1
    # order is all that matters: two maps that keep every order and every tie exactly
    assert agr.agreement(u, 4.0 * v) == a                        # exact: no subnormals, no overflow
    dense_rank = np.searchsorted(np.unique(v), v).astype(float)  # ties stay ties
    assert agr.agreement(u, dense_rank) == a
    assert 0 < agr.agreement_baseline(v) <= 1
    assert agr.agreement_rows(u[None], v[None]).tolist() == [a]
    # the values: Snell Eq. (10) read off sorted v (the k-th largest is the bar; strict >
    # counts fewer than k above v_l* iff v_l* >= that bar); A-hat is the fraction of
    # positions at or above the bar, and A averaged over every position as u's top
    # (one-hot u at each l). Comparisons only, so exact; the means to an ulp
    k = -(-5 * L // 100)                                        # ceil(L / 20), in integers
    bar = np.sort(v)[::-1][k - 1]                                # v's k-th largest
    assert a == int(v[np.argmax(u)] >= bar)
    assert agr.agreement_baseline(v) == pytest.approx(np.mean(v >= bar), rel=1e-12)
    assert agr.agreement_baseline(v) == pytest.approx(
        np.mean([agr.agreement(np.eye(L)[i], v) for i in range(L)]), rel=1e-12)


def test_bad_shapes():
    with pytest.raises(InputError, match="same non-empty shape"):
        agr.agreement([1.0, 2.0], [1.0])
    with pytest.raises(InputError):
        agr.agreement([], [])


def test_bad_percent_and_nan_are_refused():
    # percent <= 0 would quietly act as "the top position only"; NaN has no rank (a NaN at
    # v[l*] would count as agreement, since nothing compares greater)
    for percent in (0, -5, 101, float("nan")):
        with pytest.raises(InputError, match="percent"):
            agr.agreement([1.0, 2.0], [2.0, 1.0], percent=percent)
    assert agr.agreement([1.0, 2.0], [2.0, 1.0], percent=100) == 1       # k = L: any l*
    with pytest.raises(InputError, match="NaN"):
        agr.agreement([1.0, 2.0], [0.0, float("nan")])
    with pytest.raises(InputError, match="NaN"):
        agr.agreement_baseline([float("nan"), 1.0])


# ------------------------------------------------------------ Kendall's tau
def test_kendall_tau():
    assert agr.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert agr.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(agr.kendall_tau([1.0], [2.0]))
    assert math.isnan(agr.kendall_tau([1.0, 2.0], [3.0, 3.0]))
    assert agr.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)
    # ties (a repeated source word gives equal probe values): 4 concordant pairs, none
    # discordant, one pair tied in u only, one in v only: tau-b = 4 / sqrt(5 * 5) = 0.8
    # (tau-c would give 0.75, tau-a 2/3)
    assert agr.kendall_tau([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(0.8, rel=1e-12)


@pytest.mark.parametrize("kendall", [False, True])
def test_average_agreement_uses_its_percent_for_the_baseline_too(kendall):
    """L = 10 at 50 %: k = 5, so Â of a strictly ordered v is 5/10 (1/10 at the default
    5 %), and u's tops (positions 9 and 5) are among v's top 5 (Snell Eq. (10))."""
    us = [np.eye(10)[[9, 5]]]
    vs = [np.tile(np.arange(10.0), (2, 1))]
    out = agr.average_agreement(us, vs, percent=50, kendall=kendall)
    assert out["baseline"] == pytest.approx(0.5)
    assert out["agreement"] == pytest.approx(1.0)


def test_average_over_output_words():
    us = [np.array([[0.9, 0.1, 0.0], [0.0, 0.2, 0.8]]), np.array([[1.0]])]
    vs = [np.array([[0.5, 0.4, 0.1], [0.6, 0.3, 0.1]]), np.array([[0.3]])]
    out = agr.average_agreement(us, vs)
    assert out["n_words"] == 3
    assert out["agreement"] == pytest.approx(2 / 3)              # rows: 1, 0, 1
    assert out["baseline"] == pytest.approx((1 / 3 + 1 / 3 + 1) / 3)
    # tau: row 1 = 1, row 2 = -1, the L = 1 word has none and is skipped
    assert out["kendall_tau"] == pytest.approx(0.0)
    assert agr.average_agreement(us, vs, kendall=False)["kendall_tau"] is None
    with pytest.raises(InputError):
        agr.average_agreement(us, vs[:1])


# ----------------------------------------------------------------- Eq. (11)
def test_xi_on_a_hand_made_run():
    perf = [10.0, 20.0, 30.0, 40.0]
    assert agr.xi(0.5, [0.1, 0.3, 0.6, 0.8], perf) == 30.0
    assert agr.xi(0.6, [0.1, 0.3, 0.6, 0.8], perf) == 40.0     # equal is not more
    assert agr.xi(0.05, [0.1, 0.3, 0.6, 0.8], perf) == 10.0
    assert math.isnan(agr.xi(0.9, [0.1, 0.3, 0.6, 0.8], perf))
    assert agr.xi(0.5, [0.1, 0.7, 0.4, 0.8], perf) == 20.0     # the first crossing counts
    with pytest.raises(InputError):
        agr.xi(0.5, [0.1, 0.2], [1.0])


def test_contextualised_agreement_from_matrices():
    # reference attention points at position t for output word t (L = T = 3)
    ref = [np.eye(3)]
    probe = [np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]])]       # agrees on 2 of 3
    checkpoints = [[np.ones((3, 3))],                                  # uniform: every l ties
                   [np.array([[0, 1.0, 0], [1.0, 0, 0], [1.0, 0, 0]])],  # 0 of 3
                   [np.eye(3)]]                                        # 3 of 3
    out = agr.contextualised_agreement(ref, probe, checkpoints, [0.1, 0.4, 0.9])
    assert out["probe_agreement"] == pytest.approx(2 / 3)
    assert out["run_agreements"] == pytest.approx([1.0, 0.0, 1.0])
    assert out["xi"] == 0.1            # a uniform attention ties everywhere, so A = 1 at once
    out = agr.contextualised_agreement(ref, probe, checkpoints[1:], [0.4, 0.9])
    assert out["xi"] == 0.9


def test_average_by_length_equals_the_loop_over_pairs():
    # kendall=False stacks the rows of equal L (one call per L); kendall=True still walks
    # pair by pair: both give the same numbers, ties and empty pairs included
    rng = np.random.default_rng(0)
    us, vs = [], []
    for _ in range(60):
        T, L = int(rng.integers(0, 4)), int(rng.integers(1, 30))
        us.append(rng.integers(0, 3, (T, L)).astype(float))        # many ties
        vs.append(rng.integers(0, 4, (T, L)).astype(float))
    us.append(np.array([0.2, 0.7, 0.1]))                            # a vector: one word
    vs.append(np.array([0.1, 0.3, 0.6]))
    fast = agr.average_agreement(us, vs, kendall=False)
    loop = agr.average_agreement(us, vs, kendall=True)
    assert fast["n_words"] == loop["n_words"] == sum(len(np.atleast_2d(u)) for u in us if u.size)
    assert fast["agreement"] == loop["agreement"] and fast["baseline"] == loop["baseline"]
    with pytest.raises(InputError, match="same non-empty shape"):
        agr.average_agreement([np.ones((2, 3))], [np.ones((2, 4))], kendall=False)
    with pytest.raises(InputError, match="every pair is empty"):
        agr.average_agreement([np.ones((0, 3))], [np.ones((0, 3))], kendall=False)
