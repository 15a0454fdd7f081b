r"""The shape of a cell record that the results tables read (:mod:`.results_tables`).

:func:`shape_problem` says, in a few words, what of a record is not shaped as the tables
and :mod:`.cell_parts` read it (None when nothing is), so that every reader of the store
refuses a malformed record in one line (:func:`.results_store.parse_record`) instead of
crashing a table: the types of its entries, a part inside its split, per-seed metrics
whose mean and sample standard deviation are the stored ones, and what each kind of cell
(V&R Table 1, Snell Table 2, the synthetic tasks) keeps in its result.
"""

import math

#: The scales a cell can have (paper, cpu, tiny), in the order the tables list them.
SCALES = ("paper", "cpu", "tiny")
#: The models of a Table 2 row, whose steps a time limit may have cut.
MODELS = ("standard", "second", "uniform", "frozen")


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _stat(entry):
    """A metric over seeds as :func:`.results_store.summarise` writes it: per-seed numbers
    and the mean and sample std they give (a whole record's row prints the stored ones,
    a joined cell's recomputes them, so the two must agree)."""
    from minimal_attn.experiments.results_store import summarise  # (it imports this module)

    if not (isinstance(entry, dict) and isinstance(entry.get("per_seed"), list)
            and entry["per_seed"] and all(_number(v) for v in entry["per_seed"])
            and _number(entry.get("mean")) and _number(entry.get("std"))):
        return False
    want = summarise(entry["per_seed"])
    return all(math.isclose(entry[k], want[k], rel_tol=1e-9, abs_tol=1e-12)
               or math.isnan(entry[k]) and math.isnan(want[k]) for k in ("mean", "std"))


def shape_problem(record):
    """What of ``record`` (one that :func:`.results_store.check_record` passed) is not
    shaped as these tables and :mod:`.cell_parts` read it, in a few words; None when
    nothing is (a malformed record must be refused where it is read, not crash a table)."""
    for key, kind, what in (("cell", str, "a string"), ("title", str, "a string"),
                            ("settings", dict, "an object"), ("provenance", dict, "an object"),
                            ("result", dict, "an object")):
        if not isinstance(record[key], kind):
            return f"its {key} is not {what}"
    prov, paper, part = record["provenance"], record.get("paper"), record.get("part")
    if ("date" in prov and not isinstance(prov["date"], str)) or not all(
            prov.get(k) is None or isinstance(prov[k], str) for k in ("card", "commit")) or \
            not (prov.get("wall_seconds") is None or _number(prov["wall_seconds"])):
        return "its provenance's date, card, commit or wall_seconds is not a string or number"
    if "m" in record["settings"] and not _number(record["settings"]["m"]):
        return "its settings' m is not a number"
    if paper is not None and not (isinstance(paper, dict) and (not paper or (
            record["kind"] != "table1" or all(k in paper for k in ("saif", "accuracy"))) and (
            record["kind"] != "table2" or isinstance(paper.get("row"), list)
            and all(_number(v) for v in paper["row"])))):
        return "its paper entry is not the paper's numbers for its kind"
    if part is not None and (record["kind"] == "table2" or record["cell"] != "{}@{}".format(
            part["of"], part["index"]) or not isinstance(part["title"], str) or not all(
            isinstance(part[k], int) for k in ("index", "parts", "first_seed", "seeds"))
            or not 1 <= part["index"] <= part["parts"] or part["seeds"] < 0):
        return (f"its part entry (of {part['of']!r}, index {part['index']!r}) does not "
                "match its cell name and kind")
    result = record["result"]
    for key in ("time_limited", "epochs_run", "stopped_epochs", "diverged", "skipped"):
        if result.get(key) is not None and not isinstance(result[key], dict):
            return f"its result's {key} is not an object"
    steps = result.get("steps_run")
    if not all(_number(v) for v in (result.get("epochs_run") or {}).values()) or not (
            steps is None or _number(steps) or isinstance(steps, dict)
            and all(_number(v) for v in steps.values())):
        return "its result's epochs_run or steps_run is not numbers"
    if result.get("train_seconds") is not None and not _number(result["train_seconds"]):
        return "its result's train_seconds is not a number"
    return {"table1": _table1_problem, "table2": _table2_problem,
            "synthetic": _synthetic_problem}[record["kind"]](result)


def _table1_problem(result):
    for split in ("train", "test"):
        for key in ("accuracy", "saif"):
            if not isinstance(result.get(split), dict) or not _stat(result[split].get(key)):
                return (f"its result has no {split} {key} as per_seed with the mean and "
                        "std they give")
    seeds = result.get("seeds")        # the seed of each per_seed entry (records since 11-28)
    if seeds is not None and not (
            isinstance(seeds, list) and all(isinstance(s, int) for s in seeds)
            and len(set(seeds)) == len(seeds) == len(result["test"]["saif"]["per_seed"])):
        return "its result's seeds are not one distinct seed per per_seed entry"
    seen = result.get("test_seen")
    if seen is not None and not (
            isinstance(seen, dict)
            and all(_number(seen.get(k)) for k in ("fraction_seen", "n_seen", "n_unseen"))
            and all(g in seen and (seen[g] is None or isinstance(seen[g], dict) and all(
                k in seen[g] and (seen[g][k] is None or _stat(seen[g][k]))
                for k in ("accuracy", "saif"))) for g in ("seen", "unseen"))):
        return "its result's test_seen is not the seen and unseen test scores"
    return None


def _table2_problem(result):
    from minimal_attn.experiments.agreement_table import COLUMNS

    row, steps = result.get("row"), result.get("steps_run")
    if not isinstance(row, list) or len(row) != len(COLUMNS) or \
            not all(v is None or _number(v) for v in row):
        return f"its result's row is not a list of {len(COLUMNS)} numbers"
    if not _number(result.get("performance")) or \
            not isinstance(result.get("performance_name"), str):
        return "its result's performance is not a number with its name"
    unreached = result.get("unreached")
    if unreached is not None and not (isinstance(unreached, list)
                                      and all(c in COLUMNS for c in unreached)):
        return "its result's unreached is not a list of its row's columns"
    cut = [m for m in MODELS if (result.get("time_limited") or {}).get(m)]
    if cut and not (isinstance(steps, dict) and all(m in steps for m in cut)):
        return "its result's steps_run does not say where the time limit stopped each model"
    return None


def _synthetic_problem(result):
    conditions = result.get("conditions")
    if not isinstance(conditions, dict) or not all(
            isinstance(c, dict) and isinstance(c.get("seeds"), int) and c["seeds"] >= 0
            and _number(c.get("converged_fraction")) and _number(c.get("failed_fraction"))
            for c in conditions.values()):
        return "its result's conditions are not seeds and fractions by condition"
    if any((result.get("time_limited") or {}).values()) and not _number(
            result.get("steps_run")):
        return "its result is cut by a time limit but says no steps_run"
    screened = [result.get(k) for k in ("candidates", "final_accuracy") if k in result]
    if screened and not (len(screened) == 2 and all(isinstance(v, list) for v in screened)
                         and len(screened[0]) == len(screened[1])):
        return "its result's candidates and final_accuracy are not lists of one length"
    return None
