r"""The bag-of-words proxy model of Snell et al. (2021), Snell Eqs. (5), (6) and (14).

With attention frozen uniform, a seq2seq model predicts every output word from
the same average input embedding. The proxy keeps only that (Section 2.3):

.. math:: p_t = \mathrm{softmax}\Big(\frac{1}{L} \sum_{l=1}^{L} W e_{x_l}\Big)
          \quad \text{for every } t, \qquad
          \mathcal{L} = -\sum_{(x, y)} \sum_{t=1}^{T} \log p_t[y_t] \quad (14)

with input embeddings ``e`` (|I|, d) and output matrix ``W`` (|O|, d). Its
knowledge to translate individual words (KTIW) is read by the probe of Snell Eq. (6),
:math:`\beta^{px}_{t,l} = \mathrm{softmax}(W e_{x_l})[y_t]`. Binary
classification is the case T = 1, |O| = 2 (Section 2.4).

Gradients are written by hand beside the forward pass. With
:math:`\bar e = \frac1L \sum_l e_{x_l}` (every occurrence counts) and the
*residual* :math:`r = T p - \sum_t \mathrm{onehot}(y_t)` per pair (the
gradient of the pair's loss with respect to its logits),
``dW = sum_pairs r ebar^T`` and ``de_i = sum_pairs (n_i(x)/L) W^T r``.

Snell Eq. (15), the velocity of the logits at initialisation, is in
:mod:`minimal_attn.proxy_velocity`. Tables here are indexed [source word i, target word o],
like :mod:`minimal_attn.ibm1`.
"""

import dataclasses
from typing import NamedTuple

import numpy as np

from minimal_attn import _proxy_fast
from minimal_attn._xp import get_xp, like, scatter_add_rows, to_numpy
from minimal_attn.errors import InputError, check_ids, check_int_at_least, check_positive, diverged
from minimal_attn.losses import log_softmax


@dataclasses.dataclass
class ProxyConfig:
    """Training settings of the proxy model."""

    d: int = 64              # embedding width
    epochs: int = 5          # passes over the training pairs
    batch_size: int = 64     # pairs per gradient step
    lr: float = 1e-2         # step size (Adam; the paper's code used Adam)
    optimizer: str = "adam"  # "adam" or "sgd"
    seed: int = 0            # initialisation and shuffling


class Batch(NamedTuple):
    """A set of pairs, flattened: one entry per source token and per target token."""

    src: np.ndarray        # (Ns,) source word ids
    src_pair: np.ndarray   # (Ns,) pair of each source token
    src_w: np.ndarray      # (Ns,) 1/L of its pair (the uniform attention)
    tgt: np.ndarray        # (Nt,) target word ids
    tgt_pair: np.ndarray   # (Nt,) pair of each target token
    n_pairs: int


def proxy_bytes(n_src, n_tgt, n_val, d, batch_size):
    """Memory :func:`train_proxy` needs (bytes, an estimate): parameters, gradients, two
    Adam moments and the best copy; the (B, |O|) and held-out (n_val, |O|) logits with
    their softmax and gradient."""
    return 8 * (6 * (n_src + n_tgt) * d + 3 * (batch_size + n_val) * (n_tgt + d))


def make_batch(src, tgt, n_src=None, n_tgt=None):
    """Flatten lists of id arrays into a :class:`Batch` (pairs with an empty source are
    invalid; with ``n_src``, ``n_tgt`` the ids are checked to lie in the vocabularies)."""
    L = np.array([len(s) for s in src], dtype=np.int64)
    T = np.array([len(t) for t in tgt], dtype=np.int64)
    if len(L) != len(T):
        raise InputError(f"{len(L)} source sentences but {len(T)} target sentences")
    if np.any(L == 0):
        raise InputError(f"pair {int(np.argmin(L))} has an empty source; drop it")

    def cat(seqs):
        return (np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs])
                if len(seqs) else np.zeros(0, dtype=np.int64))

    src_pair = np.repeat(np.arange(len(L)), L)
    flat_src, flat_tgt = cat(src), cat(tgt)
    if n_src is not None:
        check_ids(flat_src, n_src, "source")
    if n_tgt is not None:
        check_ids(flat_tgt, n_tgt, "target")
    return Batch(flat_src, src_pair, 1.0 / L[src_pair], flat_tgt,
                 np.repeat(np.arange(len(T)), T), len(L))


