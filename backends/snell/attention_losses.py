r"""SA, HA and LV for sequence models: V&R Sec. 2.3 applied per target token of Snell et al.

Vashisht & Ramaswamy (2023) define the three losses on a mosaic of m segments;
an attention model of Snell et al. (2021) makes the same choice at every target
token t over the source positions l. With :math:`\alpha_{t,l}` the attention
(Snell Eqs. (1), (7)) and :math:`p(y_t \mid s_t, h_l)` the output computed from
position l alone (the lexical probe, Snell Eqs. (4), (9)):

* SA (V&R Sec. 2.3, :math:`L^{SA}`): :math:`-\log p(y_t \mid s_t, c_t)`,
  :math:`c_t = \sum_l \alpha_{t,l} h_l`, the models' own output (Snell Eqs. (2)-(3), (8));
* HA (V&R Sec. 2.3, :math:`L^{HA}`): :math:`\sum_l \alpha_{t,l}\,(-\log p(y_t \mid s_t, h_l))`;
* LV (V&R Sec. 2.3, :math:`L^{LV}`): :math:`-\log \sum_l \alpha_{t,l}\, p(y_t \mid s_t, h_l)`.

A one-token target is exactly an FCAM with m = L segments, and there these
functions equal :func:`minimal_attn.losses.loss_ha` / ``loss_lv`` (tested to
1e-12 in float64). Inference (V&R Sec. 2.3): HA reads the distribution of the
most-attended position, LV the alpha-weighted mixture of the per-position
distributions; ``hybrid`` trains SA then HA and infers as HA.

Everything takes *log* attention (normalised: a log-softmax over l, through
which the gradients reach the scores) and *log* likelihoods, so logits of magnitude
1e4 give finite losses and gradients; a position with zero attention (padding,
``log_alpha = -inf``) contributes exactly 0. Gradients come from torch autograd.
The (B, T, L, V) per-position distribution is never held whole: callers go
through :func:`over_target_chunks`.
"""

import math

import torch
from torch.utils.checkpoint import checkpoint

from minimal_attn.backends.snell.config import check_switch  # noqa: F401 (re-exported)
from minimal_attn.errors import InputError, check_paradigm
from minimal_attn.losses import phase  # noqa: F401 (the hybrid's schedule, re-exported)

#: Bytes one chunk of per-position log-probabilities may take (forward; the
#: backward recomputes the chunk, so the peak stays about this size).
CHUNK_BYTES = 128 * 2 ** 20
#: The CPU's budget, when smaller: a chunk past glibc's mmap threshold (32 MiB at most) is
#: mapped and unmapped at every use, its pages faulted in anew (an LV synthetic run spent
#: half its time in the kernel); 8 MiB chunks come from the heap, and the run took 0.6x.
CPU_CHUNK_BYTES = 8 * 2 ** 20
_LOG_HALF = -math.log(2.0)


# --------------------------------------------------------------- losses (per token)
def loss_ha(log_alpha, log_lik):
    r"""HA per token, V&R Sec. 2.3 (its gradients: V&R Eqs. (9)-(10)):
    :math:`-\sum_l \alpha_{t,l}\,\ell\ell_{t,l}`; (..., L) -> (...).

    ``log_lik`` :math:`\ell\ell_{t,l} = \log p(y_t \mid s_t, h_l)`. Zero attention
    (``log_alpha = -inf``) contributes 0 even where ``log_lik`` is -inf.
    """
    alpha = log_alpha.exp()
    # masked before the product, so no 0 * inf reaches the gradient either
    return -(alpha * torch.where(alpha > 0, log_lik, torch.zeros_like(log_lik))).sum(-1)


def loss_lv(log_alpha, log_lik):
    r"""LV per token, V&R Sec. 2.3 (its gradients: V&R Eqs. (11)-(12)):
    :math:`-\log\sum_l \alpha_{t,l}\, e^{\ell\ell_{t,l}}`.

    (..., L) -> (...).

    :math:`-\log M` with :math:`M = \sum_l \alpha_l p_l` as a log-sum-exp; where
    :math:`M > 1/2` it is :math:`-\mathrm{log1p}(-q)` with
    :math:`q = 1 - M = \sum_l \alpha_l (-\mathrm{expm1}(\ell\ell_l))`, which keeps
    its digits as the loss goes to 0 (the core's form, :func:`minimal_attn.losses.lv_from_log_lik`).
    """
    joint = log_alpha + log_lik                                        # (..., L) log alpha_l p_l
    log_m = torch.logsumexp(joint, -1).clamp(max=0.0)                  # (...) log M <= 0
    alpha = log_alpha.exp()
    q = (alpha * -torch.expm1(log_lik)).sum(-1)                        # (...) 1 - M
    half = log_m > _LOG_HALF                                           # M > 1/2: use q
    near = -torch.log1p(-torch.where(half, q, torch.zeros_like(q)))    # masked: no nan gradient
    return torch.where(half, near, -log_m)


