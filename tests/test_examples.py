"""The examples: ``--help`` starts no work, a bad setting is one line and exit 2, and every
example runs end to end at a tiny size set through its own environment settings.

``--help`` and the refusals run in this process (runpy; the imports are paid once); the
smoke runs each run as a script in a child process, as a user types it, with one thread
(a loaded 2-core machine makes multi-threaded BLAS and torch many times slower at these
sizes). An example that needs ``../shared/data`` skips without it.
"""

import json
import math
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p.stem for p in EXAMPLES.glob("[a-z]*.py"))
#: How an example declares a setting in its ``read(...)`` call.
DECLARED = re.compile(r"\b([A-Z][A-Z0-9_]*)=(?:integer|number|choice|flag|path)\(")


def declared(name):
    """The environment settings example ``name`` declares, in order."""
    return DECLARED.findall((EXAMPLES / f"{name}.py").read_text())


def skip_without_torch(name):
    """The torch examples skip where torch is not installed (the core runs without it)."""
    text = (EXAMPLES / f"{name}.py").read_text()
    if "import torch" in text or "minimal_attn.backends" in text:
        pytest.importorskip("torch", reason=f"{name} needs torch")


@pytest.fixture
def in_process(monkeypatch, tmp_path):
    """``run(name, *args, **env)``: example ``name`` in this process, in an empty folder,
    with only the settings given; returns the SystemExit code (None if it ran through)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.chdir(tmp_path)

    def run(name, *args, **env):
        skip_without_torch(name)
        for setting in declared(name):
            monkeypatch.delenv(setting, raising=False)
        for setting, value in env.items():
            monkeypatch.setenv(setting, value)
        script = str(EXAMPLES / f"{name}.py")
        monkeypatch.setattr(sys, "argv", [script, *args])
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            return stop.code
        return None
    return run


# ------------------------------------------------------------------ --help
def test_every_example_reads_its_settings_through_the_one_reader():
    """No example reads os.environ itself (so none can skip the checks and --help)."""
    for name in SCRIPTS:
        text = (EXAMPLES / f"{name}.py").read_text()
        assert "os.environ" not in text, name
        assert "from _settings import" in text and "read(" in text, name


@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_the_settings_and_starts_no_work(name, flag, in_process, capsys, tmp_path):
    assert in_process(name, flag) == 0
    out = capsys.readouterr().out
    heading = re.search(r"^# # (.+)$", (EXAMPLES / f"{name}.py").read_text(), re.M).group(1)
    assert out.startswith(f"{name}.py: {heading}\n")
    for setting in declared(name):
        assert f"\n  {setting}" in out, setting
    if not declared(name):
        assert "No settings" in out
    assert out.rstrip().splitlines()[-1].startswith("Usage:")     # nothing printed after it
    assert not list(tmp_path.iterdir())                          # nothing written


# ------------------------------------------------------------------ refusals
BAD = [("both_papers", "BOTH_SEEDS", "abc", "not an integer"),
       ("both_papers", "BOTH_SEEDS", "-3", "below 1"),
       ("hatexplain_table1", "HX_EPOCHS", "0", "below 1"),
       ("hatexplain_table1", "HX_EMBEDDINGS", "standard,bert",
        "'bert' is not one of standard, self-attention"),
       ("paper2_agreement", "FULL", "yes", "not 1 or 0"),
       ("paper2_long_inputs", "LONG_STEPS", "1", "below 2"),
       ("paper2_proxy_ibm1", "MULTI30K", "no/such/folder", "no such folder"),
       ("paper2_synthetic", "SYNTH_STEPS", "1.5", "not an integer"),
       ("table1_cifar10", "CIFAR_FRACTION", "nan", "not finite"),
       ("table1_cifar10", "CIFAR_FRACTION", "2", "above 1.0"),
       ("table1_cpu", "TABLE1_CPU", "tiny", "'tiny' is not one of full, reduced"),
       ("table1_cpu", "TABLE1_CPU_PARADIGMS", "sa,soft", "'soft' is not one of")]


@pytest.mark.parametrize("name, setting, value, why", BAD,
                         ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_a_bad_setting_is_one_line_and_exit_2(name, setting, value, why, in_process, capsys,
                                              tmp_path):
    assert setting in declared(name)
    assert in_process(name, **{setting: value}) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith(f"Error: {setting}={value}: {why}")
    assert f"; set {setting} to " in captured.err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_unknown_argument_is_one_line_and_exit_2(name, in_process, capsys, tmp_path):
    assert in_process(name, "--seeds", "3") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"Error: unknown argument '--seeds': the script takes only --help; its settings are "
        f"environment variables (python {EXAMPLES / name}.py --help lists them)"]
    assert not list(tmp_path.iterdir())


def test_as_a_real_process_help_exits_0_and_a_bad_value_2_without_a_traceback(tmp_path):
    """Exit statuses as the shell sees them (two numpy-only examples: no torch import)."""
    def script(name, *args, **env):
        return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, **env})
    shown = script("paper1_linear_ode", "--help")
    assert shown.returncode == 0 and "No settings" in shown.stdout and shown.stderr == ""
    bad = script("paper2_proxy_ibm1", PROXY_PAIRS="3k")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("Error: PROXY_PAIRS=3k: not an integer; set PROXY_PAIRS to an "
                          "integer >= 10 (default 3000)\n")


# ------------------------------------------------------------------ the reader itself
@pytest.fixture
def settings(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import _settings
    return _settings


def test_reader_types_defaults_and_bounds(settings, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["x.py"])
    spec = dict(T_INT=settings.integer(5, "n", low=1, high=9),
                T_NUM=settings.number(0.5, "x", low=0.0),
                T_ONE=settings.choice("a", "c", ("a", "b")),
                T_MANY=settings.choice(("a", "b"), "cs", ("a", "b"), many=True),
                T_FLAG=settings.flag("f"),
                T_PATH=settings.path(None, "p", folder_exists=True))
    for name in spec:
        monkeypatch.delenv(name, raising=False)
    got = settings.read(**spec)
    assert vars(got) == {"T_INT": 5, "T_NUM": 0.5, "T_ONE": "a", "T_MANY": ("a", "b"),
                         "T_FLAG": False, "T_PATH": None}
    for name, text in dict(T_INT=" 9 ", T_NUM="1e-3", T_ONE="b", T_MANY="b, a", T_FLAG="1",
                           T_PATH=str(tmp_path)).items():
        monkeypatch.setenv(name, text)
    monkeypatch.setenv("T_FLAG", "1")
    got = settings.read(**spec)
    assert vars(got) == {"T_INT": 9, "T_NUM": 1e-3, "T_ONE": "b", "T_MANY": ("b", "a"),
                         "T_FLAG": True, "T_PATH": tmp_path}
    monkeypatch.setenv("T_INT", "")                              # empty: the default
    assert settings.read(**spec).T_INT == 5
    assert spec["T_INT"].rule == "an integer >= 1 and <= 9"
    assert spec["T_NUM"].rule == "a number >= 0.0"


@pytest.mark.parametrize("text, why", [("10", "above 9"), ("0", "below 1"), ("inf", "not an "
                                       "integer"), ("", None)])
def test_reader_refuses_out_of_range(settings, monkeypatch, capsys, text, why):
    monkeypatch.setattr(sys, "argv", ["x.py"])
    monkeypatch.setenv("T_INT", text)
    spec = {"T_INT": settings.integer(5, "n", low=1, high=9)}
    if why is None:
        assert settings.read(**spec).T_INT == 5
        return
    with pytest.raises(SystemExit) as stop:
        settings.read(**spec)
    assert stop.value.code == 2
    assert capsys.readouterr().err == (f"Error: T_INT={text}: {why}; set T_INT to an integer "
                                       ">= 1 and <= 9 (default 5)\n")


def test_inside_a_jupyter_kernel_the_kernels_arguments_are_ignored(settings, monkeypatch):
    """A notebook's kernel runs with argv ``[.../ipykernel_launcher.py, -f, kernel.json]``."""
    monkeypatch.setitem(sys.modules, "ipykernel", type(sys)("ipykernel"))
    monkeypatch.setattr(sys, "argv", ["/env/lib/ipykernel_launcher.py", "-f", "/k/kernel.json"])
    monkeypatch.delenv("T_INT", raising=False)
    assert settings.read(T_INT=settings.integer(5, "n")).T_INT == 5
    # %run example.py --help inside the notebook is the example's own command line
    monkeypatch.setattr(sys, "argv", ["example.py", "--help"])
    with pytest.raises(SystemExit) as stop:
        settings.read(T_INT=settings.integer(5, "n"))
    assert stop.value.code == 0


