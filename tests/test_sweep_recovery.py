"""attn-dyn sweep after something went wrong: rerunning the same line retries a failed or
damaged cell under the Slurm engine (never replays a finished job's old outcome), a job
that neither sacct nor squeue knows, or of another cluster kind, is not waited for (one
that squeue lists, or cannot answer about, is), and a resumed cell's record names every
commit that ran it and the data it trained on. Slurm is faked: a srun, sacct and squeue
of a few shell lines first on PATH."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.experiments import sweep_engines, sweep_grid, sweep_slurm
from minimal_attn.experiments.sweep_cell import CRASH_ENV, make_task

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
TINY = ["m=3", "paradigm=sa", "n_train=12", "n_test=6", "width=0.25", "batch_size=6",
        "seeds=1"]


def sweep(*args, env=None):
    return CliRunner().invoke(cli, ["sweep", *args], env=env)


def _starts(out, name):
    return (Path(out) / "cells" / name / "log.txt").read_text().count(": start (")


def test_rerunning_the_same_line_retries_a_failed_and_a_damaged_cell_on_slurm(tmp_path):
    pytest.importorskip("submitit", reason="submitit is not installed")
    empty, out = tmp_path / "no-cifar", tmp_path / "s"
    empty.mkdir()
    line = ["--grid", "dataset=synthetic,cifar10", *TINY, "epochs=1", f"data_dir={empty}",
            "--threads", "1", "--engine", "slurm", "--cluster", "local", "--out", str(out)]
    first = sweep(*line)
    assert first.exit_code == 1 and first.output.count("FAILED") == 1, first.output
    good, bad = sorted(c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(
        ["dataset=synthetic,cifar10", *TINY, "epochs=1", f"data_dir={empty}"])))[::-1]
    (out / "cells" / f"{good}.json").write_text("{broken")          # damaged since
    again = sweep(*line)
    # both jobs of the first driver have ended: neither is waited for nor replayed
    assert "still runs" not in again.output, again.output
    assert again.output.count("has ended without a valid record") == 2, again.output
    assert _starts(out, bad) == 2 and _starts(out, good) == 2       # run again, both
    assert again.exit_code == 1 and again.output.count("FAILED") == 1
    merged = json.loads((out / "results.json").read_text())
    assert [e["cell"] for e in merged["cells"]] == [good] and merged["missing"] == [bad]


#: Fake squeue bodies: it lists no job; it lists jobs 777777 and 777778; it cannot answer.
LISTS_NONE, LISTS_THEM = "exit 0", "echo '777777 777777'; echo '777778 777778'"
NO_ANSWER = "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1"


def fake_slurm(tmp_path, monkeypatch, squeue=LISTS_NONE):
    """A fake srun, a sacct that knows no job and ``squeue`` (a shell body; each call is
    a line of ``tmp_path/squeue.calls``) first on PATH."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    calls = tmp_path / "squeue.calls"
    for name, text in (("srun", "exit 0"), ("sacct", "echo 'JobID|State|NodeList'"),
                       ("squeue", f"echo \"$*\" >> {calls}\n{squeue}")):
        (bin_ / name).write_text(f"#!/bin/sh\n{text}\n")
        (bin_ / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    return calls


def _engine(tmp_path, cluster, monkeypatch, squeue=LISTS_NONE):
    """A SlurmEngine; for cluster slurm on :func:`fake_slurm`."""
    pytest.importorskip("submitit", reason="submitit is not installed")
    if cluster == "slurm":
        fake_slurm(tmp_path, monkeypatch, squeue)
    return sweep_engines.make_engine("slurm", str(tmp_path / "out"), cluster=cluster)


def _waiting_task(tmp_path, job_id, cluster, age):
    cell = sweep_grid.expand(sweep_grid.parse_tokens(["dataset=synthetic", *TINY]))[0]
    task = make_task(cell, str(tmp_path / "out"), {})
    path = Path(sweep_engines._job_file(task))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"job_id": job_id, "cluster": cluster, "cells": [cell.name]}))
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime - age))
    return task


def test_a_job_that_neither_sacct_nor_squeue_knows_is_taken_as_dead(tmp_path, monkeypatch):
    engine = _engine(tmp_path, "slurm", monkeypatch)
    lines = []
    old = _waiting_task(tmp_path, "777777", "slurm", age=3600)
    handles, rest = engine.reattach([old], lines.append)
    assert handles == [] and rest == [old]
    assert len(lines) == 1 and "job 777777 of an earlier driver is unknown to sacct" in lines[0]
    assert "squeue does not list it" in lines[0]
    # one submitted lately is waited for, then taken as dead once the grace has passed
    fresh = _waiting_task(tmp_path, "777778", "slurm", age=0)
    handles, rest = engine.reattach([fresh], lines.append)
    assert len(handles) == 1 and rest == [] and len(lines) == 1
    assert engine.finished(handles, timeout=0) == []
    monkeypatch.setattr(sweep_slurm, "UNKNOWN_GRACE", 0)
    engine.squeued = (-float("inf"), None)          # the next poll asks squeue again
    (handle, outcomes), = engine.finished(handles, timeout=0)
    assert outcomes[0]["died"] and "job 777778 is unknown to sacct" in outcomes[0]["error"]


