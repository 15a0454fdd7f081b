r"""The three attention losses, each with its backward beside it, and their inference rules.

Vashisht & Ramaswamy (2023), Section 2.3. An instance is a mosaic of ``m``
segments ``x_1..x_m`` with label ``y``. A focus model gives one score per
segment, ``f_j = f(x_j)``, and the attention is ``a = softmax(f)``. The losses
differ in where the classifier ``g`` is applied:

* **soft attention (SA)**: ``g`` sees :math:`\tilde x = \sum_j a_j x_j`;
  :math:`L^{SA} = -\log \sigma_y(g(\tilde x))`.
* **hard attention (HA)**: ``g`` sees one segment drawn from ``a``; the loss is
  its expectation :math:`L^{HA} = \sum_j a_j\,(-\log \sigma_y(g(x_j)))`.
* **latent-variable marginal likelihood (LV)**: the segment is a latent
  variable; :math:`L^{LV} = -\log \sum_j a_j\,\sigma_y(g(x_j))`.

Everything here works on *scores* ``(N, m)`` and classifier *logits*: ``(N, C)``
of ``g(x~)`` for SA, ``(N, m, C)`` of ``g(x_j)`` for HA and LV, so the losses do
not care what ``f`` and ``g`` are (linear maps, CNNs, LSTMs). Leading batch
axes before N are allowed (one problem per leading index, e.g. one per fixed
focus alpha); the loss is then one value per leading index. Each
``value_and_grad_*`` computes the loss, then right under it the gradients
``dscores`` and ``dlogits`` of the batch-mean loss; models chain them into
their own parameters (:mod:`minimal_attn.fcam` for the linear FCAM, whose
gradients are V&R Eqs. (7)-(12)). An optional ``weight`` (N,) replaces the
batch mean by a weighted sum (compressed data sets count duplicates that way).

All arithmetic is in log space, so scores and logits of magnitude 1e4 stay
finite. The functions take any array-API namespace (NumPy, CuPy, torch,
array-api-strict; :mod:`minimal_attn._xp`). The ``hybrid`` paradigm is a
schedule, not a loss: SA until a switch point, then HA (:func:`phase`).
"""

from minimal_attn import PARADIGMS, _numerics
from minimal_attn._numerics import batch_weights, log_softmax, logsumexp, softmax  # noqa: F401 (API)
from minimal_attn._xp import get_xp, like
from minimal_attn.errors import check_paradigm

#: The paradigms that are losses (hybrid is a schedule of two of them).
LOSS_PARADIGMS = PARADIGMS[:3]


# --------------------------------------------------------------- primitives
# log-sum-exp, log-softmax and softmax that keep their digits: _numerics.py
def attention(scores):
    """Attention weights ``a = softmax(f)`` over the m segments; scores (N, m)."""
    return softmax(scores, axis=-1)


def _label_shape(y, per_segment):
    """Shape that puts y (N,) on the instance axis: (N, 1) or, per segment, (N, 1, 1)."""
    return (y.shape[0], 1, 1) if per_segment else (y.shape[0], 1)


def _pick(logp, y, per_segment):
    """``logp[..., n, (j,) y_n]``: (..., N, C) -> (..., N) or (..., N, m, C) -> (..., N, m)."""
    xp = get_xp(logp, y)
    idx = xp.reshape(y, _label_shape(y, per_segment))
    idx = xp.broadcast_to(idx, logp.shape[:-1] + (1,))                 # (..., N, (m,) 1)
    return xp.take_along_axis(logp, idx, axis=-1)[..., 0]


def _minus_onehot(p, y, per_segment):
    """``p - e_y`` for p (..., N, C) or, per segment, (..., N, m, C).

    The label's entry ``p_y - 1`` is written ``-sum_{k != y} p_k`` (the same
    number, as ``sum_k p_k = 1``), which keeps its digits when ``p_y`` rounds to 1.
    """
    xp = get_xp(p, y)
    labels = xp.reshape(y, _label_shape(y, per_segment))
    classes = like(xp, list(range(p.shape[-1])), p, dtype=y.dtype)     # (C,)
    is_label = labels == classes                                       # (..., N, (m,) C)
    others = xp.where(is_label, xp.zeros_like(p), p)                   # p_k for k != y
    return xp.where(is_label, -xp.sum(others, axis=-1, keepdims=True), p)


