r"""Bring cell records home from a GPU job without losing a better one already here.

A GPU job hands its records back as ``cells_results.tar.gz`` (benchmarks/gpu_cells.sh).
Unpacking it over ``results/cells`` with ``tar`` would let a record cut short by a
time limit replace a complete record of the same cell from an earlier job.
:func:`import_records` reads every record of the archive (or folder) first and
refuses the whole import, writing nothing, if one of them is not a well-formed cell
record of the cell its file name says (:func:`.results_store.parse_record`), or if the
store cannot be written; then it writes each record unless the store already holds a
better record of that cell: a complete one where the incoming one is partial, or a
partial one that trained further (more epochs or steps in all) than the incoming
partial one.
"""

import glob
import os
import tarfile

from minimal_attn.errors import InputError
from minimal_attn.experiments.cell_catalogue import all_cells
from minimal_attn.experiments.cell_parts import check_split, complete, training_done
from minimal_attn.experiments.io import check_output_dir
from minimal_attn.experiments.results_store import (
    cell_path,
    parse_record,
    read_record,
    write_cell,
)

#: What a refused import says after naming the record.
REFUSED = "nothing was imported; fetch the archive again"


def _read_archive(path):
    try:
        with tarfile.open(path, "r:*") as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.endswith(".json")
                       and not os.path.basename(m.name).startswith(".")
                       and os.path.basename(os.path.dirname(m.name)) == "cells"]
            return [(f"{path}:{m.name}", tar.extractfile(m).read()) for m in members]
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"{path} is not a readable tar archive ({type(exc).__name__}): "
                         "fetch cells_results.tar.gz again", param="source") from None


def _read_folder(path):
    folder = os.path.join(path, "cells") if os.path.isdir(os.path.join(path, "cells")) \
        else path
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json") and not name.startswith("."):      # .tmp-*: a cut write
            with open(os.path.join(folder, name), "rb") as f:
                out.append((os.path.join(folder, name), f.read()))
    return out


def read_incoming(source):
    """Every cell record in ``source`` (a .tar.gz of results/cells/*.json, or a folder
    of records), each checked (:func:`.results_store.parse_record`); raises InputError
    naming the first bad one."""
    if not os.path.exists(source):
        raise InputError(f"{source} does not exist: give the cells_results.tar.gz a GPU "
                         "job returned, or a folder of cell records", param="source")
    raw = _read_folder(source) if os.path.isdir(source) else _read_archive(source)
    if not raw:
        raise InputError(f"{source} holds no cell records (results/cells/*.json)",
                         param="source")
    # where: the file, or ARCHIVE:MEMBER whose member sits in a folder cells/
    return [parse_record(data, where, os.path.basename(where)[:-len(".json")], REFUSED)
            for where, data in raw]


def import_records(source, results_dir="results"):
    """Copy the records of ``source`` into ``results_dir``; ``[(cell, what happened)]``.

    A complete record already here is never replaced by a partial one (one whose
    seeds a time limit cut short), nor a partial one by a partial one that trained
    less (:func:`.cell_parts.training_done`: a short GPU job must not undo a longer one);
    otherwise the incoming record wins. Nothing is written unless every incoming
    record reads as a cell record and the store can be written; a malformed record
    already in the store is replaced.
    """
    incoming = read_incoming(source)
    check_output_dir(os.path.join(results_dir, "cells"), param="results_dir")
    _check_splits(incoming, results_dir)
    done = []
    for record in incoming:
        path = cell_path(results_dir, record["cell"])
        old, damaged = None, False
        if os.path.isfile(path):
            try:
                old = read_record(path)
            except InputError:
                damaged = True                        # a malformed record here: replace it
        if old is not None and complete(old) and not complete(record):
            done.append((record["cell"], "kept the complete record here (incoming is "
                                         "partial)"))
            continue
        if old is not None and not complete(old) and not complete(record):
            here, there = training_done(old), training_done(record)
            if here is not None and there is not None and there < here:
                done.append((record["cell"], f"kept the partial record here, which trained "
                                             f"further ({here} against {there} epochs or "
                                             "steps in all)"))
                continue
        if old == record:
            done.append((record["cell"], "unchanged"))
            continue
        write_cell(results_dir, record, param="results_dir")
        state = "partial" if not complete(record) else "complete"
        how = "replaced" if old is not None else "replaced a malformed record" if damaged \
            else "new"
        done.append((record["cell"], f"{how}, {state}"))
    return done


def _check_splits(incoming, results_dir):
    """Refuse incoming parts of a split other than the cell's in the catalogue, or that
    with the parts already in the store would count a seed twice (:func:`check_split`)."""
    cells = all_cells()
    for of in sorted({r["part"]["of"] for r in incoming if "part" in r}):
        mine = {r["cell"]: r for r in incoming if "part" in r and r["part"]["of"] == of}
        for name, r in mine.items():
            if of in cells and r["part"]["parts"] != cells[of].parts:
                raise InputError(f"{name} is part {r['part']['index']} of "
                                 f"{r['part']['parts']}, but cell {of} is now cut into "
                                 f"{cells[of].parts} parts (`attn-dyn cells list`): rerun "
                                 f"it; {REFUSED}")
        here = {}
        for path in glob.glob(os.path.join(results_dir, "cells", glob.escape(of) + "@*.json")):
            try:
                r = read_record(path)
            except InputError:
                continue                                # a malformed record: replaced
            here[r["cell"]] = r
        try:
            check_split(of, list({**here, **mine}.values()))
        except InputError as exc:
            raise InputError(f"{exc} (the store's records with the incoming ones); "
                             f"{REFUSED}") from None
