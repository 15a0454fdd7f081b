r"""Gradient-flow ODEs of the linear orthogonal setting, Theorems 1-2, V&R Eqs. (1)-(6).

Vashisht & Ramaswamy (2023), Section 4. Under Assumptions 1-3 with zero
initialisation, gradient flow keeps the linear FCAM on a two-dimensional
invariant set,

.. math:: w_k(t) = \mu(t)\,(s_k - \bar s), \qquad u(t) = \nu(t) \textstyle\sum_k s_k,

where :math:`\bar s = \frac1C\sum_k s_k`. Then :math:`u^\top s_y = \nu` and
:math:`u^\top b = 0` for every background ``b``, so the foreground gets the
attention :math:`\alpha = e^\nu/(e^\nu + m - 1)`; the true-class logit exceeds
every other by :math:`\mu`, so a clean foreground is classified with
:math:`\beta = e^\mu/(e^\mu + C - 1)`. The population losses are

.. math::
    L^{SA} = -\log\beta(\alpha\mu), \quad
    L^{HA} = -\alpha\log\beta(\mu) + (1-\alpha)\log C, \quad
    L^{LV} = -\log\big(\alpha\beta(\mu) + (1-\alpha)/C\big),

and, because :math:`\|W\|_F^2 = (C-1)\mu^2` and :math:`\|u\|^2 = C\nu^2` on
this set, gradient flow on (W, u) reads

.. math:: \dot\mu = -\frac{1}{C-1}\frac{\partial L}{\partial\mu}, \qquad
          \dot\nu = -\frac{1}{C}\frac{\partial L}{\partial\nu}.

Written out (with :math:`\beta_a = \beta(\alpha\mu)` for SA and
:math:`Z = \alpha\beta + (1-\alpha)/C` for LV; :func:`mu_dot`, :func:`nu_dot`
state how these are the paper's V&R Eqs. (1)-(6) rewritten):

=====  ==========================================  ==============================================
       :math:`\dot\mu`                             :math:`\dot\nu`
=====  ==========================================  ==============================================
SA     :math:`\alpha(1-\beta_a)/(C-1)`             :math:`\mu\,\alpha(1-\alpha)(1-\beta_a)/C`
HA     :math:`\alpha(1-\beta)/(C-1)`               :math:`\alpha(1-\alpha)\log(C\beta)/C`
LV     :math:`\alpha\beta(1-\beta)/((C-1)Z)`       :math:`\alpha(1-\alpha)(\beta-1/C)/(CZ)`
=====  ==========================================  ==============================================

Theorem 1 freezes the focus (:math:`\nu` constant, so :math:`\alpha` fixed) and
integrates :math:`\dot\mu` in closed form, giving :math:`t(\mu)`
(:func:`theorem1_time`), inverted numerically by :func:`theorem1_mu`.
Theorem 2 is the joint flow from :math:`\mu = \nu = 0` (:func:`solve`).
``tests/test_ode.py`` checks the right-hand sides against the gradient of the
exact population loss and the trajectories against simulated gradient descent.

This module is host-side NumPy on purpose: its state is two scalars, and
:func:`solve` hands the right-hand side to SciPy's ``solve_ivp``, which needs
NumPy. Array inputs from other namespaces must be converted with
:func:`minimal_attn._xp.to_numpy` first.
"""

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import expit

from minimal_attn._ode_numerics import (  # noqa: F401 (ode._log_beta in tests)
    _beta_minus_inv_c,
    _log_beta,
    _log_c_beta,
    _one_minus_beta,
)
from minimal_attn.errors import (
    InputError,
    check_alpha,
    check_int_at_least,
    check_paradigm,
    check_positive,
)
from minimal_attn.losses import LOSS_PARADIGMS


def beta_of(mu, n_classes):
    r""":math:`\beta(\mu) = e^\mu / (e^\mu + C - 1)`, overflow-free."""
    return expit(np.asarray(mu, dtype=float) - np.log(n_classes - 1))


def alpha_of(nu, m):
    r""":math:`\alpha(\nu) = e^\nu / (e^\nu + m - 1)`, the foreground attention."""
    return expit(np.asarray(nu, dtype=float) - np.log(m - 1))


