r"""A cell's seeds cut into parts that each fit one job, and the parts' records joined.

Some cells do not fit one short GPU job with all their seeds: CIFAR-10 at m = 20
trains twelve seeds of a network four times the work of m = 5 for up to 200
epochs. Such a cell is run as *parts*: part ``k`` of ``n`` (the name
``t1-cifar10-m20-authors-sa@3``) trains the ``k``-th contiguous block of the
cell's seeds with the same data, settings and seed values the whole cell would
use, so the parts add up to the cell across jobs and occasions (seeds batched as
one model train as the separate runs do: tests/test_batched_seeds.py).

Each part writes its own record, ``results/cells/<name>@<k>.json``, with a
``part`` entry (``of``, ``index``, ``parts``, ``first_seed``, ``seeds``,
``title``). :func:`merge` joins the parts of a cell into one record for the
tables: per-seed metrics concatenated in seed order, their mean and spread
recomputed, the provenance of every part kept, and the parts still missing
named in the title so an incomplete cell never reads as a finished one.
"""

from minimal_attn.errors import InputError

SEP = "@"


def split_name(name):
    """``(cell name, part index)`` of ``name``; the index is None for a whole cell."""
    base, sep, index = name.partition(SEP)
    if not sep:
        return name, None
    if not index.isdigit() or int(index) < 1:
        raise InputError(f"cell part {name!r}: a part is named CELL{SEP}K with K = 1, 2, ... "
                         "(`attn-dyn cells list` names the cells and their parts)")
    return base, int(index)


def part_name(name, index):
    return f"{name}{SEP}{index}"


def part_seeds(seeds, parts, index):
    """``(first seed, number of seeds)`` of part ``index`` (1-based) of ``parts``."""
    if seeds % parts:
        raise ValueError(f"{seeds} seeds do not split into {parts} equal parts")
    if not 1 <= index <= parts:
        raise InputError(f"part {index} does not exist: this cell has parts 1..{parts}")
    size = seeds // parts
    return (index - 1) * size, size


def complete(record):
    """True when no seed of ``record`` was cut short and, for a joined record, every
    part is present."""
    result = record.get("result") or {}
    if any((result.get("time_limited") or {}).values()):
        return False
    joined = record.get("parts")
    return joined is None or len(joined["present"]) == joined["of"]


def training_done(record):
    """How far ``record``'s training got: epochs summed over its seeds (Table 1), steps
    summed over its models (Table 2) or the steps of its seeds (synthetic); None when the
    record does not say (a cell without a time limit, always complete)."""
    result = record.get("result") or {}
    if result.get("epochs_run"):
        return sum(result["epochs_run"].values())
    steps = result.get("steps_run")
    if isinstance(steps, dict):
        return sum(steps.values())
    return steps


def merge(records):
    """The records as the tables show them: one row per cell. A complete record wins
    (the whole cell's, else its joined parts); while neither is complete, a partial
    whole record and the joined parts are shown side by side."""
    wholes = {r["cell"]: r for r in records if "part" not in r}
    groups = {}
    for r in records:
        if "part" in r:
            groups.setdefault(r["part"]["of"], []).append(r)
    out = [r for name, r in wholes.items() if name not in groups or complete(r)]
    for name, parts in sorted(groups.items()):
        whole = wholes.get(name)
        if whole is not None and complete(whole):
            continue
        joined = join(name, sorted(parts, key=lambda r: r["part"]["index"]))
        out += [joined] if complete(joined) or whole is None else [whole, joined]
    return out


def check_split(name, parts):
    """Refuse part records of cell ``name`` that are not one split of its seeds: parts
    of different splits (a cell re-cut into another number of parts) or seed blocks that
    overlap would count a seed twice in the joined row."""
    def label(p):
        return f"{name}{SEP}{p['part']['index']}"

    splits = {}
    for p in parts:
        splits.setdefault(p["part"]["parts"], []).append(label(p))
    if len(splits) > 1:
        found = "; ".join(f"{', '.join(names)} of {n}" for n, names in sorted(splits.items()))
        raise InputError(f"the part records of cell {name} come from different splits "
                         f"({found}): keep one split's records under results/cells and "
                         "delete the others'")
    blocks = sorted((p["part"]["first_seed"], p["part"]["seeds"], label(p)) for p in parts
                    if p["part"]["seeds"] > 0)
    for (a, n, one), (b, _, other) in zip(blocks, blocks[1:]):
        if b < a + n:
            raise InputError(f"the part records {one} and {other} both hold seed {b}: "
                             "delete the one that should not count")


