"""A time limit on a Table 2 row: every model stops at an evaluation, the row says where,
a rerun without it continues to the uninterrupted row, and a cell cut short is partial."""

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from minimal_attn.backends.snell.agreement import (  # noqa: E402
    AgreementConfig,
    model_time_limit,
    run_agreement,
)
from minimal_attn.cli.main import cli  # noqa: E402
from minimal_attn.experiments import cells, results_store, results_tables  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")

TINY = dict(steps=20, hidden=8, emb=8, out_hidden=8, max_train=200, max_val=40, eval_every=10,
            proxy_d=8, proxy_epochs=2, device="cpu")


def _plain(result):
    """agreement.json's dict without run control and the marks a time limit leaves."""
    out = json.loads(json.dumps(result, default=str))
    for key in ("config", "steps_run", "time_limited", "seconds"):
        out.pop(key)
    for history in out["runs"].values():
        for h in history:
            h.pop("time_limited", None)
    return out


def test_a_row_stopped_by_a_time_limit_continues_to_the_uninterrupted_row(tmp_path,
                                                                          shared_data):
    data = str(shared_data / "sst2")
    whole = run_agreement(AgreementConfig(dataset="sst2", data_dir=data, **TINY),
                          str(tmp_path / "whole"))
    assert whole["steps_run"] == dict.fromkeys(("standard", "second", "uniform", "frozen"), 20)
    assert not any(whole["time_limited"].values())
    out = str(tmp_path / "cut")
    # a limit already spent: each model stops at its first evaluation after a step (10)
    cut = run_agreement(AgreementConfig(dataset="sst2", data_dir=data, time_limit=1e-9, **TINY),
                        out)
    assert cut["steps_run"] == dict.fromkeys(whole["steps_run"], 10)
    assert all(cut["time_limited"].values())
    assert [h["step"] for h in cut["runs"]["standard"]] == [0, 10]
    assert "Partial: a time limit stopped standard at step 10" in \
        (tmp_path / "cut" / "table.md").read_text()
    # the standard model's stopping point is evaluated as a last step: its row is whole
    assert all(cut[k] is not None for k in ("A_alpha_beta", "A_delta_beta_uf", "A_hat"))
    # interrupted while writing the finished row: the row's files stay the partial set
    from minimal_attn.experiments import plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    before = {n: (tmp_path / "cut" / n).read_bytes() for n in ("table.md", "agreement.json")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "plot_agreement_curves", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_agreement(AgreementConfig(dataset="sst2", data_dir=data, **TINY), out)
    assert before == {n: (tmp_path / "cut" / n).read_bytes() for n in before}
    rest = run_agreement(AgreementConfig(dataset="sst2", data_dir=data, **TINY), out)
    assert not any(rest["time_limited"].values())
    assert _plain(rest) == _plain(whole)       # every number of every table and curve
    assert "Partial" not in (tmp_path / "cut" / "table.md").read_text()


@pytest.mark.parametrize("limit, jobs, workers, share", [
    (100.0, 4, 1, 25.0),          # four models one after another: a quarter each
    (100.0, 5, 5, 100.0),         # four models and the proxy side by side: all of it
    (90.0, 5, 2, 30.0),           # two at a time: three turns
    (60.0, 3, 8, 60.0),           # more workers than jobs
    (None, 4, 1, None),
])
def test_a_rows_time_limit_is_shared_out_by_turns(limit, jobs, workers, share):
    assert model_time_limit(limit, jobs, workers) == share


def test_a_table2_cell_cut_short_is_partial_until_a_rerun_finishes_it(tmp_path, shared_data):
    results, work = str(tmp_path / "r"), str(tmp_path / "w")
    record = cells.run_cell("tiny-t2-sst2", str(shared_data), results, work, device="cpu",
                            time_limit=1e-9)
    res = record["result"]
    assert all(res["time_limited"].values()) and set(res["steps_run"].values()) == {10}
    assert record["settings"]["time_limit"] == 1e-9
    assert not cells.finished("tiny-t2-sst2", results)
    text = results_store.render(results_store.read_cells(results))
    assert "partial: time limit, every model at step 10" in text
    again = cells.run_cell("tiny-t2-sst2", str(shared_data), results, work, device="cpu")
    assert not any(again["result"]["time_limited"].values())
    assert set(again["result"]["steps_run"].values()) == {20}
    # the record's seconds: every model's, its training summed over the cut call and this one
    before, after = res["seconds"], again["result"]["seconds"]
    assert set(before["jobs"]) == set(after["jobs"]) == set(res["steps_run"])
    assert all(after[m]["train_s"] > before[m]["train_s"] > 0 for m in res["steps_run"])
    assert cells.finished("tiny-t2-sst2", results)
    assert "partial" not in results_store.render(results_store.read_cells(results))


def test_the_table_names_the_models_a_time_limit_stopped():
    cut = {"time_limited": {"standard": True, "second": False, "uniform": True, "frozen": False},
           "steps_run": {"standard": 250, "second": 4000, "uniform": 500, "frozen": 4000}}
    assert results_tables._models_cut(cut) == \
        " (**partial: time limit, standard at step 250, uniform at step 500**)"
    same = {"time_limited": dict.fromkeys(("standard", "second", "uniform"), True),
            "steps_run": dict.fromkeys(("standard", "second", "uniform"), 6000)}
    assert results_tables._models_cut(same) == \
        " (**partial: time limit, every model at step 6000**)"
    assert results_tables._models_cut({"time_limited": {"standard": False},
                                      "steps_run": {"standard": 10}}) == ""


def test_a_bad_time_limit_is_refused_before_anything_is_written(tmp_path, shared_data):
    out = tmp_path / "row"
    for bad in ("0", "-5", "nan"):
        r = CliRunner().invoke(cli, ["agreement", "--dataset", "sst2", "--data-dir",
                                     str(shared_data / "sst2"), "--out", str(out),
                                     "--time-limit", bad, "--no-progress"])
        assert r.exit_code == 2 and "--time-limit" in r.output, r.output
        assert "Traceback" not in r.output and not out.exists()


def test_the_hatexplain_row_runs_through_the_cell_path(tmp_path, shared_dataset, monkeypatch,
                                                       torch_one_thread):
    """t2-hatexplain (beyond Snell's Table 2) at the smoke size of tiny-t2-sst2: the cell
    reads the binary HateXplain file, trains the four models and writes a row with no
    paper line beside it."""
    from dataclasses import replace

    shared_dataset("hatexplain", "hatexplain_binary.jsonl")
    real = cells.get_cell("t2-hatexplain")
    assert real.data == "hatexplain" and real.settings["size"] == "paper" and not real.paper
    tiny = replace(real, settings=dict(real.settings, size="tiny"))
    monkeypatch.setattr(cells, "get_cell", lambda name: tiny)
    results = str(tmp_path / "r")
    record = cells.run_cell("t2-hatexplain", str(shared_dataset("hatexplain").parent),
                            results, str(tmp_path / "w"), device="cpu")
    res = record["result"]
    assert res["performance_name"] == "accuracy" and 0.0 <= res["performance"] <= 1.0
    assert len(res["row"]) == len(res["columns"]) == 8
    assert all(0.0 <= v <= 1.0 for v in res["row"] if v is not None)
    assert set(res["steps_run"]) == {"standard", "second", "uniform", "frozen"}
    text = results_store.render(results_store.read_cells(results))
    row = [line for line in text.splitlines() if line.startswith("| HateXplain agreement")]
    assert len(row) == 1 and "| paper |" not in text.split(row[0])[1].split("\n\n")[0]
