r"""Which command's run an output folder holds, checked before a command writes into it.

Every command that trains into ``--out`` (``train``, ``synthetic``, ``train-seq``,
``agreement``) reads back and writes over files of its own names there (``ode`` and
``fixed-focus`` replace the set of files of their last run there); two commands
share some names (``results.json``, ``config.json``, ``checkpoints/``), so one
pointed at another's folder would replace that run's results with its own.
:func:`check_run_folder` refuses such a folder in one line, with or without resume,
before anything is read or written; every command's library call runs it
(``run_table1``, ``run_synthetic``, ``train_one``, ``run_agreement``).

A run is known by the files only its command writes (:data:`MARKS`; folders made
before this check existed are recognised too), and a ``results.json`` by its keys.
"""

import glob
import json
import os

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import check_new_run, check_output_dir, staged_folder

#: command -> paths (relative to the run folder; glob patterns) that only its runs write
MARKS = {
    "train": ("history.jsonl", "checkpoints/*_seed*.ckpt*", "instances_*_seed*.npz"),
    "synthetic": ("checkpoints/train.ckpt*", "checkpoints/head_pool.ckpt*", "head_pool.json"),
    "train-seq": ("checkpoint.pt*", "history.json", "eval_*.npz"),
    "agreement": ("agreement.json", "proxy.npz", "logistic.npz",
                  *(f"runs/{model}/history.json" for model in
                    ("standard", "second", "uniform", "frozen"))),
    "sweep": ("sweep.json",),
    # these two write their files as one set, which replaces the set of their last run
    "ode": ("ode_*.csv", "ode.png"),
    "fixed-focus": ("fixed_focus_*.csv", "fixed_focus_losses.png", "focus_incentives.png"),
}


def _results_command(out):
    """The command whose ``results.json`` ``out`` holds, by its keys (None: none, unknown)."""
    try:
        with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, ValueError):
        return None
    if isinstance(results, dict) and {"task", "conditions"} <= results.keys():
        return "synthetic"
    return None


def run_commands(out):
    """``{command: a file that shows it}`` for each command whose run ``out`` holds."""
    found = {}
    for command, patterns in MARKS.items():
        for pattern in patterns:
            hits = sorted(glob.glob(os.path.join(glob.escape(out), pattern)))
            if hits:
                found[command] = os.path.relpath(hits[0], out)
                break
    by_results = _results_command(out)       # a synthetic run whose checkpoints were deleted
    if by_results is not None:
        found.setdefault(by_results, "results.json")
    return found


def check_output_set(out, command, param="out"):
    """Before computing: ``out`` is writable and holds no run of a command other than
    ``command`` (``ode``, ``fixed-focus``, ``sweep``)."""
    check_output_dir(out, param)
    check_run_folder(out, command, param=param)


def replacing_set(out, command, param="out"):
    """:func:`.io.staged_folder` of ``command`` (``ode``, ``fixed-focus``), whose files move
    into ``out`` as one set replacing its last run's (:data:`MARKS`), in a folder that
    holds no other command's run."""
    check_run_folder(out, command, param=param)
    return staged_folder(out, param, replaces=MARKS[command])


def check_run_folder(out, command, resume=None, param="out"):
    """Refuse ``out`` when it holds a run of a command other than ``command``.

    ``resume``: None checks only that; True or False (a command with ``--resume``) also
    refuses a fresh run into a folder that holds a run of its own
    (:func:`.io.check_new_run`). Nothing is created; a folder that does not exist passes.
    """
    if out is None or not os.path.isdir(out):
        return
    out = os.fspath(out)
    for other, shown in run_commands(out).items():
        if other != command:
            raise InputError(f"{out} holds an attn-dyn {other} run ({shown}), not a {command} "
                             f"run: give {command} another --out (it would write over that "
                             "run's files)", param=param)
    if resume is not None:
        check_new_run(out, resume)
