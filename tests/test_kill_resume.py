"""SIGKILL at any moment, then resume: every long command ends where an uninterrupted run does.

SIGKILL (the OOM killer, a node lost, ``kill -9``) runs no clean-up, unlike Ctrl-C and
SIGTERM (``test_reliability.py``). Each long command at a tiny size runs once whole, in
this process, as the reference; then in a child process killed twice: during a
checkpoint write of the run's first half chosen by a seeded draw (the file is complete in
its temporary and not yet renamed into place), and, resumed, at a seeded moment of the
interval after its next checkpoint. After
each kill every JSON file parses; the documented resume (``--resume``, or the same
command line) is accepted and ends with the reference's numbers (to the digit: the same
threads everywhere, the children inheriting this process's environment), and no
temporary file, staging folder or damaged checkpoint remains.
"""

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.experiments import io

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="kills child processes with SIGKILL; reads /proc/self/fd"),
    pytest.mark.usefixtures("one_thread_if_torch"),
]

#: Children come from a fork server that has imported what the commands import, once (a
#: child then starts in milliseconds, not the seconds a new interpreter takes to import
#: torch, scipy and matplotlib; a name that no longer imports only costs that time).
PRELOAD = ["minimal_attn.cli.main", "minimal_attn.experiments.sweep", *(
    f"minimal_attn.backends.{m}" for m in ("vr.table1_driver", "vr.train", "vr.batched_train",
                                           "vr.text_train", "snell.synthetic_experiments",
                                           "snell.agreement")),
    "torch._dynamo", "scipy.optimize", "scipy.ndimage", "matplotlib.pyplot"]
#: What differs between two runs of the same settings: wall-clock times, where a run
#: resumed, and a sweep cell record's provenance (the command line, with --resume).
TIMING_KEYS = {"seconds", "train_seconds", "resumed_from_step", "resumed_from_epoch",
               "provenance"}
TIMING_FILES = {"timing.json", "code_history.json"}
TEMPORARY = (io._TMP_PREFIX, io._STAGE_PREFIX)
COMMANDS = ["train-numpy", "train-torch", "train-batch-seeds", "train-text", "synthetic",
            "train-seq", "agreement", "sweep"]


def _tsv(folder):
    folder.mkdir()
    rows = [f"the {a} {b} is here\t{k % 2}" for k, (a, b) in enumerate(
        (a, b) for a in ("small", "big", "red", "old") for b in ("house", "book", "car"))]
    (folder / "train.tsv").write_text("\n".join(rows * 2) + "\n")
    (folder / "dev.tsv").write_text("\n".join(rows[:6]) + "\n")


def _posts(folder):
    """HateXplain-shaped posts: neutral words; a toxic post holds a keyword, its rationale."""
    folder.mkdir()
    rng, lines = np.random.default_rng(0), []
    for split, n in (("train", 120), ("val", 10), ("test", 40)):
        for k in range(n):
            toxic = bool(k % 2)
            tokens = [f"w{i}" for i in rng.integers(0, 20, 5)] + ["bad"] * toxic
            lines.append(json.dumps({"post_id": f"{split}{k}", "tokens": tokens,
                                     "rationale": [0] * 5 + [1] * toxic, "orig_split": split,
                                     "label": "toxic" if toxic else "non-toxic"}))
    (folder / "hatexplain_binary.jsonl").write_text("\n".join(lines) + "\n")


