r"""A sweep's grid: settings of ``attn-dyn train`` crossed into named Table 1 cells.

Vashisht & Ramaswamy (2023), Table 1: one row of the table is one data set,
m and paradigm with all its seeds, and that is one cell here
(:class:`minimal_attn.experiments.cell_catalogue.Cell`, kind ``table1``). A grid is a mapping
``key -> [values]`` whose keys are the settings of ``attn-dyn train``
(:class:`~minimal_attn.experiments.config.ExperimentConfig`, ``paradigm`` for
its list of paradigms, ``-`` or ``_`` alike); the values are crossed. With
``table=2`` the keys are the settings of ``attn-dyn agreement`` and a cell is
one Snell Table 2 row (:mod:`minimal_attn.experiments.sweep_table2`).

* :func:`parse_tokens`: ``["dataset=cifar10,cifar100", "paradigm=all"]``;
* :func:`read_grid_file`: the same as a TOML file (``m = [5, 20]``);
* :func:`expand`: every combination as a cell with a stable name: the same
  settings give the same name in any grid (``t1-cifar10-m5-authors-sa``, then
  each setting that differs from its default as ``key=value``).

Settings that change where or how fast a cell runs but not its numbers
(:data:`OPERATIONAL`) are kept apart: they are in neither the name nor the
configuration that a finished cell's record must match to be skipped.
"""

import hashlib
import itertools
import json
import os
from dataclasses import fields, replace

from minimal_attn import PARADIGMS
from minimal_attn.errors import InputError, check_paradigm
from minimal_attn.experiments.config import ExperimentConfig, apply_protocol, check_config

#: Where and how fast, not what: left out of cell names and of the match on rerun.
OPERATIONAL = ("data_dir", "device", "threads", "chunk", "batch_seeds", "compile",
               "conv_mode")
_FIELDS = {f.name: f for f in fields(ExperimentConfig)}
#: The grid keys: every setting of ``attn-dyn train`` (``paradigms`` spelled ``paradigm``).
KEYS = tuple(sorted(["paradigm"] + [k for k in _FIELDS if k != "paradigms"]))
_INTS = ("m", "epochs", "seeds", "first_seed", "n_train", "n_test", "batch_size", "n_classes",
         "data_seed", "threads", "chunk")
_FLOATS = ("momentum", "width", "threshold", "stop_loss", "hybrid_lr", "lr")
_NAME_FIRST = ("dataset", "m", "protocol", "paradigm")
MAX_NAME = 200


def _key(raw, table=1):
    key = str(raw).strip().replace("-", "_").lower()
    if key == "paradigms" and table == 1:
        key = "paradigm"
    keys = KEYS if table == 1 else _table2().keys()
    if key not in keys and key != "table":
        command = "train" if table == 1 else "agreement"
        raise InputError(f"unknown grid key {raw!r}: use table or settings of `attn-dyn "
                         f"{command}`: {', '.join(keys)}")
    return key


def typed(key, raw, kind, optional):
    """One value from the command line (a string) or TOML (typed) as ``kind``."""
    text = str(raw).strip()
    bad = InputError(f"grid key {key}: {raw!r} is not a valid value")
    if optional and (raw is None or isinstance(raw, str) and text.lower() == "none"):
        return None                    # raw None: JSON null, read back from sweep.json
    if raw is None or isinstance(raw, (list, dict)):
        raise bad
    if kind in (int, float):
        try:
            number = kind(text) if isinstance(raw, str) else raw
        except ValueError:
            raise bad from None
        if isinstance(number, bool) or not isinstance(number, (int, float)) or \
                (kind is int and not isinstance(number, int)):
            raise bad
        return kind(number)
    if kind is bool:
        if isinstance(raw, bool) or text.lower() in ("true", "false"):
            return raw if isinstance(raw, bool) else text.lower() == "true"
        raise bad
    if not text:
        raise bad
    return text


def _value(key, raw):
    """One value of a Table 1 ``key``."""
    if key == "lr":                # one number: the rate of the cell's paradigm
        raw = raw["all"] if isinstance(raw, dict) and set(raw) == {"all"} else raw
        value = typed(key, raw, float, True)
        return None if value is None else {"all": value}
    if key == "switch_epoch" and str(raw).strip().lower() == "auto":
        return "auto"
    if key == "foreground" and raw is not None:    # names joined by "+" (, crosses values)
        names = raw if isinstance(raw, list) and raw else str(raw).split("+")
        return [typed(key, n, str, False) for n in names]
    kind = int if key in _INTS + ("switch_epoch",) else float if key in _FLOATS else \
        bool if key == "batch_seeds" else str
    return typed(key, raw, kind, _FIELDS.get(key) is not None and _FIELDS[key].default is None)


