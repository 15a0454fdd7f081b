"""attn-dyn sweep: a 2 x 2 x 2 grid of tiny synthetic Table 1 cells gives the same merged
result set, byte for byte, in this process, on a local Ray and through submitit's local
executor; a worker killed mid-cell and a driver killed mid-sweep end, after a retry or
--resume, where an uninterrupted sweep does; bad input is one line and exit 2."""

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
from minimal_attn.experiments.sweep import DRIVER_CRASH_ENV
from minimal_attn.experiments.sweep_cell import CRASH_ENV

pytest.importorskip("torch")

# two paradigms x two m x two data seeds; two epochs so that a kill can fall mid-cell
GRID = ["dataset=synthetic", "paradigm=sa,lv", "m=3,4", "data_seed=0,1", "n_train=12",
        "n_test=6", "epochs=2", "width=0.25", "batch_size=6", "seeds=1"]
MERGED = ("results.json", "summary.csv", "summary.md", "figures/table1.png")
ROOT = Path(__file__).resolve().parent.parent


def sweep(*args, env=None):
    return CliRunner().invoke(cli, ["sweep", *args], env=env)


def names():
    return [c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(GRID))]


def assert_same_merged(a, b):
    for f in MERGED:
        assert (Path(a) / f).read_bytes() == (Path(b) / f).read_bytes(), f


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """The uninterrupted sweep in this process (the reference of every other engine)."""
    out = tmp_path_factory.mktemp("sweep") / "local"
    r = sweep("--grid", *GRID, "--threads", "1", "--out", str(out))
    assert r.exit_code == 0, r.output
    return out, r.output


def test_grid_names_are_stable_and_keys_checked(tmp_path):
    cells = sweep_grid.expand(sweep_grid.parse_tokens(GRID))
    assert len(cells) == 8 and len({c.name for c in cells}) == 8
    assert {(c.settings["paradigm"], c.settings["m"], c.settings["data_seed"])
            for c in cells} == {(p, m, s) for p in ("sa", "lv") for m in (3, 4) for s in (0, 1)}
    # same settings, same names: key order, - or _, a default given explicitly, a TOML file
    again = ["seeds=1", "batch-size=6", "width=0.25", "epochs=2", "n-test=6", "n_train=12",
             "data-seed=1,0", "m=4,3", "paradigm=lv,sa", "dataset=synthetic", "momentum=0.9",
             "threads=1"]
    assert [c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(again))] == names()
    toml = tmp_path / "grid.toml"
    toml.write_text('dataset = "synthetic"\nparadigm = ["sa", "lv"]\nm = [3, 4]\n'
                    'data_seed = [0, 1]\nn_train = 12\nn_test = 6\nepochs = 2\n'
                    'width = 0.25\nbatch_size = 6\nseeds = 1\n')
    assert [c.name for c in sweep_grid.expand(sweep_grid.read_grid_file(str(toml)))] == names()
    # the registry's naming for paper cells; paradigm=all is the four paradigms
    paper = sweep_grid.expand(sweep_grid.parse_tokens(
        ["dataset=cifar10", "data_dir=x", "m=5", "protocol=authors", "paradigm=all"]))
    assert sorted(c.name for c in paper) == sorted(
        f"t1-cifar10-m5-authors-{p}" for p in ("sa", "ha", "lv", "hybrid"))
    assert all(c.scale == "paper" and c.paper for c in paper)
    # a Table 2 row's threads (how fast, not what) stay out of its name, as Table 1's do
    rows = [sweep_grid.expand(sweep_grid.parse_tokens(["table=2", "dataset=sst2", "steps=10",
                                                       *extra]))
            for extra in ([], ["threads=1"], ["threads=2", "workers=2"])]
    assert [[c.name for c in r] for r in rows] == [["t2-sst2-steps=10"]] * 3
    with pytest.raises(InputError, match="unknown grid key 'lerning_rate'"):
        sweep_grid.parse_tokens(["lerning_rate=0.1"])
    with pytest.raises(InputError, match="twice"):
        sweep_grid.parse_tokens(["m=3,3"])
    with pytest.raises(InputError, match="m must be an integer >= 2"):
        sweep_grid.expand(sweep_grid.parse_tokens(["m=1"]))


