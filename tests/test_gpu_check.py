"""benchmarks/gpu_check.sh: its dry run lists every check and exits 0 (runs on any CPU)."""

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.sh"
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
                                        (["--budget", "0"], "whole number of seconds")])
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
    import os

    out = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--only",
                          f"agreement_{check}_paper"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    (row,) = [line for line in out.stdout.splitlines() if line.startswith("speed_agreement")]
    # the models and the proxies at once; the row ends on its own inside the check's limit
    assert f"--dataset {check} " in row and "--workers 6" in row
    assert f"--time-limit {limit} " in row and f" {within}s " in row
