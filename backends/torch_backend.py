r"""The losses, inference rules and linear FCAM of the NumPy core, in torch.

Vashisht & Ramaswamy (2023), Section 2.3. Every function here has the name and
signature of its twin in :mod:`minimal_attn.losses` or :mod:`minimal_attn.fcam`
(the losses, ``value_and_grad`` and ``value_and_grad_sa/ha/lv``, the inference rules,
``attention``, ``softmax``, ``log_softmax``, ``logsumexp``, ``phase``; the linear FCAM's
``forward``, ``loss``, ``loss_and_grad``, ``predict``), leading batch axes included, so
for these a caller swaps ``from minimal_attn import losses`` for
``from minimal_attn.backends import torch_backend as losses``. The core's building blocks
of its hand-written backward (``softmax_backward``, ``ha_from_log_lik``,
``lv_from_log_lik``) have no twin: gradients come from torch autograd; the
conformance test (``tests/test_torch_backend.py``) requires both to agree on
identical float64 inputs.

The losses take torch tensors: *scores* (N, m) and classifier *logits*, (N, C)
of :math:`g(\tilde x)` for SA and (N, m, C) of :math:`g(x_j)` for HA and LV.
They stay in log space (log-softmax, log-sum-exp), so scores and logits of
magnitude 1e4 give finite losses and gradients, and a fixed focus given as
log-attention with ``-inf`` entries (Section 3) is exact.

Their accuracy is absolute, the rounding of the logits' scale (at magnitude 1e4 about
1e-12), which is what training needs; torch's fused log-softmax keeps no relative digits
of a loss far below that (a margin of 40 gives a true loss of 4e-18 and here 0, the
true class's gradient 0). The NumPy core writes those terms with ``log1p`` and ``expm1``
(:mod:`minimal_attn._numerics`) and keeps them to a few ulps; the conformance test
compares the two to the absolute tolerance.

The linear FCAM twin lives in the namespace :data:`fcam`, so
``torch_backend.fcam.loss(params, X, y, paradigm)`` mirrors
``minimal_attn.fcam.loss`` while ``torch_backend.loss(paradigm, scores,
logits, y)`` mirrors ``minimal_attn.losses.loss``.

Pure schedule logic (:func:`phase`, :data:`LOSS_PARADIGMS`) is imported from
the core, not rewritten.
"""

from types import SimpleNamespace

import numpy as np
import torch

from minimal_attn.backends.devices import (  # noqa: F401 (re-export: tb.get_device)
    get_device,
    optimizer_step,
    read_torch,
    set_threads,
)
from minimal_attn.errors import InputError, check_labels, check_paradigm
from minimal_attn.losses import LOSS_PARADIGMS, phase  # noqa: F401 (re-export)


# --------------------------------------------------------------- primitives
def logsumexp(z, axis=-1, keepdims=False):
    """log(sum(exp(z))) along ``axis``; torch shifts by the max, and all -inf gives -inf."""
    return torch.logsumexp(z, dim=axis, keepdim=keepdims)


def log_softmax(z, axis=-1):
    return torch.log_softmax(z, dim=axis)


def softmax(z, axis=-1):
    return torch.softmax(z, dim=axis)


def attention(scores):
    """Attention weights ``a = softmax(f)`` over the m segments; scores (N, m)."""
    return softmax(scores, axis=-1)


def _labels(y, logits, scores=None):
    """y (N,) as a long tensor beside ``logits`` ((..., N, C), or (..., N, m, C) with
    ``scores``), refusing non-float logits and a float y (1.7 would be read as class 1).
    Tensors give their dtypes and shapes only, never values: no device sync, and a
    compiled graph (torch.compile, vmap, a CUDA graph) holds it as a guard."""
    for name, a in (("logits", logits), ("scores", scores)):
        if a is not None and not (torch.is_tensor(a) and a.dtype.is_floating_point):
            raise InputError(f"{name} must be a floating-point torch tensor, got "
                             f"{type(a).__name__} of dtype {getattr(a, 'dtype', None)}; convert "
                             f"it (e.g. torch.as_tensor({name}, dtype=torch.float64))")
    n = logits.shape[-2 if scores is None else -3]
    if n == 0:
        raise InputError("empty batch (N = 0 instances): pass at least one instance")
    check_labels(y, logits.shape[-1], n=n)      # a tensor's dtype and shape; host values too
    return torch.as_tensor(y, device=logits.device, dtype=torch.long)


def _pick(logp, y, per_segment):
    """``logp[..., n, (j,) y_n]``: (..., N, C) -> (..., N), or per segment (..., N, m, C) ->
    (..., N, m); leading axes before N are separate problems, as in the core."""
    idx = y.reshape((-1, 1, 1) if per_segment else (-1, 1))
    return logp.gather(-1, idx.expand(logp.shape[:-1] + (1,)))[..., 0]


