"""Option-parsing helpers shared by the ``attn-dyn`` commands (the CLI edge only)."""

import dataclasses
import inspect
import os
import shlex
import sys
import time

import click

from minimal_attn import PARADIGMS
from minimal_attn.errors import InputError, check_paradigms
from minimal_attn.experiments.progress import StatusLines

CONTEXT = {"help_option_names": ["-h", "--help"]}

#: What a command has kept if the user presses Ctrl-C now (printed by the group).
_NOTHING_WRITTEN = "nothing was written (results are written only when complete)"
_interrupt = {"note": _NOTHING_WRITTEN, "argv": []}


def on_interrupt(note):
    """Set the line the group prints after Ctrl-C (e.g. where checkpoints are, how to resume).

    ``note``: the text, or a function returning it when Ctrl-C comes (see :func:`resume_note`).
    """
    _interrupt["note"] = note


def threads_option(where="", then=""):
    """``--threads``: torch's CPU threads of the run (``where``: to what it applies)."""
    return click.option("--threads", type=int, default=None,
                        help=f"{where}torch CPU threads [default: torch's]; 1 is faster on a "
                             f"busy machine.{then}")


def interrupt_note():
    note = _interrupt["note"]
    return note() if callable(note) else note


def set_argv(argv):
    """The arguments of this ``attn-dyn`` invocation (the group records them; the note resets)."""
    _interrupt.update(argv=[str(a) for a in argv], note=_NOTHING_WRITTEN)


def resume_note(out, flag=None):
    """After Ctrl-C: what ``out`` keeps and the command that continues (``flag`` added).

    Evaluated when Ctrl-C comes: a run that had written nothing yet says so.
    """
    if out is None:
        return _NOTHING_WRITTEN
    if not any(files for _, _, files in os.walk(out)):
        return _NOTHING_WRITTEN
    argv = list(_interrupt["argv"])
    if flag and flag not in argv:
        argv.append(flag)
    return (f"the checkpoints and results written so far are kept in {out}; continue with: "
            "attn-dyn " + " ".join(shlex.quote(a) for a in argv))


class ProgressBar:
    """The one click adapter of the library's progress callback.

    ``bar(label, done, total, note)`` as :mod:`minimal_attn.experiments.progress`
    defines it: one click bar on stderr per task label, closed when the task is
    done or a new label comes, the note shown beside it. A bar opens at its first call, so
    a run refused while loading data prints only its error line. When stderr is not a
    terminal (a log, a pipe, a batch job) no bar is drawn: a plain status line goes there
    at most once a minute (:class:`~minimal_attn.experiments.progress.StatusLines`), so a
    short run prints nothing and a long one shows it is alive. Nothing at all when
    ``enabled`` is false. Use it as a context manager so that the last bar is closed.
    """

    REDRAW_SECONDS = 0.1           # a loop may report every step; the terminal need not redraw

    def __init__(self, enabled=True):
        terminal = sys.stderr.isatty()
        self.enabled = bool(enabled) and terminal
        self.lines = StatusLines() if enabled and not terminal else None
        self.bar, self.label, self.shown, self.note, self.drawn = None, None, 0, None, 0.0

    def __call__(self, label, done, total, note=None):
        if self.lines is not None:
            return self.lines(label, done, total, note)
        if not self.enabled or (self.bar is None and label == self.label
                                and done == self.shown):
            return                        # a finished task's last note: its bar is closed
        if self.bar is None or label != self.label or done < self.shown:
            self.close()
            self.label, self.shown, self.note, self.drawn = label, 0, None, 0.0
            self.bar = click.progressbar(length=max(int(total), 1), label=label,
                                         file=sys.stderr, show_pos=True,
                                         item_show_func=lambda text: text)
            self.bar.__enter__()
        self.note = self.note if note is None else note
        now = time.monotonic()
        if done < total and now - self.drawn < self.REDRAW_SECONDS:
            return                        # drawn at the next call (the note kept)
        self.bar.update(done - self.shown, self.note)
        self.shown, self.drawn = done, now
        if done >= total:
            self.close()                  # so that the library's next line starts clean

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def config(cls, **given):
    """``cls(**given)`` without the options left unset (None): the dataclass holds the defaults."""
    return cls(**{k: v for k, v in given.items() if v is not None})


