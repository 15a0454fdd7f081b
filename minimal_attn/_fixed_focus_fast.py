r"""The fast linear fixed-focus model: exact compression and memoisation (private).

:class:`LinearFixedFocusModel` computes what
:class:`minimal_attn.fixed_focus.ReferenceFixedFocusModel` computes, to float
rounding (tested in ``tests/test_fixed_focus.py``), through the same loss
functions (:mod:`minimal_attn.losses`), with tricks that change no value in exact
arithmetic:

* **instances**: two mosaics with the same label and the same multiset of
  (segment, attention) pairs have the same loss and gradient, so each distinct
  one is kept once with its count as the instance weight. The exact population
  (``N = 2 C m``) shrinks to ``2 C`` instances under a fixed focus, since moving
  the foreground only reorders the segments.
* **segments**: the HA and LV losses see a segment only through the label's
  log-likelihood, so the classifier runs once per *distinct* segment (A, K, C);
  the backward sums the softmax chain per (segment, label).
* **memoisation**: an epoch of :func:`fixed_focus_curves` evaluates one ``W``
  under alpha and alpha', then steps under alpha; the loss evaluation keeps its
  gradient, so the step costs nothing new. Entries are valid while ``W`` is the
  same read-only array (the model marks its states read-only).

Host-side NumPy (``np.unique`` with ``axis`` and ``np.lexsort`` have no
array-API equivalent); use the reference model for other namespaces.
"""

import numpy as np

from minimal_attn import fcam, losses
from minimal_attn.data import check_log_attention, check_mosaics
from minimal_attn.errors import check_int_at_least, check_paradigm


def _frozen(array):
    """Mark ``array`` read-only, so the model may recognise it again by identity."""
    array.setflags(write=False)
    return array


