r"""The results store's tables: every cell record as Markdown (:func:`render`).

V&R Table 1 cells (with, for cells tested on mosaics of training images, their seen and
unseen test foregrounds), Snell Table 2 rows and the synthetic figures, one table each;
the parts of a cell are joined into one row (:func:`.cell_parts.merge`). The records and
their files are :mod:`.results_store`'s (the shape these tables read:
:mod:`.results_shape`), which writes these tables into
``results/README.md`` (every cell, full provenance) and, in brief, the README (the
paper-size cells, each row's run as card and date).
"""

import math

from minimal_attn.experiments.cell_parts import merge
from minimal_attn.experiments.results_shape import MODELS, SCALES


def _pct(entry):
    return f"{100 * entry['mean']:.1f} ± {100 * entry['std']:.1f}"


def _short(record, brief=False):
    """Where and when a cell ran: card, date, commits (+ if uncommitted changes), parts
    and wall time; ``brief``: card, date and parts only."""
    p = record["provenance"]
    n = len(p.get("parts") or ())
    parts = f", {n} part{'s' if n > 1 else ''}" if n else ""
    if brief:
        return f"{p.get('card')}, {p.get('date', '?')[:10]}{parts}"
    commit = ",".join(c[:9] for c in (p.get("commit") or "?").split(","))
    commit += "+" if p.get("dirty") else ""
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


def _table1(records, run_on):
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
                     f"| {run_on(r)}{trained} |")
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
    cut = {name: result["steps_run"][name] for name in MODELS if limited.get(name)}
    if not cut:
        return ""
    if len(cut) == len(limited) and len(set(cut.values())) == 1:
        where = f"every model at step {next(iter(cut.values()))}"
    else:
        where = ", ".join(f"{name} at step {step}" for name, step in cut.items())
    return f" (**partial: time limit, {where}**)"


def _table2(records, run_on):
    from minimal_attn.experiments.agreement_table import COLUMNS

    cols = ["A(α,β^uf)", "A(β^uf,β^px)", "A(Δ,β^uf)", "A(α,β)", "Â", "ξ(α,β^uf)", "ξ(α,β)", "ξ*"]
    lines = ["| cell | scale | " + " | ".join(cols) + " | performance | run on |",
             "|---" * (len(cols) + 4) + "|"]
    for r in records:
        res = r["result"]
        # a xi never reached is the final performance, starred as agreement_table does
        unreached = set(res.get("unreached") or ())
        ours = " | ".join("-" if v is None or math.isnan(v) else
                          f"{100 * v:.1f}" + ("*" if c in unreached else "")
                          for c, v in zip(res.get("columns") or COLUMNS, res["row"]))
        title = r["title"] + _models_cut(res)
        lines.append(f"| {title} | {r['scale']} | {ours} | "
                     f"{100 * res['performance']:.1f} | {run_on(r)} |")
        if r.get("paper"):
            lines.append("| paper | | " + " | ".join(f"{v:g}" for v in r["paper"]["row"])
                         + " | | |")
    return lines


def _synthetic(records, run_on):
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
                         f" | {run_on(r)} |")
        for name, why in (res.get("skipped") or {}).items():
            lines.append(f"| {title} | {r['scale']} | {name} | 0 | skipped: {why} | | "
                         f"{run_on(r)} |")
    return lines


def render(records, brief=False):
    """The Markdown tables of every record, by kind (V&R Table 1, Snell Table 2, synthetic);
    the parts of a cell are joined into one row (:func:`.cell_parts.merge`). ``brief``: the
    paper-size cells only, each row's run as card and date (the README's block)."""
    records = merge(records) if records else []
    if brief:
        records = [r for r in records if r["scale"] == "paper"]
    if not records:
        return ("No paper-size cell has been run yet.\n" if brief
                else "No cell has been run yet.\n")

    def run_on(record):
        return _short(record, brief)

    out = []
    tables = (("table1", "V&R Table 1 (test set, %: mean ± sample std over seeds)", _table1),
              ("table2", "Snell Table 2 (%)", _table2),
              ("synthetic", "Snell synthetic tasks", _synthetic))
    for kind, heading, table in tables:
        mine = [r for r in records if r["kind"] == kind]
        if mine:
            out += [f"**{heading}**", ""] + table(mine, run_on) + [""]
        seen = [r for r in mine if kind == "table1" and "test_seen" in r["result"]]
        if seen:
            out += ["**Test mosaics of training images: the seen and the unseen foregrounds**",
                    ""] + _seen(seen) + [""]
    if brief:
        out.append("The paper-size cells; 'run on': card, date, parts. Every cell, the CPU-size "
                   "ones too, with its commit and wall time: "
                   "[results/README.md](results/README.md).")
    else:
        out.append("Scale `paper`: the paper's size; `cpu`: reduced to fit the 2-core machine; "
                   "`tiny`: a smoke cell. 'run on': card, date, commit (+: uncommitted "
                   "changes; several: every commit that trained the cell, across its parts "
                   "and resumes), wall time (summed over a cell's parts). Table 2: a starred "
                   "ξ (80.0*) was never reached and is given as the final performance.")
    return "\n".join(out) + "\n"
