"""Fixed-focus analyses, Sections 3.1-3.3 (Figures 2 and 3), against Theorem 1's closed forms."""

import numpy as np
import pytest

from minimal_attn import data, fcam, losses, ode
from minimal_attn import fixed_focus as ff
from minimal_attn.errors import InputError
from minimal_attn.losses import LOSS_PARADIGMS

ALPHAS = [0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0]
C = M = 20


def per_alpha_fcam(X, y, W, log_attention, paradigm):
    """The reference model of Section 3.1: fcam.loss_and_grad once per alpha."""
    return ff.ReferenceFixedFocusModel(X, y, W.shape[1]).loss_and_grad({"W": W}, log_attention,
                                                                      paradigm)


DATASETS = {
    "exact": lambda: data.exact_population(4, 3, n_base=2, seed=1),
    "sampled": lambda: data.linear_orthogonal(25, 5, 4, d=7, seed=2),
    "gaussian": lambda: data.gaussian_mosaics(20, 3, 3, d=5, seed=3),
}


# ------------------------------------------------------------ the vectorised linear model
@pytest.mark.parametrize("paradigm", LOSS_PARADIGMS)
@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_fast_model_equals_reference_model(paradigm, dataset):
    """Losses and dW of the compressed model == the plain per-alpha model (incl. alpha 0, 1)."""
    d = DATASETS[dataset]()
    alphas = [0.0, 0.3, 0.7, 1.0]
    model = ff.LinearFixedFocusModel(d.X, d.y, int(d.y.max()) + 1)
    la = ff._log_attention(d.z, d.X.shape[1], alphas)
    W = np.random.default_rng(0).standard_normal((len(alphas), model.n_classes, d.X.shape[2]))
    value, dW = model.loss_and_grad({"W": W}, la, paradigm)
    ref_value, ref_dW = per_alpha_fcam(d.X, d.y, W, la, paradigm)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dW, ref_dW, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(model.losses({"W": W}, la, paradigm), ref_value, rtol=1e-12)


@pytest.mark.parametrize("paradigm", ["ha", "lv"])
def test_fast_model_keeps_a_saturated_classifiers_gradient(paradigm):
    """All the focus on the foreground (alpha = 1) and the classifier sure of its label
    (margin 40): the gradient is of size e^-40 and must keep its digits, where sigma_y - 1
    written so rounds to 0 (at alpha < 1 the backgrounds' O(1/m) terms cancel to e^-40 in
    exact arithmetic, so rounding decides there for any order of summation)."""
    d = DATASETS["exact"]()
    fg = d.X[np.arange(len(d.y)), d.z]                                # (N, d) foregrounds
    C = int(d.y.max()) + 1
    W = np.stack([fg[d.y == c].mean(axis=0) for c in range(C)])
    W = (40.0 * W / np.linalg.norm(W, axis=1, keepdims=True))[None]   # (1, C, d)
    la = ff._log_attention(d.z, d.X.shape[1], [1.0])
    value, dW = ff.LinearFixedFocusModel(d.X, d.y, C).loss_and_grad({"W": W}, la, paradigm)
    ref_value, ref_dW = per_alpha_fcam(d.X, d.y, W, la, paradigm)
    assert 0 < np.abs(ref_dW).max() < 1e-15                           # e^-40 scale
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    assert np.abs(dW - ref_dW).max() <= 1e-9 * np.abs(ref_dW).max()


@pytest.mark.parametrize("paradigm", LOSS_PARADIGMS)
def test_any_attention_and_in_place_changes(paradigm):
    """Any (writable) log-attention works, and changing it in place is noticed."""
    d = DATASETS["sampled"]()
    rng = np.random.default_rng(5)
    la = losses.log_softmax(rng.standard_normal((2,) + d.z.shape + (d.X.shape[1],)))
    model = ff.LinearFixedFocusModel(d.X, d.y, 4)
    W = rng.standard_normal((2, 4, d.X.shape[2]))
    first = model.losses({"W": W}, la, paradigm)
    np.testing.assert_allclose(first, per_alpha_fcam(d.X, d.y, W, la, paradigm)[0], rtol=1e-12)
    la[:] = la[::-1]                                   # swap the two attentions in place
    np.testing.assert_allclose(model.losses({"W": W}, la, paradigm),
                               per_alpha_fcam(d.X, d.y, W, la, paradigm)[0], rtol=1e-12)


