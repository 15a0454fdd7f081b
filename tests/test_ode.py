"""Theorems 1-2 (Eqs. (1)-(6)): right-hand sides, closed forms and simulated gradient descent."""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from minimal_attn import data, dynamics, fcam, ode

PARADIGMS = ("sa", "ha", "lv")


def _on_invariant_set(D, mu, nu):
    """Linear-FCAM parameters with w_k = mu (s_k - s_bar) and u = nu sum_k s_k."""
    S = D.S
    return {"W": mu * (S - S.mean(0)), "u": nu * S.sum(0)}


@pytest.mark.parametrize("paradigm", PARADIGMS)
@given(mu=st.floats(-2, 6), nu=st.floats(-3, 4), m=st.integers(2, 6), C=st.integers(2, 5))
def test_rhs_is_minus_projected_population_gradient(paradigm, mu, nu, m, C):
    D = data.exact_population(m, C, d=C + 3, n_base=2, seed=7)
    params = _on_invariant_set(D, mu, nu)
    value, grads = fcam.loss_and_grad(params, D.X, D.y, paradigm)
    # the exact population loss is the closed form of Section 4
    assert value == pytest.approx(
        ode.population_loss(paradigm, mu, ode.alpha_of(nu, m), C), rel=1e-10)
    M = D.S - D.S.mean(0)
    mu_dot = -np.sum(grads["W"] * M) / (C - 1)
    nu_dot = -grads["u"] @ D.S.mean(0)
    expected = ode.rhs(paradigm, mu, nu, m, C)
    assert mu_dot == pytest.approx(expected[0], rel=1e-8, abs=1e-12)
    assert nu_dot == pytest.approx(expected[1], rel=1e-8, abs=1e-12)
    # and the gradient has no component off the invariant set
    np.testing.assert_allclose(-grads["W"], mu_dot * M, atol=1e-12)
    np.testing.assert_allclose(-grads["u"], nu_dot * D.S.sum(0), atol=1e-12)


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_ode_matches_simulated_gradient_descent(paradigm):
    # the acceptance criterion: step 0.02, m = 5, C = 3, relative 1e-3 at t = 100
    times = [10.0, 50.0, 100.0]
    solved = ode.solve(paradigm, 5, 3, 100.0, t_eval=times)
    simulated = dynamics.simulate(paradigm, 5, 3, 100.0, lr=0.02, t_eval=times)
    for key in ("mu", "nu"):
        np.testing.assert_allclose(simulated[key][-1], solved[key][-1], rtol=1e-3)
        np.testing.assert_allclose(simulated[key], solved[key], rtol=2e-2)
    assert solved["mu"][-1] > 1 and solved["nu"][-1] > 1     # the flow really moved


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_fixed_alpha_simulation_matches_theorem1(paradigm):
    times = [5.0, 40.0]
    simulated = dynamics.simulate(paradigm, 4, 3, 40.0, lr=0.01, alpha=0.3, t_eval=times)
    closed = ode.theorem1_mu(paradigm, times, 0.3, 3)
    np.testing.assert_allclose(simulated["mu"], closed, rtol=2e-3)
    np.testing.assert_allclose(simulated["alpha"], 0.3)


@pytest.mark.parametrize("paradigm", PARADIGMS)
@pytest.mark.parametrize("alpha", [0.05, 0.4, 1.0])
def test_theorem1_is_theorem2_with_nu_frozen(paradigm, alpha):
    m, C = 6, 4
    nu = ode.nu_of(alpha, m)
    for mu in (0.0, 0.7, 3.0):
        frozen = ode.mu_dot(paradigm, mu, alpha, C)
        if alpha < 1:
            assert ode.rhs(paradigm, mu, nu, m, C)[0] == pytest.approx(frozen, rel=1e-12)
        # the closed form t(mu) is the integral of 1/mu_dot
        h = 1e-5
        slope = (ode.theorem1_time(paradigm, mu + h, alpha, C)
                 - ode.theorem1_time(paradigm, max(mu - h, 0), alpha, C)) / (h + min(h, mu))
        assert slope == pytest.approx(1.0 / frozen, rel=1e-5)
    t = np.array([0.5, 5.0, 60.0])
    solved = ode.solve(paradigm, m, C, 60.0, alpha=alpha, t_eval=t)
    np.testing.assert_allclose(solved["mu"], ode.theorem1_mu(paradigm, t, alpha, C), rtol=1e-7)
    np.testing.assert_allclose(solved["alpha"], alpha)


