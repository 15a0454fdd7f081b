"""Focus gradients and losses at saturation against a 200-digit reference, V&R Eqs. (8), (10), (12).

At nearly one-hot attention the centred terms of V&R Eq. (8) (``x_j - x~``) and
Eq. (10) (``ell_j - L``) subtract almost equal numbers; written as sums of
pairwise differences (:func:`minimal_attn.losses.softmax_backward`) they keep
their digits. The reference evaluates the equations as printed, in mpmath at
200 significant digits, so cancellation cannot touch it (80 digits, the issue's
figure, are not enough once the classifier saturates too: ``w_y - sum_k sigma_k w_k``
with ``1 - sigma_y ~ 1e-80`` needs them all). LV (Eq. (12)) has its own two
cancellations: ``a_j - gamma_j`` at nearly one-hot attention and ``-log M`` at a
marginal likelihood M next to 1 (a true loss of 1e-66); both are written exactly
(:func:`minimal_attn.losses.lv_from_log_lik`).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from minimal_attn import fcam

mp = pytest.importorskip("mpmath")


def _reference_du(paradigm, W, u, X, y):
    """grad_u of the batch-mean loss from V&R Eq. (8) (SA) or Eq. (10) (HA), 200 digits."""
    with mp.workdps(200):
        N, m, d = X.shape
        C = W.shape[0]
        W = mp.matrix(W.tolist())
        u = mp.matrix(list(map(float, u)))
        total = mp.matrix(d, 1)
        for n in range(N):
            xs = [mp.matrix(list(map(float, X[n, j]))) for j in range(m)]
            f = [(u.T * x)[0] for x in xs]
            z = sum(mp.exp(fj) for fj in f)
            a = [mp.exp(fj) / z for fj in f]
            x_tilde = sum((a[j] * xs[j] for j in range(m)), mp.matrix(d, 1))
            if paradigm == "sa":   # V&R Eq. (8): -grad = sum_j a_j x_j (x_j - x~)^T (w_y - E w)
                logits = W * x_tilde
                zc = sum(mp.exp(v) for v in logits)
                sigma = [mp.exp(v) / zc for v in logits]
                w_y = W[int(y[n]), :].T
                w_bar = sum((sigma[k] * W[k, :].T for k in range(C)), mp.matrix(d, 1))
                g = sum((a[j] * xs[j] * ((xs[j] - x_tilde).T * (w_y - w_bar))[0]
                         for j in range(m)), mp.matrix(d, 1))
            else:                  # V&R Eq. (10): -grad = sum_j log sigma_y a_j (x_j - x~)
                g = mp.matrix(d, 1)
                for j in range(m):
                    logits = W * xs[j]
                    log_sigma_y = logits[int(y[n])] - mp.log(sum(mp.exp(v) for v in logits))
                    g += log_sigma_y * a[j] * (xs[j] - x_tilde)
            total -= g / N
        return np.array([float(v) for v in total])


def _reference_lv(W, u, X, y):
    """(loss, grad_u) of the batch-mean LV loss, V&R Eq. (12) as printed, 1,000 digits:
    -grad_u = sum_j (gamma_j - a_j) x_j with gamma_j = a_j p_j / sum_k a_k p_k.

    ``-log M`` needs as many digits as the loss has leading zeros (M = 1 - 1e-220
    is exactly 1 at 200 digits); below float64's smallest normal number the loss
    is 0 to every precision the comparison can use."""
    with mp.workdps(1000):
        N, m, d = X.shape
        W, u = mp.matrix(W.tolist()), mp.matrix(list(map(float, u)))
        loss, total = mp.mpf(0), mp.matrix(d, 1)
        for n in range(N):
            xs = [mp.matrix(list(map(float, X[n, j]))) for j in range(m)]
            f = [(u.T * x)[0] for x in xs]
            z = sum(mp.exp(fj) for fj in f)
            a = [mp.exp(fj) / z for fj in f]
            p = []
            for x in xs:
                logits = W * x
                p.append(mp.exp(logits[int(y[n])]) / sum(mp.exp(v) for v in logits))
            M = sum(a[j] * p[j] for j in range(m))
            loss -= mp.log(M) / N
            for j in range(m):
                total += (a[j] - a[j] * p[j] / M) * xs[j] / N
        return float(loss), np.array([float(v) for v in total])


def _check(paradigm, W, u, X, y, rtol=1e-9):
    _, grads = fcam.loss_and_grad({"W": W, "u": u}, X, y, paradigm)
    ref = _reference_du(paradigm, W, u, X, y)
    assert np.linalg.norm(grads["u"] - ref) <= rtol * np.linalg.norm(ref), (grads["u"], ref)


@pytest.mark.parametrize("paradigm", ["sa", "ha"])
def test_issue_example_keeps_its_digits(paradigm):
    # a1 ~ 1, a2 = e^-40: the naive centred form returns -3.26e-13 for HA; the truth is
    # a1 a2 (l1 - l2)(x1 - x2) = +1.359e-14
    X, y = np.array([[[1000.0], [960.0]]]), np.array([1])
    W, u = np.array([[1.0], [-1.0]]), np.array([1.0])
    _check(paradigm, W, u, X, y)
    if paradigm == "ha":
        _, grads = fcam.loss_and_grad({"W": W, "u": u}, X, y, "ha")
        assert grads["u"][0] == pytest.approx(1.359e-14, rel=1e-3)


def nearly_one_hot_case(seed, m, gap, scale):
    """(W, u, X, y): N = 2 mosaics of m segments in d = 3, C = 3 classes; segment j
    scores about gap * (m - j) (plus noise), so the top segment takes nearly all the
    attention; ``scale`` sets the classifier's weights (large: it saturates too)."""
    rng = np.random.default_rng(seed)
    N, d, C = 2, 3, 3
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = 300.0 * rng.standard_normal((N, m, d))
    X += ((gap * np.arange(m, 0, -1))[None, :, None] - (X @ u)[..., None]) * u
    X += rng.standard_normal((N, m, d))
    W = scale * rng.standard_normal((C, d))
    return W, u, X, rng.integers(C, size=N)


