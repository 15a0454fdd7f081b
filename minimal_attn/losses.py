r"""The three attention losses and their inference rules, for any focus and classifier.

Vashisht & Ramaswamy (2023), Section 2.3. An instance is a mosaic of ``m``
segments ``x_1..x_m`` with label ``y``. A focus model gives one score per
segment, ``f_j = f(x_j)``, and the attention is ``a = softmax(f)``. The losses
differ in where the classifier ``g`` is applied:

* **soft attention (SA)**: ``g`` sees the attention-weighted average
  :math:`\tilde x = \sum_j a_j x_j`;
  :math:`L^{SA} = -\log \sigma_y(g(\tilde x))`.
* **hard attention (HA)**: ``g`` sees one segment drawn from ``a``; the loss is
  its expectation :math:`L^{HA} = \sum_j a_j\,(-\log \sigma_y(g(x_j)))`.
* **latent-variable marginal likelihood (LV)**: the segment is a latent
  variable; :math:`L^{LV} = -\log \sum_j a_j\,\sigma_y(g(x_j))`.

Everything here works on *scores* ``(N, m)`` and classifier *logits*: ``(N, C)``
of ``g(x~)`` for SA, ``(N, m, C)`` of ``g(x_j)`` for HA and LV. That keeps the
losses independent of what ``f`` and ``g`` are (linear maps, CNNs, LSTMs).
Losses are means over the batch. All arithmetic is in log space (log-softmax,
log-sum-exp), so scores and logits of magnitude 1e4 give finite values.

The backward functions return ``(dscores, dlogits)``, the gradients of the
batch-mean loss; models chain them into their own parameters
(:mod:`minimal_attn.fcam` does so for the linear FCAM).

The ``hybrid`` paradigm is a schedule, not a loss: SA until a switch point,
then HA (:func:`phase`).
"""

from ._xp import get_xp
from .errors import check_paradigm

LOSS_PARADIGMS = ("sa", "ha", "lv")


# --------------------------------------------------------------- primitives
def logsumexp(z, axis=-1, keepdims=False):
    """log(sum(exp(z))) along ``axis``, shifted by the max so it never overflows."""
    xp = get_xp(z)
    zmax = xp.max(z, axis=axis, keepdims=True)
    out = zmax + xp.log(xp.sum(xp.exp(z - zmax), axis=axis, keepdims=True))
    return out if keepdims else xp.squeeze(out, axis=axis)


def log_softmax(z, axis=-1):
    return z - logsumexp(z, axis=axis, keepdims=True)


def softmax(z, axis=-1):
    return get_xp(z).exp(log_softmax(z, axis=axis))


def attention(scores):
    """Attention weights ``a = softmax(f)`` over the m segments; scores (N, m)."""
    return softmax(scores, axis=-1)


def _pick(logp, y):
    """``logp[..., y_n]`` per instance: (N, C) -> (N,), (N, m, C) -> (N, m)."""
    xp = get_xp(logp)
    if logp.ndim == 2:
        return xp.take_along_axis(logp, y[:, None], axis=1)[:, 0]
    return xp.take_along_axis(logp, y[:, None, None], axis=2)[..., 0]


def _onehot_like(p, y):
    """e_y broadcastable against p: (N, C) for (N, C), (N, 1, C) for (N, m, C)."""
    xp = get_xp(p)
    labels = y.reshape(y.shape + (1,) * (p.ndim - 1))      # (N, 1) or (N, 1, 1)
    return (labels == xp.arange(p.shape[-1])).astype(p.dtype)


# --------------------------------------------------------------- losses
def loss_sa(logits, y):
    r"""Soft-attention loss, mean over the batch: :math:`-\log\sigma_y(g(\tilde x))`.

    logits : (N, C) classifier output on the averaged segment :math:`\tilde x`.
    """
    return -get_xp(logits).mean(_pick(log_softmax(logits), y))


def loss_ha(scores, logits, y):
    r"""Hard-attention loss, mean over the batch: :math:`\sum_j a_j (-\log\sigma_y(g(x_j)))`.

    scores : (N, m) focus scores; logits : (N, m, C) classifier output per segment.
    """
    xp = get_xp(logits)
    ce = -_pick(log_softmax(logits), y)                     # (N, m)
    return xp.mean(xp.sum(attention(scores) * ce, axis=1))


def loss_lv(scores, logits, y):
    r"""LVML loss, mean over the batch: :math:`-\log\sum_j a_j\,\sigma_y(g(x_j))`.

    Computed as ``-logsumexp_j(log a_j + log sigma_y(g(x_j)))``.
    """
    xp = get_xp(logits)
    joint = log_softmax(scores) + _pick(log_softmax(logits), y)   # (N, m)
    return -xp.mean(logsumexp(joint, axis=1))


