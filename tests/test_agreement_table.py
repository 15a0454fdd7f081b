"""Table 2 of Snell et al. (2021) assembled from hand-made attention, probe and saliency arrays."""

import numpy as np
import pytest
from scipy import stats

from minimal_attn.experiments import agreement_table as at


def row(*v):
    return np.array([v], dtype=float)          # one classification example: (T=1, L)


TOP0, TOP1, TOP3 = row(.7, .1, .15, .05), row(.1, .6, .2, .1), row(.1, .15, .05, .7)


def run(steps, key, per_step, perf):
    """A run as (history, evals): ``per_step[c]`` the list of arrays at checkpoint c."""
    history = [{"step": s, "val_perf": p, "val_bleu": None} for s, p in zip(steps, perf)]
    return history, {s: {f"val_{key}": arrays} for s, arrays in zip(steps, per_step)}


@pytest.fixture
def hand_made():
    alpha = [TOP0, TOP3]                                   # tops at 0 and 3
    standard = ([{"step": 50, "val_perf": .8, "val_bleu": None}],
                {50: {"val_alpha": alpha, "val_beta": [TOP0, TOP1],       # agree, disagree
                      "val_delta": [TOP0, TOP3]}})
    uniform = run([0, 10, 20], "beta", [[TOP1, TOP1], [TOP0, TOP3], [TOP0, TOP1]],
                  [.5, .7, .75])                           # A(alpha, beta_uf): 0, 1, .5
    second = run([0, 10, 20, 30], "alpha",
                 [[TOP1, TOP1], [TOP0, TOP1], [TOP0, TOP3], [TOP0, TOP3]],
                 [.5, .6, .8, .9])                         # A(alpha, alpha_hat): 0, .5, 1, 1
    frozen = run([0, 10], "alpha", [[TOP1, TOP1], [TOP1, TOP3]], [.5, .5])   # 0, .5
    beta_px = [TOP0, TOP1]                                 # agrees with beta_uf(10) once
    beta_log = [TOP0, TOP3]
    return standard, second, uniform, beta_px, frozen, beta_log


def test_every_column_on_hand_made_arrays(hand_made):
    standard, second, uniform, beta_px, frozen, beta_log = hand_made
    r = at.agreement_row(standard, second, uniform, beta_px, frozen=frozen, beta_log=beta_log)
    assert r["A_alpha_beta_uf"] == 1.0                     # max over checkpoints (A.7) ...
    assert r["curves"]["best_uniform_step"] == 10          # ... reached at step 10
    assert r["A_beta_uf_beta_px"] == 0.5
    assert r["A_delta_beta_uf"] == 1.0
    assert r["A_alpha_beta"] == 0.5
    assert r["A_hat"] == 0.25                              # L = 4, k = 1, no ties: 1/4
    assert r["xi_alpha_beta"] == 0.8                       # first A(alpha, alpha_hat) > .5
    assert r["xi_alpha_beta_reached"] is True
    assert r["xi_alpha_beta_uf"] == 0.9                    # never > 1: starred, final perf
    assert r["xi_alpha_beta_uf_reached"] is False
    assert r["xi_star"] == 0.9
    assert r["A_beta_uf_beta_log"] == 1.0
    assert r["A_alpha_alpha_fr"] == 0.5
    assert r["curves"]["A_alpha_alpha_hat"] == [0.0, 0.5, 1.0, 1.0]


def test_kendall_variant_and_tables(hand_made):
    standard, second, uniform, beta_px, frozen, beta_log = hand_made
    r = at.agreement_row(standard, second, uniform, beta_px, metric="tau")
    expect = np.mean([stats.kendalltau(TOP0[0], TOP0[0])[0], stats.kendalltau(TOP3[0], TOP1[0])[0]])
    assert r["A_alpha_beta"] == pytest.approx(expect)
    assert r["A_hat"] == 0.0
    md = at.markdown_table("sst2", {"Table 2": at.agreement_row(standard, second, uniform,
                                                                beta_px), "Table 3": r})
    assert "| SST (paper) | 20 | 34 | 22 | 25 | 8 | 78 | 82 | 84 |" in md
    assert md.count("(paper)") == 1                        # the paper row only beside Table 2
    assert "| sst2 (ours) | 100.0 | 50.0 | 100.0 | 50.0 | 25.0 | 90.0* | 80.0 | 90.0 |" in md


def test_kendall_rows_equal_scipy_with_ties():
    rng = np.random.default_rng(0)
    u = rng.integers(0, 4, (30, 7)).astype(float)
    v = rng.normal(size=(30, 7))
    v[:, 0] = v[:, 1]
    ours = at.kendall_rows(u, v)
    ref = [stats.kendalltau(a, b)[0] for a, b in zip(u, v)]
    assert np.allclose(ours, ref, equal_nan=True)
    assert np.isnan(at.kendall_rows(np.ones((1, 3)), np.arange(3.0)[None]))[0]


def test_mean_kendall_by_length_equals_the_loop_over_pairs():
    rng = np.random.default_rng(7)
    us, vs = [], []
    for _ in range(50):
        T, L = int(rng.integers(0, 4)), int(rng.integers(1, 12))
        us.append(rng.integers(0, 3, (T, L)).astype(float))        # ties, constant rows
        vs.append(rng.random((T, L)))
    loop = np.concatenate([at.kendall_rows(u, v) for u, v in zip(us, vs) if u.size])
    assert at.mean_metric(us, vs, "tau") == float(np.nanmean(loop))


def test_a_tau_row_with_constant_uniform_betas_is_undefined_not_an_error(hand_made):
    """Kendall's tau of a constant row is undefined: a uniform model whose beta rows are all
    constant has no best checkpoint; its columns are NaN (empty in the table) and so is
    the xi they would give, while the columns that do not read it keep their values."""
    standard, second, _, beta_px, _, _ = hand_made
    flat = row(.25, .25, .25, .25)
    uniform = run([0, 10], "beta", [[flat, flat], [flat, flat]], [.5, .6])
    r = at.agreement_row(standard, second, uniform, beta_px, metric="tau")
    assert np.isnan(r["A_alpha_beta_uf"]) and np.isnan(r["A_beta_uf_beta_px"])
    assert np.isnan(r["xi_alpha_beta_uf"]) and r["xi_alpha_beta_uf_reached"] is False
    assert r["curves"]["best_uniform_step"] == 10                  # the last checkpoint
    assert np.isfinite(r["A_alpha_beta"]) and np.isfinite(r["xi_alpha_beta"])
    assert "| sst2 (ours) |  |  |" in at.markdown_table("sst2", {"Table 3": r})