def test_zero_focus_learns_nothing():
    for p in PARADIGMS:
        assert np.all(ode.solve(p, 5, 3, 10.0, alpha=0.0)["mu"] == 0)
        assert np.all(ode.theorem1_mu(p, [1.0, 10.0], 0.0, 3) == 0)


def test_soft_attention_focus_moves_first_hard_attention_later():
    # the paper's signature (Section 4): early on SA's focus improves faster than HA's,
    # later HA overtakes and SA splutters (LV sits in between at the end)
    early = {p: ode.solve(p, 5, 3, 20.0, t_eval=[20.0])["nu"][-1] for p in PARADIGMS}
    assert early["sa"] > early["ha"] > 0
    late = {p: ode.solve(p, 5, 3, 200.0, t_eval=[200.0])["alpha"][-1] for p in PARADIGMS}
    assert late["ha"] > late["lv"] > late["sa"]


def test_beta_alpha_stable_for_large_arguments():
    assert ode.beta_of(1e4, 20) == 1.0 and ode.beta_of(-1e4, 20) == 0.0
    assert ode.alpha_of(0.0, 5) == pytest.approx(0.2)
    assert ode.nu_of(ode.alpha_of(1.3, 7), 7) == pytest.approx(1.3)


# ----------------------------------------------------------------- the paper's printed forms
def _printed_rhs(paradigm, mu, nu, m, C):
    """V&R Eqs. (1)-(6) exactly as printed in Theorems 1-2 (mpmath, so no overflow), at 40
    digits beyond what they cancel: alpha - alpha^2 at alpha ~ 1 costs about nu / ln 10
    digits, log(C beta) and beta/Z - 1 at mu ~ 0 about -log10|mu| (at float64's 53 bits
    the reference itself would lose up to all of its digits)."""
    mp = pytest.importorskip("mpmath")
    lost = max(0.0, abs(nu) / 2.3) + (max(0.0, -np.log10(abs(mu))) if mu else 0.0)
    with mp.workdps(40 + int(lost)):
        return _printed_rhs_mp(mp, paradigm, mp.mpf(mu), mp.mpf(nu), m, C)


def _printed_rhs_mp(mp, paradigm, mu, nu, m, C):
    alpha = mp.exp(nu) / (mp.exp(nu) + m - 1)
    beta = mp.exp(mu) / (mp.exp(mu) + C - 1)
    Z = alpha * beta + (1 - alpha) / C
    if paradigm == "sa":
        mu_dot = alpha / (mp.exp(alpha * mu) + C - 1)                                  # (1)
        nu_dot = mu * (C - 1) * (alpha - alpha**2) / (C * (mp.exp(alpha * mu) + C - 1))  # (4)
    elif paradigm == "ha":
        mu_dot = alpha * beta / mp.exp(mu)                                               # (2)
        nu_dot = mp.log(C * beta) / C * (alpha - alpha**2)                               # (5)
    else:
        mu_dot = alpha * beta**2 / (Z * mp.exp(mu))                                      # (3)
        nu_dot = alpha / C * (beta / Z - 1)                                              # (6)
    if mu == 0:           # beta = 1/C: log(C beta) = 0 and beta/Z = 1 exactly, not to 40 digits
        nu_dot = 0
    return float(mu_dot), float(nu_dot)