def test_local_sweep_writes_cells_and_merged_result(baseline):
    out, output = baseline
    lines = [line for line in output.splitlines() if line.startswith("[done")]
    assert len(lines) == 8 and lines[-1].startswith("[done 8/8, running 0, failed 0, "
                                                    "waiting 0]")
    assert all("test accuracy" in line and "test SAIF" in line for line in lines)
    merged = json.loads((out / "results.json").read_text())
    assert [e["cell"] for e in merged["cells"]] == sorted(names()) and merged["missing"] == []
    text = "".join((out / f).read_text() for f in MERGED[:3])
    assert "date" not in text and "wall_seconds" not in text and "train_seconds" not in text
    for name in names():
        folder = out / "cells" / name
        assert (folder / "checkpoints").is_dir() and (folder / "log.txt").is_file()
        assert (folder / "heatmap_" f"{name.split('-')[3]}_test.png").is_file()
    # a cell's numbers are those of the same settings run by run_experiment directly
    from minimal_attn.backends.vr.table1 import ExperimentConfig, run_experiment

    entry = merged["cells"][0]
    s = dict(entry["settings"])
    p = s.pop("paradigm")
    results, _ = run_experiment(ExperimentConfig(paradigms=[p], threads=1, **s))
    for split in ("train", "test"):
        for k in ("accuracy", "saif"):
            assert entry["result"][split][k]["per_seed"] == [
                x[k] for x in results[p][split]["per_seed"]]
    rows = (out / "summary.md").read_text().splitlines()
    assert sum(row.startswith("| t1-synthetic") for row in rows) == 8


def test_rerun_skips_matching_cells_and_reruns_a_changed_one(baseline, tmp_path):
    import shutil

    out = tmp_path / "again"
    shutil.copytree(baseline[0], out)
    stale = out / "cells" / f"{names()[0]}.json"
    record = json.loads(stale.read_text())
    record["settings"]["lr"] = {"all": 123.0}            # written by other settings
    stale.write_text(json.dumps(record))
    stamps = {n: os.stat(out / "cells" / f"{n}.json").st_mtime_ns for n in names()[1:]}
    r = sweep("--out", str(out), "--resume", "--threads", "1")
    assert r.exit_code == 0, r.output
    assert r.output.count(": already done (") == 7 and "[done 8/8" in r.output
    assert stamps == {n: os.stat(out / "cells" / f"{n}.json").st_mtime_ns
                      for n in names()[1:]}
    assert_same_merged(baseline[0], out)


def test_a_failed_cell_is_one_line_and_the_others_still_run(tmp_path):
    empty = tmp_path / "no-cifar"
    empty.mkdir()
    grid = ["dataset=synthetic,cifar10", "paradigm=sa", "m=3", "n_train=12", "n_test=6",
            "epochs=1", "width=0.25", "batch_size=6", f"data_dir={empty}"]
    r = sweep("--grid", *grid, "--threads", "1", "--out", str(tmp_path / "s"))
    assert r.exit_code == 1
    failed = [line for line in r.output.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "t1-cifar10-m3-sa" in failed[0] and "log.txt" in failed[0]
    assert "[done 1/2" in r.output
    merged = json.loads((tmp_path / "s" / "results.json").read_text())
    assert [e["cell"] for e in merged["cells"]][0].startswith("t1-synthetic")
    assert merged["missing"][0].startswith("t1-cifar10")
    log = failed[0].split("log: ")[1].rstrip(")")
    assert "Traceback" in Path(log).read_text()


def _resumed_once(out, name):
    """The log shows a second start that did not train epoch 1 again."""
    log = (Path(out) / "cells" / name / "log.txt").read_text()
    assert log.count(": start (") == 2 and log.count("epoch 1 (") == 1, log
    assert log.count("epoch 2 (") == 1 and (Path(out) / "cells" / name / ".crashed").exists()


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install \".[ray]\")")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_ray_gives_the_same_result_and_retries_a_killed_worker(baseline, local_ray,
                                                                 tmp_path, monkeypatch):
    victim = names()[2]
    monkeypatch.setenv(CRASH_ENV, f"{victim}@1")    # the worker exits after epoch 1
    r = sweep("--grid", *GRID, "--threads", "1", "--engine", "ray", "--out",
              str(tmp_path / "ray"))
    assert r.exit_code == 0, r.output
    _resumed_once(tmp_path / "ray", victim)
    assert_same_merged(baseline[0], tmp_path / "ray")


def test_slurm_local_executor_gives_the_same_result_and_resubmits(baseline, tmp_path,
                                                                  monkeypatch):
    pytest.importorskip("submitit", reason="submitit is not installed (pip install "
                                           "\".[slurm]\")")
    victim = names()[5]
    monkeypatch.setenv(CRASH_ENV, f"{victim}@1")
    r = sweep("--grid", *GRID, "--threads", "1", "--engine", "slurm", "--cluster", "local",
              "--cells-per-job", "4", "--out", str(tmp_path / "slurm"))
    assert r.exit_code == 0, r.output
    assert f"{victim}: worker died" in r.output
    _resumed_once(tmp_path / "slurm", victim)
    assert_same_merged(baseline[0], tmp_path / "slurm")


