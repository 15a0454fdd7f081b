"""A cell's parts: each trains its block of the seeds as the whole cell would, writes its
own record, and the tables join the parts into one row that says which are missing."""

import json
import os
import statistics

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_parts, cells, results_store
from minimal_attn.experiments.cell_costs import (
    JOB_SECONDS,
    M_EXPONENT,
    STEP_MS,
    choose_parallel,
    estimate_seconds,
    plan_job,
    shared_slowdown,
)
from minimal_attn.experiments.step_probe import pick_step, probe_scale, variant_name


def test_part_names_and_their_seeds():
    part = cells.get_cell("t1-cifar10-m5-authors-ha@2")
    assert part.settings["first_seed"] == 3 and part.settings["seeds"] == 3
    assert part.part == {"of": "t1-cifar10-m5-authors-ha", "index": 2, "parts": 4,
                         "first_seed": 3, "seeds": 3,
                         "title": cells.get_cell("t1-cifar10-m5-authors-ha").title}
    assert "seeds 3-5" in part.title
    # the parts of a cell cover its seeds once each, in order
    for name in ("t1-cifar10-m5-paper-lv", "t1-cifar10-m20-authors-sa", "permute-copy-hybrid"):
        whole = cells.get_cell(name)
        seeds = [s for p in cells.parts(whole) for s in range(
            p.settings["first_seed"], p.settings["first_seed"] + p.settings["seeds"])]
        assert seeds == list(range(cells.seed_count(whole))), name
    for bad, match in (("t1-cifar10-m5-authors-ha@5", "parts 1..4"),
                       ("t1-cifar10-m5-authors-ha@0", "CELL@K"),
                       ("t1-cifar10-m5-authors-ha@x", "CELL@K"),
                       ("t2-sst2@1", "no parts"), ("t9@1", "unknown cell")):
        with pytest.raises(InputError, match=match):
            cells.get_cell(bad)


def _part(name, index, parts, per_seed, epochs, cut=(), commit="a" * 40, card="H200",
          first=None):
    """A hand-made part record of a Table 1 cell: per_seed test SAIF and accuracy; its
    seeds from ``first`` (default: as if every part had as many seeds as this one)."""
    first = (index - 1) * len(per_seed) if first is None else first
    seeds = [str(first + i) for i in range(len(per_seed))]
    stat = results_store.summarise(per_seed)
    return {"format": 1, "cell": f"{name}@{index}", "kind": "table1", "scale": "paper",
            "title": f"T, part {index}", "settings": {"m": 5, "seeds": len(per_seed),
                                                      "first_seed": first},
            "result": {"train": {"accuracy": stat, "saif": stat},
                       "test": {"accuracy": stat, "saif": stat}, "train_seconds": 10.0,
                       "stopped_epochs": dict(zip(seeds, epochs)),
                       "epochs_run": dict(zip(seeds, epochs)),
                       "time_limited": {s: s in cut for s in seeds}},
            "paper": {"saif": 37.8, "accuracy": 63.3},
            "part": {"of": name, "index": index, "parts": parts, "first_seed": first,
                     "seeds": len(per_seed), "title": "T"},
            "provenance": {"card": card, "commit": commit, "dirty": False,
                           "date": f"2026-11-2{index}T00:00:00+00:00", "wall_seconds": 100.0}}


def test_joined_parts_recompute_mean_and_spread_over_all_seeds():
    values = [[0.5, 0.25], [0.75, 1.0], [0.125, 0.375]]
    records = [_part("c", k + 1, 3, v, [30 + k, 31 + k]) for k, v in enumerate(values)]
    records[2]["provenance"]["commit"] = "b" * 40
    [joined] = cell_parts.merge(records[::-1])                 # order on disk does not matter
    flat = [x for v in values for x in v]
    saif = joined["result"]["test"]["saif"]
    assert saif["per_seed"] == flat
    assert saif["mean"] == pytest.approx(statistics.mean(flat))
    assert saif["std"] == pytest.approx(statistics.stdev(flat))
    assert joined["result"]["epochs_run"] == {"0": 30, "1": 31, "2": 31, "3": 32, "4": 32,
                                              "5": 33}
    assert joined["parts"] == {"present": [1, 2, 3], "of": 3}
    assert joined["title"] == "T" and cell_parts.complete(joined)
    p = joined["provenance"]
    assert p["wall_seconds"] == 300.0 and p["commit"] == "a" * 9 + "," + "b" * 9
    assert p["date"].startswith("2026-11-23") and len(p["parts"]) == 3
    assert "seeds" not in joined["settings"] or joined["settings"]["seeds"] == 6