def _commands(data):
    """name: (command line, the words that resume it)."""
    train = ["--m", "3", "--seeds", "2", "--no-progress"]
    torch = ["train", "--backend", "torch", "--epochs", "3", "--n-train", "12", "--n-test",
             "6", "--batch-size", "6", "--width", "0.25", "--device", "cpu", "--threads", "1",
             "--paradigm", "sa,hybrid", *train]
    seq = ["--dataset", "tsv", "--data-dir", str(data / "tsv"), "--steps", "60", "--hidden",
           "4", "--emb", "4", "--eval-every", "6", "--device", "cpu", "--threads", "1",
           "--no-progress"]
    return {
        "train-numpy": (["train", "--backend", "numpy", "--n-train", "60", "--n-test", "30",
                         "--batch-size", "20", "--paradigm", "all", "--epochs", "10", *train],
                        ["--resume"]),
        "train-torch": (torch, ["--resume"]),
        "train-batch-seeds": ([*torch, "--batch-seeds"], ["--resume"]),
        "train-text": (["train-text", "--data-dir", str(data / "hx"), "--paradigm", "sa,lv",
                        "--epochs", "3", "--seeds", "2", "--batch-size", "32", "--min-count",
                        "1", "--device", "cpu", "--threads", "1", "--no-progress"],
                       ["--resume"]),
        "synthetic": (["synthetic", "copy-control", "--seeds", "2", "--hidden", "4", "--embed",
                       "3", "--batch-size", "3", "--n-test", "4", "--eval-every", "4",
                       "--steps", "60", "--no-progress"], ["--resume"]),
        "train-seq": (["train-seq", *seq], []),
        "agreement": (["agreement", *seq, "--proxy-d", "4", "--proxy-epochs", "1",
                       "--no-logistic", "--no-kendall"], []),
        "sweep": (["sweep", "--grid", "dataset=synthetic", "paradigm=sa,lv", "m=3",
                   "n_train=12", "n_test=6", "epochs=2", "width=0.25", "batch_size=6",
                   "seeds=1", "--threads", "1"], ["--resume"]),
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    _tsv(folder / "tsv")
    _posts(folder / "hx")
    return folder


def _is_checkpoint(name):
    return ".ckpt" in name or ".pt" in name


def _checkpoints(out):
    return {p: p.stat().st_mtime_ns for p in out.rglob("*") if _is_checkpoint(p.name)
            and not p.name.startswith(TEMPORARY) and p.is_file()}


def _strip(obj, root):
    if isinstance(obj, dict):
        return {k: _strip(v, root) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_strip(v, root) for v in obj]
    return obj.replace(str(root), "OUT") if isinstance(obj, str) else obj


def _results(out):
    """Every JSON, JSON-lines and .npz file of ``out`` but temporaries, read (a file that
    does not parse fails here), timings left out."""
    found = {}
    for p in sorted(out.rglob("*")):
        if not p.is_file() or p.name.startswith(TEMPORARY) or p.name in TIMING_FILES:
            continue
        name = str(p.relative_to(out))
        if p.suffix == ".json":
            found[name] = _strip(json.loads(p.read_text()), out)
        elif p.suffix == ".jsonl":
            found[name] = [_strip(json.loads(line), out) for line in p.read_text().splitlines()]
        elif p.suffix == ".npz":
            with np.load(p) as z:
                found[name] = {k: z[k].tolist() for k in z.files}
    return found


def _leftovers(out):
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p.name.startswith(TEMPORARY) or p.name.endswith((".new", ".damaged")))


def _main(args, log, kill_at):
    """A child's body: ``attn-dyn ARGS``, its output into ``log``; with ``kill_at`` it
    SIGKILLs itself at its ``kill_at``-th atomic write, once the data is in the temporary
    file (the fsync before the rename)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if kill_at:
        seen, fsync = [0], os.fsync

        def fsync_then_die(fd):
            fsync(fd)
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        os.fsync = fsync_then_die
    from minimal_attn.cli.main import cli
    cli.main(args, prog_name="attn-dyn")


def _child(args, out, kill_at=None):
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    log = out.parent / f"{out.name}.log"
    child = ctx.Process(target=_main, args=([*args, "--out", str(out)], str(log), kill_at))
    child.start()
    child.log = log
    return child


def _wait(child, timeout=120):
    """The child's exit status (-9: SIGKILL) and its output."""
    child.join(timeout)
    assert child.exitcode is not None, "the child hung"
    return child.exitcode, child.log.read_text()