def softmax_backward(a, da):
    r"""dscores of ``a = softmax(f)`` given ``da = dL/da``: :math:`a_j \sum_k a_k (da_j - da_k)`.

    The usual form :math:`a_j(da_j - \sum_k a_k da_k)` equals this one because
    :math:`\sum_k a_k = 1`; the pairwise differences keep every digit when the
    attention is nearly one-hot, where the usual form subtracts two almost equal
    numbers (V&R Eq. (8)'s :math:`x_j - \tilde x` written as
    :math:`\sum_k a_k (x_j - x_k)`). Shapes (N, m) in and out; costs (N, m, m).
    """
    xp = get_xp(a, da)
    pairwise = da[..., :, None] - da[..., None, :]                     # (N, m, m)
    return a * xp.sum(a[..., None, :] * pairwise, axis=-1)


# --------------------------------------------------------------- losses, backward beside forward
def _log_lik_backward(dlog_lik, logp, y, per_segment):
    r"""Chain rule of :math:`\ell\ell = \log\sigma_y(z)`: ``dz = dll (e_y - softmax(z))``."""
    xp = get_xp(dlog_lik, logp)
    return -dlog_lik[..., None] * _minus_onehot(xp.exp(logp), y, per_segment)


def value_and_grad_sa(logits, y, weight=None):
    r"""SA loss :math:`-\log\sigma_y(g(\tilde x))` and dL/dlogits; V&R Eqs. (7)-(8) start here.

    .. math:: \partial L/\partial g(\tilde x_n) = w_n(\sigma(g(\tilde x_n)) - e_{y_n})

    SA reaches the focus only through :math:`\tilde x`: the model chains
    ``dlogits`` through ``g`` to ``da_j = dx~ . x_j`` and then through
    :func:`softmax_backward` (``fcam.loss_and_grad`` does so, V&R Eq. (8)).

    logits : (N, C) of ``g(x~)``; y : (N,) labels; weight : optional (N,).
    Returns ``(loss, dlogits)``.
    """
    _numerics.check_loss_inputs(logits, y)
    xp = get_xp(logits, y)
    w = batch_weights(xp, y.shape[0], weight, logits)                       # (N,)
    logp = log_softmax(logits)                                         # (N, C)
    loss = -xp.sum(w * _pick(logp, y, False), axis=-1)
    # backward
    dlog_lik = -w                                                      # (N,)
    return loss, _log_lik_backward(dlog_lik, logp, y, False)           # (N, C)


def ha_from_log_lik(scores, log_lik, weight=None, focus_grad=True):
    r"""HA loss from the label log-likelihoods :math:`\ell\ell_j = \log\sigma_y(g(x_j))`.

    :math:`L = -\sum_n w_n \sum_j a_{nj}\ell\ell_{nj}`; returns ``(loss, dscores,
    dlog_lik)``, all (N, m) but the loss. With :math:`\ell_j = -\ell\ell_j`
    and :math:`L_n = \sum_k a_k\ell_k`, V&R Eq. (10) on the scores is

    .. math:: \partial L/\partial f_j = w\,a_j(\ell_j - L_n)
              = w\,a_j \textstyle\sum_k a_k(\ell_j - \ell_k),

    the pairwise form being exact at nearly one-hot attention (:func:`softmax_backward`).
    ``focus_grad=False`` (a fixed focus, Section 3) returns None for ``dscores``.
    """
    xp = get_xp(scores, log_lik)
    w = batch_weights(xp, log_lik.shape[-2], weight, log_lik)               # (N,)
    a = attention(scores)                                              # (N, m)
    # a segment with a_j = 0 (score -inf) adds exactly 0, never 0 * -inf = NaN, even
    # where its label log-likelihood is -inf
    log_lik = xp.where(a > 0, log_lik, xp.zeros_like(log_lik))
    loss = -xp.sum(w * xp.sum(a * log_lik, axis=-1), axis=-1)
    # backward
    dscores = (w[:, None] * softmax_backward(a, -log_lik)              # V&R Eq. (10)
               if focus_grad else None)
    dlog_lik = -w[:, None] * a                                         # (N, m)
    return loss, dscores, dlog_lik


