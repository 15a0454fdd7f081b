"""The shared epoch/checkpoint skeleton: schedule, auto switch, collapse, divergence, resume."""

import os

import numpy as np
import pytest

from minimal_attn import data
from minimal_attn.errors import InputError
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.linear_train import train_numpy_run
from minimal_attn.experiments.train_loop import (
    TrainConfig,
    affecting,
    auto_switch,
    checkpoint_path,
    collapse_warnings,
)


class Scripted:
    """A trainer whose epochs return scripted (loss, accuracy, mean a_z)."""

    KIND, LR_TABLE, m = "scripted", {"sa": 0.1, "ha": 0.2, "lv": 0.3}, 5

    def __init__(self, a_z, loss=None):
        self.a_z, self.loss = list(a_z), loss or [1.0] * len(a_z)
        self.calls, self.rules = [], []

    def steps(self, batch_size):
        return 1

    def train_epoch(self, phase, lr, epoch, step):
        self.calls.append((phase, lr))
        return self.loss[epoch], 0.5, self.a_z[epoch]

    def evaluate(self, split, rule):
        self.rules.append((split, rule))
        return {"accuracy": 0.5, "saif": 0.0}, {}


def test_auto_switch_on_a_scripted_a_z_history():
    # m = 5: risen means a_z > 0.2 + 0.1 * 0.8 = 0.28; stalled: gain < 0.02 over 2 epochs
    assert not auto_switch([0.2, 0.2, 0.2, 0.2], 5)                  # never rose
    assert not auto_switch([0.2, 0.25, 0.3, 0.35], 5)                # still improving
    assert auto_switch([0.2, 0.3, 0.39, 0.40, 0.405], 5)             # risen, stalled
    assert not auto_switch([0.39, 0.40], 5)                          # too short to judge
    trainer = Scripted([0.2, 0.3, 0.39, 0.40, 0.405, 0.6, 0.7, 0.8, 0.8, 0.8])
    config = TrainConfig(paradigm="hybrid", epochs=10, switch_epoch="auto")
    result = run_epochs(config, trainer, "data")
    assert result["switch_epoch"] == 5                        # after the 5th epoch's plateau
    assert [c[0] for c in trainer.calls] == ["sa"] * 5 + ["ha"] * 5
    assert [c[1] for c in trainer.calls] == [0.1] * 5 + [0.2] * 5
    # each phase's test evaluation uses its own inference rule
    tests = [rule for split, rule in trainer.rules if split == "test"]
    assert tests[:5] == ["sa"] * 5 and tests[5:] == ["hybrid"] * 5
    assert [h["rule"] for h in result["history"]] == ["sa"] * 5 + ["ha"] * 5


def test_auto_switch_deadline_leaves_ha_a_quarter_of_the_epochs():
    trainer = Scripted([0.2] * 8)                               # SA's focus never moves
    result = run_epochs(TrainConfig(paradigm="hybrid", epochs=8, switch_epoch="auto"),
                        trainer, "data")
    assert result["switch_epoch"] == 6 and [c[0] for c in trainer.calls][5:] == ["sa", "ha",
                                                                                 "ha"]


@pytest.mark.parametrize("switch, warned", [(4, True), (3, False), ("auto", False)])
def test_a_hybrid_that_never_trains_with_ha_says_so(switch, warned):
    # a switch at `epochs` leaves every epoch SA, yet the result is scored by HA's rule
    result = run_epochs(TrainConfig(paradigm="hybrid", epochs=4, switch_epoch=switch),
                        Scripted([0.2] * 4), "data")
    said = [w for w in result["warnings"] if "trained only with SA" in w]
    assert bool(said) == warned
    assert ("ha" in [h["phase"] for h in result["history"]]) != warned


def test_collapse_warning_on_a_scripted_history():
    def history(loss, a_z):
        return [{"loss": v, "mean_a_z": a} for v, a in zip(loss, a_z)]

    calm = history([1.0, 0.8, 0.7, 0.6, 0.55], [0.2, 0.3, 0.35, 0.38, 0.39])
    assert collapse_warnings(calm, 5) == []
    # the run: a_z up to 0.39, then back to 0.20 while the loss climbs
    late = history([1.0, 0.8, 0.7, 0.75, 0.9, 1.1], [0.2, 0.3, 0.39, 0.25, 0.2, 0.2])
    warnings = collapse_warnings(late, 5)
    assert len(warnings) == 2
    assert "rose for 3 epochs" in warnings[0] and "epochs 4-6" in warnings[0]
    assert "0.390 in epoch 3" in warnings[1] and "0.200" in warnings[1]
    # the warning is recorded in the run's result
    r = run_epochs(TrainConfig(paradigm="sa", epochs=6), Scripted(
        [0.2, 0.3, 0.39, 0.25, 0.2, 0.2], [1.0, 0.8, 0.7, 0.75, 0.9, 1.1]), "data")
    assert r["warnings"] == warnings


