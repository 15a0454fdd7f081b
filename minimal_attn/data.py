r"""Selective-dependence classification (SDC) data, as plain arrays.

Vashisht & Ramaswamy (2023), Sections 2.1 and 4. A mosaic has ``m`` segments;
exactly one, at position ``z``, is the *foreground* and carries the label
``y``; the other ``m - 1`` are *background* and carry no information about it.

Every generator returns :class:`Mosaics` (``X`` (N, m, d), ``y`` (N,), ``z``
(N,), for the linear orthogonal setting the foreground vectors ``S``
(C, d), and for image mosaics the ``source`` image of every segment). ``z`` is
for evaluation only: no model ever sees it.

Linear orthogonal setting (Assumptions 1-3): the foreground of class ``k`` is
the fixed vector ``s_k``, the ``s_k`` are orthonormal, and background
segments are zero-mean Gaussians in the orthogonal complement of span(s).
Assumption 1 says "orthogonal"; Eqs. (1)-(6) as printed also need
:math:`\|s_k\| = 1`, hence orthonormal. (Sec. 2.2 prints the label set as
{1, ..., m}; the labels are the C classes, {1, ..., C}.)

The generators are host-side NumPy (seeded ``default_rng``); move their arrays
to another namespace with ``xp.asarray`` (``dynamics.simulate(xp=...)`` does).
"""

import math
from typing import NamedTuple, Optional

import numpy as np

from minimal_attn.errors import (
    InputError,
    check_alpha,
    check_int_at_least,
    check_labels,
    check_real,
    shape_of,
    shown,
)


class Mosaics(NamedTuple):
    """A set of SDC instances: mosaics ``X``, labels ``y``, foreground positions ``z``."""

    X: np.ndarray            # (N, m, d) float
    y: np.ndarray            # (N,) int, label in 0..C-1
    z: np.ndarray            # (N,) int, foreground position in 0..m-1
    S: Optional[np.ndarray] = None   # (C, d) foreground vectors (linear orthogonal only)
    #: (N, m) the index of each segment's source image in the split it was drawn from
    #: (image mosaics only): which mosaics share an image
    source: Optional[np.ndarray] = None


def check_mosaics(X, y, n_classes):
    """Require mosaics ``X`` (N, m, d), N >= 1, and labels ``y`` (N,) in 0..C-1 (any array
    namespace; the labels' range on host arrays). Returns the shape of ``X``."""
    shape = shape_of(X)
    if len(shape) != 3 or shape[0] < 1:
        raise InputError(f"X must be mosaics (N, m, d) with N >= 1, got shape {shape}")
    check_labels(y, n_classes, n=shape[0])
    return shape


def check_log_attention(log_attention, n, m):
    """Require a fixed log attention (A, N, m) for the model's N mosaics of m segments."""
    shape = shape_of(log_attention)
    if len(shape) != 3 or shape[1:] != (n, m):
        raise InputError(f"log attention of shape {shape} does not fit the model's {n} "
                         f"mosaics of {m} segments: pass the z and m of the model's data")
    return log_attention


def orthogonal_basis(n_classes, d, seed=0):
    """Orthonormal foreground vectors S (C, d) and a basis B (d, d - C) of their complement."""
    check_int_at_least("C (classes)", n_classes, 1)
    check_int_at_least("d - C (background dimensions)", d - n_classes, 1)
    try:                                  # an int >= 0, None, a list of them, a SeedSequence
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise InputError(f"seed must be what numpy.random.default_rng takes (an integer >= 0, "
                         f"None, a SeedSequence), got {shown(seed)}", param="seed") from None
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return Q[:, :n_classes].T.copy(), Q[:, n_classes:].copy()


def _assemble(S, background, y, z):
    """Put ``s_y`` at position ``z`` and the m-1 background rows around it."""
    n, m_minus_1, d = background.shape
    X = np.empty((n, m_minus_1 + 1, d))
    is_fg = np.arange(m_minus_1 + 1)[None, :] == z[:, None]            # (N, m)
    X[is_fg] = S[y]
    X[~is_fg] = background.reshape(-1, d)
    return X


def _check(m, n_classes, d):
    check_int_at_least("m (segments per mosaic)", m, 2)
    check_int_at_least("C (classes)", n_classes, 2)
    if d is None:
        d = n_classes + 2
    check_int_at_least("d", d, n_classes + 1)
    return d