# ------------------------------------------------------------------ smoke runs
def _finite(values, low=-math.inf, high=math.inf):
    values = [float(v) for v in values]
    assert values and all(math.isfinite(v) and low <= v <= high for v in values), values
    return values


def check_paper1(out, folder):
    pairs = re.findall(r"analytic ([-+.\deE]+)  finite difference ([-+.\deE]+)", out)
    assert len(pairs) == 3
    for analytic, numeric in pairs:
        assert float(analytic) == pytest.approx(float(numeric), rel=1e-6, abs=1e-9)
    assert "pairwise (ours) +1.3595e-14   exact +1.3595e-14" in out


def check_proxy_ibm1(out, folder):
    found = re.findall(r"A\(beta\^px, beta\^IBM\[.+?\]\) = ([.\d]+)  \(random ([.\d]+)", out)
    assert len(found) == 2
    _finite([v for pair in found for v in pair], 0, 1)
    assert "log-log slope" in out


def check_agreement(out, folder):
    for task in ("sst2", "multi30k"):
        assert (folder / "out" / task / "agreement.json").is_file()
        assert f"| {task} (ours) |" in out
    table = json.loads(out.strip().splitlines()[-1])
    _finite([v for row in table.values() for v in row.values()], 0, 1)


def check_long_inputs(out, folder):
    lines = re.findall(r"step +\d+ acc ([.\d]+)  A\(buf,bpx\) +([.\d]+)", out)
    sections = 3 if "SST-2 not found" in out else 7              # 3 keyword sets, 4 real
    assert len(lines) == 3 * sections                            # steps 0, 1, 2 each
    _finite([acc for acc, _ in lines], 0, 1)
    _finite([a for _, a in lines], 0, 100)


