"""SA/HA/LV for sequence models (backends/snell/attention_losses.py): V&R's losses per token.

Checked against the core's FCAM losses (a one-token target is an FCAM with m = L
segments), against torch autograd and the core's hand-written backward in float64,
with hypothesis properties that hold in floating point, and at the model level
(the probe's per-position outputs, chunking over T, inference rules).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from minimal_attn import losses as core  # noqa: E402
from minimal_attn.backends.snell import attention_losses as al  # noqa: E402
from minimal_attn.backends.snell import batched_lstm as bl  # noqa: E402
from minimal_attn.backends.snell import seq_models as sm  # noqa: E402
from minimal_attn.backends.snell.eval import pad_batch  # noqa: E402


def _fcam_problem(rng, N, m, C, scale):
    scores = rng.normal(size=(N, m)) * scale
    logits = rng.normal(size=(N, m, C)) * scale
    y = rng.integers(0, C, N)
    return scores, logits, y


def _seq_inputs(scores, logits, y):
    """The same problem as one target token: log alpha (N, L), log p(y | h_l) (N, L)."""
    s, z = torch.tensor(scores), torch.tensor(logits)
    yt = torch.tensor(y)
    log_lik = torch.log_softmax(z, -1).gather(-1, yt[:, None, None].expand(-1, z.shape[1], 1))
    return torch.log_softmax(s, -1), log_lik[..., 0]


@pytest.mark.parametrize("scale", [0.1, 1.0, 30.0, 1e4])
@pytest.mark.parametrize("paradigm", ["ha", "lv"])
def test_one_token_equals_the_core_fcam_losses(paradigm, scale):
    """Sequence loss at T = 1 (batch mean over N) = minimal_attn.losses, to 1e-12 in float64."""
    rng = np.random.default_rng(int(scale * 7) + len(paradigm))
    scores, logits, y = _fcam_problem(rng, 9, 5, 4, scale)
    log_alpha, log_lik = _seq_inputs(scores, logits, y)
    ours = float(al.token_loss(paradigm, log_alpha, log_lik).mean())
    theirs = float(core.loss(paradigm, scores, logits, y))
    assert np.isfinite(ours)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("scale", [0.3, 3.0, 1e4])
@pytest.mark.parametrize("rule", ["ha", "lv"])
def test_one_token_inference_equals_the_core(rule, scale):
    rng = np.random.default_rng(11)
    scores, logits, y = _fcam_problem(rng, 7, 6, 3, scale)
    ours = al.infer(rule, torch.log_softmax(torch.tensor(scores), -1),
                    torch.log_softmax(torch.tensor(logits), -1)).exp().numpy()
    assert np.allclose(ours, core.infer(rule, scores, logits), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("scale", [0.5, 5.0, 1e4])
@pytest.mark.parametrize("paradigm", ["ha", "lv"])
def test_autograd_equals_the_core_backward(paradigm, scale):
    """torch autograd through our loss = the core's hand-written dscores, dlogits (V&R Eqs.
    (9)-(12)), float64; both finite at logits of magnitude 1e4."""
    rng = np.random.default_rng(3)
    scores, logits, y = _fcam_problem(rng, 6, 4, 5, scale)
    s = torch.tensor(scores, requires_grad=True)
    z = torch.tensor(logits, requires_grad=True)
    yt = torch.tensor(y)
    log_lik = torch.log_softmax(z, -1).gather(-1, yt[:, None, None].expand(-1, 4, 1))[..., 0]
    al.token_loss(paradigm, torch.log_softmax(s, -1), log_lik).mean().backward()
    _, dscores, dlogits = core.value_and_grad(paradigm, scores, logits, y)
    assert torch.isfinite(s.grad).all() and torch.isfinite(z.grad).all()
    assert np.allclose(s.grad.numpy(), dscores, rtol=1e-9, atol=1e-12)
    assert np.allclose(z.grad.numpy(), dlogits, rtol=1e-9, atol=1e-12)


def test_autograd_equals_the_plain_formulas():
    """Against the textbook formulas written directly in torch (moderate logits, float64)."""
    rng = np.random.default_rng(5)
    scores, logits, y = _fcam_problem(rng, 5, 6, 3, 1.0)
    for paradigm in ("ha", "lv"):
        s1, s2 = (torch.tensor(scores, requires_grad=True) for _ in range(2))
        z1, z2 = (torch.tensor(logits, requires_grad=True) for _ in range(2))
        ll1 = torch.log_softmax(z1, -1)[torch.arange(5), :, torch.tensor(y)]
        ours = al.token_loss(paradigm, torch.log_softmax(s1, -1), ll1).sum()
        a = torch.softmax(s2, -1)
        p = torch.softmax(z2, -1)[torch.arange(5), :, torch.tensor(y)]      # (N, L)
        plain = (-(a * torch.log(p)).sum(-1) if paradigm == "ha"
                 else -torch.log((a * p).sum(-1))).sum()
        ours.backward()
        plain.backward()
        assert float(ours.detach()) == pytest.approx(float(plain.detach()), rel=1e-12)
        assert torch.allclose(s1.grad, s2.grad, rtol=1e-10, atol=1e-14)
        assert torch.allclose(z1.grad, z2.grad, rtol=1e-10, atol=1e-14)


@st.composite
def _problems(draw):
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, 4))
    L = draw(st.integers(1, 6))
    scale = draw(st.sampled_from([1e-3, 1.0, 50.0, 1e4]))
    floats = st.floats(-1.0, 1.0, allow_nan=False)
    s = np.array(draw(st.lists(floats, min_size=B * T * L, max_size=B * T * L)))
    z = np.array(draw(st.lists(floats, min_size=B * T * L, max_size=B * T * L)))
    log_alpha = torch.log_softmax(torch.tensor(s * scale).view(B, T, L), -1)
    log_lik = torch.nn.functional.logsigmoid(torch.tensor(z * scale).view(B, T, L))
    return log_alpha, log_lik


@given(_problems())
def test_lv_never_exceeds_ha_and_both_are_finite(problem):
    """Jensen: -log sum a p <= sum a (-log p); up to a few ulps of HA in floating point."""
    log_alpha, log_lik = problem
    ha, lv = al.loss_ha(log_alpha, log_lik), al.loss_lv(log_alpha, log_lik)
    assert torch.isfinite(ha).all() and torch.isfinite(lv).all()
    assert (lv >= 0).all() and (ha >= 0).all()
    assert (lv <= ha * (1 + 1e-13) + 1e-300).all()


@given(_problems(), st.data())
def test_one_hot_attention_makes_the_three_losses_equal(problem, data):
    """alpha one-hot at l*: HA = LV = -log p(y | h_{l*}) = SA (c_t = h_{l*})."""
    _, log_lik = problem
    L = log_lik.shape[-1]
    top = data.draw(st.integers(0, L - 1))
    log_alpha = torch.full_like(log_lik, float("-inf"))
    log_alpha[..., top] = 0.0
    sa = al.token_loss("sa", log_alpha, log_lik, log_lik_sa=log_lik[..., top])
    ha = al.token_loss("ha", log_alpha, log_lik)
    lv = al.token_loss("lv", log_alpha, log_lik)
    assert torch.equal(ha, sa)
    assert torch.allclose(lv, sa, rtol=1e-14, atol=0)


def test_zero_attention_ignores_impossible_positions():
    """Padding: alpha = 0 where log p = -inf contributes exactly 0 (no nan), gradients too."""
    log_alpha = torch.tensor([[0.0, float("-inf")]], requires_grad=True)
    log_lik = torch.tensor([[-0.5, float("-inf")]], requires_grad=True)
    for paradigm in ("ha", "lv"):
        loss = al.token_loss(paradigm, log_alpha, log_lik).sum()
        assert float(loss.detach()) == pytest.approx(0.5, rel=1e-15)
        g = torch.autograd.grad(loss, [log_alpha, log_lik])
        assert all(torch.isfinite(x).all() for x in g)


def test_uniform_attention_spreads_over_the_real_positions_only():
    """beta^uf's model (Snell Sec. 3.2): alpha = 1 / (real positions), 0 at padding."""
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    scores = torch.randn(2, 4, dtype=torch.float64)          # ignored under uniform
    alpha = al.log_attention(scores, mask, uniform=True).exp()
    want = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.25] * 4], dtype=torch.float64)
    assert torch.equal(alpha, want)


