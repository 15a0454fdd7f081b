"""The ``attn-dyn`` click group.

Each subcommand lives in its own module and is imported only when it runs, so
``attn-dyn ode`` never pays for importing torch. Every error a user can cause
(a bad value, a missing file, an unwritable output, a run too big for the
machine) becomes one line on stderr and exit status 2; Ctrl-C becomes one line
saying what was kept, and exit status 130. SIGTERM (``kill``, a Slurm time limit or
preemption) is taken as Ctrl-C is: the half-written temporary file is removed, the
checkpoints stay, and the line says how to continue; exit status 143.
"""

import contextlib
import importlib
import re
import signal
import sys
import threading

import click

from minimal_attn import __version__
from minimal_attn.cli.options import interrupt_note, set_argv
from minimal_attn.errors import InputError

#: The commands by paper: name -> ("module:function" under minimal_attn.cli, short help).
#: The group's --help lists exactly these (no command is hidden, none is routed).
SECTIONS = {
    "Paper 1, Vashisht & Ramaswamy (2023), focus-classify attention models": {
        "ode": ("ode_cmd:ode", "closed-form gradient-flow ODEs (Theorems 1-2, Figure 4)"),
        "fixed-focus": ("fixed_focus_cmd:fixed_focus",
                        "fixed-focus loss and incentive curves (Figures 2-3)"),
        "train": ("train_cmd:train", "train FCAMs with sa/ha/lv/hybrid on mosaics or "
                  "HateXplain: accuracy and SAIF (Table 1)"),
        "train-text": ("train_cmd:train_text", "alias of train --dataset hatexplain "
                       "(Table 1's HateXplain rows)"),
    },
    "Paper 2, Snell et al. (2021), approximating single-head attention": {
        "ibm1": ("text_cmd:ibm1", "IBM Model 1 EM on a parallel corpus"),
        "proxy": ("text_cmd:proxy",
                  "bag-of-words proxy model and its agreement with IBM Model 1"),
        "train-seq": ("seq_train_cmd:train_seq",
                      "one LSTM translation or classification model with attention"),
        "agreement": ("agreement_cmd:agreement", "the agreement table (Table 2) of one data set"),
        "synthetic": ("synthetic_cmd:synthetic",
                      "copy, permutation, multi-head and keyword tasks"),
    },
    "Both papers": {
        "cells": ("cells_cmd:cells",
                  "paper-size experiments in short GPU jobs; the results store"),
        "sweep": ("sweep_cmd:sweep", "grids of Table 1 cells or Table 2 rows: here, Ray or Slurm"),
    },
}
COMMANDS = {name: target for section in SECTIONS.values()
            for name, (target, _) in section.items()}

#: Optional packages a command may import when it runs -> how to install them. A command
#: that finds one missing ends in one line saying so, not in an import traceback.
OPTIONAL_PACKAGES = {
    "torch": "pip install torch==2.13.0 (the CPU build; an unpinned torch pulls CUDA)",
    "cupy": "pip install \".[cupy]\" on a machine with an NVIDIA GPU",
    "ray": "pip install \".[ray]\"",
    "submitit": "pip install \".[slurm]\"",
    "sentencepiece": "pip install \".[text]\"",
    "sacrebleu": "pip install \".[text]\"",
}


