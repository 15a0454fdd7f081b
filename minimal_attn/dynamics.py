r"""Simulated gradient descent on the exact population, read off as (mu, nu).

Vashisht & Ramaswamy (2023), Section 4. Full-batch gradient descent with step
``lr`` on :func:`minimal_attn.data.exact_population` is an Euler discretisation
of the population gradient flow, so after ``k`` steps it approximates the ODE
solution of :mod:`minimal_attn.ode` at time ``t = k * lr``.

The parameters stay on the invariant set of Theorem 2,
:math:`w_k = \mu (s_k - \bar s)` and :math:`u = \nu \sum_k s_k`; we read

.. math:: \mu = \frac{\langle W, S - \bar s\rangle_F}{C - 1}, \qquad
          \nu = u^\top \bar s,

which are exact on that set (``||S - s_bar||_F^2 = C - 1``, ``s_bar . sum(s) = 1``).
"""

import numpy as np

from minimal_attn import fcam, ode
from minimal_attn._xp import get_xp, like, namespace
from minimal_attn.data import exact_population, fixed_log_attention
from minimal_attn.errors import check_alpha, check_int_at_least, check_paradigm, check_positive
from minimal_attn.losses import LOSS_PARADIGMS


def read_mu_nu(params, S):
    """(mu, nu) of parameters on the invariant set; S (C, d) are the foreground vectors."""
    xp = get_xp(params["W"], S)
    s_bar = xp.mean(S, axis=0)                              # (d,)
    M = S - s_bar                                           # (C, d)
    mu = float(xp.sum(params["W"] * M) / (S.shape[0] - 1))
    nu = float(xp.sum(params["u"] * s_bar))
    return mu, nu


def simulate(paradigm, m, n_classes, t_max, lr=0.02, alpha=None, t_eval=None,
             d=None, n_base=1, seed=0, callback=None, xp=np):
    r"""Gradient descent from zero on the exact population, recorded at ``t_eval``.

    Parameters
    ----------
    paradigm : ``sa``, ``ha`` or ``lv``
    t_max : simulate ``round(t_max / lr)`` steps
    lr : step size (the ODE time of step k is ``k * lr``)
    alpha : None for the joint flow (Theorem 2); a fixed focus in [0, 1] for
        Theorem 1 (only W trains, the attention is held at alpha)
    t_eval : increasing times >= 0 to record (:func:`ode.check_times`), each rounded to
        the nearest step; as in :func:`ode.solve`, times past ``t_max`` extend the run to
        the last one. Default: every step
    callback : optional ``callback(step)`` after each gradient step (step = 1, 2, ...)
    xp : array namespace module to run the descent in (numpy, cupy, torch, ...);
        the data are built with NumPy and moved there once

    Returns
    -------
    dict of arrays ``t``, ``mu``, ``nu``, ``alpha``, ``beta`` (like :func:`ode.solve`).
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    m = check_int_at_least("m", m, 2)
    C = check_int_at_least("C (classes)", n_classes, 2)
    check_positive("t-max", t_max)
    check_positive("lr", lr)
    alpha = None if alpha is None else check_alpha(alpha)
    data = exact_population(m, C, d=d, n_base=n_base, seed=seed)
    if t_eval is None:
        n_steps = int(round(t_max / lr))
        record = np.arange(n_steps + 1)
    else:
        record = np.rint(ode.check_times(t_eval) / lr).astype(int)
        n_steps = int(max(round(t_max / lr), record[-1]))
    xp = namespace(xp)
    X, y, S = (like(xp, a) for a in (data.X, data.y, data.S))
    log_att = None if alpha is None else like(xp, fixed_log_attention(data.z, m, alpha))
    params = fcam.init_params(data.X.shape[2], C, xp=xp)
    rows = {}
    wanted = set(record.tolist())
    for step in range(n_steps + 1):
        if step in wanted:
            rows[step] = read_mu_nu(params, S)
        if step == n_steps:
            break
        _, grads = fcam.loss_and_grad(params, X, y, paradigm, log_att)
        params = {k: params[k] - lr * grads[k] for k in params}
        if callback is not None:
            callback(step + 1)
    mu, nu = (np.array([rows[k][i] for k in record]) for i in (0, 1))
    if alpha is None:
        al = ode.alpha_of(nu, m)
    else:
        al = np.full_like(mu, alpha)
        nu = np.full_like(mu, ode.nu_of(alpha, m))
    return {"t": record * lr, "mu": mu, "nu": nu, "alpha": al, "beta": ode.beta_of(mu, C)}
