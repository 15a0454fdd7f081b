r"""Bag-of-words logistic regression proxy, Snell et al. (2021) Appendix A.10, Eqs. (55)-(56).

.. math:: p_t = \sigma(\beta^{log} x), \qquad x_i = n_i(x) / L \quad (55)

with :math:`\beta^{log} \in R^{|O| \times |I|}` (no bias, as in Snell Eq. (55)) and
:math:`\sigma` the softmax. Equivalently (Snell Eq. (56)) the logits are the mean of
the columns :math:`\beta^{log}_{x_l}`, so the proxy of Snell Eq. (5) with
:math:`W e_i` replaced by a free column. The paper fits it with an
:math:`\ell_2` penalty chosen by a sweep over ten orders of magnitude (best
validation accuracy); :func:`fit_logistic_sweep` does the same. Its probe,
by analogy with Snell Eq. (6), is

.. math:: \beta^{log}_{t,l} = \sigma(\beta^{log}_{x_l})_{y_t}.

Objective (mean over examples): :math:`\frac1N \sum_n -\log p_n[y_n] +
\frac{\lambda}{2}\|\beta^{log}\|^2`; gradient
:math:`\frac1N (P - Y)^T X + \lambda \beta^{log}`, written beside the loss.
"""

import numpy as np
from scipy import optimize, sparse

from minimal_attn._numerics import log_softmax
from minimal_attn.errors import InputError, check_ids, check_labels
from minimal_attn.losses import _minus_onehot

LAMBDAS = tuple(10.0 ** k for k in range(-7, 3))   # ten orders of magnitude


def _ids(ids, n_vocab, side):
    """Integer word ids in [0, n_vocab): a float id would be truncated, a negative one wrap
    around to the last word, silently."""
    ids = np.asarray(ids)
    if ids.size and ids.dtype.kind not in "iu":
        raise InputError(f"{side} ids must be integers, got dtype {ids.dtype}")
    return check_ids(ids, n_vocab, side).astype(np.int64)


def features(src, n_vocab):
    """X of Snell Eq. (55): (N, |I|) sparse, row n the word counts of example n divided by L_n."""
    lengths = np.array([len(s) for s in src])
    if len(src) == 0:
        raise InputError("no examples: pass at least one input sentence")
    if np.any(lengths == 0):
        raise InputError("every example needs at least one input word")
    rows = np.repeat(np.arange(len(src)), lengths)
    cols = _ids(np.concatenate([np.asarray(s) for s in src]), n_vocab, "input")
    X = sparse.csr_matrix((1.0 / lengths[rows], (rows, cols)), shape=(len(src), n_vocab))
    X.sum_duplicates()
    return X


def loss_and_grad(B, X, y, lam):
    """Penalised mean NLL of Snell Eq. (55) and its gradient, B (|O|, |I|), y (N,) class ids."""
    logp = log_softmax(np.asarray(X @ B.T))                         # (N, |O|)
    N, y = X.shape[0], np.asarray(y)
    loss = -logp[np.arange(N), y].mean() + 0.5 * lam * np.sum(B * B)
    dz = _minus_onehot(np.exp(logp), y, per_segment=False)          # P - Y, exact at P_y ~ 1
    return loss, np.asarray((X.T @ dz).T) / N + lam * B             # (|O|, |I|)


#: The fit stops once no gradient component exceeds this fraction of lambda (nor 1e-5).
GTOL_PER_LAMBDA = 1e-2


def fit_logistic(src, y, n_vocab, n_out, lam, max_iter=5000):
    """Minimise the penalised loss with L-BFGS from zero; returns B (|O|, |I|).

    The stopping rule scales with the penalty. At the minimiser the data's gradient
    equals -lambda B, so a fixed tolerance above lambda |B| (L-BFGS's default 1e-5;
    at lambda = 1e-7 on SST-2, |B| reaches 27, so lambda |B| = 3e-6) stops before the
    penalty has any say, at a point float rounding chooses: one and two BLAS threads
    gave validation accuracies of 81.5% and 81.2% there. Stopping at a gradient of
    ``min(1e-5, lambda / 100)`` per component reaches the minimiser itself (81.7% at
    both thread counts), at about four times the iterations for the smallest lambda.
    """
    X = features(src, n_vocab)
    # a y shorter than src would broadcast, a negative label wrap around: both fit silently
    y = np.asarray(check_labels(y, n_out, n=len(src)), dtype=np.int64)

    def f(b):
        loss, g = loss_and_grad(b.reshape(n_out, n_vocab), X, y, lam)
        return loss, g.ravel()
    res = optimize.minimize(f, np.zeros(n_out * n_vocab), jac=True, method="L-BFGS-B",
                            options={"maxiter": max_iter, "maxfun": 2 * max_iter,
                                     "gtol": min(1e-5, GTOL_PER_LAMBDA * lam),
                                     "ftol": 1e-15})   # the gradient decides, not f
    return res.x.reshape(n_out, n_vocab)


def accuracy(B, src, y):
    """Fraction of examples whose most probable class is their label y (N,)."""
    X = features(src, B.shape[1])
    check_labels(y, B.shape[0], n=len(src))
    return float(np.mean(np.asarray(X @ B.T).argmax(1) == np.asarray(y)))


def fit_logistic_sweep(train_src, train_y, val_src, val_y, n_vocab, n_out=2, lambdas=LAMBDAS):
    """Fit for every penalty in ``lambdas`` and keep the best validation accuracy (A.10).

    A tie goes to the larger penalty (the paper names no rule for ties): a penalty the
    validation set cannot tell apart from a larger one buys nothing for its larger
    weights. (Before :func:`fit_logistic` stopped by lambda's own scale, the fits at
    1e-7 and 1e-6 tied at 81.5% on SST-2 with one BLAS thread and not with two, and a
    first-best rule chose by thread count.)

    Returns
    -------
    B : array (|O|, |I|); info : dict with the chosen ``lambda`` and its
    ``val_accuracy``, and ``sweep``: the validation accuracy of every lambda
    """
    best, scores = None, []
    for lam in lambdas:
        B = fit_logistic(train_src, train_y, n_vocab, n_out, lam)
        acc = accuracy(B, val_src, val_y)
        scores.append(acc)
        if best is None or (acc, lam) > best[:2]:
            best = (acc, lam, B)
    return best[2], {"lambda": best[1], "val_accuracy": best[0],
                     "sweep": dict(zip(map(float, lambdas), scores))}


def beta_log(B, x, y):
    r"""Probe :math:`\beta^{log}_{t,l} = \sigma(\beta^{log}_{x_l})_{y_t}`, shape (T, L).

    x : int array (L,) input ids; y : int array (T,) output ids.
    """
    x, y = _ids(x, B.shape[1], "input"), _ids(y, B.shape[0], "output")
    logp = log_softmax(B[:, x].T)                                    # (L, |O|)
    return np.exp(logp[:, y]).T                                      # (T, L)
