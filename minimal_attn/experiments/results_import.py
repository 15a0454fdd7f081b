r"""Bring cell records home from a GPU job without losing a better one already here.

A GPU job hands its records back as ``cells_results.tar.gz`` (benchmarks/gpu_cells.sh).
Unpacking it over ``results/cells`` with ``tar`` would let a record cut short by a
time limit replace a complete record of the same cell from an earlier job.
:func:`import_records` reads every record of the archive (or folder) first and
refuses the whole import, writing nothing, if one of them is not a well-formed cell
record of the cell its file name says (:func:`.results_store.parse_record`), of a cell
in the catalogue with the title, kind, scale, settings and part the catalogue gives it
(:func:`catalogue_problem`), or if one cell comes twice, or the store cannot be
written; then it writes each record unless the store already holds a better record of
that cell: a complete one where the incoming one is partial, a partial one that trained
further (more epochs or steps in all) than the incoming partial one, or a complete one
made later (its provenance's date) than the incoming complete one, so that an archive
of records made before a cell was rerun here does not bring the older one back.
"""

import datetime
import glob
import json
import os
import tarfile

from minimal_attn.errors import InputError
from minimal_attn.experiments.cell_catalogue import all_cells
from minimal_attn.experiments.cell_parts import check_split, complete, split_name, training_done
from minimal_attn.experiments.cells import part_of
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
    of records), each checked (:func:`.results_store.parse_record`, :func:`catalogue_problem`)
    and each cell once; raises InputError naming the first bad one."""
    if not os.path.exists(source):
        raise InputError(f"{source} does not exist: give the cells_results.tar.gz a GPU "
                         "job returned, or a folder of cell records", param="source")
    raw = _read_folder(source) if os.path.isdir(source) else _read_archive(source)
    if not raw:
        raise InputError(f"{source} holds no cell records (results/cells/*.json)",
                         param="source")
    cells, records, where_of = all_cells(), [], {}
    for where, data in raw:       # where: the file, or ARCHIVE:MEMBER in a folder cells/
        record = parse_record(data, where, os.path.basename(where)[:-len(".json")], REFUSED)
        problem = catalogue_problem(record, cells)
        if problem:
            raise InputError(f"{where} {problem}: nothing was imported; leave that record "
                             "out (rerun its cell with this code) and import again")
        if record["cell"] in where_of:           # which of the two would win is a guess
            raise InputError(f"{where} and {where_of[record['cell']]} both hold a record of "
                             f"cell {record['cell']}: nothing was imported; leave one of them "
                             "out and import again")
        where_of[record["cell"]] = where
        records.append(record)
    return records


def catalogue_problem(record, cells):
    """What makes ``record`` not a record of the catalogue cell it names (``cells``:
    :func:`.cell_catalogue.all_cells`), in a few words; None when nothing does.

    The title, kind, scale and part must be the catalogue's, and each setting the
    catalogue and the record both name must be equal (a record holds the settings as
    its run resolved them, some of which the catalogue leaves to their defaults)."""
    base, index = split_name(record["cell"])
    if base not in cells:
        return f"is a record of cell {record['cell']!r}, which the catalogue does not have"
    part = record.get("part")
    if part and part.get("parts") != cells[base].parts:      # a split the catalogue dropped
        return (f"is part {part.get('index')} of {part.get('parts')}, but cell {base} is now "
                f"cut into {cells[base].parts} parts (`attn-dyn cells list`)")
    if index is not None and not 1 <= index <= cells[base].parts:
        return (f"is part {index} of cell {base}, which the catalogue cuts into "
                f"{cells[base].parts} part(s) (`attn-dyn cells list`)")
    cell = cells[base] if index is None else part_of(cells[base], index)
    wrong = [k for k in ("title", "kind", "scale") if record[k] != getattr(cell, k)]
    if (part or None) != (cell.part and json.loads(json.dumps(cell.part))):
        wrong.append("part")
    want = json.loads(json.dumps(cell.settings))     # tuples as the record's lists
    wrong += [f"settings.{k}" for k in sorted(want) if k in record["settings"]
              and record["settings"][k] != want[k]]
    if wrong:
        return (f"differs from the catalogue's cell {record['cell']} in its "
                f"{', '.join(wrong)} (made by code that defined the cell otherwise)")
    return None


def _made(record):
    """When ``record`` was made (its provenance's date), or None when it does not say."""
    try:
        return datetime.datetime.fromisoformat(record["provenance"]["date"])
    except (KeyError, TypeError, ValueError):
        return None


def _newer_here(old, record):
    """Both complete and different: a few words when the record here was made later
    than the incoming one (it is kept); None when the incoming one wins."""
    here, there = _made(old), _made(record)
    if here is None or there is None:
        return None                   # undated: the incoming one wins, as it always did
    try:
        later = here > there
    except TypeError:                 # one date without a time zone
        return None
    if later:
        return (f"kept the complete record here, made later ({old['provenance']['date']} "
                f"against the incoming one's {record['provenance']['date']})")
    return None


def import_records(source, results_dir="results"):
    """Copy the records of ``source`` into ``results_dir``; ``[(cell, what happened)]``.

    A complete record already here is never replaced by a partial one (one whose
    seeds a time limit cut short), nor by a complete one made earlier (the
    provenance's date: an archive of records made before a cell was rerun here), nor a
    partial one by a partial one that trained less (:func:`.cell_parts.training_done`:
    a short GPU job must not undo a longer one); otherwise the incoming record wins.
    Nothing is written unless every incoming record reads as a record of its catalogue
    cell and the store can be written; a malformed record already in the store is
    replaced.
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
        both = old is not None and complete(old) and complete(record)
        newer = _newer_here(old, record) if both else None
        if newer:
            done.append((record["cell"], newer))
            continue
        write_cell(results_dir, record, param="results_dir")
        state = "partial" if not complete(record) else "complete"
        how = "replaced" if old is not None else "replaced a malformed record" if damaged \
            else "new"
        why = (f" (the incoming one is newer: {record['provenance'].get('date')} against "
               f"{old['provenance'].get('date')} here)") if both else ""
        done.append((record["cell"], f"{how}, {state}{why}"))
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
