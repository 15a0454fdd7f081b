"""Seed-batched models, Snell Eqs. (1)-(3), (8), (20)-(21): batched == separate, nn reference."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell import batched_lstm as tsm  # noqa: E402
from minimal_attn.backends.snell.synthetic_train import Run, SyntheticConfig, train_runs  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _reference_logits(p, src, tgt_in):
    """Snell Eqs. (1)-(2), (20)-(21) for one seed with torch.nn.LSTM (no seed axis); the
    LSTMs take ``p``'s weights functionally, so gradients reach ``p``."""
    E, H4 = p["enc_Wx"].shape
    H = H4 // 4
    m = torch.nn.LSTM(E, H, batch_first=True).double()

    def nn_lstm(prefix, *args):
        weights = {"weight_ih_l0": p[f"{prefix}_Wx"].T, "weight_hh_l0": p[f"{prefix}_Wh"].T,
                   "bias_ih_l0": p[f"{prefix}_b"][0], "bias_hh_l0": torch.zeros_like(
                       p[f"{prefix}_b"][0])}
        return torch.func.functional_call(m, weights, args)

    h, state = nn_lstm("enc", p["emb_src"][src])                 # (B, L, H)
    s, _ = nn_lstm("dec", p["emb_tgt"][tgt_in], state)           # (B, T, H)
    context = 0
    for W in p["W_att"]:                                         # heads, Eq. (21)
        a = s @ W @ h.transpose(1, 2)                            # (B, T, L), Eq. (1)
        context = context + torch.softmax(a, -1) @ h
    hid = torch.relu(torch.cat([context, s], -1) @ p["N_W1"] + p["N_b1"][0])
    return hid @ p["N_W2"] + p["N_b2"][0]


@pytest.mark.parametrize("heads", [1, 2])
def test_seq2seq_matches_nn_lstm_reference(heads):
    params = tsm.init_seq2seq([3, 4], [[10 + k for k in range(heads)], [20, 21][:heads]],
                              n_vocab=9, hidden=6, embed=5, dtype=torch.float64)
    rng = np.random.default_rng(0)
    src = torch.as_tensor(rng.integers(1, 9, (2, 3, 7)))
    tgt_in = torch.as_tensor(rng.integers(0, 9, (2, 3, 7)))
    logits, alpha = tsm.seq2seq_logits(params, src, tgt_in)
    assert torch.allclose(alpha.sum(-1), torch.ones(()).double())
    with torch.no_grad():
        for r in range(2):
            ref = _reference_logits({k: v[r] for k, v in params.items()}, src[r], tgt_in[r])
            assert torch.allclose(logits[r], ref, atol=1e-12)


def test_heads_contexts_sum():
    """Eq. (21): a 2-head model's context is the sum of the two single-head contexts."""
    p2 = tsm.init_seq2seq([1], [[5, 6]], 9, 6, dtype=torch.float64)
    h = torch.randn(1, 2, 7, 6, dtype=torch.float64)
    s = torch.randn(1, 2, 4, 6, dtype=torch.float64)
    c2, _ = tsm.attention(s, p2["W_att"], h)
    c_a, _ = tsm.attention(s, p2["W_att"][:, :1], h)
    c_b, _ = tsm.attention(s, p2["W_att"][:, 1:], h)
    assert torch.allclose(c2, c_a + c_b, atol=1e-12)


def test_head_init_independent_of_batch():
    p = tsm.init_seq2seq([0, 1], [[7], [8]], 9, 6)
    q = tsm.init_seq2seq([1], [[8]], 9, 6)
    for k in p:
        assert torch.equal(p[k][1], q[k][0]), k


@pytest.mark.parametrize("condition", ["control", "keyword"])
def test_batched_seeds_equal_separate_runs(condition):
    """3 seeds in one model follow the trajectories of the 3 seeds trained alone."""
    cfg = SyntheticConfig(steps=4, hidden=8, embed=6, batch_size=5, eval_every=2,
                          n_test=6, lr=1e-2, dtype="float64")
    heads = [] if condition == "keyword" else None
    runs = [Run(condition, s, init_seed=s, data_seed=s,
                head_seeds=heads if heads is not None else [s]) for s in (0, 1, 2)]
    together = train_runs(runs, cfg)
    for r, run in enumerate(runs):
        alone = train_runs([run], cfg)
        for k, v in together["params"].items():
            assert torch.allclose(v[r], alone["params"][k][0], atol=1e-10, rtol=1e-8), k
        assert np.allclose(np.asarray(together["accuracy"])[:, r],
                           np.asarray(alone["accuracy"])[:, 0])
    # and the seeds really differ (different init and data)
    assert not torch.allclose(together["params"]["enc_Wx"][0], together["params"]["enc_Wx"][1])


