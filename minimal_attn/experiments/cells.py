r"""Paper-size experiments cut into cells that each fit one short GPU job.

GPU time comes in short jobs (about 8 minutes of work each), so every headline
experiment of both papers is split into *cells* whose results add up across
jobs in the results store (:mod:`minimal_attn.experiments.results_store`):

* a V&R Table 1 cell is one data set, m, protocol and paradigm with all its
  seeds (``t1-cifar10-m5-authors-sa``; HateXplain: ``t1-hatexplain1-sa``);
* a Snell Table 2 cell is one row (``t2-sst2``, ``t2-multi30k``);
* the permutation-copy figure (Snell Sec. 3.3) and the multi-head rescue
  (Sec. 5.2, 8 heads) are one cell each;
* ``tiny-*`` cells run the same code paths in seconds on the CPU (tests), and
  ``cpu-*`` cells are reduced sizes that finish on the 2-core machine.

A cell too long for one job with all its seeds has *parts* (``Cell.parts``): part
``NAME@k`` trains the k-th block of its seeds and writes its own record; the
tables join the parts (:mod:`minimal_attn.experiments.cell_parts`).

:func:`run_cell` runs one cell or part through the same library call as its
command (``run_experiment``, ``run_hatexplain``, ``run_agreement``,
``run_synthetic``) and writes its record; :mod:`.cell_costs` estimates the time
of each on a card.
"""

import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Optional

from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_parts, cell_runners
from minimal_attn.experiments.results_store import code_source, provenance, write_cell

#: Paper-size FCAM cells score the test set and checkpoint every 10 epochs (and at
#: the end): both are run control and leave the training itself unchanged.
PAPER_RUN_CONTROL = {"eval_every": 10, "checkpoint_every": 10}
PROTOCOL_NAMES = {"authors": "authors' protocol", "paper": "paper's protocol"}
#: Parts of a CIFAR-10 Table 1 cell (12 seeds) by m: blocks of 3 seeds at m = 5 and
#: single seeds at m = 20 fit one job each on an H100 at most epochs (cell_costs.STEP_MS).
TABLE1_PARTS = {5: 4, 20: 12}
#: The multi-head cell's first parts screen its pool of 48 candidate heads, 24 each;
#: its other 4 parts train blocks of 5 seeds from the joined pool (:func:`part_of`).
MULTIHEAD_SCREEN_PARTS = 2


@dataclass(frozen=True)
class Cell:
    """One piece of a paper-size experiment: what it runs and where its data lives."""

    name: str
    kind: str                    # table1, table2 or synthetic (results_store.KINDS)
    scale: str                   # paper, cpu or tiny
    title: str
    settings: dict = field(default_factory=dict)
    data: str = ""               # folder name under the data root ("" : none needed)
    paper: dict = field(default_factory=dict)
    parts: int = 1               # seed blocks run as separate parts NAME@1..NAME@parts
    part: Optional[dict] = None  # a part: of, index, parts, first_seed, seeds, title


def _table1_cells():
    from minimal_attn.experiments.train_report import PAPER_TABLE1

    cells = []
    for m in (5, 20):
        for protocol in ("authors", "paper"):
            for p in ("sa", "ha", "lv", "hybrid"):
                saif, acc = PAPER_TABLE1["cifar10", m][p]
                cells.append(Cell(
                    f"t1-cifar10-m{m}-{protocol}-{p}", "table1", "paper",
                    f"CIFAR-10, m = {m}, {PROTOCOL_NAMES[protocol]}, {p}",
                    {"runner": "fcam", "dataset": "cifar10", "m": m, "protocol": protocol,
                     "paradigm": p, "switch_epoch": "auto", **PAPER_RUN_CONTROL},
                    "cifar10-full",
                    {"saif": saif, "accuracy": acc}, parts=TABLE1_PARTS[m]))
    from minimal_attn.experiments.hatexplain_report import PAPER_ROWS

    for embedding, tag in (("standard", "hatexplain1"), ("self-attention", "hatexplain2")):
        row = PAPER_ROWS[embedding]
        for p in ("sa", "ha", "lv", "hybrid"):
            cells.append(Cell(
                f"t1-{tag}-{p}", "table1", "paper", f"{row['name']}, {p} (binary data)",
                {"runner": "hatexplain", "embedding": embedding, "paradigm": p, "seeds": 12,
                 "epochs": 10}, "hatexplain",
                {"saif": row["saif"][p], "accuracy": row["accuracy"][p]}))
    return cells


