r"""A sweep's merged result set: its cells' records as one table, beside the paper's.

Vashisht & Ramaswamy (2023), Table 1, or Snell et al. (2021), Table 2
(:mod:`minimal_attn.experiments.sweep_table2`). :func:`write_merged` reads the records
of a grid's cells (``OUT/cells/NAME.json``, :mod:`minimal_attn.experiments.results_store`)
that match them and writes, in sorted cell order and without a date or a wall time, so that
the files are the same bit for bit whichever engine ran the cells and in
whatever order they finished:

* ``results.json``: each cell's settings, metrics per seed (mean, sample std)
  and the paper's numbers; the cells without a record under ``missing``;
* ``summary.csv``: one row a cell, fractions in [0, 1]; ``summary.md``: the
  Table 1 layout of ``attn-dyn train`` (percent, mean ± std over seeds) with
  the paper's test accuracy and SAIF beside ours (Table 2: our row of each
  cell, then the paper's);
* ``figures/table1.png``: test accuracy and SAIF per cell, the paper's marked
  (``figures/table2.png``: each column of Table 2, ours beside the paper's).

Provenance (commit, card, date, wall time) stays in each cell's record.
"""

import json
import os

from minimal_attn.experiments import plots
from minimal_attn.experiments.io import atomic_open, staged_folder, write_csv, write_text
from minimal_attn.experiments.sweep_cell import read_record, record_status
from minimal_attn.experiments.sweep_grid import OPERATIONAL
from minimal_attn.experiments.train_report import SUMMARY_HEADER, summary_rows

SPLITS, METRICS = ("train", "test"), ("accuracy", "saif")


def _entry(record):
    result = {k: v for k, v in record["result"].items() if k != "train_seconds"}
    return {"cell": record["cell"], "kind": record["kind"], "title": record["title"],
            "scale": record["scale"],
            "settings": record["settings"], "result": result, "paper": record.get("paper")}


def merged(out, cells):
    """``(entries, missing)``: the records under ``out`` of ``cells`` that match them (a
    failed cell's old, stale or damaged record is missing, not merged), sorted by name."""
    records = {c.name: read_record(out, c.name) for c in cells
               if record_status(out, c) == "done"}
    names = sorted(c.name for c in cells)
    return [_entry(records[n]) for n in names if n in records], \
        [n for n in names if n not in records]


def _as_aggregate(result):
    """A record's result in the form of ``attn-dyn train``'s results.json entries."""
    return {split: {k + s: result[split][k][key] for k in METRICS
                    for s, key in (("", "mean"), ("_std", "std"))} for split in SPLITS}


def summary_markdown(entries, missing):
    if any(e["kind"] == "table2" for e in entries):
        from minimal_attn.experiments.sweep_table2 import summary_lines

        lines = ["Sweep: Snell Table 2 rows (%; the paper's row under ours).", ""] + \
            summary_lines(entries)
        return "\n".join(lines + (["", "Not finished: " + ", ".join(missing) + "."]
                                  if missing else [])) + "\n"
    header = ["cell", "dataset", "seeds"] + SUMMARY_HEADER
    lines = ["Sweep: V&R Table 1 cells (mean ± std over seeds, %; the paper's test numbers "
             "beside ours).", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for e in entries:
        s = e["settings"]
        row = summary_rows({s["paradigm"]: _as_aggregate(e["result"])}, s["m"],
                           s["dataset"])[0]
        lines.append("| " + " | ".join(str(c) for c in [e["cell"], s["dataset"], s["seeds"]]
                                       + row) + " |")
    if missing:
        lines += ["", "Not finished: " + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


def _csv_rows(entries):
    header = ["cell", "dataset", "m", "paradigm", "protocol", "seeds"] + [
        f"{split}_{k}_{s}" for split in SPLITS for k in METRICS for s in ("mean", "std")] + \
        ["paper_test_accuracy_pct", "paper_test_saif_pct"]
    rows = []
    for e in entries:
        s, r, paper = e["settings"], e["result"], e["paper"] or {}
        rows.append([e["cell"], s["dataset"], s["m"], s["paradigm"], s["protocol"] or "",
                     s["seeds"]] + [r[split][k][x] for split in SPLITS for k in METRICS
                                    for x in ("mean", "std")]
                    + [paper.get("accuracy", ""), paper.get("saif", "")])
    return header, rows


def write_merged(out, cells, grid=None):
    """Write results.json, summary.csv, summary.md and the figure; return (entries, missing)."""
    entries, missing = merged(out, cells)
    # where the cells ran (data_dir, threads, ...) is not part of the result
    grid = {k: v for k, v in (grid or {}).items() if k not in OPERATIONAL}
    table2 = any(e["kind"] == "table2" for e in entries)
    if table2:
        from minimal_attn.experiments.sweep_table2 import csv_rows
    with staged_folder(out) as stage:         # the three files move in together
        with atomic_open(os.path.join(stage, "results.json"), "w") as f:
            json.dump({"format": 1, "grid": grid, "cells": entries, "missing": missing}, f,
                      indent=1, sort_keys=True)
            f.write("\n")
        write_csv(os.path.join(stage, "summary.csv"),
                  *(csv_rows(entries) if table2 else _csv_rows(entries)))
        write_text(os.path.join(stage, "summary.md"), summary_markdown(entries, missing))
    if table2:                                # the figure, drawn from them, after
        plots.plot_table2_rows(entries, os.path.join(out, "figures", "table2.png"))
    else:
        plots.plot_sweep_cells(entries, os.path.join(out, "figures", "table1.png"))
    return entries, missing
