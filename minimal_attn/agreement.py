r"""Agreement between attention-like vectors, Snell et al. (2021) Sec. 3.1, Snell Eqs. (10)-(11).

For one output word, ``u`` and ``v`` score the L input positions (an
attention row, a probe row beta). Snell Eq. (10) asks whether the top position of
``u`` is among the top 5% of ``v``:

.. math:: A(u, v) = 1\Big[\, \big|\{\, l : v_l > v_{l^*} \,\}\big| < k \,\Big],
          \quad l^* = \arg\max_l u_l, \quad k = \lceil 0.05\, L \rceil

The inequality is strict and k is rounded up, so k >= 1: for L <= 20 the top
position of ``u`` must be a (possibly tied) maximum of ``v``, and ties in ``v``
count in favour (only strictly larger entries push l* out). Ties in ``u`` go to
the first maximum, like ``np.argmax``. This is the rule of the authors'
released code (``topKMatch_single`` with ``k = ceil(p L)``).

The random baseline :math:`\hat A(v)` is A when :math:`l^*` is a uniformly
random position: the fraction of positions of ``v`` that pass the test (the
authors estimate it by shuffling v; here it is computed exactly).

Snell Eq. (11) contextualises an agreement by the performance a normally trained
model needs to reach it: see :func:`xi`.

Matrices here are (T, L): one row per output word, as returned by
:func:`minimal_attn.proxy.beta_px` and :func:`minimal_attn.ibm1.beta_ibm`.
"""

import itertools
import math

import numpy as np
from scipy import stats

from minimal_attn._xp import get_xp, to_numpy
from minimal_attn.errors import InputError, check_int_at_least


def top_k(L, percent=5.0):
    """k of Snell Eq. (10): ceil(percent/100 * L), which is >= 1 for L >= 1 and
    0 < percent <= 100 (anything else is refused)."""
    L = check_int_at_least("L (the number of input positions)", L, 1)
    if not (isinstance(percent, (int, float, np.number)) and 0 < percent <= 100):
        raise InputError(f"percent must lie in (0, 100], got {percent!r}: "
                         "Snell Eq. (10) uses 5")
    return max(1, math.ceil(percent * L / 100.0))


def _rows(u, v):
    """(xp, u, v) as float (T, L) arrays of one namespace (lists become NumPy)."""
    u, v = (a if hasattr(a, "shape") else np.asarray(a, dtype=float) for a in (u, v))
    xp = get_xp(u, v)
    u, v = (xp.astype(a, xp.float64) if a.dtype != xp.float64 else a for a in (u, v))
    if u.ndim not in (1, 2) or v.ndim not in (1, 2):
        raise InputError(f"u and v must be vectors (L,) or matrices (T, L), got shapes "
                         f"{tuple(u.shape)} and {tuple(v.shape)}: pass one pair at a time")
    u, v = (a[None, :] if a.ndim == 1 else a for a in (u, v))
    if u.shape != v.shape or u.shape[-1] == 0:
        raise InputError(f"u and v must have the same non-empty shape, got {u.shape} and {v.shape}")
    if bool(xp.any(xp.isnan(u))) or bool(xp.any(xp.isnan(v))):
        raise InputError("u or v holds NaN, which has no rank: check the model or probe that "
                         "produced it (a diverged run?)")
    return xp, u, v


def agreement_rows(u, v, percent=5.0):
    """Snell Eq. (10) for every row of two (T, L) matrices: int array, shape (T,)."""
    xp, u, v = _rows(u, v)
    k = top_k(u.shape[1], percent)
    top = xp.argmax(u, axis=1)                                            # (T,) first maximum
    vstar = xp.take_along_axis(v, top[:, None], axis=1)                   # (T, 1)
    above = xp.sum(xp.astype(v > vstar, xp.int64), axis=1)                # (T,) #{v_l > v_l*}
    return xp.astype(above < k, xp.int64)                                 # Snell Eq. (10)


def agreement(u, v, percent=5.0):
    """A(u, v) of Snell Eq. (10) for two vectors of length L: 1 or 0."""
    if np.ndim(u) != 1:
        raise InputError("agreement takes two vectors; use agreement_rows for matrices")
    return int(agreement_rows(u, v, percent)[0])