def loss(paradigm, scores, logits, y):
    """Dispatch on a loss paradigm (``sa``, ``ha`` or ``lv``)."""
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    if paradigm == "sa":
        return loss_sa(logits, y)
    return {"ha": loss_ha, "lv": loss_lv}[paradigm](scores, logits, y)


# --------------------------------------------------------------- backward
def _log_probs(logits):
    """(log_softmax, softmax) of the logits with one exp pass."""
    xp = get_xp(logits)
    shifted = logits - xp.max(logits, axis=-1, keepdims=True)
    e = xp.exp(shifted)
    total = xp.sum(e, axis=-1, keepdims=True)
    return shifted - xp.log(total), e / total


def value_and_grad_sa(logits, y):
    """(loss, dlogits) of the batch-mean SA loss; see :func:`grad_sa`."""
    logp, p = _log_probs(logits)
    n = logits.shape[0]
    return -get_xp(logits).mean(_pick(logp, y)), (p - _onehot_like(p, y)) / n


def value_and_grad_ha(scores, logits, y):
    """(loss, dscores, dlogits) of the batch-mean HA loss; see :func:`grad_ha`."""
    xp = get_xp(logits)
    n = logits.shape[0]
    a = attention(scores)                                   # (N, m)
    logp, p = _log_probs(logits)                            # (N, m, C)
    ce = -_pick(logp, y)                                    # (N, m)
    per_instance = xp.sum(a * ce, axis=1, keepdims=True)    # (N, 1)
    dscores = a * (ce - per_instance) / n
    dlogits = a[..., None] * (p - _onehot_like(p, y)) / n
    return xp.mean(per_instance), dscores, dlogits


def value_and_grad_lv(scores, logits, y):
    """(loss, dscores, dlogits) of the batch-mean LV loss; see :func:`grad_lv`."""
    xp = get_xp(logits)
    n = logits.shape[0]
    logp, p = _log_probs(logits)                            # (N, m, C)
    log_a = log_softmax(scores)                             # (N, m)
    joint = log_a + _pick(logp, y)                          # (N, m)
    log_marginal = logsumexp(joint, axis=1, keepdims=True)  # (N, 1)
    r = xp.exp(joint - log_marginal)                        # (N, m) posterior
    dscores = (xp.exp(log_a) - r) / n
    dlogits = r[..., None] * (p - _onehot_like(p, y)) / n
    return -xp.mean(log_marginal), dscores, dlogits


def grad_sa(logits, y):
    r"""dL^SA/dlogits = (softmax(logits) - onehot(y)) / N, shape (N, C). No score term:
    SA reaches the focus only through :math:`\tilde x`, which the model chains itself."""
    return value_and_grad_sa(logits, y)[1]


def grad_ha(scores, logits, y):
    r"""(dscores, dlogits) of the batch-mean HA loss.

    .. math:: \partial L/\partial f_j = a_j(\ell_j - \textstyle\sum_k a_k \ell_k), \quad
              \partial L/\partial g(x_j) = a_j(\sigma(g(x_j)) - e_y)

    with :math:`\ell_j = -\log\sigma_y(g(x_j))`, each divided by N.
    """
    return value_and_grad_ha(scores, logits, y)[1:]


def grad_lv(scores, logits, y):
    r"""(dscores, dlogits) of the batch-mean LV loss.

    With the posterior over segments
    :math:`r_j = a_j\sigma_y(g(x_j)) / \sum_k a_k\sigma_y(g(x_k))`:

    .. math:: \partial L/\partial f_j = a_j - r_j, \quad
              \partial L/\partial g(x_j) = r_j(\sigma(g(x_j)) - e_y)

    each divided by N.
    """
    return value_and_grad_lv(scores, logits, y)[1:]


# --------------------------------------------------------------- inference
def infer_sa(logits):
    r"""SA inference :math:`s^{SA} = \sigma(g(\tilde x))`, (N, C)."""
    return softmax(logits)


def infer_ha(scores, logits):
    r"""HA inference: classify the single most-attended segment,
    :math:`s^{HA} = \sigma(g(x_{\hat j}))` with :math:`\hat j = \arg\max_j a_j`; (N, C)."""
    xp = get_xp(logits)
    top = xp.argmax(scores, axis=1)                         # (N,)
    chosen = xp.take_along_axis(logits, top[:, None, None], axis=1)[:, 0]
    return softmax(chosen)


def infer_lv(scores, logits):
    r"""LV inference: the marginal :math:`s^{LV} = \sum_j a_j \sigma(g(x_j))`; (N, C)."""
    xp = get_xp(logits)
    joint = log_softmax(scores)[..., None] + log_softmax(logits)   # (N, m, C)
    return xp.exp(logsumexp(joint, axis=1))


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


def needs_aggregate(paradigm):
    """True if the classifier sees the averaged segment (SA), False if each segment."""
    return paradigm == "sa"
