r"""A sweep: a grid of Table 1 cells run by an engine, resumable, merged into one result set.

``attn-dyn sweep`` is :func:`run_sweep`. The grid (:mod:`minimal_attn.experiments.sweep_grid`)
expands into cells; each cell runs where the engine puts it
(:mod:`minimal_attn.experiments.sweep_engines`) and leaves its files under
``OUT/cells/NAME/`` and its record ``OUT/cells/NAME.json``; the driver then
merges the records (:mod:`minimal_attn.experiments.sweep_report`).

Nothing lost, nothing done twice:

* a cell whose record exists and matches its settings is skipped, once its data match
  the record's (:mod:`minimal_attn.experiments.sweep_data`);
* every other cell resumes from its own checkpoints (a worker that died, a
  driver that was killed); a record of other settings makes its cell start
  afresh;
* ``OUT/sweep.json`` keeps the grid, so ``resume=True`` needs no grid again;
* a cell that fails is reported in one line with its log; every other cell
  still runs, and the caller learns of the failure from the return value.
"""

import importlib.util
import json
import os
import sys

from minimal_attn.errors import InputError, check_folder
from minimal_attn.experiments.io import ensure_dir, write_json
from minimal_attn.experiments.results_store import cell_path
from minimal_attn.experiments.run_folders import check_output_set
from minimal_attn.experiments.sweep_cell import CRASH_STATUS, make_task, read_record, record_status
from minimal_attn.experiments.sweep_data import check_data, set_aside
from minimal_attn.experiments.sweep_engines import make_engine
from minimal_attn.experiments.sweep_grid import add_settings, expand, operational
from minimal_attn.experiments.sweep_report import write_merged

#: Test hook: set, the driver exits (as if killed) right after it submitted its first jobs.
DRIVER_CRASH_ENV = "ATTN_DYN_SWEEP_DRIVER_CRASH"


def sweep_file(out):
    return os.path.join(out, "sweep.json")


def stored_grid(out, operational=None):
    """The grid of the sweep in ``out`` (``resume`` without a grid) with ``operational``
    (``{"threads": [1]}``, options given again) over it, typed and checked as a grid given
    anew (every cell expands), or InputError naming the file."""
    path = sweep_file(out)
    try:
        with open(path) as f:
            grid = json.load(f)["grid"]
    except FileNotFoundError:
        raise InputError(f"nothing to resume: {out} holds no sweep.json; give the grid "
                         "(--grid or --grid-file)", param="out") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} cannot be read ({type(exc).__name__}); give "
                         "the grid again", param="out") from None
    try:
        if not isinstance(grid, dict) or not grid:
            raise InputError("its grid is not a mapping of settings to lists of values")
        grid = add_settings({}, [(k, v, path, k) for k, v in grid.items()], "out")
        grid.update(operational or {})
        expand(grid)
    except InputError as exc:
        raise InputError(f"{path} is damaged ({exc}): fix it, or give the grid again "
                         "(--grid or --grid-file) to replace it", param="out") from None
    return grid


def headline(record):
    """Test accuracy and SAIF, mean ± std over seeds (%); Table 2: A(α,β) and performance."""
    if record["kind"] == "table2":
        from minimal_attn.experiments.sweep_table2 import headline

        return headline(record)
    test = record["result"]["test"]
    return ", ".join(f"test {label} {100 * test[k]['mean']:.1f} ± {100 * test[k]['std']:.1f}%"
                     for k, label in (("accuracy", "accuracy"), ("saif", "SAIF")))


class _Counts:
    def __init__(self, total):
        self.total, self.done, self.failed, self.running = total, 0, 0, 0

    def line(self, waiting):
        return (f"[done {self.done}/{self.total}, running {self.running}, failed "
                f"{self.failed}, waiting {waiting}]")


def run_sweep(out, grid=None, engine="local", resume=False, engine_options=None,
              retries=2, log=None, command=None, retrain_other_data=False):
    """Run every cell of ``grid`` not yet done on ``engine``; write the merged result set.

    ``grid``: ``{key: [values]}`` (None with ``resume``: the grid in
    ``out/sweep.json``); ``engine_options``: keyword arguments of
    :func:`~minimal_attn.experiments.sweep_engines.make_engine`; ``log(line)``: progress.
    Returns ``{"cells", "done", "skipped", "failed": {name: error}}``. Every check
    (grid, settings, ``out``, the engine's extra, the data of the finished cells) comes
    before anything is written: a finished cell (Table 1 cell or Table 2 row) whose record
    names other data than ``data_dir`` gives is refused, or with ``retrain_other_data``
    set aside and trained afresh (:mod:`minimal_attn.experiments.sweep_data`).
    """
    log = log or (lambda line: None)
    check_output_set(out, "sweep")      # its merged files would replace another run's
    if grid is None:
        if not resume:
            raise InputError("give the grid (--grid or --grid-file), or --resume to "
                             "continue the sweep in out", param="grid")
        grid = stored_grid(out)
    cells = expand(grid)
    if engine == "local":              # a Ray or Slurm node may have what this one lacks
        _check_torch(cells)
    extra = operational(grid)
    if extra.get("data_dir") is not None:             # not one failed cell each
        check_folder(extra["data_dir"], param="data_dir")
    statuses = {c.name: record_status(out, c) for c in cells}
    other = check_data(out, cells, statuses, extra, retrain_other_data, log)
    runner = make_engine(engine, out, retries=retries, **(engine_options or {}))
    try:
        ensure_dir(out)
        _note_other_grid(out, cells, log)
        write_json(sweep_file(out), {"format": 1, "grid": grid,
                                     "cells": [c.name for c in cells]})
        set_aside(out, other, log)
        statuses.update(dict.fromkeys(other, "other data"))
        report = _drive(out, cells, statuses, extra, runner, retries, log, command)
    finally:
        runner.close()
    entries, missing = write_merged(out, cells, grid)
    log(f"merged {len(entries)} of {len(cells)} cells into {out}: results.json, summary.csv, "
        "summary.md, figures/")
    return report


