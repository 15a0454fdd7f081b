"""Hand-written linear-FCAM gradients, Eqs. (7)-(12): finite differences and torch autograd."""

import numpy as np
import pytest
from hypothesis import given
from strategies import fcam_problem

from minimal_attn import data, fcam, gradcheck

PARADIGMS = ("sa", "ha", "lv")


@pytest.mark.parametrize("paradigm", PARADIGMS)
@given(problem=fcam_problem())
def test_grads_eqs_7_to_12_directional_finite_difference(paradigm, problem):
    params, X, y = problem
    _, grads = fcam.loss_and_grad(params, X, y, paradigm)
    analytic, numeric = gradcheck.directional_check(
        lambda p: fcam.loss(p, X, y, paradigm), grads, params)
    assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_grads_eqs_7_to_12_every_entry_finite_difference(paradigm):
    rng = np.random.default_rng(1)
    params = {"W": rng.standard_normal((3, 4)), "u": rng.standard_normal(4)}
    X, y = rng.standard_normal((5, 3, 4)), rng.integers(3, size=5)
    _, grads = fcam.loss_and_grad(params, X, y, paradigm)
    numeric = gradcheck.full_check(lambda p: fcam.loss(p, X, y, paradigm), params)
    for k in params:
        np.testing.assert_allclose(grads[k], numeric[k], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("paradigm", PARADIGMS)
@given(problem=fcam_problem())
def test_grads_eqs_7_to_12_against_torch_autograd(paradigm, problem):
    torch = pytest.importorskip("torch")
    params, X, y = problem
    value, grads = fcam.loss_and_grad(params, X, y, paradigm)
    W = torch.tensor(params["W"], requires_grad=True)
    u = torch.tensor(params["u"], requires_grad=True)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    scores = Xt @ u                                                   # (N, m)
    log_a = torch.log_softmax(scores, dim=1)
    if paradigm == "sa":
        logits = torch.einsum("nm,nmd->nd", log_a.exp(), Xt) @ W.T    # (N, C)
        loss = torch.nn.functional.cross_entropy(logits, yt)
    else:
        logp_y = torch.log_softmax(Xt @ W.T, dim=2).gather(
            2, yt[:, None, None].expand(-1, X.shape[1], 1))[..., 0]   # (N, m)
        if paradigm == "ha":
            loss = -(log_a.exp() * logp_y).sum(1).mean()
        else:
            loss = -torch.logsumexp(log_a + logp_y, dim=1).mean()
    loss.backward()
    assert value == pytest.approx(loss.item(), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grads["W"], W.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads["u"], u.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_finite_at_huge_parameters(paradigm):
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((4, 3, 2)), rng.integers(2, size=4)
    params = {"W": 1e4 * rng.standard_normal((2, 2)), "u": 1e4 * rng.standard_normal(2)}
    value, grads = fcam.loss_and_grad(params, X, y, paradigm)
    assert np.isfinite(value) and all(np.all(np.isfinite(g)) for g in grads.values())


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_fixed_focus_freezes_u(paradigm):
    rng = np.random.default_rng(3)
    D = data.linear_orthogonal(20, 4, 3, seed=0)
    params = {"W": rng.standard_normal((3, 5)), "u": rng.standard_normal(5)}
    log_att = data.fixed_log_attention(D.z, 4, 0.6)
    _, grads = fcam.loss_and_grad(params, D.X, D.y, paradigm, log_attention=log_att)
    assert np.all(grads["u"] == 0)
    analytic, numeric = gradcheck.directional_check(
        lambda p: fcam.loss(p, D.X, D.y, paradigm, log_attention=log_att), grads, params)
    assert analytic == pytest.approx(numeric, rel=1e-6)


@pytest.mark.parametrize("paradigm", ("sa", "ha", "lv", "hybrid"))
def test_training_learns_the_sdc_task(paradigm):
    D = data.linear_orthogonal(300, 4, 3, seed=1)
    params0 = fcam.init_params(D.X.shape[2], 3)
    params, history = fcam.train(params0, D.X, D.y, paradigm, lr=0.5, steps=300)
    assert history[-1] < 0.5 * history[0]
    s = fcam.predict(params, D.X, paradigm)
    assert np.mean(s.argmax(1) == D.y) > 0.95
    a = fcam.forward(params, D.X, "ha")["a"]
    assert np.mean(a[np.arange(len(D.z)), D.z]) > 0.5     # the focus found the foreground


def test_hybrid_switches_from_sa_to_ha():
    D = data.linear_orthogonal(50, 3, 2, seed=2)
    p0 = fcam.init_params(D.X.shape[2], 2, scale=0.1, seed=0)
    hybrid, h_hist = fcam.train(p0, D.X, D.y, "hybrid", lr=0.3, steps=6, switch_step=3)
    sa, s_hist = fcam.train(p0, D.X, D.y, "sa", lr=0.3, steps=3)
    after, a_hist = fcam.train(sa, D.X, D.y, "ha", lr=0.3, steps=3)
    np.testing.assert_allclose(h_hist, s_hist + a_hist, rtol=1e-12)
    np.testing.assert_allclose(hybrid["W"], after["W"], rtol=1e-12)


def test_hybrid_switches_halfway_by_default():
    """Without ``switch_step`` the hybrid trains SA for ``steps // 2`` steps (7 steps: 3)."""
    D = data.linear_orthogonal(50, 3, 2, seed=2)
    p0 = fcam.init_params(D.X.shape[2], 2, scale=0.1, seed=0)
    default, d_hist = fcam.train(p0, D.X, D.y, "hybrid", lr=0.3, steps=7)
    given, g_hist = fcam.train(p0, D.X, D.y, "hybrid", lr=0.3, steps=7, switch_step=3)
    other, o_hist = fcam.train(p0, D.X, D.y, "hybrid", lr=0.3, steps=7, switch_step=4)
    np.testing.assert_array_equal(d_hist, g_hist)
    np.testing.assert_array_equal(default["W"], given["W"])
    assert not np.array_equal(d_hist, o_hist)            # the switch step shows in the loss


@pytest.mark.parametrize("n, batch", [(10, 3), (12, 4), (7, 7)])
def test_shuffled_batches_pass_over_every_instance_once_per_epoch(n, batch, monkeypatch):
    """``shuffle``: ceil(n / batch) steps see every instance exactly once (the linear
    backend's epoch), a fresh order each pass; without it, batches are drawn at random."""
    D = data.linear_orthogonal(n, 3, 2, seed=1)
    D.X[:, 0, 0] = np.arange(n)                  # instance ids in a coordinate the loss reads
    seen = []
    real = fcam.loss_and_grad

    def spy(params, X, y, paradigm, la=None):
        seen.append(X[:, 0, 0].astype(int).tolist())
        return real(params, X, y, paradigm, la)
    monkeypatch.setattr(fcam, "loss_and_grad", spy)
    per_pass = -(-n // batch)
    p0 = fcam.init_params(D.X.shape[2], 2)
    fcam.train(p0, D.X, D.y, "sa", lr=0.1, steps=2 * per_pass, batch_size=batch, seed=3,
               shuffle=True)
    passes = [sum(seen[k * per_pass:(k + 1) * per_pass], []) for k in (0, 1)]
    assert all(sorted(p) == list(range(n)) for p in passes)
    assert [len(b) for b in seen[:per_pass]] == [batch] * (n // batch) + (
        [n % batch] if n % batch else [])
    if n > batch:
        assert passes[0] != passes[1]
        seen.clear()
        fcam.train(p0, D.X, D.y, "sa", lr=0.1, steps=20 * per_pass, batch_size=batch, seed=3)
        drawn = [sum(seen[k * per_pass:(k + 1) * per_pass], []) for k in range(20)]
        assert any(sorted(p) != list(range(n)) for p in drawn)      # a random draw repeats
