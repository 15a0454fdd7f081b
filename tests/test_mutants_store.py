"""Mutation audit of the results store (results_store) and of the parts of a cell
(cell_parts): refusals no test reached and joined numbers no test checked. Every expected
value follows the documented contract (the modules' docstrings), not a run of the code."""

import json
from pathlib import Path
from unittest import mock

import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_parts, results_store

ROOT = Path(__file__).resolve().parent.parent
GOOD_RECORD = "t2-sst2"


def _good():
    """The repository's record of t2-sst2 (a record every reader accepts)."""
    return json.loads((ROOT / "results" / "cells" / f"{GOOD_RECORD}.json").read_text())


@pytest.mark.parametrize("change, match", [
    (lambda r: 5, "is not a JSON object"),
    (lambda r: [r], "is not a JSON object"),
    (lambda r: dict(r, format=2), "has format 2"),
    (lambda r: dict(r, kind="table3"), "kind 'table3'"),
    (lambda r: dict(r, scale="huge"), "scale 'huge'"),
    (lambda r: dict(r, part={"of": "t2-sst2", "index": 1}), "malformed part entry"),
    (lambda r: dict(r, part=[1, 2]), "malformed part entry"),
])
def test_check_record_refuses_what_is_not_a_cell_record(change, match):
    data = json.dumps(change(_good())).encode()
    with pytest.raises(InputError, match=match):
        results_store.parse_record(data, "x.json", GOOD_RECORD)


def test_a_record_path_that_cannot_be_read_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "cells" / "t2-sst2.json"            # a folder with a record's name
    folder.mkdir(parents=True)
    with pytest.raises(InputError, match=r"cannot be read .*delete it or rerun its cell"):
        results_store.read_record(str(folder))


def test_a_readme_without_the_results_block_is_refused_and_nothing_written(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers here\n")
    results = tmp_path / "results"
    (results / "cells").mkdir(parents=True)
    with pytest.raises(InputError, match="has no results block"):
        results_store.write_report(str(results), readme=str(readme))
    assert readme.read_text() == "# no markers here\n"


def test_write_report_check_writes_nothing_and_a_write_writes_the_tables(tmp_path):
    results = tmp_path / "results"
    (results / "cells").mkdir(parents=True)
    stale = results_store.write_report(str(results), check=True)
    assert stale == [str(results / "README.md")] and not (results / "README.md").exists()
    assert results_store.write_report(str(results)) == [str(results / "README.md")]
    assert (results / "README.md").read_text().startswith("# Results")
    assert results_store.write_report(str(results), check=True) == []


@pytest.mark.parametrize("content", ['{"commit": "x"}', "[1, 2]", "not json"])
def test_a_damaged_code_history_starts_anew_with_an_unknown_entry(tmp_path, content):
    (tmp_path / results_store.CODE_HISTORY).write_text(content)
    history = results_store.code_history(str(tmp_path), ("abc", False))
    assert [h["commit"] for h in history] == ["unknown", "abc"]
    assert json.loads((tmp_path / results_store.CODE_HISTORY).read_text()) == history


@pytest.mark.parametrize("flags, dirty", [
    ([False, False], False), ([False, None], None), ([True, None], True), ([None, True], True),
])
def test_provenance_of_several_runs_is_dirty_if_any_tree_was(flags, dirty):
    """True if any run's tree was dirty; else unknown (None) if any is unknown; else False."""
    history = [{"commit": c, "dirty": f, "started": None} for c, f in zip("ab", flags)]
    prov = results_store.provenance(1.0, source=("b", flags[-1]), history=history,
                                    command=["x"])
    assert prov["dirty"] is dirty and prov["commit"] == "a,b"


def test_the_card_is_named_only_for_a_cuda_device():
    torch = pytest.importorskip("torch")
    with mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "get_device_name", return_value="Fake GPU"):
        assert results_store.provenance(1.0, device="cpu", source=(None, None),
                                        command=["x"])["card"] == "CPU"
        assert results_store.provenance(1.0, device="cuda:0", source=(None, None),
                                        command=["x"])["card"] == "Fake GPU"
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        assert results_store.provenance(1.0, device="cuda", source=(None, None),
                                        command=["x"])["card"] == "CPU"


