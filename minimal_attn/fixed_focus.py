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

:class:`ReferenceFixedFocusModel` (Section 3.1 written out, one alpha at a
time), its exact fast twin :class:`LinearFixedFocusModel` (from the private
``_fixed_focus_fast``) and ``minimal_attn.backends.vr.fixed_focus.CNNFixedFocusModel``
(CIFAR) implement it.
In the linear orthogonal setting Theorem 1 gives :math:`\mu(t)` in closed form
and :func:`closed_form_curves` turns it into exact loss and incentive curves.
"""

import numpy as np

from minimal_attn import errors, fcam, losses, ode
from minimal_attn._fixed_focus_fast import LinearFixedFocusModel  # noqa: F401 (public, fast twin)
from minimal_attn._xp import get_xp, like, to_numpy
from minimal_attn.data import check_log_attention, check_mosaics, fixed_log_attention
from minimal_attn.errors import (
    InputError,
    as_list,
    check_alpha,
    check_int_at_least,
    check_paradigm,
    check_positive,
)
from minimal_attn.losses import LOSS_PARADIGMS


# ------------------------------------------------------------ lists of alphas and paradigms
def check_alphas(alphas, param=None):
    """Foreground scores as floats in [0, 1], each once (a curve is keyed by its alpha):
    a sequence of numbers or numeric strings, a comma list or one number."""
    out = []
    for a in as_list(alphas):
        try:
            value = float(a) if isinstance(a, str) else a
        except ValueError:
            raise InputError(f"alphas must be numbers in [0, 1] (comma-separated), got {a!r}",
                             param=param) from None
        value = check_alpha(value, "each of alphas", param=param)
        if value in out:
            raise InputError(f"alphas has a repeated value {value!r}: give each alpha once",
                             param=param)
        out.append(value)
    if not out:
        raise InputError("alphas is empty: give at least one alpha in [0, 1]", param=param)
    return out


def check_paradigms(paradigms, param=None):
    """The loss paradigms ``sa``, ``ha``, ``lv`` of ``paradigms``, canonical and once each
    (:func:`minimal_attn.errors.check_paradigms`)."""
    return errors.check_paradigms(paradigms, LOSS_PARADIGMS, param=param)


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
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
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


def fixed_focus_curves(model, z, m, alphas, paradigms=LOSS_PARADIGMS, epochs=1000, lr=5.0,
                       delta=0.01, callback=None):
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
    alphas : foreground scores in [0, 1] (:func:`check_alphas`)
    paradigms : any of ``sa``, ``ha``, ``lv`` (:func:`check_paradigms`)
    callback : optional ``callback(paradigm, k)`` after recording epoch ``k``

    Returns
    -------
    dict ``{paradigm: {alpha: {"epoch", "loss", "incentive"}}}`` of arrays (epochs + 1,).
    """
    alphas = check_alphas(alphas)
    paradigms = check_paradigms(paradigms)
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
            loss[k] = to_numpy(model.losses(state, la, p))
            incentive[k] = loss[k] - to_numpy(model.losses(state, la_up, p))
            if k < epochs:
                state = model.step(state, la, p, lr)
            if callback is not None:
                callback(p, k)
        epoch = np.arange(epochs + 1)
        result[p] = {a: {"epoch": epoch, "loss": loss[:, i], "incentive": incentive[:, i]}
                     for i, a in enumerate(alphas)}
    return result


