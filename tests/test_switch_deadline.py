"""The hybrid's ``--switch-step auto`` meets its deadline, steps - steps // 4, exactly, in
``train-seq`` and ``synthetic``, even when no scheduled evaluation falls on it."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_seq_train import StopError, _stop_at  # noqa: E402 (a run cut at an evaluation)

from minimal_attn.backends.snell.attention_losses import switch_deadline  # noqa: E402
from minimal_attn.backends.snell.synthetic_train import (  # noqa: E402
    Run,
    SyntheticConfig,
    train_runs,
)
from minimal_attn.backends.snell.train import SeqTrainConfig, load_run, train_seq  # noqa: E402
from minimal_attn.cli.main import cli  # noqa: E402
from minimal_attn.datasets.seq import TextTask  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
STEPS, EVERY = 8, 4            # evaluations at 0, 4, 8: none on the deadline
DEADLINE = STEPS - STEPS // 4


def test_the_deadline_leaves_ha_a_quarter_of_the_steps_and_at_least_one():
    for steps in range(1, 300):
        d = switch_deadline(steps)
        assert 0 <= d < steps and steps - d >= steps // 4
        if steps >= 4:
            assert d == steps - steps // 4
    assert DEADLINE % EVERY != 0                      # the tests below need a missed deadline


def _classify_task():
    rng = np.random.default_rng(0)
    src = [rng.integers(3, 12, rng.integers(2, 7)) for _ in range(40)]
    tgt = [np.array([int(3 in s)]) for s in src]
    return TextTask("classify", src[:30], tgt[:30], src[30:], tgt[30:], n_vocab=12, n_out=2,
                    itos=[str(i) for i in range(12)])


def _seq_config(switch):
    return SeqTrainConfig(task="classify", steps=STEPS, batch_size=4, hidden=6, emb=5,
                          eval_every=EVERY, seed=3, device="cpu", paradigm="hybrid",
                          switch_step=switch)


def _final_model(out):
    return torch.load(out / "checkpoint.pt", weights_only=False)["model"]


def test_train_seq_auto_switches_by_the_deadline_and_trains_ha_after(tmp_path):
    task = _classify_task()
    train_seq(task, _seq_config("auto"), tmp_path / "auto")
    history, _ = load_run(tmp_path / "auto")
    switched = [h["switch_step"] for h in history if "switch_step" in h]
    assert switched == [DEADLINE] and DEADLINE in [h["step"] for h in history]
    # HA trained from the deadline on: the run is the fixed hybrid switching there, and not
    # the one that never switches
    for switch, same in ((DEADLINE, True), (STEPS, False)):
        train_seq(task, _seq_config(switch), tmp_path / str(switch))
        a, b = _final_model(tmp_path / "auto"), _final_model(tmp_path / str(switch))
        assert all(torch.equal(a[k], b[k]) for k in a) == same, switch
    # cut at the deadline's evaluation and resumed: the same switch, the same model
    with pytest.raises(StopError):
        train_seq(task, _seq_config("auto"), tmp_path / "cut", progress=_stop_at(DEADLINE))
    assert load_run(tmp_path / "cut")[0][-1]["step"] == DEADLINE
    train_seq(task, _seq_config("auto"), tmp_path / "cut")
    assert load_run(tmp_path / "cut")[0] == history
    a, b = _final_model(tmp_path / "auto"), _final_model(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)


def _synthetic_config(switch, steps=STEPS):
    return SyntheticConfig(steps=steps, hidden=4, embed=3, batch_size=3, n_test=4,
                           eval_every=EVERY, paradigm="hybrid", switch_step=switch)


RUNS = [Run("control", s, init_seed=s, head_seeds=[s], data_seed=s) for s in (0, 1)]


def test_synthetic_auto_switches_by_the_deadline_and_trains_ha_after(tmp_path):
    auto = train_runs(RUNS, _synthetic_config("auto"))
    assert auto["switch_step"] == [DEADLINE] * len(RUNS)
    assert DEADLINE in auto["step"] and auto["step"][-1] == STEPS
    for switch, same in ((DEADLINE, True), (STEPS, False)):
        fixed = train_runs(RUNS, _synthetic_config(switch))
        equal = all(torch.equal(v, fixed["params"][k]) for k, v in auto["params"].items())
        assert equal == same, switch
    # cut at the deadline's evaluation and resumed: the same switches, the same parameters
    ckpt = str(tmp_path / "train.ckpt")
    with pytest.raises(StopError):
        train_runs(RUNS, _synthetic_config("auto"), ckpt, progress=_stop_at(DEADLINE))
    rest = train_runs(RUNS, _synthetic_config("auto"), ckpt)
    assert rest["resumed_from"] == DEADLINE and rest["switch_step"] == auto["switch_step"]
    for k, v in auto["params"].items():
        assert torch.equal(v, rest["params"][k]), k


def test_a_one_step_synthetic_hybrid_trains_its_one_step_with_ha():
    one = train_runs(RUNS, _synthetic_config("auto", steps=1))
    assert one["switch_step"] == [0, 0]
    ha = train_runs(RUNS, SyntheticConfig(**{**_synthetic_config("auto", 1).__dict__,
                                             "paradigm": "ha", "switch_step": None}))
    for k, v in one["params"].items():
        assert torch.equal(v, ha["params"][k]), k


def test_the_synthetic_command_reports_the_deadline_switch(tmp_path):
    from click.testing import CliRunner

    out = tmp_path / "hy"
    res = CliRunner().invoke(cli, [str(a) for a in (
        "synthetic", "copy-control", "--seeds", "1", "--steps", STEPS, "--hidden", "4",
        "--embed", "3", "--batch-size", "3", "--n-test", "4", "--eval-every", EVERY,
        "--paradigm", "hybrid", "--switch-step", "auto", "--no-progress", "--out", out)])
    assert res.exit_code == 0, res.output
    seed = json.loads((out / "results.json").read_text())["seeds"][0]
    assert seed["switch_step"] == DEADLINE and DEADLINE in seed["step"]
