r"""The linear focus-classify attention model (FCAM), forward and hand-written backward.

Vashisht & Ramaswamy (2023), Sections 2.3 and 4. Parameters are a dict keyed by
symbol:

* ``u`` (d,): linear focus, :math:`f(x) = u^\top x`, so scores ``X @ u`` are (N, m);
* ``W`` (C, d): linear classifier, :math:`g(x) = W x`.

The attention is :math:`a = \mathrm{softmax}(Xu)`. SA classifies
:math:`\tilde x = \sum_j a_j x_j`; HA and LV classify each segment
(:mod:`minimal_attn.losses`). The gradients below are the chain rule written
out (Appendix A.6-A.8, Eqs. (7)-(12)); :mod:`tests.test_fcam` checks them
against finite differences and torch autograd.

A fixed focus (Section 3) is passed as ``log_attention`` (N, m): then ``u`` is
ignored and its gradient is zero.
"""

import numpy as np

from . import losses
from ._xp import get_xp
from .errors import check_paradigm


def init_params(d, n_classes, scale=0.0, seed=None, xp=np):
    """Zero (``scale=0``, the paper's analysis) or Gaussian initial parameters."""
    rng = np.random.default_rng(seed)
    W = scale * rng.standard_normal((n_classes, d))
    u = scale * rng.standard_normal(d)
    return {"W": xp.asarray(W), "u": xp.asarray(u)}


def forward(params, X, paradigm, log_attention=None):
    """Scores, attention and classifier logits of the linear FCAM.

    Parameters
    ----------
    params : dict with ``W`` (C, d) and ``u`` (d,)
    X : array (N, m, d), mosaics
    paradigm : ``sa``, ``ha``, ``lv`` or ``hybrid`` (a hybrid phase must be
        resolved to ``sa``/``ha`` by the caller; ``hybrid`` here means HA)
    log_attention : optional (N, m), a fixed focus overriding ``softmax(X u)``

    Returns
    -------
    dict with ``scores`` (N, m), ``a`` (N, m), ``logits`` ((N, C) for SA,
    (N, m, C) otherwise) and, for SA, ``x_tilde`` (N, d).
    """
    xp = get_xp(X)
    W, u = params["W"], params["u"]
    scores = X @ u if log_attention is None else log_attention        # (N, m)
    a = losses.attention(scores)                                       # (N, m)
    out = {"scores": scores, "a": a}
    if paradigm == "sa":
        x_tilde = xp.einsum("nm,nmd->nd", a, X)                        # (N, d)
        out["x_tilde"] = x_tilde
        out["logits"] = x_tilde @ W.T                                  # (N, C)
    else:
        out["logits"] = X @ W.T                                        # (N, m, C)
    return out


def loss(params, X, y, paradigm, log_attention=None):
    """Batch-mean loss of the linear FCAM under ``paradigm`` (sa, ha, lv)."""
    paradigm = check_paradigm(paradigm, losses.LOSS_PARADIGMS)
    out = forward(params, X, paradigm, log_attention)
    return float(losses.loss(paradigm, out["scores"], out["logits"], y))


def loss_and_grad(params, X, y, paradigm, log_attention=None):
    r"""Loss and its gradients ``{"W": dW, "u": du}``, Eqs. (7)-(12).

    SA (Eqs. (7)-(8)): with :math:`\delta_n = \sigma(W\tilde x_n) - e_{y_n}`,

    .. math:: \nabla_W L = \tfrac1N \sum_n \delta_n \tilde x_n^\top, \qquad
              \nabla_u L = \tfrac1N \sum_n \sum_j a_{nj}
                 \big(\delta_n^\top W (x_{nj} - \tilde x_n)\big)\, x_{nj}.

    HA and LV (Eqs. (9)-(12)): :math:`\nabla_W L = \sum_{n,j} \partial L/\partial g(x_{nj})
    \, x_{nj}^\top` and :math:`\nabla_u L = \sum_{n,j} \partial L/\partial f_{nj}\, x_{nj}`
    with the per-segment terms of :func:`losses.grad_ha` / :func:`losses.grad_lv`.
    """
    paradigm = check_paradigm(paradigm, losses.LOSS_PARADIGMS)
    xp = get_xp(X)
    W = params["W"]
    out = forward(params, X, paradigm, log_attention)
    scores, logits, a = out["scores"], out["logits"], out["a"]
    if paradigm == "sa":
        value, dlogits = losses.value_and_grad_sa(logits, y)           # (N, C)
        dW = dlogits.T @ out["x_tilde"]                                # (C, d)
        dx_tilde = dlogits @ W                                         # (N, d)
        da = xp.einsum("nd,nmd->nm", dx_tilde, X)                      # (N, m)
        # softmax backward: df_j = a_j (da_j - sum_k a_k da_k)
        dscores = a * (da - xp.sum(a * da, axis=1, keepdims=True))
    else:
        value_and_grad = {"ha": losses.value_and_grad_ha, "lv": losses.value_and_grad_lv}
        value, dscores, dlogits = value_and_grad[paradigm](scores, logits, y)
        C, d = W.shape
        dW = dlogits.reshape(-1, C).T @ X.reshape(-1, d)               # (C, d)
    if log_attention is None:
        du = dscores.reshape(-1) @ X.reshape(-1, X.shape[-1])          # (d,)
    else:
        du = xp.zeros_like(params["u"])
    return float(value), {"W": dW, "u": du}


def predict(params, X, paradigm, log_attention=None):
    """Class scores s (N, C) by the paradigm's inference rule (s^SA, s^HA, s^LV)."""
    paradigm = check_paradigm(paradigm)
    phase = "sa" if paradigm == "sa" else "ha"
    out = forward(params, X, phase, log_attention)
    return losses.infer(paradigm, out["scores"], out["logits"])


def train(params, X, y, paradigm, lr, steps, switch_step=None, batch_size=None,
          seed=0, log_attention=None, callback=None):
    """Plain (full-batch or mini-batch) gradient descent on the linear FCAM.

    ``paradigm="hybrid"`` trains SA for ``switch_step`` steps, then HA
    (Section 5 of the paper). ``callback(step, params, loss)`` runs after every
    step. Returns the final parameters and the list of per-step losses.
    """
    paradigm = check_paradigm(paradigm)
    if paradigm == "hybrid" and switch_step is None:
        switch_step = steps // 2
    rng = np.random.default_rng(seed)
    params = {k: v.copy() for k, v in params.items()}
    n = X.shape[0]
    history = []
    for step in range(steps):
        idx = slice(None) if batch_size is None else rng.choice(n, batch_size, replace=False)
        la = None if log_attention is None else log_attention[idx]
        value, grads = loss_and_grad(params, X[idx], y[idx],
                                     losses.phase(paradigm, step, switch_step), la)
        for k in params:
            params[k] = params[k] - lr * grads[k]
        history.append(value)
        if callback is not None:
            callback(step, params, value)
    return params, history
