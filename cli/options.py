"""Option-parsing helpers shared by the ``attn-dyn`` commands (the CLI edge only)."""

import contextlib
import dataclasses
import os
import shlex
import sys

import click

from minimal_attn import PARADIGMS
from minimal_attn.errors import InputError, check_paradigm

CONTEXT = {"help_option_names": ["-h", "--help"]}

#: What a command has kept if the user presses Ctrl-C now (printed by the group).
_NOTHING_WRITTEN = "nothing was written (results are written only when complete)"
_interrupt = {"note": _NOTHING_WRITTEN, "argv": []}


def on_interrupt(note):
    """Set the line the group prints after Ctrl-C (e.g. where checkpoints are, how to resume).

    ``note``: the text, or a function returning it when Ctrl-C comes (see :func:`resume_note`).
    """
    _interrupt["note"] = note


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


@contextlib.contextmanager
def progressbar(length, label, **kwargs):
    """Yield ``update(n)`` for a library's progress callback.

    The click bar on stderr opens at the first update, so a run refused while
    loading data prints only its error line; when stderr is not a terminal (a
    log, a pipe) nothing is drawn at all.
    """
    if not sys.stderr.isatty():
        yield lambda n=1, *a: None
        return
    with contextlib.ExitStack() as stack:
        bars = []

        def update(n=1, *args):
            if not bars:
                bars.append(stack.enter_context(click.progressbar(
                    length=length, label=label, file=sys.stderr, **kwargs)))
            bars[0].update(n, *args)

        yield update


def config(cls, **given):
    """``cls(**given)`` without the options left unset (None): the dataclass holds the defaults."""
    return cls(**{k: v for k, v in given.items() if v is not None})


def default(cls, name):
    """The default of dataclass field ``name``, for help texts (written once, in the dataclass)."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) \
        if isinstance(value, (tuple, list)) else value


def parse_paradigms(text, allowed=PARADIGMS, option="--paradigm"):
    """Parse ``"all"`` or a comma list such as ``"sa,lv"`` into canonical names, once each."""
    if text is None:
        return None
    if str(text).strip().lower() == "all":
        return list(allowed)
    out = [check_paradigm(name, allowed) for name in str(text).split(",") if name.strip()]
    if not out or len(set(out)) != len(out):
        raise InputError(f"{option} {text!r}: give {', '.join(allowed)} (comma-separated, "
                         "once each) or all")
    return out


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


class EpochBar:
    """A click progress bar per epoch (stderr) showing the running loss."""

    def __init__(self, length, label):
        self.text = None
        self.bar = click.progressbar(length=length, label=label, file=sys.stderr,
                                     item_show_func=lambda text: text)

    def __enter__(self):
        self.bar.__enter__()
        return self

    def update(self, loss=None):
        if loss is not None:
            self.text = f"loss {loss:.4f}"
        self.bar.update(1, self.text)

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)


def echo_line(line):
    """Progress lines on stdout; warnings on stderr."""
    click.echo(line, err=line.startswith("warning:"))
