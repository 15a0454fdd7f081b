"""benchmarks/bench_batched_seeds.py keeps timing when one variant fails: on a card that
refuses a capture, the step probe of gpu_cells.sh must still get the others' times."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
TINY = ["--seeds", "2", "--batch", "10", "--width", "0.25", "--n-train", "20",
        "--n-test", "10", "--no-sequential", "--threads", "1"]


def bench(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_batched_seeds.py"),
                           *TINY, *args], capture_output=True, text=True, timeout=300)


def test_a_variant_that_fails_is_left_out_and_named(tmp_path):
    out = tmp_path / "times.json"
    # a CUDA graph on the CPU is refused: the eager variant is still timed
    run = bench("--modes", "loop", "--compile", "none,cudagraph", "--json", str(out))
    assert run.returncode == 0, run.stderr
    assert "batched (loop, cudagraph): failed in its warm-up, left out" in run.stderr
    saved = json.loads(out.read_text())
    assert list(saved["variants"]) == ["batched (loop)"]
    assert saved["variants"]["batched (loop)"]["seconds"] > 0
    assert "needs a CUDA device" in saved["failed"]["batched (loop, cudagraph)"]
    # nothing left to time: a one-line error, exit 2
    run = bench("--modes", "loop", "--compile", "cudagraph")
    assert run.returncode == 2 and "every variant failed" in run.stderr