@pytest.mark.parametrize("squeue", [LISTS_THEM, NO_ANSWER], ids=["listed", "no-answer"])
def test_a_job_unknown_to_sacct_is_waited_for_while_squeue_lists_it_or_cannot_answer(
        tmp_path, monkeypatch, squeue):
    """sacct lagging or broken: a job squeue lists is alive, and one squeue cannot tell
    about is not taken for dead: either would run twice, two writers of one cell."""
    engine = _engine(tmp_path, "slurm", monkeypatch, squeue)
    lines = []
    old = [_waiting_task(tmp_path, "777777", "slurm", age=3600)]
    handles, rest = engine.reattach(old, lines.append)
    assert len(handles) == 1 and rest == [] and lines == []
    monkeypatch.setattr(sweep_slurm, "UNKNOWN_GRACE", 0)
    assert engine.finished(handles, timeout=0) == []


def test_squeue_is_asked_once_a_poll_for_every_job(tmp_path, monkeypatch):
    engine = _engine(tmp_path, "slurm", monkeypatch, LISTS_THEM)
    calls = tmp_path / "squeue.calls"
    monkeypatch.setattr(sweep_slurm, "UNKNOWN_GRACE", 0)
    handles = [engine.reattach([_waiting_task(tmp_path, job, "slurm", age=3600)])[0][0]
               for job in ("777777", "777778")]
    assert len(calls.read_text().splitlines()) == 1          # the second job: the same answer
    engine.squeued = (-float("inf"), None)                    # a poll later
    assert engine.finished(handles, timeout=0) == []
    assert calls.read_text().splitlines() == [f"-h -o %i %A -u {os.getuid()}"] * 2


def test_a_job_of_the_other_cluster_kind_is_not_waited_for(tmp_path, monkeypatch):
    engine = _engine(tmp_path, "local", monkeypatch)
    lines = []
    task = _waiting_task(tmp_path, str(os.getpid()), "slurm", age=0)   # a live pid, even
    handles, rest = engine.reattach([task], lines.append)
    assert handles == [] and rest == [task]
    assert lines == [f"job {os.getpid()} of an earlier driver was submitted with --cluster "
                     f"slurm, not local: submitting {task['cell'].name} again"]


def test_a_resumed_cell_names_every_commit_and_its_data(tmp_path):
    out = tmp_path / "s"
    grid = ["--grid", "dataset=synthetic", *TINY, "data_seed=0,1", "epochs=2", "--threads",
            "1", "--out", str(out)]
    cells = sorted(c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(
        ["dataset=synthetic", *TINY, "data_seed=0,1", "epochs=2"])))
    victim = cells[0]
    cmd = [sys.executable, "-m", "minimal_attn.cli.main", "sweep", *grid]
    died = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, **{CRASH_ENV: f"{victim}@1",
                                                  "ATTN_DYN_COMMIT": "a" * 40,
                                                  "ATTN_DYN_DIRTY": "0"}))
    assert died.returncode == 70, died.stderr
    r = sweep("--out", str(out), "--resume", "--threads", "1",
              env={"ATTN_DYN_COMMIT": "b" * 40, "ATTN_DYN_DIRTY": "1"})
    assert r.exit_code == 0, r.output
    records = {n: json.loads((out / "cells" / f"{n}.json").read_text())["provenance"]
               for n in cells}
    assert records[victim]["commit"] == "a" * 40 + "," + "b" * 40
    assert records[victim]["dirty"] is True
    assert [h["commit"] for h in records[victim]["code_history"]] == ["a" * 40, "b" * 40]
    # the data each cell trained on: the fingerprint its checkpoints hold
    prints = [records[n]["data_fingerprint"] for n in cells]
    assert all(len(p) == 40 for p in prints) and prints[0] != prints[1]
    # the same --out with another grid: said in one line
    r = sweep("--grid", "dataset=synthetic", *TINY, "data_seed=0", "epochs=2", "--threads",
              "1", "--out", str(out))
    assert r.exit_code == 0 and "already done" in r.output
    assert f"{out} held a sweep of another grid (2 cells)" in r.output