@pytest.mark.parametrize("loss", [float("nan"), float("inf"), 1.1 * 100 * 1.2])
def test_divergence_stops_with_the_fix(loss):
    trainer = Scripted([0.2] * 3, [1.2, 1.0, loss])        # reference: max(log 3, 1.2)
    with pytest.raises(InputError, match="diverged; lower the learning rate") as info:
        run_epochs(TrainConfig(paradigm="lv", epochs=3), trainer, "data")
    assert info.value.param == "lr" and "epoch 3" in str(info.value)
    assert run_epochs(TrainConfig(paradigm="lv", epochs=3),
                      Scripted([0.2] * 3, [1.2, 1.0, 90.0]), "data")["history"]


def test_numpy_divergence_at_a_huge_learning_rate():
    train = data.gaussian_mosaics(40, 3, 3, seed=0)
    with pytest.raises(InputError, match="diverged"):
        train_numpy_run(TrainConfig(paradigm="sa", epochs=3, lr=1e30, batch_size=20),
                        train, train)


def test_checkpoint_settings_depend_on_the_paradigm():
    sa = TrainConfig(paradigm="sa", lr=0.1, epochs=4)
    assert affecting(sa, None) == affecting(
        TrainConfig(paradigm="sa", lr=0.1, epochs=8, hybrid_lr=0.7, switch_epoch=2,
                    device="cuda"), None)
    assert affecting(sa, None) != affecting(TrainConfig(paradigm="sa", lr=0.2), None)
    # the stop rule moves where a run ends; the SAIF threshold scores its history
    for other in (dict(stop_loss=0.05), dict(threshold=0.5)):
        assert affecting(sa, None) != affecting(TrainConfig(paradigm="sa", lr=0.1, **other),
                                                None)
    hybrid = TrainConfig(paradigm="hybrid", lr=0.1, hybrid_lr=0.3, switch_epoch="auto")
    assert affecting(hybrid, None)["lr"] == {"sa": 0.1, "ha": 0.3}
    assert affecting(hybrid, None) != affecting(
        TrainConfig(paradigm="hybrid", lr=0.1, hybrid_lr=0.3, switch_epoch=3), None)


@pytest.fixture
def gaussian():
    return data.gaussian_mosaics(40, 3, 3, seed=0), data.gaussian_mosaics(20, 3, 3, seed=1)


def _two_epochs_then_corrupt(tmp_path, gaussian, content):
    config = TrainConfig(paradigm="lv", epochs=3, batch_size=20)

    def after(epoch, record):
        if epoch == 1:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train_numpy_run(config, *gaussian, out_dir=str(tmp_path), callback=after)
    path = checkpoint_path(str(tmp_path), config)
    assert os.path.exists(path + ".prev")
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "wb") as f:
        f.write(content(good))
    return config, path


@pytest.mark.parametrize("content", [lambda good: good[: len(good) // 2],
                                     lambda good: np.random.default_rng(0).bytes(500)])
def test_corrupt_checkpoint_falls_back_to_prev_with_a_warning(tmp_path, gaussian, content):
    config, path = _two_epochs_then_corrupt(tmp_path, gaussian, content)
    lines = []
    resumed = train_numpy_run(config, *gaussian, out_dir=str(tmp_path), resume=True,
                              log=lines.append)
    assert resumed["resumed_from_epoch"] == 1                 # .prev holds epoch 1
    assert len(lines) == 1 and path in lines[0] and "unreadable" in lines[0]
    fresh = train_numpy_run(config, *gaussian)
    assert resumed["test"] == fresh["test"]


def test_corrupt_checkpoint_without_prev_is_refused_with_the_file(tmp_path, gaussian):
    config, path = _two_epochs_then_corrupt(tmp_path, gaussian, lambda good: b"\0" * 64)
    os.unlink(path + ".prev")
    with pytest.raises(InputError, match="cannot be read") as info:
        train_numpy_run(config, *gaussian, out_dir=str(tmp_path), resume=True)
    assert path in str(info.value)