def test_exact_population_compresses_to_2c_instances():
    """Under a fixed focus, moving the foreground only reorders segments: 2 C distinct mosaics."""
    d = data.exact_population(M, C)
    model = ff.LinearFixedFocusModel(d.X, d.y, C)
    compiled = model._compile(ff._log_attention(d.z, M, ALPHAS))
    assert compiled["weight"].shape == (2 * C,)
    np.testing.assert_allclose(compiled["weight"].sum(), 1.0)
    sampled = data.linear_orthogonal(30, 4, 3, seed=0)
    sampled_model = ff.LinearFixedFocusModel(sampled.X, sampled.y, 3)
    assert sampled_model._compile(ff._log_attention(sampled.z, 4, [0.5]))["weight"].size == 30


# ------------------------------------------------------------ the losses of Section 3.1
@pytest.mark.parametrize("paradigm", LOSS_PARADIGMS)
def test_fixed_focus_loss_is_fcam_loss_with_fixed_attention(paradigm):
    d = DATASETS["gaussian"]()
    W = np.random.default_rng(1).standard_normal((3, 5))
    for alpha in (0.0, 0.25, 1.0):
        got = ff.fixed_focus_loss(paradigm, lambda x: x @ W.T, d.X, d.y, d.z, alpha)
        ref = fcam.loss({"W": W, "u": np.zeros(5)}, d.X, d.y, paradigm,
                        data.fixed_log_attention(d.z, 3, alpha))
        assert got == pytest.approx(ref, rel=1e-12)


def test_fixed_focus_loss_ha_background_term_has_a_minus_sign():
    """Section 3.1's L^{FF,HA} printed +(1-alpha)/(m-1) sum log sigma; a log-loss needs -."""
    d = DATASETS["gaussian"]()
    W = np.random.default_rng(2).standard_normal((3, 5))
    alpha, m = 0.3, d.X.shape[1]
    logp = losses.log_softmax(d.X @ W.T)                                  # (N, m, C)
    log_sigma_y = np.take_along_axis(logp, d.y[:, None, None], axis=2)[..., 0]
    fg = log_sigma_y[np.arange(d.y.size), d.z]
    bg = log_sigma_y.sum(axis=1) - fg
    expected = np.mean(-alpha * fg - (1 - alpha) / (m - 1) * bg)
    got = ff.fixed_focus_loss("ha", lambda x: x @ W.T, d.X, d.y, d.z, alpha)
    assert got == pytest.approx(expected, rel=1e-12) and got > 0


