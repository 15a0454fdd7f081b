"""One writer a cell: a Slurm job claims its cell's folder (writer.json) before writing, and
a job that finds the claim of another live job (squeue lists it), or of one nobody can tell
about, refuses the cell in one line and writes nothing; the claim of a job that has ended
is taken over, a requeued job (the same id) finds its own, and the claim goes with the cell.
Slurm is faked as in test_sweep_recovery: a squeue of a few shell lines first on PATH."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_sweep_recovery import LISTS_NONE, LISTS_THEM, NO_ANSWER, TINY, fake_slurm

from minimal_attn.cli.main import cli
from minimal_attn.experiments import sweep_claim, sweep_grid
from minimal_attn.experiments.sweep_cell import make_task, run_tasks

pytest.importorskip("torch")


def _task(tmp_path, cluster="slurm"):
    cell = sweep_grid.expand(sweep_grid.parse_tokens(["dataset=synthetic", *TINY, "epochs=1",
                                                      "threads=1"]))[0]
    return dict(make_task(cell, str(tmp_path / "out"), {"threads": 1}), claim=cluster)


def _folder(task):
    return Path(task["out"]) / "cells" / task["cell"].name


def _claimed_by(task, job_id, cluster="slurm"):
    folder = _folder(task)
    folder.mkdir(parents=True)
    (folder / sweep_claim.CLAIM).write_text(json.dumps({"job_id": job_id, "cluster": cluster}))


@pytest.mark.parametrize("squeue, state", [(LISTS_THEM, "is alive"),
                                           (NO_ANSWER, "may be alive (squeue does not answer)")],
                         ids=["listed", "no-answer"])
def test_a_cell_another_live_job_writes_is_refused_untouched(tmp_path, monkeypatch, squeue,
                                                             state):
    fake_slurm(tmp_path, monkeypatch, squeue)
    monkeypatch.setenv("SLURM_JOB_ID", "900001")
    task = _task(tmp_path)
    _claimed_by(task, "777777")
    before = sorted(p.name for p in _folder(task).iterdir())
    outcome, = run_tasks([task])
    assert not outcome["ok"] and not outcome.get("died")
    assert outcome["error"].startswith(f"job 777777 {state} and writes this cell (")
    assert "not run twice" in outcome["error"]
    assert sorted(p.name for p in _folder(task).iterdir()) == before    # nothing written
    assert not (Path(task["out"]) / "cells" / f"{task['cell'].name}.json").exists()


@pytest.mark.parametrize("holder", ["ended", "requeued"])
def test_the_claim_of_an_ended_job_or_its_own_is_taken_and_released(tmp_path, monkeypatch,
                                                                     holder):
    fake_slurm(tmp_path, monkeypatch, LISTS_NONE)
    monkeypatch.setenv("SLURM_JOB_ID", "777777" if holder == "requeued" else "900001")
    task = _task(tmp_path)
    _claimed_by(task, "777777")                 # a killed job's (or this job's, requeued)
    outcome, = run_tasks([task])
    assert outcome["ok"], outcome["error"]
    assert not (_folder(task) / sweep_claim.CLAIM).exists()              # released


def test_an_unreadable_claim_is_refused(tmp_path, monkeypatch):
    fake_slurm(tmp_path, monkeypatch, LISTS_NONE)
    monkeypatch.setenv("SLURM_JOB_ID", "900001")
    task = _task(tmp_path)
    _folder(task).mkdir(parents=True)
    (_folder(task) / sweep_claim.CLAIM).write_text("{cut")
    outcome, = run_tasks([task])
    assert not outcome["ok"] and "cannot be read: not run twice" in outcome["error"]


def test_claims_outside_a_job_and_between_jobs(tmp_path, monkeypatch):
    fake_slurm(tmp_path, monkeypatch, LISTS_THEM)
    folder = tmp_path / "cell"
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert sweep_claim.claim(str(folder), "slurm") is None and not folder.exists()
    monkeypatch.setenv("SLURM_JOB_ID", "777777")
    assert sweep_claim.claim(str(folder), "slurm") is None           # first: taken
    monkeypatch.setenv("SLURM_JOB_ID", "900001")
    assert "job 777777 is alive" in sweep_claim.claim(str(folder), "slurm")
    sweep_claim.release(str(folder), "slurm")                        # not its claim: stays
    assert json.loads((folder / sweep_claim.CLAIM).read_text())["job_id"] == "777777"
    monkeypatch.setenv("SLURM_JOB_ID", "777777")
    sweep_claim.release(str(folder), "slurm")
    assert not (folder / sweep_claim.CLAIM).exists()


def test_a_second_local_job_on_a_claimed_cell_fails_and_a_rerun_finishes_it(tmp_path):
    """End to end, submitit's local executor: a live job (pid = job id) holds the cell."""
    pytest.importorskip("submitit", reason="submitit is not installed")
    out = tmp_path / "s"
    line = ["--grid", "dataset=synthetic", *TINY, "epochs=1", "--threads", "1",
            "--engine", "slurm", "--cluster", "local", "--out", str(out)]
    name, = [c.name for c in sweep_grid.expand(sweep_grid.parse_tokens(
        ["dataset=synthetic", *TINY, "epochs=1"]))]
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                               "submitit"])            # 'submitit' in its command line
    try:
        (out / "cells" / name).mkdir(parents=True)
        (out / "cells" / name / sweep_claim.CLAIM).write_text(
            json.dumps({"job_id": str(holder.pid), "cluster": "local"}))
        first = CliRunner().invoke(cli, ["sweep", *line])
        assert first.exit_code == 1, first.output
        assert f"FAILED: job {holder.pid} is alive and writes this cell" in first.output
    finally:
        holder.kill()
        holder.wait()
    again = CliRunner().invoke(cli, ["sweep", *line])
    assert again.exit_code == 0 and "FAILED" not in again.output, again.output
    assert (out / "cells" / f"{name}.json").exists()
    assert not (out / "cells" / name / sweep_claim.CLAIM).exists()
    assert os.path.exists(out / "results.json")