def test_a_missing_or_cut_part_leaves_the_cell_unfinished_and_says_so():
    two = [_part("c", 1, 3, [0.5], [30]), _part("c", 3, 3, [0.25], [31], cut={"2"})]
    [joined] = cell_parts.merge(two)
    assert "**parts 1, 3 of 3**" in joined["title"] and not cell_parts.complete(joined)
    text = results_store.render(two)
    assert "parts 1, 3 of 3" in text and "1 cut by time limit" in text
    assert "2 parts" in text                                      # the provenance column
    # a complete whole record wins over parts; a partial one is shown beside them
    whole = dict(_part("c", 1, 1, [0.5, 0.5, 0.5], [30] * 3), cell="c", title="whole")
    del whole["part"]
    assert cell_parts.merge(two + [whole]) == [whole]
    whole["result"]["time_limited"]["0"] = True
    assert len(cell_parts.merge(two + [whole])) == 2
    # ... and complete parts win over a partial whole record
    three = two + [_part("c", 2, 3, [0.75], [32])]
    three[1]["result"]["time_limited"]["2"] = False
    [joined] = cell_parts.merge(three + [whole])
    assert joined["parts"] == {"present": [1, 2, 3], "of": 3} and joined["title"] == "T"


def test_synthetic_parts_add_their_fractions_by_seeds():
    def rec(k, seeds, converged):
        return {"kind": "synthetic", "format": 1, "scale": "paper", "title": f"P{k}",
                "settings": {}, "cell": f"p@{k}",
                "result": {"conditions": {"permutation": {
                    "seeds": seeds, "converged_fraction": converged / seeds,
                    "failed_fraction": 1 - converged / seeds}}},
                "part": {"of": "p", "index": k, "parts": 2, "first_seed": 5 * (k - 1),
                         "seeds": seeds, "title": "P"},
                "provenance": {"card": "H100", "commit": "c" * 40, "date": "2026",
                               "wall_seconds": 1.0}}

    [joined] = cell_parts.merge([rec(1, 5, 1), rec(2, 5, 4)])
    c = joined["result"]["conditions"]["permutation"]
    assert c["seeds"] == 10 and c["converged_fraction"] == pytest.approx(0.5)
    assert c["failed_fraction"] == pytest.approx(0.5)
    assert cell_parts.complete(joined) and "time_limited" not in joined["result"]
    cut = rec(2, 5, 4)
    cut["result"].update(time_limited={"all": True}, steps_run=1500)
    [joined] = cell_parts.merge([rec(1, 5, 1), cut])
    assert not cell_parts.complete(joined) and joined["result"]["steps_run"] == 1500
    assert joined["result"]["time_limited"] == {"part 1": False, "part 2": True}


def test_tiny_parts_train_their_seeds_as_the_whole_cell_does(tmp_path, torch_one_thread):
    """Part 2 of the tiny cell trains seed 1 alone; the whole cell trains seeds 0 and 1
    as one batched model: seed 1's numbers agree, and the joined parts are finished."""
    pytest.importorskip("torch")
    results = tmp_path / "r"
    whole = cells.run_cell("tiny-t1-synthetic-sa", None, str(tmp_path / "whole"),
                           str(tmp_path / "w"), device="cpu")
    assert not cells.finished("tiny-t1-synthetic-sa", str(results))
    one = cells.run_cell("tiny-t1-synthetic-sa@1", None, str(results), str(tmp_path / "w"),
                         device="cpu")
    assert not cells.finished("tiny-t1-synthetic-sa", str(results))      # part 2 missing
    assert cells.unfinished(str(results), scale="tiny")[0] == "tiny-t1-synthetic-sa@2"
    two = cells.run_cell("tiny-t1-synthetic-sa@2", None, str(results), str(tmp_path / "w"),
                         device="cpu")
    assert cells.finished("tiny-t1-synthetic-sa", str(results))
    assert "tiny-t1-synthetic-sa@2" not in cells.unfinished(str(results), scale="tiny")
    assert one["part"]["first_seed"] == 0 and two["part"]["first_seed"] == 1
    assert two["settings"]["first_seed"] == 1 and two["settings"]["seeds"] == 1
    for split in ("train", "test"):
        for k in ("accuracy", "saif"):
            assert [one["result"][split][k]["per_seed"][0],
                    two["result"][split][k]["per_seed"][0]] == pytest.approx(
                whole["result"][split][k]["per_seed"], abs=1e-9), (split, k)
    saved = json.loads((results / "cells" / "tiny-t1-synthetic-sa@2.json").read_text())
    assert saved["part"]["of"] == "tiny-t1-synthetic-sa"
    text = results_store.render(results_store.read_cells(str(results)))
    assert text.count("synthetic images, m = 3, sa (smoke cell)") == 1 and "2 parts" in text


