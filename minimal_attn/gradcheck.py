r"""Finite-difference checks for hand-written gradients (float64, xp-generic).

The directional check compares :math:`\langle \nabla L, v\rangle` with the
central difference :math:`(L(p + \epsilon v) - L(p - \epsilon v)) / 2\epsilon`
for a random direction ``v`` over every parameter at once: two forward passes,
whatever the number of parameters.
"""

import numpy as np

from minimal_attn._xp import get_xp
from minimal_attn.errors import InputError


def directional_check(loss_fn, grads, params, eps=1e-6, seed=0):
    """Return (analytic, numeric) directional derivatives of ``loss_fn`` at ``params``.

    ``loss_fn(params) -> float``; ``grads`` and ``params`` are dicts with the same keys.
    """
    if set(grads) != set(params):
        raise InputError(f"grads and params must have the same keys, got {sorted(grads)} and "
                         f"{sorted(params)}; return one gradient per parameter")
    rng = np.random.default_rng(seed)
    direction = {}
    for k, p in params.items():
        xp = get_xp(p)
        direction[k] = xp.asarray(rng.standard_normal(p.shape))
    plus = {k: params[k] + eps * direction[k] for k in params}
    minus = {k: params[k] - eps * direction[k] for k in params}
    numeric = (loss_fn(plus) - loss_fn(minus)) / (2 * eps)
    analytic = float(sum(float((grads[k] * direction[k]).sum()) for k in params))
    return analytic, numeric


def full_check(loss_fn, params, eps=1e-6):
    """Central-difference gradient of every entry (small problems only); dict like params."""
    out = {}
    for k, p in params.items():
        g = np.zeros(p.shape)
        for idx in np.ndindex(p.shape):
            plus = {kk: vv.copy() for kk, vv in params.items()}
            minus = {kk: vv.copy() for kk, vv in params.items()}
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (loss_fn(plus) - loss_fn(minus)) / (2 * eps)
        out[k] = g
    return out
