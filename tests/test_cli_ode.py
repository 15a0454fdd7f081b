"""`attn-dyn ode`: exit codes, JSON shape, files, bad input."""

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn import ode
from minimal_attn.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_json_shape_and_values():
    r = run("ode", "--paradigm", "lv", "--m", "5", "--classes", "3", "--json",
            "--t-eval", "0,1,10")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert list(out) == ["lv"]
    for key in ("t", "mu", "nu", "alpha", "beta"):
        assert len(out["lv"][key]) == 3
    assert out["lv"]["t"] == [0.0, 1.0, 10.0]
    assert out["lv"]["alpha"][0] == pytest.approx(0.2)           # 1/m at zero init
    np.testing.assert_allclose(out["lv"]["mu"],
                               ode.solve("lv", 5, 3, 10, t_eval=[0, 1, 10])["mu"])


def test_all_paradigms_theorem1_json():
    r = run("ode", "--m", "4", "--classes", "3", "--alpha", "1", "--json", "--t-eval", "2")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert sorted(out) == ["ha", "lv", "sa"]
    for p in out:
        assert out[p]["alpha"] == [1.0] and out[p]["nu"] == [None]   # nu frozen at +inf
    # with alpha = 1 every paradigm sees the clean foreground: identical mu(t)
    assert out["sa"]["mu"][0] == pytest.approx(out["ha"]["mu"][0], rel=1e-6)