def test_a_job_plan_follows_the_scripts_rules():
    # one at a time, 300 s: a (100 s) runs, b (250 s) would not fit the 200 s left and
    # is skipped, c (150 s) runs; then 50 s are left, under min_start
    rows = plan_job([("a", 100), ("b", 250), ("c", 150), ("d", 10)], 300, min_start=60)
    assert [s.split(" (")[0] for _, s in rows] == [
        "would run from 0 s", "would skip", "would run from 100 s", "would skip"]
    assert "only 50 s left" in rows[3][1]
    # two at a time: the first two always start, even when longer than the budget
    rows = plan_job([("a", 400), ("b", 10), ("c", 10)], 300, parallel=2, min_start=0)
    slow = shared_slowdown(2)
    assert rows[0][1] == "would run from 0 s, cut by the budget"
    assert rows[2][1] == f"would run from {10 * slow:.0f} s"
    # together, p processes get through 1 + (speedup_at_4 - 1) (p - 1) / 3 times one's work
    assert shared_slowdown(1) == 1 and shared_slowdown(4, 1.85) == pytest.approx(4 / 1.85)
    assert 2 / shared_slowdown(2, 1.6) == pytest.approx(1.2)
    assert all(shared_slowdown(p) < shared_slowdown(p + 1) for p in range(1, 8))


def test_a_job_runs_as_many_side_by_side_as_finish_the_most_cells():
    long = [(f"ha@{k}", 200.0) for k in range(1, 5)]
    # two at a time each take 200 * 1.95 = 391 s, inside 500 - 60, and no more start;
    # three take 573 s and four 748 s, so every cell would be cut; one at a time
    # finishes two as well (the third would start with under 150 s left): the tie goes
    # to two
    assert 200 * shared_slowdown(2) < 440 < 200 * shared_slowdown(3)
    assert choose_parallel(long, 500, margin=60) == (2, 2)
    rows = plan_job(long, 500, parallel=2, margin=60)
    assert [s for _, s in rows[:2]] == ["would run from 0 s"] * 2
    assert all(s.startswith("would skip") for _, s in rows[2:])
    # 60 s less and the pair is cut by the margin: one at a time finishes one
    assert choose_parallel(long, 440, margin=60) == (1, 1)
    assert plan_job(long, 440, parallel=2, margin=60)[0][1].endswith("cut by the budget")
    # short cells finish under any count: the tie goes to the most side by side
    assert choose_parallel([(f"s{k}", 60.0) for k in range(4)], 500, margin=60) == (4, 4)
    assert choose_parallel(long, 500, most=1, margin=60) == (1, 2)


def test_the_step_probe_takes_a_captured_way_only_when_tested_and_faster():
    eager, graph, comp = ("batched (grouped_nchw)", "batched (grouped_nchw, cudagraph)",
                          "batched (grouped_nchw, compile)")
    timed = {eager: {"seconds": 3.0}, graph: {"seconds": 1.5}, comp: {"seconds": 2.0}}
    mode, way, gain, reason = pick_step(timed, tests_passed=True)
    assert (mode, way, gain) == ("grouped_nchw", "cudagraph", 2.0)
    assert "compile 1.50x" in reason
    # untested, or not fast enough: eager, and the reason gives the measured ratios
    mode, way, gain, reason = pick_step(timed, tests_passed=False)
    assert (mode, way, gain) == ("grouped_nchw", "none", 1.0)
    assert "did not pass" in reason and "2.00x" in reason
    _, way, _, reason = pick_step({eager: {"seconds": 1.0}, graph: {"seconds": 0.95}}, True)
    assert way == "none" and "1.05x" in reason
    assert pick_step({eager: {"seconds": 1.0}, graph: {"seconds": 0.9}}, True,
                     min_gain=1.05)[1] == "cudagraph"
    assert pick_step({eager: {"seconds": 1.0}}, True)[:2] == ("grouped_nchw", "none")
    # a tie goes to the CUDA graph (no compiler in the way)
    assert pick_step({eager: {"seconds": 2.0}, graph: {"seconds": 1.0},
                      comp: {"seconds": 1.0}}, True)[1] == "cudagraph"
    with pytest.raises(InputError, match="must time the baseline"):
        pick_step({graph: {"seconds": 1.0}}, True)


