r"""The results store: one small JSON file per finished experiment cell, with provenance.

Paper-size experiments run in *cells* (:mod:`minimal_attn.experiments.cells`): pieces that
each fit one short GPU job and add up across jobs. A finished cell leaves one
record in ``results/cells/<name>.json`` in the repository:

* ``cell``, ``kind`` (``table1``, ``table2`` or ``synthetic``), ``scale``
  (``paper``: the paper's size; ``cpu``: reduced to fit the 2-core machine;
  ``tiny``: a smoke cell for tests), ``title`` and ``settings``;
* ``result``: per-seed metrics with their mean and sample standard deviation;
* ``paper``: the paper's numbers for the same cell, where it has them;
* ``provenance``: commit (and whether the tree had uncommitted changes; both None
  for code that does not run from a checkout's tracked files, :func:`code_source`), date,
  device and card, Python, NumPy, torch and CUDA versions, CPU count, torch's
  thread count (records from commit f273412 on) and CPU vector kernels (``cpu_kernels``,
  e.g. AVX2 or AVX512; records from 2026-11-28 on), wall time and the command line; a cell
  resumed by other code names every commit that ran it (``code_history``, records from
  2026-11-28 on).

:func:`.results_tables.render` turns every record into the Markdown tables of
``results/README.md``, and the paper-size ones, briefly, into the README block between
``<!-- results:begin -->`` and ``<!-- results:end -->``; :func:`write_report` writes
both, and with ``check=True`` only says which of them is out of date (the test suite
does). Every reader of the store (the tables, ``cells list``, a cell's status, ``cells
import``) takes a record through :func:`parse_record`, which refuses one that is not
shaped as the tables read it, or that is not the record of the cell its file names, in
one line naming the file.
"""

import datetime
import json
import os
import platform
import subprocess
import sys

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import atomic_open, ensure_dir
from minimal_attn.experiments.results_shape import SCALES, shape_problem
from minimal_attn.experiments.results_tables import render

FORMAT = 1
KINDS = ("table1", "table2", "synthetic")
BEGIN, END = "<!-- results:begin -->\n", "<!-- results:end -->"


def summarise(values):
    """``{"per_seed", "mean", "std"}`` of per-seed numbers (sample std; 0 for one seed)."""
    v = np.asarray([float(x) for x in values], dtype=float)
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {"per_seed": v.tolist(), "mean": float(v.mean()), "std": std}


def _git(*args, cwd=None):
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_source(repo=None):
    """``(commit, dirty)`` of the code as it is now: call it when a cell starts, so that a
    commit made while the cell runs is not taken for the code that ran.

    ``repo``: the folder of the code (default: this package's). A commit is recorded only
    when that folder holds tracked files of the git repository around it, i.e. the code
    runs from a checkout (an editable install). A copy made by ``pip install .`` into a
    venv inside a checkout is not that repository's code: its commit and dirty flag
    would describe the checkout, not what ran, so it gets ``(None, None)``, as does a
    folder outside any repository; ``ATTN_DYN_COMMIT`` (below) overrides both.
    """
    repo = repo or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.environ.get("ATTN_DYN_COMMIT"):
        # a copy of the working tree (a GPU machine), whose .git, if any, need not be
        # the copy's: the commit and dirty flag recorded where the copy was made
        # (benchmarks/gpu_cells.sh --prepare, which also checks the files still match)
        return (os.environ["ATTN_DYN_COMMIT"],
                {"0": False, "1": True}.get(os.environ.get("ATTN_DYN_DIRTY", "")))
    if not _git("ls-files", "--", ".", cwd=repo):   # untracked, ignored, or no repository
        return None, None
    dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=repo)
    return _git("rev-parse", "HEAD", cwd=repo), None if dirty is None else bool(dirty)


#: The run folder's file listing the code of every process that ran the cell there.
CODE_HISTORY = "code_history.json"


