r"""``attn-dyn sweep``: a grid of Table 1 cells, in this process, on Ray or on Slurm.

Parses the grid and the engine's options and calls
:func:`minimal_attn.experiments.sweep.run_sweep`; docs/sweeps.md has the details.
"""

import sys

import click

from minimal_attn.cli.options import CONTEXT, default, device_option, on_interrupt
from minimal_attn.errors import InputError
from minimal_attn.experiments.sweep import run_sweep, stored_grid
from minimal_attn.experiments.sweep_engines import ENGINES, make_engine
from minimal_attn.experiments.sweep_grid import expand, parse_tokens, read_grid_file


@click.command(context_settings=CONTEXT)
@click.argument("settings", nargs=-1)
@click.option("--grid", "grid_tokens", multiple=True, metavar="KEY=V1,V2",
              help="A setting of `attn-dyn train` and its values (comma-separated values "
                   "are crossed; paradigm=all gives sa, ha, lv, hybrid); with table=2 the "
                   "settings of `attn-dyn agreement` (Snell Table 2 rows). Further "
                   "KEY=VALUES words after it count too. Give each key once: m=3,5, not "
                   "m=3 m=5 (refused).")
@click.option("--grid-file", type=click.Path(dir_okay=False), default=None,
              help="A TOML file of settings: `m = [5, 20]`; --grid settings win over it.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="The sweep folder: cells/NAME/ and cells/NAME.json per cell, the merged "
                   "results.json, summary.csv/.md, figures/.")
@click.option("--resume", is_flag=True,
              help="Continue the sweep in --out (its grid unless one is given); finished "
                   "cells are skipped and the others resume from their checkpoints.")
@click.option("--engine", type=click.Choice(ENGINES), default=default(run_sweep, "engine"),
              show_default=True,
              help="local: in this process, one cell after another; ray: one Ray task a "
                   "cell (pip install \".[ray]\"); slurm: one submitit job a cell "
                   "(pip install \".[slurm]\").")
@click.option("--threads", type=int, default=None,
              help="torch CPU threads of each cell (the grid key threads) [default: torch's].")
@device_option(None, then="For every cell (the grid key device).")
@click.option("--data-dir", type=click.Path(), default=None,
              help="CIFAR folder of every cell (the grid key data_dir); on a cluster it must "
                   "be visible from the workers, like --out.")
@click.option("--retries", type=int, default=default(run_sweep, "retries"), show_default=True,
              help="ray, slurm: times a cell whose worker died is run again (from its "
                   "checkpoint).")
@click.option("--max-running", type=int, default=None,
              help="ray, slurm: cells running at once [default: ray: the cluster's CPUs / "
                   "--cpus-per-cell; slurm: 256; slurm --cluster local: 2].")
@click.option("--cells-per-job", type=int, default=default(make_engine, "cells_per_job"),
              show_default=True,
              help="ray, slurm: cells run one after another in one task or job (short "
                   "cells waste less time starting Python and torch).")
@click.option("--cpus-per-cell", type=float, default=default(make_engine, "cpus_per_cell"),
              show_default=True)
@click.option("--gpus-per-cell", type=float, default=default(make_engine, "gpus_per_cell"),
              show_default=True,
              help="ray: GPUs requested per task (fractions allowed); slurm: GPUs per job.")
@click.option("--address", default=None,
              help="ray: the cluster to join (e.g. auto, ray://HOST:10001) [default: start "
                   "a local Ray].")
@click.option("--num-cpus", type=int, default=None,
              help="ray: CPUs of the local Ray it starts [default: all].")
@click.option("--cluster", type=click.Choice(["slurm", "local"]),
              default=default(make_engine, "cluster"), show_default=True,
              help="slurm: submit to Slurm; local: submitit's local executor (each cell a "
                   "local process; for tests).")