def test_fixed_focus_loss_sa_on_image_shaped_segments():
    """SA averages whole segments (any trailing shape), as a CNN would see them."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6, 4, 2, 3))                                 # (N, m, 2, 3)
    y, z = rng.integers(3, size=6), rng.integers(4, size=6)
    W = rng.standard_normal((3, 6))
    got = ff.fixed_focus_loss("sa", lambda x: x.reshape(x.shape[0], -1) @ W.T, X, y, z, 0.6)
    flat = ff.fixed_focus_loss("sa", lambda x: x @ W.T, X.reshape(6, 4, 6), y, z, 0.6)
    assert got == pytest.approx(flat, rel=1e-12)


@pytest.mark.parametrize("paradigm", LOSS_PARADIGMS)
@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.7, 1.0])
def test_population_closed_forms_on_the_invariant_set(paradigm, alpha):
    """On the exact population with W = mu (S - s_bar) the data loss IS the closed form."""
    m, n_classes = 5, 4
    d = data.exact_population(m, n_classes, seed=4)
    for mu in (0.0, 0.7, 3.0):
        W = mu * (d.S - d.S.mean(axis=0))
        got = ff.fixed_focus_loss(paradigm, lambda x, W=W: x @ W.T, d.X, d.y, d.z, alpha)
        assert got == pytest.approx(float(ode.population_loss(paradigm, mu, alpha, n_classes)),
                                    rel=1e-10, abs=1e-12)


def test_fixed_focus_loss_rejects_hybrid_and_bad_alpha():
    d = DATASETS["gaussian"]()
    with pytest.raises(InputError, match="paradigm"):
        ff.fixed_focus_loss("hybrid", lambda x: x[..., :3], d.X, d.y, d.z, 0.5)
    with pytest.raises(InputError, match="alpha"):
        ff.fixed_focus_loss("sa", lambda x: x[..., :3], d.X, d.y, d.z, 1.5)


# ------------------------------------------------------------ closed forms (Theorem 1)
# ------------------------------------------------------------ the analysis protocol
class CountingModel:
    """A toy fixed-focus model: loss = (focus-weighted mean of z) / (1 + epochs)."""

    def init(self, alphas):
        return {"epochs": 0}

    def losses(self, state, log_attention, paradigm):
        assert not log_attention.flags.writeable
        return np.exp(log_attention)[:, :, 0].mean(axis=1) / (1 + state["epochs"])

    def step(self, state, log_attention, paradigm, lr):
        return {"epochs": state["epochs"] + 1}


def test_curves_follow_the_protocol():
    z = np.array([0, 0, 1])
    calls = []
    res = ff.fixed_focus_curves(CountingModel(), z, 3, [0.2, 0.995], ["ha", "lv"], epochs=4,
                                lr=1.0, delta=0.01,
                                callback=lambda p, k: calls.append((p, k)))
    assert list(res) == ["ha", "lv"] and list(res["ha"]) == [0.2, 0.995]
    assert calls == [(p, k) for p in ("ha", "lv") for k in range(5)]
    c = res["lv"][0.2]
    np.testing.assert_array_equal(c["epoch"], np.arange(5))
    # focus on segment 0 is alpha for 2 of 3 mosaics, (1 - alpha)/2 for the third

    def weight(a):
        return (2 * a + (1 - a) / 2) / 3

    np.testing.assert_allclose(c["loss"], weight(0.2) / np.arange(1, 6))
    np.testing.assert_allclose(c["incentive"], (weight(0.2) - weight(0.21)) / np.arange(1, 6))
    # alpha' = min(alpha + delta, 1)
    np.testing.assert_allclose(res["ha"][0.995]["incentive"],
                               (weight(0.995) - weight(1.0)) / np.arange(1, 6))


def test_curves_reject_bad_input():
    with pytest.raises(InputError):
        ff.fixed_focus_curves(CountingModel(), np.zeros(2, int), 3, [1.2], ["sa"], 2, 1.0)
    with pytest.raises(InputError, match="paradigm"):
        ff.fixed_focus_curves(CountingModel(), np.zeros(2, int), 3, [0.5], ["hybrid"], 2, 1.0)
    with pytest.raises(InputError):
        ff.fixed_focus_curves(CountingModel(), np.zeros(2, int), 3, [0.5], ["sa"], 2, -1.0)


# ------------------------------------------------------------ simulated vs closed form
def max_rel_error(paradigm, lr, epochs, alphas=(0.1, 0.4, 1.0), delta=0.01):
    d = data.exact_population(M, C)
    model = ff.LinearFixedFocusModel(d.X, d.y, C)
    sim = ff.fixed_focus_curves(model, d.z, M, alphas, [paradigm], epochs, lr, delta)[paradigm]
    exact = ff.closed_form_curves(paradigm, alphas, epochs, lr, C, delta)
    loss_err = max(np.max(np.abs(sim[a]["loss"] / exact[a]["loss_closed_form"] - 1))
                   for a in alphas)
    inc_err = max(np.max(np.abs(sim[a]["incentive"] - exact[a]["incentive_closed_form"]))
                  for a in alphas)
    return loss_err, inc_err


@pytest.mark.parametrize("paradigm", LOSS_PARADIGMS)
def test_simulated_curves_match_theorem1(paradigm):
    """Gradient descent on the exact population is Euler on Theorem 1's flow: error O(lr)."""
    fine_loss, fine_inc = max_rel_error(paradigm, lr=0.25, epochs=800)     # t up to 200
    coarse_loss, _ = max_rel_error(paradigm, lr=0.5, epochs=400)
    assert fine_loss < 0.01 * 0.25 and fine_inc < 1e-4
    assert 1.95 < coarse_loss / fine_loss < 2.05                          # first order in lr


def test_larger_delta_incentive_matches_closed_form():
    _, inc_err = max_rel_error("lv", lr=0.5, epochs=100, delta=0.2)
    assert inc_err < 1e-3


# ------------------------------------------------------------ the paper's observations
@pytest.fixture(scope="module")
def figure():
    """The default figure (C = m = 20, T = 1000 epochs of step 5): simulated and exact."""
    d = data.exact_population(M, C)
    model = ff.LinearFixedFocusModel(d.X, d.y, C)
    res = ff.fixed_focus_curves(model, d.z, M, ALPHAS, LOSS_PARADIGMS, 1000, 5.0)
    for p in res:
        for a, extra in ff.closed_form_curves(p, ALPHAS, 1000, 5.0, C).items():
            res[p][a].update(extra)
    return res


def stack(figure, paradigm, key, alphas=ALPHAS):
    return np.stack([figure[paradigm][a][key] for a in alphas])           # (A, T + 1)


def test_default_figure_is_accurate(figure):
    for p in LOSS_PARADIGMS:
        rel = np.abs(stack(figure, p, "loss") / stack(figure, p, "loss_closed_form") - 1)
        assert rel.max() < 0.04                     # the Euler error of a step of 5
        inc = np.abs(stack(figure, p, "incentive") - stack(figure, p, "incentive_closed_form"))
        assert inc.max() < 1e-3


