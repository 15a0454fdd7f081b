r"""Focus-prediction analysis and SAIF, Section 2.4, Table 1 and Figure 1.

Vashisht & Ramaswamy (2023), Section 2.4: for each test instance take

* the *focus* :math:`a_z`, the attention weight on the true foreground segment;
* the *prediction* :math:`s_y`, the true-class score of the paradigm's
  inference rule (:func:`minimal_attn.losses.infer`).

Focus is "true" when :math:`a_z > \tau` and the prediction is "true" when
:math:`s_y > \tau` (strict inequalities, :math:`\tau = 0.8`). The four cells
FTPT, FTPF, FFPT, FFPF count the instances by (focus, prediction); SAIF, the
*Strongly Accurate Interpretable Fraction*, is FTPT / N (Table 1).
Figure 1 shows the joint distribution of :math:`(a_z, s_y)` as a 5 x 5 heat
map of percentages.
"""


import numpy as np

from minimal_attn._xp import to_numpy
from minimal_attn.errors import InputError, check_alpha, check_int_at_least

COUNT_KEYS = ("ftpt", "ftpf", "ffpt", "ffpf")   # focus true/false x prediction true/false
_TOL = 1e-6                                      # float32 softmax can overshoot 1 slightly
EDGE_TOL = 1e-6                                  # heat-map bin edges: float32 rounding


def _as_unit_vector(values, name):
    v = np.asarray(to_numpy(values), dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"{name} must be a vector (N,), got shape {v.shape}")
    if not np.all(np.isfinite(v)) or (v.size and (v.min() < -_TOL or v.max() > 1 + _TOL)):
        raise InputError(f"{name} must hold finite values in [0, 1] (attention weights "
                         "or probabilities)")
    return np.clip(v, 0.0, 1.0)


def _pair(a_z, s_y):
    a_z, s_y = _as_unit_vector(a_z, "a_z"), _as_unit_vector(s_y, "s_y")
    if a_z.shape != s_y.shape:
        raise InputError(f"a_z {a_z.shape} and s_y {s_y.shape} must have one value "
                         "per instance")
    return a_z, s_y


def focus_prediction_counts(a_z, s_y, threshold=0.8):
    r"""FTPT, FTPF, FFPT, FFPF counts and SAIF = FTPT / N (Section 2.4, Table 1).

    Parameters
    ----------
    a_z : array, shape (N,)   attention on the true foreground segment
    s_y : array, shape (N,)   true-class score of the inference rule
    threshold : float
        :math:`\tau` in [0, 1]; focus true iff ``a_z > tau``, prediction true iff
        ``s_y > tau`` (strict, so a value of exactly 0.8 counts as false).

    Returns
    -------
    dict
        ``ftpt``, ``ftpf``, ``ffpt``, ``ffpf`` (int, summing to N) and ``saif``
        (float in [0, 1]; NaN when N = 0).
    """
    a_z, s_y = _pair(a_z, s_y)
    # a NaN threshold would count nothing as true, a negative one everything
    threshold = check_alpha(threshold, "threshold")
    focus, pred = a_z > threshold, s_y > threshold
    counts = {
        "ftpt": int(np.sum(focus & pred)),
        "ftpf": int(np.sum(focus & ~pred)),
        "ffpt": int(np.sum(~focus & pred)),
        "ffpf": int(np.sum(~focus & ~pred)),
    }
    n = a_z.size
    counts["saif"] = counts["ftpt"] / n if n else float("nan")
    return counts


def saif(a_z, s_y, threshold=0.8):
    """SAIF = FTPT / N, the fraction with focus and prediction both above ``threshold``."""
    return focus_prediction_counts(a_z, s_y, threshold)["saif"]


