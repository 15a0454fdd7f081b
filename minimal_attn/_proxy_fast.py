r"""The proxy's training loop, fast (private): what :func:`minimal_attn.proxy.train_proxy` runs.

Three pieces, each tested equal to the readable form in :mod:`minimal_attn.proxy`
(``tests/test_proxy_fast.py``; the first two bit for bit on NumPy):

* :func:`batch_maker`: the training pairs flattened once, so an epoch's minibatches are
  one vectorised gather (the readable :func:`~minimal_attn.proxy.make_batch` builds
  each from a Python list of pairs at every step), on the parameters' device;
* :func:`adam_step`: Adam in place, the textbook arithmetic operation for
  operation, into two scratch buffers per parameter. The embedding table e is
  (|I|, d), every row of its gradient moves, and ten fresh (|I|, d) temporaries a
  step cost more than the arithmetic (page faults on the CPU); on a GPU it is a
  handful of elementwise kernels;
* :func:`beta_px_rows`: the probe of Snell Eq. (6) for many pairs, one gather from a
  table of each distinct word, instead of one small product per pair.

All are written against the array namespace of the parameters (NumPy, CuPy,
torch on any device); the index building is host-side NumPy, once an epoch.
"""

import numpy as np

from minimal_attn._numerics import log_softmax
from minimal_attn._xp import get_xp, like, to_numpy
from minimal_attn.errors import check_ids

#: NumPy Adam works through the rows in blocks of about this size, which stay in cache
#: across its dozen elementwise passes (a whole (|I|, d) table goes to memory and back
#: at each pass).
CHUNK_BYTES = 1 << 18


def _gather(ids, lengths, idx):
    """Sequences ``idx`` of ``ids`` (every sequence concatenated, ``lengths`` (P,) each),
    concatenated in that order, and their lengths: one vectorised gather."""
    n = lengths[idx]                                                   # (B,)
    starts = np.cumsum(lengths) - lengths                              # (P,) where each begins
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)       # 0 .. n_b - 1 each
    return ids[np.repeat(starts[idx], n) + within], n


def batch_maker(src, tgt, n_src=None, n_tgt=None):
    """``f(order, batch_size, ref=None)``: the minibatches of one pass over the pairs in
    ``order``, batch k the pairs ``order[k*batch_size:(k+1)*batch_size]`` and equal to
    ``make_batch`` of them.

    The pairs are flattened (and checked) once by ``make_batch`` of all of them; a pass is
    one vectorised gather, and each batch is a slice of the pass's arrays. With ``ref`` (an
    array on a device) those arrays go to its device in one copy each, so a training step
    reads no host array: a copy from pageable host memory waits for the card to reach it, and
    a card shared with other processes makes each such wait long.
    """
    from minimal_attn.proxy import Batch, make_batch

    whole = make_batch(src, tgt, n_src, n_tgt)
    L, T = (np.bincount(p, minlength=whole.n_pairs).astype(np.int64)
            for p in (whole.src_pair, whole.tgt_pair))

    def make(order, batch_size, ref=None):
        (s, n_s), (t, n_t) = _gather(whole.src, L, order), _gather(whole.tgt, T, order)
        within = np.arange(len(order)) % batch_size                     # pair index in its batch
        s, src_pair, src_w, t, tgt_pair, _ = on_device(Batch(
            s, np.repeat(within, n_s), 1.0 / np.repeat(n_s, n_s), t, np.repeat(within, n_t),
            len(order)), ref)
        firsts = np.arange(0, len(order), batch_size)
        s_cut, t_cut = (np.concatenate([[0], np.cumsum(n)])[np.append(firsts, len(order))]
                        for n in (n_s, n_t))              # where each batch's tokens begin
        return [Batch(s[a:b], src_pair[a:b], src_w[a:b], t[c:d], tgt_pair[c:d],
                      int(min(batch_size, len(order) - first)))
                for first, a, b, c, d in zip(firsts, s_cut, s_cut[1:], t_cut, t_cut[1:])]
    return make


def on_device(batch, ref):
    """``batch`` with its arrays copied to ``ref``'s namespace and device (None: as it is)."""
    if ref is None:
        return batch
    xp = get_xp(ref)
    return batch._replace(**{k: like(xp, getattr(batch, k), ref)
                             for k in batch._fields if k != "n_pairs"})


def _sqrt_(a):
    """``a = sqrt(a)`` in place (NumPy ``out=``, torch ``sqrt_``; other arrays via a copy)."""
    if hasattr(a, "sqrt_"):
        a.sqrt_()
    elif isinstance(a, np.ndarray):
        np.sqrt(a, out=a)
    else:
        a[...] = get_xp(a).sqrt(a)