# ------------------------------------------------------------------ parts of a cell
def test_part_seeds_are_equal_contiguous_blocks_and_other_parts_are_refused():
    assert [cell_parts.part_seeds(12, 4, k) for k in (1, 2, 3, 4)] == \
        [(0, 3), (3, 3), (6, 3), (9, 3)]
    with pytest.raises(ValueError, match="10 seeds do not split into 3 equal parts"):
        cell_parts.part_seeds(10, 3, 1)
    for index in (0, 5):
        with pytest.raises(InputError, match=r"does not exist: this cell has parts 1\.\.4"):
            cell_parts.part_seeds(12, 4, index)


def _stat(values):
    if not values:                                  # a part without seeds
        return {"per_seed": [], "mean": float("nan"), "std": 0.0}
    return results_store.summarise(values)


def _t1_part(index, parts, first, per_seed, seen=None, dirty=False):
    seeds = [str(first + i) for i in range(len(per_seed))]
    result = {"train": {"accuracy": _stat(per_seed), "saif": _stat(per_seed)},
              "test": {"accuracy": _stat(per_seed), "saif": _stat(per_seed)},
              "epochs_run": dict.fromkeys(seeds, 10), "time_limited": dict.fromkeys(seeds, False)}
    if seen is not None:
        result["test_seen"] = seen
    return {"format": 1, "cell": f"c@{index}", "kind": "table1", "scale": "cpu",
            "title": "T", "settings": {"m": 5}, "result": result,
            "part": {"of": "c", "index": index, "parts": parts, "first_seed": first,
                     "seeds": len(per_seed), "title": "T"},
            "provenance": {"card": "CPU", "commit": "a" * 40, "dirty": dirty,
                           "date": "2026-12-01", "wall_seconds": 1.0}}


def test_joined_parts_are_clean_only_when_every_part_was():
    for flags, dirty in (([False, False], False), ([False, None], None),
                         ([None, True], True)):
        parts = [_t1_part(1, 2, 0, [0.5], dirty=flags[0]),
                 _t1_part(2, 2, 1, [0.25], dirty=flags[1])]
        assert cell_parts.join("c", parts)["provenance"]["dirty"] is dirty


def test_a_seen_score_missing_from_one_part_is_missing_from_the_joined_cell():
    def seen(saif):
        return {"fraction_seen": 0.5, "n_seen": 5, "n_unseen": 5,
                "seen": {"accuracy": _stat([0.7]), "saif": saif}, "unseen": None}

    parts = [_t1_part(1, 2, 0, [0.5], seen=seen(_stat([0.4]))),
             _t1_part(2, 2, 1, [0.25], seen=seen(None))]
    joined = cell_parts.join("c", parts)["result"]["test_seen"]
    assert joined["seen"]["saif"] is None and joined["unseen"] is None
    assert joined["seen"]["accuracy"]["per_seed"] == [0.7, 0.7]


def test_a_part_without_seeds_holds_no_seed_and_overlaps_nothing():
    parts = [_t1_part(1, 3, 0, [0.5, 0.5]), _t1_part(2, 3, 1, []), _t1_part(3, 3, 2, [0.1])]
    cell_parts.check_split("c", parts)              # seeds 0, 1 and 2: no seed twice
    with pytest.raises(InputError, match="both hold seed 1"):
        cell_parts.check_split("c", [parts[0], _t1_part(2, 3, 1, [0.3])])


def test_joined_synthetic_parts_cut_by_time_limits_stop_at_the_earliest_step():
    def part(k, steps):
        return {"format": 1, "cell": f"p@{k}", "kind": "synthetic", "scale": "cpu",
                "title": "P", "settings": {},
                "result": {"conditions": {"x": {"seeds": 2, "converged_fraction": 1.0,
                                                "failed_fraction": 0.0}},
                           "time_limited": {"all": True}, "steps_run": steps},
                "part": {"of": "p", "index": k, "parts": 2, "first_seed": 2 * (k - 1),
                         "seeds": 2, "title": "P"},
                "provenance": {"card": "CPU", "commit": "c" * 40, "date": "2026",
                               "wall_seconds": 1.0}}

    joined = cell_parts.join("p", [part(1, 900), part(2, 400)])
    assert joined["result"]["steps_run"] == 400
