r"""The linear focus-classify attention model (FCAM), forward and hand-written backward.

Vashisht & Ramaswamy (2023), Sections 2.3 and 4. Parameters are a dict keyed by
symbol:

* ``u`` (d,): linear focus, :math:`f(x) = u^\top x`, so scores ``X @ u`` are (N, m);
* ``W`` (C, d): linear classifier, :math:`g(x) = W x`.

The attention is :math:`a = \mathrm{softmax}(Xu)`. SA classifies
:math:`\tilde x = \sum_j a_j x_j`; HA and LV classify each segment
(:mod:`minimal_attn.losses`). The gradients below are the chain rule written
out (Appendix A.6-A.8, V&R Eqs. (7)-(12)); :mod:`tests.test_fcam` checks them
against finite differences and torch autograd.

A fixed focus (Section 3) is passed as ``log_attention`` (N, m): then ``u`` is
ignored and its gradient is zero.
"""

import numpy as np

from minimal_attn import losses
from minimal_attn._xp import get_xp, like
from minimal_attn.errors import (
    InputError,
    check_int_at_least,
    check_labels,
    check_paradigm,
    check_positive,
)


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
    paradigm = check_paradigm(paradigm)       # "SA" or a typo must not give the HA layout
    W, u = params["W"], params["u"]
    scores = X @ u if log_attention is None else log_attention        # (N, m)
    a = losses.attention(scores)                                       # (N, m)
    out = {"scores": scores, "a": a}
    if paradigm == "sa":
        x_tilde = (a[:, None, :] @ X)[:, 0, :]                         # (N, d) sum_j a_j x_j
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
    r"""Loss and its gradients ``{"W": dW, "u": du}``, V&R Eqs. (7)-(12).

    The paper writes the population gradients as means over the C labels; here
    they are means over the N instances of ``X``. SA (V&R Eqs. (7)-(8)): with
    :math:`\delta_n = \sigma(W\tilde x_n) - e_{y_n}`,

    .. math:: \nabla_W L = \tfrac1N \sum_n \delta_n \tilde x_n^\top, \qquad
              \nabla_u L = \tfrac1N \sum_n \sum_j a_{nj}
                 \big(\delta_n^\top W (x_{nj} - \tilde x_n)\big)\, x_{nj}.

    HA and LV (V&R Eqs. (9)-(12)): :math:`\nabla_W L = \sum_{n,j} \partial L/\partial g(x_{nj})
    \, x_{nj}^\top` and :math:`\nabla_u L = \sum_{n,j} \partial L/\partial f_{nj}\, x_{nj}`
    with the per-segment terms of :func:`losses.value_and_grad_ha` / ``_lv``.
    Identity used for ``du``: :math:`\sum_j c_j (x_j - \tilde x) = \sum_j (c_j -
    a_j \sum_k c_k) x_j`, i.e. the paper's centred :math:`x_j - \tilde x` moves
    onto the scores (``dscores``), computed in pairwise form (:func:`losses.softmax_backward`).
    """
    paradigm = check_paradigm(paradigm, losses.LOSS_PARADIGMS)
    xp = get_xp(X, y)
    W = params["W"]
    out = forward(params, X, paradigm, log_attention)
    scores, logits, a = out["scores"], out["logits"], out["a"]
    if paradigm == "sa":
        value, dlogits = losses.value_and_grad_sa(logits, y)           # (N, C)
        dW = dlogits.T @ out["x_tilde"]                                # (C, d), V&R Eq. (7)
        dx_tilde = dlogits @ W                                         # (N, d)
        da = (X @ dx_tilde[:, :, None])[..., 0]                        # (N, m) dx~ . x_j
        # (A.6's line for dx~/du drops the sum over j; its result, V&R Eq. (8), has it)
        dscores = losses.softmax_backward(a, da)                       # (N, m), V&R Eq. (8)
    else:
        value, dscores, dlogits = losses.value_and_grad(paradigm, scores, logits, y)
        C, d = W.shape
        # V&R Eq. (9) (HA), V&R Eq. (11) (LV): sum over (n, j) of dlogits_nj x_nj^T
        dW = xp.reshape(dlogits, (-1, C)).T @ xp.reshape(X, (-1, d))   # (C, d)
    if log_attention is None:
        # V&R Eq. (8) SA, V&R Eq. (10) HA, V&R Eq. (12) LV: sum over (n, j) of dscores_nj x_nj
        du = xp.reshape(dscores, (-1,)) @ xp.reshape(X, (-1, X.shape[-1]))  # (d,)
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
          seed=0, log_attention=None, callback=None, shuffle=False):
    """Plain (full-batch or mini-batch) gradient descent on the linear FCAM.

    ``paradigm="hybrid"`` trains SA for ``switch_step`` steps, then HA
    (Section 5 of the paper). ``callback(step, params, loss)`` runs after every
    step. Returns the final parameters and the list of per-step losses.

    Mini-batches (``batch_size``) are ``batch_size`` instances drawn without replacement
    at every step; with ``shuffle`` they are instead consecutive slices of a permutation
    drawn anew every ``ceil(N / batch_size)`` steps, so those steps are one pass over the
    data (an epoch; the last slice holds the remainder).
    """
    paradigm = check_paradigm(paradigm)
    n = X.shape[0]
    # checked here once: a mini-batch step would see only the labels it draws
    check_labels(y, params["W"].shape[0], n=n)
    check_positive("lr", lr, param="lr")
    steps = check_int_at_least("steps", steps, 0, param="steps")
    if batch_size is not None:
        batch_size = check_int_at_least("batch_size", batch_size, 1, param="batch_size")
        if batch_size > n:
            raise InputError(f"batch_size must be at most N = {n} (the number of instances), "
                             f"got {batch_size}", param="batch_size")
    if paradigm == "hybrid" and switch_step is None:
        switch_step = steps // 2
    rng = np.random.default_rng(seed)
    xp = get_xp(X, y)
    params = {k: xp.asarray(v, copy=True) for k, v in params.items()}
    per_pass = -(-n // batch_size) if batch_size is not None else 1
    history = []
    for step in range(steps):
        Xb, yb, la = X, y, log_attention
        if batch_size is not None:
            if shuffle:
                if step % per_pass == 0:
                    order = rng.permutation(n)
                k = step % per_pass
                idx = like(xp, order[k * batch_size:(k + 1) * batch_size], X)
            else:
                idx = like(xp, rng.choice(n, batch_size, replace=False), X)
            Xb, yb = xp.take(X, idx, axis=0), xp.take(y, idx, axis=0)
            la = None if la is None else xp.take(la, idx, axis=0)
        value, grads = loss_and_grad(params, Xb, yb, losses.phase(paradigm, step, switch_step), la)
        for k in params:
            params[k] = params[k] - lr * grads[k]
        history.append(value)
        if callback is not None:
            callback(step, params, value)
    return params, history
