r"""The proxy's logits at initialisation: Snell Eq. (15), Appendix A.2.

Under gradient flow from :math:`W, e \sim N(0, I/d)`,
the logits :math:`W e_i` move at :math:`\tau = 0` with velocity
:math:`\dot W e_i + W \dot e_i \to 2 (C[i, :] - \mathrm{mean}_o C[i, o])` as d
grows, C the count table of Snell Eq. (16); :func:`init_logit_velocity` computes both
sides. Snell Eq. (15) as printed has the probabilities :math:`\theta^{px}_{i,o} = \sigma(W e_i)_o`
on its left; its derivation (A.2, Snell Eqs. (53)-(54)) is for the logits :math:`\hat\theta = W e`,
which is what holds and what is implemented here. The probabilities move slower by the
factor |O| (the softmax Jacobian at uniform p is :math:`(I - 11^\top/|O|)/|O|`;
tested).

The proxy itself (its loss (14) and hand-written gradients) is :mod:`minimal_attn.proxy`.
"""

import numpy as np

from minimal_attn.ibm1 import count_table
from minimal_attn.proxy import init_params, loss_and_grads, make_batch


def logit_velocity(params, src, tgt):
    r"""The gradient-flow velocity of the logit table :math:`Z = E W^\top`, shape (|I|, |O|).

    With :math:`\dot W = -\partial\mathcal L/\partial W` and
    :math:`\dot e = -\partial\mathcal L/\partial e` for the summed loss (14),
    :math:`\dot Z = \dot E W^\top + E \dot W^\top`; row i holds
    :math:`\frac{d}{d\tau} W e_i`.
    """
    _, g = loss_and_grads(params, make_batch(src, tgt))
    return -(g["e"] @ params["W"].T + params["e"] @ g["W"].T)           # (|I|, |O|)


def init_logit_velocity(src, tgt, n_src, n_tgt, d, rng):
    r"""Both sides of Snell Eq. (15): the logit velocity at initialisation and its large-d limit.

    Returns
    -------
    exact : array, shape (|I|, |O|)   :func:`logit_velocity` at a fresh N(0, I/d) draw
    limit : array, shape (|I|, |O|)   :math:`2 (C - \mathrm{mean}_o C)`, C from Snell Eq. (16)

    Notes
    -----
    The limit is exact whenever :math:`e_i \cdot e_j = \delta_{ij}`,
    :math:`W_o \cdot W_{o'} = \delta_{oo'}` and :math:`W e_i = 0` (so
    :math:`p_t` is uniform); a N(0, I/d) draw meets these up to O(1/sqrt(d)).
    """
    exact = logit_velocity(init_params(n_src, n_tgt, d, rng), src, tgt)
    C = count_table(src, tgt, n_src, n_tgt)                              # (|I|, |O|)
    return exact, 2.0 * (C - C.mean(axis=1, keepdims=True))


def init_velocity_error(src, tgt, n_src, n_tgt, dims, n_seeds=3, seed=0):
    """Relative Frobenius error of Snell Eq. (15), averaged over seeds, for each d in ``dims``.

    It shrinks like 1/sqrt(d): every inner product e_i.e_j and W_o.W_o' is
    within O(1/sqrt(d)) of its limit delta, and so is softmax(W ebar) of uniform.

    Returns
    -------
    float array, shape (len(dims),)
    """
    rng = np.random.default_rng(seed)
    out = []
    for d in dims:
        errs = []
        for _ in range(n_seeds):
            exact, limit = init_logit_velocity(src, tgt, n_src, n_tgt, int(d), rng)
            errs.append(np.linalg.norm(exact - limit) / np.linalg.norm(limit))
        out.append(float(np.mean(errs)))
    return np.array(out)