def adam_step(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
    """:func:`minimal_attn.proxy._adam` in place, with the same rounding at every step.

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  p -= lr mhat / (sqrt(vhat) + eps),
    mhat = m / (1 - b1^t), vhat = v / (1 - b2^t): each product and quotient taken in the
    order the readable form takes it (IEEE products commute, so ``a = g; a *= c`` is
    ``c * g``).
    """
    t = state["t"] = state.get("t", 0) + 1
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    for k, g in grads.items():
        if "m_" + k not in state:
            for name in ("m_", "v_"):
                state[name + k] = get_xp(g).zeros_like(g)
            rows = max(1, CHUNK_BYTES // max(g[:1].nbytes, 1)) if isinstance(g, np.ndarray) \
                else g.shape[0]          # NumPy: blocks that stay in cache; else all at once
            state["a_" + k], state["b_" + k] = (get_xp(g).zeros_like(g[:rows]) for _ in "ab")
        A, B = state["a_" + k], state["b_" + k]
        for lo in range(0, g.shape[0], A.shape[0]):
            hi = min(lo + A.shape[0], g.shape[0])
            _adam_block(params[k][lo:hi], g[lo:hi], state["m_" + k][lo:hi],
                        state["v_" + k][lo:hi], A[:hi - lo], B[:hi - lo], lr, b1, b2, eps, c1, c2)


def _adam_block(p, g, m, v, a, b, lr, b1, b2, eps, c1, c2):
    m *= b1
    a[...] = g
    a *= 1 - b1
    m += a                                                     # b1 m + (1 - b1) g
    v *= b2
    a[...] = g
    a *= 1 - b2
    a *= g
    v += a                                                     # b2 v + (1 - b2) g g
    a[...] = m
    a /= c1                                                    # mhat
    b[...] = v
    b /= c2                                                    # vhat
    _sqrt_(b)
    b += eps
    a *= lr
    a /= b                                                     # lr mhat / (sqrt(vhat) + eps)
    p -= a


def beta_px_rows(params, xs, ys, max_entries=1 << 22):
    """``[proxy.beta_px(params, x, y) for x, y in zip(xs, ys)]`` as NumPy arrays, from one
    log-softmax table per group of pairs (of each distinct source word of the group, so a
    repeated word gets the very same numbers: Kendall's tau sees its ties), gathered in the
    parameters' namespace (on their device) and read back once a group. A group's table
    holds at most about ``max_entries`` numbers."""
    W = params["W"]
    xp = get_xp(W, params["e"])
    L = np.fromiter(map(len, xs), dtype=np.int64, count=len(xs))
    T = np.fromiter(map(len, ys), dtype=np.int64, count=len(ys))
    out, per = [], max(1, max_entries // max(W.shape[0], 1))           # source tokens a group
    start = 0
    while start < len(xs):
        stop = max(start + 1, int(np.searchsorted(np.cumsum(L[start:]), per, "right")) + start)
        out += _beta_px_group(params, xp, xs[start:stop], ys[start:stop], L[start:stop],
                              T[start:stop])
        start = stop
    return out


def _beta_px_group(params, xp, xs, ys, L, T):
    W, e = params["W"], params["e"]
    if not (L * T).sum():
        return [np.zeros((t_n, l_n)) for t_n, l_n in zip(T, L)]
    x_all = np.concatenate([np.asarray(x, dtype=np.int64) for x in xs])   # (sum L,)
    y_all = np.concatenate([np.asarray(y, dtype=np.int64) for y in ys])   # (sum T,)
    check_ids(x_all, e.shape[0], "source")
    check_ids(y_all, W.shape[0], "target")
    words, word_of = np.unique(x_all, return_inverse=True)
    # (words, |O|): Snell Eq. (6) once per distinct word
    logp = log_softmax(xp.take(e, like(xp, words, W), axis=0) @ W.T)
    # entry (t, l) of pair n reads logp[word of token start_L[n] + l, y_all[start_T[n] + t]]
    size = T * L
    pair = np.repeat(np.arange(len(xs)), size)
    k = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)  # t * L_n + l
    rows = word_of.reshape(-1)[(np.cumsum(L) - L)[pair] + k % L[pair]]
    cols = y_all[(np.cumsum(T) - T)[pair] + k // L[pair]]
    flat = to_numpy(xp.exp(xp.take(xp.reshape(logp, (-1,)),
                                   like(xp, rows * logp.shape[1] + cols, W))))
    return [a.reshape(t_n, l_n) for a, t_n, l_n in
            zip(np.split(flat, np.cumsum(size)[:-1]), T, L)]
