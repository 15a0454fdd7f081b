r"""The results store: one small JSON file per finished experiment cell, with provenance.

Paper-size experiments run in *cells* (:mod:`minimal_attn.experiments.cells`): pieces that
each fit one short GPU job and add up across jobs. A finished cell leaves one
record in ``results/cells/<name>.json`` in the repository:

* ``cell``, ``kind`` (``table1``, ``table2`` or ``synthetic``), ``scale``
  (``paper``: the paper's size; ``cpu``: reduced to fit the 2-core machine;
  ``tiny``: a smoke cell for tests), ``title`` and ``settings``;
* ``result``: per-seed metrics with their mean and sample standard deviation;
* ``paper``: the paper's numbers for the same cell, where it has them;
* ``provenance``: commit (and whether the tree had uncommitted changes), date,
  device and card, Python, NumPy, torch and CUDA versions, CPU count, wall
  time and the command line.

:func:`render` turns every record into the Markdown tables of
``results/README.md`` and of the README block between ``<!-- results:begin -->``
and ``<!-- results:end -->``; :func:`write_report` writes both, and with
``check=True`` only says which of them is out of date (the test suite does).
"""

import datetime
import json
import os
import platform
import subprocess
import sys

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.cell_parts import merge
from minimal_attn.experiments.io import atomic_open, ensure_dir

FORMAT = 1
KINDS = ("table1", "table2", "synthetic")
SCALES = ("paper", "cpu", "tiny")
BEGIN, END = "<!-- results:begin -->\n", "<!-- results:end -->"


def summarise(values):
    """``{"per_seed", "mean", "std"}`` of per-seed numbers (sample std; 0 for one seed)."""
    v = np.asarray([float(x) for x in values], dtype=float)
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return {"per_seed": v.tolist(), "mean": float(v.mean()), "std": std}


def _git(*args, cwd=None):
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_source(repo=None):
    """``(commit, dirty)`` of the code as it is now: call it when a cell starts, so that a
    commit made while the cell runs is not taken for the code that ran."""
    repo = repo or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.environ.get("ATTN_DYN_COMMIT"):
        # a copy of the working tree (a GPU machine), whose .git, if any, need not be
        # the copy's: the commit and dirty flag recorded where the copy was made
        # (benchmarks/gpu_cells.sh --prepare, which also checks the files still match)
        return (os.environ["ATTN_DYN_COMMIT"],
                {"0": False, "1": True}.get(os.environ.get("ATTN_DYN_DIRTY", "")))
    dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=repo)
    return _git("rev-parse", "HEAD", cwd=repo), None if dirty is None else bool(dirty)


def provenance(wall_seconds, device="cpu", protocol=None, command=None, repo=None,
               source=None):
    """Where and how a cell ran: commit, date, device, card, versions, wall time;
    ``source``: :func:`code_source` when the cell started (default: now)."""
    commit, dirty = source if source is not None else code_source(repo)
    out = {"commit": commit, "dirty": dirty,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": str(device), "card": "CPU", "python": platform.python_version(),
           "numpy": np.__version__, "torch": None, "cuda": None,
           "cpu_count": os.cpu_count(), "platform": platform.platform(terse=True),
           "protocol": protocol, "wall_seconds": round(float(wall_seconds), 1),
           "command": " ".join(command if command is not None else sys.argv)}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        if str(device).startswith("cuda") and torch.cuda.is_available():
            out["card"] = torch.cuda.get_device_name(torch.device(str(device)))
    return out


def cell_path(results_dir, name):
    return os.path.join(results_dir, "cells", f"{name}.json")


def write_cell(results_dir, record):
    """Write one cell's record atomically to ``results_dir/cells/<name>.json``."""
    check_record(record, "record")
    path = cell_path(results_dir, record["cell"])
    ensure_dir(os.path.dirname(path))
    with atomic_open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def check_record(record, where):
    """Raise InputError (one line naming ``where``) for a record that is not a cell record."""
    if not isinstance(record, dict):
        raise InputError(f"{where} is not a JSON object: delete it or rerun its cell")
    missing = [k for k in ("format", "cell", "kind", "scale", "title", "settings", "result",
                           "provenance") if k not in record]
    if missing:
        raise InputError(f"{where} is not a cell record (no {', '.join(missing)}): delete "
                         "it or rerun its cell")
    if record["format"] != FORMAT or record["kind"] not in KINDS or \
            record["scale"] not in SCALES:
        raise InputError(f"{where} has format {record['format']!r}, kind {record['kind']!r}, "
                         f"scale {record['scale']!r}; expected format {FORMAT}, kind one of "
                         f"{', '.join(KINDS)}, scale one of {', '.join(SCALES)}")
    part = record.get("part")
    if part is not None and (not isinstance(part, dict) or any(
            k not in part for k in ("of", "index", "parts", "first_seed", "seeds", "title"))):
        raise InputError(f"{where} has a malformed part entry (it needs of, index, parts, "
                         "first_seed, seeds and title): delete it or rerun its cell part")