def _snell_cells():
    from minimal_attn.experiments.agreement_table import PAPER_NAME, PAPER_TABLE2

    cells = [Cell(f"t2-{d}", "table2", "paper", f"{PAPER_NAME[d]} agreement row",
                  {"runner": "agreement", "task": task, "dataset": d, "size": "paper"}, d,
                  {"row": list(PAPER_TABLE2[PAPER_NAME[d]])})
             for d, task in (("sst2", "classify"), ("multi30k", "translate"))]
    cells += [Cell("permute-copy", "synthetic", "paper",
                   "permutation copy vs its control (Sec. 3.3), 20 seeds",
                   {"runner": "synthetic", "task": "copy", "seeds": 20, "size": "paper"},
                   parts=2),
              Cell("multihead-8", "synthetic", "paper",
                   "multi-head rescue (Sec. 5.2, Fig. 6), 8 heads",
                   {"runner": "synthetic", "task": "multihead", "seeds": 20, "heads": 8,
                    "pool": 48, "size": "paper", "screen_parts": MULTIHEAD_SCREEN_PARTS},
                   parts=MULTIHEAD_SCREEN_PARTS + 4)]
    # both papers in one frame: V&R's other paradigms on the permutation copy (HA and LV
    # compute the output at every source position: 10 parts of 2 seeds fit a job each)
    cells += [Cell(f"permute-copy-{p}", "synthetic", "paper",
                   f"permutation copy vs its control, {p} per target token, 20 seeds",
                   {"runner": "synthetic", "task": "copy", "seeds": 20, "size": "paper",
                    "paradigm": p, **({"switch_step": "auto"} if p == "hybrid" else {})},
                   parts=10)
              for p in ("ha", "lv", "hybrid")]
    return cells


def _small_cells():
    tiny = dict(runner="fcam", dataset="synthetic", m=3, protocol="authors", seeds=2,
                n_train=20, n_test=10, epochs=2, width=0.25, batch_size=10)
    cells = [Cell(f"tiny-t1-synthetic-{p}", "table1", "tiny",
                  f"synthetic images, m = 3, {p} (smoke cell)", dict(tiny, paradigm=p),
                  parts=2 if p == "sa" else 1)
             for p in ("sa", "lv")]
    cells.append(Cell("tiny-synthetic-copy", "synthetic", "tiny", "copy task (smoke cell)",
                      {"runner": "synthetic", "task": "copy", "seeds": 2, "size": "tiny"}))
    cells.append(Cell("tiny-multihead", "synthetic", "tiny",
                      "multi-head rescue, 2 heads (smoke cell: screening and training parts)",
                      {"runner": "synthetic", "task": "multihead", "seeds": 2, "heads": 2,
                       "pool": 4, "size": "tiny", "screen_parts": 2}, parts=4))
    cells.append(Cell("tiny-t2-sst2", "table2", "tiny", "SST agreement row (smoke cell)",
                      {"runner": "agreement", "task": "classify", "dataset": "sst2",
                       "size": "tiny"}, "sst2"))
    cells.append(Cell("tiny-synthetic-copy-lv", "synthetic", "tiny",
                      "copy task, LV per target token (smoke cell)",
                      {"runner": "synthetic", "task": "copy", "seeds": 2, "size": "tiny",
                       "paradigm": "lv"}))
    # the multi-head comparison at CPU size, as docs/synthetic.md ran it: with the 61 word
    # ids of `copy` some single heads fail (with the permutations' 41 none did)
    cells.append(Cell("cpu-multihead-8", "synthetic", "cpu",
                      "multi-head rescue (Sec. 5.2, Fig. 6), 8 heads, CPU size (H = 32, "
                      "1,000 steps, word ids 1-60)",
                      {"runner": "synthetic", "task": "multihead", "seeds": 6, "heads": 8,
                       "pool": 24, "size": "cpu", "vocab": 60}))
    from minimal_attn.experiments.train_report import PAPER_TABLE1

    for p in ("sa", "ha", "lv", "hybrid"):
        saif, acc = PAPER_TABLE1["cifar10", 5][p]
        cells.append(Cell(
            f"cpu-t1-cifar10-m5-authors-{p}", "table1", "cpu",
            f"CIFAR-10, m = 5, authors' protocol, {p} (3,000 mosaics, 12 epochs)",
            {"runner": "fcam", "dataset": "cifar10", "m": 5, "protocol": "authors",
             "paradigm": p, "seeds": 5, "n_train": 3000, "n_test": 1000, "epochs": 12,
             "switch_epoch": "auto"}, "cifar10", {"saif": saif, "accuracy": acc}))
    return cells