def test_out_writes_csv_and_figure(tmp_path):
    r = run("ode", "--paradigm", "sa", "--m", "5", "--classes", "3", "--t-max", "4",
            "--simulate", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ode.png", "ode_sa.csv", "ode_sa_simulated.csv"]
    with open(tmp_path / "ode_sa.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["t", "mu", "nu", "alpha", "beta"] and len(rows) > 10
    assert (tmp_path / "ode.png").stat().st_size > 10_000
    assert "|mu - mu_GD|" in r.stdout


def test_default_runs_both_figure4_settings(tmp_path):
    r = run("ode", "--paradigm", "ha", "--out", str(tmp_path), "--t-max", "5")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ode.png", "ode_ha_m20_C20.csv", "ode_ha_m5_C3.csv"]


@pytest.mark.parametrize("args, message", [
    (["--paradigm", "xx"], "unknown paradigm"),
    (["--m", "1"], "--m"),
    (["--classes", "1"], "--classes"),
    (["--alpha", "1.5"], "--alpha"),
    (["--alpha", "-0.1"], "--alpha"),
    (["--t-max", "0"], "--t-max"),
    (["--t-max", "-3"], "--t-max"),
    (["--t-eval", "a,b"], "--t-eval"),
    (["--m", "abc"], "--m"),
    (["--lr", "0"], "--lr"),
    (["--simulate", "--lr", "1e300"], "would take no step"),     # t_max 100 / lr: 0 steps
    (["--simulate", "--lr", "250", "--t-max", "100"], "lower --lr or raise --t-max"),
])
def test_bad_input_exits_2_with_one_line(args, message, tmp_path):
    out = tmp_path / "out"
    r = run("ode", *args, "--out", str(out))
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0]
    assert "Traceback" not in r.output
    assert not out.exists()                                         # nothing written


def test_unwritable_out(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run("ode", "--m", "3", "--classes", "2", "--out", str(blocker / "sub"))
    assert r.exit_code == 2 and "--out" in r.stderr


def test_aliases_and_help():
    r = run("ode", "--paradigm", "soft", "--m", "3", "--classes", "2", "--json", "--t-eval", "1")
    assert r.exit_code == 0 and list(json.loads(r.stdout)) == ["sa"]
    r = run("ode", "--help")
    assert r.exit_code == 0 and "Theorem 1" in r.output


def test_comma_list_of_paradigms():
    r = run("ode", "--paradigm", "lv,sa", "--m", "3", "--classes", "2", "--json", "--t-eval", "1")
    assert r.exit_code == 0 and list(json.loads(r.stdout)) == ["lv", "sa"]
    r = run("ode", "--paradigm", "sa,sa")
    assert r.exit_code == 2 and "once each" in r.stderr


def test_ctrl_c_exits_130_with_one_line_and_writes_nothing(tmp_path, monkeypatch):
    from minimal_attn.experiments import ode as experiments_ode

    def interrupted(cfg, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiments_ode, "run_ode", interrupted)
    r = run("ode", "--m", "3", "--classes", "2", "--out", str(tmp_path / "out"))
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 130 and len(lines) == 1
    assert lines[0].startswith("Error: interrupted; nothing was written")
    assert not (tmp_path / "out").exists()


def test_every_json_key_is_in_the_help():
    r = run("ode", "--m", "3", "--classes", "2", "--json", "--t-eval", "1", "--t-max", "1",
            "--simulate")
    entry = json.loads(r.stdout)["sa"]
    r2 = run("ode", "--json", "--t-eval", "1", "--t-max", "1", "--paradigm", "sa")
    keys = set(entry) | set(entry["simulated"]) | set(json.loads(r2.stdout)["sa"])
    help_text = run("ode", "--help").output
    assert keys == {"t", "mu", "nu", "alpha", "beta", "m", "C", "simulated", "settings"}
    assert all(f'"{k}"' in help_text for k in keys)
    assert "lvml" in help_text


def test_library_call_equals_the_command(tmp_path):
    """A Python user gets the CLI's numbers and files from experiments_ode."""
    from minimal_attn.experiments.ode import OdeConfig, ode_json, run_ode, write_ode

    cfg = OdeConfig(paradigms=("ha", "lv"), m=6, n_classes=4, t_eval=[0.5, 3.0])
    r = run("ode", "--paradigm", "ha,lv", "--m", "6", "--classes", "4", "--t-eval", "0.5,3",
            "--json")
    assert json.loads(r.stdout) == json.loads(json.dumps(ode_json(run_ode(cfg))))
    names = write_ode(run_ode(cfg), str(tmp_path / "o"))
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(names) == [
        "ode.png", "ode_ha.csv", "ode_lv.csv"]


@pytest.mark.parametrize("args, words", [
    (["--simulate", "--m", "1000000"], ["GiB", "lower --m or --classes"]),
    (["--simulate", "--t-eval", "1e12"], ["gradient steps", "--lr"]),
    (["--t-eval", "nan"], ["--t-eval", "finite"]),
])
def test_refusals_name_the_estimate_and_the_option(args, words):
    r = run("ode", *args)
    assert r.exit_code == 2 and all(w in r.stderr for w in words), r.stderr


def test_parameters_become_the_commands_options_but_not_inside_paths():
    from minimal_attn.cli.main import _as_option, cli
    from minimal_attn.errors import InputError

    ode_cmd = cli.get_command(None, "ode")
    exc = InputError("cannot write to /tmp/out/m: denied; choose a writable out",
                     param="out")
    assert _as_option(exc, ode_cmd) == ("cannot write to /tmp/out/m: denied; "
                                        "choose a writable --out")
    exc = InputError("lower m or n_classes", param=("m", "n_classes"))
    assert _as_option(exc, ode_cmd) == "lower --m or --classes"      # --classes fills n_classes


def test_a_groups_subcommands_lend_their_options():
    # `cells run` raises inside the group `cells`: results_dir is its --results
    from minimal_attn.cli.main import _as_option, cli
    from minimal_attn.errors import InputError

    cells = cli.get_command(None, "cells")
    exc = InputError("cannot write to results_dir; choose a writable results_dir",
                     param="results_dir")
    assert _as_option(exc, cells) == ("cannot write to --results; choose a writable "
                                      "--results")


def test_m20_c20_runs_to_figure4s_final_time_and_other_settings_to_100():
    for (m, c), t_end in (((20, 20), 1000.0), ((5, 3), 100.0), ((7, 3), 100.0)):
        r = run("ode", "--paradigm", "sa", "--m", str(m), "--classes", str(c), "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["sa"]["t"][-1] == t_end


def test_a_rerun_replaces_the_last_runs_files_and_other_runs_are_refused(tmp_path):
    out = tmp_path / "o"
    first = run("ode", "--m", "5", "--classes", "3", "--t-max", "2", "--simulate",
                "--out", str(out))
    assert first.exit_code == 0 and len(list(out.iterdir())) == 7, first.output
    again = run("ode", "--paradigm", "sa", "--m", "3", "--classes", "2", "--t-max", "2",
                "--out", str(out))
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in out.iterdir()) == ["ode.png", "ode_sa.csv"]
    # fixed-focus and train refuse the ode folder, and ode theirs, writing nothing
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for args in (["fixed-focus", "--paradigm", "sa", "--alphas", "0.5", "--epochs", "2"],
                 ["train", "--backend", "numpy", "--epochs", "1", "--n-train", "20",
                  "--n-test", "10", "--m", "3", "--paradigm", "sa"]):
        r = run(*args, "--out", str(out))
        assert r.exit_code == 2 and "holds an attn-dyn ode run" in r.output, r.output
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    ff = tmp_path / "ff"
    made = run("fixed-focus", "--paradigm", "sa,ha", "--alphas", "0.5", "--epochs", "2",
               "--out", str(ff))
    assert made.exit_code == 0 and (ff / "fixed_focus_ha.csv").exists(), made.output
    r = run("ode", "--paradigm", "sa", "--m", "3", "--classes", "2", "--out", str(ff))
    assert r.exit_code == 2 and "holds an attn-dyn fixed-focus run" in r.output
    made = run("fixed-focus", "--paradigm", "sa", "--alphas", "0.5", "--epochs", "2",
               "--out", str(ff))
    assert made.exit_code == 0 and not (ff / "fixed_focus_ha.csv").exists()