def read_cells(results_dir):
    """Every record under ``results_dir/cells`` (sorted by name), each checked."""
    folder = os.path.join(results_dir, "cells")
    if not os.path.isdir(folder):
        return []
    records = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as exc:
            raise InputError(f"{path} cannot be read ({type(exc).__name__}): delete it or "
                             "rerun its cell") from None
        check_record(record, path)
        records.append(record)
    return records


def _pct(entry):
    return f"{100 * entry['mean']:.1f} ± {100 * entry['std']:.1f}"


def _short(record):
    p = record["provenance"]
    commit = ",".join(c[:9] for c in (p.get("commit") or "?").split(","))
    commit += "+" if p.get("dirty") else ""
    n = len(p.get("parts") or ())
    parts = f", {n} part{'s' if n > 1 else ''}" if n else ""
    return (f"{p.get('card')}, {p.get('date', '?')[:10]}, {commit}{parts}, "
            f"{p.get('wall_seconds')} s")


def _table1_order(record):
    """Scale, data set, m and protocol, then the paradigms in the paper's order."""
    s, name = record["settings"], record["cell"]
    head, paradigm = name.rsplit("-", 1)[0], name.rsplit("-", 1)[-1]
    rank = ("sa", "ha", "lv", "hybrid")
    return (SCALES.index(record["scale"]), str(s.get("dataset") or head),
            s.get("m", 0), str(s.get("protocol") or ""),
            rank.index(paradigm) if paradigm in rank else len(rank), record["cell"])


def _epochs(result):
    """Epochs run (range over seeds), how many seeds the stop rule ended, and a mark
    for seeds a time limit cut short: e.g. ``31-48, 12/12 stopped``."""
    runs = list((result.get("epochs_run") or {}).values())
    if not runs:
        return "-"
    text = f"{min(runs)}" if min(runs) == max(runs) else f"{min(runs)}-{max(runs)}"
    stopped = [v for v in (result.get("stopped_epochs") or {}).values() if v is not None]
    text += f", {len(stopped)}/{len(runs)} stopped"
    cut = [k for k, v in (result.get("time_limited") or {}).items() if v]
    if cut:
        text += f", **{len(cut)} cut by time limit (partial)**"
    return text