#: The order issue 19 gives the runs: CIFAR-10 m = 5 (authors' protocol, then the
#: paper's), the Multi30k row, the multi-head rescue, CIFAR-10 m = 20, HateXplain; the
#: cells it does not name come after, in the order they are listed.
RUN_ORDER = ("t1-cifar10-m5-authors", "t1-cifar10-m5-paper", "t2-multi30k", "multihead-8",
             "t1-cifar10-m20", "t1-hatexplain")


def all_cells():
    """Every cell by name, in the order a GPU job should run them (:data:`RUN_ORDER`)."""
    order = _table1_cells() + _snell_cells() + _small_cells()

    def rank(cell):
        return next((k for k, head in enumerate(RUN_ORDER) if cell.name.startswith(head)),
                    len(RUN_ORDER))
    return {c.name: c for c in sorted(order, key=rank)}       # sorted() keeps ties in order


def get_cell(name):
    """The cell ``name``, or its part for ``NAME@k`` (:func:`part_of`)."""
    base, index = cell_parts.split_name(name)
    cells = all_cells()
    if base not in cells:
        raise InputError(f"unknown cell {base!r}: `attn-dyn cells list` names them",
                         param="cell")
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
        raise InputError(f"cell {cell.name} has no parts: run it whole", param="cell")
    if not 1 <= index <= cell.parts:
        raise InputError(f"part {index} does not exist: cell {cell.name} has parts "
                         f"1..{cell.parts}", param="cell")
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
    from minimal_attn.experiments.results_store import cell_path

    path = cell_path(results_dir, name)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


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
    names = needs(cell)
    missing = [n for n in names if not finished(n, results_dir)]
    if missing:
        raise InputError(f"cell {cell.name} reads the records of {', '.join(names)}; "
                         f"{results_dir} has no complete record of {', '.join(missing)}: "
                         f"run (or import) {'it' if len(missing) == 1 else 'them'} first",
                         param="cell")
    return {n: _record(n, results_dir) for n in names}


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
    it), so a partial cell is never read as a finished one. ``compile``
    (same cells): how the seed-batched step runs (``none``, ``compile``,
    ``cudagraph``: :mod:`minimal_attn.backends.vr.batched_step`) and ``conv_mode``
    (how its convolutions run, :mod:`minimal_attn.backends.vr.batched`; None: by
    device), both recorded in the record's settings.

    ``data_root`` holds the cell's data folder (``cell.data``: ``cifar10`` the
    subset, ``cifar10-full`` the complete CIFAR-10 as ``cifar-10-batches-py``,
    ``hatexplain``, ``sst2``, ``multi30k``). The run's own files (checkpoints,
    histories, figures) go to ``work_root/<name>``, and a rerun resumes there.
    """
    cell = get_cell(name)
    runner = cell.settings["runner"]
    if time_limit is not None and runner == "hatexplain":
        raise InputError(f"time_limit applies to the CNN FCAM, Table 2 and synthetic cells, "
                         f"not to cell {name}: drop it", param="time_limit")
    for key, value, unset in (("compile", compile, "none"), ("conv_mode", conv_mode, None)):
        if value != unset and runner != "fcam":
            raise InputError(f"{key} applies to the CNN FCAM cells (t1-cifar10-*), not to "
                             f"cell {name}: drop it", param=key)
    data_dir = None
    if cell.data:
        data_dir = os.path.join(data_root, cell.data) if data_root else None
        if data_dir is None or not os.path.isdir(data_dir):
            raise InputError(f"cell {name} needs the folder {cell.data} under the data root "
                             f"({data_root}); see `attn-dyn cells list`", param="data_root")
    work = os.path.join(work_root, name)
    given = inputs(cell, results_dir)
    source = source or code_source()        # the code that runs, before it has run
    t0 = time.perf_counter()
    control = {"time_limit": time_limit, "compile": compile, "conv_mode": conv_mode}
    result, settings, used = cell_runners.RUNNERS[cell.settings["runner"]](
        cell, data_dir, work, device, log or (lambda line: None), control, progress,
        **({"inputs": given} if given else {}))
    record = {"format": 1, "cell": name, "kind": cell.kind, "scale": cell.scale,
              "title": cell.title, "settings": settings, "result": result,
              "paper": cell.paper or None,
              "provenance": provenance(time.perf_counter() - t0, used,
                                       cell.settings.get("protocol"), command,
                                       source=source)}
    if cell.part is not None:
        record["part"] = dict(cell.part)
    write_cell(results_dir, record)
    return record


def plot_cells(names, work_root, path, title=None):
    """The training curves of the cells ``names`` from their run folders under
    ``work_root``; writes the figure to ``path``.

    Table 1 cells: mean a_z and training loss per epoch (``<name>/history.jsonl``).
    Synthetic cells and parts: test accuracy against step, one curve per seed and
    condition (``<name>/results.json``; Snell Fig. 3), so the parts of a cell draw it
    whole. ``title`` None: "Training curves (mean over seeds)", or the first cell's.
    """
    kinds = {get_cell(name).kind for name in names}
    if kinds == {"synthetic"}:
        return _plot_synthetic(names, work_root, path, title)
    if kinds != {"table1"}:
        raise InputError(f"cells plot draws Table 1 cells or synthetic cells, one kind at a "
                         f"time; these are {', '.join(sorted(kinds))}", param="names")
    from minimal_attn.experiments.plots import plot_training_curves

    histories = {name: _read_lines(_run_file(work_root, name, "history.jsonl"))
                 for name in names}
    plot_training_curves(histories, path, title or "Training curves (mean over seeds)")
    return path


def _plot_synthetic(names, work_root, path, title):
    from minimal_attn.experiments.checkpoints import load_guarded, read_json
    from minimal_attn.experiments.plots import plot_synthetic_curves

    seeds = []
    for name in names:
        source = _run_file(work_root, name, "results.json")
        out = load_guarded(source, read_json, lambda o: None if isinstance(o, dict) and
                           "conditions" in o else "not a synthetic results.json",
                           what="results", fix="rerun the cell to rewrite it", prev=False)
        seeds += [s for c in out["conditions"].values() for s in c["seeds"]]
    cell = get_cell(names[0])
    plot_synthetic_curves(seeds, path, title or (cell.part or {}).get("title", cell.title))
    return path


def _run_file(work_root, name, file):
    source = os.path.join(work_root, name, file)
    if not os.path.isfile(source):
        raise InputError(f"cell {name} has no {file} in {work_root} ({source} is missing): "
                         "run it there first, or pass --work", param="work")
    return source


def _read_lines(source):
    with open(source) as f:
        try:
            return [json.loads(line) for line in f if line.strip()]
        except json.JSONDecodeError as err:
            raise InputError(f"{source} is not JSON lines ({err}); rerun the cell "
                             "to rewrite it") from None
