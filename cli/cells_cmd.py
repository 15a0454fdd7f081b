r"""``attn-dyn cells``: paper-size experiments cut into cells, and the results store.

Lists the cells with their expected time per card, runs cells into
``results/cells/<name>.json`` (:func:`minimal_attn.experiments.cells.run_cell`) and
regenerates ``results/README.md`` and the README's results block from the
records (:func:`minimal_attn.experiments.results_store.write_report`).
"""

import json
import os
import sys

import click

from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    default,
    device_option,
    on_interrupt,
    progress_option,
    resume_note,
)
from minimal_attn.experiments import cell_costs as costs
from minimal_attn.experiments import cell_views
from minimal_attn.experiments import cells as lib
from minimal_attn.experiments.results_store import code_source, read_cells, write_report
from minimal_attn.experiments.train_loop import COMPILE_MODES, CONV_MODES

RESULTS, WORK = default(lib.run_cell, "results_dir"), default(lib.run_cell, "work_root")
README = "README.md"         # the repository's README, whose results block is generated


@click.group(context_settings=CONTEXT)
def cells():
    """Paper-size experiments as cells that each fit one short GPU job.

    A cell is one data set, m, protocol and paradigm of V&R Table 1 with all
    its seeds, one Snell Table 2 row, or one synthetic figure. Each finished
    cell writes results/cells/NAME.json with its metrics per seed and its
    provenance; `attn-dyn cells report` regenerates the tables from them.
    benchmarks/gpu_cells.sh runs cells on a GPU machine within a time budget.

    \b
    Examples:
      attn-dyn cells list --card h100
      attn-dyn cells run tiny-t1-synthetic-sa
      attn-dyn cells run t1-cifar10-m5-authors-sa --data-root DATA --device cuda
      attn-dyn cells import cells_results.tar.gz   # what a GPU job returned
      attn-dyn cells seen cpu-t1-cifar10-m5-released-sa --data-root DATA
      attn-dyn cells report
    """


@cells.command("list")
@click.option("--card", type=click.Choice(sorted(costs.CARDS)), default=None,
              help="Show the expected minutes on this card only [default: every card].")
@click.option("--json", "as_json", is_flag=True, help="Print the cells as JSON.")
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=RESULTS,
              show_default=True, help="The results store the status column reads.")
def list_cells(card, as_json, results_dir):
    """Every cell in run order: scale, data folder, parts, expected minutes per card and
    its status in the results store.

    A cell with parts runs as NAME@1 .. NAME@K, each a block of its seeds in one
    job (the multi-head cell's first parts screen its candidate heads); its minutes
    are those of its longest part, alone on the card (for a stop rule, the epochs a
    finished cell of the same recipe took, with a margin, or else an upper bound: every
    seed counted to its last epoch). Status: done, k/K parts
    (complete), partial (cut short by a time limit, or begun) or - (not run).
    """
    cards = [card] if card else sorted(costs.CARDS)
    _note_if_no_store(results_dir)
    records, catalogue = read_cells(results_dir), lib.all_cells()
    rows = []
    for cell in catalogue.values():
        pieces = lib.parts(cell)
        rows.append({"cell": cell.name, "kind": cell.kind, "scale": cell.scale,
                     "data": cell.data or "-", "parts": cell.parts, "title": cell.title,
                     "minutes": {c: max(lib.expected_seconds(p, c, records, catalogue)
                                        for p in pieces) / 60 for c in cards},
                     "minutes_whole": {c: lib.expected_seconds(cell, c, records,
                                                               catalogue) / 60
                                       for c in cards},
                     "status": lib.status(cell.name, results_dir)})
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    width = max(len(r["cell"]) for r in rows)
    click.echo(f"{'cell':{width}s} {'scale':5s} {'data':13s} {'parts':>5s} " + " ".join(
        f"{c + ' min':>9s}" for c in cards) + "  status  (minutes: longest part; over a job: *)")
    for r in rows:
        click.echo(f"{r['cell']:{width}s} {r['scale']:5s} {r['data']:13s} {r['parts']:5d} "
                   + " ".join(
            f"{r['minutes'][c]:8.1f}{'*' if r['minutes'][c] * 60 > costs.JOB_SECONDS else ' '}"
            for c in cards) + f"  {r['status']}")


def _note_if_no_store(results_dir):
    """One line on stderr when ``results_dir`` holds no store (run outside the checkout, the
    default ./results is missing): otherwise every cell silently reads as not run."""
    if not os.path.isdir(os.path.join(results_dir, "cells")):
        shown = results_dir if os.path.isabs(results_dir) or results_dir.startswith(".") \
            else os.path.join(".", results_dir)
        click.echo(f"note: no results store at {shown} (no cells/ in it): pass --results DIR "
                   "(the checkout's results/)", err=True)


@cells.command("run")
@click.argument("names", nargs=-1, required=True)
@click.option("--data-root", type=click.Path(), default=None,
              help="Folder holding each cell's data folder (cifar10, cifar10-full, "
                   "hatexplain, sst2, multi30k).")
@click.option("--results", "results_dir", type=click.Path(file_okay=False),
              default=RESULTS, show_default=True, help="The results store.")
@click.option("--work", "work_root", type=click.Path(file_okay=False), default=WORK,
              show_default=True, help="Each cell's run folder (checkpoints; a rerun resumes).")
@device_option(default(lib.run_cell, "device"))
@click.option("--time-limit", type=float, default=None,
              help="Seconds of training per CNN FCAM, Table 2 or synthetic cell: it ends "
                   "at the next epoch end (the others: evaluation), is evaluated as it "
                   "stands and its record says time_limited (partial).")