def _batch(per_instance, weight=None):
    """The batch mean over the last axis (N), or with ``weight`` (N,) the weighted sum."""
    if weight is None:
        return per_instance.mean(dim=-1)
    w = torch.as_tensor(weight, dtype=per_instance.dtype, device=per_instance.device)
    return (per_instance * w).sum(dim=-1)


# --------------------------------------------------------------- losses
def _sa_terms(logits, y):
    y = _labels(y, logits)
    return -_pick(log_softmax(logits), y, False)                       # (..., N)


def _ha_terms(scores, logits, y):
    y = _labels(y, logits, scores)
    a = attention(scores)
    ce = -_pick(log_softmax(logits), y, True)                           # (..., N, m)
    ce = torch.where(a > 0, ce, torch.zeros_like(ce))       # unselected: no inf, no NaN grad
    return (a * ce).sum(dim=-1)


def _lv_terms(scores, logits, y):
    y = _labels(y, logits, scores)
    joint = log_softmax(scores) + _pick(log_softmax(logits), y, True)   # (..., N, m)
    return -logsumexp(joint, axis=-1)


def loss_sa(logits, y):
    r"""Soft-attention loss, batch mean: :math:`-\log\sigma_y(g(\tilde x))`; logits (N, C)."""
    return _batch(_sa_terms(logits, y))


def loss_ha(scores, logits, y):
    r"""Hard-attention loss, batch mean: :math:`\sum_j a_j(-\log\sigma_y(g(x_j)))`.

    scores (N, m); logits (N, m, C). A weight a_j = 0 (score -inf) contributes
    exactly 0, never 0 * inf, to the loss and its gradients (even where that segment's
    label logit is -inf).
    """
    return _batch(_ha_terms(scores, logits, y))


def loss_lv(scores, logits, y):
    r"""LVML loss, batch mean: :math:`-\log\sum_j a_j\sigma_y(g(x_j))`, as a log-sum-exp."""
    return _batch(_lv_terms(scores, logits, y))


def loss(paradigm, scores, logits, y):
    """Batch-mean loss of a paradigm (``sa``, ``ha`` or ``lv``); SA ignores ``scores``."""
    rule = {"sa": lambda _, z, t: loss_sa(z, t), "ha": loss_ha, "lv": loss_lv}
    return rule[check_paradigm(paradigm, LOSS_PARADIGMS)](scores, logits, y)


def value_and_grad(paradigm, scores, logits, y, weight=None):
    """``(loss, dscores, dlogits)`` of the batch-mean (or ``weight``-ed) loss by autograd,
    the twin of :func:`minimal_attn.losses.value_and_grad` (``dscores`` None for SA); NumPy
    inputs give NumPy outputs."""
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    z, f = _tensor(logits), None if paradigm == "sa" else _tensor(scores)
    y = _labels(y, z, f)                                  # before autograd refuses int dtypes
    z, f = (None if t is None else t.detach().requires_grad_(True) for t in (z, f))
    terms = _sa_terms(z, y) if paradigm == "sa" else \
        {"ha": _ha_terms, "lv": _lv_terms}[paradigm](f, z, y)
    value = _batch(terms, weight)
    leaves = [z] if f is None else [f, z]
    grads = torch.autograd.grad(value.sum(), leaves)      # leading problems: independent
    back = (lambda t: t.detach()) if torch.is_tensor(logits) else \
        (lambda t: t.detach().cpu().numpy())
    dscores = None if f is None else back(grads[0])
    return back(value), dscores, back(grads[-1])


def value_and_grad_sa(logits, y, weight=None):
    """``(loss, dlogits)``: :func:`value_and_grad` of SA."""
    value, _, dlogits = value_and_grad("sa", None, logits, y, weight)
    return value, dlogits


def value_and_grad_ha(scores, logits, y, weight=None):
    """``(loss, dscores, dlogits)``: :func:`value_and_grad` of HA."""
    return value_and_grad("ha", scores, logits, y, weight)


def value_and_grad_lv(scores, logits, y, weight=None):
    """``(loss, dscores, dlogits)``: :func:`value_and_grad` of LV."""
    return value_and_grad("lv", scores, logits, y, weight)


# --------------------------------------------------------------- inference
def infer_sa(logits):
    r"""SA inference :math:`s^{SA} = \sigma(g(\tilde x))`, (N, C)."""
    return softmax(logits)


def infer_ha(scores, logits):
    r"""HA inference: :math:`\sigma(g(x_{\hat j}))`, :math:`\hat j = \arg\max_j a_j`; (N, C)."""
    top = scores.argmax(dim=-1)                             # (..., N)
    index = top[..., None, None].expand(top.shape + (1, logits.shape[-1]))
    return softmax(logits.gather(-2, index)[..., 0, :])