def lv_from_log_lik(scores, log_lik, weight=None, focus_grad=True):
    r"""LV loss from the label log-likelihoods :math:`\ell\ell_j = \log\sigma_y(g(x_j))`.

    :math:`L = -\sum_n w_n \log\sum_j a_{nj} e^{\ell\ell_{nj}}`; returns ``(loss,
    dscores, dlog_lik)``. With :math:`p_j = \sigma_y(g(x_j))`, the marginal
    :math:`M = \sum_k a_k p_k` and the posterior over segments
    :math:`\gamma_j = a_j p_j / M`, V&R Eq. (12) on the scores is
    :math:`\partial L/\partial f_j = w(a_j - \gamma_j)`, and
    :math:`\partial L/\partial\ell\ell_j = -w\gamma_j`.

    Both are written so that they keep their digits where the classifier and
    the attention saturate. The loss: near :math:`M = 1`, :math:`-\log M` is
    :math:`-\operatorname{log1p}(-q)` with :math:`q = 1 - M = \sum_j a_j (1 - p_j)`
    and :math:`1 - p_j = -\operatorname{expm1}(\ell\ell_j)`, each term exact. The
    focus gradient, as the pairwise form of :func:`softmax_backward`:

    .. math:: a_j - \gamma_j = \frac{a_j}{M}\sum_k a_k (p_k - p_j),\qquad
              p_k - p_j = \pm e^{\max(\ell\ell_j, \ell\ell_k)}
              \bigl(-\operatorname{expm1}(-|\ell\ell_k - \ell\ell_j|)\bigr),

    every factor taken in log space, so nothing cancels and nothing overflows. The
    posterior and the focus gradient are ratios to :math:`M`, so they are computed from
    :math:`\ell\ell_j - \max_k \ell\ell_k` (exact where the two are close): with
    log-likelihoods of size 1e4 the unshifted logs would round away the attention's
    log-weights before the ratio is taken.
    ``focus_grad=False`` (a fixed focus, Section 3) skips that (N, m, m) form and returns
    None for ``dscores``.
    """
    xp = get_xp(scores, log_lik)
    w = batch_weights(xp, log_lik.shape[-2], weight, log_lik)               # (N,)
    log_a = log_softmax(scores)                                        # (N, m)
    top = xp.max(log_lik, axis=-1, keepdims=True)                      # (N, 1)
    top = xp.where(xp.isfinite(top), top, xp.zeros_like(top))          # a row of -inf: 0
    ll = log_lik - top                                                 # (N, m) <= 0
    joint = log_a + ll                                                 # log a_j p_j - top
    log_m = logsumexp(joint, axis=-1, keepdims=True)                   # (N, 1) log M - top
    # log M <= 0 (a probability); rounding can put it 1 ulp above
    log_marginal = xp.minimum(log_m + top, 0.0)                        # (N, 1)
    q = xp.sum(xp.exp(log_a) * -xp.expm1(log_lik), axis=-1)            # (N,) 1 - M, exact
    half = log_marginal[..., 0] > -0.6931471805599453                  # M > 1/2: use q
    nll = xp.where(half, -xp.log1p(-xp.where(half, q, xp.zeros_like(q))),
                   -log_marginal[..., 0])                              # (N,) -log M
    loss = xp.sum(w * nll, axis=-1)
    # backward
    gamma = xp.exp(joint - log_m)                                      # (N, m) posterior
    dlog_lik = -w[:, None] * gamma                                     # (N, m)
    if not focus_grad:
        return loss, None, dlog_lik
    ll_j, ll_k = ll[..., :, None], ll[..., None, :]                    # (N, m, 1), (N, 1, m)
    # two impossible segments (ll = -inf) would give -inf - -inf = NaN (and a warning);
    # their pair weighs exp(-inf) = 0 below, so a floor serves (a gap to it stays huge)
    floored = xp.maximum(ll, xp.finfo(ll.dtype).min)
    gap = xp.abs(floored[..., None, :] - floored[..., :, None])        # (N, m, m)
    size = -xp.expm1(-gap)
    sign = xp.where(ll_k > ll_j, xp.ones_like(gap), -xp.ones_like(gap))
    log_scale = (log_a[..., :, None] + log_a[..., None, :] + xp.maximum(ll_j, ll_k)
                 - log_m[..., None])                                   # <= 0: no overflow
    a_minus_gamma = xp.sum(sign * size * xp.exp(log_scale), axis=-1)  # (N, m)
    dscores = w[:, None] * a_minus_gamma                               # V&R Eq. (12)
    return loss, dscores, dlog_lik


def value_and_grad_ha(scores, logits, y, weight=None):
    r"""HA loss :math:`\sum_j a_j(-\log\sigma_y(g(x_j)))` and its gradients, V&R Eqs. (9)-(10).

    :func:`ha_from_log_lik` on the label log-likelihoods, then the softmax chain

    .. math:: \partial L/\partial g(x_j) = w\,a_j(\sigma(g(x_j)) - e_y).

    scores : (N, m); logits : (N, m, C); y : (N,). Returns ``(loss, dscores, dlogits)``.
    """
    _numerics.check_loss_inputs(logits, y, scores)
    logp = log_softmax(logits)                                         # (N, m, C)
    loss, dscores, dlog_lik = ha_from_log_lik(scores, _pick(logp, y, True), weight)
    # backward; V&R Eq. (9): dL/dg(x_j) = w a_j (sigma(g(x_j)) - e_y)
    return loss, dscores, _log_lik_backward(dlog_lik, logp, y, True)