def heatmap(a_z, s_y, bins=5):
    r"""Joint histogram of :math:`(a_z, s_y)` in percent (Figure 1).

    The square [0, 1]^2 is cut into ``bins`` x ``bins`` cells of width
    1/bins (0.2 for 5): cell (i, j) holds instances with
    ``i/bins <= a_z < (i+1)/bins`` and ``j/bins <= s_y < (j+1)/bins``; the value
    1.0 falls in the last cell. Values within ``EDGE_TOL`` (1e-6) of an edge
    count as the edge, so a uniform focus a_z = 1/m computed in float32 lands
    in one row whichever way it rounded. Note the cells are half-open on the right,
    so a_z = 0.8 lies in the top row although focus is "true" only above 0.8.

    Returns
    -------
    array, shape (bins, bins)
        Percentages; **rows are a_z bins** (row 0: a_z in [0, 0.2)) and
        **columns are s_y bins** (column 0: s_y in [0, 0.2)). Sums to 100
        for N > 0; all zeros for N = 0.
    """
    a_z, s_y = _pair(a_z, s_y)
    bins = check_int_at_least("bins", bins, 1)          # 2.7 would silently mean 2
    # A value within EDGE_TOL of an edge k/bins counts as the edge itself: a
    # uniform focus gives a_z = 1/m = 0.2 up to float32 rounding (0.19999999 or
    # 0.20000001), and equal values must share one row. Then compare with the
    # edges exactly (floor(v * bins) can round a value just below an edge up).
    inner = np.arange(1, bins) / bins                                    # (bins-1,)
    rows, cols = (_snap(v, bins) for v in (a_z, s_y))
    i = np.searchsorted(inner, rows, side="right")                       # (N,) row
    j = np.searchsorted(inner, cols, side="right")                       # (N,) column
    grid = np.zeros((bins, bins))
    np.add.at(grid, (i, j), 1.0)
    return grid * (100.0 / a_z.size) if a_z.size else grid


def _snap(v, bins):
    """``v`` with values within EDGE_TOL of a bin edge k/bins moved onto the edge."""
    edge = np.round(v * bins) / bins
    return np.where(np.abs(v - edge) <= EDGE_TOL, edge, v)


def foreground_scores(a, s, y, z):
    """Per-instance ``a_z = a[n, z_n]`` and ``s_y = s[n, y_n]``.

    ``a`` (N, m) attention weights, ``s`` (N, C) class scores of the inference
    rule, ``y`` (N,) labels, ``z`` (N,) true foreground positions.
    """
    a = np.asarray(to_numpy(a), dtype=np.float64)
    s = np.asarray(to_numpy(s), dtype=np.float64)
    y = np.asarray(to_numpy(y)).reshape(-1)
    z = np.asarray(to_numpy(z)).reshape(-1)
    if a.ndim != 2 or s.ndim != 2:
        raise InputError(f"attention must be (N, m) and scores (N, C), got {a.shape} "
                         f"and {s.shape}")
    n = a.shape[0]
    if not (s.shape[0] == y.shape[0] == z.shape[0] == n):
        raise InputError(f"a {a.shape}, s {s.shape}, y {y.shape} and z {z.shape} must "
                         "have the same number of instances")
    for name, v, hi in (("y", y, s.shape[1]), ("z", z, a.shape[1])):
        if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= hi):
            raise InputError(f"{name} must hold integers in 0..{hi - 1}")
    rows = np.arange(n)
    return a[rows, z], s[rows, y]


def summarise(a, s, y, z, threshold=0.8, bins=5):
    """Accuracy, SAIF, the four focus-prediction fractions and the heat map.

    Returns a JSON-ready dict: ``n``, ``accuracy`` (argmax of ``s`` equals
    ``y``), ``saif``, ``ftpt``, ``ftpf``, ``ffpt``, ``ffpf`` as fractions of N,
    ``threshold`` and ``heatmap`` (list of lists, rows = a_z bins, columns =
    s_y bins, percent).
    """
    a_z, s_y = foreground_scores(a, s, y, z)
    counts = focus_prediction_counts(a_z, s_y, threshold)
    n = a_z.size
    s = np.asarray(to_numpy(s))
    y = np.asarray(to_numpy(y)).reshape(-1)
    out = {"n": int(n),
           "accuracy": float(np.mean(np.argmax(s, axis=1) == y)) if n else float("nan"),
           "saif": float(counts["saif"])}
    out.update({k: counts[k] / n if n else float("nan") for k in COUNT_KEYS})
    out["threshold"] = float(threshold)
    out["heatmap"] = heatmap(a_z, s_y, bins).tolist()
    return out
