"""What must hold at a small size (Snell et al. 2021, Table 2 and Sec. 3.2), on real SST-2 lines.

A(alpha, beta), A(alpha, beta^uf) and A(beta^uf, beta^px) are each at least twice the
random baseline A-hat, and the model trained with uniform attention alone is well above
the majority class (KTIW is learned without attention).
"""

import pytest

pytest.importorskip("torch")

from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement  # noqa: E402


def test_sst2_small_row_beats_twice_the_baseline(tmp_path, shared_data, torch_one_thread):
    config = AgreementConfig(task="classify", dataset="sst2", data_dir=str(shared_data / "sst2"),
                             steps=200, hidden=16, emb=16, lr=1e-2, eval_every=100,
                             max_train=3000, max_val=300, proxy_d=32, frozen=False,
                             logistic=False, kendall=False, device="cpu")
    r = run_agreement(config, str(tmp_path / "sst2"))
    for key in ("A_alpha_beta", "A_alpha_beta_uf", "A_beta_uf_beta_px"):
        assert r[key] >= 2 * r["A_hat"], (key, r[key], r["A_hat"])
    uniform_best = max(h["val_perf"] for h in r["runs"]["uniform"])
    assert uniform_best >= r["data"]["majority_val"] + 0.1, uniform_best