def test_the_estimates_scale_by_the_probes_own_step_time():
    """The H200's probe of 2026-11-28: 30 steps of 3 seeds in 0.157 s as a CUDA graph,
    where the eager baseline took 0.269 s (1.71x). The estimates scale by the model's
    30 eager steps over the graph's measured time, not by the 1.71x."""
    probe = {"seeds": 3, "m": 5, "batch": 100, "n_train": 3000, "epochs": 1, "width": 1.0,
             "variants": {"batched (grouped_nchw)": {"seconds": 0.269},
                          "batched (grouped_nchw, cudagraph)": {"seconds": 0.157}}}
    name = variant_name("grouped_nchw", "cudagraph")
    fixed, per_seed = STEP_MS["h200"]
    assert probe_scale(probe, name, "h200") == pytest.approx(
        30 * (fixed + 3 * per_seed) / 1000 / 0.157)
    # half the batch: twice the steps, each with the fixed part and half the per-seed
    # part (launches do not shrink with the batch); m = 20: the per-seed part grows
    half = dict(probe, batch=50)
    assert probe_scale(half, name, "h200") == pytest.approx(
        60 * (fixed + 3 * per_seed / 2) / 1000 / 0.157)
    wide = dict(probe, m=20)
    assert probe_scale(wide, name, "h100") == pytest.approx(30 * (
        STEP_MS["h100"][0] + 3 * STEP_MS["h100"][1] * 4 ** M_EXPONENT["h100"]) / 1000 / 0.157)
    assert probe_scale(probe, variant_name("grouped_nchw", "none"), "h200") == pytest.approx(
        probe_scale(probe, name, "h200") * 0.157 / 0.269)
    # a probe at another width than the cells' says nothing of their speed
    assert probe_scale(dict(probe, width=0.25), name, "h200") is None
    with pytest.raises(InputError, match="card must be one of"):
        probe_scale(probe, name, "a100")


def test_the_step_probe_picks_the_conv_mode_with_the_way():
    timed = {"batched (grouped_nchw)": {"seconds": 4.0},
             "batched (grouped_nchw, cudagraph)": {"seconds": 3.0},
             "batched (loop)": {"seconds": 5.0},
             "batched (loop, cudagraph)": {"seconds": 1.0},
             "batched (loop, cudagraph, bf16)": {"seconds": 0.5}}   # another arithmetic
    mode, way, gain, reason = pick_step(timed, tests_passed=True)
    assert (mode, way, gain) == ("loop", "cudagraph", 4.0)
    assert "loop 0.80x" in reason and "grouped_nchw cudagraph 1.33x" in reason
    assert pick_step(timed, tests_passed=False)[:3] == ("grouped_nchw", "none", 1.0)
    # another mode eagerly, faster: taken; on a tie the baseline's mode wins
    fast_loop = {"batched (grouped_nchw)": {"seconds": 2.0}, "batched (loop)": {"seconds": 1.0},
                 "batched (grouped_nchw, cudagraph)": {"seconds": 1.0}}
    assert pick_step(fast_loop, True)[:2] == ("grouped_nchw", "cudagraph")
    del fast_loop["batched (grouped_nchw, cudagraph)"]
    assert pick_step(fast_loop, True)[:3] == ("loop", "none", 2.0)


def test_a_cell_cut_into_parts_has_parts_that_fit_one_job():
    """Issue 19's rule: a part is what one GPU job runs, so every part of a paper-size
    cell is estimated to finish within a job on an H100 (a Table 2 row, which cannot be
    cut, is whole); the multi-head rescue is cut (its screening in parts too)."""
    assert cells.get_cell("multihead-8").parts > 1
    for cell in cells.all_cells().values():
        if cell.scale == "paper" and cell.parts > 1:
            for part in cells.parts(cell):
                assert estimate_seconds(part, "h100") <= JOB_SECONDS, part.name