def nu_of(alpha, m):
    r"""Inverse of :func:`alpha_of`: :math:`\nu = \log(\alpha(m-1)/(1-\alpha))`."""
    with np.errstate(divide="ignore"):
        return np.log(alpha * (m - 1)) - np.log1p(-alpha)


def _alpha_values(alpha):
    """``alpha`` as a float in [0, 1], or as a float array of them (a grid of focus values,
    or alpha(t) along a Theorem 2 trajectory), for the closed forms that broadcast."""
    if np.ndim(alpha) == 0:
        return check_alpha(alpha)
    try:
        a = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError):
        raise InputError("alpha must be numbers in [0, 1]: give a number or an array of "
                         "them") from None
    bad = a[~((a >= 0) & (a <= 1))]
    if bad.size:
        raise InputError(f"alpha must lie in [0, 1] everywhere, got {bad.flat[0]:g}")
    return a


def population_loss(paradigm, mu, alpha, n_classes):
    """Population loss of Section 4 at classifier strength ``mu`` and focus ``alpha``: the
    first lines of V&R App. A.6 (SA), A.7 (HA) and A.8 (LV) on the invariant set.

    ``alpha``: in [0, 1], a number or an array; ``mu``: a number or an array (any real
    values); they broadcast.
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    alpha = _alpha_values(alpha)
    C = check_int_at_least("C (classes)", n_classes, 2)
    mu = np.asarray(mu, dtype=float)
    if paradigm == "sa":
        return np.logaddexp(0.0, np.log(C - 1) - alpha * mu)   # -log beta(alpha mu)
    if paradigm == "ha":
        return -alpha * _log_beta(mu, C) + (1 - alpha) * np.log(C)
    # -log(alpha beta + (1 - alpha)/C) = -log1p(-q), q = alpha (1 - beta) + (1 - alpha)(1 - 1/C)
    # the loss's distance from 1, each term exact: keeps its digits as the loss goes to 0;
    # below 0.5 the log-space sum stays finite where beta underflows (mu < -745)
    q = alpha * _one_minus_beta(mu, C) + (1 - alpha) * (C - 1) / C
    with np.errstate(divide="ignore"):                 # log 0 = -inf at alpha = 0 or 1
        log_M = np.logaddexp(np.log(alpha) + _log_beta(mu, C), np.log1p(-alpha) - np.log(C))
    return np.where(q < 0.5, -np.log1p(-np.minimum(q, 0.5)), -log_M)[()]


def mu_dot(paradigm, mu, alpha, n_classes):
    r""":math:`\dot\mu` of Theorem 1, V&R Eqs. (1)-(3), at focus ``alpha`` (valid at 0 and 1).

    The paper's forms are rewritten with the identity
    :math:`1 - \beta(x) = (C-1)/(e^x + C - 1)`, which never overflows:
    :math:`\alpha/(e^{\alpha\mu} + C - 1) = \alpha(1-\beta(\alpha\mu))/(C-1)` and
    :math:`\beta/e^\mu = (1-\beta)/(C-1)`. Called in the solver's loop, so ``alpha`` and
    ``n_classes`` are trusted (:func:`solve` checks them once).
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    C = n_classes
    if paradigm == "sa":
        return alpha * _one_minus_beta(alpha * mu, C) / (C - 1)                  # V&R Eq. (1)
    beta, one_minus_beta = beta_of(mu, C), _one_minus_beta(mu, C)
    if paradigm == "ha":
        return alpha * one_minus_beta / (C - 1)                                 # V&R Eq. (2)
    Z = alpha * beta + (1 - alpha) / C
    return alpha * beta * one_minus_beta / ((C - 1) * Z)                        # V&R Eq. (3)


