"""The option tables of the docs mirror the commands' ``--help``: names, defaults, text.

docs/cli.md says its tables mirror the options; this test holds it to that (an option
added to a command and not to its table, or a changed default, fails here). docs/train.md
marks the options that ``--dataset hatexplain`` refuses as the help does.
"""

import html
import importlib
import re
from pathlib import Path

import click
import pytest

from minimal_attn.cli.main import COMMANDS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def command(name):
    module, attr = COMMANDS[name].split(":")
    return getattr(importlib.import_module(f"minimal_attn.cli.{module}"), attr)


def options(cmd):
    return [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden
            and p.name != "help"]


def doc_row(p):
    """The table row of option ``p``, as docs/cli.md writes it."""
    names = ", ".join(f"`{o}`" for o in p.opts)
    if p.required:
        default = "required"
    elif isinstance(p.show_default, str):
        default = f"`{p.show_default}`"
    elif p.show_default and p.default is not None and not (p.is_flag and not p.default):
        default = f"`{p.default}`"
    else:
        default = ""
    meaning = html.escape(p.help or "", quote=False).replace("|", "\\|")
    return f"| {names} | {default} | {meaning} |"


def tables(path):
    """``{command: [row lines]}`` of every ``| option | default | meaning |`` table, each
    under its ``## `attn-dyn NAME` `` heading."""
    out, name, rows = {}, None, None
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## `attn-dyn ([\w-]+)`", line)
        if heading:
            name, rows = heading.group(1), None
        elif line.startswith("| option | default | meaning |"):
            rows = out.setdefault(name, [])
        elif rows is not None and line.startswith("| `-"):
            rows.append(line)
        elif rows is not None and not line.startswith("|---"):
            rows = None
    return out


CLI_TABLES = tables(DOCS / "cli.md")


def test_cli_md_has_a_table_per_command_it_documents():
    assert set(CLI_TABLES) == {"ode", "fixed-focus", "ibm1", "proxy"}


@pytest.mark.parametrize("name", sorted(CLI_TABLES))
def test_cli_md_tables_mirror_the_help(name):
    """Every option in its help order, with the help's default and text."""
    assert CLI_TABLES[name] == [doc_row(p) for p in options(command(name))]


def _mosaic_only():
    """The options of ``attn-dyn train`` that ``--dataset hatexplain`` refuses."""
    from minimal_attn.cli.train_cmd import TEXT_OPTIONS

    return {p.name for p in options(command("train")) if p.name not in TEXT_OPTIONS}


def test_train_help_marks_exactly_the_options_hatexplain_refuses():
    from minimal_attn.cli.train_help import MOSAIC_MARKS

    for cmd in (command("train"), command("train-text")):
        for p in options(cmd):
            marked = (p.help or "").startswith(MOSAIC_MARKS)
            assert marked == (p.name in _mosaic_only()), (cmd.name, p.name, p.help)


def test_train_md_marks_the_options_hatexplain_refuses():
    marks = ("mosaics:", "cnn:", "cnn, with `--batch-seeds`:", "cifar:",
             "synthetic and linear-orthogonal:")
    by_option = {o: p.name for p in options(command("train")) for o in p.opts + p.secondary_opts}
    rows = [line for line in (DOCS / "train.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `--")]
    seen = set()
    for row in rows:
        first, _, meaning = (c.strip() for c in re.split(r"(?<!\\)\|", row.strip()[1:-1]))
        names = {by_option[o] for o in re.findall(r"`(--[\w-]+)", first) if o in by_option}
        if not names:
            continue
        seen |= names
        mosaic = names <= _mosaic_only()
        assert mosaic == meaning.lower().startswith(marks), row
    assert seen == {p.name for p in options(command("train"))}, "an option has no row"