def test_a_killed_slurm_driver_leaves_jobs_that_resume_waits_for(baseline, tmp_path):
    """The jobs outlive their driver; the next driver waits for them: no cell runs twice."""
    pytest.importorskip("submitit", reason="submitit is not installed (pip install "
                                           "\".[slurm]\")")
    out = tmp_path / "slurm-killed"
    engine = ["--engine", "slurm", "--cluster", "local", "--cells-per-job", "2"]
    cmd = [sys.executable, "-m", "minimal_attn.cli.main", "sweep", "--grid", *GRID,
           "--threads", "1", *engine, "--max-running", "4", "--out", str(out)]
    with open(tmp_path / "driver.log", "w") as log:      # a pipe would wait for the jobs
        died = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=300,
                              cwd=ROOT, env=dict(os.environ, **{DRIVER_CRASH_ENV: "1"}))
    assert died.returncode == 70, (tmp_path / "driver.log").read_text()
    assert not list((out / "cells").glob("*.json"))               # it died at once
    r = sweep("--out", str(out), "--resume", *engine)
    assert r.exit_code == 0, r.output
    assert "of an earlier driver still runs" in r.output              # python starts slowly
    for name in names():
        log = (out / "cells" / name / "log.txt").read_text()
        assert log.count(": start (") == 1, (name, log)
    assert_same_merged(baseline[0], out)


def test_a_killed_driver_resumes_to_the_same_result(baseline, tmp_path):
    out, victim = tmp_path / "killed", names()[2]
    cmd = [sys.executable, "-m", "minimal_attn.cli.main", "sweep", "--grid", *GRID,
           "--threads", "1", "--out", str(out)]
    died = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, **{CRASH_ENV: f"{victim}@1"}))
    assert died.returncode == 70, died.stderr
    assert not (out / "results.json").exists()
    assert len(list((out / "cells").glob("*.json"))) == 2          # two cells finished
    r = sweep("--out", str(out), "--resume", "--threads", "1")
    assert r.exit_code == 0, r.output
    assert r.output.count(": already done (") == 2
    _resumed_once(out, victim)
    assert_same_merged(baseline[0], out)


