"""One fuzz test per ``attn-dyn`` command: hypothesis draws option values and small files.

Each example runs the command in-process (click's CliRunner) at a tiny size and
asserts that it either succeeds, or exits with status 2, one ``Error:`` line on
stderr and no traceback, and leaves its folder (``--out`` and the inputs) as it
was. Values are drawn in range, out of range, NaN, infinite, huge, negative,
empty and unknown; files are small and malformed. ``tests/invalid_inputs.py``
keeps the readable list of named cases; this file looks for the ones nobody
named.
"""

import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import invalid_inputs as sweep  # noqa: E402

from minimal_attn.cli.main import cli  # noqa: E402

#: Values nobody should have to think of: non-numbers, out of range, huge, empty.
ODD = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "-0", "1e400", "100000000000000",
                       "", " ", "banana", "0x10", "1,2", "-3.5"])
#: Six fixed examples per command in the default run (about half a minute in all);
#: ATTN_DYN_FUZZ=N draws N fresh ones per command, e.g. before a release.
DEEP = int(os.environ.get("ATTN_DYN_FUZZ", "0"))
FUZZ = settings(max_examples=DEEP or 6, deadline=None, derandomize=not DEEP, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def ints(lo, hi):
    return st.one_of(st.integers(lo, hi).map(str), ODD)


def floats(lo, hi):
    return st.one_of(st.floats(lo, hi).map(repr), ODD)


def words(*names):
    return st.one_of(st.sampled_from(names), ODD)


@st.composite
def overrides(draw, table, flags=(), max_size=3):
    """Argument list: up to ``max_size`` options of ``table`` with drawn values, and flags."""
    names = draw(st.lists(st.sampled_from(sorted(table)), unique=True, max_size=max_size))
    args = []
    for name in names:
        args += [name, draw(table[name])]
    return args + draw(st.lists(st.sampled_from(flags), unique=True)) if flags else args


#: A tiny run ends in seconds; one still going after this was never refused (a hang).
LIMIT_S = 60


def _hang(signum, frame):
    raise TimeoutError(f"still running after {LIMIT_S} s: a run that should be tiny or refused")


def check(args, root):
    """Run ``attn-dyn ARGS`` in ``root``: success, or exit 2, one line, ``root`` unchanged."""
    before = sweep.snapshot(root)
    cwd = os.getcwd()
    os.chdir(root)
    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(LIMIT_S)
    try:
        r = CliRunner().invoke(cli, [str(a).format(root=root) for a in args])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"traceback for {args}") from r.exception
    event(f"exit {r.exit_code}")
    if r.exit_code == 0:
        return r
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 2, (args, r.exit_code, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("Error: "), (args, r.stderr)
    assert "Traceback" not in r.output
    assert sweep.snapshot(root) == before, (args, "a refused run changed its folder")
    return r


def scratch():
    """A fresh folder per example (tmp_path is one folder for every example of a test)."""
    return tempfile.TemporaryDirectory(prefix="fuzz-")


@pytest.fixture(autouse=True)
def one_thread(one_thread_if_torch):
    yield


# ------------------------------------------------------------------ V&R, NumPy side
@FUZZ
@given(extra=overrides({"--m": ints(2, 4), "--classes": ints(2, 3), "--t-max": floats(0.5, 2),
                        "--alpha": floats(0, 1), "--lr": floats(0.05, 0.5),
                        "--t-eval": st.one_of(st.just("0,0.5"), ODD),
                        "--paradigm": words("sa", "ha", "lv", "sa,lv", "all", "hybrid")},
                       flags=("--simulate", "--json")))
def test_ode(extra):
    with scratch() as root:
        check(["ode", "--m", "3", "--classes", "2", "--t-max", "1", "--out", "{root}/out",
               *extra], root)


@FUZZ
@given(extra=overrides({"--m": ints(2, 4), "--classes": ints(2, 3), "--epochs": ints(1, 3),
                        "--lr": floats(0.01, 0.5), "--delta": floats(0.01, 0.5),
                        "--alphas": st.one_of(st.just("0.2,0.6"), ODD),
                        "--n-train": ints(1, 20), "--seed": ints(0, 5),
                        "--paradigm": words("sa", "ha", "lv", "all"),
                        "--setting": words("linear", "cifar10")}))
def test_fixed_focus(extra):
    with scratch() as root:
        check(["fixed-focus", "--m", "3", "--classes", "2", "--epochs", "2", "--alphas", "0.5",
               "--out", "{root}/out", *extra], root)


@FUZZ
@given(extra=overrides({"--m": ints(2, 4), "--epochs": ints(1, 2), "--seeds": ints(1, 2),
                        "--n-train": ints(1, 20), "--n-test": ints(1, 10),
                        "--batch-size": ints(1, 20), "--lr": words("0.1", "sa=0.2,ha=0.1",
                                                                  "sa=0.1,sa=0.2", "hybrid=1"),
                        "--switch-epoch": words("1", "auto"), "--momentum": floats(0, 0.9),
                        "--threshold": floats(0.1, 0.9), "--n-classes": ints(2, 3),
                        "--paradigm": words("sa", "ha", "lv", "hybrid", "sa,lv"),
                        "--data-seed": ints(0, 3), "--protocol": words("paper"),
                        "--conv-mode": words("loop", "unfold", "grouped_nchw"),
                        "--precision": words("fp32", "bf16", "tf32")},
                       flags=("--resume", "--batch-seeds")),
       torch=st.booleans())
def test_train(extra, torch):
    if torch:
        pytest.importorskip("torch")
    backend = ["--backend", "torch", "--width", "0.125", "--device", "cpu", "--chunk", "50"] \
        if torch else ["--backend", "numpy"]
    with scratch() as root:
        check(["train", *backend, "--epochs", "1", "--n-train", "12", "--n-test", "6",
               "--paradigm", "ha", "--no-progress", "--out", "{root}/out", *extra], root)


# ------------------------------------------------------------------ Snell, NumPy side
@st.composite
def corpus(draw):
    """A parallel corpus: mostly the sweep's sentences, sometimes drawn text or bytes."""
    good = ("\n".join(sweep.SRC_LINES) + "\n", "\n".join(sweep.TGT_LINES) + "\n")
    odd = st.one_of(st.text(max_size=40).map(str.encode), st.binary(max_size=40))
    return tuple(draw(st.one_of(st.just(g.encode()), odd)) for g in good)


def _write_corpus(root, files):
    for name, data in zip(("src.txt", "tgt.txt"), files):
        Path(root, name).write_bytes(data)


@FUZZ
@given(files=corpus(), extra=overrides({"--iterations": ints(1, 3), "-k": ints(1, 2)},
                                       flags=("--no-null", "--json")))
def test_ibm1(files, extra):
    with scratch() as root:
        _write_corpus(root, files)
        check(["ibm1", "--src", "src.txt", "--tgt", "tgt.txt", "--out", "{root}/t.tsv", *extra],
              root)


@FUZZ
@given(files=corpus(), extra=overrides({"--epochs": ints(1, 2), "--dim": ints(1, 8),
                                        "--batch-size": ints(1, 16), "--lr": floats(1e-3, 0.1),
                                        "--min-count": ints(1, 2), "--holdout": floats(0.1, 0.5),
                                        "--percent": floats(1, 100), "--max-pairs": ints(2, 36),
                                        "--ibm-iterations": ints(1, 2), "--seed": ints(0, 3),
                                        "--tokenizer": words("simple", "whitespace")}))
def test_proxy(files, extra):
    with scratch() as root:
        _write_corpus(root, files)
        check(["proxy", "--src", "src.txt", "--tgt", "tgt.txt", "--epochs", "1", "--min-count",
               "1", "--out", "{root}/r.json", *extra], root)


# ------------------------------------------------------------------ torch commands
SYNTHETIC = {"--seeds": ints(1, 2), "--steps": ints(1, 3), "--hidden": ints(1, 4),
             "--embed": ints(1, 4), "--batch-size": ints(1, 3), "--lr": floats(1e-4, 1e3),
             "--eval-every": ints(1, 3), "--n-test": ints(1, 4), "--heads": ints(1, 2),
             "--pool": ints(1, 3), "--first-seed": ints(0, 3),
             "--device": words("cpu", "cuda", "gpu")}


@FUZZ
@given(task=st.sampled_from(["copy-control", "keyword", "multihead", "tsp"]),
       extra=overrides(SYNTHETIC, flags=("--resume",)),
       checkpoint=st.one_of(st.none(), st.binary(max_size=64)))
def test_synthetic(task, extra, checkpoint):
    pytest.importorskip("torch")
    with scratch() as root:
        if checkpoint is not None:            # a damaged checkpoint to resume from
            Path(root, "out", "checkpoints").mkdir(parents=True)
            Path(root, "out", "checkpoints", "train.ckpt").write_bytes(checkpoint)
        check(["synthetic", task, *sweep.SYN[2:], "--heads", "2", "--pool", "2",
               "--out", "{root}/out", *extra], root)


#: Lines of a tiny classification TSV, and odd ones.
TSV_LINE = st.one_of(st.sampled_from([f"{s}\t{k % 2}" for k, s in enumerate(sweep.SRC_LINES)]),
                     st.sampled_from(["text\tlabel", "no tab here", "a\t2", "\t1", "b\t"]),
                     st.text(max_size=12))
DEV_LINES = st.one_of(st.just(sweep.SRC_LINES[:8]).map(
    lambda rows: [f"{r}\t{k % 2}" for k, r in enumerate(rows)]),
    st.lists(TSV_LINE, min_size=1, max_size=6))
SEQ_OPTIONS = {"--steps": ints(1, 3), "--hidden": ints(1, 4), "--emb": ints(1, 4),
               "--batch-size": ints(1, 4), "--lr": floats(1e-4, 10), "--eval-every": ints(1, 2),
               "--max-train": ints(1, 30), "--max-val": ints(1, 10), "--seed": ints(0, 3),
               "--train-eval": ints(0, 3), "--vocab-size": ints(4, 40),
               "--device": words("cpu", "cuda", "mps", "auto"),
               "--task": words("classify", "translate"),
               "--embeddings": st.sampled_from(["{root}/glove.txt", "{root}/nope.txt"])}


def _seq_data(root, lines, glove):
    (Path(root) / "data").mkdir()
    for split in ("train", "dev"):
        rows = lines if split == "dev" else [f"{s}\t{k % 2}" for k, s in
                                             enumerate(sweep.SRC_LINES)]
        Path(root, "data", f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    Path(root, "glove.txt").write_text(glove, encoding="utf-8")


GLOVE = st.sampled_from(["the 1 2 3 4\n", "the 1 2\n", "", "2 4\nthe 1 2 3 4\n", "the a b c d\n"])


@FUZZ
@given(lines=DEV_LINES, glove=GLOVE, extra=overrides(SEQ_OPTIONS),
       attention=st.sampled_from(["learned", "uniform", "frozen"]))
def test_train_seq(lines, glove, extra, attention):
    pytest.importorskip("torch")
    with scratch() as root:
        _seq_data(root, lines, glove)
        check(["train-seq", *sweep.SEQ[1:4], "data", *sweep.SEQ[5:], "--attention", attention,
               "--out", "{root}/out", *extra], root)


@FUZZ
@given(lines=DEV_LINES, glove=GLOVE,
       extra=overrides({**SEQ_OPTIONS, "--proxy-d": ints(1, 4), "--proxy-epochs": ints(1, 2)},
                       flags=("--no-frozen", "--no-logistic", "--no-kendall")))
def test_agreement(lines, glove, extra):
    pytest.importorskip("torch")
    with scratch() as root:
        _seq_data(root, lines, glove)
        check(["agreement", *sweep.SEQ[1:4], "data", *sweep.SEQ[5:], "--proxy-d", "4",
               "--proxy-epochs", "1", "--out", "{root}/out", *extra], root)


#: One HateXplain post's fields, well-formed or not.
POST = st.fixed_dictionaries({}, optional={
    "tokens": st.one_of(st.just(["you", "are", "bad"]), st.none(), st.text(max_size=8),
                        st.lists(st.one_of(st.text(max_size=4), st.integers()), max_size=3)),
    "rationale": st.one_of(st.just([0, 0, 1]), st.none(), st.lists(st.integers(-1, 2),
                                                                   max_size=4)),
    "label": st.sampled_from(["toxic", "non-toxic", "spam", None]),
    "orig_split": st.sampled_from(["train", "test", "val", "nope"])})


SPLIT_FILE = st.dictionaries(
    st.sampled_from(["train", "val", "test"]),
    st.one_of(st.lists(st.sampled_from([r["post_id"] for r in sweep.HX_ROWS])), st.integers(),
              st.text(max_size=3)))


@FUZZ
@given(post=st.one_of(st.just(sweep.HX_ROWS[3]), POST),
       split_file=st.one_of(st.none(), st.none(), SPLIT_FILE),
       extra=overrides({"--epochs": ints(1, 2), "--seeds": ints(1, 2), "--lr": words(
           "0.1", "sa=0.1,sa=0.2", "lv=0.2"), "--hybrid-lr": floats(0.01, 0.1),
           "--batch-size": ints(1, 8), "--switch-epoch": words("1", "auto"),
           "--threshold": floats(0.1, 0.9), "--min-count": ints(1, 2),
           "--paradigm": words("sa", "ha", "lv", "hybrid", "sa,sa"),
           "--embedding": words("standard", "self-attention"),
           "--device": words("cpu", "cuda:3")}, flags=("--resume",)))
def test_train_text(post, split_file, extra):
    pytest.importorskip("torch")
    with scratch() as root:
        folder = Path(root, "hx")
        folder.mkdir()
        rows = [dict(r) for r in sweep.HX_ROWS]
        rows[3] = {**post, "post_id": "p3"}
        folder.joinpath("hatexplain_binary.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))
        if split_file is not None:
            folder.joinpath("post_id_divisions.json").write_text(json.dumps(split_file))
        check(["train-text", "--data-dir", "hx", "--paradigm", "ha", "--epochs", "1",
               "--min-count", "1", "--device", "cpu", "--no-progress", "--out", "{root}/out",
               *extra], root)


# ------------------------------------------------------------------ cells seen
JSONISH = st.one_of(st.integers(-3, 12000), st.floats(allow_nan=True), st.text(max_size=6),
                    st.none(), st.lists(st.integers(0, 3), max_size=3))


@st.composite
def seen_run(draw):
    """A run folder `cells seen` reads: config.json with drawn (often odd) values,
    results.json, one instances file of drawn arrays; or files of drawn bytes."""
    config = {"dataset": "cifar10", "m": draw(st.integers(2, 6)),
              "n_train": draw(st.integers(1, 400)), "n_test": draw(st.integers(1, 300)),
              "paradigms": ["sa"], "seeds": [0], "data_seed": draw(st.integers(0, 3)),
              "test_images": draw(st.sampled_from(["train", "train", "test", "x"])),
              "threshold": 0.8}
    for key in draw(st.lists(st.sampled_from(sorted(config)), unique=True, max_size=2)):
        config[key] = draw(JSONISH)                     # a field or two spoiled
    text = draw(st.one_of(st.just(json.dumps(config)), st.just(json.dumps(config)),
                          st.text(max_size=20)))
    n_test = config["n_test"] if type(config["n_test"]) is int and config["n_test"] >= 0 else 5
    n = draw(st.one_of(st.just(n_test), st.integers(0, 300)))
    kinds = [np.zeros(n), np.ones(n, bool), np.full(n, 0.9), np.array("x")]
    arrays = {k: draw(st.sampled_from(kinds)) for k in draw(st.lists(st.sampled_from(
        ["test_a_z", "test_s_y", "test_correct", "train_a_z"]), unique=True, min_size=2))}
    return text, arrays, draw(st.booleans())


@pytest.mark.skipif(not (sweep.SHARED / "cifar10").is_dir(), reason="no shared CIFAR-10 subset")
@FUZZ
@given(run=seen_run())
def test_cells_seen(run):
    text, arrays, with_data = run
    cifar = sweep.SHARED / "cifar10"
    with scratch() as root:
        folder = Path(root, "work", "cpu-t1-cifar10-m5-released-sa")
        folder.mkdir(parents=True)
        (folder / "results.json").write_text("{}")
        (folder / "config.json").write_text(text)
        with open(folder / "instances_sa_seed0.npz", "wb") as f:
            np.savez(f, **arrays)
        data = Path(root, "data")
        data.mkdir()
        if with_data:
            os.symlink(cifar, data / "cifar10")
        check(["cells", "seen", "cpu-t1-cifar10-m5-released-sa", "--data-root", "{root}/data",
               "--work", "{root}/work"], root)
