"""Task generators of Snell Secs. 3.3, 6.1, 6.2, A.3 and their count tables, Eqs. (16)-(18)."""

import numpy as np
import pytest

from minimal_attn import synthetic_tasks as st
from minimal_attn.errors import InputError


def rng(seed=0):
    return np.random.default_rng(seed)


def test_permutation_copy_rows_are_permutations_and_copied():
    src, tgt = st.permutation_copy(rng(), 50)
    assert src.shape == (50, 40)
    assert (np.sort(src, axis=1) == np.arange(1, 41)).all()         # every row: {1..40}
    assert (src == tgt).all()
    assert len({tuple(r) for r in src}) == 50                      # independent draws


def test_copy_control_draws_40_distinct_of_60():
    src, tgt = st.copy_control(rng(1), 200)
    assert src.shape == (200, 40) and (src == tgt).all()
    assert src.min() >= 1 and src.max() <= 60
    assert all(len(set(r)) == 40 for r in src)                     # distinct within a row
    assert len(np.unique(src)) == 60                               # every type gets used
    assert len({frozenset(r) for r in src}) > 150                  # the set itself varies


def test_mixture_uses_one_of_two_disjoint_sets():
    src, _ = st.permutation_mixture(rng(2), 200)
    low = (np.sort(src, axis=1) == np.arange(1, 41)).all(axis=1)
    high = (np.sort(src, axis=1) == np.arange(41, 81)).all(axis=1)
    assert (low ^ high).all()
    assert 60 < low.sum() < 140


def test_permutation_function_applies_pi():
    pi = st.fixed_permutation(3)
    assert sorted(pi) == list(range(40))
    src, tgt = st.permutation_function(rng(4), 20, pi)
    for x, y in zip(src, tgt):
        assert [y[t] for t in range(40)] == [x[pi[t]] for t in range(40)]   # Eq. (25)
    src_c, tgt_c = st.permutation_function(rng(4), 20, np.arange(40))
    assert (src_c == src).all() and (tgt_c == src_c).all()          # copy on the same inputs


def test_keyword_balanced_and_exactly_once_in_positives():
    x, y, l_star = st.keyword_classification(rng(5), 301)
    assert x.shape == (301, 40) and x.min() >= 1 and x.max() <= 40
    assert y.sum() == 150                                           # balanced (odd n: +1 neg)
    hits = (x == 1).sum(axis=1)
    assert (hits[y == 1] == 1).all() and (hits[y == 0] == 0).all()
    assert (x[y == 1, l_star[y == 1]] == 1).all() and (l_star[y == 0] == -1).all()
    assert 0 < y[:150].sum() < 150                                  # shuffled, not blocked


def test_batch_stream_is_a_function_of_seed_and_step():
    a = st.batch_stream("control", 3, 7, 8)
    b = st.batch_stream("control", 3, 7, 8)
    c = st.batch_stream("control", 4, 7, 8)
    d = st.batch_stream("control", 3, -1, 8)
    assert (a[0] == b[0]).all() and not (a[0] == c[0]).all() and not (a[0] == d[0]).all()


def test_permutation_count_table_constant_across_positions():
    """Fig. 4: under permutations C is constant, so beta^IBM is 1/40 at every position."""
    src, tgt = st.permutation_copy(rng(6), 30)
    C, beta = st.count_tables(src, tgt, 40)
    assert np.allclose(C[1:, 1:], 30 / 40)                          # every pair adds 1/L
    assert np.allclose(beta, 1 / 40)
    assert (C[0] == 0).all() and (C[:, 0] == 0).all()              # the start id is unused


def test_control_count_table_is_informative():
    """The control's C favours the diagonal: a word co-occurs with itself in every pair."""
    src, tgt = st.copy_control(rng(7), 300)
    C, beta = st.count_tables(src, tgt, 60)
    diag, off = np.diag(C)[1:], C[1:, 1:][~np.eye(60, dtype=bool)]
    assert diag.min() > off.max()
    assert beta.std(axis=2).mean() > 0                              # varies over positions


def test_mixture_count_table_blocks():
    """Fig. 8: two constant blocks; beta^IBM is still the same at every position."""
    src, tgt = st.permutation_mixture(rng(8), 100)
    C, beta = st.count_tables(src, tgt, 80)
    block = C[1:41, 1:41]
    assert np.allclose(block, block[0, 0]) and np.allclose(C[1:41, 41:], 0)
    assert np.allclose(beta, 1 / 40)


def test_bad_vocab_raises():
    with pytest.raises(InputError, match="n_vocab"):
        st.copy_control(rng(), 3, n_types=40, n_vocab=30)