def check_synthetic(out, folder):
    for task in ("copy", "keyword", "permute", "copy-mixture", "multihead"):
        assert (folder / "out" / task).is_dir(), task
    for claim in ("claim 1", "claim 2", "claim 3 early", "claim 3 late", "claim 4"):
        assert claim in out
    accs = re.findall(r"final acc \[([.\d ]+)\]", out)
    _finite(" ".join(accs).split(), 0, 1)


def check_both(out, folder):
    rows = re.findall(r"^\| (sa|ha|lv|hybrid) \|(.+)\|$", out, re.M)
    assert [p for p, _ in rows] == ["sa", "ha", "lv", "hybrid"]
    _finite([cell for _, cells in rows for cell in cells.split("|")[-3:]], 0, 100)


def check_hatexplain(out, folder):
    assert (folder / "out" / "standard" / "results.json").is_file()
    assert (folder / "out" / "standard" / "summary.md").is_file()
    verdicts = re.findall(r"^HateXplain-1 \(standard\): (hybrid|lv) SAIF ([.\d]+)% vs SA "
                          r"([.\d]+)%", out, re.M)
    assert [p for p, *_ in verdicts] == ["hybrid", "lv"]
    _finite([v for _, *pair in verdicts for v in pair], 0, 100)


def check_cifar10(out, folder):
    rows = re.findall(r"^\| (5|20) \| (sa|ha|lv|hybrid) \|(.+)\|$", out, re.M)
    assert len(rows) == 8
    _finite([cell for *_, cells in rows for cell in cells.split("|")], 0, 100)


def check_table1_cpu(out, folder):
    written = folder / "out"
    assert (written / "az_curves.png").stat().st_size > 0
    text = (written / "table1_cpu.md").read_text()
    assert "| SAIF, authors' recipe (2 seeds) |" in text and "2 seeds batched" in text
    cells = re.findall(r"(\d+\.\d) ± (\d+\.\d)", text)
    assert len(cells) == 2 * 4
    _finite([v for pair in cells for v in pair], 0, 100)


#: name -> (shared data sets it needs, its tiny settings, the check of its output)
SMOKE = {
    "paper1_linear_ode": ((), {}, check_paper1),
    "paper2_proxy_ibm1": (("multi30k",), dict(PROXY_PAIRS="200", PROXY_HELD="30",
                                             PROXY_EPOCHS="1", PROXY_MAX_D="64"),
                          check_proxy_ibm1),
    "paper2_agreement": (("sst2", "multi30k"), dict(AGREE_STEPS="2", AGREE_TRAIN="100",
                                                    AGREE_VAL="4", AGREE_VOCAB="200",
                                                    ATTN_DYN_OUT="out"), check_agreement),
    "paper2_long_inputs": ((), dict(LONG_STEPS="2", LONG_TRAIN="40", LONG_VAL="10",
                                    ATTN_DYN_OUT="out"), check_long_inputs),
    "paper2_synthetic": ((), dict(SYNTH_SEEDS="1", SYNTH_STEPS="3", SYNTH_HIDDEN="8",
                                  SYNTH_HEADS="2", SYNTH_POOL="2", MH_SEEDS="1",
                                  SYNTH_OUT="out"), check_synthetic),
    "both_papers": (("sst2",), dict(BOTH_SEEDS="1", BOTH_STEPS="2", BOTH_BATCH="2",
                                    BOTH_SST_STEPS="2", BOTH_SST_TRAIN="100",
                                    BOTH_SST_VAL="20", BOTH_OUT="out"), check_both),
    "hatexplain_table1": (("hatexplain",), dict(HX_EPOCHS="1", HX_MAX_LEN="8",
                                                HX_EMBEDDINGS="standard", HX_OUT="out"),
                          check_hatexplain),
    "table1_cifar10": (("cifar10",), dict(CIFAR_EPOCHS="1", CIFAR_FRACTION="0.005"),
                       check_cifar10),
    "table1_cpu": (("cifar10",), dict(TABLE1_CPU_TRAIN="20", TABLE1_CPU_TEST="10",
                                      TABLE1_CPU_EPOCHS="1", TABLE1_CPU_SEEDS="2",
                                      TABLE1_CPU_OUT="out"), check_table1_cpu),
}


def test_every_example_has_a_smoke_run():
    assert sorted(SMOKE) == SCRIPTS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_smoke_run_at_a_tiny_size(name, tmp_path, request):
    needs, tiny, check = SMOKE[name]
    skip_without_torch(name)
    env = {k: v for k, v in os.environ.items() if k not in declared(name)}
    if needs:
        data = request.getfixturevalue("shared_dataset")
        for dataset in needs:
            data(dataset)                                        # skips when absent
        env["ATTN_DYN_DATA"] = str(request.getfixturevalue("shared_data"))
    env.update(tiny, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    check(run.stdout, tmp_path)