def default(source, name):
    """The default of ``name`` in ``source`` (a config dataclass, or a library function's
    keyword), for click options and help texts: every default is written once, there."""
    if dataclasses.is_dataclass(source):
        field = {f.name: f for f in dataclasses.fields(source)}[name]
        value = field.default if field.default is not dataclasses.MISSING \
            else field.default_factory()
    else:
        value = inspect.signature(source).parameters[name].default
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) \
        if isinstance(value, (tuple, list)) else value


#: What ``--progress`` does off a terminal (:class:`ProgressBar`), in every command's help.
OFF_TERMINAL = "Not on a terminal (a log): a status line a minute."


def progress_option(help="A progress bar on stderr on a terminal."):
    """``--progress/--no-progress``, on by default: whether :class:`ProgressBar` draws."""
    return click.option("--progress/--no-progress", default=True, show_default=True,
                        help=f"{help} {OFF_TERMINAL}")


#: ``--device`` of every torch command, resolved by ``backends.devices.get_device``.
DEVICE_HELP = "Torch device: auto (cuda if torch sees a GPU, else cpu), cpu, cuda or cuda:K."


def device_option(default="auto", then=""):
    """``--device``: the same names and help in every command (``then``: a sentence after,
    e.g. to what it applies). ``default`` None (the config's, which is auto) shows as auto."""
    return click.option("--device", default=default, metavar="NAME",
                        show_default="auto" if default is None else True,
                        help=DEVICE_HELP + (f" {then}" if then else ""))


def parse_paradigms(text, allowed=PARADIGMS, option="--paradigm"):
    """Parse ``"all"`` or a comma list such as ``"sa,lv"`` into canonical names, once each."""
    return None if text is None else check_paradigms(str(text), allowed, name=option)


def parse_float_list(text, name):
    """Parse ``"0.1,0.2"`` into floats; raise InputError on anything else (None passes)."""
    if text is None:
        return None
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise InputError(
            f"{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise InputError(f"{name} is empty: give at least one number, e.g. 0.1,0.5")
    return values


def parse_lr(text):
    """``0.02`` (every paradigm) or ``sa=0.05,ha=0.01`` (per paradigm) -> dict."""
    out = {}
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        key, _, value = part.rpartition("=")
        key = key.strip().lower() or "all"
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--lr {text!r}: give a number or paradigm=number pairs, "
                             "e.g. sa=0.05,ha=0.01") from None
        if key in out:
            raise InputError(f"--lr {text!r} gives {'one number' if key == 'all' else key} "
                             "twice: give each paradigm once")
        out[key] = number
    if not out:
        raise InputError("--lr is empty: give a number or e.g. sa=0.05,ha=0.01")
    return out


def unused_warnings(paradigms, lr=None, switch_epoch=None, hybrid_lr=None,
                    hybrid_uses=("sa", "ha")):
    """One warning line for each option that the paradigms trained leave unused.

    ``lr``: the parsed ``--lr`` dict; the hybrid also reads the rates of
    ``hybrid_uses``. Unknown paradigm names are left to the library's refusal.
    """
    used = set(paradigms) | (set(hybrid_uses) if "hybrid" in paradigms else set())
    out = [f"warning: --lr {name}=... is unused: {name} is not trained (--paradigm "
           f"{','.join(paradigms)})" for name in PARADIGMS if name in (lr or {}) and
           name not in used]
    if "hybrid" not in paradigms:
        out += [f"warning: {option} is unused: it applies to the hybrid, which is not trained"
                for option, value in (("--switch-epoch", switch_epoch),
                                      ("--hybrid-lr", hybrid_lr)) if value is not None]
    return out


def echo_after(warnings):
    """:func:`echo_line` that prints ``warnings`` (stderr) before the run's first line.

    The library logs its first line only once every up-front check has passed,
    so a refused run still prints its one ``Error:`` line alone.
    """
    pending = list(warnings)

    def log(line):
        while pending:
            echo_line(pending.pop(0))
        echo_line(line)
    return log


def parse_switch(text):
    """``--switch-epoch``: None (default), ``"auto"`` or an epoch number."""
    if text is None or str(text).strip().lower() == "auto":
        return None if text is None else "auto"
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--switch-epoch must be an integer or auto, got {text!r}") from None


def echo_line(line):
    """Progress lines on stdout; warnings on stderr."""
    click.echo(line, err=line.startswith("warning:"))