@click.option("--compile", "compile_mode", type=click.Choice(COMPILE_MODES),
              default=default(lib.run_cell, "compile"), show_default=True,
              help="How each seed-batched step runs: eagerly (none), through "
                   "torch.compile (CNN FCAM cells), or captured whole in a CUDA graph "
                   "(cudagraph, CUDA only; synthetic cells check the graph against an eager "
                   "step and go on eagerly if it differs).")
@click.option("--conv-mode", type=click.Choice(CONV_MODES), default=None,
              help="CNN FCAM cells: how the seeds' convolutions run (loop, grouped, "
                   "grouped_nchw, unfold; `attn-dyn train --help`) [default: grouped_nchw "
                   "on CUDA, loop on the CPU].")
@progress_option()
def run_cells(names, data_root, results_dir, work_root, device, time_limit, compile_mode,
              conv_mode, progress):
    """Run the cells NAMES in order; each writes results/cells/NAME.json.

    A part NAME@K trains the K-th block of the cell's seeds (`attn-dyn cells
    list` gives each cell's parts); the tables join a cell's parts into one row.
    """
    for name in names:
        lib.get_cell(name)                       # refuse an unknown name before any work
    source = code_source()      # this process runs the code it loaded now, for every cell
    on_interrupt(lambda: resume_note(work_root))   # the same command continues from checkpoints
    for name in names:            # (run_cell checks --results and --work before it trains)
        with ProgressBar(progress) as bar:
            record = lib.run_cell(name, data_root, results_dir, work_root, device,
                                  log=lambda line: click.echo(line, err=True),
                                  command=["attn-dyn", *sys.argv[1:]], time_limit=time_limit,
                                  compile=compile_mode, conv_mode=conv_mode, source=source,
                                  progress=bar)
        p = record["provenance"]
        click.echo(f"{name}: done in {p['wall_seconds']} s on {p['card']}; wrote "
                   f"{results_dir}/cells/{name}.json")


@cells.command("plot")
@click.argument("names", nargs=-1, required=True)
@click.option("--work", type=click.Path(file_okay=False), default=WORK,
              show_default=True, help="The folder holding each cell's run folder.")
@click.option("--out", "path", type=click.Path(dir_okay=False), required=True,
              help="The figure to write (.png, .pdf or .svg).")
@click.option("--title", default=None,
              help="The figure's title [default: 'Training curves (mean over seeds)' for "
                   "Table 1 cells, the cell's title for synthetic ones].")
def plot(names, work, path, title):
    """Plot the training curves of the cells NAMES from their run folders.

    Table 1 cells: mean training a_z and loss per epoch, test accuracy and SAIF where
    the test set was scored, one curve per cell.
    Synthetic cells: test accuracy against step, one curve per seed and condition
    (Snell Fig. 3). Name the parts of a cell (permute-copy@1 permute-copy@2) to draw
    all its seeds.
    """
    cell_views.plot_cells(names, work, path, title)       # checks the figure's path first
    click.echo(f"wrote {path}")


@cells.command("seen")
@click.argument("names", nargs=-1, required=True)
@click.option("--data-root", type=click.Path(file_okay=False), required=True,
              help="Folder holding each cell's data folder (cifar10, cifar10-full).")
@click.option("--work", type=click.Path(file_okay=False), default=WORK,
              show_default=True, help="The folder holding each cell's run folder.")
def seen(names, data_root, work):
    """Test accuracy and SAIF over the test foregrounds seen and not seen in training.

    For the cells that test on new mosaics of the training images, as the authors'
    released notebooks do (t1-cifar10-m5-released-*, cpu-t1-cifar10-m5-released-*):
    their test mosaics are rebuilt from the data folder and split by whether the
    foreground image is also a training mosaic's foreground. Run folders written before
    per-mosaic predictions were kept give SAIF only.
    """
    from minimal_attn.experiments.seen_images import summary_lines

    for name in names:
        scores = cell_views.seen_scores(name, data_root, work)
        paradigm = lib.get_cell(name).settings["paradigm"]
        click.echo(f"{name}:\n" + summary_lines({paradigm: scores}))


@cells.command("import")
@click.argument("source", type=click.Path())
@click.option("--results", "results_dir", type=click.Path(file_okay=False),
              default=RESULTS, show_default=True, help="The results store.")
def import_cells(source, results_dir):
    """Copy the records a GPU job returned (SOURCE: its cells_results.tar.gz, or a
    folder of records) into the store.

    Every record is checked before any is written (each must be a record of its
    catalogue cell, each cell once); a record already in the store is kept when the
    incoming one is partial and it is complete, or partial and trained further (more
    epochs or steps in all), or when both are complete and the one here was made later.
    Then run `attn-dyn cells report` to regenerate the tables.
    """
    from minimal_attn.experiments.results_import import import_records

    for name, what in import_records(source, results_dir):
        click.echo(f"{name}: {what}")
    click.echo("next: attn-dyn cells report")


@cells.command("report")
@click.option("--results", "results_dir", type=click.Path(file_okay=False),
              default=RESULTS, show_default=True, help="The results store.")
@click.option("--readme", type=click.Path(dir_okay=False), default=README,
              show_default=True, help="The README whose results block to rewrite.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 if a page is out of date with the records.")
def report(results_dir, readme, check):
    """Regenerate results/README.md and the README's results block from the records."""
    stale = write_report(results_dir, readme, check=check)   # refuses a folder without cells/
    if check:
        if stale:
            click.echo("out of date: " + ", ".join(stale) + " (run attn-dyn cells report)")
            sys.exit(1)
        click.echo("results pages match the records")
    else:
        click.echo("rewrote " + ", ".join(stale) if stale else "already up to date")