def test_multihead_parts_screen_then_train_as_the_whole_cell_does(tmp_path, torch_one_thread):
    """The tiny multi-head cell: parts 1-2 screen two candidate heads each, parts 3-4
    train one seed each from the pool they label together; a training part waits for
    (and is refused without) the screening parts. The candidates' accuracies and the
    seeds' curves equal the whole cell's, which screens and trains in one run."""
    pytest.importorskip("torch")
    name, results, work = "tiny-multihead", tmp_path / "r", tmp_path / "w"
    whole = cells.run_cell(name, None, str(tmp_path / "whole"), str(work), device="cpu")
    assert set(whole["result"]["conditions"]) | set(whole["result"]["skipped"]) == {
        "candidate", "independent", "one-good", "all-bad"}
    assert [cells.needs(p) for p in cells.parts(cells.get_cell(name))] == [
        [], [], [f"{name}@1", f"{name}@2"], [f"{name}@1", f"{name}@2"]]
    with pytest.raises(InputError, match=f"no complete record of {name}@1, {name}@2: "):
        cells.run_cell(f"{name}@3", None, str(results), str(work), device="cpu")
    assert not (results / "cells").exists()
    assert [n for n in cells.unfinished(str(results), "tiny") if n.startswith(name)] == [
        f"{name}@1", f"{name}@2"]                     # the training parts wait
    assert [n for n in cells.waiting(str(results), "tiny") if n.startswith(name)] == [
        f"{name}@3", f"{name}@4"]
    screens = [cells.run_cell(f"{name}@{k}", None, str(results), str(work), device="cpu")
               for k in (1, 2)]
    assert [n for n in cells.unfinished(str(results), "tiny") if n.startswith(name)] == [
        f"{name}@3", f"{name}@4"]
    assert not [n for n in cells.waiting(str(results), "tiny") if n.startswith(name)]
    trains = [cells.run_cell(f"{name}@{k}", None, str(results), str(work), device="cpu")
              for k in (3, 4)]
    assert cells.finished(name, str(results))

    whole_out = json.loads((work / name / "results.json").read_text())
    screened = [a for r in screens for a in r["result"]["final_accuracy"]]
    assert [c for r in screens for c in r["result"]["candidates"]] == [0, 1, 2, 3]
    assert screened == pytest.approx(whole_out["head_pool"]["final_accuracy"], abs=1e-6)
    for k, seed in ((3, 0), (4, 1)):
        out = json.loads((work / f"{name}@{k}" / "results.json").read_text())
        mine = {(s["condition"], s["seed"]): s["accuracy"] for c in out["conditions"].values()
                for s in c["seeds"]}
        theirs = {(s["condition"], s["seed"]): s["accuracy"]
                  for c in whole_out["conditions"].values() for s in c["seeds"]
                  if s["seed"] == seed}
        assert mine.keys() == theirs.keys() and mine
        for key in mine:
            assert mine[key] == pytest.approx(theirs[key], abs=1e-6), key
        assert out["pool_seed"] == 0 and out["head_pool"]["good"] == whole_out["head_pool"][
            "good"]
    assert trains[0]["settings"]["pool_from"] == [f"{name}@1", f"{name}@2"]
    [joined] = cell_parts.merge([r for r in results_store.read_cells(str(results))])
    for cond, c in whole["result"]["conditions"].items():
        assert joined["result"]["conditions"][cond] == pytest.approx(c), cond
    assert joined["result"]["skipped"] == whole["result"]["skipped"]
    text = results_store.render(results_store.read_cells(str(results)))
    assert "| candidate | 4 |" in text and "skipped:" in text


def test_a_head_pool_screened_otherwise_is_refused(tmp_path, torch_one_thread):
    """A training part reads the screening parts' records: one screened with other
    settings, or covering other candidates, is refused with the part to rerun."""
    pytest.importorskip("torch")
    name, results, work = "tiny-multihead", tmp_path / "r", tmp_path / "w"
    for k in (1, 2):
        cells.run_cell(f"{name}@{k}", None, str(results), str(work), device="cpu")
    path = results / "cells" / f"{name}@2.json"
    good = json.loads(path.read_text())
    for change, needle in (({"settings": dict(good["settings"], steps=7)}, f"{name}@2 screened"),
                           ({"result": dict(good["result"], candidates=[2, 9])}, "not 0..3")):
        path.write_text(json.dumps(dict(good, **change)))
        with pytest.raises(InputError, match=needle):
            cells.run_cell(f"{name}@3", None, str(results), str(work), device="cpu")
        assert not (results / "cells" / f"{name}@3.json").exists()


