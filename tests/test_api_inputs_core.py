"""The core's public functions refuse bad inputs with one-line InputErrors (API audit).

Losses (V&R Sec. 2.3), the linear FCAM, the logistic proxy (Snell A.10), the gradient
checker and the torch twin: integer logits (H3), paradigm names (M4), labels (M5),
training arguments (M11), empty batches (L12), the torch twin's dtypes (L23) and the
checker's keys (L24). Valid inputs keep the numbers they gave before.
"""

import numpy as np
import pytest
from scipy.special import log_softmax

from minimal_attn import data, fcam, gradcheck, losses
from minimal_attn import logistic_proxy as lp
from minimal_attn.errors import InputError

S, L, LS, Y = np.zeros((2, 3)), np.zeros((2, 3, 4)), np.zeros((2, 4)), np.array([0, 1])


@pytest.fixture
def tb():
    pytest.importorskip("torch")
    from minimal_attn.backends import torch_backend
    return torch_backend


@pytest.fixture
def linear():
    D = data.linear_orthogonal(n=20, m=3, n_classes=3)
    return D, fcam.init_params(d=D.X.shape[2], n_classes=3, scale=0.1, seed=1)


# --------------------------------------------------------------- H3: integer logits
def test_float_logits_keep_their_loss_and_gradient():
    logits, y = np.array([[3.0, 1, 0, 0], [0, 2, 0, 0]]), Y
    value, dlogits = losses.value_and_grad_sa(logits, y)
    logp = log_softmax(logits, axis=1)
    assert value == pytest.approx(-logp[[0, 1], y].mean(), rel=1e-15)
    assert value == pytest.approx(0.27587528857565347, rel=1e-15)   # before the checks
    np.testing.assert_allclose(dlogits, (np.exp(logp) - np.eye(4)[y]) / 2, atol=1e-16)


@pytest.mark.parametrize("call", [
    lambda z: losses.loss_sa(z[:, 0], Y),
    lambda z: losses.value_and_grad_sa(z[:, 0], Y),
    lambda z: losses.loss("sa", None, z[:, 0], Y),
    lambda z: losses.value_and_grad("sa", None, z[:, 0], Y),
    lambda z: losses.loss_ha(S, z, Y),
    lambda z: losses.value_and_grad("lv", S, z, Y),
])
def test_integer_logits_are_refused_not_read_as_a_zero_loss(call):
    logits = np.array([[3, 1, 0, 0], [0, 2, 0, 0]])[:, None, :].repeat(3, axis=1)  # (2, 3, 4)
    with pytest.raises(InputError, match="logits must be a floating-point array"):
        call(logits)


@pytest.mark.parametrize("paradigm", ["ha", "lv"])
def test_integer_scores_are_refused(paradigm):
    with pytest.raises(InputError, match="scores must be a floating-point"):
        losses.loss(paradigm, np.zeros((2, 3), int), L, Y)


def test_torch_twin_refuses_integer_logits_the_same_way(tb):
    import torch
    with pytest.raises(InputError, match="logits must be a floating-point torch tensor"):
        tb.value_and_grad("sa", None, np.zeros((2, 4), int), Y)
    with pytest.raises(InputError, match="logits must be a floating-point torch tensor"):
        tb.loss_sa(torch.zeros((2, 4), dtype=torch.long), torch.tensor([0, 1]))


# --------------------------------------------------------------- M4: fcam paradigm names
@pytest.mark.parametrize("name, canonical", [("SA", "sa"), (" lv", "lv"), ("soft", "sa")])
def test_fcam_forward_canonicalises_the_paradigm(linear, name, canonical):
    D, p = linear
    out, want = fcam.forward(p, D.X, name), fcam.forward(p, D.X, canonical)
    assert set(out) == set(want)
    np.testing.assert_array_equal(out["logits"], want["logits"])


def test_fcam_forward_refuses_an_unknown_paradigm(linear, tb):
    D, p = linear
    with pytest.raises(InputError, match="unknown paradigm 'typo'"):
        fcam.forward(p, D.X, "typo")
    with pytest.raises(InputError, match="unknown paradigm 'typo'"):
        tb.fcam.forward(p, D.X, "typo")
    assert tb.fcam.forward(p, D.X, "SA")["logits"].shape == (20, 3)


