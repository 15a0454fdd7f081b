r"""Fixed-focus analyses, Sections 3.1-3.3: loss curves (Figure 2) and incentives (Figure 3).

Vashisht & Ramaswamy (2023), Section 3. Freeze the focus so that it gives
:math:`\alpha` to the foreground segment :math:`x_z` and
:math:`(1-\alpha)/(m-1)` to each background segment, train only the
classifier ``g`` and watch

* the **fixed-focus loss** :math:`L^{FF}(g_{\alpha,t}, \alpha)` fall with the
  epoch ``t`` for each paradigm (Section 3.1, Figure 2), and
* the **focus-improvement incentive** (Sections 3.2-3.3, Figure 3)
  :math:`\delta_{\alpha,t} = L^{FF}(g_{\alpha,t}, \alpha) - L^{FF}(g_{\alpha,t}, \alpha')`
  with :math:`\alpha' = \min(\alpha + 0.01, 1)`: how much the loss would drop
  if the focus improved a little while the classifier stayed put.

:func:`fixed_focus_curves` runs both on any *fixed-focus model*, an object with

* ``init(alphas) -> state``: one classifier per alpha, from its initialisation;
* ``losses(state, log_attention, paradigm) -> (A,)``: the dataset loss of each
  alpha's classifier under the fixed attention ``log_attention`` (A, N, m);
* ``step(state, log_attention, paradigm, lr) -> state``: one epoch of training
  every alpha's classifier under its fixed attention (only ``g`` trains).

:class:`LinearFixedFocusModel` (here, NumPy) and
``minimal_attn.backends.torch_fixed_focus.CNNFixedFocusModel`` (CIFAR) implement it.
In the linear orthogonal setting Theorem 1 gives :math:`\mu(t)` in closed form
and :func:`closed_form_curves` turns it into exact loss and incentive curves.
"""

import numpy as np

from . import fcam, losses, ode
from .data import fixed_log_attention
from .errors import check_alpha, check_int_at_least, check_paradigm, check_positive

FF_PARADIGMS = ("sa", "ha", "lv")    # hybrid is a schedule, not a fixed-focus loss


# ------------------------------------------------------------ the losses of Section 3.1
def fixed_focus_loss(paradigm, g, X, y, z, alpha):
    r"""The fixed-focus losses :math:`L^{FF,SA}, L^{FF,HA}, L^{FF,LV}` of Section 3.1.

    With :math:`a_z = \alpha`, :math:`a_j = (1-\alpha)/(m-1)` for :math:`j \ne z`
    and :math:`\sigma_y` the softmax probability of the label (means over the data):

    .. math::
        L^{FF,SA} = -\log\sigma_y\big(g(\textstyle\sum_j a_j x_j)\big), \quad
        L^{FF,HA} = -\textstyle\sum_j a_j \log\sigma_y(g(x_j)), \quad
        L^{FF,LV} = -\log\textstyle\sum_j a_j\,\sigma_y(g(x_j)).

    The paper prints the background term of :math:`L^{FF,HA}` with a plus sign;
    a log-loss needs the minus, as implemented (typo in Section 3.1).
    The population versions in the linear orthogonal setting are
    :func:`minimal_attn.ode.population_loss`.

    Parameters
    ----------
    g : callable mapping segments (..., *segment_shape) to logits (..., C),
        e.g. ``lambda x: x @ W.T`` for the linear classifier, or a CNN
    X : array (N, m, *segment_shape); y, z : (N,) labels and foreground positions
    alpha : fixed foreground attention in [0, 1]
    """
    paradigm = check_paradigm(paradigm, FF_PARADIGMS)
    log_a = fixed_log_attention(z, X.shape[1], check_alpha(alpha))        # (N, m)
    if paradigm == "sa":
        x_tilde = np.einsum("nm,nm...->n...", np.exp(log_a), X)          # (N, ...)
        return float(losses.loss_sa(g(x_tilde), y))
    return float(losses.loss(paradigm, log_a, g(X), y))


# ------------------------------------------------------------ the analysis (Figures 2, 3)
def _log_attention(z, m, alphas):
    """Read-only (A, N, m) log fixed focus, one slice per alpha (read-only lets models cache)."""
    la = np.stack([fixed_log_attention(z, m, a) for a in alphas])          # (A, N, m)
    la.setflags(write=False)
    return la


