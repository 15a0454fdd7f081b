"""The torch backend equals the NumPy core: losses, gradients, inference, linear FCAM.

Gold cross-check of Section 2.3 (Vashisht & Ramaswamy 2023): identical float64
inputs into ``minimal_attn.losses`` / ``minimal_attn.fcam`` (hand-written
backward) and ``minimal_attn.backends.torch_backend`` (autograd).
"""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import examples

from minimal_attn import data, fcam, losses
from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")
from minimal_attn.backends import torch_backend as tb  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@st.composite
def problem(draw, scale=30.0):
    """Shapes first, then bounded scores (N, m), logits (N, m, C) and labels."""
    n, m, c = draw(st.integers(1, 5)), draw(st.integers(2, 6)), draw(st.integers(2, 5))
    elems = st.floats(-scale, scale, allow_nan=False)
    scores = draw(arrays(np.float64, (n, m), elements=elems))
    logits = draw(arrays(np.float64, (n, m, c), elements=elems))
    y = draw(arrays(np.int64, (n,), elements=st.integers(0, c - 1)))
    return scores, logits, y


def _grads(paradigm, scores, logits, y, device="cpu"):
    """Loss and autograd (dscores, dlogits) of the torch backend, back as NumPy."""
    s = torch.tensor(scores, device=device, requires_grad=True)
    g = torch.tensor(logits, device=device, requires_grad=True)
    value = tb.loss(paradigm, s, g, torch.tensor(y, device=device))
    ds, dg = torch.autograd.grad(value, [s, g], allow_unused=True)
    ds = np.zeros_like(scores) if ds is None else ds.cpu().numpy()
    return float(value.detach()), ds, dg.cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
@settings(deadline=None, max_examples=examples(30))
@given(data=problem())
def test_losses_and_gradients_equal_core(device, data):
    scores, logits, y = data
    # SA: logits of the averaged segment (N, C); no score gradient reaches the logits
    value, ds, dg = _grads("sa", scores, logits[:, 0], y, device)
    np.testing.assert_allclose(value, losses.loss_sa(logits[:, 0], y), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dg, losses.value_and_grad_sa(logits[:, 0], y)[1], atol=1e-12)
    assert np.all(ds == 0)
    for paradigm in ("ha", "lv"):
        value, ds, dg = _grads(paradigm, scores, logits, y, device)
        _, ds_core, dg_core = losses.value_and_grad(paradigm, scores, logits, y)
        np.testing.assert_allclose(value, losses.loss(paradigm, scores, logits, y),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ds, ds_core, atol=1e-12)
        np.testing.assert_allclose(dg, dg_core, atol=1e-12)


@settings(deadline=None, max_examples=examples(30))
@given(data=problem(), k=st.integers(1, 3), weighted=st.booleans())
def test_value_and_grad_and_leading_axes_equal_core(data, k, weighted):
    """The twin of losses.value_and_grad (NumPy in, NumPy out), with K problems stacked
    on a leading axis (one loss each, as the core's fixed-focus curves use) and an
    optional weight in place of the batch mean."""
    scores, logits, y = data
    rng = np.random.default_rng(k)
    S = np.stack([scores + rng.normal(size=scores.shape) for _ in range(k)])    # (K, N, m)
    G = np.stack([logits + rng.normal(size=logits.shape) for _ in range(k)])    # (K, N, m, C)
    w = rng.uniform(0.1, 2.0, size=y.shape) if weighted else None
    for paradigm, z in (("sa", G[:, :, 0]), ("ha", G), ("lv", G)):
        core = losses.value_and_grad(paradigm, S, z, y, w)
        twin = tb.value_and_grad(paradigm, S, z, y, w)
        np.testing.assert_allclose(core[0], [losses.value_and_grad(paradigm, S[i], z[i], y, w)[0]
                                             for i in range(k)], rtol=1e-13)
        assert twin[0].shape == (k,) and (twin[1] is None) == (paradigm == "sa")
        for a, b in zip(twin, core):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        if w is None:
            np.testing.assert_allclose(tb.loss(paradigm, torch.tensor(S), torch.tensor(z),
                                               torch.tensor(y)).numpy(), core[0],
                                       rtol=1e-12, atol=1e-12)   # torch: absolute digits
    np.testing.assert_allclose(tb.value_and_grad_sa(G[:, :, 0], y, w)[1],
                               losses.value_and_grad_sa(G[:, :, 0], y, w)[1], atol=1e-12)
    for rule in ("ha", "lv"):
        np.testing.assert_allclose(
            getattr(tb, f"value_and_grad_{rule}")(S, G, y, w)[1],
            getattr(losses, f"value_and_grad_{rule}")(S, G, y, w)[1], atol=1e-12)
        top2 = np.sort(S, axis=-1)[..., -2:]
        if np.all(top2[..., 1] - top2[..., 0] > 1e-6):     # HA's argmax is unambiguous
            stacked = losses.infer(rule, S, G)                      # one problem per slice
            for i in range(k):
                np.testing.assert_allclose(stacked[i], losses.infer(rule, S[i], G[i]),
                                           atol=1e-15)
            np.testing.assert_allclose(tb.infer(rule, torch.tensor(S), torch.tensor(G)).numpy(),
                                       stacked, atol=1e-12)


