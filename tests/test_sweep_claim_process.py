"""One writer a cell under the local engine and Ray too: their tasks claim a cell in the
name of the sweep's driver, by host and pid (writer.json). A process alive on this host
keeps its claim, so a second driver on the same --out fails that cell in one line and
writes nothing there; the claim of a pid that has ended (or is a zombie, or was reused by a
later process) is taken over; a claim made on another host is refused in one line naming
the file to delete. The claim names the driver while its cell runs and goes when the cell
ends, however it ends."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_sweep_recovery import TINY

from minimal_attn.cli.main import cli
from minimal_attn.experiments import processes, sweep_cell, sweep_claim, sweep_grid
from minimal_attn.experiments.sweep_cell import make_task
from minimal_attn.experiments.sweep_engines import make_engine

pytest.importorskip("torch")

GRID = ["dataset=synthetic", *TINY, "epochs=1"]
HOST = socket.gethostname()


def _name():
    cell, = sweep_grid.expand(sweep_grid.parse_tokens(GRID))
    return cell.name


def _claim(out, pid, host=HOST, start=None):
    """A process claim on the cell of ``out``, as :func:`.sweep_claim.claim` writes one."""
    folder = Path(out) / "cells" / _name()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sweep_claim.CLAIM).write_text(json.dumps(
        {"job_id": f"{host}:{pid}", "cluster": sweep_claim.PROCESS, "host": host, "pid": pid,
         "start": start}))
    return folder


def _run_local(out):
    """The cell's outcome from the local engine, as the driver gets it."""
    cell, = sweep_grid.expand(sweep_grid.parse_tokens(GRID))
    engine = make_engine("local", str(out))
    handle = engine.start([make_task(cell, str(out), {"threads": 1})])
    (_, (outcome,)), = engine.finished([handle], timeout=None)
    return outcome


@pytest.fixture
def sleeper():
    """A live process on this host, not this one."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_second_driver_fails_a_cell_a_live_process_writes_and_a_rerun_takes_it_over(
        tmp_path, request, sleeper, engine):
    extra = []
    if engine == "ray":        # one local Ray for both drivers: the engine joins it
        ray = pytest.importorskip("ray", reason="ray is not installed (pip install \".[ray]\")")
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        request.addfinalizer(ray.shutdown)
        extra = ["--engine", "ray"]
    out = tmp_path / "s"
    line = ["sweep", "--grid", *GRID, "--threads", "1", *extra, "--out", str(out)]
    folder = _claim(out, sleeper.pid)
    first = CliRunner().invoke(cli, line)
    assert first.exit_code == 1, first.output
    assert f"FAILED: process {sleeper.pid} on {HOST} is alive and writes this cell (" \
        in first.output
    assert [p.name for p in folder.iterdir()] == [sweep_claim.CLAIM]        # nothing written
    assert not (out / "cells" / f"{_name()}.json").exists()
    sleeper.kill()
    sleeper.wait()                                   # ended: its claim is taken over
    again = CliRunner().invoke(cli, line)
    assert again.exit_code == 0 and "FAILED" not in again.output, again.output
    assert (out / "cells" / f"{_name()}.json").exists()
    assert not (folder / sweep_claim.CLAIM).exists()                        # released


def test_a_claim_made_on_another_host_is_refused_in_one_line(tmp_path):
    folder = _claim(tmp_path, 4242, host="elsewhere.example")
    outcome = _run_local(tmp_path)
    assert not outcome["ok"] and "\n" not in outcome["error"]
    assert outcome["error"].startswith("process 4242 on elsewhere.example may be alive (on "
                                       "another host")
    assert str(folder / sweep_claim.CLAIM) in outcome["error"]
    assert "delete that file if no process runs the cell" in outcome["error"]
    assert [p.name for p in folder.iterdir()] == [sweep_claim.CLAIM]


def _ended_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid, None


def _zombie_pid(request):
    """A child that has exited but is not reaped: its pid still exists."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    request.addfinalizer(proc.wait)
    deadline = time.monotonic() + 30
    while processes.start_time(proc.pid)[1] is False and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.pid, None


