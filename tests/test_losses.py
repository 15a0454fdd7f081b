"""Properties of the attention losses and inference rules (Section 2.3)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from strategies import scores_logits

from minimal_attn import fcam, losses
from minimal_attn.errors import InputError

finite = st.floats(-50, 50, allow_nan=False)


@given(data=st.data())
def test_attention_rows_sum_to_one_and_ignore_shift(data):
    scores, _, _ = data.draw(scores_logits())
    shift = data.draw(arrays(np.float64, (scores.shape[0], 1), elements=finite))
    a = losses.attention(scores)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(losses.attention(scores + shift), a, atol=1e-12)
    # and it is the softmax: log a_j - log a_0 = f_j - f_0 (a uniform or reversed "attention"
    # passes the two above). Scores of |f| <= 50: each exponent f_j - max f rounds by at most
    # ulp(100)/2 = 7e-15, so the logs agree to a few of those (a_j >= e^-100, no underflow)
    np.testing.assert_allclose(np.log(a) - np.log(a[:, :1]), scores - scores[:, :1],
                               rtol=0, atol=1e-13)


@given(data=st.data())
def test_losses_nonnegative(data):
    scores, logits, y = data.draw(scores_logits())
    assert losses.loss_sa(logits[:, 0], y) >= 0
    assert losses.loss_ha(scores, logits, y) >= 0
    assert losses.loss_lv(scores, logits, y) >= 0


@given(data=st.data())
def test_lv_is_at_most_ha(data):
    # Jensen: -log E_a[sigma_y] <= E_a[-log sigma_y]
    scores, logits, y = data.draw(scores_logits())
    assert losses.loss_lv(scores, logits, y) <= losses.loss_ha(scores, logits, y) + 1e-9


def _textbook(scores, logits, y):
    """(value, dscores, dlogits) of SA (on segment 0's logits), HA and LV, the plain formulas
    in SciPy's log space: V&R Eqs. (7), (9)-(12) with a = softmax(f), gamma the posterior."""
    from scipy.special import log_softmax, logsumexp, softmax

    n = len(y)
    rows = np.arange(n)
    onehot = np.eye(logits.shape[-1])[y]                                   # (N, C)
    logp0 = log_softmax(logits[:, 0], axis=-1)                             # (N, C)
    sa = (-logp0[rows, y].mean(), None, (np.exp(logp0) - onehot) / n)
    a, log_a = softmax(scores, axis=1), log_softmax(scores, axis=1)        # (N, m)
    logp = log_softmax(logits, axis=-1)                                    # (N, m, C)
    ll = logp[rows, :, y]                                                  # (N, m)
    loss_j = -ll
    ha_n = (a * loss_j).sum(1)                                             # (N,)
    ha = (ha_n.mean(), a * (loss_j - ha_n[:, None]) / n,
          a[..., None] * (np.exp(logp) - onehot[:, None]) / n)
    gamma = softmax(log_a + ll, axis=1)                                    # (N, m)
    lv = (-logsumexp(log_a + ll, axis=1).mean(), (a - gamma) / n,
          gamma[..., None] * (np.exp(logp) - onehot[:, None]) / n)
    return sa, ha, lv


@given(data=st.data())
def test_finite_at_magnitude_1e4(data):
    scores, logits, y = data.draw(scores_logits(big=True))
    values = [losses.loss_sa(logits[:, 0], y), losses.loss_ha(scores, logits, y),
              losses.loss_lv(scores, logits, y)]
    grads = [losses.value_and_grad_sa(logits[:, 0], y)[1],
             *losses.value_and_grad_ha(scores, logits, y)[1:],
             *losses.value_and_grad_lv(scores, logits, y)[1:]]
    assert np.all(np.isfinite(values))
    assert all(np.all(np.isfinite(g)) for g in grads)
    # finite and right: entries up to 1e4 make exponents f_j - max f up to 2e4, whose
    # rounding (2e4 * 2.2e-16 = 4.4e-12) is a relative error of every weight and
    # probability, in either computation; a few dozen such errors on losses up to ~2e4 and
    # on gradients whose entries are at most 1 (the plain centred a_j (l_j - L) loses up
    # to m ulps of l ~ 2e4 absolutely, 3e-11): rtol and atol 1e-10
    want = _textbook(scores, logits, y)
    np.testing.assert_allclose(values, [w[0] for w in want], rtol=1e-10, atol=1e-10)
    for got, ref in zip(grads, [want[0][2], want[1][1], want[1][2], want[2][1], want[2][2]]):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    for rule in ("sa", "ha", "lv"):
        s = losses.infer(rule, scores, logits if rule != "sa" else logits[:, 0])
        np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-9)


def test_extreme_logits_exact_values():
    # CE of a logit gap of 1e4 is 1e4 exactly (no overflow), 0 for the right class
    logits = np.array([[1e4, -1e4]])
    assert losses.loss_sa(logits, np.array([1])) == pytest.approx(2e4)
    assert losses.loss_sa(logits, np.array([0])) == pytest.approx(0.0, abs=1e-300)