def init_params(n_src, n_tgt, d, rng):
    """``{"W": (|O|, d), "e": (|I|, d)}`` drawn from N(0, I/d), as in Section 4.1."""
    scale = 1.0 / np.sqrt(d)
    return {"W": rng.normal(0.0, scale, (n_tgt, d)), "e": rng.normal(0.0, scale, (n_src, d))}


def loss_and_grads(params, batch):
    """Forward pass of Snell Eq. (5), summed NLL of Snell Eq. (14), and hand-written gradients.

    ``params`` may live in any array namespace (the batch's index arrays follow it).

    Returns
    -------
    loss : float
    grads : dict  ``{"W": (|O|, d), "e": (|I|, d)}``
    """
    loss, grads = _loss_and_grads(params, batch)
    return float(loss), grads


def _loss_and_grads(params, batch):
    """:func:`loss_and_grads` with the loss left an array of the parameters' namespace."""
    W, e = params["W"], params["e"]
    xp = get_xp(W, e)
    src, src_pair, tgt = (like(xp, a, W) for a in (batch.src, batch.src_pair, batch.tgt))
    src_w = like(xp, batch.src_w, W)
    tgt_pair = like(xp, batch.tgt_pair, W)
    B, n_out = batch.n_pairs, W.shape[0]
    ebar = scatter_add_rows(xp, src_pair, xp.take(e, src, axis=0) * src_w[:, None], B)  # (B, d)
    logp = log_softmax(ebar @ W.T)                                    # (B, |O|), Snell Eq. (5)
    picked = xp.take(xp.reshape(logp, (-1,)), tgt_pair * n_out + tgt)     # (Nt,) log p_t[y_t]
    loss = -xp.sum(picked)                                            # Snell Eq. (14)
    # backward, Snell Eq. (44) summed over the pair's T outputs (Eq. (43)):
    # -dL/de_i = (1/L) sum_l 1[x_l = i] sum_t (W_{y_t} - sum_o p_o W_o) = -(1/L) #i r W, with
    # the residual r = T p - n, n the counts of each output word in the pair. r is written
    # (T - n) p - n (1 - p) with 1 - p = -expm1(log p): both terms exact where p rounds to 1.
    # Everything is made where W lives, so a step on a device reads nothing from the host.
    ones = xp.reshape(xp.ones_like(tgt, dtype=W.dtype), (-1, 1))             # (Nt, 1)
    T = scatter_add_rows(xp, tgt_pair, ones, B)[:, 0]                        # (B,) lengths
    counts = xp.reshape(scatter_add_rows(xp, tgt_pair * n_out + tgt, ones, B * n_out),
                        (B, n_out))                                           # (B, |O|)
    residual = (T[:, None] - counts) * xp.exp(logp) + counts * xp.expm1(logp)  # (B, |O|)
    debar = residual @ W                                              # (B, d)
    de = scatter_add_rows(xp, src, xp.take(debar, src_pair, axis=0) * src_w[:, None],
                          e.shape[0])                                 # (|I|, d)
    return loss, {"W": residual.T @ ebar, "e": de}


def beta_px(params, x, y):
    r"""The proxy's probe, Snell Eq. (6): beta^px_{t,l} = softmax(W e_{x_l})[y_t].

    Parameters
    ----------
    x : int array, shape (L,)   source ids
    y : int array, shape (T,)   target ids

    Returns
    -------
    array, shape (T, L)
    """
    W, e = params["W"], params["e"]
    if np.ndim(to_numpy(x)) != 1 or np.ndim(to_numpy(y)) != 1:       # one pair at a time
        raise InputError(f"x and y must be id vectors (L,) and (T,) of one pair, got shapes "
                         f"{np.shape(to_numpy(x))} and {np.shape(to_numpy(y))}")
    check_ids(to_numpy(x), e.shape[0], "source")
    check_ids(to_numpy(y), W.shape[0], "target")
    xp = get_xp(W, e)
    logp = log_softmax(xp.take(e, like(xp, x, W), axis=0) @ W.T)       # (L, |O|)
    return xp.exp(xp.take(logp, like(xp, y, W), axis=1)).T            # (T, L), Snell Eq. (6)


def word_translation(params):
    """Snell Eq. (13): the proxy's KTIW table theta^px_i = softmax(W e_i) for every source
    word i, shape (|I|, |O|)."""
    return get_xp(params["W"]).exp(log_softmax(params["e"] @ params["W"].T))


# ------------------------------------------------------------------- training
#: a loss per output word this many times the uniform model's (log |O|) has diverged
GROWTH = 100.0