def _reused_pid(request):
    """A live process whose start time is not the claim's: the pid was reused."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    request.addfinalizer(lambda: (proc.kill(), proc.wait()))
    return proc.pid, processes.start_time(proc.pid)[0] - 1


@pytest.mark.parametrize("holder", ["ended", "zombie", "reused"])
def test_the_claim_of_a_pid_that_ended_here_is_taken_over_and_released(tmp_path, request,
                                                                       holder):
    if holder != "ended" and not os.path.exists("/proc/self/stat"):
        pytest.skip("no /proc: zombies and reused pids cannot be told")
    pid, start = {"ended": _ended_pid, "zombie": lambda: _zombie_pid(request),
                  "reused": lambda: _reused_pid(request)}[holder]()
    assert processes.process_alive(HOST, pid, start) is False
    folder = _claim(tmp_path, pid, start=start)
    outcome = _run_local(tmp_path)
    assert outcome["ok"], outcome["error"]
    assert not (folder / sweep_claim.CLAIM).exists()


@pytest.mark.parametrize("ending", ["fails", "raises"])
def test_the_claim_names_this_process_while_the_cell_runs_and_goes_after(tmp_path, monkeypatch,
                                                                         ending):
    seen = []

    def run_task(task):
        path = Path(task["out"]) / "cells" / task["cell"].name / sweep_claim.CLAIM
        seen.append(json.loads(path.read_text()))
        if ending == "raises":
            raise KeyboardInterrupt                   # Ctrl-C in the middle of the cell
        return {"cell": task["cell"].name, "ok": False, "error": "boom", "record": None,
                "seconds": 0.0, "log": ""}

    monkeypatch.setattr(sweep_cell, "run_task", run_task)
    if ending == "raises":
        with pytest.raises(KeyboardInterrupt):
            _run_local(tmp_path)
    else:
        assert _run_local(tmp_path)["error"] == "boom"
    holder, = seen
    assert holder["job_id"] == f"{HOST}:{os.getpid()}" and holder["cluster"] == "process"
    assert holder["start"] == processes.start_time(os.getpid())[0]
    assert not (tmp_path / "cells" / _name() / sweep_claim.CLAIM).exists()


def test_a_claim_on_this_host_is_told_alive_or_dead(sleeper):
    assert processes.process_alive(HOST, os.getpid(),
                                     processes.start_time(os.getpid())[0]) is True
    assert processes.process_alive(HOST, sleeper.pid) is True
    assert processes.process_alive("elsewhere.example", sleeper.pid) is None
    assert processes.process_alive(HOST, "not a pid") is None


def test_a_ray_task_claims_in_its_drivers_name_so_a_retry_on_another_node_goes_on(
        tmp_path, monkeypatch):
    """Ray retries a task whose worker died, perhaps on another node: the claim the dead
    worker made names the driver, so the retry finds its own claim (not another host's)."""
    driver = {"host": "head.example", "pid": 4242, "start": 7}
    folder = _claim(tmp_path, 4242, host="head.example", start=7)   # the first worker's
    ran = []
    monkeypatch.setattr(sweep_cell, "run_task", lambda task: ran.append(task) or {
        "cell": task["cell"].name, "ok": True, "error": None, "record": None,
        "seconds": 0.0, "log": ""})
    cell, = sweep_grid.expand(sweep_grid.parse_tokens(GRID))
    task = dict(make_task(cell, str(tmp_path), {"threads": 1}), claim=sweep_claim.PROCESS,
                writer=driver)
    outcome, = sweep_cell.run_tasks([task])
    assert outcome["ok"] and len(ran) == 1
    assert not (folder / sweep_claim.CLAIM).exists()                  # released after it
    # another driver's task finds that claim held: a writer on another host may be alive
    _claim(tmp_path, 4242, host="head.example", start=7)
    other = dict(task, writer={"host": "head.example", "pid": 4343, "start": 9})
    outcome, = sweep_cell.run_tasks([other])
    assert not outcome["ok"] and "process 4242 on head.example may be alive" in outcome["error"]
    assert len(ran) == 1


def test_clear_ended_removes_only_a_claim_whose_driver_ended_here(tmp_path, sleeper):
    """A Ray driver clears the claims of ended drivers before its workers, which may sit on
    other nodes and could not tell, see them."""
    pid, _ = _ended_pid()
    folder = _claim(tmp_path, pid)
    assert sweep_claim.clear_ended(str(folder)) and not (folder / sweep_claim.CLAIM).exists()
    for host, holder in ((HOST, sleeper.pid), ("elsewhere.example", pid)):
        _claim(tmp_path, holder, host=host)
        assert not sweep_claim.clear_ended(str(folder))
        assert (folder / sweep_claim.CLAIM).exists()
    (folder / sweep_claim.CLAIM).write_text(json.dumps(                # a Slurm job's
        {"job_id": "77", "cluster": "slurm", "host": HOST, "pid": pid}))
    assert not sweep_claim.clear_ended(str(folder)) and (folder / sweep_claim.CLAIM).exists()
    assert not sweep_claim.clear_ended(str(tmp_path / "none"))        # no claim: nothing
