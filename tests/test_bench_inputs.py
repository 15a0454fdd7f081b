"""The benchmark scripts refuse bad input as the CLI does: one line ``Error: ...`` naming
the option, exit status 2, no traceback, and before any work is timed."""

import subprocess
import sys
from pathlib import Path

import pytest

from minimal_attn.cli.main import run_script
from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")            # the benchmarks time torch models

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script,args,words", [
    # --modes used to be checked in the warm-up, after the sequential baseline had run
    ("bench_batched_seeds.py", ["--modes", "loop,foo"], "--modes: 'foo'"),
    ("bench_cnn_throughput.py", ["--m", "1"], "--m must be an integer >= 2"),
    ("bench_synthetic_seeds.py", ["--compile", "cudagraph"], "needs --device cuda"),
    ("bench_ibm1.py", ["--data", "no/such/folder"], "pass --data"),
    # no GPU: found before the CPU run is timed (it used to be after); skipped on a GPU
    pytest.param("bench_ibm1.py", ["--device", "cuda", "--gpu-lib", "torch", "--data", "."],
                 "use --device cpu", marks=pytest.mark.skipif(
                     torch.cuda.is_available(), reason="a CUDA GPU is visible")),
    ("bench_snell_eval.py", ["--data-dir", "no/such/folder"], "--data-dir"),
    ("bench_snell_agreement.py", ["--profile"], "add --train-steps-only"),
    ("bench_snell_sharing.py", ["--copies", "1"], "--copies must be an integer >= 2"),
    ("bench_snell_sharing.py", ["--ways", "threads,mps"], "--ways must name some of"),
    ("bench_fixed_focus.py", ["--m", "1"], "must be an integer >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, script, args, words):
    run = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("Error: ") and run.stderr.count("\n") == 1, run.stderr
    assert words in run.stderr and "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []                     # nothing written


def test_run_script_names_the_option_and_passes_the_status_on(capsys):
    def bad():
        raise InputError("n_train must be >= 1, got 0", param="n_train")

    with pytest.raises(SystemExit) as stop:
        run_script(bad)
    assert stop.value.code == 2
    assert capsys.readouterr().err == "Error: --n-train must be >= 1, got 0\n"
    for status in (0, 1, None):
        with pytest.raises(SystemExit) as stop:
            run_script(lambda status=status: status)
        assert stop.value.code == status