def fixed_focus_curves(model, z, m, alphas, paradigms=FF_PARADIGMS, epochs=1000, lr=5.0,
                       delta=0.01, progress=None):
    r"""Fixed-focus loss and incentive curves, Sections 3.1-3.3 (Figures 2 and 3).

    For each paradigm, every alpha's classifier starts from ``model.init`` and
    trains for ``epochs`` epochs under the focus frozen at alpha; after every
    epoch ``k = 0..epochs`` we record :math:`L^{FF}(g_{\alpha,k}, \alpha)` and
    :math:`\delta_{\alpha,k} = L^{FF}(g_{\alpha,k}, \alpha) - L^{FF}(g_{\alpha,k}, \alpha')`,
    :math:`\alpha' = \min(\alpha + \text{delta}, 1)`.

    Parameters
    ----------
    model : a fixed-focus model (see the module docstring)
    z : (N,) true foreground positions of the model's data; m : segments per mosaic
    alphas : foreground scores in [0, 1]; paradigms : any of ``sa``, ``ha``, ``lv``
    progress : optional callable, called with 1 after each recorded epoch

    Returns
    -------
    dict ``{paradigm: {alpha: {"epoch", "loss", "incentive"}}}`` of arrays (epochs + 1,).
    """
    alphas = [check_alpha(a) for a in alphas]
    paradigms = [check_paradigm(p, FF_PARADIGMS) for p in paradigms]
    epochs = check_int_at_least("epochs", epochs, 0)
    check_positive("lr", lr)
    check_positive("delta", delta)
    m = check_int_at_least("m", m, 2)
    la = _log_attention(z, m, alphas)
    la_up = _log_attention(z, m, [min(a + delta, 1.0) for a in alphas])
    result = {}
    for p in paradigms:
        state = model.init(alphas)
        loss = np.empty((epochs + 1, len(alphas)))
        incentive = np.empty_like(loss)
        for k in range(epochs + 1):
            loss[k] = model.losses(state, la, p)
            incentive[k] = loss[k] - model.losses(state, la_up, p)
            if k < epochs:
                state = model.step(state, la, p, lr)
            if progress is not None:
                progress(1)
        epoch = np.arange(epochs + 1)
        result[p] = {a: {"epoch": epoch, "loss": loss[:, i], "incentive": incentive[:, i]}
                     for i, a in enumerate(alphas)}
    return result


# ------------------------------------------------------------ closed forms (Theorem 1)
def _theorem1_mu(paradigm, t, alpha, n_classes, iterations=64):
    r""":math:`\mu(t)` of Theorem 1 for a whole array ``t``, by vectorised bisection.

    Same root as :func:`minimal_attn.ode.theorem1_mu` (``t(mu)`` increases), but
    all times at once: 64 halvings of one bracket instead of one brentq per time.
    (Newton is unsafe here: the LV ``t(mu)`` is concave near 0 for small alpha.)
    """
    t = np.asarray(t, dtype=float)
    if alpha == 0:
        return np.zeros_like(t)
    with np.errstate(over="ignore"):
        hi = 1.0
        while ode.theorem1_time(paradigm, hi, alpha, n_classes) < t.max():
            hi *= 2.0
        lo, hi = np.zeros_like(t), np.full_like(t, hi)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            above = ode.theorem1_time(paradigm, mid, alpha, n_classes) >= t
            lo, hi = np.where(above, lo, mid), np.where(above, mid, hi)
    return 0.5 * (lo + hi)


def closed_form_curves(paradigm, alphas, epochs, lr, n_classes, delta=0.01):
    r"""Exact fixed-focus loss and incentive curves in the linear orthogonal setting.

    Epoch ``k`` is time :math:`t = k\,\mathrm{lr}` of Theorem 1; with
    :math:`\mu = \mu_\alpha(t)` the population losses (:func:`ode.population_loss`) are
    :math:`L^{SA} = \log(1 + (C-1)e^{-\alpha\mu})`,
    :math:`L^{HA} = -\alpha\log\beta(\mu) + (1-\alpha)\log C`,
    :math:`L^{LV} = -\log(\alpha\beta(\mu) + (1-\alpha)/C)`, and the incentive
    is :math:`L(\mu, \alpha) - L(\mu, \min(\alpha + \text{delta}, 1))` at the same mu.

    Returns ``{alpha: {"loss_closed_form", "incentive_closed_form"}}`` of arrays (epochs + 1,).
    """
    paradigm = check_paradigm(paradigm, FF_PARADIGMS)
    t = np.arange(epochs + 1) * float(lr)
    out = {}
    for alpha in alphas:
        mu = _theorem1_mu(paradigm, t, alpha, n_classes)
        loss = ode.population_loss(paradigm, mu, alpha, n_classes)
        up = ode.population_loss(paradigm, mu, min(alpha + delta, 1.0), n_classes)
        out[alpha] = {"loss_closed_form": loss, "incentive_closed_form": loss - up}
    return out


