"""Run control that leaves training unchanged: ``eval_every``, ``checkpoint_every`` and
``time_limit`` (issue 19: paper-size cells inside short GPU jobs).

References: the same runs with every epoch scored and saved (losses must be equal
bit for bit on the CPU, since neither option touches the trajectory), and the
checkpoint files themselves.
"""

import pytest

from minimal_attn.datasets.splits import load_mosaic_splits
from minimal_attn.errors import InputError
from minimal_attn.experiments import cells, results_store
from minimal_attn.experiments.config import ExperimentConfig, check_config
from minimal_attn.experiments.train_loop import TrainConfig

torch = pytest.importorskip("torch")
from minimal_attn.backends.vr.batched_seeds import train_seeds  # noqa: E402
from minimal_attn.backends.vr.train import train_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
SEEDS = [0, 1]


@pytest.fixture(scope="module")
def splits():
    return load_mosaic_splits("synthetic", 3, 30, 12)


def config(seed=0, **extra):
    return TrainConfig(**{**dict(paradigm="lv", epochs=5, batch_size=10, width=0.25,
                                 device="cpu", optimizer="adam", focus_init="mirror",
                                 classifier="lenet", seed=seed), **extra})


def _losses(history):
    return [h["loss"] for h in history]


def _run(batched, splits, out, **extra):
    if batched:
        return train_seeds([config(s, **extra) for s in SEEDS], splits.train, splits.test, out)
    return [train_run(config(s, **extra), splits.train, splits.test, out_dir=out)
            for s in SEEDS]


@pytest.mark.parametrize("batched", [False, True], ids=["separate", "batched"])
def test_eval_and_checkpoint_every_k_epochs_leave_training_unchanged(batched, splits,
                                                                     tmp_path):
    every = _run(batched, splits, str(tmp_path / "every"))
    sparse = _run(batched, splits, str(tmp_path / "sparse"), eval_every=2, checkpoint_every=3)
    for a, b in zip(every, sparse):
        assert _losses(a["history"]) == _losses(b["history"])
        # scored at epochs 2, 4 and the last (5); None in between
        scored = [h["epoch"] for h in b["history"] if h["test_accuracy"] is not None]
        assert scored == [2, 4, 5]
        for h in b["history"]:
            if h["test_accuracy"] is not None:
                same = a["history"][h["epoch"] - 1]
                assert (h["test_accuracy"], h["test_saif"]) == (same["test_accuracy"],
                                                                same["test_saif"])
        assert a["test"] == b["test"] and a["train"] == b["train"]
    # checkpoints at epoch 3 and the last: the file holds epoch 5 and resumes as done
    ckpt = torch.load(tmp_path / "sparse" / "checkpoints" / "lv_seed0.ckpt", weights_only=True)
    assert ckpt["epoch"] == 5