@click.option("--partition", default=None, help="slurm: the partition.")
@click.option("--time", "time_min", type=int, default=default(make_engine, "time_min"),
              show_default=True,
              help="slurm: minutes per job (a job that runs out is requeued and resumes).")
@click.option("--account", default=None, help="slurm: the account to charge.")
@click.option("--retrain-other-data", is_flag=True,
              help="Train anew a finished cell (or Table 2 row) whose record names other "
                   "data than this run's (another --data-dir), its old record and folder set "
                   "aside in OUT/other-data/ [default: such a rerun is refused in one line].")
@click.option("--list", "list_only", is_flag=True,
              help="Print the cells of the grid and exit (nothing is run or written).")
def sweep(settings, grid_tokens, grid_file, out, resume, engine, threads, device, data_dir,
          retries, max_running, cells_per_job, cpus_per_cell, gpus_per_cell, address,
          num_cpus, cluster, partition, time_min, account, retrain_other_data, list_only):
    """Run a grid of V&R Table 1 cells (or Snell Table 2 rows) and merge them.

    Each cell is one data set, m and paradigm (and any other setting of the
    grid) with all its seeds, trained by `attn-dyn train`'s library call; with
    table=2 a cell is one row of `attn-dyn agreement`. A
    cell whose record exists and matches is skipped; the others resume from
    their checkpoints. One line per finished cell; the exit status is 1 if a
    cell failed (after every other cell ran).

    \b
    Examples:
      attn-dyn sweep --grid dataset=synthetic m=3,5 paradigm=all seeds=2 \\
          epochs=2 n_train=200 n_test=100 --threads 1 --out runs/sweep
      attn-dyn sweep --grid dataset=cifar10 m=5,20 paradigm=all protocol=authors \\
          --data-dir DATA --engine ray --gpus-per-cell 1 --out runs/t1
      attn-dyn sweep --grid-file grid.toml --engine slurm --partition gpu \\
          --gpus-per-cell 1 --time 120 --out /shared/runs/t1
      attn-dyn sweep --grid table=2 dataset=sst2 seed=0,1 --data-dir DATA/sst2 \\
          --out runs/t2
      attn-dyn sweep --out runs/t1 --resume      # after the driver was killed
    """
    grid = parse_tokens(list(grid_tokens) + list(settings),
                        read_grid_file(grid_file) if grid_file else {})
    options = {k: [v] for k, v in (("threads", threads), ("device", device),
                                   ("data_dir", data_dir)) if v is not None}
    if not grid:
        if not resume:
            raise InputError("no grid: give settings (--grid m=5,20 paradigm=all ...), "
                             "--grid-file FILE, or --resume to continue the sweep in --out",
                             param="grid")
        grid = stored_grid(out, options)          # the options win over the stored grid
    for key, value in options.items():          # but an option and its grid key: which?
        if grid.get(key, value) != value:
            raise InputError(f"--{key.replace('_', '-')} {value[0]} and the grid key "
                             f"{key}={','.join(map(str, grid[key]))} disagree: give it once")
    grid.update(options)
    if list_only:
        for cell in expand(grid):
            click.echo(cell.name)
        return
    common = dict(cpus_per_cell=cpus_per_cell, gpus_per_cell=gpus_per_cell,
                  max_running=max_running, cells_per_job=cells_per_job)
    options = {"ray": dict(common, address=address, num_cpus=num_cpus),
               "slurm": dict(common, cluster=cluster, partition=partition, time_min=time_min,
                             account=account)}.get(engine, {})
    on_interrupt(f"finished cells are kept in {out}/cells and the others have checkpoints: "
                 "rerun with --resume")
    report = run_sweep(out, grid, engine, resume, options, retries, log=click.echo,
                       command=["attn-dyn", *sys.argv[1:]],
                       retrain_other_data=retrain_other_data)
    if report["failed"]:
        click.echo(f"{len(report['failed'])} of {len(report['cells'])} cells failed: "
                   + ", ".join(sorted(report["failed"])), err=True)
        sys.exit(1)