# --------------------------------------------------------------- M5: labels
BAD_LABELS = [
    (np.array([0, -1]), "labels in 0..3"),          # would wrap around to class 3
    (np.array([0, 4]), "labels in 0..3"),
    (np.array([0.0, 1.0]), "integer class labels"),
    (np.array([True, False]), "integer class labels"),
    (np.array([0, 1, 1]), "one per instance"),
]


@pytest.mark.parametrize("y, phrase", BAD_LABELS)
@pytest.mark.parametrize("call", [
    lambda y: losses.value_and_grad_sa(LS, y),
    lambda y: losses.loss_sa(LS, y),
    lambda y: losses.loss("ha", S, L, y),
    lambda y: losses.value_and_grad("lv", S, L, y),
    lambda y: losses.value_and_grad_ha(S, L, y),
    lambda y: losses.loss_lv(S, L, y),
])
def test_losses_refuse_bad_labels(call, y, phrase):
    with pytest.raises(InputError, match=phrase):
        call(y)


@pytest.mark.parametrize("y, phrase", [
    (np.array([0, 3] * 10), "labels in 0..2"), (np.arange(20) % 3 * 1.0, "integer"),
    (np.zeros(19, int), "one per instance"), (-(np.arange(20) % 2), "labels in 0..2")])
@pytest.mark.parametrize("call", [
    lambda p, X, y: fcam.loss(p, X, y, "sa"),
    lambda p, X, y: fcam.loss_and_grad(p, X, y, "lv"),
    lambda p, X, y: fcam.train(p, X, y, "ha", lr=0.1, steps=1, batch_size=2, seed=0),
])
def test_fcam_refuses_bad_labels(linear, call, y, phrase):
    D, p = linear
    with pytest.raises(InputError, match=phrase):
        call(p, D.X, y)


def test_logistic_proxy_refuses_mismatched_or_out_of_range_labels_and_ids():
    src = [np.array([0, 1]), np.array([2])]
    with pytest.raises(InputError, match="one per instance"):
        lp.fit_logistic(src, np.array([0]), 3, 2, 1e-3)           # used to broadcast y
    with pytest.raises(InputError, match="labels in 0..1"):
        lp.fit_logistic(src, np.array([0, 2]), 3, 2, 1e-3)
    with pytest.raises(InputError, match="integer"):
        lp.fit_logistic(src, np.array([0.0, 1.0]), 3, 2, 1e-3)
    with pytest.raises(InputError, match="input ids must lie in"):
        lp.fit_logistic([np.array([0, 3])], np.array([0]), 3, 2, 1e-3)
    with pytest.raises(InputError, match="input ids must be integers"):
        lp.fit_logistic([np.array([0.0, 1.5])], np.array([0]), 3, 2, 1e-3)
    B = lp.fit_logistic(src, np.array([0, 1]), 3, 2, 1e-3)
    with pytest.raises(InputError, match="one per instance"):
        lp.accuracy(B, src, [0])                                   # used to give 0.5
    with pytest.raises(InputError, match="input ids must lie in"):
        lp.beta_log(B, [-1], [0])                                  # used to wrap around
    with pytest.raises(InputError, match="output ids must lie in"):
        lp.beta_log(B, [0], [2])
    assert lp.accuracy(B, src, np.array([0, 1])) == 1.0
    np.testing.assert_allclose(lp.beta_log(B, [0, 2], [1]),
                               np.exp(log_softmax(B[:, [0, 2]].T, axis=1))[:, [1]].T)


@pytest.mark.parametrize("y, phrase", [
    (np.array([0.0, 1.7]), "integer class labels"),                # was read as class 1
    (np.array([0, 4]), "labels in 0..3"), (np.array([0, 1, 1]), "one per instance")])
def test_torch_twin_refuses_bad_numpy_labels(tb, y, phrase):
    with pytest.raises(InputError, match=phrase):
        tb.value_and_grad("ha", S, L, y)


def test_torch_twin_refuses_float_and_mismatched_label_tensors(tb):
    import torch
    s, g = torch.zeros(2, 3), torch.zeros(2, 3, 4)
    with pytest.raises(InputError, match="integer class labels, got dtype torch.float32"):
        tb.loss("ha", s, g, torch.tensor([0.0, 1.7]))
    with pytest.raises(InputError, match="N = 2 integer class labels"):
        tb.loss("lv", s, g, torch.tensor([0, 1, 1]))


