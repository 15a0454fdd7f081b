"""Hypothesis strategies shared by the gradient tests: shapes first, then arrays."""

import numpy as np
from hypothesis import strategies as st


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