def baseline_rows(v, percent=5.0):
    r"""The random baseline :math:`\hat A` for every row of ``v`` (T, L): float array (T,)."""
    xp, _, v = _rows(v, v)
    k = top_k(v.shape[1], percent)
    above = xp.sum(xp.astype(v[:, None, :] > v[:, :, None], xp.int64), axis=2)  # (T, L)
    return xp.mean(xp.astype(above < k, xp.float64), axis=1)              # #{v > v_l} < k


def agreement_baseline(v, percent=5.0):
    r""":math:`\hat A(v)`: the expected A(u, v) when u's top position is uniformly random."""
    v = v if hasattr(v, "shape") else np.asarray(v, dtype=float)
    if v.ndim != 1:
        raise InputError(f"agreement_baseline takes one vector, got shape {tuple(v.shape)}; "
                         "use baseline_rows for matrices")
    return float(baseline_rows(v[None, :], percent)[0])


def kendall_tau(u, v):
    """Kendall's tau-b between two vectors (NaN when L < 2 or either is constant).

    Host-side: SciPy's ``kendalltau`` needs NumPy, so other arrays are copied over.
    """
    u, v = (np.asarray(to_numpy(a) if hasattr(a, "shape") else a, dtype=float) for a in (u, v))
    if u.ndim != 1 or u.shape != v.shape:
        raise InputError(f"kendall_tau takes two vectors of one length, got shapes {u.shape} "
                         f"and {v.shape}; compare matrices row by row")
    if u.size < 2 or np.all(u == u[0]) or np.all(v == v[0]):
        return float("nan")
    return float(stats.kendalltau(u, v)[0])


def average_agreement(us, vs, percent=5.0, kendall=True):
    """Snell Eq. (10), its baseline and Kendall's tau averaged over all output words of a data set.

    Parameters
    ----------
    us, vs : sequences of (T_n, L_n) arrays, one per pair (e.g. beta_px and beta_ibm)
    kendall : bool   also average Kendall's tau (skipping words where it is NaN)

    Returns
    -------
    dict with ``agreement``, ``baseline``, ``kendall_tau`` (or None) and
    ``n_words`` (output words averaged over)
    """
    if len(us) != len(vs):
        raise InputError(f"{len(us)} u matrices but {len(vs)} v matrices")
    if not kendall and all(isinstance(m, np.ndarray) for m in itertools.chain(us, vs)):
        a = rows_by_length(lambda u, v: agreement_rows(u, v, percent), us, vs)
        b = rows_by_length(lambda u, v: baseline_rows(v, percent), us, vs)   # loop below, fast
        return {"agreement": float(a.mean()), "baseline": float(b.mean()), "kendall_tau": None,
                "n_words": int(a.size)}
    a, b, taus = [], [], []
    for u, v in zip(us, vs):
        if math.prod(u.shape if hasattr(u, "shape") else np.shape(u)) == 0:
            continue
        a.append(to_numpy(agreement_rows(u, v, percent)))
        b.append(to_numpy(baseline_rows(v, percent)))
        if kendall:
            u_np, v_np = (np.atleast_2d(to_numpy(m) if hasattr(m, "shape") else m)
                          for m in (u, v))
            taus.extend(kendall_tau(ur, vr) for ur, vr in zip(u_np, v_np))
    if not a:
        raise InputError("no output words to compare: every pair is empty")
    taus = np.array(taus, dtype=float)
    finite = taus[np.isfinite(taus)]
    return {"agreement": float(np.concatenate(a).mean()),
            "baseline": float(np.concatenate(b).mean()),
            "kendall_tau": (float(finite.mean()) if finite.size else None) if kendall else None,
            "n_words": int(sum(len(x) for x in a))}


#: rows_by_length hands ``fn`` at most about this many (row, l, l') triples at a time
BLOCK = 1 << 18


