"""benchmarks/gpu_check.sh: its dry run lists every check and exits 0 (runs on any CPU);
and what both GPU job scripts (gpu_check.sh, gpu_cells.sh) refuse, and what comes back."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
CELLS = ROOT / "benchmarks" / "gpu_cells.sh"
#: A PATH without attn-dyn on it (nor nvidia-smi): the machine a device job gets.
BARE_PATH = "/usr/bin:/bin"
CHECKS = ("conformance_cupy", "conformance_torch_cuda", "cnn_throughput", "batched_seeds",
          "synthetic_seeds", "ibm1_gpu_vs_cpu", "train_cuda", "train_hatexplain_cuda",
          "synthetic_cuda", "agreement_cuda")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
def test_dry_run_lists_every_check_and_exits_0(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name in CHECKS:
        row = [line for line in lines if line.startswith(name + " ")]
        assert len(row) == 1 and ("would run" in row[0] or "would skip" in row[0]), name
    assert "--device cuda" in out.stdout
    # the conformance checks select the GPU namespaces by their test ids
    assert "-k cupy" in out.stdout and "torch_cuda" in out.stdout
    assert not (tmp_path / "o").exists()          # a dry run writes nothing


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
def test_unknown_option_is_an_error():
    out = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown option" in out.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
@pytest.mark.parametrize("args,words", [(["--budget"], "--budget needs a value"),
                                        (["--only"], "--only needs a value"),
                                        (["--budget", "9m"], "whole number of seconds"),
                                        (["--budget", "0"], "whole number of seconds"),
                                        (["--budget", "000"], "whole number of seconds"),
                                        (["--budget", "-5"], "whole number of seconds"),
                                        (["--budget", "1234567890"], "at most 9 digits"),
                                        # ran nothing and exited 0; a bad regex printed
                                        # grep's complaint once a check
                                        (["--only", "nomatch"], "matches none of the checks"),
                                        (["--only", "("], "not a regular expression")])
def test_a_missing_or_bad_value_is_one_line_and_exit_2(args, words):
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and words in out.stderr and out.stderr.count("\n") == 1
    assert out.stdout == ""


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
@pytest.mark.parametrize("script", ["gpu_check.sh", "gpu_cells.sh"])
def test_help_prints_the_whole_header_and_nothing_else(script):
    path = SCRIPT.parent / script
    lines = path.read_text().splitlines()
    end = next(k for k, line in enumerate(lines) if k and not line.startswith("#"))
    out = subprocess.run(["bash", str(path), "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines() == lines[1:end]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
@pytest.mark.parametrize("check, env, limit, within", [
    ("sst2", {}, "150", "240"), ("sst2", {"GPU_CHECK_ROW_LIMIT": "77"}, "77", "240"),
    ("multi30k", {}, "150", "300"), ("multi30k", {"GPU_CHECK_M30K_LIMIT": "90"}, "90", "300")])
def test_the_paper_size_rows_run_side_by_side_under_a_time_limit(check, env, limit, within):
    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--only",
                          f"agreement_{check}_paper"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    (row,) = [line for line in out.stdout.splitlines() if line.startswith("speed_agreement")]
    # the models and the proxies at once; the row ends on its own inside the check's limit
    assert f"--dataset {check} " in row and "--workers 6" in row
    assert f"--time-limit {limit} " in row and f" {within}s " in row


def dry(script, *args, **env):
    return subprocess.run(["bash", str(script), "--dry-run", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable, **env})


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
@pytest.mark.parametrize("script", [SCRIPT, CELLS])
def test_the_budget_is_read_in_base_10(script):
    # bash arithmetic read 0550 as octal 360 and refused 08
    for given, seconds in (("0550", 550), ("08", 8)):
        out = dry(script, "--budget", given, *(["tiny-t1-synthetic-sa"] if script == CELLS
                                                else ["--only", "^cnn_"]))
        assert out.returncode == 0, out.stderr
        assert f"budget {seconds} s" in out.stdout.splitlines()[0]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
def test_without_attn_dyn_on_the_path_the_commands_run_through_python(tmp_path):
    # the fallback once quoted `python -c '...'` inside a string the shell splits into
    # words: five checks whose condition asks the CLI were listed as absent
    for folder in ("hatexplain", "sst2", "multi30k", "cifar10"):
        (tmp_path / folder).mkdir()
    out = dry(SCRIPT, PATH=BARE_PATH, ATTN_DYN_DATA=str(tmp_path))
    assert out.returncode == 0, out.stderr
    cli = f"{sys.executable} -m minimal_attn.cli.main "
    for name in ("train_hatexplain_cuda", "synthetic_cuda", "agreement_cuda",
                 "speed_agreement_sst2_paper", "speed_agreement_multi30k_paper"):
        (row,) = [line for line in out.stdout.splitlines() if line.startswith(name + " ")]
        assert "would run" in row and cli in row, row
    assert "would skip" not in out.stdout


FAKE_PYTHON = """#!/bin/bash
# python, but for the commands a test stands in for
case "$*" in
{cases}
esac
exec {python} "$@"
"""


def fake_python(tmp_path, cases):
    path = tmp_path / "python"
    path.write_text(FAKE_PYTHON.format(cases=cases, python=sys.executable))
    path.chmod(0o755)
    return str(path)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
@pytest.mark.parametrize("test_status, row_status", [(1, 0), (0, 3)])
def test_the_sst2_row_runs_after_its_test_and_the_check_fails_if_either_does(
        tmp_path, test_status, row_status):
    # `pytest ...; attn-dyn agreement ...` gave the row's status alone
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    python = fake_python(tmp_path, f"""
  "-m pytest "*) echo "the proxy's card test"; exit {test_status} ;;
  "-m minimal_attn.cli.main agreement --help") exit 0 ;;
  "-m minimal_attn.cli.main agreement "*) echo "the row ran"; exit {row_status} ;;""")
    out = subprocess.run(["bash", str(SCRIPT), "--only", "^speed_agreement_sst2_paper$",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHON": python, "PATH": BARE_PATH,
                              "ATTN_DYN_DATA": str(tmp_path / "data")})
    assert out.returncode == 1, out.stdout + out.stderr
    log = (tmp_path / "out" / "speed_agreement_sst2_paper.log").read_text()
    assert "the proxy's card test" in log and "the row ran" in log
    status = test_status or row_status
    assert f"| speed_agreement_sst2_paper | FAIL({status}) |" in out.stdout


def scratch_checkout(tmp_path):
    """A copy of the layout gpu_cells.sh works in (the package comes from the install), so
    this checkout's .gpu_data, results and runs are untouched."""
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    for script in (CELLS, CELLS.parent / "_budget.sh"):
        shutil.copy(script, repo / "benchmarks")
    return repo


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
def test_prepare_refuses_a_missing_data_folder_before_copying_anything(tmp_path):
    # cp's `cannot stat` went by, and --prepare exited 0 with the data missing
    repo = scratch_checkout(tmp_path)
    out = subprocess.run(["bash", str(repo / "benchmarks" / "gpu_cells.sh"), "--prepare",
                          "t1-cifar10-m5-paper-ha@1"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHON": sys.executable,
                              "ATTN_DYN_DATA": str(tmp_path / "none")})
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("Error: ") and out.stderr.count("\n") == 1, out.stderr
    assert f"{tmp_path / 'none' / 'cifar10-jpeg'} does not exist" in out.stderr
    assert sorted(p.name for p in repo.iterdir()) == ["benchmarks"]     # no .gpu_data, .whl


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not available")
def test_gpu_cells_brings_home_only_what_the_job_wrote_and_each_record_at_once(tmp_path):
    """Two cells whose `cells run` a stand-in plays: the first rewrites its record, the
    second runs out of time (its record in the store is an old one). Under $OUT/cells the
    first's record is there before the second starts (a job the machine ends later keeps
    it); the summary tables the first's record and not the old one."""
    from click.testing import CliRunner

    from minimal_attn.cli.main import cli

    store = ROOT / "results" / "cells"
    first, second = "permute-copy@1", "cpu-multihead-8"
    if not all((store / f"{n}.json").is_file() for n in (first, second)):
        pytest.skip("the store's records this test copies are not there")
    repo, out = scratch_checkout(tmp_path), tmp_path / "out"
    (repo / "results" / "cells").mkdir(parents=True)
    out.mkdir()
    shutil.copy(store / f"{second}.json", repo / "results" / "cells")
    python = fake_python(tmp_path, f"""
  "-m minimal_attn.cli.main cells run {first} "*)
    cp {store / first}.json results/cells/; echo "trained"; exit 0 ;;
  "-m minimal_attn.cli.main cells run {second} "*) ls "$OUT/cells"; exit 124 ;;""")
    done = subprocess.run(["bash", str(repo / "benchmarks" / "gpu_cells.sh"), "--budget",
                           "300", "--force", first, second], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHON": python, "OUT": str(out),
                               "GPU_CELLS_DEVICE": "cpu"})
    assert done.returncode == 1, done.stdout + done.stderr        # a TIMEOUT fails the job
    summary = (out / "gpu_cells_summary.md").read_text()
    assert f"| {first} | DONE |" in summary
    (row,) = [line for line in summary.splitlines() if line.startswith(f"| {second} |")]
    assert "| TIMEOUT |" in row and row.endswith(f"| {first}.json |")    # already home
    assert "permutation copy vs its control" in summary
    assert "multi-head rescue" not in summary               # the store's old record
    assert sorted(p.name for p in (out / "cells").iterdir()) == [f"{first}.json"]
    home = tmp_path / "home"
    result = CliRunner().invoke(cli, ["cells", "import", str(out / "cells"),
                                      "--results", str(home)])
    assert result.exit_code == 0, result.output
    assert (home / "cells" / f"{first}.json").is_file()