def test_the_extras_are_imported_only_when_chosen():
    code = ("import sys, minimal_attn.cli.sweep_cmd, minimal_attn.experiments.sweep; "
            "print(sorted(m for m in ('ray', 'submitit', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("engine,module", [("ray", "ray"), ("slurm", "submitit")])
def test_a_missing_extra_is_one_line(tmp_path, monkeypatch, engine, module):
    monkeypatch.setitem(sys.modules, module, None)        # import fails as if absent
    r = sweep("--grid", "m=3", "--engine", engine, "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and r.output.count("Error:") == 1
    assert f'.[{engine}]' in r.output and not (tmp_path / "o").exists()


def test_slurm_without_slurm_is_one_line(tmp_path):
    pytest.importorskip("submitit", reason="submitit is not installed")
    import shutil

    if shutil.which("srun"):
        pytest.skip("this machine has Slurm")
    r = sweep("--grid", "m=3", "--engine", "slurm", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and "--cluster local" in r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case,text,message", [
    ("empty", "", "is empty"),
    ("comments only", "# nothing\n", "is empty"),
    ("malformed", "m = [3, 4\n", "not valid TOML"),
    ("unknown key", "lerning_rate = 0.1\n", "unknown grid key"),
    ("table", "[m]\nx = 1\n", "is a table"),
    ("not UTF-8", b"m = [3]\n\xff\xfe\x00garbage", "not UTF-8"),
])
def test_a_bad_grid_file_is_one_line(tmp_path, case, text, message):
    grid = tmp_path / "grid.toml"
    grid.write_bytes(text) if isinstance(text, bytes) else grid.write_text(text)
    r = sweep("--grid-file", str(grid), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and message in r.output
    assert "Traceback" not in r.output and not (tmp_path / "o").exists()


@pytest.mark.parametrize("args,message", [
    (["--grid", "lerning-rate=0.1"], "unknown grid key"),
    (["--grid", "m"], "is not KEY=VALUES"),
    (["--grid", "m=two"], "not a valid value"),
    (["--grid", "threads=1,2"], "one value"),
    ([], "no grid"),
    (["--resume"], "nothing to resume"),
    # checked before any cell runs (each used to fail alone, exit 1, a sweep folder written)
    (["--grid", "dataset=cifar10", "m=3", "--data-dir", "/no/such/folder"], "does not exist"),
    (["--grid", "table=2", "dataset=sst2", "hidden=0"], "must be an integer >= 1"),
    (["--grid", "table=2", "dataset=sst2", "lr=nan"], "finite number > 0"),
])
def test_bad_grid_options_are_one_line(tmp_path, args, message):
    r = sweep(*args, "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and message in r.output
    assert not (tmp_path / "o").exists()


def test_an_unwritable_out_is_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    r = sweep("--grid", "m=3", "--out", str(afile / "sub"))
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and "--out" in r.output
    assert afile.read_text() == "x"


def test_a_table2_row_is_a_cell_too(tmp_path, shared_data, torch_one_thread):
    """table=2: a tiny Snell Table 2 row (SST-2) as one cell, its record and the paper's row."""
    grid = ["table=2", "dataset=sst2", "steps=10", "hidden=8", "emb=8", "out_hidden=8",
            "max_train=100", "max_val=20", "eval_every=10", "proxy_d=8", "proxy_epochs=1",
            "vocab_size=300"]
    out = tmp_path / "t2"
    args = ["--grid", *grid, "--device", "cpu", "--data-dir", str(shared_data / "sst2"),
            "--out", str(out)]
    r = sweep(*args)
    assert r.exit_code == 0, r.output
    (name,) = [c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(grid))]
    assert name.startswith("t2-sst2-") and "A(α,β)" in r.output
    merged = json.loads((out / "results.json").read_text())
    (entry,) = merged["cells"]
    row = json.loads((out / "cells" / name / "agreement.json").read_text())
    assert entry["kind"] == "table2" and entry["result"]["row"] == [
        row[k] for k in entry["result"]["columns"]]
    assert entry["paper"]["row"] == [20, 34, 22, 25, 8, 78, 82, 84]     # Table 2, SST
    assert "| paper | 20 | 34 |" in (out / "summary.md").read_text()
    assert (out / "figures" / "table2.png").is_file()
    again = sweep(*args)
    assert again.exit_code == 0 and again.output.count(": already done (") == 1


def test_a_record_from_before_a_setting_existed_matches_it_at_its_default(tmp_path):
    """first_seed and precision came after sweeps wrote records: such a record is still
    done for a cell at their defaults, and stale for a cell away from them."""
    from minimal_attn.experiments.cell_catalogue import Cell
    from minimal_attn.experiments.results_store import write_cell
    from minimal_attn.experiments.sweep_cell import record_status

    old = {"m": 5, "lr": None}
    stat = {"per_seed": [0.5], "mean": 0.5, "std": 0.0}
    write_cell(str(tmp_path), {"format": 1, "cell": "c", "kind": "table1", "scale": "cpu",
                               "title": "c", "settings": old, "provenance": {},
                               "result": {s: {"accuracy": stat, "saif": stat}
                                          for s in ("train", "test")}})
    now = dict(old, first_seed=0, precision="fp32")
    assert record_status(str(tmp_path), Cell("c", "table1", "cpu", "c", now)) == "done"
    for changed in ({"first_seed": 3}, {"precision": "bf16"}, {"m": 20}):
        cell = Cell("c", "table1", "cpu", "c", dict(now, **changed))
        assert record_status(str(tmp_path), cell) == "stale", changed
    assert record_status(str(tmp_path), Cell("d", "table1", "cpu", "d", now)) == "absent"


def test_a_table2_record_from_before_time_limit_existed_is_still_done(tmp_path):
    """AgreementConfig.time_limit came after Table 2 sweeps wrote records: the cells of a
    grid now carry it (None), and a record without it is still done."""
    from minimal_attn.experiments.results_store import write_cell
    from minimal_attn.experiments.sweep_cell import record_status
    from minimal_attn.experiments.sweep_table2 import expand

    [cell] = expand({"dataset": ["sst2"], "steps": [20]})
    assert cell.settings["time_limit"] is None
    old = {k: v for k, v in cell.settings.items() if k != "time_limit"}
    write_cell(str(tmp_path), {"format": 1, "cell": cell.name, "kind": "table2",
                               "scale": cell.scale, "title": cell.title, "settings": old,
                               "provenance": {}, "result": {"row": [None] * 8, "performance": 0.5,
                                                            "performance_name": "accuracy"}})
    assert record_status(str(tmp_path), cell) == "done"
    [limited] = expand({"dataset": ["sst2"], "steps": [20], "time_limit": [60.0]})
    assert record_status(str(tmp_path), limited) in ("stale", "absent")
