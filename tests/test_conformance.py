"""The core is namespace-generic: the same functions on every array library (issue 14).

Each test runs once per namespace (test ids ``numpy``, ``array_api_strict``,
``torch_cpu``, ``cupy``, ``torch_cuda``; absent ones skip with the reason) and
checks the result against a reference computed independently in NumPy: the
papers' formulas written plainly, central finite differences, the literal
dense IBM-1 EM, the compressed fixed-focus model, the ODE solution, hand-made
agreement cases. ``python -m pytest -q -k array_api_strict`` proves on any CPU
that the core uses nothing outside the array API standard (or its helper).
"""

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from minimal_attn import agreement, data, dynamics, fcam, ibm1, losses, ode, proxy
from minimal_attn import fixed_focus as ff


def _problem(seed=0, n=3, m=3, c=3, d=4):
    rng = np.random.default_rng(seed)
    return (2 * rng.standard_normal((n, m)), 2 * rng.standard_normal((n, m, c)),
            2 * rng.standard_normal((n, c)), rng.integers(c, size=n),
            rng.standard_normal((n, m, d)))


def _ref_loss(paradigm, scores, logits, y):
    """Batch-mean SA/HA/LV losses of V&R Sec. 2.3 written plainly (SA: logits (N, C))."""
    n = len(y)
    if paradigm == "sa":
        return -np.mean(logits[np.arange(n), y] - logsumexp(logits, axis=1))
    log_a = scores - logsumexp(scores, axis=1, keepdims=True)
    ll = logits[np.arange(n), :, y] - logsumexp(logits, axis=2)              # (N, m)
    if paradigm == "ha":
        return -np.mean(np.sum(np.exp(log_a) * ll, axis=1))
    return -np.mean(logsumexp(log_a + ll, axis=1))


