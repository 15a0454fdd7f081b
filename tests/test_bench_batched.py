"""benchmarks/bench_batched_seeds.py keeps timing when one variant fails: on a card that
refuses a capture, the step probe of gpu_cells.sh must still get the others' times."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
TINY = ["--seeds", "2", "--batch", "10", "--width", "0.25", "--n-train", "20",
        "--n-test", "10", "--no-sequential", "--threads", "1", "--modes", "loop"]


@pytest.fixture
def bench(monkeypatch):
    """The script's ``main(*args)``, with every compiled variant failing in its warm-up as
    a capture a card refuses does (a CUDA graph on the CPU is refused before anything is
    timed, so the failure is made here)."""
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_batched_seeds as script

    real = script.batched

    def batched(mode, how="none", precision="fp32"):
        if how != "compile":
            return real(mode, how, precision)

        def refused(config, seeds, splits):
            raise RuntimeError("this card refuses the capture\nmore lines")
        return refused

    monkeypatch.setattr(script, "batched", batched)

    def main(*args):
        monkeypatch.setattr(sys, "argv", ["bench_batched_seeds.py", *TINY, *args])
        return script.main()
    return main


def test_a_variant_that_fails_is_left_out_and_named(bench, tmp_path, capsys):
    out = tmp_path / "times.json"
    bench("--compile", "none,compile", "--json", str(out))
    err = capsys.readouterr().err
    assert "batched (loop, compile): failed in its warm-up, left out" in err
    saved = json.loads(out.read_text())
    assert list(saved["variants"]) == ["batched (loop)"]
    assert saved["variants"]["batched (loop)"]["seconds"] > 0
    assert saved["failed"]["batched (loop, compile)"] == "this card refuses the capture"
    # nothing left to time: a one-line error, exit 2
    with pytest.raises(SystemExit) as stop:
        bench("--compile", "compile")
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == \
        "Error: every variant failed in its warm-up (above)"