def nu_dot(paradigm, mu, alpha, n_classes, one_minus_alpha=None):
    r""":math:`\dot\nu` of Theorem 2, V&R Eqs. (4)-(6), at foreground attention ``alpha``.

    Rewritten with :math:`1 - \beta(x) = (C-1)/(e^x + C - 1)` (SA) and, for LV,
    :math:`\beta/Z - 1 = (1-\alpha)(\beta - 1/C)/Z` (because
    :math:`Z = \alpha\beta + (1-\alpha)/C`). ``one_minus_alpha``: :math:`1 - \alpha`
    computed apart (:func:`rhs`), since ``1 - alpha`` is 0 once alpha rounds to 1
    (nu above 37), which would freeze nu. HA's :math:`\log C + \log\beta` and LV's
    :math:`\beta - 1/C` vanish at mu = 0 and are computed without cancelling there
    (:func:`_log_c_beta`, :func:`_beta_minus_inv_c`); both stay finite where
    :math:`\beta` underflows (mu < -745).
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    C = n_classes
    rest = 1 - alpha if one_minus_alpha is None else one_minus_alpha      # 1 - alpha
    if paradigm == "sa":
        return mu * alpha * rest * _one_minus_beta(alpha * mu, C) / C           # V&R Eq. (4)
    if paradigm == "ha":
        return alpha * rest * _log_c_beta(mu, C) / C                           # V&R Eq. (5)
    Z = alpha * beta_of(mu, C) + rest / C
    return alpha * rest * _beta_minus_inv_c(mu, C) / (C * Z)                   # V&R Eq. (6)


def rhs(paradigm, mu, nu, m, n_classes):
    """Time derivatives (mu_dot, nu_dot) of Theorem 2, V&R Eqs. (1)-(6), with alpha = alpha(nu)."""
    alpha = alpha_of(nu, m)
    one_minus_alpha = expit(np.log(m - 1) - np.asarray(nu, dtype=float))   # 1 - alpha(nu)
    return (mu_dot(paradigm, mu, alpha, n_classes),
            nu_dot(paradigm, mu, alpha, n_classes, one_minus_alpha))


def check_times(t_eval, name="t_eval", param=None):
    """``t_eval`` as a float array (T,) of increasing times >= 0; one number is one time.

    The solver needs them strictly increasing, and a NaN or negative time has no point on
    a flow that starts at t = 0 (SciPy would fail obscurely or drop the row).
    """
    try:
        t = np.atleast_1d(np.asarray(t_eval, dtype=float))
    except (TypeError, ValueError):
        raise InputError(f"{name} must be numbers (times >= 0), got {t_eval!r}",
                         param=param) from None
    if t.ndim != 1 or t.size == 0:
        raise InputError(f"{name} must list at least one time >= 0, got shape {t.shape}",
                         param=param)
    bad = t[~(np.isfinite(t) & (t >= 0))]
    if bad.size:
        raise InputError(f"{name} times must be finite numbers >= 0, got {bad[0]:g}",
                         param=param)
    back = np.flatnonzero(np.diff(t) <= 0)
    if back.size:
        a, b = t[back[0]], t[back[0] + 1]
        raise InputError(f"{name} times must increase, got {a:g} then {b:g}: list each "
                         "time once, in order", param=param)
    return t


def solve(paradigm, m, n_classes, t_max, alpha=None, t_eval=None, n_points=401,
          rtol=1e-10, atol=1e-12):
    r"""Integrate the flow from :math:`\mu = 0` (and :math:`\nu = 0`) up to ``t_max``.

    Parameters
    ----------
    paradigm : ``sa``, ``ha`` or ``lv``
    m, n_classes : segments per mosaic and classes (both >= 2)
    t_max : final time (> 0)
    alpha : None for Theorem 2 (joint mu, nu from zero); a number in [0, 1]
        for Theorem 1 (focus frozen at alpha, so nu is constant)
    t_eval : increasing times >= 0 to report (:func:`check_times`; default: ``n_points``
        evenly spaced in [0, t_max]); times past ``t_max`` extend the run to the last one

    Returns
    -------
    dict of arrays ``t``, ``mu``, ``nu``, ``alpha``, ``beta``.
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    m = check_int_at_least("m", m, 2)
    C = check_int_at_least("C (classes)", n_classes, 2)
    check_positive("t-max", t_max)
    if t_eval is None:
        t_eval = np.linspace(0.0, t_max, check_int_at_least("n_points", n_points, 1))
    t_eval = check_times(t_eval)
    if alpha is None:
        def f(_, state):
            return rhs(paradigm, state[0], state[1], m, C)
        y0 = [0.0, 0.0]
    else:
        # Theorem 1: nu is frozen (possibly at +-inf for alpha = 1 or 0), so only mu moves
        alpha = check_alpha(alpha)

        def f(_, state):
            return [mu_dot(paradigm, state[0], alpha, C)]
        y0 = [0.0]
    sol = solve_ivp(f, (0.0, float(max(t_max, t_eval.max()))), y0,
                    method="LSODA", t_eval=t_eval, rtol=rtol, atol=atol)
    if not sol.success:  # pragma: no cover - the flows are smooth and monotone
        raise RuntimeError(f"ODE solver failed: {sol.message}")
    mu = sol.y[0]
    if alpha is None:
        nu = sol.y[1]
        al = alpha_of(nu, m)
    else:
        nu = np.full_like(mu, nu_of(alpha, m))
        al = np.full_like(mu, alpha)
    return {"t": sol.t, "mu": mu, "nu": nu, "alpha": al, "beta": beta_of(mu, C)}


