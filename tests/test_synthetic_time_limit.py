"""A time limit on the synthetic tasks: training ends at an evaluation, the result says so,
a resume goes on exactly, and a cell cut short is recorded as partial."""

import json

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from minimal_attn.backends.snell.synthetic_train import (  # noqa: E402
    Run,
    SyntheticConfig,
    train_runs,
)
from minimal_attn.cli.main import cli  # noqa: E402
from minimal_attn.errors import InputError  # noqa: E402
from minimal_attn.experiments import cells, results_store  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_a_time_limit_stops_at_an_evaluation_and_a_resume_goes_on_exactly(tmp_path):
    runs = [Run("permutation", s, init_seed=s, head_seeds=[s], data_seed=s) for s in (0, 1)]
    config = SyntheticConfig(steps=12, hidden=6, batch_size=4, eval_every=4, n_test=8)
    whole = train_runs(runs, config)
    assert whole["stopped_at"] is None and whole["step"] == [0, 4, 8, 12]
    ckpt = str(tmp_path / "train.ckpt")
    # a limit already spent: it stops at the first evaluation (step 4), not at once
    cut = train_runs(runs, SyntheticConfig(**{**config.__dict__, "time_limit": 1e-9}), ckpt)
    assert cut["stopped_at"] == 4 and cut["step"] == [0, 4]
    rest = train_runs(runs, config, ckpt)                     # no limit: on to the end
    assert rest["resumed_from"] == 4 and rest["stopped_at"] is None
    assert rest["step"] == whole["step"] and rest["accuracy"] == whole["accuracy"]
    for k, v in whole["params"].items():
        assert torch.equal(v, rest["params"][k]), k


def test_a_synthetic_cell_cut_short_is_partial(tmp_path):
    results = str(tmp_path / "r")
    record = cells.run_cell("tiny-synthetic-copy", None, results, str(tmp_path / "w"),
                            device="cpu", time_limit=1e-9)
    res = record["result"]
    assert res["time_limited"] == {"all": True} and res["steps_run"] == 10     # eval_every
    assert not cells.finished("tiny-synthetic-copy", results)
    text = results_store.render(results_store.read_cells(results))
    assert "partial: time limit at step 10" in text
    again = cells.run_cell("tiny-synthetic-copy", None, results, str(tmp_path / "w"),
                           device="cpu")                      # resumes to its 20 steps
    assert again["result"]["time_limited"] == {"all": False}
    assert again["result"]["steps_run"] == 20 and cells.finished("tiny-synthetic-copy", results)


def test_time_limits_are_refused_where_they_do_not_apply(tmp_path):
    r = CliRunner().invoke(cli, ["cells", "run", "t1-hatexplain1-sa", "--time-limit", "60",
                                 "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "CNN FCAM, Table 2 and synthetic cells" in r.output
    r = CliRunner().invoke(cli, ["synthetic", "copy", "--time-limit", "0", "--out",
                                 str(tmp_path / "s")])
    assert r.exit_code == 2 and "--time-limit" in r.output and not (tmp_path / "s").exists()


def test_the_command_says_where_it_stopped(tmp_path):
    out = tmp_path / "s"
    r = CliRunner().invoke(cli, ["synthetic", "copy-control", "--seeds", "1", "--steps", "6",
                                 "--hidden", "4", "--eval-every", "2", "--n-test", "4",
                                 "--time-limit", "1e-9", "--no-progress", "--out", str(out)])
    assert r.exit_code == 0 and "stopped at step 2 of 6" in r.output
    assert json.loads((out / "results.json").read_text())["stopped_at"] == 2


def test_a_screening_part_cut_short_labels_no_heads(tmp_path):
    """A multi-head screening part stopped by a time limit is partial: the training parts
    go on waiting for it, and its rerun resumes to the end and completes the pool."""
    results, work = str(tmp_path / "r"), str(tmp_path / "w")
    cells.run_cell("tiny-multihead@1", None, results, work, device="cpu")
    cut = cells.run_cell("tiny-multihead@2", None, results, work, device="cpu",
                         time_limit=1e-9)
    assert cut["result"]["time_limited"] == {"all": True} and cut["result"]["steps_run"] == 10
    assert "tiny-multihead@3" in cells.waiting(results, "tiny")
    with pytest.raises(InputError, match="no complete record of tiny-multihead@2"):
        cells.run_cell("tiny-multihead@3", None, results, work, device="cpu")
    again = cells.run_cell("tiny-multihead@2", None, results, work, device="cpu")
    assert again["result"]["steps_run"] == 20
    assert "tiny-multihead@3" in cells.unfinished(results, "tiny")