def _table1(records):
    records = sorted(records, key=_table1_order)
    lines = ["| cell | scale | seeds | test SAIF % | test accuracy % | epochs | "
             "paper SAIF / acc | run on |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        res, paper = r["result"], r.get("paper") or {}
        ref = (f"{paper['saif']} / {paper['accuracy']}" if paper else "-")
        trained = (f", trained {res['train_seconds'] / 60:.0f} min"
                   if res.get("train_seconds") else "")
        diverged = res.get("diverged") or {}
        seeds = len(res["test"]["saif"]["per_seed"])
        seeds = f"{seeds} (+{len(diverged)} diverged: seed {', '.join(diverged)})" \
            if diverged else seeds
        lines.append(f"| {r['title']} | {r['scale']} | {seeds} "
                     f"| {_pct(res['test']['saif'])} | {_pct(res['test']['accuracy'])} "
                     f"| {_epochs(res)} | {ref} "
                     f"| {_short(r)}{trained} |")
    return lines


def _seen(records):
    """The Table 1 cells tested on mosaics of training images (``result.test_seen``): their
    test scores over the seen and the unseen foregrounds (:mod:`.seen_images`)."""
    def pct(group, key):
        return "-" if not group or not group.get(key) else _pct(group[key])

    lines = ["| cell | scale | seeds | test foregrounds seen in training | accuracy seen % "
             "| accuracy unseen % | SAIF seen % | SAIF unseen % |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=_table1_order):
        b, seeds = r["result"]["test_seen"], len(r["result"]["test"]["saif"]["per_seed"])
        lines.append(f"| {r['title']} | {r['scale']} | {seeds} "
                     f"| {100 * b['fraction_seen']:.1f}% | {pct(b['seen'], 'accuracy')} "
                     f"| {pct(b['unseen'], 'accuracy')} | {pct(b['seen'], 'saif')} "
                     f"| {pct(b['unseen'], 'saif')} |")
    return lines


def _models_cut(result):
    """`` (**partial: ...**)`` naming the models of a Table 2 row a time limit stopped."""
    limited = result.get("time_limited") or {}
    cut = {name: result["steps_run"][name]
           for name in ("standard", "second", "uniform", "frozen") if limited.get(name)}
    if not cut:
        return ""
    if len(cut) == len(limited) and len(set(cut.values())) == 1:
        where = f"every model at step {next(iter(cut.values()))}"
    else:
        where = ", ".join(f"{name} at step {step}" for name, step in cut.items())
    return f" (**partial: time limit, {where}**)"


def _table2(records):
    cols = ["A(α,β^uf)", "A(β^uf,β^px)", "A(Δ,β^uf)", "A(α,β)", "Â", "ξ(α,β^uf)", "ξ(α,β)", "ξ*"]
    lines = ["| cell | scale | " + " | ".join(cols) + " | performance | run on |",
             "|---" * (len(cols) + 4) + "|"]
    for r in records:
        res = r["result"]
        ours = " | ".join("-" if v is None else f"{100 * v:.1f}" for v in res["row"])
        title = r["title"] + _models_cut(res)
        lines.append(f"| {title} | {r['scale']} | {ours} | "
                     f"{100 * res['performance']:.1f} | {_short(r)} |")
        if r.get("paper"):
            lines.append("| paper | | " + " | ".join(f"{v:g}" for v in r["paper"]["row"])
                         + " | | |")
    return lines


def _synthetic(records):
    lines = ["| cell | scale | condition | seeds | converged | failed | run on |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        res = r["result"]
        cut = any((res.get("time_limited") or {}).values())
        title = r["title"] + (f" (**partial: time limit at step {res.get('steps_run')}**)"
                              if cut else "")
        for name, c in res["conditions"].items():
            lines.append(f"| {title} | {r['scale']} | {name} | {c['seeds']} | "
                         f"{100 * c['converged_fraction']:.0f}% | {100 * c['failed_fraction']:.0f}%"
                         f" | {_short(r)} |")
        for name, why in (res.get("skipped") or {}).items():
            lines.append(f"| {title} | {r['scale']} | {name} | 0 | skipped: {why} | | "
                         f"{_short(r)} |")
    return lines


def render(records):
    """The Markdown tables of every record, by kind (V&R Table 1, Snell Table 2, synthetic);
    the parts of a cell are joined into one row (:func:`.cell_parts.merge`)."""
    if not records:
        return "No cell has been run yet.\n"
    records = merge(records)
    out = []
    for kind, heading, table in (("table1", "V&R Table 1 (test set, %)", _table1),
                                 ("table2", "Snell Table 2 (%)", _table2),
                                 ("synthetic", "Snell synthetic tasks", _synthetic)):
        mine = [r for r in records if r["kind"] == kind]
        if mine:
            out += [f"**{heading}**", ""] + table(mine) + [""]
        seen = [r for r in mine if kind == "table1" and "test_seen" in r["result"]]
        if seen:
            out += ["**Test mosaics of training images: the seen and the unseen foregrounds**",
                    ""] + _seen(seen) + [""]
    out.append("Scale `paper`: the paper's size; `cpu`: reduced to fit the 2-core machine; "
               "`tiny`: a smoke cell. 'run on': card, date, commit (+: uncommitted changes), "
               "wall time (summed over a cell's parts).")
    return "\n".join(out) + "\n"


RESULTS_README = """# Results

One JSON record per finished experiment cell in `cells/` (format in
`minimal_attn/experiments/results_store.py`; the cells in
`minimal_attn/experiments/cells.py`, listed with `attn-dyn cells list`). This page and
the README's results block are generated from them by `attn-dyn cells report`; a test
checks that both match the records.

"""


def write_report(results_dir, readme=None, check=False):
    """Write ``results_dir/README.md`` and the ``readme`` block from the records.

    With ``check`` nothing is written; returns the paths that are out of date
    (empty when everything matches).
    """
    body = render(read_cells(results_dir))
    targets = {os.path.join(results_dir, "README.md"): RESULTS_README + body}
    if readme is not None:
        with open(readme) as f:
            text = f.read()
        if BEGIN not in text or END not in text:
            raise InputError(f"{readme} has no results block ({BEGIN.strip()} ... {END}): "
                             "add the two markers where the tables belong")
        i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
        targets[readme] = text[:i] + body + text[j:]
    stale = []
    for path, content in targets.items():
        old = open(path).read() if os.path.exists(path) else None
        if old != content:
            stale.append(path)
            if not check:
                ensure_dir(os.path.dirname(path) or ".")
                with atomic_open(path, "w") as f:
                    f.write(content)
    return stale