def code_history(work, source):
    """Add ``source`` (:func:`code_source`, with the time it starts) to the run folder
    ``work``'s list of the code that ran its cell there, and return the list.

    A cell that resumes trains on checkpoints another commit wrote; its record must name
    both (:func:`provenance` with ``history``). A damaged list is started anew, with a
    note that earlier runs are unknown."""
    path = os.path.join(work, CODE_HISTORY)
    history = []
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                history = json.load(f)
            if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
                raise ValueError
        except (OSError, ValueError):
            history = [{"commit": "unknown", "dirty": None, "started": None}]
    history.append({"commit": source[0], "dirty": source[1],
                    "started": datetime.datetime.now(datetime.timezone.utc)
                    .isoformat(timespec="seconds")})
    ensure_dir(work, "work_root")
    with atomic_open(path, "w", param="work_root") as f:
        json.dump(history, f, indent=1)
    return history


def provenance(wall_seconds, device="cpu", protocol=None, command=None, repo=None,
               source=None, history=None):
    """Where and how a cell ran: commit, date, device, card, versions, wall time;
    ``source``: :func:`code_source` when the cell started (default: now). ``history``
    (:func:`code_history`): the code of every process that ran the cell in its run
    folder; when more than one did, ``commit`` names each distinct commit (oldest first),
    ``dirty`` is true if any tree was, and ``code_history`` keeps the list."""
    commit, dirty = source if source is not None else code_source(repo)
    several = history is not None and len(history) > 1
    if several:
        commit = ",".join(dict.fromkeys(str(h.get("commit")) for h in history))
        flags = [h.get("dirty") for h in history]
        dirty = True if any(flags) else None if None in flags else False
    out = {"commit": commit, "dirty": dirty,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": str(device), "card": "CPU", "python": platform.python_version(),
           "numpy": np.__version__, "torch": None, "cuda": None,
           "cpu_count": os.cpu_count(), "platform": platform.platform(terse=True),
           "protocol": protocol, "wall_seconds": round(float(wall_seconds), 1),
           "command": " ".join(command if command is not None else sys.argv)}
    if several:
        out["code_history"] = history
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        # CPU sums split over threads round differently: a rerun matches at this count,
        # and with the same vector kernels (AVX2 and AVX-512 sum in other orders: a few
        # points of a CPU-size agreement or SAIF move, docs/cpu_results.md)
        out["torch_threads"] = torch.get_num_threads()
        out["cpu_kernels"] = torch.backends.cpu.get_cpu_capability()
        if str(device).startswith("cuda") and torch.cuda.is_available():
            out["card"] = torch.cuda.get_device_name(torch.device(str(device)))
    return out


def cell_path(results_dir, name):
    return os.path.join(results_dir, "cells", f"{name}.json")


def write_cell(results_dir, record, param="out"):
    """Write one cell's record atomically to ``results_dir/cells/<name>.json``; a failure
    to write names ``param``, the parameter that gave ``results_dir``."""
    check_record(record, "record")
    path = cell_path(results_dir, record["cell"])
    ensure_dir(os.path.dirname(path), param)
    with atomic_open(path, "w", param=param) as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def check_record(record, where, fix="delete it or rerun its cell"):
    """Raise InputError (one line naming ``where``, then ``fix``) for a record that is not
    a cell record: not an object, a key missing, or an unknown format, kind or scale."""
    if not isinstance(record, dict):
        raise InputError(f"{where} is not a JSON object: {fix}")
    missing = [k for k in ("format", "cell", "kind", "scale", "title", "settings", "result",
                           "provenance") if k not in record]
    if missing:
        raise InputError(f"{where} is not a cell record (no {', '.join(missing)}): {fix}")
    if record["format"] != FORMAT or record["kind"] not in KINDS or \
            record["scale"] not in SCALES:
        raise InputError(f"{where} has format {record['format']!r}, kind {record['kind']!r}, "
                         f"scale {record['scale']!r}; expected format {FORMAT}, kind one of "
                         f"{', '.join(KINDS)}, scale one of {', '.join(SCALES)}: {fix}")
    part = record.get("part")
    if part is not None and (not isinstance(part, dict) or any(
            k not in part for k in ("of", "index", "parts", "first_seed", "seeds", "title"))):
        raise InputError(f"{where} has a malformed part entry (it needs of, index, parts, "
                         f"first_seed, seeds and title): {fix}")