def rows_by_length(fn, us, vs):
    """``np.concatenate([fn(u, v) for u, v in zip(us, vs) if u.size])`` for row-wise ``fn``
    of two (T_n, L_n) NumPy matrices, with one call of ``fn`` per input length L (the rows
    of every pair of that length stacked), not one per pair; the rows in the same order."""
    us = [np.atleast_2d(u) for u in us]
    vs = [np.atleast_2d(v) for v in vs]
    keep = [i for i, u in enumerate(us) if u.size]
    if not keep:
        raise InputError("no output words to compare: every pair is empty")
    for i in keep:
        if us[i].shape != vs[i].shape:
            raise InputError(f"u and v must have the same non-empty shape, got {us[i].shape} "
                             f"and {vs[i].shape}")
    rows = np.array([us[i].shape[0] for i in keep])
    length = np.array([us[i].shape[1] for i in keep])
    start = np.cumsum(rows) - rows                            # first row of each pair
    out = None
    for L in np.unique(length):
        sel = np.flatnonzero(length == L)
        pos = np.concatenate([np.arange(start[j], start[j] + rows[j]) for j in sel])
        U = np.concatenate([us[keep[j]] for j in sel])            # (R, L)
        V = np.concatenate([vs[keep[j]] for j in sel])
        block = max(1, BLOCK // (L * L))        # fn may hold (rows, L, L): keep it in cache
        for r in range(0, len(U), block):
            got = np.asarray(to_numpy(fn(U[r:r + block], V[r:r + block])))
            out = np.empty(rows.sum(), dtype=got.dtype) if out is None else out
            out[pos[r:r + block]] = got
    return out


def xi(probe_agreement, run_agreements, run_performance):
    r"""The contextualised agreement :math:`\xi`, Snell Eq. (11).

    A probe (e.g. :math:`\beta^{uf}` or :math:`\beta^{px}`) agrees with a
    reference attention :math:`\alpha^*` (a fully trained model) to the
    degree ``probe_agreement``. A normally trained run, checkpointed in
    training order, agrees with :math:`\alpha^*` to the degree
    ``run_agreements[c]`` at checkpoint c, with performance
    ``run_performance[c]`` (accuracy, BLEU). :math:`\xi` is the performance
    of the first checkpoint whose attention agrees with the reference more
    than the probe does,

    .. math:: \xi = P(c^*), \quad
              c^* = \min\{\, c : A(\alpha^*, \alpha^{(c)}) > A(\alpha^*, \beta) \,\}

    and NaN when no checkpoint gets there. A high :math:`\xi` means the probe
    knows as much about where to attend as a model that already performs well.
    """
    run_agreements = np.asarray(run_agreements, dtype=float)
    run_performance = np.asarray(run_performance, dtype=float)
    if run_agreements.shape != run_performance.shape or run_agreements.ndim != 1:
        raise InputError("run_agreements and run_performance must be vectors of one length "
                         f"(one per checkpoint), got {run_agreements.shape} and "
                         f"{run_performance.shape}")
    passed = np.flatnonzero(run_agreements > probe_agreement)
    return float(run_performance[passed[0]]) if passed.size else float("nan")


def contextualised_agreement(reference, probe, checkpoints, performance, percent=5.0):
    r"""Snell Eq. (11) from raw matrices: :math:`\xi` and the agreements it is built from.

    Parameters
    ----------
    reference : sequence of (T_n, L_n)   :math:`\alpha^*`, the reference attention per pair
    probe : sequence of (T_n, L_n)       the probe, e.g. :math:`\beta^{uf}` per pair
    checkpoints : sequence over c of sequences of (T_n, L_n)   a run's attention per checkpoint
    performance : sequence over c of float                     that run's performance

    Returns
    -------
    dict with ``xi``, ``probe_agreement`` (mean A(alpha*, beta)) and
    ``run_agreements`` (mean A(alpha*, alpha^(c)) per checkpoint)
    """
    probe_a = average_agreement(reference, probe, percent, kendall=False)["agreement"]
    run_a = [average_agreement(reference, attn, percent, kendall=False)["agreement"]
             for attn in checkpoints]
    return {"xi": xi(probe_a, run_a, performance), "probe_agreement": probe_a,
            "run_agreements": run_a}