def test_lv_keeps_its_digits_near_zero_loss():
    """p close to 1: -log M ~ 1 - M, computed from q without cancellation."""
    log_lik = torch.tensor([[-1e-17, -3e-17]], dtype=torch.float64)
    log_alpha = torch.log(torch.tensor([[0.25, 0.75]], dtype=torch.float64))
    assert float(al.loss_lv(log_alpha, log_lik)) == pytest.approx(2.5e-17, rel=1e-12)


# --------------------------------------------------------------- models
V = 11
SRC = [np.array([3, 4, 5, 6, 7]), np.array([8, 9])]
TGT = [np.array([4, 5, 2]), np.array([6, 2])]


def _translate():
    torch.manual_seed(0)
    model = sm.Seq2Seq(V, hidden=6, out_hidden=7).double().eval()
    x, lengths = pad_batch(SRC, V, "cpu")
    y_in, _ = pad_batch([t[:-1] for t in TGT], V, "cpu", prefix=1)
    y, _ = pad_batch(TGT, V, "cpu")
    return model, x, lengths, y_in, y.clamp(max=V - 1)


@pytest.mark.parametrize("pos", [0, 1])
def test_seq2seq_one_hot_attention_sa_ha_lv_equal(monkeypatch, pos):
    """With alpha one-hot at pos, c_t = h_pos (Snell Eq. (2)) and the probe's distribution at
    pos (Snell Eq. (4)) is the model's output: the three per-token losses coincide."""
    model, x, lengths, y_in, y = _translate()

    def one_hot(logits, mask, *rest):
        out = torch.full_like(logits, float("-inf"))
        out[..., pos] = 0.0
        return out
    monkeypatch.setattr(sm, "log_attention", one_hot)
    monkeypatch.setattr(sm, "masked_attention", lambda *a: one_hot(*a).exp())
    out = model(x, lengths, y_in, rule="sa")
    sa = -out["logp"].gather(-1, y[..., None])[..., 0]
    log_lik = model.position_log_lik(out, y)
    for paradigm in ("ha", "lv"):
        assert torch.allclose(al.token_loss(paradigm, out["log_alpha"], log_lik), sa,
                              rtol=1e-12, atol=1e-14)
    for rule in ("ha", "lv"):                  # and the inference rules give SA's output
        assert torch.allclose(model(x, lengths, y_in, rule=rule)["logp"], out["logp"],
                              rtol=1e-12, atol=1e-14)


