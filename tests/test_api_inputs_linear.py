"""Input checks of the linear-setting API (audit findings H2, M6-M8, M10, L14-L17, L21):
every refusal is a one-line InputError naming the problem, and valid inputs (NumPy scalars,
comma lists, single values) give the same numbers as their plain Python spelling."""

import numpy as np
import pytest

from minimal_attn import data, dynamics, ode, saif
from minimal_attn import fixed_focus as ff
from minimal_attn.errors import InputError
from minimal_attn.experiments.fixed_focus import FixedFocusConfig, run_fixed_focus
from minimal_attn.experiments.ode import OdeConfig, run_ode, write_ode


def refused(match, fn, *args, **kwargs):
    """Assert ``fn(*args, **kwargs)`` raises a one-line InputError matching ``match``."""
    with pytest.raises(InputError, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def population():
    D = data.exact_population(m=3, n_classes=3)
    return D, ff.LinearFixedFocusModel(D.X, D.y, 3)


# ------------------------------------------------------------ H2, M7: closed forms
@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_theorem1_mu_refuses_alpha_outside_0_1(alpha):
    # alpha < 0 used to loop forever looking for a bracket; > 1 and NaN gave numbers
    refused("alpha must lie in", ode.theorem1_mu, "ha", [1.0], alpha, 3)


def test_closed_form_curves_refuses_negative_alpha():
    refused("alphas must lie in", ff.closed_form_curves, "sa", [-0.1], 5, 0.1, 3)


@pytest.mark.parametrize("fn, args", [
    (ode.theorem1_mu, ("lv", [1.0, 2.0], 0.5, 1)),
    (ode.theorem1_mu, ("lv", [1.0, 2.0], 0.5, 0)),
    (ode.population_loss, ("ha", 1.0, 0.5, 1)),
    (ff.closed_form_curves, ("ha", [0.5], 3, 0.1, 1)),
])
def test_closed_forms_refuse_fewer_than_two_classes(fn, args):
    refused(r"C \(classes\) must be an integer >= 2", fn, *args)


def test_closed_forms_refuse_bad_alpha_lr_epochs():
    refused("alpha must lie in", ode.population_loss, "lv", 1.0, 1.5, 3)
    refused("alphas must lie in", ff.closed_form_curves, "lv", [1.5], 3, 0.1, 3)
    refused("lr must be a finite number > 0", ff.closed_form_curves, "ha", [0.5], 3,
            float("nan"), 3)
    refused("epochs must be an integer >= 0", ff.closed_form_curves, "ha", [0.5], -3, 0.1, 3)


def test_theorem1_mu_refuses_nan_times_and_answers_inf():
    refused("t must hold times", ode.theorem1_mu, "lv", [1.0, float("nan")], 0.5, 3)
    mu = ode.theorem1_mu("ha", [1.0, np.inf], 0.5, 3)
    assert mu[1] == np.inf and mu[0] == ode.theorem1_mu("ha", [1.0], 0.5, 3)[0]


def test_fixed_log_attention_refuses_alpha_and_z_out_of_range():
    refused("alpha must lie in", data.fixed_log_attention, np.array([0, 1]), 3, 1.5)
    refused(r"z must hold foreground positions in 0\.\.2", data.fixed_log_attention,
            np.array([5]), 3, 0.9)
    refused("integer foreground positions", data.fixed_log_attention, np.array([0.5]), 3, 0.9)


def test_fixed_focus_curves_refuses_z_out_of_range(population):
    D, model = population
    refused("z must hold foreground positions", ff.fixed_focus_curves, model, D.z + 3, 3,
            [0.5], epochs=1)


# ------------------------------------------------------------ M6: NumPy scalars
def test_numpy_scalar_alpha_gives_the_same_numbers(population):
    t = [0.5, 2.0, 30.0]
    for a in (np.float32(0.5), np.array(0.5), np.float64(0.5)):
        assert np.array_equal(ode.theorem1_mu("lv", t, a, 3), ode.theorem1_mu("lv", t, 0.5, 3))
        assert ode.population_loss("sa", 1.5, a, 3) == ode.population_loss("sa", 1.5, 0.5, 3)
        assert np.array_equal(ode.solve("sa", 3, 3, 1.0, alpha=a)["mu"],
                              ode.solve("sa", 3, 3, 1.0, alpha=0.5)["mu"])
    sim = dynamics.simulate("lv", 3, 3, 0.1, alpha=np.float32(0.5))
    assert np.array_equal(sim["mu"], dynamics.simulate("lv", 3, 3, 0.1, alpha=0.5)["mu"])
    D, model = population
    curves = ff.fixed_focus_curves(model, D.z, 3, np.array([0.25, 0.5], np.float32), epochs=2)
    plain = ff.fixed_focus_curves(model, D.z, 3, [0.25, 0.5], epochs=2)
    assert np.array_equal(curves["lv"][0.25]["loss"], plain["lv"][0.25]["loss"])
    r = run_ode(OdeConfig(paradigms=("lv",), m=3, n_classes=3, t_max=1, alpha=np.float32(0.5)))
    assert r[0]["alpha"] == 0.5 and type(r[0]["alpha"]) is float


def test_alpha_of_the_wrong_type_is_named():
    refused("must be a number in", ode.theorem1_mu, "sa", [1.0], "0.5", 3)
    refused("must be a number in", run_fixed_focus,
            FixedFocusConfig(m=3, n_classes=3, epochs=1, lr=0.1, alphas=[True]))


# ------------------------------------------------------------ M8: t_eval
def test_simulate_extends_to_a_time_past_t_max_like_solve():
    sim = dynamics.simulate("lv", 3, 3, 0.1, lr=0.02, t_eval=[0, 0.5])
    np.testing.assert_allclose(sim["t"], [0.0, 0.5])
    longer = dynamics.simulate("lv", 3, 3, 0.5, lr=0.02, t_eval=[0, 0.5])
    assert np.array_equal(sim["mu"], longer["mu"])
    assert ode.solve("lv", 3, 3, 0.1, t_eval=[0, 0.5])["t"][-1] == 0.5


@pytest.mark.parametrize("t_eval, match", [
    ([-0.1, 0.04], "finite numbers >= 0"),
    ([0, float("nan")], "finite numbers >= 0"),
    ([0.04, 0.02], "must increase"),
    ([], "at least one time"),
    ("0,1", "must be numbers"),
])
def test_bad_t_eval_is_refused_by_solve_and_simulate(t_eval, match):
    refused(match, dynamics.simulate, "lv", 3, 3, 0.1, lr=0.02, t_eval=t_eval)
    refused(match, ode.solve, "lv", 3, 3, 0.1, t_eval=t_eval)


def test_solve_refuses_zero_points():
    refused("n_points must be an integer >= 1", ode.solve, "sa", 3, 3, 1.0, n_points=0)


def test_run_ode_takes_an_array_or_one_number_as_t_eval():
    base = dict(paradigms=("lv",), m=5, n_classes=3, t_max=1)
    r = run_ode(OdeConfig(**base, t_eval=np.linspace(0, 1, 5)))
    np.testing.assert_allclose(r[0]["curves"]["lv"]["t"], np.linspace(0, 1, 5))
    one = run_ode(OdeConfig(**base, t_eval=0.5, simulate=True))[0]["curves"]["lv"]
    listed = run_ode(OdeConfig(**base, t_eval=[0.5], simulate=True))[0]["curves"]["lv"]
    assert one["t"].tolist() == [0.5] and one["mu"][0] == listed["mu"][0]
    assert one["simulated"]["mu"][0] == listed["simulated"]["mu"][0]


# ------------------------------------------------------------ M10, L17: paradigm lists
def test_run_ode_canonicalises_paradigms_and_writes(tmp_path):
    r = run_ode(OdeConfig(paradigms=("SA",), m=3, n_classes=3, t_max=1))
    assert list(r[0]["curves"]) == ["sa"]
    assert "ode_sa.csv" in write_ode(r, tmp_path / "ode")
    lower = run_ode(OdeConfig(paradigms=("sa",), m=3, n_classes=3, t_max=1))
    assert np.array_equal(r[0]["curves"]["sa"]["mu"], lower[0]["curves"]["sa"]["mu"])


def test_run_ode_refuses_a_paradigm_named_twice():
    refused("once each", run_ode, OdeConfig(paradigms=("sa", "SA"), m=3, n_classes=3, t_max=1))


def test_a_plain_string_is_a_comma_list_of_paradigms(population):
    r = run_ode(OdeConfig(paradigms="lv", m=3, n_classes=3, t_max=1))
    assert list(r[0]["curves"]) == ["lv"]
    both = run_ode(OdeConfig(paradigms="sa,LV", m=3, n_classes=3, t_max=1))
    assert list(both[0]["curves"]) == ["sa", "lv"]
    every = run_ode(OdeConfig(paradigms="all", m=3, n_classes=3, t_max=1))
    assert list(every[0]["curves"]) == ["sa", "ha", "lv"]
    D, model = population
    assert list(ff.fixed_focus_curves(model, D.z, 3, [0.5], paradigms="sa", epochs=1)) == ["sa"]


def test_alphas_as_a_comma_string_or_one_number():
    base = dict(m=4, n_classes=3, epochs=2, lr=0.1)
    listed = run_fixed_focus(FixedFocusConfig(**base, alphas=("0.2", "0.5")))
    text = run_fixed_focus(FixedFocusConfig(**base, alphas="0.2,0.5"))
    assert list(text["sa"]) == ["0.2", "0.5"]
    assert np.array_equal(text["sa"]["0.5"]["loss"], listed["sa"]["0.5"]["loss"])
    one = run_fixed_focus(FixedFocusConfig(**base, alphas=0.5, paradigms="lv"))
    assert list(one) == ["lv"] and list(one["lv"]) == ["0.5"]
    assert np.array_equal(one["lv"]["0.5"]["loss"], listed["lv"]["0.5"]["loss"])
    refused("comma-separated", run_fixed_focus, FixedFocusConfig(**base, alphas="0.2,x"))
    exact = ff.closed_form_curves("HA", 0.5, 3, 0.1, 3)
    assert np.array_equal(exact[0.5]["loss_closed_form"],
                          ff.closed_form_curves("ha", [0.5], 3, 0.1, 3)[0.5]["loss_closed_form"])


def test_fixed_focus_curves_takes_one_alpha(population):
    D, model = population
    one = ff.fixed_focus_curves(model, D.z, 3, 0.5, epochs=1)
    assert list(one["sa"]) == [0.5]


# ------------------------------------------------------------ L15: ode helpers
def test_rhs_helpers_take_case_variants_and_refuse_unknown_names():
    assert ode.mu_dot("SA", 1.0, 0.5, 3) == ode.mu_dot("sa", 1.0, 0.5, 3)
    assert ode.nu_dot("LV", 1.0, 0.5, 3) == ode.nu_dot("lv", 1.0, 0.5, 3)
    assert ode.rhs("HA", 1.0, 0.2, 4, 3) == ode.rhs("ha", 1.0, 0.2, 4, 3)
    for fn in (ode.mu_dot, ode.nu_dot):
        refused("unknown paradigm", fn, "typo", 1.0, 0.5, 3)
    refused("unknown paradigm", ode.rhs, "typo", 1.0, 0.2, 4, 3)


def test_log_space_forms_stay_finite_far_below_zero():
    # nu_dot (HA) = alpha (1 - alpha)(log C + log beta)/C, log beta(-800) = -800 - log 2
    want = 0.25 * (np.log(3) - 800 - np.log(2)) / 3
    assert ode.nu_dot("ha", -800.0, 0.5, 3) == pytest.approx(want, rel=1e-14)
    # alpha = 1: the LV loss is -log beta(mu) = 1e4 + log 2 (C = 3), as the HA form
    assert ode.population_loss("lv", -1e4, 1.0, 3) == pytest.approx(1e4 + np.log(2), rel=1e-15)


# ------------------------------------------------------------ L14: data generators
@pytest.mark.parametrize("fn, kwargs, match", [
    (data.linear_orthogonal, dict(n=4, m=3, n_classes=3, sigma=-1.0), "sigma must be"),
    (data.linear_orthogonal, dict(n=4, m=3, n_classes=3, sigma=float("nan")), "sigma must be"),
    (data.linear_orthogonal, dict(n=4, m=3, n_classes=3, seed=-1), "seed must be"),
    (data.gaussian_mosaics, dict(n=4, m=3, n_classes=3, separation=float("nan")),
     "separation must be"),
    (data.gaussian_mosaics, dict(n=4, m=3, n_classes=3, d=0), "d must be"),
    (data.gaussian_mosaics, dict(n=4, m=3, n_classes=3, n_background=0), "n_background must"),
    (data.exact_population, dict(m=3, n_classes=3, n_base=-1), "n_base must be"),
    (data.exact_population, dict(m=3, n_classes=3, n_base=0), "n_base must be"),
    (data.orthogonal_basis, dict(n_classes=-1, d=3), r"C \(classes\) must be"),
])
def test_data_generators_refuse_bad_numbers(fn, kwargs, match):
    refused(match, fn, **kwargs)


def test_simulate_refuses_an_empty_population():
    refused("n_base must be", dynamics.simulate, "lv", 3, 3, 0.1, n_base=0)


# ------------------------------------------------------------ L16: saif
@pytest.mark.parametrize("threshold", [1.5, -1.0, float("nan"), "x"])
def test_saif_threshold_must_lie_in_0_1(threshold):
    refused("threshold must", saif.focus_prediction_counts, [0.5], [0.5], threshold)


@pytest.mark.parametrize("bins", [2.7, float("nan")])
def test_heatmap_bins_must_be_an_integer(bins):
    refused("bins must be an integer", saif.heatmap, [0.5], [0.5], bins)


def test_summarise_refuses_a_word_threshold():
    a = np.full((1, 2), 0.5)
    refused("threshold must", saif.summarise, a, a, np.array([0]), np.array([0]), "x")


# ------------------------------------------------------------ L21: fixed-focus models
@pytest.mark.parametrize("model", [ff.LinearFixedFocusModel, ff.ReferenceFixedFocusModel])
def test_models_refuse_2d_data_and_bad_labels(model, population):
    D, _ = population
    refused(r"X must be mosaics \(N, m, d\)", model, D.X[:, 0], D.y, 3)
    refused(r"y must hold labels in 0\.\.2", model, D.X, D.y + 3, 3)
    refused("integer class labels", model, D.X, D.y.astype(float), 3)


@pytest.mark.parametrize("make", [ff.LinearFixedFocusModel, ff.ReferenceFixedFocusModel])
def test_curves_refuse_z_or_m_not_of_the_models_data(make, population):
    D, _ = population
    model = make(D.X, D.y, 3)
    refused("does not fit the model's 18 mosaics", ff.fixed_focus_curves, model, D.z, 4,
            [0.5], epochs=1)
    refused("does not fit the model's 18 mosaics", ff.fixed_focus_curves, model, D.z[:3], 3,
            [0.5], epochs=1)


def test_curves_refuse_no_alphas_and_repeated_alphas(population):
    D, model = population
    refused("alphas is empty", ff.fixed_focus_curves, model, D.z, 3, [], epochs=1)
    refused("repeated value", ff.fixed_focus_curves, model, D.z, 3, [0.5, 0.5], epochs=1)


def test_population_loss_and_time_broadcast_over_an_array_of_alphas():
    """Along a Theorem 2 trajectory alpha(t) is an array; each entry is the scalar call."""
    tr = ode.solve("lv", 5, 3, 10, n_points=11)
    for p in ("sa", "ha", "lv"):
        together = ode.population_loss(p, tr["mu"], tr["alpha"], 3)
        one_by_one = [ode.population_loss(p, mu, a, 3) for mu, a in zip(tr["mu"], tr["alpha"])]
        np.testing.assert_allclose(together, one_by_one, rtol=1e-15)
        grid = np.array([0.2, 0.5, 1.0])
        np.testing.assert_allclose(ode.theorem1_time(p, 2.0, grid, 3),
                                   [ode.theorem1_time(p, 2.0, a, 3) for a in grid], rtol=1e-15)
    with pytest.raises(InputError) as err:
        ode.population_loss("lv", 1.0, np.linspace(-0.2, 0.9, 12), 3)
    assert "[0, 1] everywhere, got -0.2" in str(err.value) and "\n" not in str(err.value)


def test_numbers_of_other_kinds_are_numbers():
    import decimal

    torch = pytest.importorskip("torch")
    assert data.linear_orthogonal(4, 3, 3, sigma=np.array(0.5)).X.shape[0] == 4
    assert data.gaussian_mosaics(4, 3, 3, separation=np.array(2.0)).X.shape[0] == 4
    from minimal_attn.errors import check_positive

    assert check_positive("lr", torch.tensor(0.1)) is not None
    assert check_positive("lr", decimal.Decimal("0.1")) is not None
    with pytest.raises(InputError) as err:                 # an array: its shape, one line
        check_positive("lr", np.linspace(0.1, 1, 50))
    assert "an array of shape (50,)" in str(err.value)


def test_orthogonal_basis_takes_every_seed_default_rng_takes():
    a, _ = data.orthogonal_basis(3, 8, seed=np.random.SeedSequence(1))
    b, _ = data.orthogonal_basis(3, 8, seed=[1, 2])
    assert a.shape == b.shape == (3, 8)
    assert data.orthogonal_basis(3, 8, seed=None)[0].shape == (3, 8)
    with pytest.raises(InputError, match="seed must be what numpy.random.default_rng takes"):
        data.orthogonal_basis(3, 8, seed=-1)
