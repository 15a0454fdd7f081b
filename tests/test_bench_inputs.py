"""The benchmark scripts refuse bad input as the CLI does: one line ``Error: ...`` naming
the option, exit status 2, no traceback, and before any work is timed."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from minimal_attn.cli.main import run_script
from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")            # the benchmarks time torch models

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible")


@pytest.mark.parametrize("script,args,words", [
    # --modes used to be checked in the warm-up, after the sequential baseline had run
    ("bench_batched_seeds.py", ["--modes", "loop,foo"], "--modes must name some of loop,"),
    # min() of no rounds; an unknown --compile was left out in the warm-up; a CUDA graph
    # on the CPU too, after the sequential baseline had run
    ("bench_batched_seeds.py", ["--rounds", "0"], "--rounds must be an integer >= 1, got 0"),
    ("bench_batched_seeds.py", ["--compile", "none,bogus"], "--compile must name some of"),
    pytest.param("bench_batched_seeds.py", ["--compile", "none,cudagraph"],
                 "--compile cudagraph captures", marks=NO_GPU),
    ("bench_batched_seeds.py", ["--width", "0"], "--width must be a finite number > 0"),
    ("bench_cnn_throughput.py", ["--m", "1"], "--m must be an integer >= 2"),
    # argparse's usage block and `error:`, and a traceback for --chunk, before
    ("bench_cnn_throughput.py", ["--batch", "0"], "--batch must be an integer >= 1, got 0"),
    ("bench_cnn_throughput.py", ["--paradigm", "foo"], "--paradigm: invalid choice: 'foo'"),
    ("bench_cnn_throughput.py", ["--chunk", "abc"], "--chunk must be chunk sizes >= 1"),
    ("bench_synthetic_seeds.py", ["--compile", "cudagraph"], "needs --device cuda"),
    # a division by zero, a message about mixed tasks, an unknown way ignored
    ("bench_synthetic_seeds.py", ["--steps", "0"], "--steps must be an integer >= 1, got 0"),
    ("bench_synthetic_seeds.py", ["--seeds", "0"], "--seeds must be an integer >= 1, got 0"),
    ("bench_synthetic_seeds.py", ["--compile", "bogus"], "--compile must name some of none,"),
    ("bench_ibm1.py", ["--data", "no/such/folder"], "pass --data"),
    # 0 pairs trained on all of them; min() of no repeats
    ("bench_ibm1.py", ["--pairs", "0"], "--pairs must be an integer >= 1, got 0"),
    ("bench_ibm1.py", ["--repeats", "0"], "--repeats must be an integer >= 1, got 0"),
    ("bench_ibm1.py", ["--iterations", "x"], "--iterations must be an integer >= 1, got x"),
    # no GPU: found before the CPU run is timed (it used to be after); skipped on a GPU
    pytest.param("bench_ibm1.py", ["--device", "cuda", "--gpu-lib", "torch", "--data", "."],
                 "use --device cpu", marks=NO_GPU),
    ("bench_snell_eval.py", ["--data-dir", "no/such/folder"], "--data-dir"),
    # the library's --max-val named for this script's --n-val; no rounds: UnboundLocalError
    ("bench_snell_eval.py", ["--n-val", "0"], "--n-val must be an integer >= 1, got 0"),
    ("bench_snell_eval.py", ["--rounds", "0"], "--rounds must be an integer >= 1, got 0"),
    ("bench_snell_agreement.py", ["--profile"], "add --train-steps-only"),
    ("bench_snell_agreement.py", ["--proxy-epochs", "0"], "--proxy-epochs must be an integer"),
    ("bench_snell_agreement.py", ["--dataset", "x"], "--dataset: invalid choice: 'x'"),
    ("bench_snell_sharing.py", ["--copies", "1"], "--copies must be an integer >= 2"),
    ("bench_snell_sharing.py", ["--ways", "threads,mps"], "--ways must name some of"),
    ("bench_fixed_focus.py", ["--m", "1"], "--m must be an integer >= 2"),
    ("bench_fixed_focus.py", ["--lr", "nan"], "--lr must be a finite number > 0, got nan"),
    ("bench_fixed_focus.py", ["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, script, args, words):
    # in this process, as `python benchmarks/SCRIPT` runs it (a subprocess each would spend
    # its time importing torch again; one real process: the test below)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), *args])
    threads = torch.get_num_threads()
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert words in err and "Traceback" not in err and "usage:" not in err
    assert list(tmp_path.iterdir()) == []                     # nothing written


def test_a_script_run_as_a_process_refuses_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, str(BENCH / "bench_cnn_throughput.py"),
                          "--batch", "0"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 2 and run.stderr == \
        "Error: --batch must be an integer >= 1, got 0\n", run.stderr
    assert list(tmp_path.iterdir()) == []


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


def test_every_script_parses_its_options_with_the_shared_parser():
    for script in sorted(BENCH.glob("bench_*.py")):
        text = script.read_text()
        assert "from _options import ArgumentParser" in text, script.name
        assert "argparse.ArgumentParser(" not in text, script.name


@pytest.mark.parametrize("argv,line", [
    (["--n-train", "0"], "--n-train must be an integer >= 1, got 0"),
    (["--n-train", "2.5"], "--n-train must be an integer >= 1, got 2.5"),
    (["--m", "1"], "--m must be an integer >= 2, got 1"),
    (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
    (["--lr", "-0.5"], "--lr must be a finite number > 0, got -0.5"),
    (["--compile", "none,"], "--compile must name some of none, cudagraph (comma-separated), "
                             "got 'none,'"),
    (["--m"], "--m: expected one argument"),
    (["--what"], "unrecognized arguments: --what"),
])
def test_the_shared_parser_refuses_as_the_cli_does(monkeypatch, capsys, argv, line):
    monkeypatch.syspath_prepend(str(BENCH))
    from _options import ArgumentParser, count, names, positive

    parser = ArgumentParser()
    parser.add_argument("--n-train", type=count(), default=3)
    parser.add_argument("--m", type=count(2), default=5)
    parser.add_argument("--lr", type=positive, default=0.1)
    parser.add_argument("--compile", type=names(("none", "cudagraph")), default="none")
    assert vars(parser.parse_args([])) == {"n_train": 3, "m": 5, "lr": 0.1,
                                           "compile": ["none"]}
    assert parser.parse_args(["--compile", "cudagraph,none"]).compile == ["cudagraph", "none"]
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"Error: {line}\n"
