r"""Paper-size experiments cut into cells that each fit one short GPU job.

GPU time comes in short jobs (about 8 minutes of work each), so every headline
experiment of both papers is split into *cells* whose results add up across
jobs in the results store (:mod:`minimal_attn.experiments.results_store`); the
cells themselves are listed in :mod:`minimal_attn.experiments.cell_catalogue`.

A cell too long for one job with all its seeds has *parts* (``Cell.parts``): part
``NAME@k`` trains the k-th block of its seeds and writes its own record; the
tables join the parts (:mod:`minimal_attn.experiments.cell_parts`).

:func:`run_cell` runs one cell or part through the same library call as its
command (``run_experiment``, ``run_hatexplain``, ``run_agreement``,
``run_synthetic``) and writes its record; :mod:`.cell_costs` estimates the time
of each on a card, and :mod:`.cell_views` reads a run folder back (curves, seen and
unseen test images).
"""

import contextlib
import os
import shutil
import time
from dataclasses import replace

from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_costs, cell_parts, cell_runners
from minimal_attn.experiments.cell_catalogue import all_cells
from minimal_attn.experiments.io import atomic_open, check_output_dir
from minimal_attn.experiments.results_store import (
    CODE_HISTORY,
    cell_path,
    code_history,
    code_source,
    provenance,
    read_record,
    write_cell,
)


def get_cell(name):
    """The cell ``name``, or its part for ``NAME@k`` (:func:`part_of`)."""
    # errors about a name carry no param: the commands take NAMES as an argument, and a
    # param "cell" printed the word cell as an option that does not exist (--cell)
    base, index = cell_parts.split_name(name)
    cells = all_cells()
    if base not in cells:
        raise InputError(f"unknown cell {base!r}: `attn-dyn cells list` names every cell "
                         "and its parts")
    if index is not None:
        return part_of(cells[base], index)
    return cells[base]


def seed_count(cell):
    """How many seeds ``cell`` trains (the protocol's, for a Table 1 cell)."""
    if cell.settings["runner"] == "fcam":
        return cell_runners.fcam_config(cell, data_dir=None, device="cpu").seeds
    return cell.settings["seeds"]


def part_of(cell, index):
    """Part ``index`` (1-based) of ``cell``: the same settings on its block of seeds.

    A multi-head cell (``settings["screen_parts"]`` = P) is cut in two kinds of part:
    parts 1..P screen a block of its pool of candidate heads each (``phase`` screen),
    and the others train a block of its seeds each (``phase`` train) with heads drawn
    from the pool those P parts label together (:func:`needs`). Every candidate and
    every seed is a run of its own in a seed-batched model, so the parts add up to
    the whole cell (Snell Sec. 5.2; :mod:`.synthetic_experiments`).
    """
    if cell.parts < 2:
        raise InputError(f"cell {cell.name} has no parts: run it whole")
    if not 1 <= index <= cell.parts:
        raise InputError(f"part {index} does not exist: cell {cell.name} has parts "
                         f"1..{cell.parts}")
    screens = cell.settings.get("screen_parts", 0)
    pool_seed = cell.settings.get("first_seed", 0)          # the whole cell's first seed
    name = cell_parts.part_name(cell.name, index)
    part = {"of": cell.name, "index": index, "parts": cell.parts, "title": cell.title}
    if index <= screens:
        first, count = cell_parts.part_seeds(cell.settings["pool"], screens, index)
        text = f"screening head candidates {first}-{first + count - 1}"
        return replace(cell, name=name, parts=1,
                       title=f"{cell.title}, part {index} of {cell.parts} ({text})",
                       settings=dict(cell.settings, phase="screen", first_candidate=first,
                                     candidates=count, pool_seed=pool_seed),
                       part=dict(part, first_seed=pool_seed, seeds=0,
                                 candidates=[first, count]))
    first, seeds = cell_parts.part_seeds(seed_count(cell), cell.parts - screens,
                                         index - screens)
    seed_text = f"seed {first}" if seeds == 1 else f"seeds {first}-{first + seeds - 1}"
    phase = {"phase": "train", "pool_seed": pool_seed} if screens else {}
    return replace(cell, name=name, parts=1,
                   title=f"{cell.title}, part {index} of {cell.parts} ({seed_text})",
                   settings=dict(cell.settings, seeds=seeds, first_seed=first, **phase),
                   part=dict(part, first_seed=first, seeds=seeds))


def needs(cell):
    """The parts whose records ``cell`` (a part) reads before it runs: a multi-head
    training part reads the head pool of the cell's screening parts; others none."""
    if cell.part is None or cell.settings.get("phase") != "train":
        return []
    return [cell_parts.part_name(cell.part["of"], k)
            for k in range(1, cell.settings["screen_parts"] + 1)]