def _check_scale(name, value):
    """Require a finite number >= 0 (a spread or a distance); NaN would fill X with NaN."""
    check_real(name, value, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")
    return value


def linear_orthogonal(n, m, n_classes, d=None, sigma=1.0, seed=0):
    """``n`` sampled linear-orthogonal SDC instances, y and z uniform (Assumptions 1-3)."""
    d = _check(m, n_classes, d)
    check_int_at_least("n", n, 1)
    _check_scale("sigma", sigma)
    seed = check_int_at_least("seed", seed, 0)       # one stream per use: [seed, k]
    S, B = orthogonal_basis(n_classes, d, seed)
    rng = np.random.default_rng([seed, 1])
    y = rng.integers(n_classes, size=n)
    z = rng.integers(m, size=n)
    background = sigma * rng.standard_normal((n, m - 1, d - n_classes)) @ B.T
    return Mosaics(_assemble(S, background, y, z), y, z, S)


def exact_population(m, n_classes, d=None, n_base=1, sigma=1.0, seed=0):
    """The linear-orthogonal population, symmetrised so its gradient is exact.

    Each of ``n_base`` background draws appears with its sign flip, and each
    with every (y, z) pair once: ``N = 2 * n_base * C * m`` instances. The
    background mean is then exactly zero for every (y, z), so full-batch
    gradient descent on this set is the population gradient flow of Section 4.
    """
    d = _check(m, n_classes, d)
    check_int_at_least("n_base", n_base, 1)
    _check_scale("sigma", sigma)
    seed = check_int_at_least("seed", seed, 0)       # one stream per use: [seed, k]
    S, B = orthogonal_basis(n_classes, d, seed)
    rng = np.random.default_rng([seed, 2])
    base = sigma * rng.standard_normal((n_base, m - 1, d - n_classes)) @ B.T
    base = np.concatenate([base, -base])                                 # sign flips
    n_bg = base.shape[0]
    # every combination (background draw, y, z), background draw slowest
    bg_idx, y, z = (g.ravel() for g in np.meshgrid(
        np.arange(n_bg), np.arange(n_classes), np.arange(m), indexing="ij"))
    return Mosaics(_assemble(S, base[bg_idx], y, z), y, z, S)


def gaussian_mosaics(n, m, n_classes, d=16, n_background=7, separation=3.0, noise=1.0,
                     seed=0):
    """Synthetic SDC mosaics with Gaussian segments (no files needed).

    Foreground segments of class k are ``N(c_k, noise^2 I)``; background
    segments come from ``n_background`` other Gaussian classes ``N(b_j, noise^2 I)``
    chosen uniformly. All centres are drawn once with norm ``separation``.
    """
    check_int_at_least("m (segments per mosaic)", m, 2)
    check_int_at_least("C (classes)", n_classes, 2)
    check_int_at_least("n", n, 1)
    check_int_at_least("d", d, 1)
    check_int_at_least("n_background", n_background, 1)
    check_int_at_least("seed", seed, 0)
    _check_scale("separation", separation)
    _check_scale("noise", noise)
    centre_rng = np.random.default_rng([seed, 3])
    centres = centre_rng.standard_normal((n_classes + n_background, d))
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    rng = np.random.default_rng([seed, 4])
    y = rng.integers(n_classes, size=n)
    z = rng.integers(m, size=n)
    bg_class = n_classes + rng.integers(n_background, size=(n, m - 1))
    background = centres[bg_class] + noise * rng.standard_normal((n, m - 1, d))
    X = _assemble(centres[:n_classes] + 0.0, background, y, z)
    X[np.arange(n), z] += noise * rng.standard_normal((n, d))
    return Mosaics(X, y, z)


def fixed_log_attention(z, m, alpha):
    r"""Log of the fixed focus of Section 3: ``alpha`` on the foreground, the rest shared.

    Returns (N, m) with :math:`\log\alpha` at ``z`` and
    :math:`\log((1-\alpha)/(m-1))` elsewhere; ``-inf`` where a weight is 0
    (alpha = 0 or 1), which the log-space losses handle exactly. ``z`` must hold
    positions in 0..m-1: another value would leave a row without its foreground weight.
    """
    m = check_int_at_least("m (segments per mosaic)", m, 2)
    alpha = check_alpha(alpha)
    z = np.asarray(z)
    if z.ndim != 1 or (z.size and not np.issubdtype(z.dtype, np.integer)):
        raise InputError(f"z must be a vector (N,) of integer foreground positions, got "
                         f"shape {z.shape} and dtype {z.dtype}")
    if z.size and (z.min() < 0 or z.max() >= m):
        raise InputError(f"z must hold foreground positions in 0..{m - 1} (m = {m}), got "
                         f"{z.min()}..{z.max()}: pass the m of the data z belongs to")
    with np.errstate(divide="ignore"):
        fg, bg = np.log(alpha), np.log((1.0 - alpha) / (m - 1))
    return np.where(np.arange(m)[None, :] == z[:, None], fg, bg)