def token_loss(paradigm, log_alpha, log_lik, log_lik_sa=None):
    """Per-token loss of ``sa`` (needs ``log_lik_sa`` = log p(y_t | s_t, c_t)), ``ha`` or ``lv``."""
    paradigm = check_paradigm(paradigm, ("sa", "ha", "lv"))
    if paradigm == "sa":
        return -log_lik_sa
    return {"ha": loss_ha, "lv": loss_lv}[paradigm](log_alpha, log_lik)


# --------------------------------------------------------------- inference (per token)
def infer_ha(log_alpha, logp_pos):
    r"""HA inference: :math:`\log p(\cdot \mid s_t, h_{\hat l})`,
    :math:`\hat l = \arg\max_l \alpha_{t,l}`.

    log_alpha (..., L); logp_pos (..., L, V). Returns (..., V) log-probabilities.
    """
    top = log_alpha.argmax(-1)                                         # (...)
    idx = top[..., None, None].expand(top.shape + (1, logp_pos.shape[-1]))
    return logp_pos.gather(-2, idx).squeeze(-2)


def infer_lv(log_alpha, logp_pos):
    r"""LV inference: the mixture :math:`\log\sum_l \alpha_{t,l}\,p(\cdot \mid s_t, h_l)`,
    (..., V)."""
    return torch.logsumexp(log_alpha[..., None] + logp_pos, -2)


def infer(rule, log_alpha, logp_pos):
    """Log output distribution (..., V) by ``ha``/``hybrid`` (argmax position) or ``lv``
    (mixture)."""
    rule = check_paradigm(rule)
    if rule == "sa":
        raise InputError("SA infers from the context vector, not from the positions",
                         param="paradigm")
    return (infer_lv if rule == "lv" else infer_ha)(log_alpha, logp_pos)


def log_attention(logits, mask, uniform=False):
    """log alpha (..., L), Snell Eq. (1)/(7): log-softmax over the real positions (-inf at
    padding); ``uniform``: -log(number of real positions)."""
    if uniform:
        m = mask.to(logits.dtype)
        return torch.log(m) - torch.log(m.sum(-1, keepdim=True))
    return torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


# --------------------------------------------------------------- memory: chunks over T
def chunk_size(n_per_t, itemsize, budget=None, device=None):
    """Target tokens per chunk so one chunk of ``n_per_t`` numbers per token fits ``budget``
    (default :data:`CHUNK_BYTES`, at most :data:`CPU_CHUNK_BYTES` off a GPU ``device``)."""
    if budget is None:
        on_gpu = device is not None and torch.device(device).type == "cuda"
        budget = CHUNK_BYTES if on_gpu else min(CHUNK_BYTES, CPU_CHUNK_BYTES)
    return max(1, int(budget // max(1, n_per_t * itemsize)))


def over_target_chunks(fn, per_t, t_axis, chunk):
    """``torch.cat([fn(*chunk_of(per_t)) ...], t_axis)`` over chunks of ``chunk`` target tokens.

    Every tensor in ``per_t`` has the target axis at ``t_axis``; ``fn`` maps a
    chunk to a tensor with that axis at the same place. While autograd records,
    each chunk is checkpointed: its (…, T_c, L, V) intermediates are recomputed
    in the backward pass instead of kept, so the peak memory is one chunk.
    """
    T = per_t[0].shape[t_axis]
    if T <= chunk:                # one chunk: recomputing it would save nothing
        return fn(*per_t)
    outs = []
    for t0 in range(0, T, chunk):
        part = [a.narrow(t_axis, t0, min(chunk, T - t0)) for a in per_t]
        if torch.is_grad_enabled() and any(a.requires_grad for a in part):
            # fn draws no random numbers, so no RNG state to keep (reading the CUDA one
            # is refused while a CUDA graph captures the step: .synthetic_graph)
            outs.append(checkpoint(fn, *part, use_reentrant=False, preserve_rng_state=False))
        else:
            outs.append(fn(*part))
    return torch.cat(outs, t_axis)


# --------------------------------------------------------------- the hybrid's switch
def switch_deadline(steps):
    """``auto``'s latest switch: ``steps - steps // 4`` (at least one step before the end),
    so HA trains for at least a quarter of the steps. Training evaluates at this step
    whenever the switch is ``auto`` (``.train``, ``.synthetic_train``), so the deadline
    is met exactly, whatever the evaluation schedule."""
    return steps - max(1, steps // 4)


def switch_now(focus, m, step, steps):
    r"""``auto``: switch at ``step`` once SA's focus has risen and stalled, or at the latest.

    V&R's rule for the FCAMs (:func:`minimal_attn.experiments.train_loop.auto_switch`)
    with the mean :math:`\max_l \alpha_{t,l}` (``focus``, one value per evaluation so
    far) in place of :math:`a_z` and ``m`` positions; at the latest
    :func:`switch_deadline` (``steps - steps // 4``).
    """
    from minimal_attn.experiments.train_loop import auto_switch

    return bool(auto_switch(list(focus), m) or step >= switch_deadline(steps))
