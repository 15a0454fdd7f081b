r"""One cell of a sweep, run wherever an engine puts it: a Table 1 row and its record.

What a worker runs (:func:`run_task`), in this process, a Ray task or a Slurm
job alike. A cell trains through the same library call as ``attn-dyn train``
(:func:`minimal_attn.backends.vr.table1.run_experiment`) into its own
folder ``OUT/cells/NAME/`` (checkpoints, history, heat maps, ``log.txt``) and
then writes its record ``OUT/cells/NAME.json`` atomically, in the format of
the results store (:func:`minimal_attn.experiments.results_store.write_cell`).

A worker that dies leaves the checkpoints of its finished epochs; whoever runs
the task again (Ray's retry, the driver's resubmission, ``--resume``) resumes
there. Errors inside the cell do not propagate: they become an outcome with
one line and the full traceback in ``log.txt``, so that one bad cell never
stops the others.
"""

import contextlib
import json
import os
import time
import traceback

from minimal_attn.errors import InputError
from minimal_attn.experiments.results_store import (
    CODE_HISTORY,
    cell_path,
    code_history,
    code_source,
    provenance,
    write_cell,
)
from minimal_attn.experiments.results_store import read_record as store_record

#: Test hook: ``NAME@EPOCH`` makes the process running cell NAME exit right after the
#: checkpoint of EPOCH, once (a marker file in its folder remembers it): a killed worker,
#: or a killed driver under the local engine, at a known point.
CRASH_ENV = "ATTN_DYN_SWEEP_CRASH"
CRASH_STATUS = 70
#: Settings added after sweeps wrote records, with their defaults (``attn-dyn train``:
#: first_seed, precision; ``attn-dyn agreement``: time_limit): a record without one was
#: run at the default.
ADDED_LATER = {"first_seed": 0, "precision": "fp32", "time_limit": None}


def cell_folder(out, name):
    return os.path.join(out, "cells", name)


def record_status(out, cell):
    """``done`` (a record that matches the cell's settings), ``stale`` (a record of other
    settings, or an unreadable or damaged one: the cell runs afresh) or ``absent``."""
    path = cell_path(out, cell.name)
    if not os.path.exists(path):
        return "absent"
    try:
        record = store_record(path)      # checked as the store's tables read it
    except InputError:
        return "stale"
    settings = json.loads(json.dumps(cell.settings))
    old = record.get("settings") or {}
    # a setting added after the record was written matches when it is at its default
    settings = {k: v for k, v in settings.items()
                if k in old or k not in ADDED_LATER or v != ADDED_LATER[k]}
    same = record.get("cell") == cell.name and old == settings
    return "done" if same else "stale"


def died(tasks, why):
    """The outcomes of ``tasks`` whose process ended without giving any (``why``: a line)."""
    return [{"cell": t["cell"].name, "ok": False, "died": True, "error": why,
             "log": os.path.join(cell_folder(t["out"], t["cell"].name), "log.txt"),
             "seconds": None} for t in tasks]


def read_record(out, name):
    """The record of cell ``name`` in the sweep ``out`` (:func:`.results_store.read_record`)."""
    return store_record(cell_path(out, name))


def crash_point(name, spec=None):
    """The epoch after which cell ``name`` should exit, from :data:`CRASH_ENV`; else None."""
    spec = os.environ.get(CRASH_ENV, "") if spec is None else spec
    target, _, epoch = spec.rpartition("@")
    return int(epoch) if target == name and epoch.isdigit() else None


def _crash_hook(folder, epoch):
    """``on_epoch`` callback that ends this process after ``epoch``, the first time only."""
    marker = os.path.join(folder, ".crashed")

    def on_epoch(record):
        if record["epoch"] == epoch and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(CRASH_STATUS)       # no cleanup, no finally: as a kill -9 would
    return on_epoch


def make_task(cell, out, operational, resume=True, command=None):
    """What a worker needs to run ``cell`` (picklable; paths absolute)."""
    return {"cell": cell, "out": os.path.abspath(out), "operational": dict(operational),
            "resume": resume, "crash_after_epoch": crash_point(cell.name),
            "command": list(command or [])}


def cell_config(cell, operational):
    """The :class:`~.config.ExperimentConfig` of a Table 1 ``cell`` with its ``operational``
    settings (``data_dir``, ``device``, ...)."""
    from minimal_attn.experiments.config import ExperimentConfig

    s = dict(cell.settings)
    paradigm = s.pop("paradigm")
    s["lr"] = s["lr"] and {k: float(v) for k, v in s["lr"].items()}
    return ExperimentConfig(paradigms=[paradigm], **s, **operational)