def test_keyword_gammas_hand_case():
    """gamma_l = (2y-1) W^T h_l at l*, l*+1, mean and L, averaged over positives only."""
    params = tsm.init_classifier([0], 41, 4, dtype=torch.float64)
    x = torch.as_tensor(np.random.default_rng(1).integers(2, 41, (1, 3, 5)))
    x[0, 0, 2] = 1
    x[0, 1, 4] = 1
    y = torch.tensor([[1, 1, 0]])
    l_star = torch.tensor([[2, 4, -1]])
    g = tsm.keyword_gammas(params, x, y, l_star)
    with torch.no_grad():
        logits = tsm.classifier_position_logits(params, x)[0]           # (3, 5)
    assert np.isclose(g["lstar"].item(), (logits[0, 2] + logits[1, 4]).item() / 2)
    assert np.isclose(g["lstar_next"].item(), logits[0, 3].item())    # l* = L-1 has no next
    assert np.isclose(g["mean"].item(), logits[:2].mean(1).mean().item())
    assert np.isclose(g["last"].item(), logits[:2, 4].mean().item())


def test_loss_finite_at_large_logits():
    params = tsm.init_seq2seq([0], [[0]], 9, 6, dtype=torch.float64)
    with torch.no_grad():
        params["N_W2"].mul_(1e4)
    src = torch.ones(1, 2, 5, dtype=torch.long)
    loss, acc = tsm.seq2seq_loss(params, src, src)
    assert torch.isfinite(loss).all()


def test_multihead_scenarios_draw_from_the_right_pool():
    """Sec. 5.2: all-bad holds K distinct bad heads, one-good exactly one good head."""
    from minimal_attn.backends.snell.synthetic_heads import multihead_runs

    screened = {"good": [3, 7], "bad": [0, 1, 2, 4, 5, 6, 8, 9, 10]}
    runs, skipped = multihead_runs(seeds=5, first_seed=2, heads=8, screened=screened)
    assert not skipped
    by = {}
    for r in runs:
        by.setdefault(r.label, []).append(r)
        assert r.init_seed == 2 and r.data_seed == 2 and len(set(r.head_seeds)) == 8
    assert {len(v) for v in by.values()} == {5}
    assert all(set(r.head_seeds) <= set(screened["bad"]) for r in by["all-bad"])
    assert all(len(set(r.head_seeds) & set(screened["good"])) == 1 for r in by["one-good"])
    pool = set(screened["good"] + screened["bad"])
    assert all(not (set(r.head_seeds) & pool) for r in by["independent"])
    _, skipped = multihead_runs(2, 0, 8, {"good": [], "bad": [0, 1, 2]})
    assert set(skipped) == {"all-bad", "one-good"}


def test_a_given_head_pool_must_match_the_run(tmp_path):
    """run_synthetic(head_pool=...) draws heads from a pool screened elsewhere: one
    screened with other settings, of another size or for another task is refused
    before any training (nothing written)."""
    from minimal_attn.backends.snell.synthetic_experiments import run_synthetic
    from minimal_attn.backends.snell.synthetic_heads import label_pool, pool_meta
    from minimal_attn.backends.snell.synthetic_train import SyntheticConfig
    from minimal_attn.errors import InputError

    config = SyntheticConfig(steps=2, hidden=4, eval_every=1, n_test=4)
    right = label_pool(pool_meta(0, 3, config), [0.99, 0.1, 0.2])
    assert right["good"] == [0] and right["bad"] == [1, 2]
    for pool, kwargs, needle in (
            (label_pool(pool_meta(0, 3, SyntheticConfig(steps=3, hidden=4, eval_every=1,
                                                        n_test=4)), [0.1] * 3), {}, "other"),
            (label_pool(pool_meta(1, 3, config), [0.1] * 3), {}, "other settings"),
            (right, {"pool": 4}, "other settings"),
            (right, {"task": "copy"}, "for task multihead"),
            ({"good": [0]}, {}, "not a head pool")):
        args = dict({"task": "multihead", "pool": 3}, **kwargs)
        with pytest.raises(InputError, match=needle):
            run_synthetic(args.pop("task"), config, seeds=1, heads=2, out_dir=str(tmp_path / "o"),
                          head_pool=pool, pool_seed=0, **args)
        assert not (tmp_path / "o").exists()


