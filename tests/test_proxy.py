"""The proxy model: Eqs. (5), (6), (14) and the gradient at initialisation, Eq. (15)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from minimal_attn import _proxy_fast, ibm1, proxy, proxy_velocity
from minimal_attn.errors import InputError


@st.composite
def proxy_problem(draw, max_pairs=5, max_len=5, max_vocab=5, max_d=4):
    """Shapes first, then parameters and ids (repeated words are common)."""
    n_src = draw(st.integers(1, max_vocab))
    n_tgt = draw(st.integers(2, max_vocab))
    d = draw(st.integers(1, max_d))
    P = draw(st.integers(1, max_pairs))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    params = {"W": rng.normal(size=(n_tgt, d)), "e": rng.normal(size=(n_src, d))}
    src = [rng.integers(0, n_src, rng.integers(1, max_len + 1)) for _ in range(P)]
    tgt = [rng.integers(0, n_tgt, rng.integers(0, max_len + 1)) for _ in range(P)]
    return params, src, tgt


def loss_loops(params, src, tgt):
    """Eq. (14) one output word at a time."""
    total = 0.0
    for x, y in zip(src, tgt):
        z = params["W"] @ params["e"][x].mean(axis=0)
        logp = z - np.log(np.exp(z - z.max()).sum()) - z.max()
        total -= sum(logp[o] for o in y)
    return total


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_loss_matches_per_word_loops(data):
    params, src, tgt = data.draw(proxy_problem())
    loss, _ = proxy.loss_and_grads(params, proxy.make_batch(src, tgt))
    assert loss == pytest.approx(loss_loops(params, src, tgt), rel=1e-12, abs=1e-12)


@settings(deadline=None, max_examples=examples(40))
@given(data=st.data())
def test_grads_of_snell_eq14_directional_finite_differences(data):
    params, src, tgt = data.draw(proxy_problem())
    batch = proxy.make_batch(src, tgt)
    _, grads = proxy.loss_and_grads(params, batch)
    rng = np.random.default_rng(0)
    v = {k: rng.normal(size=p.shape) for k, p in params.items()}
    eps = 1e-6
    plus = {k: p + eps * v[k] for k, p in params.items()}
    minus = {k: p - eps * v[k] for k, p in params.items()}
    fd = (proxy.loss_and_grads(plus, batch)[0] - proxy.loss_and_grads(minus, batch)[0]) / (2 * eps)
    analytic = sum(float((grads[k] * v[k]).sum()) for k in params)
    assert analytic == pytest.approx(fd, rel=1e-6, abs=1e-6)


def test_grads_of_snell_eq14_match_torch_autograd():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    n_src, n_tgt, d = 7, 6, 5
    params = {"W": rng.normal(size=(n_tgt, d)), "e": rng.normal(size=(n_src, d))}
    src = [np.array([0, 0, 3]), np.array([1, 2, 2, 2, 6]), np.array([4])]   # repeats
    tgt = [np.array([5, 5]), np.array([0, 1, 2]), np.array([3, 3, 3, 4])]
    loss, grads = proxy.loss_and_grads(params, proxy.make_batch(src, tgt))
    W = torch.tensor(params["W"], requires_grad=True)
    e = torch.tensor(params["e"], requires_grad=True)
    t_loss = 0
    for x, y in zip(src, tgt):
        logp = torch.log_softmax(W @ e[torch.tensor(x)].mean(0), dim=0)
        t_loss = t_loss - logp[torch.tensor(y)].sum()
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-12)
    np.testing.assert_allclose(grads["W"], W.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grads["e"], e.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_beta_px_is_eq6():
    rng = np.random.default_rng(2)
    params = {"W": rng.normal(size=(4, 3)), "e": rng.normal(size=(5, 3))}
    x, y = np.array([4, 0, 2]), np.array([1, 3])      # not a palindrome: positions count
    beta = proxy.beta_px(params, x, y)
    assert beta.shape == (2, 3)
    for t in range(2):
        for pos in range(3):
            z = params["W"] @ params["e"][x[pos]]
            assert beta[t, pos] == pytest.approx(np.exp(z[y[t]]) / np.exp(z).sum(), rel=1e-12)
    np.testing.assert_allclose(proxy.word_translation(params).sum(axis=1), 1.0)


# ----------------------------------------------------------------- Eq. (15)
def _toy_corpus():
    rng = np.random.default_rng(4)
    src = [rng.integers(0, 8, rng.integers(1, 6)) for _ in range(25)]
    tgt = [rng.integers(0, 6, rng.integers(1, 5)) for _ in range(25)]
    return src, tgt, 8, 6


def test_eq15_is_exact_for_orthonormal_embeddings():
    # e_i . e_j = delta, W_o . W_o' = delta and W e_i = 0: the limit of Eq. (15) holds exactly
    src, tgt, n_src, n_tgt = _toy_corpus()
    eye = np.eye(n_src + n_tgt)
    params = {"e": eye[:n_src], "W": eye[n_src:]}
    C = ibm1.count_table(src, tgt, n_src, n_tgt)
    np.testing.assert_allclose(proxy_velocity.logit_velocity(params, src, tgt),
                               2 * (C - C.mean(axis=1, keepdims=True)), atol=1e-12)


def test_eq15_holds_for_the_logits_and_is_smaller_by_the_output_size_for_theta():
    # Eq. (15) prints theta^px = softmax(W e_i); A.2's Eq. (53) derives it for the logits
    # W e_i. At the orthonormal start (p uniform) the probabilities move at the logits'
    # velocity times the softmax Jacobian (I - 11^T/|O|)/|O|, i.e. 2(C - mean C)/|O|
    src, tgt, n_src, n_tgt = _toy_corpus()
    eye = np.eye(n_src + n_tgt)
    params = {"e": eye[:n_src], "W": eye[n_src:]}
    C = ibm1.count_table(src, tgt, n_src, n_tgt)
    limit = 2 * (C - C.mean(axis=1, keepdims=True))
    _, g = proxy.loss_and_grads(params, proxy.make_batch(src, tgt))
    h = 1e-6                                            # central difference along the flow

    def theta(s):
        return proxy.word_translation({k: params[k] - s * g[k] for k in params})
    velocity = (theta(h) - theta(-h)) / (2 * h)
    np.testing.assert_allclose(velocity, limit / n_tgt, atol=1e-7)
    assert np.abs(velocity - limit).max() > 0.5 * np.abs(limit).max()   # as printed: off


def test_eq15_error_shrinks_like_one_over_sqrt_d():
    src, tgt, n_src, n_tgt = _toy_corpus()
    dims = [16, 256, 4096]
    err = proxy_velocity.init_velocity_error(src, tgt, n_src, n_tgt, dims, n_seeds=4, seed=0)
    assert np.all(np.diff(err) < 0)
    slope = np.polyfit(np.log(dims), np.log(err), 1)[0]
    assert -0.7 < slope < -0.35                       # ~ -1/2
    assert err[-1] < 0.1


# ------------------------------------------------------------------ training
def test_training_learns_a_permuted_copy_task():
    # y is x mapped word by word through a permutation: the probe must find the source word
    rng = np.random.default_rng(5)
    perm = rng.permutation(12)
    src = [rng.choice(12, size=rng.integers(3, 7), replace=False) for _ in range(300)]
    tgt = [perm[x] for x in src]
    cfg = proxy.ProxyConfig(d=16, epochs=15, batch_size=32, lr=0.05, seed=0)
    params, history = proxy.train_proxy(src[:250], tgt[:250], 12, 12, cfg,
                                        val=(src[250:], tgt[250:]))
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    hits = [np.argmax(proxy.beta_px(params, x, y), axis=1) == np.arange(len(x))
            for x, y in zip(src[250:], tgt[250:])]
    assert np.concatenate(hits).mean() > 0.95
    assert np.argmax(proxy.word_translation(params), axis=1).tolist() == perm.tolist()


def test_binary_classification_case_finds_the_keyword():
    # T = 1, |O| = 2 (Section 2.4): label 1 iff word 0 occurs
    rng = np.random.default_rng(6)
    src = [rng.integers(0, 10, rng.integers(2, 8)) for _ in range(400)]
    tgt = [np.array([int(0 in x)]) for x in src]
    cfg = proxy.ProxyConfig(d=8, epochs=10, lr=0.05, optimizer="sgd", seed=1)
    params, _ = proxy.train_proxy(src, tgt, 10, 2, cfg)
    x = np.array([3, 0, 7, 5])
    assert np.argmax(proxy.beta_px(params, x, np.array([1]))[0]) == 1


def test_bad_inputs():
    with pytest.raises(InputError, match="empty source"):
        proxy.make_batch([np.array([], dtype=int)], [np.array([0])])
    with pytest.raises(InputError, match="optimizer"):
        proxy.train_proxy([np.array([0])], [np.array([0])], 1, 2,
                          proxy.ProxyConfig(optimizer="rmsprop"))
    with pytest.raises(InputError, match="lr"):
        proxy.train_proxy([np.array([0])], [np.array([0])], 1, 2, proxy.ProxyConfig(lr=-1.0))


@pytest.mark.parametrize("x, y, side", [([-1], [0], "source"), ([2], [0], "source"),
                                        ([0], [3], "target"), ([0], [-1], "target")])
def test_ids_outside_the_vocabularies_are_refused(x, y, side):
    # a negative id would wrap around to the last word instead of failing
    params = proxy.init_params(2, 3, 4, np.random.default_rng(0))
    with pytest.raises(InputError, match=f"{side} ids must lie in"):
        proxy.beta_px(params, np.array(x), np.array(y))
    with pytest.raises(InputError, match=f"{side} ids must lie in"):
        _proxy_fast.beta_px_rows(params, [np.array([0, 1]), np.array(x)],
                                 [np.array([0]), np.array(y)])
    with pytest.raises(InputError, match=f"{side} ids must lie in"):
        proxy.train_proxy([np.array(x)], [np.array(y)], 2, 3, proxy.ProxyConfig(epochs=1))


def test_a_saturated_label_keeps_its_gradient():
    """p_y = 1/(1 + e^-40): the label's entry of dL/dW is -(1 - p_y) = -e^-40/(1 + e^-40),
    hand-computed; written T p_y - 1 it rounds to 0 (the other entry is +e^-40/(1 + e^-40))."""
    params = {"W": np.array([[40.0], [0.0]]), "e": np.array([[1.0]])}
    _, grads = proxy.loss_and_grads(params, proxy.make_batch([np.array([0])], [np.array([0])]))
    small = np.exp(-40.0) / (1.0 + np.exp(-40.0))
    np.testing.assert_allclose(grads["W"].ravel(), [-small, small], rtol=1e-12)