class LinearFixedFocusModel:
    r"""The linear classifier :math:`g(x) = Wx` of Section 4, one per alpha, focus frozen.

    State ``{"W": (A, C, d)}``; an epoch is one full-batch gradient step, so
    epoch ``k`` of the exact population approximates time ``k * lr`` of Theorem 1 (an
    explicit Euler step).
    """

    def __init__(self, X, y, n_classes, init_scale=0.0, seed=0):
        self.n_classes = check_int_at_least("n_classes", n_classes, 2)
        self.X = np.asarray(X, dtype=float)                               # (N, m, d)
        check_mosaics(self.X, y, self.n_classes)          # float or out-of-range labels
        self.y = np.asarray(y, dtype=np.int64)                            # (N,)
        self.init_scale, self.seed = init_scale, seed
        N, m, d = self.X.shape
        U, inv = np.unique(self.X.reshape(N * m, d), axis=0, return_inverse=True)
        self._U = U                                                       # (K, d) distinct segments
        self._segment_id = inv.reshape(N, m)                              # (N, m) row of each in U
        self._cache = []                                # [(log_attention, compiled)], newest first
        self._memo = {}                                 # results for the current W

    def init(self, alphas):
        """The same initial W for every alpha (zero by default, as in Theorem 1)."""
        W = fcam.init_params(self.X.shape[2], self.n_classes, self.init_scale, self.seed)["W"]
        return {"W": _frozen(np.repeat(W[None], len(alphas), axis=0))}   # (A, C, d)

    def losses(self, state, log_attention, paradigm):
        return self.loss_and_grad(state, log_attention, paradigm, grad=False)[0]

    def step(self, state, log_attention, paradigm, lr):
        _, dW = self.loss_and_grad(state, log_attention, paradigm)
        return {"W": _frozen(state["W"] - lr * dW)}

    def loss_and_grad(self, state, log_attention, paradigm, grad=True):
        """Per-alpha losses (A,) and dL/dW (A, C, d) under the fixed ``log_attention`` (A, N, m)."""
        paradigm = check_paradigm(paradigm, losses.LOSS_PARADIGMS)
        W = state["W"]
        if self._memo.get("W") is not W or W.flags.writeable or not W.flags.owndata:
            self._memo = {"W": W}
        c = self._compile(log_attention)
        key = (paradigm, id(c))
        if key not in self._memo:
            self._memo[key] = self._value_and_grad(W, c, paradigm)
        value, dW = self._memo[key]
        return value, (dW if grad else None)

    def _value_and_grad(self, W, c, paradigm):
        """Losses (A,) and dW (A, C, d) from the losses' functions, all alphas at once.

        The leading axis A of the scores and logits is the alpha (one problem each).
        """
        weight = c["weight"]                                              # (N',)
        if paradigm == "sa":
            x_tilde = c["x_tilde"]                                        # (A, N', d)
            value, dlogits = losses.value_and_grad_sa(x_tilde @ W.transpose(0, 2, 1),
                                                      c["y"], weight)     # (A, N', C)
            return value, dlogits.transpose(0, 2, 1) @ x_tilde           # V&R Eq. (7)
        A, K, C = W.shape[0], self._U.shape[0], self.n_classes
        logp = losses.log_softmax(self._U @ W.transpose(0, 2, 1))         # (A, K, C) per segment
        log_lik = logp.reshape(A, -1)[:, c["flat"]]                       # (A, N', m) log sigma_y
        head = losses.ha_from_log_lik if paradigm == "ha" else losses.lv_from_log_lik
        value, _, dlog_lik = head(c["log_attention"], log_lik, weight, focus_grad=False)
        # The softmax chain of every (instance, segment) showing segment k with label c,
        # summed: D[k, c] = -sum dlog_lik >= 0, and dL/dg(u_k) = sum_c D[k, c] (sigma - e_c)
        # = (S_k - D[k]) sigma + D[k] (sigma - 1), S_k = sum_c D[k, c]; sigma - 1 as expm1(log
        # sigma) keeps the label's entry where sigma rounds to 1 (losses._minus_onehot's job).
        D = np.bincount(c["bins"], -dlog_lik.ravel(), minlength=A * K * C).reshape(A, K, C)
        dG = (D.sum(axis=2, keepdims=True) - D) * np.exp(logp) + D * np.expm1(logp)  # (A, K, C)
        return value, dG.transpose(0, 2, 1) @ self._U                     # V&R Eqs. (9), (11)

    def _compile(self, log_attention):
        """Distinct instances under ``log_attention`` (cached: a run reuses two arrays)."""
        for ref, compiled in self._cache:                # the same read-only array: a hit
            if ref is log_attention:
                return compiled
        for ref, compiled in self._cache:                # a writable (or new) array: compare
            if ref.shape == np.shape(log_attention) and np.array_equal(ref, log_attention):
                return compiled
        la = np.asarray(check_log_attention(log_attention, *self._segment_id.shape), dtype=float)
        if la.flags.writeable or not la.flags.owndata:
            la = _frozen(la.copy())
        A, N, _ = la.shape
        # canonical instance: its (segment, attention) pairs sorted by segment, then attention
        keys = np.concatenate([self._segment_id[None].astype(float), la])  # (1 + A, N, m)
        order = np.lexsort(keys[::-1], axis=-1)                           # (N, m)
        canon = np.take_along_axis(keys, order[None], axis=2)             # (1 + A, N, m)
        rows = np.column_stack([self.y, canon.transpose(1, 0, 2).reshape(N, -1)])
        _, rep, count = np.unique(rows, axis=0, return_index=True, return_counts=True)
        K, C = self._U.shape[0], self.n_classes
        flat = self._segment_id[rep] * C + self.y[rep][:, None]           # (N', m) in (K * C)
        compiled = {
            "weight": count / N,                                          # (N',) sums to 1
            "y": self.y[rep],                                             # (N',)
            "log_attention": la[:, rep],                                  # (A, N', m)
            "x_tilde": (np.exp(la[:, rep])[:, :, None, :] @ self.X[rep])[:, :, 0],  # (A, N', d)
            "flat": flat,
            # bin of each (alpha, instance, segment) in the flattened (A, K, C)
            "bins": (flat + (np.arange(A) * K * C)[:, None, None]).ravel(),
        }
        self._cache = [(la, compiled)] + self._cache[:3]
        return compiled