class AttnDynGroup(click.Group):
    """A group that loads subcommands lazily and keeps errors to one line."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def format_commands(self, ctx, formatter):
        """The commands by paper, each with its short help (without importing any)."""
        for title, section in SECTIONS.items():
            with formatter.section(title):
                formatter.write_dl([(name, text) for name, (_, text) in section.items()])

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        self.running = getattr(importlib.import_module(f"minimal_attn.cli.{module}"), attr)
        return self.running

    def invoke(self, ctx):
        """The command; Ctrl-C and SIGTERM in it pass click's own handling (a bare line on
        stderr before its Abort) as :class:`_StoppedError`, for :meth:`main`'s one line."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _StoppedError() from exc

    def main(self, args=None, prog_name=None, complete_var=None,
             standalone_mode=True, **extra):
        set_argv(sys.argv[1:] if args is None else args)
        term = {"received": False}
        try:
            with sigterm_as_interrupt(term):
                rv = super().main(args, prog_name, complete_var,
                                  standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:  # usage errors, bad option values
            _fail(exc.format_message(), exc.exit_code)
        except InputError as exc:
            _fail(_as_option(exc, getattr(self, "running", None)), 2)
        except ModuleNotFoundError as exc:
            package = (exc.name or "").split(".")[0]
            if package not in OPTIONAL_PACKAGES:
                raise
            name = getattr(getattr(self, "running", None), "name", None) or "this command"
            _fail(f"{name} needs {package}, which is not installed: "
                  f"{OPTIONAL_PACKAGES[package]}", 2)
        except (_StoppedError, KeyboardInterrupt):
            _interrupted(term["received"])
        except click.Abort as exc:
            # click turns Ctrl-C (KeyboardInterrupt) into Abort; keep it apart from EOF
            if isinstance(exc.__cause__, KeyboardInterrupt):
                _interrupted(term["received"])
            _fail("aborted", 1)
        sys.exit(rv if isinstance(rv, int) else 0)


@contextlib.contextmanager
def sigterm_as_interrupt(term):
    """Within the block SIGTERM raises KeyboardInterrupt, so that it takes Ctrl-C's paths
    (temporary files removed, checkpoints kept, worker processes stopped) instead of
    ending the process on the spot; ``term["received"]`` records that it came. A second
    SIGTERM while those paths run is ignored: the first one's clean-up finishes. Only in
    the main thread (Python delivers signals there); the previous handler comes back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        term["received"] = True
        raise KeyboardInterrupt("SIGTERM")
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:        # None: set outside Python, which cannot be put back; the default instead
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


class _StoppedError(Exception):
    """Ctrl-C or SIGTERM inside a command, carried past click to :meth:`AttnDynGroup.main`."""


def _interrupted(by_sigterm):
    """Ctrl-C: status 130; SIGTERM: 143 (128 + the signal), each with what was kept. On a
    terminal the line starts on a line of its own (after the ``^C`` the terminal echoed)."""
    if sys.stderr.isatty():
        click.echo(err=True)
    if by_sigterm:
        _fail("terminated (SIGTERM); " + interrupt_note(), 128 + signal.SIGTERM)
    _fail("interrupted; " + interrupt_note(), 130)


def _as_option(exc, command=None):
    """The message with each library parameter (``n_classes``) written as its option.

    The option is the one of ``command`` that fills that parameter (``--classes``
    fills ``n_classes``), else the parameter spelled as an option (``--n-train``).
    """
    message, params = str(exc), getattr(exc, "param", None)
    given = list(getattr(command, "params", ()))
    if isinstance(command, click.Group):          # `cells run`: the subcommands' options
        given += [p for sub in command.commands.values() for p in sub.params]
    options = {p.name: max(p.opts, key=len) for p in given if isinstance(p, click.Option)}
    for param in ([params] if isinstance(params, str) else list(params or ())):
        option = options.get(param, "--" + param.replace("_", "-"))
        if not re.search(rf"{re.escape(option)}(?![\w\-])", message):
            # the bare word only: not inside a path (out/x.tsv), a quoted path ('out'), a
            # longer name (t_max_) or a count (1e+12 steps)
            message = re.sub(rf"(?<![\w\-/.\\'\"])(?<!\d ){re.escape(param)}"
                             rf"(?![\w\-/\\'\"]|\.\w)", option, message)
    return message


def _fail(message, code):
    """Print a single-line error to stderr and exit with ``code``."""
    click.echo("Error: " + " ".join(str(message).split()), err=True)
    sys.exit(code)


def run_script(main):
    """Run a benchmark script's ``main()`` as a command runs: bad input
    (:class:`InputError`) ends in one line ``Error: ...`` on stderr and exit status 2,
    without a traceback; otherwise ``main``'s return value is the exit status."""
    try:
        status = main()
    except InputError as exc:
        _fail(_as_option(exc), 2)
    sys.exit(status)


@click.group(cls=AttnDynGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="attn-dyn")
def cli():
    """attn-dyn: study how attention learns.

    Every command takes --help. Bad input ends in one line `Error: ...` and exit
    status 2; Ctrl-C in one line saying what was kept, and exit status 130 (SIGTERM,
    from kill or a scheduler: the same line, and 143).
    """


def main():
    """Console-script entry point."""
    cli.main(prog_name="attn-dyn")


if __name__ == "__main__":
    main()
