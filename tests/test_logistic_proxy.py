"""The logistic-regression proxy of Snell et al. (2021), Appendix A.10, Eqs. (55)-(56)."""

import numpy as np
import pytest
from scipy import special

from minimal_attn import logistic_proxy as lp
from minimal_attn.errors import InputError


def test_features_are_counts_over_length():
    X = lp.features([np.array([0, 2, 2]), np.array([1])], 3).toarray()
    assert np.allclose(X, [[1 / 3, 0, 2 / 3], [0, 1, 0]])
    with pytest.raises(InputError):
        lp.features([np.array([], dtype=int)], 3)


def test_gradient_equals_finite_differences():
    rng = np.random.default_rng(1)
    src = [rng.integers(0, 6, rng.integers(1, 5)) for _ in range(9)]
    y = rng.integers(0, 3, 9)
    X, B, V = lp.features(src, 6), rng.normal(size=(3, 6)), rng.normal(size=(3, 6))
    _, g = lp.loss_and_grad(B, X, y, 0.3)
    eps = 1e-6
    fd = (lp.loss_and_grad(B + eps * V, X, y, 0.3)[0]
          - lp.loss_and_grad(B - eps * V, X, y, 0.3)[0]) / (2 * eps)
    assert np.sum(g * V) == pytest.approx(fd, rel=1e-7)


def test_sweep_finds_the_keywords_and_the_probe_follows_eq56():
    """Word 1 means positive, word 2 negative, words 3-5 are noise: beta^log picks them out."""
    rng = np.random.default_rng(0)
    src, y = [], []
    for _ in range(200):
        label = int(rng.integers(0, 2))
        src.append(np.concatenate([[1 if label else 2], rng.integers(3, 6, 3)]))
        y.append(label)
    B, info = lp.fit_logistic_sweep(src[:150], y[:150], src[150:], y[150:], n_vocab=6)
    assert info["val_accuracy"] == 1.0 and info["lambda"] in lp.LAMBDAS
    beta = lp.beta_log(B, np.array([3, 1, 4]), np.array([1]))           # (T=1, L=3)
    assert beta.shape == (1, 3) and int(np.argmax(beta[0])) == 1
    z = B[:, [3, 1, 4]].T                                                # Eq. (56) columns
    assert np.allclose(beta[0], np.exp(z[:, 1]) / np.exp(z).sum(1))


@pytest.mark.parametrize("lam", [1e-7, 1e-5, 1e-3, 1.0])
def test_the_fit_reaches_the_minimiser_at_every_penalty(lam):
    """Separable data: the smaller lambda, the larger the weights and the flatter the
    loss; the fit stops only where no gradient component is over lambda / 100 (1e-5 at
    most), so the penalty has its say, and it agrees with a Newton solve."""
    rng = np.random.default_rng(3)
    src = [np.concatenate([[int(k % 2)], rng.integers(2, 7, 3)]) for k in range(60)]
    y = [int(k % 2) for k in range(60)]
    B = lp.fit_logistic(src, y, 7, 2, lam)
    X = lp.features(src, 7)
    _, g = lp.loss_and_grad(B, X, y, lam)
    assert np.abs(g).max() <= min(1e-5, lam / 100)
    # Newton's method from the fit: the Hessian of Eq. (55)'s mean NLL plus lambda I
    b = B.ravel().copy()
    for _ in range(30):
        _, g = lp.loss_and_grad(b.reshape(2, 7), X, y, lam)
        P = special.softmax(np.asarray(X @ b.reshape(2, 7).T), axis=-1)      # (N, 2)
        Xd = X.toarray()
        H = np.zeros((14, 14))
        for n in range(len(y)):
            W = np.diag(P[n]) - np.outer(P[n], P[n])                        # (2, 2)
            H += np.kron(W, np.outer(Xd[n], Xd[n])) / len(y)
        b -= np.linalg.solve(H + lam * np.eye(14), g.ravel())
    assert np.allclose(B.ravel(), b, rtol=1e-3, atol=1e-3 * np.abs(b).max())


def test_a_tie_in_the_sweep_goes_to_the_larger_penalty(monkeypatch):
    """Validation accuracies 0.5, 0.9, 0.9, 0.7 for lambdas 1e-3, 1e-1, 1e-2, 1: the tie
    at 0.9 goes to 1e-1 whatever the order of the sweep; a lone best wins outright."""
    scores = {1e-3: 0.5, 1e-2: 0.9, 1e-1: 0.9, 1.0: 0.7}
    monkeypatch.setattr(lp, "fit_logistic", lambda src, y, n_vocab, n_out, lam: lam)
    monkeypatch.setattr(lp, "accuracy", lambda B, src, y: scores[B])
    for order in ([1e-3, 1e-2, 1e-1, 1.0], [1.0, 1e-1, 1e-2, 1e-3], [1e-1, 1e-2, 1.0, 1e-3]):
        B, info = lp.fit_logistic_sweep([], [], [], [], 3, lambdas=order)
        assert (B, info["lambda"], info["val_accuracy"]) == (1e-1, 1e-1, 0.9)
        assert info["sweep"] == {float(k): scores[k] for k in order}
    scores[1e-3] = 0.95
    assert lp.fit_logistic_sweep([], [], [], [], 3, lambdas=list(scores))[1]["lambda"] == 1e-3


def test_a_saturated_label_keeps_its_loss_and_gradient():
    """One example, one word, B = [[40], [0]] for label 0: the loss is log(1 + e^-40) and
    dL/dB = [-s, s] with s = e^-40/(1 + e^-40), hand-computed (lambda 0)."""
    X = lp.features([np.array([0])], 1)
    loss, g = lp.loss_and_grad(np.array([[40.0], [0.0]]), X, np.array([0]), 0.0)
    s = np.exp(-40.0) / (1.0 + np.exp(-40.0))
    assert loss == pytest.approx(np.log1p(np.exp(-40.0)), rel=1e-12, abs=0)
    np.testing.assert_allclose(g.ravel(), [-s, s], rtol=1e-12)