def _kill_after_next_checkpoint(child, out, delay):
    """SIGKILL ``child`` ``delay`` seconds after it saves a checkpoint (if it has not ended)."""
    before, deadline = _checkpoints(out) if out.exists() else {}, time.monotonic() + 120
    while child.is_alive() and time.monotonic() < deadline:
        if out.exists() and _checkpoints(out).items() - before.items():
            time.sleep(delay)
            child.kill()                         # SIGKILL, unless it has ended meanwhile
            break
        time.sleep(0.01)
    return _wait(child)


@pytest.mark.parametrize("name", COMMANDS)
def test_sigkilled_twice_the_run_resumes_to_the_uninterrupted_result(name, data, tmp_path,
                                                                     monkeypatch):
    if name != "train-numpy":
        pytest.importorskip("torch")
    args, resume = _commands(data)[name]
    rng = random.Random(name)
    written, fsync = [], os.fsync

    def spy(fd):                                   # the atomic writes, in order (kill_at)
        written.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)
    monkeypatch.setattr(os, "fsync", spy)
    ref, start = tmp_path / "ref", time.monotonic()
    r = CliRunner().invoke(cli, [*args, "--out", str(ref)])
    assert r.exit_code == 0, r.output
    seconds = time.monotonic() - start
    monkeypatch.undo()
    expected = _results(ref)
    saves = [n for n, name in enumerate(written, 1) if _is_checkpoint(name)]
    assert saves, written

    # 1. killed while a checkpoint of the run's first half is written (the second half is
    #    for 2.): its temporary file is there, complete
    out = tmp_path / "killed"
    kill_at = rng.choice(saves[:(len(saves) + 1) // 2])
    status, output = _wait(_child(args, out, kill_at))
    assert status == -signal.SIGKILL, output
    assert [p for p in out.rglob(".tmp-*") if _is_checkpoint(p.name)], (kill_at, written)
    _results(out)                                            # every JSON file parses

    # 2. resumed, and killed again within a checkpoint interval after its next checkpoint
    #    (or it ended)
    status, output = _kill_after_next_checkpoint(_child([*args, *resume], out), out,
                                                 rng.uniform(0.0, seconds / len(saves)))
    assert status in (0, -signal.SIGKILL), output
    assert "Traceback" not in output and "warning: checkpoint" not in output, output
    _results(out)

    # 3. resumed to the end: the reference's numbers, nothing half-written left
    r = CliRunner().invoke(cli, [*args, *resume, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "warning: checkpoint" not in r.stderr, r.stderr
    got = _results(out)
    assert sorted(got) == sorted(expected)
    for f in expected:
        assert got[f] == expected[f], f
    assert _leftovers(out) == []


def test_a_dead_writers_temporary_file_goes_at_the_next_write_and_a_live_ones_stays(
        tmp_path):
    """The rule behind the test above: a temporary named for this machine and a process
    that has ended goes at the next write into its folder, whatever file it was for; one of
    a live process (the parent, this one) or of another machine stays until STALE_AFTER."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = io._host()
    names = {pid: f".tmp-{host}-{pid}-abcd1234sa_seed0.ckpt.new"
             for pid in (dead.pid, os.getppid(), os.getpid())}
    names["other"] = f".tmp-{'0' * 8 if host != '0' * 8 else '1' * 8}-{dead.pid}-abcd1234x.png"
    names["stage"] = f".staging-{host}-{dead.pid}-abcd1234"
    for key, name in names.items():
        if key == "stage":
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("{")
    io.write_json(str(tmp_path / "results.json"), {})
    left = {p.name for p in tmp_path.iterdir()}
    assert names[dead.pid] not in left
    assert {names[os.getppid()], names[os.getpid()], names["other"], names["stage"]} <= left
    with io.staged_folder(str(tmp_path)) as stage:
        io.write_text(os.path.join(stage, "table.md"), "x")
    assert names["stage"] not in {p.name for p in tmp_path.iterdir()}
    assert (tmp_path / "table.md").read_text() == "x"
