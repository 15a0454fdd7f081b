r"""Numerics the losses stand on: log-sum-exp, log-softmax and softmax that keep their digits.

Vashisht & Ramaswamy (2023), Section 2.3 works in probabilities; the losses of
:mod:`minimal_attn.losses` work in log space so that scores and logits of
magnitude 1e4 stay finite, and they need these primitives to be exact where a
probability is next to 1 (``log1p`` of the rest rather than ``log`` of a sum
that rounds to 1). Any array-API namespace (:mod:`minimal_attn._xp`).

:func:`check_loss_inputs` refuses what the losses cannot read. It looks at dtypes and
shapes only, plus the labels' values on NumPy arrays (:func:`errors.check_labels`), so it
reads nothing back from a device.
"""


from minimal_attn._xp import get_xp
from minimal_attn.errors import InputError, check_labels, dtype_is


def _max_and_log1p_rest(z, axis):
    """(zmax, log1p(rest)) with log(sum(exp(z))) = zmax + log1p(rest), keepdims.

    The max term contributes exactly 1, so ``rest`` sums only the others (ties
    at the max add 1 each): ``log1p(rest)`` keeps its digits when it is tiny,
    where ``log(1 + rest)`` would round ``1 + rest`` first.
    """
    if z.shape[axis] == 0:       # a softmax of nothing: max() would fail with no name
        raise InputError(f"softmax over an empty axis (shape {tuple(z.shape)}): scores need "
                         "at least one segment and logits at least one class")
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
    if n == 0:
        raise InputError("empty batch (N = 0 instances): pass at least one instance")
    if weight is None:
        return xp.full((n,), 1.0 / n, dtype=ref.dtype, device=_device(ref))
    return weight


def check_loss_inputs(logits, y, scores=None):
    """Refuse logits or scores that are not floating point, and labels that do not fit.

    Integer logits would make the batch weights ``1/N`` integers (0) and the loss 0;
    torch refuses them too, so both backends say so. ``logits`` are (..., N, C) for SA,
    and with ``scores`` (..., N, m) given, (..., N, m, C) for HA and LV.
    """
    for name, a in (("logits", logits), ("scores", scores)):
        if a is not None and not dtype_is(getattr(a, "dtype", None), "floating"):
            raise InputError(f"{name} must be a floating-point array, got {type(a).__name__} "
                             f"of dtype {getattr(a, 'dtype', None)}; convert it (e.g. "
                             f"np.asarray({name}, dtype=float))")
    n_axis = -2 if scores is None else -3
    if len(logits.shape) < -n_axis:
        raise InputError(f"logits must have at least {-n_axis} axes ("
                         f"{'(N, C)' if scores is None else '(N, m, C)'}), "
                         f"got shape {tuple(logits.shape)}")
    check_labels(y, logits.shape[-1], n=logits.shape[n_axis])


def _device(a):
    try:
        from array_api_compat import device
    except ImportError:
        return None
    return device(a)
