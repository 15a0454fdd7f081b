"""The logistic sweep run in a child process while the models train gives the same rows."""

import numpy as np
import pytest

pytest.importorskip("torch")

from minimal_attn.backends.snell import row_proxies  # noqa: E402
from minimal_attn.backends.snell.config import AgreementConfig  # noqa: E402
from minimal_attn.datasets.seq import TextTask  # noqa: E402


def test_logistic_rows_from_the_child_equal_those_fitted_here(tmp_path):
    rng = np.random.default_rng(0)
    src = [rng.integers(0, 9, rng.integers(1, 7)) for _ in range(60)]
    tgt = [np.array([int(3 in s)]) for s in src]
    task = TextTask("classify", src[:45], tgt[:45], src[45:], tgt[45:], n_vocab=9, n_out=2,
                    itos=[str(i) for i in range(9)])
    c = AgreementConfig(device="cpu", train_eval=5)
    started = row_proxies.start_logistic(task, c, str(tmp_path / "logistic.npz"), "k",
                                        background=True)
    assert started is not None
    try:
        got = row_proxies.logistic_rows(task, c, started)
    finally:
        started[0].terminate()
    want = row_proxies.logistic_rows(task, c)
    assert sorted(got) == sorted(want) == ["lambda", "train_beta_log", "val_accuracy",
                                           "val_beta_log"]
    for key in ("val_beta_log", "train_beta_log"):
        assert len(got[key]) == len(want[key]) and all(
            np.array_equal(a, b) for a, b in zip(got[key], want[key]))
    assert got["lambda"] == want["lambda"] and got["val_accuracy"] == want["val_accuracy"]
    # on the CPU nothing starts unless asked (it would compete with training)
    assert row_proxies.start_logistic(task, c, str(tmp_path / "logistic.npz"), "k") is None