def test_checkpoint_every_keeps_the_last_saved_epoch_for_resume(splits, tmp_path):
    calls = []

    def interrupt(epoch, record):
        calls.append(epoch)
        if epoch == 3:                  # after epoch 4: saved at 3, not at 4
            raise KeyboardInterrupt

    out = str(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        train_run(config(checkpoint_every=3), splits.train, splits.test, out_dir=out,
                  callback=interrupt)
    resumed = train_run(config(checkpoint_every=3), splits.train, splits.test, out_dir=out,
                        resume=True)
    full = train_run(config(), splits.train, splits.test)
    assert resumed["resumed_from_epoch"] == 3
    assert _losses(resumed["history"]) == _losses(full["history"])


@pytest.mark.parametrize("batched", [False, True], ids=["separate", "batched"])
def test_a_time_limit_ends_the_run_at_an_epoch_boundary(batched, splits, tmp_path,
                                                        monkeypatch):
    """The clock runs out after epoch 2: the run stops there, is evaluated as it stands,
    says time_limited, and its checkpoint holds epoch 2."""
    done = []
    monkeypatch.setattr(TrainConfig, "deadline", lambda self: (lambda: len(done) >= 2))
    full = _run(batched, splits, None)
    out = str(tmp_path / "limited")
    if batched:
        runs = train_seeds([config(s, time_limit=60.0) for s in SEEDS], splits.train,
                           splits.test, out, callback=lambda e, r: done.append(e)
                           if r["seed"] == 0 else None)
    else:
        runs = []
        for s in SEEDS:
            done.clear()
            runs.append(train_run(config(s, time_limit=60.0), splits.train, splits.test,
                                  out_dir=out, callback=lambda e, r: done.append(e)))
    for r, f in zip(runs, full):
        assert r["time_limited"] is True and r["stopped_epoch"] is None
        assert len(r["history"]) == 2
        assert _losses(r["history"]) == _losses(f["history"])[:2]
        assert 0 <= r["test"]["accuracy"] <= 1
        ckpt = torch.load(tmp_path / "limited" / "checkpoints" / f"lv_seed{r['seed']}.ckpt",
                          weights_only=True)
        assert ckpt["epoch"] == 2


def test_a_run_without_a_limit_is_not_marked(splits):
    r = train_run(config(epochs=1), splits.train, splits.test)
    assert r["time_limited"] is False


def test_the_options_refuse_nonsense():
    for bad in (dict(eval_every=0), dict(checkpoint_every=-1), dict(time_limit=0.0),
                dict(time_limit=float("nan"))):
        with pytest.raises(InputError, match=next(iter(bad))):
            check_config(ExperimentConfig(**bad))
        with pytest.raises(InputError, match=next(iter(bad))):
            config(**bad)


def test_a_time_limited_cell_is_recorded_and_shown_as_partial(tmp_path, monkeypatch):
    monkeypatch.setattr(TrainConfig, "deadline", lambda self: (lambda: True))
    record = cells.run_cell("tiny-t1-synthetic-sa", None, str(tmp_path / "results"),
                            str(tmp_path / "work"), device="cpu", time_limit=30.0)
    assert record["settings"]["time_limit"] == 30.0
    assert all(record["result"]["time_limited"].values())
    assert set(record["result"]["epochs_run"].values()) == {0}
    # a partial record does not count as done: gpu_cells.sh runs the cell again
    assert not cells.finished("tiny-t1-synthetic-sa", str(tmp_path / "results"))
    page = results_store.render(results_store.read_cells(str(tmp_path / "results")))
    assert "cut by time limit (partial)" in page
    with pytest.raises(InputError, match="time_limit"):      # a HateXplain cell has none
        cells.run_cell("t1-hatexplain1-sa", None, str(tmp_path / "results"),
                       str(tmp_path / "work"), device="cpu", time_limit=30.0)


def test_the_train_command_takes_the_options(tmp_path):
    from click.testing import CliRunner

    from minimal_attn.cli.main import cli

    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [
        "train", "--dataset", "synthetic", "--m", "3", "--paradigm", "sa", "--n-train", "20",
        "--n-test", "10", "--epochs", "3", "--width", "0.25", "--batch-size", "10",
        "--device", "cpu", "--no-progress", "--eval-every", "2", "--checkpoint-every", "2",
        "--time-limit", "600", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if " epoch " in ln and "loss" in ln]
    assert ["test acc" in ln for ln in lines] == [False, True, True]
    bad = CliRunner().invoke(cli, ["train", "--eval-every", "0", "--no-progress"])
    assert bad.exit_code == 2 and "--eval-every" in bad.output


def test_a_time_limited_run_resumed_has_the_uninterrupted_history(splits, tmp_path,
                                                                  monkeypatch):
    """The cut epoch (2, not due with eval_every 4) is scored for the partial run; once
    continued, its history carries no test score there, as the uninterrupted run's."""
    full = train_run(config(eval_every=4), splits.train, splits.test)
    calls = []
    real = TrainConfig.deadline
    # the clock is read before an epoch, after it and at its checkpoint (3 reads an
    # epoch): time runs out during epoch 2, before its test set would be due
    monkeypatch.setattr(TrainConfig, "deadline",
                        lambda self: (lambda: calls.append(1) or len(calls) >= 5))
    out = str(tmp_path / "limited")
    cut = train_run(config(eval_every=4, time_limit=60.0), splits.train, splits.test,
                    out_dir=out)
    assert cut["history"][-1]["epoch"] == 2 and cut["history"][-1]["test_accuracy"] is not None
    monkeypatch.setattr(TrainConfig, "deadline", real)
    resumed = train_run(config(eval_every=4, time_limit=60.0), splits.train, splits.test,
                        out_dir=out, resume=True)
    keys = ("epoch", "loss", "test_accuracy", "test_saif")
    assert [[h[k] for k in keys] for h in resumed["history"]] == \
        [[h[k] for k in keys] for h in full["history"]]
    assert [h["test_accuracy"] is None for h in full["history"]] == \
        [True, True, True, False, False]