def test_status_says_what_the_store_holds_of_a_cell(tmp_path):
    """-, partial, k/K parts, done: from hand-made records of a two-part cell; the CLI's
    list shows the same."""
    store = tmp_path / "cells"
    store.mkdir()
    name = "tiny-t1-synthetic-sa"                           # 2 parts

    def put(index, cut):
        record = _part(name, index, 2, [0.5], [3], cut=("0",) if cut else ())
        (store / f"{name}@{index}.json").write_text(json.dumps(record))
    assert cells.status(name, str(tmp_path)) == "-"
    put(1, cut=True)
    assert cells.status(name, str(tmp_path)) == "partial"
    put(1, cut=False)
    assert cells.status(name, str(tmp_path)) == "1/2 parts"
    put(2, cut=False)
    assert cells.status(name, str(tmp_path)) == "done"
    assert cells.status("tiny-t1-synthetic-lv", str(tmp_path)) == "-"
    rows = json.loads(CliRunner().invoke(cli, ["cells", "list", "--json", "--results",
                                               str(tmp_path)]).output)
    assert {r["cell"]: r["status"] for r in rows}[name] == "done"


def test_cells_list_gives_parts_and_a_part_runs_from_the_command_line(tmp_path):
    runner = CliRunner()
    rows = json.loads(runner.invoke(cli, ["cells", "list", "--json"]).output)
    row = next(r for r in rows if r["cell"] == "t1-cifar10-m20-authors-sa")
    assert row["parts"] == 12
    assert row["minutes"]["h100"] < row["minutes_whole"]["h100"] / 6
    r = runner.invoke(cli, ["cells", "run", "t1-cifar10-m5-authors-sa@9",
                            "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "parts 1..4" in r.output and not (tmp_path / "r").exists()


def test_diverged_seeds_are_joined_and_counted_beside_the_seeds_that_trained():
    one, two = _part("c", 1, 2, [0.5, 0.25], [30, 31]), _part("c", 2, 2, [0.75], [32], first=2)
    two["result"]["diverged"] = {"3": "lv seed 3 diverged; lower the learning rate lr"}
    [joined] = cell_parts.merge([one, two])
    assert joined["result"]["diverged"] == two["result"]["diverged"]
    text = results_store.render([one, two])
    assert "| 3 (+1 diverged: seed 3) |" in text
    assert "diverged" not in results_store.render([one])


def test_parts_of_two_splits_or_overlapping_seeds_are_refused_not_joined(tmp_path):
    """The table would otherwise count a seed twice (a cell re-cut from 4 to 12 parts)."""
    parts = [_part("c", k, 4, [0.5, 0.25, 0.75], [30] * 3) for k in (1, 2)]
    stray = _part("c", 5, 12, [0.5], [30], first=4)                  # seed 4, again
    with pytest.raises(InputError, match=r"different splits \(c@1, c@2 of 4; c@5 of 12\)"):
        cell_parts.merge(parts + [stray])
    twice = _part("c", 3, 4, [0.5, 0.25, 0.75], [30] * 3, first=5)   # seeds 5-7: 5 twice
    with pytest.raises(InputError, match="c@2 and c@3 both hold seed 5"):
        cell_parts.merge(parts + [twice])
    # the report says so in one line, naming the files to delete
    store = tmp_path / "cells"
    store.mkdir()
    for r in parts + [stray]:
        (store / f"{r['cell']}.json").write_text(json.dumps(r))
    result = CliRunner().invoke(cli, ["cells", "report", "--results", str(tmp_path),
                                      "--readme", str(tmp_path / "none.md")])
    assert result.exit_code == 2 and "different splits" in result.output
    assert "Traceback" not in result.output and sorted(os.listdir(tmp_path)) == ["cells"]


@pytest.mark.parametrize("edit, match", [
    (lambda r: r["result"]["test"]["saif"].update(per_seed=[0.0, 0.0]), "std they give"),
    (lambda r: r["result"]["train"]["accuracy"].update(std=0.5), "std they give"),
    (lambda r: r["result"]["test"]["accuracy"].update(per_seed=[]), "std they give"),
    (lambda r: r["part"].update(index=3), "does not match its cell name"),
    (lambda r: r.update(cell="c@3") or r["part"].update(index=3), "part entry"),
    (lambda r: r["result"].update(seeds=[0, 0]), "one distinct seed per per_seed"),
    (lambda r: r["result"].update(seeds=[0]), "one distinct seed per per_seed")])
def test_a_record_whose_numbers_disagree_is_refused(tmp_path, edit, match):
    """A whole record's row prints its stored mean and std: they must be its per-seed
    numbers' (a joined row recomputes them), and a part must lie inside its split."""
    record = _part("c", 1, 2, [0.5, 0.25], [30, 31])
    record["result"]["seeds"] = [0, 1]
    assert results_store.parse_record(json.dumps(record), "f", "c@1") == record
    edit(record)
    with pytest.raises(InputError, match=match):
        results_store.parse_record(json.dumps(record), "f", record["cell"])


def test_a_table2_xi_never_reached_is_starred_and_an_undefined_entry_is_a_dash():
    from minimal_attn.experiments.agreement_table import COLUMNS

    row = [0.5] * len(COLUMNS)
    row[COLUMNS.index("A_alpha_beta")] = float("nan")
    record = {"format": 1, "cell": "t", "kind": "table2", "scale": "tiny", "title": "T",
              "settings": {}, "provenance": {"card": "CPU", "commit": "c" * 40},
              "result": {"row": row, "columns": list(COLUMNS), "performance": 0.8,
                         "performance_name": "accuracy", "unreached": ["xi_alpha_beta_uf"]}}
    line = next(x for x in results_store.render([record]).splitlines() if x.startswith("| T"))
    cells_ = [c.strip() for c in line.split("|")[3:3 + len(COLUMNS)]]
    assert cells_[COLUMNS.index("xi_alpha_beta_uf")] == "50.0*"
    assert cells_[COLUMNS.index("A_alpha_beta")] == "-"
    assert cells_.count("50.0") == len(COLUMNS) - 2
    record["result"]["unreached"] = ["not a column"]
    with pytest.raises(InputError, match="unreached"):
        results_store.parse_record(json.dumps(record), "f", "t")


def test_the_estimates_scale_by_each_cells_networks_and_paradigm():
    """The per-seed part of a step costs the mosaic's FLOPs against the calibration's (HA
    with the authors' LeNet on a card): the paper's classifier on HA, by its layers
    (A.2), against SA with it; a paper-protocol HA step then costs 1.5-1.8 SA's, as the
    H200 measured (1.56: 2026-11-26, seconds per epoch of the two cells)."""
    from minimal_attn.backends.vr.architectures import classifier_config, focus_config
    from minimal_attn.backends.vr.cost import forward_macs
    from minimal_attn.experiments.cell_costs import fcam_work
    from minimal_attn.experiments.cell_runners import fcam_config

    config = {p: fcam_config(cells.get_cell(f"t1-cifar10-m5-paper-{p}"), None, "cpu")
              for p in ("sa", "ha")}
    focus = forward_macs(focus_config("cifar10"))
    paper, lenet = (forward_macs(classifier_config("cifar10", 3, k)) for k in ("paper", "lenet"))
    assert fcam_work(config["ha"], "ha", "h200") == pytest.approx(
        (5 * focus + 5 * paper) / (5 * focus + 5 * lenet))
    assert fcam_work(config["sa"], "sa", "h200") == pytest.approx(
        (5 * focus + paper) / (5 * focus + 5 * lenet))
    assert fcam_work(config["sa"], "hybrid", "h200") == fcam_work(config["sa"], "ha", "h200")
    authors = fcam_config(cells.get_cell("t1-cifar10-m5-authors-sa"), None, "cpu")
    assert fcam_work(authors, "sa", "cpu") == 1.0                # the CPU's calibration
    step = {p: estimate_seconds(cells.get_cell(f"t1-cifar10-m5-paper-{p}"), "h200")
            for p in ("sa", "ha")}
    assert 1.5 < step["ha"] / step["sa"] < 1.8