def test_chunks_over_t_change_nothing(monkeypatch):
    """One target token per chunk (checkpointed) = the whole (B, T, L, V) at once: values
    and gradients."""
    model, x, lengths, y_in, y = _translate()
    grads = []
    for budget in (al.CHUNK_BYTES, 1):
        monkeypatch.setattr(al, "CHUNK_BYTES", budget)
        model.zero_grad()
        out = model(x, lengths, y_in, rule="none")
        loss = al.token_loss("lv", out["log_alpha"], model.position_log_lik(out, y)).sum()
        loss.backward()
        grads.append((float(loss.detach()), [p.grad.clone() for p in model.parameters()
                                    if p.grad is not None]))
        lv_out = model(x, lengths, y_in, rule="lv")["logp"].detach()
        grads[-1] += (lv_out,)
    (l1, g1, o1), (l2, g2, o2) = grads
    assert l1 == pytest.approx(l2, rel=1e-13)
    assert all(torch.allclose(a, b, rtol=1e-11, atol=1e-14) for a, b in zip(g1, g2))
    assert torch.allclose(o1, o2, rtol=1e-13, atol=0)


def test_probe_is_the_per_position_distribution():
    """beta (the probe) = exp(position_log_lik) = N([h_l, s_t])_{y_t} written out by hand."""
    model, x, lengths, y_in, y = _translate()
    out = model(x, lengths, y_in)
    beta = model.probe(out, y)                                           # (B, T, L)
    h, s = out["h"], out["s"]
    B, T, L = beta.shape
    for b in range(B):
        for t in range(T):
            for j in range(L):
                z = torch.cat([h[b, j], s[b, t]])
                p = torch.softmax(model.N2(torch.relu(model.N1(z))), -1)[y[b, t]]
                assert float(beta[b, t, j].detach()) == pytest.approx(float(p.detach()), rel=1e-12)
    assert torch.allclose(model.position_log_lik(out, y).exp(), beta, rtol=1e-13)


def test_classifier_inference_rules():
    """Snell Eq. (8) with gamma_l = W h_l per position: HA = gamma at argmax alpha, LV = the
    log-odds of sum_l alpha_l sigmoid(gamma_l)."""
    torch.manual_seed(1)
    model = sm.Classifier(V, emb=6, hidden=5).double().eval()
    x, lengths = pad_batch(SRC, V, "cpu")
    out = model(x, lengths)
    alpha, gamma = out["alpha"], out["gamma"]
    model.rule = "ha"
    ha = model(x, lengths)["logit"]
    assert torch.allclose(ha, gamma.gather(1, alpha.argmax(1, keepdim=True))[:, 0], rtol=1e-13)
    model.rule = "lv"
    p = (alpha * torch.sigmoid(gamma)).sum(1)
    assert torch.allclose(model(x, lengths)["logit"], torch.log(p / (1 - p)), rtol=1e-10)