def _fd(f, x, eps=1e-6):
    """Central differences of f at every entry of x."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("paradigm", losses.LOSS_PARADIGMS)
def test_losses_and_gradients(ns, paradigm):
    scores, logits, logits_sa, y, _ = _problem()
    if paradigm == "sa":
        value, dlogits = losses.value_and_grad_sa(ns.asarray(logits_sa), ns.asarray(y))
        assert float(value) == pytest.approx(_ref_loss("sa", None, logits_sa, y), rel=1e-12)
        np.testing.assert_allclose(ns.to_numpy(dlogits),
                                   _fd(lambda z: _ref_loss("sa", None, z, y), logits_sa),
                                   atol=1e-8)
        np.testing.assert_allclose(ns.to_numpy(losses.infer("sa", None, ns.asarray(logits_sa))),
                                   softmax(logits_sa, axis=1), rtol=1e-12)
        return
    value, dscores, dlogits = losses.value_and_grad(paradigm, ns.asarray(scores),
                                                    ns.asarray(logits), ns.asarray(y))
    assert float(value) == pytest.approx(_ref_loss(paradigm, scores, logits, y), rel=1e-12)
    np.testing.assert_allclose(ns.to_numpy(dscores),
                               _fd(lambda s: _ref_loss(paradigm, s, logits, y), scores), atol=1e-8)
    np.testing.assert_allclose(ns.to_numpy(dlogits),
                               _fd(lambda g: _ref_loss(paradigm, scores, g, y), logits), atol=1e-8)
    a = softmax(scores, axis=1)
    expected = (np.einsum("nm,nmc->nc", a, softmax(logits, axis=2)) if paradigm == "lv"
                else softmax(logits[np.arange(len(y)), scores.argmax(axis=1)], axis=1))
    got = losses.infer(paradigm, ns.asarray(scores), ns.asarray(logits))
    np.testing.assert_allclose(ns.to_numpy(got), expected, rtol=1e-12)


def _ref_fcam_loss(paradigm, W, u, X, y):
    a = softmax(X @ u, axis=1)                                               # (N, m)
    if paradigm == "sa":
        return _ref_loss("sa", None, np.einsum("nm,nmd->nd", a, X) @ W.T, y)
    return _ref_loss(paradigm, X @ u, X @ W.T, y)


@pytest.mark.parametrize("paradigm", losses.LOSS_PARADIGMS)
def test_linear_fcam(ns, paradigm):
    """fcam.loss_and_grad (V&R Eqs. (7)-(12)) against finite differences of the plain loss."""
    _, _, _, y, X = _problem(1)
    rng = np.random.default_rng(2)
    W, u = rng.standard_normal((3, 4)), rng.standard_normal(4)
    value, grads = fcam.loss_and_grad({"W": ns.asarray(W), "u": ns.asarray(u)},
                                      ns.asarray(X), ns.asarray(y), paradigm)
    assert value == pytest.approx(_ref_fcam_loss(paradigm, W, u, X, y), rel=1e-12)
    np.testing.assert_allclose(ns.to_numpy(grads["W"]),
                               _fd(lambda w: _ref_fcam_loss(paradigm, w, u, X, y), W), atol=1e-8)
    np.testing.assert_allclose(ns.to_numpy(grads["u"]),
                               _fd(lambda v: _ref_fcam_loss(paradigm, W, v, X, y), u), atol=1e-8)


@pytest.mark.parametrize("paradigm", losses.LOSS_PARADIGMS)
def test_exact_population_simulation(ns, paradigm):
    """Gradient descent on the exact population follows the flow of Theorem 2 (Euler, small lr)."""
    with ns.device_context():
        sim = dynamics.simulate(paradigm, 3, 2, 1.0, lr=0.005, t_eval=[1.0], xp=ns.module)
    flow = ode.solve(paradigm, 3, 2, 1.0, t_eval=[1.0])
    np.testing.assert_allclose([sim["mu"][-1], sim["nu"][-1]], [flow["mu"][-1], flow["nu"][-1]],
                               rtol=5e-3)
    assert sim["mu"][-1] > 0.05


def test_fixed_focus_curves(ns):
    """The plain per-alpha model in any namespace equals the compressed NumPy model."""
    pop = data.exact_population(3, 2, n_base=2, seed=4)
    alphas = [0.2, 0.7, 1.0]
    plain = ff.ReferenceFixedFocusModel(ns.asarray(pop.X), ns.asarray(pop.y), 2)
    fast = ff.LinearFixedFocusModel(pop.X, pop.y, 2)
    got = ff.fixed_focus_curves(plain, pop.z, 3, alphas, epochs=4, lr=2.0)
    want = ff.fixed_focus_curves(fast, pop.z, 3, alphas, epochs=4, lr=2.0)
    for p in losses.LOSS_PARADIGMS:
        for a in alphas:
            for key in ("loss", "incentive"):
                np.testing.assert_allclose(got[p][a][key], want[p][a][key], rtol=1e-10,
                                           atol=1e-14)


def _ref_proxy_loss(W, e, src, tgt):
    """Snell Eq. (14) word by word."""
    total = 0.0
    for x, y in zip(src, tgt):
        logits = np.mean(e[x], axis=0) @ W.T                                 # Snell Eq. (5)
        total -= np.sum(logits[y] - logsumexp(logits))
    return total


def test_proxy_model(ns):
    rng = np.random.default_rng(3)
    src = [rng.integers(0, 5, size=k) for k in (3, 1, 4)]
    tgt = [rng.integers(0, 4, size=k) for k in (2, 3, 1)]
    W, e = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    loss, grads = proxy.loss_and_grads({"W": ns.asarray(W), "e": ns.asarray(e)},
                                       proxy.make_batch(src, tgt))
    assert loss == pytest.approx(_ref_proxy_loss(W, e, src, tgt), rel=1e-12)
    np.testing.assert_allclose(ns.to_numpy(grads["W"]),
                               _fd(lambda w: _ref_proxy_loss(w, e, src, tgt), W), atol=1e-7)
    np.testing.assert_allclose(ns.to_numpy(grads["e"]),
                               _fd(lambda v: _ref_proxy_loss(W, v, src, tgt), e), atol=1e-7)
    beta = proxy.beta_px({"W": ns.asarray(W), "e": ns.asarray(e)}, src[0], tgt[0])
    np.testing.assert_allclose(ns.to_numpy(beta), softmax(e[src[0]] @ W.T, axis=1)[:, tgt[0]].T,
                               rtol=1e-12)                                   # Snell Eq. (6)


def test_ibm1_em(ns):
    rng = np.random.default_rng(5)
    src = [rng.integers(0, 6, rng.integers(1, 6)) for _ in range(12)]
    tgt = [rng.integers(0, 4, rng.integers(1, 6)) for _ in range(12)]
    with ns.device_context():
        model = ibm1.train_ibm1(src, tgt, 6, 4, iterations=3, xp=ns.module)
    table, history = ibm1.train_ibm1_dense(src, tgt, 6, 4, iterations=3)
    s, o, p = model.entries()
    np.testing.assert_allclose(p, table[s, o], rtol=1e-12)
    np.testing.assert_allclose(model.log_likelihood, history, rtol=1e-12)
    beta = ibm1.beta_ibm(model, ns.asarray(src[0]), ns.asarray(tgt[0]))       # Snell Eq. (18)
    dense = ns.to_numpy(model.to_dense())
    np.testing.assert_allclose(ns.to_numpy(beta), dense[src[0]][:, tgt[0]].T, rtol=1e-12)
    alpha = ns.to_numpy(ibm1.alpha_ibm(beta))                                 # Snell Eq. (19)
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, rtol=1e-12)
    C = ibm1.count_table(src, tgt, 6, 4, xp=ns.module)                        # Snell Eq. (16)
    trans = ns.to_numpy(ibm1.trans_from_counts(C))                            # Snell Eq. (17)
    one_step, _ = ibm1.train_ibm1_dense(src, tgt, 6, 4, iterations=1, null=False)
    seen = ns.to_numpy(C).sum(axis=1) > 0
    np.testing.assert_allclose(trans[seen], one_step[seen], rtol=1e-12)


def test_agreement_metrics(ns):
    # rows: same top (1); u's top second in v with k = 1 (0); ties in v count in favour (1)
    u = ns.asarray([[0.1, 0.7, 0.2], [0.1, 0.7, 0.2], [0.0, 1.0, 0.0]])
    v = ns.asarray([[0.3, 0.5, 0.2], [0.5, 0.3, 0.2], [0.4, 0.4, 0.2]])
    assert ns.to_numpy(agreement.agreement_rows(u, v)).tolist() == [1, 0, 1]
    np.testing.assert_allclose(ns.to_numpy(agreement.baseline_rows(v)), [1 / 3, 1 / 3, 2 / 3])
    out = agreement.average_agreement([u], [v], kendall=False)
    assert out["agreement"] == pytest.approx(2 / 3) and out["n_words"] == 3