def parts(cell):
    """Every part of ``cell`` (itself alone when it has none)."""
    return [part_of(cell, k) for k in range(1, cell.parts + 1)] if cell.parts > 1 else [cell]


def _record(name, results_dir):
    """The record of cell ``name`` in ``results_dir`` (checked: :func:`.results_store.
    read_record`), or None when there is none."""
    path = cell_path(results_dir, name)
    return read_record(path) if os.path.isfile(path) else None


def finished(name, results_dir="results"):
    """True when ``results_dir`` holds a complete record of cell ``name`` (one whose
    seeds all ran to their protocol's end, none cut short by a time limit), or a
    complete record of each of its parts."""
    record = _record(name, results_dir)
    if record is not None and cell_parts.complete(record):
        return True
    cell = get_cell(name)
    return cell.parts > 1 and all(finished(p.name, results_dir) for p in parts(cell))


def status(name, results_dir="results"):
    """Where cell ``name`` stands in ``results_dir``: ``done`` (:func:`finished`), ``k/K
    parts`` (k of its K parts complete), ``partial`` (a record cut short by a time
    limit, or parts begun but none complete) or ``-`` (no record)."""
    if finished(name, results_dir):
        return "done"
    cell = get_cell(name)
    pieces = parts(cell)
    done = sum(finished(p.name, results_dir) for p in pieces) if cell.parts > 1 else 0
    if done:
        return f"{done}/{cell.parts} parts"
    begun = any(_record(n, results_dir) is not None
                for n in {name} | {p.name for p in pieces})
    return "partial" if begun else "-"


def expected_seconds(cell, card, records, catalogue):
    """:func:`.cell_costs.estimate_seconds` of ``cell`` (or a part), a stop rule's epochs
    expected from the finished siblings among ``records`` (:func:`.cell_costs.
    stop_rule_epochs`; the records of :func:`.results_store.read_cells`, the cells of
    ``catalogue`` = :func:`all_cells`, both read once by a caller that loops)."""
    return cell_costs.estimate_seconds(
        cell, card, epochs=cell_costs.stop_rule_epochs(cell, records, catalogue))


def unfinished(results_dir="results", scale="paper"):
    """The cells and parts of ``scale`` a GPU job should run next, in run order: each
    unfinished cell, as its unfinished parts where it has parts; a part that reads
    parts not yet finished (:func:`needs`) waits for a later job."""
    return [name for name, ready in _pending(results_dir, scale) if ready]


def waiting(results_dir="results", scale="paper"):
    """The unfinished parts of ``scale`` that wait for parts they read (:func:`needs`)."""
    return [name for name, ready in _pending(results_dir, scale) if not ready]


def _pending(results_dir, scale):
    """``(name, ready)`` of every unfinished cell or part of ``scale``, in run order."""
    for cell in all_cells().values():
        if cell.scale == scale and not finished(cell.name, results_dir):
            for p in parts(cell):
                if not finished(p.name, results_dir):
                    yield p.name, all(finished(n, results_dir) for n in needs(p))


def inputs(cell, results_dir):
    """The complete records of the parts ``cell`` reads (:func:`needs`), by name; a
    missing or partial one is refused with the parts to run first."""
    records = {n: _record(n, results_dir) for n in needs(cell)}
    missing = [n for n, r in records.items() if r is None or not cell_parts.complete(r)]
    if missing:
        raise InputError(f"cell {cell.name} reads the records of {', '.join(records)}; "
                         f"{results_dir} has no complete record of {', '.join(missing)}: "
                         f"run (or import) {'it' if len(missing) == 1 else 'them'} first")
    return records