def test_batched_positions_equal_the_definition():
    """The seed-batched model's per-position log-likelihoods (shared code) = N([h_l, s_t])."""
    params = bl.init_seq2seq([0, 1], [[0], [1]], 7, 4, dtype=torch.float64)
    src = torch.randint(1, 7, (2, 3, 5))
    tgt = torch.randint(1, 7, (2, 3, 5))
    tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], -1)
    h, s = bl._states(params, src, tgt_in)
    got = bl.map_positions(params, h, s, sm.pick, tgt)                   # (S, B, T, L)
    r, b, t, j = 1, 2, 3, 4
    z = torch.cat([h[r, b, j], s[r, b, t]])
    hid = torch.relu(z @ params["N_W1"][r] + params["N_b1"][r, 0])
    want = torch.log_softmax(hid @ params["N_W2"][r] + params["N_b2"][r, 0], -1)[tgt[r, b, t]]
    assert float(got[r, b, t, j].detach()) == pytest.approx(float(want.detach()), rel=1e-12)


def test_batched_seeds_train_independently_under_lv():
    """A seed's LV loss and gradient do not depend on the seeds batched with it."""
    both = bl.init_seq2seq([0, 1], [[0], [1]], 7, 4, dtype=torch.float64)
    alone = bl.init_seq2seq([1], [[1]], 7, 4, dtype=torch.float64)
    src = torch.randint(1, 7, (2, 3, 6))
    tgt = src.flip(-1)
    l2, _ = bl.seq2seq_loss(both, src, tgt, paradigm=["sa", "lv"])
    l1, _ = bl.seq2seq_loss(alone, src[1:], tgt[1:], paradigm="lv")
    assert float(l2[1].detach()) == pytest.approx(float(l1[0].detach()), rel=1e-12)
    l2.sum().backward()
    l1.sum().backward()
    assert torch.allclose(both["W_att"].grad[1], alone["W_att"].grad[0], rtol=1e-10)
    with torch.no_grad():
        _, acc = bl.seq2seq_loss(alone, src[1:], tgt[1:], paradigm="ha")
    assert 0.0 <= float(acc[0]) <= 1.0


def test_unknown_paradigm_is_refused():
    from minimal_attn.errors import InputError

    with pytest.raises(InputError, match="paradigm"):
        al.token_loss("xx", torch.zeros(1, 2), torch.zeros(1, 2))


def test_chunks_are_smaller_off_the_gpu():
    # 1 KiB per token: a CUDA chunk holds CHUNK_BYTES of it, a CPU chunk CPU_CHUNK_BYTES
    assert al.chunk_size(256, 4, device="cuda") == al.CHUNK_BYTES // 1024
    assert al.chunk_size(256, 4, device=torch.device("cpu")) == al.CPU_CHUNK_BYTES // 1024
    assert al.chunk_size(256, 4) == al.CPU_CHUNK_BYTES // 1024
    assert al.chunk_size(256, 4, budget=4096, device="cuda") == 4
    assert al.chunk_size(10 ** 9, 8) == 1                      # never below one token


@pytest.mark.parametrize("rule", ["ha", "lv"])
@pytest.mark.parametrize("budget", [None, 2_000])                 # one chunk, or several
def test_evaluation_pass_gives_the_training_loss_and_the_rules_accuracy(rule, budget,
                                                                        monkeypatch):
    if budget is not None:
        monkeypatch.setattr(al, "CHUNK_BYTES", budget)
    params = bl.init_seq2seq([0, 1], [[0], [1]], 7, 4, dtype=torch.float64)
    src = torch.randint(1, 7, (2, 5, 6), generator=torch.Generator().manual_seed(3))
    tgt = src.flip(-1)
    loss_train, _ = bl.seq2seq_loss(params, src, tgt, paradigm=rule)
    with torch.no_grad():
        loss_eval, acc = bl.seq2seq_loss(params, src, tgt, paradigm=rule)
        # the reference: the whole (S, B, T, L, V) at once, then V&R's inference rule
        tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], dim=-1)
        h, s = bl._states(params, src, tgt_in)
        log_alpha = bl.log_attention(s, params["W_att"], h)
        logp = bl.map_positions(params, h, s, lambda lp: lp)
        pred = al.infer(rule, log_alpha, logp).argmax(-1)
    torch.testing.assert_close(loss_eval, loss_train.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(acc, (pred == tgt).double().mean(dim=(1, 2)), rtol=0, atol=0)
    assert not torch.isnan(acc).any()