# ------------------------------------------------------------ the linear model, all alphas
def _frozen(array):
    """Mark ``array`` read-only, so a model may recognise it again by identity."""
    array.setflags(write=False)
    return array


class LinearFixedFocusModel:
    r"""The linear classifier :math:`g(x) = Wx` of Section 4, one per alpha, focus frozen.

    State ``{"W": (A, C, d)}``; an epoch is one full-batch gradient step, so
    epoch ``k`` of the exact population is time ``k * lr`` of Theorem 1.
    Losses and gradients equal :func:`minimal_attn.fcam.loss_and_grad` with the
    same ``log_attention`` for each alpha (``tests/test_fixed_focus.py``).

    Speed comes from two exact compressions, not from approximations:

    * segments: logits are computed once per *distinct* segment, (A, K, C), and
      only the label's log-probability is gathered per (instance, segment);
    * instances: two mosaics with the same label and the same multiset of
      (segment, attention) pairs have the same loss, so each distinct one is kept
      once with its count. The exact population (``N = 2 C m``) shrinks to
      ``2 C`` instances under a fixed focus, since moving the foreground only
      reorders the segments.

    The dense route (``losses.grad_*`` on (A * N, m, C) logits) costs about 0.5 s
    per epoch at C = m = 20; this one about a millisecond.
    """

    def __init__(self, X, y, n_classes, init_scale=0.0, seed=0):
        self.X = np.asarray(X, dtype=float)                               # (N, m, d)
        self.y = np.asarray(y, dtype=np.int64)                            # (N,)
        self.n_classes = check_int_at_least("n_classes", n_classes, 2)
        self.init_scale, self.seed = init_scale, seed
        N, m, d = self.X.shape
        U, inv = np.unique(self.X.reshape(N * m, d), axis=0, return_inverse=True)
        self._U = U                                                       # (K, d) distinct segments
        self._inv = inv.reshape(N, m)                                     # (N, m) row of each in U
        self._cache = []                                # [(log_attention, compiled)], newest first
        self._memo = {}                                 # forwards of the current W

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
        r"""Per-alpha losses (A,) and dL/dW (A, C, d) under the fixed ``log_attention``.

        dL/dlogits is that of :func:`losses.grad_sa`, ``sigma(g(x~)) - e_y``, for
        SA, and per segment ``s_j (sigma(g(x_j)) - e_y)`` for HA and LV (Eqs. (9)-(12),
        :func:`losses.grad_ha` / :func:`losses.grad_lv`), with ``s_j`` the
        attention a_j (HA) or the posterior r_j (LV); weighted by the instance
        counts and chained into W as in :func:`fcam.loss_and_grad`.
        """
        paradigm = check_paradigm(paradigm, FF_PARADIGMS)
        W = state["W"]                                                    # (A, C, d)
        c = self._compile(log_attention)
        value, aux = self._forward(W, c, paradigm)
        if not grad:
            return value, None
        if paradigm == "sa":
            dlogits = np.exp(aux) * c["weight"][:, None] - c["onehot"]    # (A, N', C)
            return value, np.matmul(dlogits.transpose(0, 2, 1), c["x_tilde"])
        if paradigm == "ha":
            Q, logp = aux                       # Q: attention mass per (segment, label)
        else:
            joint, lse, logp = aux
            r = np.exp(joint - lse[..., None]) * c["weight"][:, None]     # (A, N', m)
            Q = self._per_segment(c, r)
        dG = Q.sum(axis=2, keepdims=True) * np.exp(logp) - Q              # (A, K, C)
        return value, np.matmul(dG.transpose(0, 2, 1), self._U)           # (A, C, d)

    def _per_segment(self, c, coef):
        """Sum ``coef`` (A, N', m) per (alpha, distinct segment, label): (A, K, C)."""
        A, K, C = coef.shape[0], self._U.shape[0], self.n_classes
        return np.bincount(c["bins"], coef.ravel(), minlength=A * K * C).reshape(A, K, C)

    def _forward(self, W, c, paradigm):
        """Losses (A,) and what the backward needs, memoised while W is the same.

        An epoch evaluates one W under alpha and alpha', then steps: the memo
        (valid while W is the same read-only array) saves the repeated work.
        """
        if self._memo.get("W") is not W or W.flags.writeable or not W.flags.owndata:
            self._memo = {"W": W}
        key = (paradigm, id(c))
        if key in self._memo and self._memo[key][0] is c:
            return self._memo[key][1]
        A = W.shape[0]
        if paradigm == "sa":
            logp = losses.log_softmax(np.matmul(c["x_tilde"], W.transpose(0, 2, 1)))
            value = -np.sum(logp * c["onehot"], axis=(1, 2))              # logp: (A, N', C)
            out = (value, logp)
        else:
            if "logp" not in self._memo:                                  # shared by alpha, alpha'
                self._memo["logp"] = losses.log_softmax(
                    np.matmul(self._U, W.transpose(0, 2, 1)))             # (A, K, C)
            logp = self._memo["logp"]
            if paradigm == "ha":   # linear in the log-probabilities: one (A, K, C) sum
                if "Q_ha" not in c:
                    c["Q_ha"] = self._per_segment(
                        c, np.exp(c["log_attention"]) * c["weight"][:, None])
                out = (-np.sum(c["Q_ha"] * logp, axis=(1, 2)), (c["Q_ha"], logp))
            else:
                lp = logp.reshape(A, -1)[:, c["flat"]]                    # (A, N', m) log sigma_y
                joint = c["log_attention"] + lp                           # log a_j sigma_y(g(x_j))
                lse = losses.logsumexp(joint, axis=2)                     # (A, N')
                out = (-lse @ c["weight"], (joint, lse, logp))
        self._memo[key] = (c, out)
        return out

    def _compile(self, log_attention):
        """Distinct instances under ``log_attention`` (cached: a run reuses two arrays)."""
        for ref, compiled in self._cache:                # the same read-only array: a hit
            if ref is log_attention:
                return compiled
        for ref, compiled in self._cache:                # a writable (or new) array: compare
            if ref.shape == np.shape(log_attention) and np.array_equal(ref, log_attention):
                return compiled
        la = np.asarray(log_attention, dtype=float)
        if la.flags.writeable or not la.flags.owndata:
            la = _frozen(la.copy())
        A, N, _ = la.shape
        # canonical instance: its (segment, attention) pairs sorted by segment, then attention
        keys = np.concatenate([self._inv[None].astype(float), la])       # (1 + A, N, m)
        order = np.lexsort(keys[::-1], axis=-1)                           # (N, m)
        canon = np.take_along_axis(keys, order[None], axis=2)             # (1 + A, N, m)
        rows = np.column_stack([self.y, canon.transpose(1, 0, 2).reshape(N, -1)])
        _, rep, count = np.unique(rows, axis=0, return_index=True, return_counts=True)
        weight = count / N                                                # (N',)
        y = self.y[rep]
        onehot = np.zeros((y.size, self.n_classes))
        onehot[np.arange(y.size), y] = weight                             # count-weighted e_y
        K, C = self._U.shape[0], self.n_classes
        compiled = {
            "weight": weight,
            "onehot": onehot,                                             # (N', C)
            "log_attention": la[:, rep],                                  # (A, N', m)
            "flat": self._inv[rep] * C + y[:, None],                      # (N', m) in (K * C)
            "x_tilde": np.einsum("anm,nmd->and", np.exp(la[:, rep]), self.X[rep]),  # (A, N', d)
        }
        # bin of each (alpha, instance, segment) in the flattened (A, K, C)
        compiled["bins"] = (compiled["flat"] + (np.arange(A) * K * C)[:, None, None]).ravel()
        self._cache = [(la, compiled)] + self._cache[:3]
        return compiled
