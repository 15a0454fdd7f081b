r"""Numerics the losses stand on: log-sum-exp, log-softmax and softmax that keep their digits.

Vashisht & Ramaswamy (2023), Section 2.3 works in probabilities; the losses of
:mod:`minimal_attn.losses` work in log space so that scores and logits of
magnitude 1e4 stay finite, and they need these primitives to be exact where a
probability is next to 1 (``log1p`` of the rest rather than ``log`` of a sum
that rounds to 1). Any array-API namespace (:mod:`minimal_attn._xp`).
"""

from minimal_attn._xp import get_xp


def _max_and_log1p_rest(z, axis):
    """(zmax, log1p(rest)) with log(sum(exp(z))) = zmax + log1p(rest), keepdims.

    The max term contributes exactly 1, so ``rest`` sums only the others (ties
    at the max add 1 each): ``log1p(rest)`` keeps its digits when it is tiny,
    where ``log(1 + rest)`` would round ``1 + rest`` first.
    """
    xp = get_xp(z)
    zmax = xp.max(z, axis=axis, keepdims=True)
    zmax = xp.where(xp.isfinite(zmax), zmax, xp.zeros_like(zmax))   # all -inf rows stay -inf
    at_max = z == zmax
    others = xp.where(at_max, xp.zeros_like(z), xp.exp(z - zmax))
    n_max = xp.sum(xp.astype(at_max, z.dtype), axis=axis, keepdims=True)
    return zmax, xp.log1p((n_max - 1) + xp.sum(others, axis=axis, keepdims=True))


def logsumexp(z, axis=-1, keepdims=False):
    """log(sum(exp(z))) along ``axis``, shifted by the max so it never overflows."""
    zmax, log_rest = _max_and_log1p_rest(z, axis)
    out = zmax + log_rest
    return out if keepdims else get_xp(z).squeeze(out, axis=axis)


def log_softmax(z, axis=-1):
    """``z - logsumexp(z)``, written ``(z - zmax) - log1p(rest)``: exact 0 - tiny at the max.

    A row that is all -inf has no softmax (0/0): its entries are NaN, as they
    are in ``scipy.special.log_softmax``; nothing here refuses it.
    """
    zmax, log_rest = _max_and_log1p_rest(z, axis)
    return (z - zmax) - log_rest


def softmax(z, axis=-1):
    """``exp(log_softmax(z))``: NaN on a row that is all -inf (:func:`log_softmax`)."""
    return get_xp(z).exp(log_softmax(z, axis=axis))


def batch_weights(xp, n, weight, ref):
    """(N,) instance weights: ``1/N`` (the batch mean) unless given."""
    if weight is None:
        return xp.full((n,), 1.0 / n, dtype=ref.dtype, device=_device(ref))
    return weight


def _device(a):
    try:
        from array_api_compat import device
    except ImportError:
        return None
    return device(a)