def parse_record(data, where, name, fix="delete it or rerun its cell"):
    """The cell record in ``data`` (the bytes of the file ``where``, which its file name
    says is cell ``name``'s), checked as every reader of the store needs it: JSON, a cell
    record (:func:`check_record`), shaped as the tables read it
    (:func:`.results_shape.shape_problem`) and the record of cell ``name``. Otherwise an
    InputError naming ``where`` and ending in ``fix``."""
    try:
        record = json.loads(data)
    except ValueError as exc:          # UnicodeDecodeError too: binary bytes
        raise InputError(f"{where} cannot be read (not JSON: {type(exc).__name__}): "
                         f"{fix}") from None
    check_record(record, where, fix)
    problem = shape_problem(record)
    if problem:
        raise InputError(f"{where} is a malformed cell record ({problem}): {fix}")
    if record["cell"] != name:
        raise InputError(f"{where} holds the record of cell {record['cell']!r}, not {name!r} "
                         f"as its file name says: {fix}")
    return record


def read_record(path):
    """The record in the file ``path`` (``<results>/cells/<name>.json``), checked by
    :func:`parse_record`."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror or type(exc).__name__}): "
                         "delete it or rerun its cell") from None
    return parse_record(data, path, os.path.basename(path)[:-len(".json")])


def read_cells(results_dir):
    """Every record under ``results_dir/cells`` (sorted by name), each checked
    (:func:`read_record`): one malformed record is refused in one line naming its file."""
    folder = os.path.join(results_dir, "cells")
    if not os.path.isdir(folder):
        return []
    records = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name.startswith("."):     # .tmp-*: a cut write
            continue
        records.append(read_record(os.path.join(folder, name)))
    return records


RESULTS_README = """# Results

One JSON record per finished experiment cell in `cells/` (format in
`minimal_attn/experiments/results_store.py`; the cells in
`minimal_attn/experiments/cells.py`, listed with `attn-dyn cells list`). This page and
the README's results block are generated from them by `attn-dyn cells report`; a test
checks that both match the records.

"""


def write_report(results_dir, readme=None, check=False):
    """Write ``results_dir/README.md`` (every record) and the ``readme`` block (the
    paper-size records, briefly) from the records.

    With ``check`` nothing is written; returns the paths that are out of date
    (empty when everything matches). A ``results_dir`` without ``cells/`` is refused
    before anything is read or written: it is the wrong folder (run outside the
    checkout), and writing would replace the README's tables with empty ones.
    """
    if not os.path.isdir(os.path.join(results_dir, "cells")):
        raise InputError(f"no results store at {results_dir} (no cells/ in it): pass "
                         "--results DIR (the checkout's results/); nothing written",
                         param="results_dir")
    records = read_cells(results_dir)
    targets = {os.path.join(results_dir, "README.md"): RESULTS_README + render(records)}
    if readme is not None:
        try:
            with open(readme, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            raise InputError(f"cannot read {readme} ({why}): give the README whose results "
                             "block to rewrite with --readme", param="readme") from None
        if BEGIN not in text or END not in text:
            raise InputError(f"{readme} has no results block ({BEGIN.strip()} ... {END}): "
                             "add the two markers where the tables belong")
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        targets[readme] = text[:i] + render(records, brief=True) + text[j:]
    stale = []
    for path, content in targets.items():
        old = open(path).read() if os.path.exists(path) else None
        if old != content:
            stale.append(path)
            if not check:
                ensure_dir(os.path.dirname(path) or ".")
                with atomic_open(path, "w") as f:
                    f.write(content)
    return stale