def theorem1_time(paradigm, mu, alpha, n_classes):
    r"""Closed form of Theorem 1: the time at which the fixed-focus flow reaches ``mu``.

    Integrating :math:`dt = d\mu / \dot\mu` from :math:`\mu = 0`:

    .. math::
        t^{SA} = \frac{e^{\alpha\mu} - 1}{\alpha^2} + \frac{(C-1)\mu}{\alpha}, \qquad
        t^{HA} = \frac{e^{\mu} - 1 + (C-1)\mu}{\alpha},

    .. math::
        t^{LV} = e^\mu - 1 + (C-1)\mu + \frac{1-\alpha}{C\alpha}
                 \big(e^\mu - 1 + 2(C-1)\mu + (C-1)^2(1 - e^{-\mu})\big).
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    alpha = _alpha_values(alpha)               # a number, or an array that broadcasts
    C = check_int_at_least("C (classes)", n_classes, 2)
    mu = np.asarray(mu, dtype=float)
    if paradigm == "sa":
        return np.expm1(alpha * mu) / alpha / alpha + (C - 1) * mu / alpha  # alpha**2: underflow
    if paradigm == "ha":
        return (np.expm1(mu) + (C - 1) * mu) / alpha
    base = np.expm1(mu) + (C - 1) * mu
    coef = (1 - alpha) / (C * alpha)
    with np.errstate(invalid="ignore"):    # 0 * inf where e^mu overflows: the term is 0
        extra = np.where(coef == 0, 0.0, coef * (np.expm1(mu) + 2 * (C - 1) * mu
                                                 - (C - 1) ** 2 * np.expm1(-mu)))
    return (base + extra)[()]


def theorem1_mu(paradigm, t, alpha, n_classes, iterations=2200):
    r""":math:`\mu(t)` at a fixed focus ``alpha``: the root of ``theorem1_time(mu) = t``.

    ``t`` may be an array (all times are solved at once by vectorised
    bisection: ``t(mu)`` increases, and Newton is unsafe because the LV
    ``t(mu)`` is concave near 0 for small alpha). The bisection halves until every
    answer is at float resolution *relative to itself* (a tiny mu, e.g. at alpha
    1e-300, keeps its digits; about 60 halvings for mu of order 1), at most
    ``iterations`` times. ``alpha = 0`` gives :math:`\mu \equiv 0` (no signal); a time
    ``t <= 0`` gives 0 and ``t = inf`` gives inf. ``alpha`` must lie in [0, 1]: below 0,
    ``t(mu)`` never reaches ``t`` and the search for a bracket would not end.
    Returns an array shaped like ``atleast_1d(t)``.
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    alpha = check_alpha(alpha)
    n_classes = check_int_at_least("C (classes)", n_classes, 2)
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if np.isnan(t).any():
        raise InputError("t must hold times, got nan: give numbers (inf is allowed)")
    if alpha == 0 or t.size == 0:
        return np.zeros_like(t)
    t_pos = np.where(np.isinf(t), 0.0, np.maximum(t, 0.0))   # inf: answered at the end
    with np.errstate(over="ignore"):
        hi = 1.0
        while theorem1_time(paradigm, hi, alpha, n_classes) < t_pos.max():
            hi *= 2.0
        lo, hi = np.zeros_like(t), np.full_like(t, hi)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            above = theorem1_time(paradigm, mid, alpha, n_classes) >= t_pos
            lo, hi = np.where(above, lo, mid), np.where(above, mid, hi)
            if np.all((hi - lo <= 4 * np.finfo(float).eps * hi) | (t_pos == 0)):
                break
    return np.where(t > 0, np.where(np.isinf(t), np.inf, 0.5 * (lo + hi)), 0.0)
