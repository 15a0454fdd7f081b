r"""What a cell left in its run folder, read back after it ran.

:func:`run_cell <minimal_attn.experiments.cells.run_cell>` trains a cell in
``<work_root>/<name>/`` (checkpoints, ``history.jsonl``, ``results.json``, per-mosaic
predictions); its record in the results store keeps only the metrics. This module
draws the training curves from those folders (:func:`plot_cells`) and splits a
Table 1 cell's test scores by whether the foreground image was seen in training
(:func:`seen_scores`).
"""

import json
import os

from minimal_attn.errors import InputError
from minimal_attn.experiments import seen_images
from minimal_attn.experiments.cells import data_dir, get_cell
from minimal_attn.experiments.checkpoints import load_guarded, read_json


def plot_cells(names, work_root, path, title=None):
    """The training curves of the cells ``names`` from their run folders under
    ``work_root``; writes the figure to ``path``.

    Table 1 cells: mean a_z and training loss per epoch, test accuracy and SAIF at
    each evaluation (``<name>/history.jsonl``), one curve per cell: the named parts of
    a cell (``NAME@1 NAME@2``) are averaged together over all their seeds.
    Synthetic cells and parts: test accuracy against step, one curve per seed and
    condition (``<name>/results.json``; Snell Fig. 3), so the parts of a cell draw it
    whole. ``title`` None: "Training curves (mean over seeds)", or the first cell's.
    ``path`` ends in .png, .pdf or .svg (checked, with the folder, before anything is
    read).
    """
    from minimal_attn.experiments.plots._base import check_figure_path

    kinds = {get_cell(name).kind for name in names}
    check_figure_path(path, param="path")
    if kinds == {"synthetic"}:
        return _plot_synthetic(names, work_root, path, title)
    if kinds != {"table1"}:
        raise InputError(f"cells plot draws Table 1 cells or synthetic cells, one kind at a "
                         f"time; these are {', '.join(sorted(kinds))}", param="names")
    from minimal_attn.experiments.plots import plot_training_curves

    histories = {}       # the parts of a cell hold different seeds: one curve over all
    for name in names:
        histories.setdefault(name.split("@")[0], []).extend(
            _read_lines(_run_file(work_root, name, "history.jsonl")))
    plot_training_curves(histories, path, title or "Training curves (mean over seeds)")
    return path


def seen_scores(name, data_root, work_root="runs/cells"):
    """The test scores of Table 1 cell (or part) ``name`` over the test foregrounds seen
    and not seen in training (:func:`.seen_images.from_run` of its run folder under
    ``work_root``; ``data_root`` as for :func:`run_cell`): for a cell tested on mosaics
    of training images (``released``), also one run before its record kept them."""
    cell = get_cell(name)
    if cell.kind != "table1" or not cell.data or "paradigm" not in cell.settings:
        raise InputError(f"cell {name} is not a CIFAR Table 1 cell: only those test on "
                         "mosaics of images", param="names")
    _run_file(work_root, name, "results.json")
    return seen_images.from_run(os.path.join(work_root, name), data_dir(cell, data_root))[
        cell.settings["paradigm"]]


def _plot_synthetic(names, work_root, path, title):
    from minimal_attn.experiments.plots import plot_synthetic_curves

    seeds = []
    for name in names:
        source = _run_file(work_root, name, "results.json")
        out = load_guarded(source, read_json, _synthetic_problem, what="results",
                           fix="rerun the cell to rewrite it", prev=False)
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


def _synthetic_problem(out):
    """Why ``out`` is not a synthetic cell's results.json as the figure reads it, or None."""
    if not isinstance(out, dict) or not isinstance(out.get("conditions"), dict) or not all(
            isinstance(c, dict) and isinstance(c.get("seeds"), list) and all(
                isinstance(s, dict) and all(k in s for k in ("condition", "step", "accuracy"))
                for s in c["seeds"]) for c in out["conditions"].values()):
        return "not a synthetic results.json (conditions with their seeds' curves)"
    return None


#: The numbers of a history line the Table 1 curves draw (None where not scored).
CURVES = ("mean_a_z", "loss", "test_accuracy", "test_saif")


def _read_lines(source):
    """The epoch records of a Table 1 run's ``history.jsonl``: one JSON object a line,
    each with its integer ``epoch`` and numbers (or null) for :data:`CURVES`."""
    try:
        with open(source, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        why = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else str(err)
        raise InputError(f"{source} is not JSON lines ({why}); rerun the cell "
                         "to rewrite it") from None
    for number, line in enumerate(lines, 1):
        if not isinstance(line, dict) or type(line.get("epoch")) is not int or not all(
                line.get(k) is None or type(line[k]) in (int, float) for k in CURVES):
            raise InputError(f"{source} is not a training history (record {number} is not "
                             "an object with an integer epoch and numbers for "
                             f"{', '.join(CURVES)}); rerun the cell to rewrite it")
    return lines
