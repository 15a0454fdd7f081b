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