def _table2():
    from minimal_attn.experiments import sweep_table2

    return sweep_table2


def table_of(grid):
    """1 (V&R Table 1 cells, the default) or 2 (Snell Table 2 rows): the grid's ``table``."""
    tables = grid.get("table", [1])
    if len(tables) != 1 or tables[0] not in (1, 2):
        raise InputError(f"grid key table must be one of 1, 2 (one value), got {tables}")
    return tables[0]


def _add(grid, key, values, where, table=1):
    key = _key(key, table)
    values = values if isinstance(values, list) else [values]
    out = []
    for raw in values:
        if key == "table":
            out.append(typed(key, raw, int, False))
        elif table == 2:
            out.append(_table2().value(key, raw))
        elif key == "paradigm" and str(raw).strip().lower() == "all":
            out += list(PARADIGMS)
        elif key == "paradigm":
            out.append(check_paradigm(raw))
        else:
            out.append(_value(key, raw))
    if not out:
        raise InputError(f"grid key {key} has no values in {where}")
    seen = [json.dumps(v, sort_keys=True) for v in out]
    if len(set(seen)) != len(seen):
        raise InputError(f"grid key {key} lists a value twice in {where}")
    grid[key] = out


def add_settings(grid, pairs, param):
    """Add ``(key, values, where, label)`` to ``grid``, table first (it names the keys);
    refuses a key given twice (``m=2 m=3``; ``n_train`` and ``n-train``)."""
    for key, values, where, _ in pairs:
        if str(key).strip().lower() == "table":
            _add(grid, key, values, where)
    seen = {}
    for key, values, where, label in pairs:
        name = _key(key, table_of(grid))
        if name in seen:
            raise InputError(f"grid key {name} is given twice ({seen[name]} and {label}): "
                             f"give it once, its values comma-separated ({name}=V1,V2)",
                             param=param)
        seen[name] = label
        _add(grid, key, values, where, table_of(grid))
    return grid


def parse_tokens(tokens, grid=None):
    """``KEY=V1,V2`` tokens into ``{key: [values]}``, added to ``grid`` (a grid file's:
    a key here replaces its values there); a key given twice here is refused."""
    pairs = []
    for token in tokens:
        key, sep, text = str(token).partition("=")
        if not sep or not key.strip():
            raise InputError(f"grid setting {token!r} is not KEY=VALUES, e.g. m=5,20",
                             param="grid")
        pairs.append((key, [v for v in text.split(",") if v.strip()]) + (f"{token!r}",) * 2)
    return add_settings(dict(grid or {}), pairs, "grid")


def read_grid_file(path):
    """A TOML grid file (``key = value`` or ``key = [values]``) as ``{key: [values]}``."""
    try:
        import tomllib
    except ImportError:                              # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError("--grid-file needs Python >= 3.11 or the tomli package (pip "
                             "install tomli); or give the grid with --grid",
                             param="grid_file") from None
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise InputError(f"cannot read grid file {path}: {exc.strerror or exc}",
                         param="grid_file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"grid file {path} is not valid TOML ({exc})",
                         param="grid_file") from None
    except UnicodeDecodeError:
        raise InputError(f"grid file {path} is not UTF-8 text: give a TOML file",
                         param="grid_file") from None
    data = data.get("grid", data) if isinstance(data.get("grid"), dict) else data
    if not data:
        raise InputError(f"grid file {path} is empty: give settings such as m = [5, 20]",
                         param="grid_file")
    for key, values in data.items():
        if isinstance(values, dict):
            raise InputError(f"grid file {path}: {key} is a table; give a value or a list",
                             param="grid_file")
    return add_settings({}, [(k, v, path, f"{k} in {path}") for k, v in data.items()],
                        "grid_file")


def _canonical(value):
    return json.loads(json.dumps(value))


def format_value(value):
    if isinstance(value, dict) and set(value) == {"all"}:
        value = value["all"]
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    return str(value)