def value_and_grad_lv(scores, logits, y, weight=None):
    r"""LV loss :math:`-\log\sum_j a_j\sigma_y(g(x_j))` and its gradients, V&R Eqs. (11)-(12).

    :func:`lv_from_log_lik` on the label log-likelihoods, then the softmax chain

    .. math:: \partial L/\partial g(x_j) = w\,\gamma_j(\sigma(g(x_j)) - e_y).

    scores : (N, m); logits : (N, m, C); y : (N,). Returns ``(loss, dscores, dlogits)``.
    """
    _numerics.check_loss_inputs(logits, y, scores)
    logp = log_softmax(logits)                                         # (N, m, C)
    loss, dscores, dlog_lik = lv_from_log_lik(scores, _pick(logp, y, True), weight)
    # backward; V&R Eq. (11): dL/dg(x_j) = w gamma_j (sigma(g(x_j)) - e_y)
    return loss, dscores, _log_lik_backward(dlog_lik, logp, y, True)


def value_and_grad(paradigm, scores, logits, y, weight=None):
    """Dispatch: ``(loss, dscores, dlogits)``; for SA ``dscores`` is None (see above)."""
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    if paradigm == "sa":
        value, dlogits = value_and_grad_sa(logits, y, weight)
        return value, None, dlogits
    return {"ha": value_and_grad_ha, "lv": value_and_grad_lv}[paradigm](
        scores, logits, y, weight)


# --------------------------------------------------------------- loss-only entry points
def loss_sa(logits, y):
    r"""Soft-attention loss, mean over the batch: :math:`-\log\sigma_y(g(\tilde x))`; (N, C)."""
    return value_and_grad_sa(logits, y)[0]


def loss_ha(scores, logits, y):
    r"""Hard-attention loss, mean over the batch: :math:`\sum_j a_j (-\log\sigma_y(g(x_j)))`."""
    return value_and_grad_ha(scores, logits, y)[0]


def loss_lv(scores, logits, y):
    r"""LVML loss, mean over the batch: :math:`-\log\sum_j a_j\,\sigma_y(g(x_j))`."""
    return value_and_grad_lv(scores, logits, y)[0]


def loss(paradigm, scores, logits, y):
    """Dispatch on a loss paradigm (``sa``, ``ha`` or ``lv``)."""
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    if paradigm == "sa":
        return loss_sa(logits, y)
    return {"ha": loss_ha, "lv": loss_lv}[paradigm](scores, logits, y)


# --------------------------------------------------------------- inference
def infer_sa(logits):
    r"""SA inference :math:`s^{SA} = \sigma(g(\tilde x))`, (N, C)."""
    return softmax(logits)


def infer_ha(scores, logits):
    r"""HA inference: classify the single most-attended segment,
    :math:`s^{HA} = \sigma(g(x_{\hat j}))` with :math:`\hat j = \arg\max_j a_j`; (N, C)."""
    xp = get_xp(scores, logits)
    top = xp.argmax(scores, axis=-1)                                   # (..., N)
    idx = xp.broadcast_to(top[..., None, None], top.shape + (1, logits.shape[-1]))
    return softmax(xp.take_along_axis(logits, idx, axis=-2)[..., 0, :])   # (..., N, C)


def infer_lv(scores, logits):
    r"""LV inference: the marginal :math:`s^{LV} = \sum_j a_j \sigma(g(x_j))`; (N, C)."""
    xp = get_xp(scores, logits)
    joint = log_softmax(scores)[..., None] + log_softmax(logits)       # (..., N, m, C)
    return xp.exp(logsumexp(joint, axis=-2))


def infer(paradigm, scores, logits):
    """Class scores s (N, C) by the paradigm's own inference rule.

    ``hybrid`` ends in its HA phase, so it infers as HA.
    """
    paradigm = check_paradigm(paradigm)
    if paradigm == "sa":
        return infer_sa(logits)
    return {"ha": infer_ha, "hybrid": infer_ha, "lv": infer_lv}[paradigm](scores, logits)


def phase(paradigm, step, switch_step):
    """The loss paradigm in force at ``step``: hybrid is SA before ``switch_step``, then HA."""
    paradigm = check_paradigm(paradigm)
    if paradigm != "hybrid":
        return paradigm
    return "sa" if step < switch_step else "ha"