def _note_other_grid(out, cells, log):
    """One line when ``out`` held a sweep of other cells: its sweep.json and merged files
    are about to describe this grid (the old cells' records stay in ``out/cells``)."""
    try:
        with open(sweep_file(out)) as f:
            before = json.load(f)["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if sorted(before) != sorted(c.name for c in cells):
        log(f"{out} held a sweep of another grid ({len(before)} cells): sweep.json and the "
            f"merged files now describe this one ({len(cells)} cells); the records of the "
            f"other cells stay in {out}/cells")


def _check_torch(cells):
    """Refuse, before anything is written, cells that need torch where it is missing (every
    cell but the NumPy backend's): else each would fail alone, after the sweep started."""
    needy = [c.name for c in cells
             if c.kind != "table1" or c.settings.get("backend", "torch") != "numpy"]
    if needy and importlib.util.find_spec("torch") is None:
        raise InputError(f"{len(needy)} cell(s) of this sweep ({needy[0]}, ...) need torch, "
                         "which is not installed: pip install torch==2.13.0 (the CPU build), "
                         "or sweep backend=numpy")


def _drive(out, cells, statuses, extra, runner, retries, log, command):
    counts, waiting, skipped = _Counts(len(cells)), [], []
    for cell in cells:
        status = statuses[cell.name]
        if status == "done":
            counts.done += 1
            skipped.append(cell.name)
            log(f"{cell.name}: already done ({headline(read_record(out, cell.name))})")
        else:
            if status == "stale":
                log(f"{cell.name}: its record {cell_path(out, cell.name)} is of other "
                    "settings, unreadable or damaged: the cell runs afresh")
            waiting.append(make_task(cell, out, extra, resume=status == "absent",
                                     command=command or ["attn-dyn", *sys.argv[1:]]))
    if skipped:
        log(f"{len(skipped)} of {len(cells)} cells already done; {len(waiting)} to run on "
            f"{runner.name}")
    running, failed, tries = [], {}, {}
    if hasattr(runner, "reattach"):        # jobs of a killed driver may still run
        running, waiting = runner.reattach(waiting, log)
        for job, tasks in running:
            log(f"job {job.job_id} of an earlier driver still runs "
                f"{', '.join(t['cell'].name for t in tasks)}: waiting for it")
    while waiting or running:
        while waiting and len(running) < runner.parallel:
            batch, waiting = waiting[:runner.cells_per_job], waiting[runner.cells_per_job:]
            running.append(runner.start(batch))
        if os.environ.get(DRIVER_CRASH_ENV):
            os._exit(CRASH_STATUS)           # test hook: the driver killed mid-sweep
        counts.running = sum(len(h[1]) for h in running)
        for handle, outcomes in runner.finished(running, timeout=5.0):
            running = [h for h in running if h is not handle]
            retry, mine = [], {t["cell"].name: t for t in handle[1]}
            for outcome in outcomes:
                name, task = outcome["cell"], mine.get(outcome["cell"])
                if task is None:           # a reattached job's cell done or not in the grid
                    continue
                counts.running -= 1
                if outcome.get("died") and record_status(out, task["cell"]) == "done":
                    record = read_record(out, name)       # finished before its job died
                    seconds = (record["provenance"] or {}).get("wall_seconds") or 0.0
                    outcome = {"cell": name, "ok": True, "record": record, "seconds": seconds}
                if outcome.get("died") and runner.resubmits and tries.get(name, 0) < retries:
                    tries[name] = tries.get(name, 0) + 1
                    retry.append(dict(task, resume=True))
                    log(f"{name}: worker died ({outcome['error']}); retry {tries[name]} of "
                        f"{retries} from its checkpoint")
                elif outcome["ok"]:
                    counts.done += 1
                    log(f"{counts.line(len(waiting))} {name}: {outcome['seconds']:.1f} s, "
                        f"{headline(outcome['record'])}")
                else:
                    counts.failed += 1
                    failed[name] = outcome["error"]
                    log(f"{counts.line(len(waiting))} {name} FAILED: {outcome['error']} "
                        f"(log: {outcome['log']})")
            waiting = retry + waiting
    return {"cells": [c.name for c in cells], "done": counts.done, "skipped": skipped,
            "failed": failed}