def cell_name(head, settings, base, skip=_NAME_FIRST):
    """``head`` joined by ``-``, then ``key=value`` for each setting (not in ``skip``) that
    differs from ``base`` (its default), sorted by key."""
    s = settings
    rest = [f"{k}={format_value(s[k])}" for k in sorted(s)
            if k not in skip and s[k] != base.get(k)]
    name = "-".join(head + rest).replace("/", "_").replace(" ", "_")
    if len(name) > MAX_NAME:       # a file name has room for 255 bytes; keep it readable
        digest = hashlib.sha1(json.dumps(s, sort_keys=True).encode()).hexdigest()[:10]
        name = name[:MAX_NAME - 11] + "-" + digest
    return name


def _settings(config, paradigm):
    out = {k: getattr(config, k) for k in _FIELDS if k not in OPERATIONAL + ("paradigms",)}
    return _canonical(dict(out, paradigm=paradigm))


def expand(grid):
    """Every combination of ``grid`` as a :class:`.cell_catalogue.Cell`, sorted by name.

    Each cell's ``settings`` hold every setting that affects its numbers (the
    configuration a finished record must match; the others are given by
    :func:`operational`). Refuses (naming the key) a combination that
    ``attn-dyn train`` would refuse.
    """
    from minimal_attn.experiments.cell_catalogue import Cell
    from minimal_attn.experiments.train_report import PAPER_TABLE1

    if not grid:
        raise InputError("the grid is empty: give settings such as --grid m=5,20 "
                         "paradigm=all or --grid-file FILE")
    operational(grid)
    if table_of(grid) == 2:
        return _table2().expand({k: v for k, v in grid.items() if k != "table"})
    keys = sorted(k for k in grid if k != "table")
    cells = {}
    for combo in itertools.product(*(grid[k] for k in keys)):
        given = dict(zip(keys, combo))
        paradigm = given.pop("paradigm", None)
        protocol = given.pop("protocol", None)
        try:
            config = apply_protocol(ExperimentConfig(**given), protocol, explicit=set(given))
            base = apply_protocol(ExperimentConfig(**{k: v for k, v in given.items()
                                                      if k in ("dataset", "backend")}),
                                  protocol)
        except (TypeError, InputError) as exc:
            raise InputError(f"grid: {exc}") from None
        for p in [paradigm] if paradigm else list(config.paradigms):
            c = replace(config, paradigms=[p])
            try:
                check_config(c)
            except InputError as exc:     # the sweep's options are not train's: no param
                raise InputError(f"grid: {exc}") from None
            settings = _settings(c, p)
            # t1-DATASET-mM[-PROTOCOL]-PARADIGM, as the cells of `attn-dyn cells`
            head = ["t1", c.dataset, f"m{c.m}"] + ([c.protocol] if c.protocol else []) + [p]
            name = cell_name(head, settings, _settings(base, p))
            saif_acc = PAPER_TABLE1.get((c.dataset, c.m), {}).get(p)
            cells[name] = Cell(name, "table1", _scale(c, given), _title(settings),
                               settings, "", {"saif": saif_acc[0], "accuracy": saif_acc[1]}
                               if saif_acc else {})
    return [cells[n] for n in sorted(cells)]


def _scale(config, given):
    if config.dataset in ("synthetic", "linear-orthogonal"):
        return "tiny"
    sized = ("n_train", "n_test", "seeds", "epochs", "width")
    return "paper" if config.protocol and not set(sized) & set(given) else "cpu"


def _title(s):
    protocol = f", protocol {s['protocol']}" if s["protocol"] else ""
    return f"{s['dataset']}, m = {s['m']}{protocol}, {s['paradigm']}, {s['seeds']} seed(s)"


def operational(grid):
    """The operational settings of a grid (one value each): ``{key: value}``."""
    out = {}
    for key in OPERATIONAL if table_of(grid) == 1 else _table2().OPERATIONAL:
        if key in grid:
            if len(grid[key]) != 1:
                raise InputError(f"grid key {key} is one setting of the whole sweep (where "
                                 "its cells run, or the files they read): give it one value")
            out[key] = grid[key][0]
    for key in ("data_dir", "embeddings"):          # a worker may start in another folder
        if out.get(key) is not None:
            out[key] = os.path.abspath(out[key])
    return out
