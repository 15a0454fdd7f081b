"""Option-parsing helpers shared by the ``attn-dyn`` commands (the CLI edge only)."""

import contextlib
import dataclasses
import sys

import click

from minimal_attn import PARADIGMS
from minimal_attn.errors import InputError, check_paradigm

CONTEXT = {"help_option_names": ["-h", "--help"]}

#: What a command has kept if the user presses Ctrl-C now (printed by the group).
_NOTHING_WRITTEN = "nothing was written (results are written only when complete)"
_interrupt = {"note": _NOTHING_WRITTEN}


def on_interrupt(note):
    """Set the line the group prints after Ctrl-C (e.g. where checkpoints are, how to resume)."""
    _interrupt["note"] = note


def interrupt_note():
    return _interrupt["note"]


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
        try:
            out[key.strip().lower() or "all"] = float(value)
        except ValueError:
            raise InputError(f"--lr {text!r}: give a number or paradigm=number pairs, "
                             "e.g. sa=0.05,ha=0.01") from None
    if not out:
        raise InputError("--lr is empty: give a number or e.g. sa=0.05,ha=0.01")
    return out


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