def test_torch_label_checks_trace_into_a_compiled_graph_and_under_vmap(tb):
    """The hot loops compile and vmap tb.loss: the checks read metadata only, no values."""
    import torch
    gen = torch.Generator().manual_seed(0)
    s, g = torch.randn(4, 5, 3, generator=gen), torch.randn(4, 5, 3, 2, generator=gen)
    y = torch.randint(0, 2, (4, 5), generator=gen)
    eager = torch.stack([tb.loss("lv", s[i], g[i], y[i]) for i in range(4)])
    mapped = torch.func.vmap(lambda a, b, t: tb.loss("lv", a, b, t))
    compiled = torch.compile(mapped, backend="eager", fullgraph=True)   # a break would raise
    torch.testing.assert_close(mapped(s, g, y), eager)
    torch.testing.assert_close(compiled(s, g, y), eager)


# --------------------------------------------------------------- M11: fcam.train arguments
@pytest.mark.parametrize("kwargs, phrase", [
    ({"batch_size": 0}, "batch_size must be an integer >= 1"),
    ({"batch_size": -2}, "batch_size must be an integer >= 1"),
    ({"batch_size": 2.5}, "batch_size must be an integer >= 1"),
    ({"batch_size": 100}, "batch_size must be at most N = 20"),
    ({"batch_size": 100, "shuffle": True}, "batch_size must be at most N = 20"),
    ({"lr": float("nan")}, "lr must be a finite number > 0"),
    ({"lr": -1}, "lr must be a finite number > 0"),
    ({"lr": 0.0}, "lr must be a finite number > 0"),
    ({"steps": -5}, "steps must be an integer >= 0"),
    ({"steps": 2.5}, "steps must be an integer >= 0"),
])
def test_fcam_train_refuses_bad_arguments(linear, kwargs, phrase):
    D, p = linear
    args = {"lr": 0.1, "steps": 3, **kwargs}
    with pytest.raises(InputError, match=phrase):
        fcam.train(p, D.X, D.y, "lv", **args)


def test_fcam_train_still_accepts_a_full_batch_and_numpy_integers(linear):
    D, p = linear
    full, h_full = fcam.train(p, D.X, D.y, "lv", lr=0.1, steps=3)
    same, h_same = fcam.train(p, D.X, D.y, "lv", lr=np.float32(0.1), steps=np.int64(3),
                              batch_size=20, shuffle=True)
    np.testing.assert_allclose(h_same, h_full, rtol=1e-6)         # one slice = the full batch


# --------------------------------------------------------------- L12: empty inputs
@pytest.mark.parametrize("call", [
    lambda: losses.loss("lv", np.zeros((0, 3)), np.zeros((0, 3, 4)), np.zeros(0, int)),
    lambda: losses.loss("ha", np.zeros((0, 3)), np.zeros((0, 3, 4)), np.zeros(0, int)),
    lambda: losses.loss_sa(np.zeros((0, 3)), np.zeros(0, int)),
])
def test_an_empty_batch_is_refused(call):
    with pytest.raises(InputError, match="empty batch"):
        call()


def test_attention_over_no_segments_is_refused():
    with pytest.raises(InputError, match="softmax over an empty axis"):
        losses.attention(np.zeros((2, 0)))


def test_torch_twin_refuses_an_empty_batch(tb):
    with pytest.raises(InputError, match="empty batch"):       # it returned nan
        tb.value_and_grad("lv", np.zeros((0, 3)), np.zeros((0, 3, 4)), np.zeros(0, int))


# --------------------------------------------------------------- L23, L24
def test_torch_fcam_promotes_float32_mosaics_against_float64_parameters(linear, tb):
    D, p = linear
    y = D.y
    v64, g64 = tb.fcam.loss_and_grad(p, D.X, y, "lv")
    v32, g32 = tb.fcam.loss_and_grad(p, D.X.astype(np.float32), y, "lv")
    core, _ = fcam.loss_and_grad(p, D.X.astype(np.float32), y, "lv")
    assert g32["W"].dtype == np.float64
    assert v32 == pytest.approx(core, rel=1e-12)
    assert v32 == pytest.approx(v64, rel=1e-6)


def test_torch_losses_name_a_numpy_input(tb):
    with pytest.raises(InputError, match="must be a floating-point torch tensor, got ndarray"):
        tb.loss("lv", S, L, Y)


def test_directional_check_refuses_mismatched_keys():
    params = {"W": np.ones((2, 2)), "u": np.ones(2)}
    with pytest.raises(InputError, match="grads and params must have the same keys"):
        gradcheck.directional_check(lambda p: 0.0, {"W": np.ones((2, 2))}, params)