def run_cell(name, data_root, results_dir="results", work_root="runs/cells", device="auto",
             log=None, command=None, time_limit=None, compile="none", source=None,
             progress=None, conv_mode=None):
    """Run one cell and write its record; returns the record.

    ``log(line)`` hears the run's notes and warnings, ``progress(label, done, total,
    note)`` every step (:mod:`.progress`; the CLI draws it as bars).

    ``source``: the ``(commit, dirty)`` of the code this process runs
    (:func:`.results_store.code_source`, taken when it started; default: now, before the
    cell runs), so that a commit made while cells run is not recorded as their code.

    ``time_limit`` (seconds; every cell but HateXplain's): training ends at the
    first epoch boundary (synthetic and Table 2: evaluation) after it, the seeds
    (Table 2: the row's models) are evaluated as they stand, and the record says
    what was cut short (``result.time_limited``; the epochs or ``steps_run`` beside
    it), so a partial cell is never read as a finished one. ``compile``: how
    the seed-batched step runs, for the CNN FCAM cells ``none``, ``compile`` or
    ``cudagraph`` (:mod:`minimal_attn.backends.vr.batched_step`), for the synthetic
    cells ``none`` or ``cudagraph`` (:mod:`minimal_attn.backends.snell.synthetic_graph`;
    the record's ``result.step_way`` says whether the graph was kept); ``conv_mode``
    (CNN FCAM cells: how the convolutions run, :mod:`minimal_attn.backends.vr.batched`;
    None: by device). Both are recorded in the record's settings.

    ``data_root`` holds the cell's data folder (``cell.data``: ``cifar10`` the
    subset, ``cifar10-full`` the complete CIFAR-10 as ``cifar-10-batches-py``,
    ``hatexplain``, ``sst2``, ``multi30k``). The run's own files (checkpoints,
    histories, figures) go to ``work_root/<name>``, and a rerun resumes there. Both
    ``results_dir`` and ``work_root`` are checked writable before anything runs.
    """
    cell = get_cell(name)
    runner = cell.settings["runner"]
    if time_limit is not None and runner == "hatexplain":
        raise InputError(f"time_limit applies to the CNN FCAM, Table 2 and synthetic cells, "
                         f"not to cell {name}: drop it", param="time_limit")
    if runner == "synthetic" and compile not in ("none", "cudagraph"):
        raise InputError(f"compile for a synthetic cell is none or cudagraph, got "
                         f"{compile!r} (cell {name})", param="compile")
    takes = {"compile": ("the CNN FCAM and synthetic cells", ("fcam", "synthetic")),
             "conv_mode": ("the CNN FCAM cells (t1-cifar10-*)", ("fcam",))}
    for key, value, unset in (("compile", compile, "none"), ("conv_mode", conv_mode, None)):
        if value != unset and runner not in takes[key][1]:
            raise InputError(f"{key} applies to {takes[key][0]}, not to cell {name}: drop it",
                             param=key)
    check_output_dir(os.path.join(results_dir, "cells"), param="results_dir")
    check_output_dir(work_root, param="work_root")
    folder = data_dir(cell, data_root)
    work = os.path.join(work_root, name)
    given = inputs(cell, results_dir)        # refused before anything runs
    source = source or code_source()        # the code that runs, before it has run
    undo = _undo_history(work)
    history = code_history(work, source)    # and the code that ran before, if it resumes
    t0 = time.perf_counter()
    control = {"time_limit": time_limit, "compile": compile, "conv_mode": conv_mode}
    try:
        result, settings, used = cell_runners.RUNNERS[cell.settings["runner"]](
            cell, folder, work, device, log or (lambda line: None), control, progress, given)
    except (InputError, ImportError):       # refused, or torch missing: nothing is left
        undo()
        raise
    record = {"format": 1, "cell": name, "kind": cell.kind, "scale": cell.scale,
              "title": cell.title, "settings": settings, "result": result,
              "paper": cell.paper or None,
              "provenance": provenance(time.perf_counter() - t0, used,
                                       cell.settings.get("protocol"), command,
                                       source=source, history=history)}
    if cell.part is not None:
        record["part"] = dict(cell.part)
    write_cell(results_dir, record, param="results_dir")
    return record


def _undo_history(work):
    """A function that takes back what :func:`.results_store.code_history` is about to
    write in ``work``: the file as it was, and the folders it created if nothing else
    was written in them."""
    path, existed, old = os.path.join(work, CODE_HISTORY), os.path.isdir(work), None
    if os.path.isfile(path):
        with open(path, "rb") as f:
            old = f.read()
    top = os.path.abspath(work)                 # the outermost folder it will create
    while not os.path.exists(os.path.dirname(top)):
        top = os.path.dirname(top)

    def undo():
        if old is not None:
            with atomic_open(path, "wb", param="work_root") as f:
                f.write(old)
            return
        with contextlib.suppress(OSError):
            os.unlink(path)
        if not existed and not any(files for _, _, files in os.walk(top)):
            shutil.rmtree(top, ignore_errors=True)      # only folders we made, now empty
    return undo


def data_dir(cell, data_root):
    """``cell``'s data folder under ``data_root`` (None for a cell that reads none);
    an :class:`InputError` naming the folder when it is not there."""
    if not cell.data:
        return None
    if not data_root:
        folders = ", ".join(f"{d}/" for d in sorted({c.data for c in all_cells().values()
                                                      if c.data}))
        raise InputError(f"cell {cell.name} reads the data folder {cell.data}/: pass "
                         f"data_root DIR (the folder holding {folders})", param="data_root")
    folder = os.path.join(data_root, cell.data)
    if not os.path.isdir(folder):
        raise InputError(f"cell {cell.name} needs the folder {cell.data} under the data root "
                         f"({data_root}); see `attn-dyn cells list`", param="data_root")
    return folder
