"""Mutation audit of the results store's record checks (results_shape.shape_problem, read by
results_store.parse_record): each record below breaks one part of the documented shape
that the tables read, and a check weakened by one operator (all -> any, or -> and, ...)
let it through to crash a table or print a row the record does not hold."""

import copy
import json
import math
from pathlib import Path

import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments import results_store
from minimal_attn.experiments.results_tables import render

ROOT = Path(__file__).resolve().parent.parent
#: One good record of each kind from the repository's store (as test_cells_bad_records).
GOOD = {name: json.loads((ROOT / "results" / "cells" / f"{name}.json").read_text())
        for name in ("t1-cifar10-m5-authors-sa", "t2-sst2", "permute-copy@1",
                     "t1-cifar10-m5-released-ha@1")}
T1, T2, SYN, SEEN = ("t1-cifar10-m5-authors-sa", "t2-sst2", "permute-copy@1",
                     "t1-cifar10-m5-released-ha@1")


def _parse(name, change=None):
    record = copy.deepcopy(GOOD[name])
    if change is not None:
        change(record)
    return results_store.parse_record(json.dumps(record).encode(), f"{name}.json", name)


def _set(path, value):
    """A change setting ``record[path[0]][path[1]]... = value``."""
    def change(record):
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _first_seed_as_text(record):
    seeds = record["result"]["test"]["saif"]["per_seed"]
    seeds[0] = str(seeds[0])


BROKEN = [
    # per-seed metrics: every entry a number, not its text (which float() would still read,
    # giving the stored mean)
    ("a per_seed entry a string", T1, _first_seed_as_text),
    # the stored mean must be the per-seed mean: NaN is not the mean of finite numbers
    ("a stored mean NaN over finite seeds", T1, _set(("result", "test", "saif", "mean"),
                                                     float("nan"))),
    ("a stored std NaN over finite seeds", T1, _set(("result", "test", "accuracy", "std"),
                                                    float("nan"))),
    # provenance: card and commit strings (or absent), wall_seconds a number
    ("provenance commit a number", T1, _set(("provenance", "commit"), 123)),
    ("provenance card a number", T2, _set(("provenance", "card"), 7)),
    ("provenance wall_seconds a string", T1, _set(("provenance", "wall_seconds"), "253")),
    # the paper's numbers: Table 1 needs both saif and accuracy, Table 2 a row of numbers
    ("table1 paper without accuracy", T1, _set(("paper",), {"saif": 37.1})),
    ("table1 paper without saif", T1, _set(("paper",), {"accuracy": 75.3})),
    ("table2 paper row with a string", T2, _set(("paper", "row", 3), "25")),
    # steps_run: a number, or a number per model
    ("steps_run a model's steps a string", T2, _set(("result", "steps_run"), {"standard": "9"})),
    ("steps_run a string", SYN, _set(("result", "steps_run"), "3000")),
    # the seen / unseen test scores: the fractions are numbers
    ("test_seen fraction a string", SEEN, _set(("result", "test_seen", "fraction_seen"),
                                               "0.4923")),
    ("test_seen n_unseen missing", SEEN, lambda r: r["result"]["test_seen"].pop("n_unseen")),
    # synthetic conditions: a count of seeds >= 0 and two fractions
    ("synthetic seeds negative", SYN, _set(("result", "conditions", "control", "seeds"), -1)),
    ("synthetic converged_fraction a string", SYN,
     _set(("result", "conditions", "control", "converged_fraction"), "1.0")),
    ("synthetic failed_fraction a string", SYN,
     _set(("result", "conditions", "control", "failed_fraction"), "0.0")),
    # screened candidates: one final accuracy per candidate
    ("synthetic candidates longer than final_accuracy", SYN,
     lambda r: r["result"].update(candidates=[1, 2], final_accuracy=[0.5])),
]


def test_the_good_records_pass():
    for name in GOOD:
        assert _parse(name) == GOOD[name]


@pytest.mark.parametrize("label, name, change", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_record_off_its_shape_is_refused(label, name, change):
    with pytest.raises(InputError, match=r"is a malformed cell record \(.*\): delete it"):
        _parse(name, change)


def test_a_refused_record_would_have_crashed_or_misprinted_the_tables():
    """Why the refusals above matter: the tables read exactly these entries."""
    t2 = copy.deepcopy(GOOD[T2])
    t2["paper"]["row"][3] = "25"
    with pytest.raises(ValueError):               # f"{v:g}" of a string
        render([t2])
    t1 = copy.deepcopy(GOOD[T1])
    t1["paper"] = {"saif": 37.1}
    with pytest.raises(KeyError):                 # the row prints saif / accuracy
        render([t1])
    t1 = copy.deepcopy(GOOD[T1])
    t1["result"]["test"]["saif"]["mean"] = float("nan")
    assert "nan ±" in render([t1])                # a row the per-seed numbers do not give
    assert not math.isnan(results_store.summarise(
        t1["result"]["test"]["saif"]["per_seed"])["mean"])
