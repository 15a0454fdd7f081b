"""attn-dyn sweep on bad input: engine resources checked before Ray starts, a cell no Ray
node could run refused instead of waited for, damaged resume state refused (sweep.json)
or rerun (a cell's record) instead of a traceback, and a grid key given twice refused.
Each refusal is one line, exit status 2, and leaves --out as it was."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments import sweep_grid
from minimal_attn.experiments.sweep import stored_grid
from minimal_attn.experiments.sweep_engines import RayEngine, make_engine

ROOT = Path(__file__).resolve().parent.parent
TINY = ["dataset=synthetic", "m=2", "paradigm=sa", "seeds=1", "epochs=1", "n_train=10",
        "n_test=10", "width=0.25"]


def sweep(*args):
    return CliRunner().invoke(cli, ["sweep", *args])


def refused(r, *words):
    assert r.exit_code == 2, r.output
    assert r.output.count("Error:") == 1 and "Traceback" not in r.output, r.output
    for word in words:
        assert word in r.output, r.output


# -- 1. a cell's CPUs and GPUs, checked before Ray is imported ------------------------------

@pytest.mark.parametrize("option,value", [
    ("--cpus-per-cell", "nan"), ("--cpus-per-cell", "inf"), ("--cpus-per-cell", "-1"),
    ("--cpus-per-cell", "0"), ("--cpus-per-cell", "0.00001"),
    ("--gpus-per-cell", "nan"), ("--gpus-per-cell", "inf"), ("--gpus-per-cell", "-0.5"),
])
def test_bad_cell_resources_are_refused_before_ray(tmp_path, monkeypatch, option, value):
    monkeypatch.setitem(sys.modules, "ray", None)    # importing Ray now would fail
    r = sweep("--grid", *TINY, "--engine", "ray", option, value, "--out",
              str(tmp_path / "o"))
    refused(r, option)
    assert "needs ray" not in r.output and not (tmp_path / "o").exists()


@pytest.mark.parametrize("kwargs,message", [
    ({"cpus_per_cell": float("nan")}, "cpus_per_cell must be a finite number > 0"),
    ({"gpus_per_cell": float("inf")}, "gpus_per_cell must be a finite number >= 0"),
    ({"gpus_per_cell": True}, "gpus_per_cell must be a finite number >= 0"),
    ({"num_cpus": 0}, "num_cpus must be an integer >= 1"),
    ({"max_running": 0}, "max_running must be an integer >= 1"),
])
def test_make_engine_checks_resources_first(tmp_path, monkeypatch, kwargs, message):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=message) as info:
        make_engine("ray", str(tmp_path), **kwargs)
    assert info.value.param == next(iter(kwargs))


def test_slurm_wants_whole_cpus_and_gpus(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)
    for key in ("cpus_per_cell", "gpus_per_cell"):
        with pytest.raises(InputError, match=f"{key} must be a whole number"):
            make_engine("slurm", str(tmp_path), **{key: 1.5})


# -- 2. a cell that no node of the cluster could run ----------------------------------------

class _FakeRay:
    def __init__(self, *nodes):
        self.resources = list(nodes)

    def nodes(self):
        return [{"Alive": True, "Resources": r} for r in self.resources] + [
            {"Alive": False, "Resources": {"CPU": 64.0, "GPU": 8.0}}]      # a dead node

    def cluster_resources(self):
        return {k: sum(r.get(k, 0) for r in self.resources) for k in ("CPU", "GPU")}


@pytest.mark.parametrize("cpus,gpus,fits", [
    (1, 0, True), (4, 1, True), (2, 0.5, True),
    (1, 2, False),            # two GPUs in all, but one a node
    (5, 0, False), (4, 1.5, False), (8, 0, False),
])
def test_a_cell_must_fit_on_one_node(cpus, gpus, fits):
    engine = object.__new__(RayEngine)
    engine.ray = _FakeRay({"CPU": 4.0, "GPU": 1.0}, {"CPU": 4.0, "GPU": 1.0})
    if fits:
        engine._check_fits("auto", cpus, gpus)
        return
    with pytest.raises(InputError, match="more than any node of the Ray cluster at auto") \
            as info:
        engine._check_fits("auto", cpus, gpus)
    assert "8 CPUs and 2 GPUs in all, on 2 node(s)" in str(info.value)
    # a local Ray (no address) short of CPUs: more of them (num_cpus) is a fix too
    with pytest.raises(InputError) as info:
        engine._check_fits(None, cpus, gpus)
    assert "the local Ray" in str(info.value)
    assert ("num_cpus" in str(info.value)) == (cpus > 4)


def test_too_many_gpus_on_a_local_ray_is_one_line_not_a_hang(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install \".[ray]\")")
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "minimal_attn.cli.main", "sweep", "--grid", *TINY,
           "--engine", "ray", "--num-cpus", "1", "--gpus-per-cell", "4", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "4 GPU(s), more than any node of the local Ray" in errors[0]
    assert "--gpus-per-cell" in errors[0] and "--num-cpus" not in errors[0]
    assert not out.exists() and r.stdout == ""


# -- 3. damaged resume state ----------------------------------------------------------------

def _stored(tmp_path, grid):
    out = tmp_path / "o"
    out.mkdir()
    text = json.dumps({"format": 1, "grid": grid, "cells": []})
    (out / "sweep.json").write_text(text)
    return out, text


GOOD = {"dataset": ["synthetic"], "m": [2], "paradigm": ["sa"], "epochs": [1]}


@pytest.mark.parametrize("change,message", [
    ({"m": ["abc"]}, "grid key m: 'abc' is not a valid value"),
    ({"m": [1]}, "m must be an integer >= 2"),
    ({"m": [2.5]}, "grid key m: 2.5 is not a valid value"),
    ({"m": [None]}, "grid key m: None is not a valid value"),
    ({"m": []}, "has no values"),
    ({"paradigm": [5]}, "unknown paradigm"),
    ({"lr": [{"sa": 0.1}]}, "grid key lr"),
    ({"epochs": [[1]]}, "grid key epochs"),
    ({"threads": [1, 2]}, "one value"),
    ({"lerning_rate": [0.1]}, "unknown grid key"),
    ({"M": [3]}, "grid key m is given twice"),
])
def test_a_damaged_sweep_json_is_one_line_and_left_alone(tmp_path, change, message):
    out, text = _stored(tmp_path, dict(GOOD, **change))
    stamp = os.stat(out / "sweep.json").st_mtime_ns
    r = sweep("--resume", "--out", str(out))
    refused(r, message, f"{out / 'sweep.json'} is damaged", "--grid")
    assert (out / "sweep.json").read_text() == text
    assert os.stat(out / "sweep.json").st_mtime_ns == stamp
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]


@pytest.mark.parametrize("grid", [[], {}, "m=2", None])
def test_a_sweep_json_without_a_grid_mapping_is_one_line(tmp_path, grid):
    out, text = _stored(tmp_path, grid)
    refused(sweep("--resume", "--out", str(out)), "is damaged", "not a mapping")
    assert (out / "sweep.json").read_text() == text


def test_a_stored_grid_reads_back_as_it_was_given(tmp_path):
    tokens = ["dataset=synthetic", "m=3,4", "paradigm=hybrid,sa", "lr=0.5", "stop_loss=none",
              "switch_epoch=auto,1", "threads=1", "epochs=2"]
    grid = sweep_grid.parse_tokens(tokens)
    out, _ = _stored(tmp_path, json.loads(json.dumps(grid)))       # as sweep.json holds it
    again = stored_grid(str(out))
    assert again == grid
    assert [c.name for c in sweep_grid.expand(again)] == [
        c.name for c in sweep_grid.expand(grid)]
    cifar = sweep_grid.parse_tokens(["dataset=cifar10", "foreground=cat+dog,ship+truck"])
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "sweep.json").write_text(json.dumps({"grid": cifar}))
    with pytest.raises(InputError, match="needs data_dir"):
        stored_grid(str(tmp_path / "c"))
    # an operational option given again (--data-dir) completes the stored grid
    assert stored_grid(str(tmp_path / "c"), {"data_dir": ["d"]}) == dict(cifar,
                                                                         data_dir=["d"])


def _done_sweep(tmp_path):
    out = tmp_path / "done"
    r = sweep("--grid", *TINY, "--threads", "1", "--out", str(out))
    assert r.exit_code == 0, r.output
    (record,) = (out / "cells").glob("*.json")
    return out, record


def test_a_damaged_cell_record_makes_its_cell_run_afresh(tmp_path):
    pytest.importorskip("torch")
    out, record = _done_sweep(tmp_path)
    data = json.loads(record.read_text())
    data["result"] = "oops"
    record.write_text(json.dumps(data))
    r = sweep("--resume", "--threads", "1", "--out", str(out))
    assert r.exit_code == 0 and r.exception is None, r.output
    assert "is of other settings, unreadable or damaged: the cell runs afresh" in r.output
    assert "[done 1/1" in r.output and "already done" not in r.output
    assert isinstance(json.loads(record.read_text())["result"], dict)
    merged = json.loads((out / "results.json").read_text())
    assert len(merged["cells"]) == 1 and merged["missing"] == []


def test_a_damaged_record_is_stale_and_never_merged(tmp_path):
    """record_status and the merge read only well-formed results (a cell that fails leaves
    its old record behind: the merge lists the cell as missing)."""
    from minimal_attn.experiments.results_store import write_cell
    from minimal_attn.experiments.sweep_cell import record_status
    from minimal_attn.experiments.sweep_report import merged

    (cell,) = sweep_grid.expand(sweep_grid.parse_tokens(TINY))
    stat = {"per_seed": [0.5], "mean": 0.5, "std": 0.0}
    good = {s: {"accuracy": stat, "saif": stat} for s in ("train", "test")}
    bad = [[1, 2], "oops", {"train": good["train"]},
           {"train": good["train"], "test": {"accuracy": stat, "saif": {"mean": "x"}}},
           dict(good, test={"accuracy": stat, "saif": dict(stat, std=None)})]
    for result in [good] + bad:
        write_cell(str(tmp_path), {"format": 1, "cell": cell.name, "kind": "table1",
                                   "scale": cell.scale, "title": cell.title,
                                   "settings": cell.settings, "provenance": {},
                                   "result": result})
        ok = result is good
        assert record_status(str(tmp_path), cell) == ("done" if ok else "stale"), result
        entries, missing = merged(str(tmp_path), [cell])
        assert (len(entries), missing) == ((1, []) if ok else (0, [cell.name]))


def test_a_table2_record_needs_its_row():
    from minimal_attn.experiments.results_shape import shape_problem

    def record(result):
        return {"format": 1, "cell": "c", "kind": "table2", "scale": "cpu", "title": "t",
                "settings": {}, "provenance": {}, "result": result}

    row = {"row": [0.5] * 7 + [None], "performance": 0.8, "performance_name": "accuracy"}
    assert shape_problem(record(row)) is None
    for broken in ({"row": []}, dict(row, row=[0.5] * 8 + [1]), dict(row, row=["x"] * 8),
                   dict(row, performance="high"), {k: row[k] for k in ("row", "performance")}):
        assert shape_problem(record(broken)), broken


# -- 4. a grid key given twice --------------------------------------------------------------

@pytest.mark.parametrize("tokens,key", [
    (["m=2", "m=3"], "m"), (["n_train=10", "n-train=20"], "n_train"),
    (["paradigm=sa", "paradigms=lv"], "paradigm"), (["m=2", "M=2"], "m"),
    (["table=2", "table=2", "dataset=sst2"], "table"),
])
def test_a_grid_key_given_twice_is_refused(tmp_path, tokens, key):
    with pytest.raises(InputError, match=f"grid key {key} is given twice"):
        sweep_grid.parse_tokens(tokens)
    r = sweep("--grid", tokens[0], "--grid", *tokens[1:], "--out", str(tmp_path / "o"))
    refused(r, f"key {key} is given twice", "=V1,V2")
    assert not (tmp_path / "o").exists()


def test_a_grid_file_key_given_twice_is_refused_and_grid_still_wins(tmp_path):
    toml = tmp_path / "grid.toml"
    toml.write_text('n_train = 10\n"n-train" = 20\n')
    r = sweep("--grid-file", str(toml), "--list", "--out", str(tmp_path / "o"))
    refused(r, "grid key n_train is given twice (n_train in", "n-train in")
    toml.write_text("m = [3, 4]\ndataset = \"synthetic\"\nparadigm = \"sa\"\n")
    r = sweep("--grid-file", str(toml), "--grid", "m=5", "--list", "--out", str(tmp_path))
    assert r.exit_code == 0 and r.output.split() == ["t1-synthetic-m5-sa"], r.output


def test_an_option_and_its_grid_key_must_agree(tmp_path):
    r = sweep("--grid", "m=3", "threads=2", "--threads", "1", "--list", "--out",
              str(tmp_path / "o"))
    refused(r, "--threads 1 and the grid key threads=2 disagree")
    r = sweep("--grid", "m=3", "paradigm=sa", "threads=1", "--threads", "1", "--list",
              "--out", str(tmp_path / "o"))
    assert r.exit_code == 0 and r.output.split() == ["t1-synthetic-m3-sa"], r.output


def test_a_sweep_whose_cells_need_a_missing_torch_is_one_line(tmp_path, monkeypatch):
    """Refused before anything is written, not one failed cell after another."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    for grid, refused in ((["dataset=synthetic", "epochs=1", "paradigm=sa"], True),
                          (["table=2", "task=classify"], True),
                          (["backend=numpy", "dataset=linear-orthogonal", "epochs=1",
                            "n_train=20", "n_test=10", "m=3", "paradigm=sa"], False)):
        out = tmp_path / grid[0].replace("=", "-")
        r = CliRunner().invoke(cli, ["sweep", "--grid", *grid, "--out", str(out)])
        if refused:
            assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
            assert "need torch" in r.output and not out.exists()
        else:
            assert r.exit_code == 0 and (out / "results.json").exists(), r.output


def test_a_sweep_into_another_commands_run_folder_is_refused(tmp_path):
    """Its merged results.json and summaries would replace that run's."""
    out = tmp_path / "train-run"
    made = CliRunner().invoke(cli, ["train", "--backend", "numpy", "--epochs", "1",
                                    "--n-train", "20", "--n-test", "10", "--m", "3",
                                    "--paradigm", "sa", "--out", str(out)])
    assert made.exit_code == 0, made.output
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    r = CliRunner().invoke(cli, ["sweep", "--grid", "backend=numpy", "epochs=1", "m=3",
                                 "paradigm=sa", "--out", str(out)])
    assert r.exit_code == 2 and "holds an attn-dyn train run" in r.output, r.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