def infer_lv(scores, logits):
    r"""LV inference, the marginal :math:`\sum_j a_j\sigma(g(x_j))`; (N, C)."""
    joint = log_softmax(scores)[..., None] + log_softmax(logits)   # (..., N, m, C)
    return logsumexp(joint, axis=-2).exp()


def infer(paradigm, scores, logits):
    """Class scores s (N, C) by the paradigm's rule; ``hybrid`` ends in HA, so infers as HA."""
    rule = {"sa": lambda _, z: infer_sa(z), "ha": infer_ha, "hybrid": infer_ha, "lv": infer_lv}
    return rule[check_paradigm(paradigm)](scores, logits)


# --------------------------------------------------------------- linear FCAM
def _tensor(a, dtype=None):
    """``a`` as a torch tensor (NumPy arrays are wrapped, keeping float64)."""
    return a if torch.is_tensor(a) else torch.as_tensor(np.asarray(a), dtype=dtype)


def _fcam_forward(params, X, paradigm, log_attention=None):
    """Scores, attention and logits of the linear FCAM (twin of :func:`minimal_attn.fcam.forward`).

    ``params`` {"W": (C, d), "u": (d,)}, ``X`` (N, m, d): torch tensors or
    NumPy arrays. SA returns logits (N, C) of :math:`W\\tilde x`; other
    paradigms (N, m, C) of :math:`W x_j`.
    """
    X, W, u = _tensor(X), _tensor(params["W"]), _tensor(params["u"])
    # NumPy promotes float32 X against float64 parameters; torch's matmul refuses the mix
    dtype = torch.promote_types(torch.promote_types(X.dtype, W.dtype), u.dtype)
    X, W, u = X.to(dtype), W.to(dtype), u.to(dtype)
    scores = X @ u if log_attention is None else _tensor(log_attention)   # (N, m)
    a = attention(scores)                                                  # (N, m)
    out = {"scores": scores, "a": a}
    if paradigm == "sa":
        out["x_tilde"] = torch.einsum("nm,nmd->nd", a, X)                  # (N, d)
        out["logits"] = out["x_tilde"] @ W.T                               # (N, C)
    else:
        out["logits"] = X @ W.T                                            # (N, m, C)
    return out


def _fcam_forward_public(params, X, paradigm, log_attention=None):
    """:func:`_fcam_forward`, NumPy arrays out for NumPy ``X`` (as the core returns)."""
    out = _fcam_forward(params, X, check_paradigm(paradigm), log_attention)
    if torch.is_tensor(X):
        return out
    return {k: v.detach().cpu().numpy() for k, v in out.items()}


def _fcam_loss(params, X, y, paradigm, log_attention=None):
    """Batch-mean loss of the linear FCAM as a float (twin of :func:`minimal_attn.fcam.loss`)."""
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    with torch.no_grad():
        out = _fcam_forward(params, X, paradigm, log_attention)
        return float(loss(paradigm, out["scores"], out["logits"], y))


def _fcam_loss_and_grad(params, X, y, paradigm, log_attention=None):
    """Loss and ``{"W": dW, "u": du}`` by autograd (twin of ``minimal_attn.fcam.loss_and_grad``).

    Gradients come back as NumPy arrays when ``params`` were NumPy, so the
    core's optimisers and gradient checkers use them unchanged. With a fixed
    focus (``log_attention``) ``du`` is zero, as in the core.
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    leaves = {k: _tensor(v).detach().clone().requires_grad_(True) for k, v in params.items()}
    out = _fcam_forward(leaves, X, paradigm, log_attention)
    value = loss(paradigm, out["scores"], out["logits"], y)
    grads = torch.autograd.grad(value, [leaves["W"], leaves["u"]], allow_unused=True)
    result = {}
    for key, g in zip(("W", "u"), grads):
        g = torch.zeros_like(leaves[key]) if g is None else g
        result[key] = g if torch.is_tensor(params[key]) else g.detach().cpu().numpy()
    return float(value.detach()), result


def _fcam_predict(params, X, paradigm, log_attention=None):
    """Class scores s (N, C) by the inference rule (twin of :func:`minimal_attn.fcam.predict`)."""
    paradigm = check_paradigm(paradigm)
    with torch.no_grad():
        out = _fcam_forward(params, X, "sa" if paradigm == "sa" else "ha", log_attention)
        s = infer(paradigm, out["scores"], out["logits"])
    return s if torch.is_tensor(X) else s.cpu().numpy()


#: The linear FCAM with :mod:`minimal_attn.fcam`'s names and signatures.
fcam = SimpleNamespace(forward=_fcam_forward_public, loss=_fcam_loss,
                       loss_and_grad=_fcam_loss_and_grad, predict=_fcam_predict)