def join(name, parts):
    """One record of cell ``name`` from its part records (sorted by index; refused by
    :func:`check_split` unless they are one split of the cell's seeds)."""
    from minimal_attn.experiments.results_store import summarise  # (it imports this module)

    check_split(name, parts)
    first, n = parts[0], parts[0]["part"]["parts"]
    present = [p["part"]["index"] for p in parts]
    title = first["part"]["title"]
    if len(present) < n:
        title += f" (**parts {', '.join(map(str, present))} of {n}**)"
    results = [p["result"] for p in parts]
    if first["kind"] == "table1":
        result = {split: {k: summarise([v for r in results for v in r[split][k]["per_seed"]])
                          for k in ("accuracy", "saif")} for split in ("train", "test")}
        result["train_seconds"] = sum(r.get("train_seconds") or 0.0 for r in results)
        if all("seeds" in r for r in results):
            result["seeds"] = [s for r in results for s in r["seeds"]]
        for key in ("stopped_epochs", "epochs_run", "time_limited"):
            result[key] = {seed: v for r in results for seed, v in (r.get(key) or {}).items()}
        diverged = {seed: v for r in results for seed, v in (r.get("diverged") or {}).items()}
        if diverged:
            result["diverged"] = diverged
        if all("test_seen" in r for r in results):      # the parts share their mosaics
            result["test_seen"] = _join_seen([r["test_seen"] for r in results])
    else:                  # synthetic: fractions over seeds (a part may lack a condition:
        result = {"conditions": {}}              # the multi-head cell's screening parts)
        names = dict.fromkeys(c for r in results for c in r["conditions"])
        for cond in names:
            entries = [r["conditions"][cond] for r in results if cond in r["conditions"]]
            seeds = sum(e["seeds"] for e in entries)
            result["conditions"][cond] = {"seeds": seeds, **{
                f: sum(e[f] * e["seeds"] for e in entries) / seeds
                for f in ("converged_fraction", "failed_fraction")}}
        skipped = {k: v for r in results for k, v in (r.get("skipped") or {}).items()}
        if skipped:
            result["skipped"] = skipped
        cut = {f"part {p['part']['index']}": any((r.get("time_limited") or {}).values())
               for p, r in zip(parts, results)}
        if any(cut.values()):
            result["time_limited"] = cut
            result["steps_run"] = min(r.get("steps_run", 0) for r in results
                                      if any((r.get("time_limited") or {}).values()))
    settings = dict(first["settings"], seeds=sum(p["part"]["seeds"] for p in parts))
    for key in ("first_seed", "candidates"):
        settings.pop(key, None)
    return {"format": first["format"], "cell": name, "kind": first["kind"],
            "scale": first["scale"], "title": title, "settings": settings, "result": result,
            "paper": first.get("paper"), "parts": {"present": present, "of": n},
            "provenance": _provenance([p["provenance"] for p in parts])}


def _join_seen(parts):
    """The parts' seen/unseen test scores (:mod:`.seen_images`) over all their seeds."""
    from minimal_attn.experiments.results_store import summarise

    out = {k: parts[0][k] for k in ("fraction_seen", "n_seen", "n_unseen")}
    for group in ("seen", "unseen"):
        entries = [p[group] for p in parts]
        out[group] = None if None in entries else {
            k: None if any(e[k] is None for e in entries) else
            summarise([v for e in entries for v in e[k]["per_seed"]])
            for k in ("accuracy", "saif")}
    return out


def _provenance(provs):
    """The parts' provenance in one: each distinct card and commit, the latest date,
    the wall time summed, dirty when any part was."""
    def distinct(key, short=None):
        seen = [p.get(key) or "?" for p in provs]
        return ",".join(dict.fromkeys(s[:short] if short else s for s in seen))

    dirty = [p.get("dirty") for p in provs]
    return {"card": distinct("card"), "commit": distinct("commit", 9),
            "dirty": True if any(dirty) else (None if None in dirty else False),
            "date": max(p.get("date") or "?" for p in provs),
            "wall_seconds": round(sum(p.get("wall_seconds") or 0.0 for p in provs), 1),
            "parts": provs}