@pytest.mark.parametrize("paradigm", PARADIGMS)
@given(mu=st.floats(-5, 30), nu=st.floats(-5, 15), m=st.integers(2, 30), C=st.integers(2, 30))
@example(mu=1.0, nu=15.0, m=2, C=2)    # 1 - alpha = 3e-7: alpha's rounding is 2e-10 of it
@example(mu=1e-10, nu=0.0, m=2, C=2)   # log(C beta) = 5e-11: log C + log beta cancels
@example(mu=-3e-7, nu=1.0, m=5, C=20)  # beta - 1/C = -1.4e-8
def test_rhs_is_eqs_1_to_6_as_printed(paradigm, mu, nu, m, C):
    """Every right-hand side to a few ulps of its own size, even where nu_dot vanishes at
    mu = 0 (ode._log_c_beta, ode._beta_minus_inv_c); 1e-300: a result below the normal
    range has no relative digits (a subnormal mu)."""
    got = ode.rhs(paradigm, mu, nu, m, C)
    want_mu, want_nu = _printed_rhs(paradigm, mu, nu, m, C)
    assert got[0] == pytest.approx(want_mu, rel=1e-12, abs=1e-300)
    assert got[1] == pytest.approx(want_nu, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_theorem1_mu_inverts_theorem1_time(paradigm):
    t = np.array([0.0, 1e-3, 0.5, 7.0, 123.0, 5000.0])
    for alpha in (0.05, 0.3, 1.0):
        mu = ode.theorem1_mu(paradigm, t, alpha, 20)
        assert np.all(np.diff(mu) > 0) and mu[0] == 0
        np.testing.assert_allclose(ode.theorem1_time(paradigm, mu, alpha, 20), t, rtol=1e-12,
                                   atol=1e-14)


# ------------------------------------------------------------ extreme times and foci
def test_nu_keeps_growing_after_alpha_rounds_to_one():
    """nu = 40 puts alpha(nu) within 1e-17 of 1: nu_dot (V&R Eq. (5)) is still
    alpha (1 - alpha)(log C + log beta)/C with 1 - alpha = (m-1)/(e^nu + m - 1) > 0, so the
    flow's nu keeps rising (like log t) instead of freezing near 36.7."""
    mu, nu, m, C = 30.0, 40.0, 2, 2
    one_minus_alpha = (m - 1) / (np.exp(nu) + m - 1)
    beta = np.exp(mu) / (np.exp(mu) + C - 1)
    expected = (1 - one_minus_alpha) * one_minus_alpha * (np.log(C) + np.log(beta)) / C
    assert ode.rhs("ha", mu, nu, m, C)[1] == pytest.approx(expected, rel=1e-12, abs=0)
    nu_t = ode.solve("ha", m, C, 1e40, t_eval=np.array([1e18, 1e20, 1e40]))["nu"]
    assert np.all(np.diff(nu_t) > 1.0)


def test_theorem1_at_the_ends_of_the_focus():
    # alpha = 1: LV's flow is HA's (V&R Eq. (3) with Z = beta is Eq. (2)), even past e^709
    assert ode.theorem1_mu("lv", 1e300, 1.0, 2) == pytest.approx(
        ode.theorem1_mu("ha", 1e300, 1.0, 2), rel=1e-12)
    assert ode.theorem1_mu("ha", 1e300, 1.0, 2)[0] == pytest.approx(np.log(1e300), rel=1e-9)
    # tiny alpha: t_SA(1) = expm1(alpha)/alpha^2 + 1/alpha = 2e300 by hand (C = 2); mu(t)
    # of HA at C = 10 is t alpha / 10 for small mu (expm1(mu) + 9 mu ~ 10 mu)
    assert ode.theorem1_time("sa", 1.0, 1e-300, 2) == pytest.approx(2e300, rel=1e-12)
    assert ode.theorem1_mu("ha", 1e6, 1e-300, 10)[0] == pytest.approx(1e-295, rel=1e-9, abs=0)


def test_population_losses_agree_at_full_focus_to_the_last_digit():
    """alpha = 1: every paradigm's loss is -log beta(mu) = log1p((C-1) e^-mu), 4e-18 at
    mu = 40 (by hand), which the LV loss must not round to 0."""
    expected = np.log1p(np.exp(-40.0))
    for paradigm in ("sa", "ha", "lv"):
        assert ode.population_loss(paradigm, 40.0, 1.0, 2) == pytest.approx(expected, rel=1e-12,
                                                                            abs=0)
