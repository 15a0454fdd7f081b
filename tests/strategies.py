"""Hypothesis strategies shared by the tests: shapes first, then arrays, then labels."""

import os

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

#: The stress profile's multiplier of every example count (tests/conftest.py).
STRESS_FACTOR = 25


def hypothesis_profile():
    """The hypothesis profile to load: ATTN_DYN_HYPOTHESIS if set, else ci under CI, else dev."""
    return os.environ.get("ATTN_DYN_HYPOTHESIS") or ("ci" if os.environ.get("CI") else "dev")


def examples(n):
    """A test's own ``max_examples``: n under dev and ci, n * STRESS_FACTOR under stress."""
    return n * STRESS_FACTOR if hypothesis_profile() == "stress" else n


def floats(lo, hi):
    """Bounded floats without NaN, infinities or subnormals (a subnormal difference
    rounds to a tie after ordinary arithmetic, which breaks exact properties)."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@st.composite
def scores_logits(draw, big=False):
    """Scores (N, m), logits (N, m, C) and labels (N,); entries up to 1e4 with ``big``."""
    n = draw(st.integers(1, 5))
    m = draw(st.integers(2, 6))
    c = draw(st.integers(2, 5))
    elems = floats(-1e4, 1e4) if big else floats(-50, 50)
    scores = draw(arrays(np.float64, (n, m), elements=elems))
    logits = draw(arrays(np.float64, (n, m, c), elements=elems))
    y = draw(arrays(np.int64, (n,), elements=st.integers(0, c - 1)))
    return scores, logits, y


@st.composite
def fcam_problem(draw, max_n=6, max_m=5, max_d=6, max_c=4, scale=2.0):
    """A random linear-FCAM problem: params {W, u}, mosaics X (N, m, d), labels y."""
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(2, max_m))
    d = draw(st.integers(1, max_d))
    c = draw(st.integers(2, max_c))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    params = {"W": scale * rng.standard_normal((c, d)), "u": scale * rng.standard_normal(d)}
    X = rng.standard_normal((n, m, d))
    y = rng.integers(c, size=n)
    return params, X, y


@st.composite
def vector_pair(draw, L):
    """Two float vectors of length L in [-1e3, 1e3] (no subnormals), ties in v likely."""
    u = draw(st.lists(floats(-1e3, 1e3), min_size=L, max_size=L))
    v = draw(st.lists(st.one_of(floats(-1e3, 1e3), st.sampled_from([0.0, 1.0, -2.5])),
                      min_size=L, max_size=L))
    return np.array(u), np.array(v)
