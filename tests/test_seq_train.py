"""Training one LSTM attention model (Snell et al. 2021, A.8): resume equals uninterrupted."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell.train import (  # noqa: E402
    SeqTrainConfig,
    batch_indices,
    build_model,
    load_run,
    train_seq,
)
from minimal_attn.datasets.seq import TextTask  # noqa: E402
from minimal_attn.errors import InputError  # noqa: E402


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
    def progress(label, done, total, note=None):
        if done == step and note is not None:        # the evaluation at ``step`` is written
            raise StopError
    return progress


SCHEDULE = {"lr_schedule": "cosine", "warmup": 3, "clip": 0.5, "dropout": 0.1}


@pytest.mark.parametrize("kind,attention,extra", [
    ("classify", "learned", {}), ("classify", "frozen", {}), ("translate", "learned", {}),
    ("translate", "learned", SCHEDULE), ("translate", "learned", {"paradigm": "lv"}),
    ("classify", "learned", {"paradigm": "ha"}),
    ("translate", "learned", {"paradigm": "hybrid", "switch_step": "auto"})])
def test_resume_equals_uninterrupted(tmp_path, torch_one_thread, kind, attention, extra):
    task = _task(kind)
    config = SeqTrainConfig(task=kind, attention=attention, steps=8, batch_size=4, hidden=8,
                            emb=6, out_hidden=8, eval_every=4, seed=3, device="cpu",
                            train_eval=5, **extra)
    train_seq(task, config, tmp_path / "full")
    with pytest.raises(StopError):
        train_seq(task, config, tmp_path / "cut", progress=_stop_at(4))
    assert load_run(tmp_path / "cut")[0][-1]["step"] == 4
    train_seq(task, config, tmp_path / "cut")
    (h1, e1), (h2, e2) = load_run(tmp_path / "full"), load_run(tmp_path / "cut")
    # an auto hybrid also evaluates at its latest switch, 8 - 8 // 4 (test_switch_deadline.py)
    late = [6] if extra.get("switch_step") == "auto" else []
    assert h1 == h2 and [h["step"] for h in h1] == [0, 4] + late + [8]
    # timing.json: one record per call, the cut call's kept when the run continued
    calls = {run: json.loads((tmp_path / run / "timing.json").read_text())["calls"]
             for run in ("full", "cut")}
    assert [(c["from_step"], c["to_step"], c["evals"]) for c in calls["full"]] == \
        [(0, 8, 3 + len(late))]
    assert [(c["from_step"], c["to_step"], c["evals"]) for c in calls["cut"]] == \
        [(0, 4, 2), (4, 8, 1 + len(late))]
    assert all(c["setup_s"] > 0 and c["train_s"] > 0 and c["eval_s"] > 0
               for c in calls["full"] + calls["cut"])
    for name in ("checkpoint.pt", "checkpoint.pt.prev"):      # started over: one call again
        (tmp_path / "full" / name).unlink(missing_ok=True)
    train_seq(task, config, tmp_path / "full")
    again = json.loads((tmp_path / "full" / "timing.json").read_text())["calls"]
    assert [(c["from_step"], c["to_step"]) for c in again] == [(0, 8)]
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


def test_lr_schedule_warmup_then_cosine_to_one_percent():
    c = SeqTrainConfig(steps=104, warmup=4, lr=2e-3, lr_schedule="cosine").resolved()
    assert [c.lr_at(s) for s in range(4)] == pytest.approx([5e-4, 1e-3, 1.5e-3, 2e-3])
    assert c.lr_at(4) == pytest.approx(2e-3)                   # cosine starts at lr
    assert c.lr_at(54) == pytest.approx(2e-3 * (0.01 + 0.99 / 2))   # half way: the mean
    assert c.lr_at(104) == pytest.approx(2e-5)                 # ends at lr / 100
    lrs = [c.lr_at(s) for s in range(4, 105)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    flat = SeqTrainConfig(steps=10, lr=1e-3).resolved()
    assert {flat.lr_at(s) for s in range(10)} == {1e-3}


def test_schedule_and_clip_reach_the_optimizer(tmp_path, torch_one_thread):
    task = _task("translate")
    base = dict(task="translate", steps=6, batch_size=4, hidden=8, out_hidden=8, eval_every=6,
                seed=1, device="cpu", bleu=False)
    c = SeqTrainConfig(**base, **SCHEDULE)
    train_seq(task, c, tmp_path / "s")
    state = torch.load(tmp_path / "s" / "checkpoint.pt", weights_only=False)
    assert state["opt"]["param_groups"][0]["lr"] == pytest.approx(c.resolved().lr_at(5))
    train_seq(task, SeqTrainConfig(**base), tmp_path / "c")
    plain = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)["model"]
    assert any(not torch.equal(plain[k], state["model"][k]) for k in plain)


def test_runs_from_before_the_schedule_options_still_continue(tmp_path, torch_one_thread):
    task = _task("classify")
    c = SeqTrainConfig(steps=4, batch_size=4, hidden=8, emb=6, eval_every=2, device="cpu")
    train_seq(task, c, tmp_path / "r")
    saved = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=False)["config"]
    assert not {"lr_schedule", "warmup", "clip"} & set(saved)     # as a FORMAT 1 run wrote it
    train_seq(task, c, tmp_path / "r")                                # reused, not refused
    assert [h["step"] for h in load_run(tmp_path / "r")[0]] == [0, 2, 4]
    with pytest.raises(InputError, match=r"different settings .*warmup=0 \(now 2\)"):
        train_seq(task, SeqTrainConfig(**{**c.__dict__, "warmup": 2}), tmp_path / "r")