@settings(deadline=None, max_examples=examples(30))
@given(data=problem())
def test_inference_rules_equal_core(data):
    scores, logits, y = data
    top2 = np.sort(scores, axis=1)[:, -2:]
    assume(np.all(top2[:, 1] - top2[:, 0] > 1e-6))          # HA's argmax is unambiguous
    s, g = torch.tensor(scores), torch.tensor(logits)
    np.testing.assert_allclose(tb.infer_sa(g[:, 0]).numpy(), losses.infer_sa(logits[:, 0]),
                               atol=1e-12)
    for rule in ("ha", "lv", "hybrid"):
        np.testing.assert_allclose(tb.infer(rule, s, g).numpy(),
                                   losses.infer(rule, scores, logits), atol=1e-12)
    np.testing.assert_array_equal(tb.infer("hybrid", s, g).numpy(), tb.infer_ha(s, g).numpy())


@settings(deadline=None, max_examples=examples(25))
@given(data=problem(scale=1e4))
def test_finite_at_magnitude_1e4(data):
    scores, logits, y = data
    # finite, and the core's numbers: exponents f_j - max f of up to 2e4 round by
    # 2e4 * 2.2e-16 = 4.4e-12 (relative, in every weight and probability), and autograd's
    # centred a_j (l_j - L) loses m ulps of l ~ 2e4 absolutely (3e-11): 1e-10
    for paradigm in ("ha", "lv"):
        value, ds, dg = _grads(paradigm, scores, logits, y)
        assert np.isfinite(value) and np.all(np.isfinite(ds)) and np.all(np.isfinite(dg))
        core, ds_core, dg_core = losses.value_and_grad(paradigm, scores, logits, y)
        assert value == pytest.approx(core, rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(ds, ds_core, rtol=0, atol=1e-10)
        np.testing.assert_allclose(dg, dg_core, rtol=0, atol=1e-10)
    value, _, dg = _grads("sa", scores, logits[:, 0], y)
    assert np.isfinite(value) and np.all(np.isfinite(dg))
    core, dg_core = losses.value_and_grad_sa(logits[:, 0], y)
    assert value == pytest.approx(core, rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(dg, dg_core, rtol=0, atol=1e-10)
    for rule in ("sa", "ha", "lv"):
        s = tb.infer(rule, torch.tensor(scores), torch.tensor(logits if rule != "sa"
                                                               else logits[:, 0]))
        assert torch.all(torch.isfinite(s))


def test_fixed_focus_with_minus_infinity_is_exact():
    # alpha = 1: log-attention 0 on the foreground, -inf elsewhere; SA = HA = LV = CE(g(x_z))
    z = np.array([0, 2, 1])
    la = data.fixed_log_attention(z, 3, 1.0)
    logits = np.random.default_rng(0).standard_normal((3, 3, 4))
    y = np.array([1, 3, 0])
    ce = -losses.log_softmax(logits[np.arange(3), z])[np.arange(3), y].mean()
    for paradigm in ("ha", "lv"):
        value, ds, dg = _grads(paradigm, la, logits, y)
        assert value == pytest.approx(ce, rel=1e-12)
        assert np.all(np.isfinite(dg))


def test_an_unattended_segment_with_an_impossible_label_adds_nothing():
    # segment 1 has attention 0 (score -inf) and gives the label probability 0 (logit
    # -inf): HA = CE of segment 0 alone, log(1 + e^-1) by hand, with finite gradients
    scores = np.array([[0.0, -np.inf]])
    logits = np.array([[[1.0, 0.0], [-np.inf, 0.0]]])
    value, ds, dg = _grads("ha", scores, logits, np.array([0]))
    assert value == pytest.approx(np.log1p(np.exp(-1.0)), rel=1e-12)
    assert np.all(np.isfinite(ds)) and np.all(np.isfinite(dg))


def test_phase_is_the_core_schedule():
    assert tb.phase is losses.phase
    assert [tb.phase("hybrid", k, 3) for k in range(5)] == ["sa"] * 3 + ["ha"] * 2
    assert tb.phase("lv", 10, 3) == "lv"
    assert tb.LOSS_PARADIGMS == ("sa", "ha", "lv")


@pytest.mark.parametrize("paradigm", ["sa", "ha", "lv"])
@pytest.mark.parametrize("alpha", [None, 0.7, 1.0])
def test_linear_fcam_equals_core(paradigm, alpha):
    mos = data.gaussian_mosaics(40, 4, 3, d=6, seed=1)
    params = fcam.init_params(6, 3, scale=0.5, seed=2)
    la = None if alpha is None else data.fixed_log_attention(mos.z, 4, alpha)
    value, grads = fcam.loss_and_grad(params, mos.X, mos.y, paradigm, la)
    value_t, grads_t = tb.fcam.loss_and_grad(params, mos.X, mos.y, paradigm, la)
    assert value_t == pytest.approx(value, rel=1e-12)
    assert tb.fcam.loss(params, mos.X, mos.y, paradigm, la) == pytest.approx(value, rel=1e-12)
    for key in ("W", "u"):
        assert isinstance(grads_t[key], np.ndarray)
        np.testing.assert_allclose(grads_t[key], grads[key], atol=1e-12)
    out, out_t = fcam.forward(params, mos.X, paradigm, la), tb.fcam.forward(params, mos.X,
                                                                             paradigm, la)
    assert set(out_t) == set(out) and all(isinstance(v, np.ndarray) for v in out_t.values())
    np.testing.assert_allclose(out_t["logits"], out["logits"], atol=1e-12)
    np.testing.assert_allclose(tb.fcam.predict(params, mos.X, paradigm, la),
                               fcam.predict(params, mos.X, paradigm, la), atol=1e-12)


def test_linear_fcam_keeps_torch_tensors_as_torch():
    mos = data.gaussian_mosaics(10, 3, 2, d=4, seed=0)
    params = {k: torch.tensor(v) for k, v in fcam.init_params(4, 2, 0.3, seed=0).items()}
    _, grads = tb.fcam.loss_and_grad(params, torch.tensor(mos.X), torch.tensor(mos.y), "lv")
    assert torch.is_tensor(grads["W"]) and grads["W"].shape == (2, 4)


def test_get_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert tb.get_device().type == expected
    assert tb.get_device("auto").type == expected
    assert tb.get_device("CPU") == torch.device("cpu")
    for bad in ("tpu", "gpu0", "cuda:x"):
        with pytest.raises(InputError, match="device"):
            tb.get_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA GPU"):
            tb.get_device("cuda")
    else:
        with pytest.raises(InputError, match="only"):
            tb.get_device(f"cuda:{torch.cuda.device_count()}")


def test_core_never_imports_torch():
    code = ("import sys; import minimal_attn, minimal_attn.losses, minimal_attn.fcam, "
            "minimal_attn.data, minimal_attn.datasets.mosaics, minimal_attn.saif, "
            "minimal_attn.datasets.cifar, minimal_attn.experiments.linear_train, "
            "minimal_attn.experiments.train_loop, minimal_attn.experiments.train_report, "
            "minimal_attn.backends.vr.table1, minimal_attn.cli.train_cmd; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
