"""The examples' settings: environment variables, typed and checked, listed by ``--help``.

An example declares its settings once, each with a default and a one-line meaning,
and reads them all with :func:`read`::

    S = read(takes="about 3 minutes",
             BOTH_SEEDS=integer(5, "seeds per condition", low=1),
             BOTH_OUT=path("runs/both", "output folder"))

``python example.py --help`` (or ``-h``) prints what the example does (its first
markdown cell's heading and paragraph), how long it takes, and the table of its
settings, then exits 0 before any work. A bad value stops it before any work too,
with one line on stderr, ``Error: BOTH_SEEDS=abc: not an integer; set BOTH_SEEDS
to an integer >= 1``, and exit status 2; so does any other command-line argument.
An unset or empty variable takes the default. Inside a Jupyter kernel the command
line is the kernel's (``-f kernel.json``), not the example's, so it is ignored.
"""

import math
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from _shared_data import shared_data


@dataclass
class Setting:
    """One environment variable: its default, its meaning, and how a value is read."""

    default: object
    help: str                          # one line: what it sets
    rule: str                          # what a good value is, for the help and the fix
    parse: Callable                    # text -> value; ValueError(what is wrong) if bad


def _bounded(kind, word, low, high):
    """(rule, parser) of ``kind`` (int or float) in [low, high]; a None bound is no bound."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"not {word}") from None
        if not math.isfinite(value):
            raise ValueError("not finite")
        if low is not None and value < low:
            raise ValueError(f"below {low}")
        if high is not None and value > high:
            raise ValueError(f"above {high}")
        return value
    bounds = " and ".join(f"{op} {b}" for op, b in ((">=", low), ("<=", high)) if b is not None)
    return f"{word} {bounds}".rstrip(), parse


def integer(default, help, low=None, high=None):
    """An integer, ``low <= value <= high``."""
    return Setting(default, help, *_bounded(int, "an integer", low, high))


def number(default, help, low=None, high=None):
    """A finite float, ``low <= value <= high``."""
    return Setting(default, help, *_bounded(float, "a number", low, high))


def choice(default, help, options, many=False):
    """One of ``options``; with ``many``, a comma-separated list of them (read as a tuple)."""
    def parse(text):
        words = [w.strip() for w in text.split(",")] if many else [text]
        for word in words:
            if word not in options:
                raise ValueError(f"{word!r} is not one of {', '.join(options)}")
        return tuple(words) if many else text
    rule = ("a comma-separated list of " if many else "one of ") + ", ".join(options)
    return Setting(default, help, rule, parse)


def flag(help):
    """``1`` (on) or ``0`` (off, the default), read as True or False."""
    def parse(text):
        if text not in ("0", "1"):
            raise ValueError("not 1 or 0")
        return text == "1"
    return Setting(False, help, "1 or 0", parse)


def path(default, help, folder_exists=False):
    """A path (read as a Path); with ``folder_exists``, of a folder that is there."""
    def parse(text):
        if folder_exists and not Path(text).is_dir():
            raise ValueError("no such folder")
        return Path(text)
    return Setting(default, help, "an existing folder" if folder_exists else "a path", parse)


def read(takes=None, data=(), **settings):
    """The example's ``settings`` (NAME=Setting) read from the environment, as a namespace.

    ``takes``: how long the example runs at its defaults; ``data``: the names of the
    shared data sets it reads; both for ``--help`` only.
    """
    args = _command_line()
    unknown = [a for a in args if a not in ("-h", "--help")]
    if unknown:
        _stop(f"unknown argument {unknown[0]!r}: the script takes only --help; its settings "
              f"are environment variables (python {sys.argv[0]} --help lists them)")
    if args:
        print(_help_text(takes, data, settings))
        raise SystemExit(0)
    values = {}
    for name, s in settings.items():
        text = os.environ.get(name, "").strip()
        try:
            values[name] = s.parse(text) if text else s.default
        except ValueError as exc:
            _stop(f"{name}={text}: {exc}; set {name} to {s.rule}" + (
                ", or unset it" if s.default is None else f" (default {_shown(s.default)})"))
    return SimpleNamespace(**values)


def _command_line():
    """The script's arguments; none inside a Jupyter kernel, whose argv is its own."""
    if "ipykernel" in sys.modules and "kernel" in Path(sys.argv[0]).name:
        return []
    return sys.argv[1:]


def _stop(message):
    print(f"Error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _shown(value):
    """A default as it would be typed: 1/0 for flags, commas between a tuple's words."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _help_text(takes, data, settings):
    """The first markdown cell's heading and paragraph, the run time, data and settings."""
    script = Path(sys.argv[0])
    heading, paragraph = _first_markdown(script)
    lines = [f"{script.name}: {heading}", "", paragraph, ""] if heading else [script.name, ""]
    if takes:
        lines += textwrap.wrap(f"At the defaults it takes {takes}.", 88) + [""]
    for name in data:
        found = shared_data(name)
        where = f"found: {found}" if found else "not found here"
        lines += textwrap.wrap(f"Data: ../shared/data/{name} beside the checkout, or "
                               f"$ATTN_DYN_DATA/{name} ({where}).", 88)
    if data:
        lines.append("")
    lines.append("Settings (environment variables; unset or empty: the default):"
                 if settings else "No settings: it runs the same every time.")
    for name, s in settings.items():
        lines.append(f"  {name}" + ("" if s.default is None else f"={_shown(s.default)}"))
        lines += textwrap.wrap(f"{s.help} [{s.rule}]", 88, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
    usage = "[SETTING=value ...] " if settings else ""
    lines += ["", f"Usage: {usage}python {script} [--help]"]
    return "\n".join(lines)


def _first_markdown(script):
    """(heading, first paragraph) of the script's first markdown cell; ('', '') if none."""
    try:
        lines = script.read_text().splitlines()
        start = lines.index("# %% [markdown]") + 1
    except (OSError, ValueError):
        return "", ""
    cell = []
    for line in lines[start:]:
        if not line.startswith("#") or line.startswith("# %%"):
            break
        cell.append(line[2:])                      # "# text" -> "text"; "#" -> ""
    heading = next((c[2:] for c in cell if c.startswith("# ")), "")
    body = "\n".join(cell[cell.index("# " + heading) + 1:] if heading else cell)
    return heading, body.strip().split("\n\n")[0]