@pytest.mark.parametrize("key", ["loss", "loss_closed_form"])
def test_sa_loss_tends_to_zero_for_moderate_alpha(figure, key):
    loss = stack(figure, "sa", key)
    assert np.all(np.diff(loss, axis=1) <= 0)
    final = dict(zip(ALPHAS, loss[:, -1]))
    assert final[0.2] < 0.2 and all(final[a] < 0.03 for a in (0.4, 0.6, 0.8, 1.0))
    assert final[0.05] > 2.0                        # tiny alpha: barely learns in this time


@pytest.mark.parametrize("key", ["loss", "loss_closed_form"])
def test_ha_and_lv_losses_flatten_above_zero(figure, key):
    alphas = np.array(ALPHAS[:-1])                  # alpha < 1
    limits = {"ha": (1 - alphas) * np.log(C), "lv": -np.log(alphas + (1 - alphas) / C)}
    for p, limit in limits.items():
        loss = stack(figure, p, key, list(alphas))
        assert np.all(limit > 0.2)
        assert np.all(loss[:, -1] >= limit)
        assert np.all(loss[:, -1] - limit < 0.01)   # at the plateau, from above
        flat = (loss[:, -200] - loss[:, -1]) / loss[:, -1]
        assert flat.max() < 0.01                    # flat over the last fifth ...
        # ... while SA at the same alpha >= 0.2 keeps falling, far below
        sa = stack(figure, "sa", key, list(alphas))
        assert np.all((sa[2:, -200] - sa[2:, -1]) / sa[2:, -1] > 0.1)
        assert np.all(sa[2:, -1] < 0.2 * loss[2:, -1])


def test_lv_loss_below_ha_after_the_first_epoch(figure):
    ha, lv = stack(figure, "ha", "loss"), stack(figure, "lv", "loss")
    np.testing.assert_allclose(ha[:, 0], np.log(C))
    np.testing.assert_allclose(lv[:, 0], np.log(C))
    assert np.all(lv[:-1, 1:] < ha[:-1, 1:])        # alpha < 1: strictly below (Jensen)
    np.testing.assert_allclose(lv[-1], ha[-1], rtol=1e-9)   # alpha = 1: the same loss


@pytest.mark.parametrize("key", ["incentive", "incentive_closed_form"])
def test_sa_incentive_falls_with_alpha_towards_zero(figure, key):
    inc = stack(figure, "sa", key)
    late = inc[2:, -1]                              # alpha = 0.2, 0.4, ..., 1.0
    assert np.all(np.diff(late) < 0)
    assert np.all(late[1:] < 0.005)                 # alpha >= 0.4: close to 0
    assert np.all(np.diff(inc[2:-1, -200:], axis=1) < 0)   # and still falling with t
    assert inc[1, -1] > 0.1                         # small alpha: a large incentive


@pytest.mark.parametrize("key", ["incentive", "incentive_closed_form"])
def test_ha_incentive_rises_with_alpha_and_stays_small(figure, key):
    inc = stack(figure, "ha", key, ALPHAS[:-1])     # alpha' = alpha + 0.01 < 1
    np.testing.assert_allclose(inc[:, 0], 0.0, atol=1e-12)
    assert np.all(np.diff(inc[:, 1:], axis=0) > 0)  # rises with alpha at every epoch
    assert inc.max() <= 0.01 * np.log(C) + 1e-9      # = delta alpha log(C beta) <= delta log C
    for small in (0, 1):                            # alpha = 0.05, 0.1: below SA and LV
        for other in ("sa", "lv"):
            assert inc[small, -1] < 0.5 * stack(figure, other, key)[small, -1]
    early = inc[0, :100]                            # and grows slowly for small alpha
    assert early.max() < 0.5 * inc[-1, :100].max()


@pytest.mark.parametrize("key", ["incentive", "incentive_closed_form"])
def test_lv_incentive_falls_with_alpha_but_stays_away_from_zero(figure, key):
    inc = stack(figure, "lv", key, ALPHAS[:-1])
    late = inc[:, -1]
    assert np.all(np.diff(late) < 0)
    # limit beta -> 1: log((alpha' + (1 - alpha')/C) / (alpha + (1 - alpha)/C)) > 0
    alphas = np.array(ALPHAS[:-1])
    bound = np.log((alphas + 0.01 + (0.99 - alphas) / C) / (alphas + (1 - alphas) / C))
    np.testing.assert_allclose(late, bound, rtol=0.02)
    assert late.min() > 0.01
    sa_late = stack(figure, "sa", key, ALPHAS[:-1])[:, -1]
    assert np.all(late[3:] > 5 * sa_late[3:])       # alpha >= 0.4: far above SA's
