"""Training one LSTM attention model (Snell et al. 2021, A.8): resume equals uninterrupted."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.torch_seq_train import (  # noqa: E402
    SeqTrainConfig,
    batch_indices,
    build_model,
    load_run,
    train_seq,
)
from minimal_attn.seq_data import TextTask  # noqa: E402


def _task(kind):
    rng = np.random.default_rng(0)
    src = [rng.integers(3, 12, rng.integers(2, 7)) for _ in range(40)]
    if kind == "classify":
        tgt = [np.array([int(3 in s)]) for s in src]
        return TextTask("classify", src[:30], tgt[:30], src[30:], tgt[30:], n_vocab=12,
                        n_out=2, itos=[str(i) for i in range(12)])
    tgt = [np.concatenate([s[::-1], [2]]) for s in src]
    return TextTask("translate", src[:30], tgt[:30], src[30:], tgt[30:], n_vocab=12, n_out=12,
                    itos=[str(i) for i in range(12)],
                    decode=lambda ids: " ".join(str(int(i)) for i in ids))


class StopError(Exception):
    pass


def _stop_at(step):
    def callback(event, info):
        if event == "eval" and info["step"] == step:
            raise StopError
    return callback


@pytest.mark.parametrize("kind,attention", [("classify", "learned"), ("classify", "frozen"),
                                            ("translate", "learned")])
def test_resume_equals_uninterrupted(tmp_path, torch_one_thread, kind, attention):
    task = _task(kind)
    config = SeqTrainConfig(task=kind, attention=attention, steps=8, batch_size=4, hidden=8,
                            emb=6, out_hidden=8, eval_every=4, seed=3, device="cpu",
                            train_eval=5)
    train_seq(task, config, tmp_path / "full")
    with pytest.raises(StopError):
        train_seq(task, config, tmp_path / "cut", callback=_stop_at(4))
    assert load_run(tmp_path / "cut")[0][-1]["step"] == 4
    train_seq(task, config, tmp_path / "cut")
    (h1, e1), (h2, e2) = load_run(tmp_path / "full"), load_run(tmp_path / "cut")
    assert h1 == h2 and [h["step"] for h in h1] == [0, 4, 8]
    for step in e1:
        assert sorted(e1[step]) == sorted(e2[step])
        for key in e1[step]:
            for a, b in zip(e1[step][key], e2[step][key]):
                assert np.array_equal(a, b)
    final = e1[8]
    assert {"val_alpha", "val_beta", "train_alpha"} <= set(final)
    assert ("val_delta" in final) == (attention == "learned")
    s1 = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)["model"]
    s2 = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)["model"]
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    if attention == "frozen":                        # A.6: only the attention layer moved
        torch.manual_seed(3)
        init = build_model(task, config.resolved()).state_dict()
        moved = {k for k in s1 if not torch.equal(s1[k], init[k])}
        assert moved and moved <= {"Q.weight", "Q.bias", "v.weight", "v.bias"}


def test_batches_cover_every_example_once_per_epoch():
    seen = np.concatenate([batch_indices(s, 4, 10, seed=1) for s in range(5)])   # 2 epochs
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:]) == list(range(10))