# ------------------------------------------------------------ closed forms (Theorem 1)
def closed_form_curves(paradigm, alphas, epochs, lr, n_classes, delta=0.01):
    r"""Exact fixed-focus loss and incentive curves in the linear orthogonal setting.

    Epoch ``k`` is time :math:`t = k\,\mathrm{lr}` of Theorem 1; with
    :math:`\mu = \mu_\alpha(t)` the population losses (:func:`ode.population_loss`) are
    :math:`L^{SA} = \log(1 + (C-1)e^{-\alpha\mu})`,
    :math:`L^{HA} = -\alpha\log\beta(\mu) + (1-\alpha)\log C`,
    :math:`L^{LV} = -\log(\alpha\beta(\mu) + (1-\alpha)/C)`, and the incentive
    is :math:`L(\mu, \alpha) - L(\mu, \min(\alpha + \text{delta}, 1))` at the same mu.

    Returns ``{alpha: {"loss_closed_form", "incentive_closed_form"}}`` of arrays (epochs + 1,),
    keyed by the alphas as floats (:func:`check_alphas`).
    """
    paradigm = check_paradigm(paradigm, LOSS_PARADIGMS)
    alphas = check_alphas(alphas)
    epochs = check_int_at_least("epochs", epochs, 0)
    n_classes = check_int_at_least("C (classes)", n_classes, 2)
    check_positive("delta", delta)
    t = np.arange(epochs + 1) * float(check_positive("lr", lr))
    out = {}
    for alpha in alphas:
        mu = ode.theorem1_mu(paradigm, t, alpha, n_classes)
        loss = ode.population_loss(paradigm, mu, alpha, n_classes)
        up = ode.population_loss(paradigm, mu, min(alpha + delta, 1.0), n_classes)
        out[alpha] = {"loss_closed_form": loss, "incentive_closed_form": loss - up}
    return out


# ------------------------------------------------------------ the linear model, plainly
class ReferenceFixedFocusModel:
    r"""Section 3.1 as written: one linear classifier :math:`g(x) = Wx` per alpha, focus frozen.

    State ``{"W": (A, C, d)}``. For each alpha, the loss is the FCAM loss with
    the attention fixed to that alpha (:func:`minimal_attn.fcam.loss`), and an
    epoch is one full-batch gradient step on W alone
    (:func:`minimal_attn.fcam.loss_and_grad`), so epoch ``k`` of the exact
    population approximates time ``k * lr`` of Theorem 1 (an explicit Euler step).
    :class:`LinearFixedFocusModel` computes the same numbers much faster. ``X`` and
    ``y`` may live in any array namespace; the state and the gradients follow them.
    """

    def __init__(self, X, y, n_classes, init_scale=0.0, seed=0):
        self.n_classes = check_int_at_least("n_classes", n_classes, 2)
        check_mosaics(X, y, self.n_classes)
        self.X, self.y = X, y                                             # (N, m, d), (N,)
        self.xp = get_xp(X, y)
        self.init_scale, self.seed = init_scale, seed

    def init(self, alphas):
        """The same initial W for every alpha (zero by default, as in Theorem 1)."""
        W = fcam.init_params(self.X.shape[2], self.n_classes, self.init_scale, self.seed)["W"]
        return {"W": like(self.xp, np.repeat(W[None], len(alphas), axis=0), self.X)}  # (A, C, d)

    def _per_alpha(self, state, log_attention):
        """(params, log attention) of each alpha; u is unused (the focus is frozen)."""
        check_log_attention(log_attention, *self.X.shape[:2])
        u = self.xp.zeros_like(self.X[0, 0, ...])                         # (d,)
        la = like(self.xp, log_attention, self.X)                         # (A, N, m)
        return [({"W": state["W"][i, ...], "u": u}, la[i, ...]) for i in range(la.shape[0])]

    def losses(self, state, log_attention, paradigm):
        return np.array([fcam.loss(params, self.X, self.y, paradigm, la)
                         for params, la in self._per_alpha(state, log_attention)])

    def loss_and_grad(self, state, log_attention, paradigm):
        """Per-alpha losses (A,) and dL/dW (A, C, d)."""
        out = [fcam.loss_and_grad(params, self.X, self.y, paradigm, la)
               for params, la in self._per_alpha(state, log_attention)]
        return np.array([v for v, _ in out]), self.xp.stack([g["W"] for _, g in out])

    def step(self, state, log_attention, paradigm, lr):
        _, dW = self.loss_and_grad(state, log_attention, paradigm)
        return {"W": state["W"] - lr * dW}