@pytest.mark.filterwarnings("error::RuntimeWarning")   # no -inf - -inf on the way
@pytest.mark.parametrize("paradigm", ["ha", "lv"])
def test_an_unattended_segment_with_an_impossible_label_adds_nothing(paradigm):
    # segment 1: attention 0 (score -inf) and label probability 0 (logit -inf). By hand the
    # loss is the CE of segment 0 alone, log(1 + e^-1), and its logit gradient
    # (sigma - e_y) = (-1, 1) / (1 + e); nothing reaches segment 1 or the scores
    scores = np.array([[0.0, -np.inf]])
    logits = np.array([[[1.0, 0.0], [-np.inf, 0.0]]])
    value, dscores, dlogits = losses.value_and_grad(paradigm, scores, logits, np.array([0]))
    assert value == pytest.approx(np.log1p(np.exp(-1.0)), rel=1e-12)
    np.testing.assert_array_equal(dscores, [[0.0, 0.0]])
    q = 1.0 / (1.0 + np.e)
    np.testing.assert_allclose(dlogits, [[[-q, q], [0.0, 0.0]]], rtol=1e-12, atol=0)


@given(data=st.data())
def test_one_hot_attention_makes_paradigms_agree(data):
    n, m, d, c = (data.draw(st.integers(1, 5)), data.draw(st.integers(2, 5)),
                  data.draw(st.integers(1, 5)), data.draw(st.integers(2, 4)))
    rng = np.random.default_rng(data.draw(st.integers(0, 10**6)))
    params = {"W": rng.standard_normal((c, d)), "u": rng.standard_normal(d)}
    X, y = rng.standard_normal((n, m, d)), rng.integers(c, size=n)
    pick = rng.integers(m, size=n)
    log_att = np.where(np.arange(m)[None] == pick[:, None], 0.0, -np.inf)
    sa, ha, lv = (fcam.loss(params, X, y, p, log_attention=log_att) for p in ("sa", "ha", "lv"))
    assert sa == pytest.approx(ha, rel=1e-10) and ha == pytest.approx(lv, rel=1e-10)
    # the same limit reached through huge finite scores
    scores = np.where(np.arange(m)[None] == pick[:, None], 1e4, -1e4)
    logits = X @ params["W"].T
    assert losses.loss_ha(scores, logits, y) == pytest.approx(sa, rel=1e-10)
    assert losses.loss_lv(scores, logits, y) == pytest.approx(sa, rel=1e-10)


def test_losses_hand_computed():
    # one instance, m = 2, C = 2; attention (0.75, 0.25); class-1 probabilities 0.5 and 0.9
    scores = np.array([[np.log(3.0), 0.0]])
    logits = np.array([[[0.0, 0.0], [0.0, np.log(9.0)]]])
    y = np.array([1])
    assert losses.loss_ha(scores, logits, y) == pytest.approx(
        -(0.75 * np.log(0.5) + 0.25 * np.log(0.9)))
    assert losses.loss_lv(scores, logits, y) == pytest.approx(-np.log(0.75 * 0.5 + 0.25 * 0.9))
    np.testing.assert_allclose(losses.infer_lv(scores, logits),
                               [[0.75 * 0.5 + 0.25 * 0.1, 0.75 * 0.5 + 0.25 * 0.9]])
    np.testing.assert_allclose(losses.infer_ha(scores, logits), [[0.5, 0.5]])


@given(data=st.data())
def test_hard_inference_uses_the_top_segment(data):
    # the top segment is chosen first, then lifted above the rest (no draw is rejected)
    scores, logits, _ = data.draw(scores_logits())
    rows = np.arange(len(scores))
    top = np.array(data.draw(st.lists(st.integers(0, scores.shape[1] - 1),
                                      min_size=len(scores), max_size=len(scores))))
    lift = np.array(data.draw(st.lists(st.floats(1e-3, 10.0), min_size=len(scores),
                                       max_size=len(scores))))
    scores[rows, top] = scores.max(axis=1) + lift
    s = losses.infer_ha(scores, logits)
    expected = losses.softmax(logits[rows, top])
    np.testing.assert_allclose(s, expected, rtol=1e-12)


def test_hybrid_phase_and_names():
    assert [losses.phase("hybrid", s, 3) for s in range(5)] == ["sa"] * 3 + ["ha"] * 2
    assert losses.phase("lv", 10, 3) == "lv"
    assert losses.phase("soft", 0, 3) == "sa"
    with pytest.raises(InputError, match="unknown paradigm"):
        losses.loss("hybrid", None, None, None)
    with pytest.raises(InputError, match="unknown paradigm 'xx'"):
        losses.infer("xx", None, None)


def test_without_the_focus_gradient_the_rest_is_unchanged():
    # a fixed focus (Section 3) needs no dscores: HA and LV skip them, nothing else moves
    rng = np.random.default_rng()
    scores, log_lik = rng.normal(0, 3, (6, 4)), -rng.exponential(2.0, (6, 4))
    for head in (losses.ha_from_log_lik, losses.lv_from_log_lik):
        full, lean = head(scores, log_lik), head(scores, log_lik, focus_grad=False)
        assert lean[1] is None and full[1] is not None
        assert lean[0] == full[0]
        np.testing.assert_array_equal(lean[2], full[2])
