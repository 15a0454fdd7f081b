"""SDC data of the linear orthogonal setting (Assumptions 1-3)."""

import numpy as np
import pytest

from minimal_attn import data
from minimal_attn.errors import InputError


def test_linear_orthogonal_assumptions():
    D = data.linear_orthogonal(500, 4, 3, d=8, seed=3)
    np.testing.assert_allclose(D.S @ D.S.T, np.eye(3), atol=1e-12)      # orthonormal s_k
    n = np.arange(len(D.y))
    np.testing.assert_allclose(D.X[n, D.z], D.S[D.y])                    # foreground = s_y
    bg = D.X[np.arange(4)[None] != D.z[:, None]]                           # (N (m-1), d)
    np.testing.assert_allclose(bg @ D.S.T, 0.0, atol=1e-12)              # orthogonal to span(s)
    assert np.abs(bg.mean(0)).max() < 0.15                                # zero mean (sampled)
    assert set(D.y) == {0, 1, 2} and set(D.z) == {0, 1, 2, 3}


def test_exact_population_is_symmetric():
    m, C = 5, 3
    D = data.exact_population(m, C, n_base=2, seed=1)
    assert D.X.shape == (2 * 2 * C * m, m, C + 2)
    pairs, counts = np.unique(np.stack([D.y, D.z], 1), axis=0, return_counts=True)
    assert len(pairs) == C * m and np.all(counts == counts[0])          # every (y, z) equally
    bg_mask = np.arange(m)[None] != D.z[:, None]
    for y in range(C):
        for z in range(m):
            sel = (D.y == y) & (D.z == z)
            np.testing.assert_allclose(D.X[sel][bg_mask[sel]].sum(0), 0.0, atol=1e-12)


def test_fixed_log_attention():
    la = data.fixed_log_attention(np.array([1, 0]), 3, 0.4)
    np.testing.assert_allclose(np.exp(la), [[0.3, 0.4, 0.3], [0.4, 0.3, 0.3]])
    one = data.fixed_log_attention(np.array([2]), 3, 1.0)
    assert one[0, 2] == 0 and np.all(np.isneginf(one[0, :2]))


def test_gaussian_mosaics_shapes_and_seed():
    a = data.gaussian_mosaics(50, 5, 3, d=6, seed=4)
    b = data.gaussian_mosaics(50, 5, 3, d=6, seed=4)
    assert a.X.shape == (50, 5, 6)
    np.testing.assert_array_equal(a.X, b.X)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=10, m=1, n_classes=3), "m"),
    (dict(n=10, m=3, n_classes=1), "C"),
    (dict(n=10, m=3, n_classes=3, d=3), "d"),
])
def test_bad_sizes_are_input_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        data.linear_orthogonal(**kwargs)