def check_proxy_config(cfg):
    """Refuse training settings that cannot run (naming the field); return ``cfg``."""
    if not isinstance(cfg, ProxyConfig):
        raise InputError(f"config must be a ProxyConfig, got {type(cfg).__name__}")
    for name, low in (("d", 1), ("epochs", 0), ("batch_size", 1), ("seed", 0)):
        check_int_at_least(name, getattr(cfg, name), low, param=name)
    check_positive("lr", cfg.lr, param="lr")
    if cfg.optimizer not in ("adam", "sgd"):
        raise InputError(f"optimizer must be adam or sgd, got {cfg.optimizer!r}", "optimizer")
    return cfg


def _adam(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
    """Adam, the textbook form; training runs its in-place twin ``_proxy_fast.adam_step``."""
    state["t"] = state.get("t", 0) + 1
    for k, g in grads.items():
        m = state.setdefault("m_" + k, np.zeros_like(g))
        v = state.setdefault("v_" + k, np.zeros_like(g))
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** state["t"]), v / (1 - b2 ** state["t"])
        params[k] -= lr * mhat / (np.sqrt(vhat) + eps)


def train_proxy(src, tgt, n_src, n_tgt, config=None, val=None, callback=None, like_array=None):
    """Train the proxy on the summed NLL with minibatches; keep the best validation epoch.

    Parameters
    ----------
    src, tgt : lists of int arrays      training pairs
    config : ProxyConfig
    val : (src, tgt) or None            held-out pairs; if given, the returned
                                        parameters are those of the epoch with the
                                        lowest validation loss (as the paper's code)
    callback : callable(epoch, record)  after each epoch (progress bars)
    like_array : array or None          train in its namespace and on its device (e.g.
                                        a torch CUDA tensor); None: NumPy

    Returns
    -------
    params : dict ``{"W", "e"}``
    history : list of dict   per epoch: ``train_loss`` and ``val_loss`` per output word

    A run whose loss per output word becomes non-finite or passes ``GROWTH`` times the
    uniform model's is refused (:class:`~minimal_attn.errors.DivergedError`).
    """
    cfg = check_proxy_config(config or ProxyConfig())
    check_int_at_least("n_src", n_src, 1), check_int_at_least("n_tgt", n_tgt, 1)
    if not len(src) or val is not None and not len(val[0]):      # a loss of 0 would pass
        raise InputError(f"{'val' if len(src) else 'src'} holds no pairs: give at least one "
                         "(or val=None)", param="val" if len(src) else "src")
    limit = GROWTH * max(np.log(n_tgt), 1.0)      # the uniform model's loss is log |O|
    rng = np.random.default_rng(cfg.seed)
    params = init_params(n_src, n_tgt, cfg.d, rng)
    if like_array is not None:
        params = {k: like(get_xp(like_array), v, like_array) for k, v in params.items()}
    n_words = max(sum(len(t) for t in tgt), 1)
    ref = params["W"] if like_array is not None else None      # the device the batches go to
    val_batch = (_proxy_fast.on_device(make_batch(*val, n_src, n_tgt), ref)
                 if val is not None else None)
    val_words = max(sum(len(t) for t in val[1]), 1) if val is not None else 1
    best, best_loss, state, history = None, np.inf, {}, []
    batches = _proxy_fast.batch_maker(src, tgt, n_src, n_tgt)   # = make_batch of each slice
    for epoch in range(1, cfg.epochs + 1):
        order, total = rng.permutation(len(src)), 0.0
        for batch in batches(order, cfg.batch_size, ref):
            loss, grads = _loss_and_grads(params, batch)
            total = total + loss               # left on the device: read once an epoch
            if cfg.optimizer == "adam":
                _proxy_fast.adam_step(params, grads, state, cfg.lr)   # = _adam, in place
            else:
                for k in params:
                    params[k] -= cfg.lr * grads[k]
        record = {"epoch": epoch, "train_loss": float(total) / n_words}
        if val_batch is not None:
            record["val_loss"] = loss_and_grads(params, val_batch)[0] / val_words
        worst = max(record["train_loss"], record.get("val_loss", 0.0))
        if not np.isfinite(worst) or worst > limit:     # the probes would read noise
            raise diverged(f"the proxy's loss per output word reached {worst:.3g} at "
                           f"epoch {epoch}")
        if val_batch is not None and record["val_loss"] < best_loss:
            best_loss = record["val_loss"]
            best = {k: v.clone() if hasattr(v, "clone") else v.copy() for k, v in params.items()}
        history.append(record)
        if callback is not None:
            callback(epoch, record)
    return (best if best is not None else params), history
