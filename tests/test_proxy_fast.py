"""The proxy's fast training path (minimal_attn._proxy_fast) equals its readable form."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from minimal_attn import _proxy_fast, proxy


def _pairs(rng, P, n_src, n_tgt, max_len=6, empty_targets=True):
    src = [rng.integers(0, n_src, rng.integers(1, max_len + 1)) for _ in range(P)]
    tgt = [rng.integers(0, n_tgt, rng.integers(0 if empty_targets else 1, max_len + 1))
           for _ in range(P)]
    return src, tgt


@settings(deadline=None, max_examples=examples(30))
@given(data=st.data())
def test_batch_maker_equals_make_batch(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    P = data.draw(st.integers(1, 12))
    src, tgt = _pairs(rng, P, 7, 5)
    order = rng.integers(0, P, data.draw(st.integers(1, 2 * P)))     # repeats allowed
    size = data.draw(st.integers(1, len(order) + 2))
    batches = _proxy_fast.batch_maker(src, tgt)(order, size)
    assert len(batches) == -(-len(order) // size)
    for k, fast in enumerate(batches):
        idx = order[k * size:(k + 1) * size]
        slow = proxy.make_batch([src[i] for i in idx], [tgt[i] for i in idx])
        assert fast.n_pairs == slow.n_pairs and type(fast.n_pairs) is int
        for a, b in zip(fast[:-1], slow[:-1]):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("chunk", [64, 1 << 18])
def test_adam_step_is_the_textbook_adam_bit_for_bit(chunk, monkeypatch):
    monkeypatch.setattr(_proxy_fast, "CHUNK_BYTES", chunk)          # several blocks, or one
    rng = np.random.default_rng(0)
    p1 = {"W": rng.normal(size=(3, 5)), "e": rng.normal(size=(37, 5))}
    p2 = {k: v.copy() for k, v in p1.items()}
    s1, s2 = {}, {}
    for _ in range(7):
        g = {k: rng.normal(size=v.shape) * rng.integers(0, 2, v.shape) for k, v in p1.items()}
        proxy._adam(p1, g, s1, 0.03)
        _proxy_fast.adam_step(p2, g, s2, 0.03)
        assert all(np.array_equal(p1[k], p2[k]) for k in p1)
    assert not np.array_equal(p1["e"], rng.normal(size=(37, 5)))


def _readable_train(src, tgt, n_src, n_tgt, cfg, val):
    """train_proxy as it read before the fast path: make_batch and _adam at every step."""
    rng = np.random.default_rng(cfg.seed)
    params = proxy.init_params(n_src, n_tgt, cfg.d, rng)
    val_batch, best, best_loss, state = proxy.make_batch(*val), None, np.inf, {}
    for _ in range(cfg.epochs):
        order = rng.permutation(len(src))
        for start in range(0, len(src), cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            _, grads = proxy.loss_and_grads(params, proxy.make_batch([src[i] for i in idx],
                                                                     [tgt[i] for i in idx]))
            proxy._adam(params, grads, state, cfg.lr)
        loss = proxy.loss_and_grads(params, val_batch)[0]
        if loss < best_loss:
            best_loss, best = loss, {k: v.copy() for k, v in params.items()}
    return best


def test_train_proxy_equals_the_readable_loop_bit_for_bit():
    rng = np.random.default_rng(1)
    src, tgt = _pairs(rng, 90, 11, 6)
    cfg = proxy.ProxyConfig(d=4, epochs=3, batch_size=16, lr=0.05, seed=2)
    fast, _ = proxy.train_proxy(src[:70], tgt[:70], 11, 6, cfg, val=(src[70:], tgt[70:]))
    slow = _readable_train(src[:70], tgt[:70], 11, 6, cfg, (src[70:], tgt[70:]))
    assert all(np.array_equal(fast[k], slow[k]) for k in fast)


def test_beta_px_rows_equals_beta_px():
    rng = np.random.default_rng(3)
    params = {"W": rng.normal(size=(6, 4)), "e": rng.normal(size=(11, 4))}
    src, tgt = _pairs(rng, 25, 11, 6)
    rows = _proxy_fast.beta_px_rows(params, src, tgt)
    assert len(rows) == len(src)
    for r, x, y in zip(rows, src, tgt):
        assert r.shape == (len(y), len(x))
        np.testing.assert_allclose(r, proxy.beta_px(params, x, y), rtol=1e-13, atol=0)


def test_train_proxy_in_torch_matches_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    src, tgt = _pairs(rng, 80, 9, 5, empty_targets=False)
    cfg = proxy.ProxyConfig(d=3, epochs=2, batch_size=16, lr=0.05, seed=0)
    ref, h_ref = proxy.train_proxy(src, tgt, 9, 5, cfg, val=(src[:20], tgt[:20]))
    got, h_got = proxy.train_proxy(src, tgt, 9, 5, cfg, val=(src[:20], tgt[:20]),
                                   like_array=torch.zeros(0, dtype=torch.float64))
    assert all(isinstance(v, torch.Tensor) for v in got.values())
    for k in ref:
        np.testing.assert_allclose(got[k].numpy(), ref[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose([h["val_loss"] for h in h_got], [h["val_loss"] for h in h_ref],
                               rtol=1e-10)
    for a, b in zip(_proxy_fast.beta_px_rows(got, src, tgt),
                    _proxy_fast.beta_px_rows(ref, src, tgt)):
        np.testing.assert_allclose(a, b, rtol=1e-8)


def test_training_on_a_device_copies_the_data_there_once_an_epoch(monkeypatch):
    """No host array enters a step: an epoch's batches go to the device in one copy per
    field, so eight times the steps make no more copies (each copy from the host waits for
    the card, and on a card shared with other processes that wait is long)."""
    torch = pytest.importorskip("torch")
    from minimal_attn import _xp

    rng = np.random.default_rng(6)
    src, tgt = _pairs(rng, 64, 9, 5, empty_targets=False)
    copies = []
    real = _xp.like

    def counted(xp, values, ref=None, dtype=None):
        copies.append(isinstance(values, np.ndarray))
        return real(xp, values, ref, dtype)

    for module in (_xp, _proxy_fast, proxy):
        monkeypatch.setattr(module, "like", counted, raising=False)
    made = []
    for size in (64, 8):                                   # 1 step an epoch, then 8
        copies.clear()
        cfg = proxy.ProxyConfig(d=3, epochs=2, batch_size=size, lr=0.05, seed=0)
        got, _ = proxy.train_proxy(src, tgt, 9, 5, cfg,
                                   like_array=torch.zeros(0, dtype=torch.float64))
        made.append(sum(copies))
    assert made[1] == made[0] == 2 * 5 + 2       # 5 fields an epoch; W and e at the start
    assert np.isfinite(got["e"].numpy()).all()


def test_a_step_on_a_card_waits_for_nothing():
    """The loss, the gradients and Adam of one step queue on the card without one host
    synchronisation (torch's sync debug mode turns any into an error)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch sees none)")
    rng = np.random.default_rng(7)
    src, tgt = _pairs(rng, 40, 9, 5, empty_targets=False)
    W = torch.zeros((5, 4), dtype=torch.float64, device="cuda")
    params = {"W": W.normal_(), "e": torch.randn((9, 4), dtype=torch.float64, device="cuda")}
    batches = _proxy_fast.batch_maker(src, tgt)(rng.permutation(40), 16, W)
    state = {}
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches:
            _, grads = proxy._loss_and_grads(params, batch)
            _proxy_fast.adam_step(params, grads, state, 0.01)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(params["e"]).all()


def test_beta_px_rows_in_groups_and_repeated_words_tie_exactly():
    # beta^px is a function of the word: a word repeated in a sentence gets equal columns
    rng = np.random.default_rng(5)
    params = {"W": rng.normal(size=(7, 5)), "e": rng.normal(size=(4, 5))}
    src, tgt = _pairs(rng, 40, 4, 7)                       # 4 words: many repeats
    whole = _proxy_fast.beta_px_rows(params, src, tgt)
    small = _proxy_fast.beta_px_rows(params, src, tgt, max_entries=20)   # ~3 tokens a group
    for a, b, x in zip(whole, small, src):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)
        for i in range(len(x)):
            for j in range(len(x)):
                if x[i] == x[j]:
                    assert np.array_equal(a[:, i], a[:, j])
