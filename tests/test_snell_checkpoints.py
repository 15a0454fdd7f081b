"""Snell's trainers write the shared checkpoint format: a damaged newest checkpoint resumes
exactly from its ``.prev``, and a resume with other settings is refused naming them."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell.synthetic_train import (  # noqa: E402
    Run,
    SyntheticConfig,
    train_runs,
)
from minimal_attn.backends.snell.train import SeqTrainConfig, load_run, train_seq  # noqa: E402
from minimal_attn.datasets.seq import TextTask  # noqa: E402
from minimal_attn.errors import InputError  # noqa: E402


class StopError(Exception):
    pass


def _task(shift=0):
    rng = np.random.default_rng(0)
    src = [rng.integers(3, 12, rng.integers(2, 7)) for _ in range(40)]
    tgt = [np.array([int(3 in s)]) for s in src]
    src[0] = src[0] + shift
    return TextTask("classify", src[:30], tgt[:30], src[30:], tgt[30:], n_vocab=15, n_out=2,
                    itos=[str(i) for i in range(15)])


SEQ = dict(steps=8, batch_size=4, hidden=8, emb=6, eval_every=2, seed=2, device="cpu")


def _stop_seq_at(step):
    def progress(label, done, total, note=None):        # evaluations come with a note
        if note is not None and note.startswith(f"step {step} "):
            raise StopError
    return progress


def test_seq_damaged_checkpoint_resumes_from_prev_exactly(tmp_path, torch_one_thread):
    task, config = _task(), SeqTrainConfig(**SEQ)
    train_seq(task, config, tmp_path / "full")
    with pytest.raises(StopError):
        train_seq(task, config, tmp_path / "cut", progress=_stop_seq_at(6))
    ckpt = tmp_path / "cut" / "checkpoint.pt"
    prev = torch.load(str(ckpt) + ".prev", weights_only=True)
    assert prev["step"] == 4 and prev["format"] == 2 and prev["kind"] == "seq"
    ckpt.write_bytes(ckpt.read_bytes()[:200])                      # a cut-off write
    lines, done = [], []
    train_seq(task, config, tmp_path / "cut", log=lines.append,
              progress=lambda label, n, total, note=None: done.append(n))
    assert done[0] == 5                     # from .prev's step 4: the first step is the 5th
    assert len(lines) == 1 and "checkpoint.pt.prev" in lines[0]
    (h1, e1), (h2, e2) = load_run(tmp_path / "full"), load_run(tmp_path / "cut")
    assert h1 == h2 and [h["step"] for h in h2] == [0, 2, 4, 6, 8]
    for key in e1[8]:
        assert all(np.array_equal(a, b) for a, b in zip(e1[8][key], e2[8][key]))
    s1, s2 = (torch.load(d / "checkpoint.pt", weights_only=True)["model"]
              for d in (tmp_path / "full", tmp_path / "cut"))
    assert all(torch.equal(s1[k], s2[k]) for k in s1)


def test_seq_other_settings_or_data_refused_in_one_line(tmp_path, torch_one_thread):
    out = tmp_path / "run"
    train_seq(_task(), SeqTrainConfig(**SEQ), out)
    before = sorted(os.listdir(out))
    with pytest.raises(InputError) as err:
        train_seq(_task(), SeqTrainConfig(**{**SEQ, "hidden": 10, "lr": 2e-3}), out)
    msg = str(err.value)
    assert "\n" not in msg and "hidden=8 (now 10)" in msg and "lr=0.001 (now 0.002)" in msg
    assert "data" not in msg.split("(", 1)[1] and "another --out" in msg
    with pytest.raises(InputError, match=r"different settings \(data"):
        train_seq(_task(shift=1), SeqTrainConfig(**SEQ), out)
    assert sorted(os.listdir(out)) == before


CFG = SyntheticConfig(steps=4, hidden=6, embed=5, batch_size=3, eval_every=1, n_test=4,
                      lr=1e-2, dtype="float64")
RUNS = [Run("control", s, init_seed=s, head_seeds=[s], data_seed=s) for s in (0, 1)]


def _stop_syn_at(step):
    def progress(label, done, total, note=None):
        if done == step:
            raise StopError
    return progress


def test_synthetic_damaged_checkpoint_resumes_from_prev_exactly(tmp_path, torch_one_thread):
    full = train_runs(RUNS, CFG, str(tmp_path / "full.ckpt"))
    path = str(tmp_path / "cut.ckpt")
    with pytest.raises(StopError):
        train_runs(RUNS, CFG, path, progress=_stop_syn_at(3))
    assert torch.load(path + ".prev", weights_only=True)["step"] == 2
    with open(path, "r+b") as f:
        f.truncate(150)
    lines = []
    again = train_runs(RUNS, CFG, path, log=lines.append)
    assert again["resumed_from"] == 2
    assert len(lines) == 1 and "cut.ckpt.prev" in lines[0] and "warning" in lines[0]
    assert again["accuracy"] == full["accuracy"] and again["step"] == full["step"]
    for k, v in full["params"].items():
        assert torch.equal(v, again["params"][k]), k


def test_synthetic_checkpoint_of_before_the_shared_header_still_resumes(tmp_path, torch_one_thread):
    path = str(tmp_path / "old.ckpt")
    with pytest.raises(StopError):
        train_runs(RUNS, CFG, path, progress=_stop_syn_at(2))
    state = torch.load(path, weights_only=True)
    config = {k: v for k, v in state.pop("config").items() if k != "runs"}
    state.pop("data")
    state["meta"] = {"config": config, "runs": [r.__dict__ for r in RUNS]}   # the old layout
    torch.save(state, path)
    os.unlink(path + ".prev")
    full = train_runs(RUNS, CFG)
    again = train_runs(RUNS, CFG, path)
    assert again["resumed_from"] == 2 and again["accuracy"] == full["accuracy"]
    with pytest.raises(InputError, match=r"lr=0.01 \(now 0.02\)"):
        train_runs(RUNS, SyntheticConfig(**{**CFG.__dict__, "lr": 2e-2}), path)


def test_synthetic_other_settings_refused_naming_them(tmp_path, torch_one_thread):
    path = str(tmp_path / "s.ckpt")
    train_runs(RUNS, SyntheticConfig(**{**CFG.__dict__, "steps": 2}), path)
    with pytest.raises(InputError) as err:
        train_runs(RUNS, SyntheticConfig(**{**CFG.__dict__, "hidden": 7}), path)
    assert "hidden=6 (now 7)" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match=r"different settings \(runs\)"):
        train_runs(RUNS[:1], CFG, path)
    assert train_runs(RUNS, CFG, path)["resumed_from"] == 2      # more steps: continues


def test_seq_divergence_names_its_first_step_when_read_late(tmp_path, torch_one_thread,
                                                            monkeypatch):
    """On a GPU the divergence flag is read every SYNC_EVERY steps: the error still names
    the first step whose loss was not finite, and no checkpoint holds a later step."""
    from minimal_attn.backends.snell import train as seq_train

    task, config = _task(), SeqTrainConfig(**{**SEQ, "lr": 1e30, "eval_every": 4})
    messages = []
    for every in (1, 3):
        monkeypatch.setattr(seq_train, "_sync_every", lambda device, every=every: every)
        out = tmp_path / f"every{every}"
        with pytest.raises(InputError, match=r"diverged at step \d+") as err:
            train_seq(task, config, out)
        messages.append(str(err.value))
        bad = int(str(err.value).split("step ")[1].split()[0])
        ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
        assert ckpt["step"] <= bad
    assert messages[0] == messages[1]