def run_tasks(tasks):
    """Run cells one after another (one job of several cells); a list of outcomes.

    A cell whose matching record exists already (a requeued or resubmitted job
    that had finished it) is not run again. A task of an engine (``claim``: the claim's
    kind, a Slurm cluster kind or :data:`.sweep_claim.PROCESS`) first claims its cell's
    folder (:func:`.sweep_claim.claim`): a cell that another live writer holds fails in
    one line, untouched.
    """
    return [_claimed(task) for task in tasks]


def _claimed(task):
    """One task's outcome: its record's if the cell is done, else :func:`run_task`'s (an
    engine's task only while it holds the claim on its cell; released however it ends)."""
    done = _done(task)
    if done or task.get("claim") is None:
        return done or run_task(task)
    from minimal_attn.experiments.sweep_claim import claim, release

    folder, cluster = cell_folder(task["out"], task["cell"].name), task["claim"]
    writer = task.get("writer")               # a Ray task's: the driver's (else this process)
    held = claim(folder, cluster, writer)
    if held:
        return {"cell": task["cell"].name, "ok": False, "error": held, "record": None,
                "seconds": 0.0, "log": os.path.join(folder, "log.txt")}
    try:
        return _done(task) or run_task(task)   # done by the job that held it just now?
    finally:
        release(folder, cluster, writer)


def _done(task):
    """The outcome of a cell whose matching record exists; else None."""
    if record_status(task["out"], task["cell"]) != "done":
        return None
    return {"cell": task["cell"].name, "ok": True, "error": None, "seconds": 0.0,
            "record": read_record(task["out"], task["cell"].name),
            "log": os.path.join(cell_folder(task["out"], task["cell"].name), "log.txt")}


def _run_table1(task, folder, log):
    """A V&R Table 1 cell: ``run_experiment``'s call into ``folder``; ``(result, device,
    data)``, ``data`` the fingerprint of its mosaics that its checkpoints hold too
    (:func:`.checkpoints.data_fingerprint`)."""
    from minimal_attn.backends.vr.table1 import MosaicTable1
    from minimal_attn.backends.vr.table1_driver import run_table1
    from minimal_attn.experiments.cell_runners import fcam_result

    cell, epoch = task["cell"], task.get("crash_after_epoch")
    data = MosaicTable1(cell_config(cell, task["operational"]))     # run_experiment, data kept
    results, meta = run_table1(data, folder, resume=task["resume"], log=log,
                               on_epoch=_crash_hook(folder, epoch) if epoch else None)
    return (fcam_result(results, meta, cell.settings["paradigm"]), meta["device"],
            data.checkpoint_reader()[1])


def run_task(task):
    """Run one cell; return ``{"cell", "ok", "seconds", "error", "log", "record"}``."""
    cell, out = task["cell"], task["out"]
    folder = cell_folder(out, cell.name)
    os.makedirs(folder, exist_ok=True)
    log_path = os.path.join(folder, "log.txt")
    source = code_source()                  # the code that runs, before it has run
    if not task["resume"]:                  # afresh: the code that ran before left nothing
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(folder, CODE_HISTORY))
    history = code_history(folder, source)  # and the code that ran before, if it resumes
    t0 = time.perf_counter()
    with open(log_path, "a") as log_file:
        def log(line):
            log_file.write(line + "\n")
            log_file.flush()

        outcome = {"cell": cell.name, "ok": False, "error": None, "log": log_path,
                   "record": None}
        try:
            log(f"-- {cell.name}: start (resume={task['resume']})")
            if cell.kind == "table2":
                from minimal_attn.experiments.sweep_table2 import run_row

                result, device, data = run_row(cell, folder, task["operational"], log)
            else:
                result, device, data = _run_table1(task, folder, log)
            record = {"format": 1, "cell": cell.name, "kind": cell.kind, "scale": cell.scale,
                      "title": cell.title, "settings": cell.settings, "result": result,
                      "paper": cell.paper or None,
                      "provenance": provenance(time.perf_counter() - t0, device,
                                               cell.settings.get("protocol"),
                                               task["command"] or ["attn-dyn", "sweep"],
                                               source=source, history=history)}
            record["provenance"]["data_fingerprint"] = data   # which data the numbers are of
            write_cell(out, record)
            outcome.update(ok=True, record=record)
            log(f"-- {cell.name}: done")
        except Exception as exc:       # noqa: BLE001 (one cell's failure stops no other)
            log(traceback.format_exc())
            outcome["error"] = f"{type(exc).__name__}: " + " ".join(str(exc).split())
    outcome["seconds"] = time.perf_counter() - t0
    return outcome