@settings(max_examples=examples(10))
@given(seed=st.integers(0, 2**31 - 1), paradigm=st.sampled_from(["sa", "ha"]),
       m=st.integers(2, 4), gap=st.floats(30.0, 45.0))
def test_random_nearly_one_hot_cases(seed, paradigm, m, gap):
    W, u, X, y = nearly_one_hot_case(seed, m, gap, 0.1)
    # rtol 1e-6: the rounding of the inputs alone (logits W x_j in float64) can cost
    # digits when two segments' losses are close; the naive centred form misses it
    _check(paradigm, W, u, X, y, rtol=1e-6)


@settings(max_examples=examples(20))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(2, 4), gap=st.floats(20.0, 45.0),
       scale=st.floats(0.5, 3.0))
def test_lv_loss_and_focus_gradient_keep_their_digits(seed, m, gap, scale):
    """Nearly one-hot attention and a saturated classifier: the LV loss is tiny (down to
    1e-60 and below) and a_j - gamma_j cancels in the printed form."""
    W, u, X, y = nearly_one_hot_case(seed, m, gap, scale)
    value, grads = fcam.loss_and_grad({"W": W, "u": u}, X, y, "lv")
    ref_loss, ref_du = _reference_lv(W, u, X, y)
    # absolute tolerance: float64's smallest normal number (below it there are no digits)
    assert value == pytest.approx(ref_loss, rel=1e-9, abs=np.finfo(float).tiny)
    # rtol 1e-6 as above: the inputs' own rounding (logits W x_j) can cost digits
    assert np.linalg.norm(grads["u"] - ref_du) <= 1e-6 * np.linalg.norm(ref_du), (
        grads["u"], ref_du)


def test_lv_tiny_loss_is_not_rounded_to_zero():
    """One segment carries all the attention and the classifier is sure of the label:
    the loss is about 1e-66, not 0 (the printed -log sum_j a_j p_j rounds it away)."""
    X, y = np.array([[[150.0], [100.0]]]), np.array([0])
    W, u = np.array([[1.0], [0.0]]), np.array([1.0])
    value, grads = fcam.loss_and_grad({"W": W, "u": u}, X, y, "lv")
    ref_loss, ref_du = _reference_lv(W, u, X, y)
    assert 1e-70 < ref_loss < 1e-60
    assert value == pytest.approx(ref_loss, rel=1e-12, abs=0.0)
    assert grads["u"][0] == pytest.approx(ref_du[0], rel=1e-9, abs=0.0)


def _reference_lv_focus(scores, log_lik):
    """a_j - gamma_j of V&R Eq. (12) from the scores and label log-likelihoods, 200 digits."""
    with mp.workdps(200):
        out = []
        for f_row, ll_row in zip(scores.tolist(), log_lik.tolist()):
            z = sum(mp.exp(mp.mpf(v)) for v in f_row)
            a = [mp.exp(mp.mpf(v)) / z for v in f_row]
            joint = [a_j * mp.exp(mp.mpf(ll)) for a_j, ll in zip(a, ll_row)]
            M = sum(joint)
            out.append([float(a_j - g / M) for a_j, g in zip(a, joint)])
        return np.array(out)


@settings(max_examples=examples(30))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(2, 6), size=st.floats(1e2, 1e4),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_lv_focus_gradient_keeps_its_digits_at_log_likelihoods_of_1e4(seed, m, size, dtype):
    """Every segment's label log-likelihood near -size (a classifier sure of another class),
    a few units apart: the posterior is a ratio of numbers like e^-9000, and the focus
    gradient must not inherit the rounding of the logs' magnitude (before the shift by the
    largest one, float32 lost 3 digits here, float64 4)."""
    from minimal_attn import losses

    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((3, m)).astype(dtype)
    log_lik = (-size + 3.0 * rng.standard_normal((3, m))).astype(dtype)
    _, dscores, _ = losses.lv_from_log_lik(scores, log_lik)           # the batch mean
    ref = _reference_lv_focus(scores, log_lik) / 3             # of the inputs as rounded
    tol = 2e-6 if dtype == np.float32 else 1e-13
    assert np.abs(dscores - ref).max() <= tol * np.abs(ref).max(), (dscores, ref)


def test_softmax_of_an_all_minus_inf_row_is_nan_and_leaves_the_others():
    """The documented edge of :func:`minimal_attn._numerics.log_softmax`: a row with no
    finite score has no softmax (NaN, as scipy gives), and the rows beside it keep theirs."""
    from scipy.special import log_softmax as scipy_log_softmax

    from minimal_attn import losses

    z = np.array([[-np.inf, -np.inf, -np.inf], [1e4, -np.inf, 0.0], [0.0, 1.0, 2.0]])
    with np.errstate(divide="ignore", invalid="ignore"):
        ours, want = losses.log_softmax(z), scipy_log_softmax(z, axis=-1)
        probs = losses.softmax(z)
    assert np.isnan(ours[0]).all() and np.isnan(probs[0]).all()
    np.testing.assert_allclose(ours[1:], want[1:], rtol=1e-15)
    np.testing.assert_allclose(probs[1:].sum(axis=-1), 1.0, rtol=1e-15)