def test_classifier_is_bidirectional():
    """App. A.8: h_1 sees the last word (backward LSTM), h_L sees the first (forward)."""
    params = tsm.init_classifier([0], 41, 4, dtype=torch.float64)
    x = torch.as_tensor(np.random.default_rng(2).integers(2, 41, (1, 1, 6)))
    y = x.clone()
    y[0, 0, -1] = 1 if x[0, 0, -1] != 1 else 2
    z = x.clone()
    z[0, 0, 0] = 1 if x[0, 0, 0] != 1 else 2
    with torch.no_grad():
        gx, gy, gz = (tsm.classifier_position_logits(params, v)[0, 0] for v in (x, y, z))
    assert abs(gx[0] - gy[0]) > 1e-6 and abs(gx[-1] - gz[-1]) > 1e-6


def test_vocab_option_sets_the_id_range_and_keeps_heads():
    from minimal_attn.errors import InputError
    runs = [Run("permutation", 0, init_seed=0, head_seeds=[5], data_seed=0)]
    cfg = SyntheticConfig(steps=1, hidden=4, eval_every=1, n_test=4)
    wide = tsm_params(runs, SyntheticConfig(**{**cfg.__dict__, "vocab": 60}))
    assert wide["emb_src"].shape[1] == 61 and wide["N_W2"].shape[2] == 61
    assert tsm_params(runs, cfg)["emb_src"].shape[1] == 41            # permutations: 1..40
    assert torch.equal(wide["W_att"], tsm_params(runs, cfg)["W_att"])  # heads do not move
    with pytest.raises(InputError, match="vocab"):
        tsm_params(runs, SyntheticConfig(**{**cfg.__dict__, "vocab": 39}))


def tsm_params(runs, config):
    from minimal_attn.backends.snell.synthetic_train import init_params
    return init_params(runs, config)


@pytest.mark.parametrize("heads", [1, 2])
def test_seq2seq_gradients_match_nn_lstm_reference(heads):
    """Every parameter's gradient of the batched model's loss equals, seed by seed, the
    torch.nn.LSTM reference model's (autograd through torch's own LSTM), float64."""
    params = tsm.init_seq2seq([3, 4], [[10 + k for k in range(heads)], [20, 21][:heads]],
                              n_vocab=9, hidden=6, embed=5, dtype=torch.float64)
    for v in params.values():
        v.requires_grad_(True)
    rng = np.random.default_rng(1)
    src = torch.as_tensor(rng.integers(1, 9, (2, 3, 7)))
    tgt = torch.as_tensor(rng.integers(1, 9, (2, 3, 6)))
    tgt_in = torch.cat([torch.zeros_like(tgt[..., :1]), tgt[..., :-1]], dim=-1)
    loss, _ = tsm.seq2seq_loss(params, src, tgt)
    loss.sum().backward()
    for r in range(2):
        mine = {k: v[r].detach().clone().requires_grad_(True) for k, v in params.items()}
        logits = _reference_logits(mine, src[r], tgt_in[r])
        nll = -torch.log_softmax(logits, -1).gather(-1, tgt[r][..., None])[..., 0]
        nll.sum(-1).mean().backward()
        for k, v in mine.items():
            assert v.grad is not None and v.grad.abs().max() > 0, k
            torch.testing.assert_close(params[k].grad[r], v.grad, rtol=1e-9, atol=1e-12)


def test_keyword_gammas_average_over_every_positive_whatever_the_chunks():
    # the positives are not spread evenly over the chunks of the test set: each gamma is
    # their mean over all of them, as with the whole test set in one chunk
    from minimal_attn.backends.snell.synthetic_experiments import plain_runs
    from minimal_attn.backends.snell.synthetic_train import evaluate, init_params

    config = SyntheticConfig(hidden=8, n_test=60, dtype="float64", uniform=True)
    runs = plain_runs("keyword", 2, 0)
    params = init_params(runs, config)
    whole = evaluate(params, runs, config, chunk=60)
    for chunk in (7, 25):
        cut = evaluate(params, runs, config, chunk=chunk)
        assert cut.keys() == whole.keys() and any(k.startswith("gamma_") for k in cut)
        for k in cut:
            np.testing.assert_allclose(cut[k], whole[k], rtol=1e-12, atol=1e-12)
