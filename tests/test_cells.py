"""Cells and the results store: a tiny cell writes its record with provenance, the pages
regenerate from the records, and the repository's README matches its results/ folder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_views, cells, results_store
from minimal_attn.experiments.cell_costs import estimate_seconds

ROOT = Path(__file__).resolve().parent.parent


def test_every_cell_has_an_estimate_and_the_authors_cells_come_first():
    names = list(cells.all_cells())
    assert names[:4] == [f"t1-cifar10-m5-authors-{p}" for p in ("sa", "ha", "lv", "hybrid")]
    # then the authors' released notebooks, and the issue's order: the paper's
    # protocol, Multi30k, the multi-head rescue, m = 20 (the released data first),
    # HateXplain, and the cells it does not name
    heads = [n.rsplit("-", 1)[0] for n in names]
    firsts = sorted(dict.fromkeys(heads), key=heads.index)
    assert firsts[:8] == ["t1-cifar10-m5-authors", "t1-cifar10-m5-released",
                          "t1-cifar10-m5-paper", "t2", "multihead", "t1-cifar10-m20-released",
                          "t1-cifar10-m20-authors", "t1-cifar10-m20-paper"]
    assert names[names.index("t2-multi30k") + 1] == "multihead-8"
    assert names.index("t1-hatexplain2-hybrid") < names.index("t2-sst2")
    for name, cell in cells.all_cells().items():
        assert cell.kind in results_store.KINDS and cell.scale in results_store.SCALES
        for card in ("h100", "h200", "cpu"):
            assert estimate_seconds(cell, card) > 0, (name, card)
        # a faster card never takes longer
        assert estimate_seconds(cell, "h200") <= estimate_seconds(cell, "h100")
    m20 = estimate_seconds(cells.get_cell("t1-cifar10-m20-authors-sa"), "h100")
    m5 = estimate_seconds(cells.get_cell("t1-cifar10-m5-authors-sa"), "h100")
    # four times the segments per seed; the fixed cost of a step does not grow with m
    assert 3 * m5 < m20 < 4 * m5
    # a hybrid epoch runs some steps as two (seeds in both phases): dearer than HA's
    for card in ("h100", "h200", "cpu"):
        ha, hybrid = (estimate_seconds(cells.get_cell(f"t1-cifar10-m5-authors-{p}@1"), card)
                      for p in ("ha", "hybrid"))
        assert 1.05 * ha < hybrid < 1.2 * ha, card
    # on the CPU a step per seed grows faster than m: the m = 20 cells of 30 epochs took
    # (their records) within a fifth of their estimates
    for name in ("cpu-t1-cifar10-m20-authors-long-sa", "cpu-t1-cifar10-m20-authors-long-lv"):
        took = json.loads((ROOT / "results" / "cells" / f"{name}.json").read_text())
        ratio = estimate_seconds(cells.get_cell(name), "cpu") / took["result"]["train_seconds"]
        assert 0.8 < ratio < 1.25, (name, ratio)
    # an agreement row: 4 x 4,000 steps at 0.03 s on an H200, its 4 models side by side
    # (1.85x one's work, as four host-bound processes shared a card), plus a minute; in turn
    # on the CPU at 0.065 s
    assert estimate_seconds(cells.get_cell("t2-sst2"), "h200") == pytest.approx(480 / 1.85 + 60)
    assert estimate_seconds(cells.get_cell("t2-sst2"), "cpu") == pytest.approx(1040 + 60)
    # a HateXplain cell: 12 seeds x 10 epochs at its embedding's seconds a seed-epoch
    assert estimate_seconds(cells.get_cell("t1-hatexplain2-lv"), "cpu") == \
        pytest.approx(120 * 1.65)
    # the permutation copy: 3,000 steps of 40 runs at 0.13 s a step on an H200, 6 s on the CPU
    copy = cells.get_cell("permute-copy")
    assert estimate_seconds(copy, "h200") == pytest.approx(3000 * 0.13)
    assert estimate_seconds(copy, "cpu") == pytest.approx(3000 * 6.0)
    with pytest.raises(InputError, match="cells list"):
        cells.get_cell("t1-cifar11")


def test_a_synthetic_part_on_a_card_costs_its_launches_whatever_its_seeds():
    """On the CPU half the seeds take half the time; on a card a step's launches do not
    shrink with the runs (one run 40 ms a step, 20 batched 52 ms on the H200), so a
    part of half the seeds takes more than half, and HA's per-position outputs cost a
    card less than the CPU."""
    for name in ("permute-copy", "permute-copy-ha", "multihead-8"):
        cell = cells.get_cell(name)
        part = cells.parts(cell)[-1]
        for card in ("h100", "h200"):
            whole, one = estimate_seconds(cell, card), estimate_seconds(part, card)
            assert whole / cell.parts < one < whole, (name, card)
    copy, ha = cells.get_cell("permute-copy"), cells.get_cell("permute-copy-ha")
    cpu_half = estimate_seconds(cells.parts(copy)[0], "cpu")
    assert cpu_half == pytest.approx(estimate_seconds(copy, "cpu") / 2)
    assert estimate_seconds(ha, "cpu") / estimate_seconds(copy, "cpu") > \
        estimate_seconds(ha, "h200") / estimate_seconds(copy, "h200") > 1


def test_a_tiny_cell_writes_its_record_and_the_pages_regenerate(tmp_path, torch_one_thread):
    pytest.importorskip("torch")
    results, readme = tmp_path / "results", tmp_path / "README.md"
    readme.write_text("intro\n" + results_store.BEGIN + "old\n" + results_store.END + "\nend\n")
    heard = []
    record = cells.run_cell("tiny-t1-synthetic-sa", None, str(results), str(tmp_path / "w"),
                            device="cpu", command=["test"],
                            progress=lambda *call: heard.append(call))
    saved = json.loads((results / "cells" / "tiny-t1-synthetic-sa.json").read_text())
    # the seeds batched as one model report the steps of every epoch, each to its end
    finished = {label for label, done, total, *_ in heard if done == total}
    assert len(finished) == saved["result"]["epochs_run"]["0"] == 2
    assert all(0 < done <= total for _, done, total, *_ in heard)
    assert cells.finished("tiny-t1-synthetic-sa", str(results))
    assert not cells.finished("tiny-t1-synthetic-lv", str(results))       # no record
    assert saved == json.loads(json.dumps(record))
    test = saved["result"]["test"]
    assert len(test["saif"]["per_seed"]) == 2 and saved["result"]["seeds"] == [0, 1]
    assert test["accuracy"]["mean"] == pytest.approx(sum(test["accuracy"]["per_seed"]) / 2)
    p = saved["provenance"]
    assert p["device"] == "cpu" and p["card"] == "CPU" and p["command"] == "test"
    assert p["torch"] and p["wall_seconds"] > 0 and p["date"].startswith("20")
    assert saved["settings"]["optimizer"] == "adam" and saved["settings"]["seeds"] == 2
    assert saved["settings"]["conv_mode"] == "loop"       # none asked for: the CPU's default
    # pages: stale until written, then up to date
    assert set(results_store.write_report(str(results), str(readme), check=True)) == {
        str(results / "README.md"), str(readme)}
    results_store.write_report(str(results), str(readme))
    assert results_store.write_report(str(results), str(readme), check=True) == []
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("\nend\n") and "old" not in text
    # the README block holds the paper-size cells only; results/README.md every cell
    assert "No paper-size cell has been run yet" in text and "m = 3" not in text
    page = (results / "README.md").read_text()
    assert "synthetic images, m = 3, sa" in page and "| tiny |" in page
    # a rerun resumes the finished checkpoints instead of training again
    again = cells.run_cell("tiny-t1-synthetic-sa", None, str(results), str(tmp_path / "w"),
                           device="cpu")
    assert again["result"] == record["result"]


def test_provenance_of_a_copy_names_the_commit_it_was_made_from(monkeypatch, tmp_path):
    """A GPU machine's copy may carry an older .git: the prepared commit wins over it."""
    monkeypatch.delenv("ATTN_DYN_COMMIT", raising=False)
    here = results_store.provenance(1.0)
    assert here["commit"] is None or len(here["commit"]) == 40
    monkeypatch.setenv("ATTN_DYN_COMMIT", "f" * 40)
    for flag, dirty in (("0", False), ("1", True), ("", None)):
        monkeypatch.setenv("ATTN_DYN_DIRTY", flag)
        p = results_store.provenance(1.0, repo=str(tmp_path))
        assert (p["commit"], p["dirty"]) == ("f" * 40, dirty)


def test_provenance_keeps_torchs_thread_count_and_cpu_kernels():
    """A CPU rerun matches a record to the digit only at the same thread count and with the
    same vector kernels (AVX2 and AVX-512 sum floats in other orders)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        p = results_store.provenance(1.0)
        assert p["torch_threads"] == 1
        assert p["cpu_kernels"] == torch.backends.cpu.get_cpu_capability() != ""
    finally:
        torch.set_num_threads(before)


def test_provenance_names_the_commit_the_cell_started_from(monkeypatch, tmp_path):
    """A commit made while a cell runs is not the code that ran."""
    monkeypatch.delenv("ATTN_DYN_COMMIT", raising=False)
    repo = str(tmp_path / "repo")

    def git(*args):
        subprocess.run(["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)
        return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    os.makedirs(repo)
    git("init", "-q")
    (tmp_path / "repo" / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    first = git("commit", "-q", "-m", "one")
    source = results_store.code_source(repo)
    assert source == (first, False)
    (tmp_path / "repo" / "a.py").write_text("x = 2\n")   # edited and committed meanwhile
    second = git("commit", "-q", "-am", "two")
    assert results_store.provenance(1.0, repo=repo, source=source)["commit"] == first
    assert results_store.provenance(1.0, repo=repo)["commit"] == second != first
    # run_cell takes the source before its runner runs
    seen = []

    def runner(cell, data_dir, work, device, log, control=None, progress=None, inputs=None):
        seen.append(True)
        monkeypatch.setattr(cells, "code_source", lambda: ("b" * 40, True))
        return {"conditions": {}}, {}, "cpu"
    monkeypatch.setattr(cells, "code_source", lambda: ("a" * 40, False))
    monkeypatch.setitem(cells.cell_runners.RUNNERS, "synthetic", runner)
    record = cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"),
                            str(tmp_path / "w"))
    assert seen and (record["provenance"]["commit"], record["provenance"]["dirty"]) == \
        ("a" * 40, False)
    # a caller that runs several cells in one process passes the source it took first
    record = cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"),
                            str(tmp_path / "w2"), source=("c" * 40, False))
    assert record["provenance"]["commit"] == "c" * 40
    assert "code_history" not in record["provenance"]
    # a cell run again in its run folder (a resume) names the code of both runs
    record = cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"),
                            str(tmp_path / "w"), source=("d" * 40, True))
    prov = record["provenance"]
    assert (prov["commit"], prov["dirty"]) == ("a" * 40 + "," + "d" * 40, True)
    assert [(h["commit"], h["dirty"]) for h in prov["code_history"]] == \
        [("a" * 40, False), ("d" * 40, True)]
    assert results_store.read_record(results_store.cell_path(
        str(tmp_path / "r"), "tiny-synthetic-copy")) == record


def test_cells_plot_draws_the_histories_and_names_a_missing_one(tmp_path, torch_one_thread):
    pytest.importorskip("torch")
    work = tmp_path / "w"
    cells.run_cell("tiny-t1-synthetic-lv", None, str(tmp_path / "r"), str(work), device="cpu")
    out = tmp_path / "curves.png"
    result = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-lv", "--work",
                                      str(work), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-sa", "--work",
                                       str(work), "--out", str(tmp_path / "x.png")])
    assert missing.exit_code == 2 and "no history" in missing.output
    assert not (tmp_path / "x.png").exists()
    (work / "tiny-t1-synthetic-lv" / "history.jsonl").write_text("{not json\n")
    bad = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-lv", "--work",
                                   str(work), "--out", str(tmp_path / "y.png")])
    assert bad.exit_code == 2 and "not JSON lines" in bad.output


def _run_on_cpu(tmp_path, *names):
    """Run the cells ``names`` on the CPU into ``tmp_path/w`` (records in ``tmp_path/r``)."""
    pytest.importorskip("torch")
    work = tmp_path / "w"
    for name in names:
        cells.run_cell(name, None, str(tmp_path / "r"), str(work), device="cpu")
    return work


def test_cells_plot_joins_the_parts_of_a_table1_cell_into_one_curve(tmp_path,
                                                                      torch_one_thread):
    from unittest import mock

    work = _run_on_cpu(tmp_path, "tiny-t1-synthetic-sa@1", "tiny-t1-synthetic-sa@2",
                       "tiny-t1-synthetic-lv")
    with mock.patch("minimal_attn.experiments.plots.plot_training_curves") as drawn:
        cell_views.plot_cells(["tiny-t1-synthetic-sa@1", "tiny-t1-synthetic-sa@2",
                               "tiny-t1-synthetic-lv"], str(work), str(tmp_path / "c.png"))
    histories = drawn.call_args.args[0]
    assert sorted(histories) == ["tiny-t1-synthetic-lv", "tiny-t1-synthetic-sa"]
    parts = [[json.loads(line) for line in open(work / f"tiny-t1-synthetic-sa@{k}" /
                                                 "history.jsonl")] for k in (1, 2)]
    assert histories["tiny-t1-synthetic-sa"] == parts[0] + parts[1]
    assert {r["seed"] for r in parts[0]}.isdisjoint({r["seed"] for r in parts[1]})


def test_cells_plot_draws_a_synthetic_cell_from_its_parts(tmp_path, torch_one_thread):
    """Synthetic cells plot accuracy per step from each part's results.json, all seeds
    of all named parts in one figure; kinds are not mixed."""
    from unittest import mock

    work = _run_on_cpu(tmp_path, "tiny-multihead@1", "tiny-multihead@2", "tiny-synthetic-copy")
    out = tmp_path / "copy.png"
    with mock.patch("minimal_attn.experiments.plots.plot_synthetic_curves") as drawn:
        cell_views.plot_cells(["tiny-synthetic-copy"], str(work), str(out))
    seeds, path, title = drawn.call_args.args
    assert path == str(out) and title == cells.get_cell("tiny-synthetic-copy").title
    assert sorted((s["condition"], s["seed"]) for s in seeds) == [
        ("control", 0), ("control", 1), ("permutation", 0), ("permutation", 1)]
    result = CliRunner().invoke(cli, ["cells", "plot", "tiny-synthetic-copy", "--work",
                                      str(work), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a screening part has no results.json: named, nothing written
    r = CliRunner().invoke(cli, ["cells", "plot", "tiny-multihead@1", "--work", str(work),
                                 "--out", str(tmp_path / "m.png")])
    assert r.exit_code == 2 and "no results.json" in r.output
    assert not (tmp_path / "m.png").exists()
    mixed = CliRunner().invoke(cli, ["cells", "plot", "tiny-synthetic-copy",
                                     "tiny-t1-synthetic-lv", "--work", str(work), "--out",
                                     str(tmp_path / "z.png")])
    assert mixed.exit_code == 2 and "one kind at a time" in mixed.output


def test_a_paradigm_cell_of_the_synthetic_tasks_records_its_paradigm(tmp_path,
                                                                     torch_one_thread):
    """The permutation cells per paradigm (both papers in one frame) run through the
    same runner: the record names the paradigm, and its conditions are both tasks'."""
    names = [n for n in cells.all_cells() if n.startswith("permute-copy-")]
    assert names == ["permute-copy-ha", "permute-copy-lv", "permute-copy-hybrid"]
    record = cells.run_cell("tiny-synthetic-copy-lv", None, str(tmp_path / "r"),
                            str(tmp_path / "w"), device="cpu")
    assert record["settings"]["paradigm"] == "lv"
    assert set(record["result"]["conditions"]) == {"permutation", "control"}
    for c in record["result"]["conditions"].values():
        assert c["seeds"] == 2 and 0 <= c["converged_fraction"] <= 1


def test_a_malformed_record_is_named_in_one_line(tmp_path):
    folder = tmp_path / "cells"
    folder.mkdir()
    (folder / "x.json").write_text("{not json")
    with pytest.raises(InputError, match=r"x\.json cannot be read"):
        results_store.read_cells(str(tmp_path))
    (folder / "x.json").write_text(json.dumps({"cell": "x"}))
    with pytest.raises(InputError, match="not a cell record"):
        results_store.read_cells(str(tmp_path))


def test_the_repository_readme_matches_its_results():
    """The README's results block and results/README.md are what the records give."""
    stale = results_store.write_report(str(ROOT / "results"), str(ROOT / "README.md"),
                                       check=True)
    assert stale == [], "run `attn-dyn cells report` and commit the pages"


def test_cells_report_without_its_readme_is_one_line(tmp_path):
    (tmp_path / "res" / "cells").mkdir(parents=True)
    r = CliRunner().invoke(cli, ["cells", "report", "--results", str(tmp_path / "res"),
                                 "--readme", str(tmp_path / "nope.md")])
    assert r.exit_code == 2 and r.output.count("Error:") == 1 and "--readme" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "res" / "README.md").exists()


def test_ctrl_c_in_a_cell_says_what_is_kept_and_how_to_go_on(tmp_path, monkeypatch):
    work = tmp_path / "work"

    def interrupted(name, *args, **kwargs):
        (work / name / "checkpoints").mkdir(parents=True)      # the first epoch was saved
        (work / name / "checkpoints" / "sa_seed0.ckpt").write_bytes(b"x")
        raise KeyboardInterrupt
    import functools

    # wraps: the command reads run_cell's defaults from its signature
    monkeypatch.setattr(cells, "run_cell", functools.wraps(cells.run_cell)(interrupted))
    r = CliRunner().invoke(cli, ["cells", "run", "tiny-t1-synthetic-sa", "--work", str(work),
                                 "--results", str(tmp_path / "r")])
    assert r.exit_code == 130 and "nothing was written" not in r.output
    assert f"kept in {work}" in r.output and "attn-dyn cells run tiny-t1-synthetic-sa" in r.output


def test_cells_commands(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["cells", "list", "--card", "h100"])
    assert r.exit_code == 0 and "t1-cifar10-m5-authors-sa" in r.output
    r = runner.invoke(cli, ["cells", "list", "--json"])
    rows = json.loads(r.output)
    assert {"h100", "h200", "cpu"} == set(rows[0]["minutes"])
    r = runner.invoke(cli, ["cells", "run", "nope", "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and r.output.count("Error:") == 1
    assert not (tmp_path / "r").exists()
    r = runner.invoke(cli, ["cells", "run", "t1-cifar10-m5-authors-sa", "--data-root",
                            str(tmp_path), "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "cifar10-full" in r.output and not (tmp_path / "r").exists()
    r = runner.invoke(cli, ["cells", "run", "tiny-synthetic-copy", "--compile", "compile",
                            "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "none or cudagraph" in r.output and not (tmp_path / "r").exists()
    r = runner.invoke(cli, ["cells", "run", "tiny-synthetic-copy", "--compile", "cudagraph",
                            "--device", "cpu", "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "needs a CUDA device" in r.output
    assert r.output.count("Error:") == 1 and not (tmp_path / "r").exists()
    r = runner.invoke(cli, ["cells", "run", "tiny-t2-sst2", "--compile", "cudagraph",
                            "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "CNN FCAM and synthetic cells" in r.output
    r = runner.invoke(cli, ["cells", "run", "tiny-synthetic-copy", "--conv-mode", "loop",
                            "--results", str(tmp_path / "r")])
    assert r.exit_code == 2 and "--conv-mode applies to the CNN FCAM cells" in r.output
    assert not (tmp_path / "r").exists()
    r = runner.invoke(cli, ["train", "--compile", "compile", "--out", str(tmp_path / "t")])
    assert r.exit_code == 2 and "--batch-seeds" in r.output and not (tmp_path / "t").exists()


def test_gpu_cells_dry_run_lists_cells_with_times():
    script = ROOT / "benchmarks" / "gpu_cells.sh"
    out = subprocess.run(["bash", str(script), "--dry-run", "--card", "h100",
                          "t1-cifar10-m5-authors-sa", "tiny-t1-synthetic-sa"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env=dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable)))
    assert out.returncode == 0, out.stderr
    assert "t1-cifar10-m5-authors-sa" in out.stdout and "min" in out.stdout
    assert "tiny-t1-synthetic-sa" in out.stdout


def test_gpu_cells_card_auto_reads_the_card_and_a_bad_card_is_one_line(tmp_path):
    # the machine a plain `run` gets may be an H100 or an H200: auto takes nvidia-smi's name
    script = ROOT / "benchmarks" / "gpu_cells.sh"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable))

    def dry(*args, name=None):
        if name is None:                            # no nvidia-smi on PATH
            path = str(tmp_path / "empty") + ":/usr/bin:/bin"
        else:
            smi.write_text(f"#!/bin/sh\necho '{name}'\n")
            smi.chmod(0o755)
            path = f"{smi.parent}:/usr/bin:/bin"
        return subprocess.run(["bash", str(script), "--dry-run", *args, "tiny-t1-synthetic-sa"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env=dict(env, PATH=path))

    for name, card in (("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100")):
        out = dry(name=name)
        assert out.returncode == 0, out.stderr
        assert f"card {card}, " in out.stdout and "auto:" not in out.stdout
    out = dry()
    assert out.returncode == 0 and "card h100 (" in out.stdout and "no H100 or H200" in out.stdout
    out = dry("--card", "h200", name="NVIDIA H100 80GB HBM3")      # named: taken as given
    assert "card h200," in out.stdout
    for args, words in ((("--card", "a100"), "auto, h100, h200 or cpu"),
                        (("--budget", "8m"), "whole number of seconds"),
                        (("--budget", "0"), "whole number of seconds")):
        out = dry(*args)
        assert out.returncode == 2 and "Traceback" not in out.stderr, args
        assert out.stderr.count("\n") == 1 and words in out.stderr, args
    out = subprocess.run(["bash", str(script), "--dry-run", "--budget"], capture_output=True,
                         text=True, cwd=ROOT, timeout=60, env=env)
    assert out.returncode == 2 and out.stderr == "Error: --budget needs a value (see --help)\n"


def test_gpu_cells_dry_run_without_attn_dyn_installed_says_so(tmp_path):
    # python -S has no site-packages: run in the checkout, it finds minimal_attn in the
    # working folder but not the backends that only an install maps under it
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    out = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_cells.sh"), "--dry-run",
                          "tiny-t1-synthetic-sa"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env=dict(os.environ, PYTHON=str(python)))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "pip install -e ." in out.stderr
    assert out.stderr.count("\n") == 1


def test_gpu_cells_auto_parallel_and_the_cells_a_job_has_no_data_for(tmp_path):
    script = ROOT / "benchmarks" / "gpu_cells.sh"
    env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable))

    def dry(*args):
        return subprocess.run(["bash", str(script), "--dry-run", "--card", "h200", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    out = dry("--parallel", "auto", "--budget", "500", "--data", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "parallel " in out.stdout and "(auto: " in out.stdout
    # the default plan leaves out what the job carries no data for, and says so
    assert f"without their data under {tmp_path}" in out.stdout
    listed = [line.split() for line in out.stdout.splitlines() if " min " in line]
    assert all(row[1] == "-" for row in listed)           # cells that need no data folder
    # a named cell runs whatever its data, but the dry run says it is missing
    out = dry("--data", str(tmp_path), "t1-cifar10-m20-authors-sa@3", "tiny-t1-synthetic-sa")
    assert out.returncode == 0, out.stderr
    assert (f"(without their data under {tmp_path}: t1-cifar10-m20-authors-sa@3 (named: "
            in out.stdout), out.stdout
    bad = dry("--parallel", "x")
    assert bad.returncode == 2 and "--parallel must be a count >= 1 or auto" in bad.stderr


def test_a_stop_rule_cell_is_expected_to_take_what_a_finished_sibling_took():
    """The released notebooks' cells train as the authors' do: a complete authors' record
    (seeds stopped at epochs 36-48) sets the expected epochs of the released cell and its
    parts to 48 x 1.5 = 72 of 200; a partial record, one with a seed that never stopped,
    another paradigm, another scale or a protocol without a stop rule set nothing."""
    from minimal_attn.experiments.cell_costs import stop_rule_epochs

    catalogue = cells.all_cells()

    def record(name, epochs, cut=False):
        by_seed = {str(i): e for i, e in enumerate(epochs)}
        return {"cell": name, "result": {"epochs_run": by_seed, "stopped_epochs": by_seed,
                                         "time_limited": {"0": cut}}}

    released = cells.get_cell("t1-cifar10-m5-released-sa")
    sibling = record("t1-cifar10-m5-authors-sa", [36, 48, 40])
    assert stop_rule_epochs(released, [sibling], catalogue) == 72
    assert stop_rule_epochs(cells.parts(released)[2], [sibling], catalogue) == 72
    part_record = record("t1-cifar10-m5-authors-sa@2", [30, 52])
    assert stop_rule_epochs(released, [sibling, part_record], catalogue) == 78
    ran_out = record("t1-cifar10-m5-authors-sa", [40, 200])
    ran_out["result"]["stopped_epochs"]["1"] = None          # seed 1 never met the rule
    for others in ([record("t1-cifar10-m5-authors-sa", [40], cut=True)], [ran_out],
                   [record("t1-cifar10-m5-authors-lv", [40])],
                   [record("cpu-t1-cifar10-m5-authors-sa", [12])], []):
        assert stop_rule_epochs(released, others, catalogue) is None
    assert stop_rule_epochs(cells.get_cell("t1-cifar10-m5-paper-sa"), [sibling],
                            catalogue) is None
    # a cell that sets fewer epochs than its protocol is capped at its own (12 here)
    stopped = record("cpu-t1-cifar10-m5-authors-stop-sa", [35, 51])
    assert stop_rule_epochs(cells.get_cell("cpu-t1-cifar10-m5-released-sa"), [stopped],
                            catalogue) == 12
    # a long sibling is capped at the protocol's 200 epochs
    assert stop_rule_epochs(released, [record("t1-cifar10-m5-authors-sa", [150])],
                            catalogue) == 200
    whole = estimate_seconds(released, "h200")
    assert cells.expected_seconds(released, "h200", [sibling], catalogue) < \
        whole * 72 / 200 * 1.01


def test_table1_curves_average_the_seeds_at_each_evaluation(monkeypatch, tmp_path):
    """Four panels: a_z and loss every epoch, test accuracy and SAIF where the test set
    was scored (epochs 2 and 4 here); each point the mean over the seeds that have it;
    the released run dotted beside the authors' solid."""
    from minimal_attn.experiments.plots import vr

    kept = {}
    monkeypatch.setattr(vr, "save_figure", lambda fig, path, **kw: kept.setdefault("fig", fig))
    record = lambda seed, epoch, acc: {"seed": seed, "epoch": epoch, "loss": 1.0 / epoch,  # noqa: E731
                                       "mean_a_z": 0.2 * epoch, "test_accuracy": acc,
                                       "test_saif": None if acc is None else acc / 2}
    runs = {"x-authors-sa": [record(s, e, None if e % 2 else 0.5 + 0.1 * s + 0.01 * e)
                             for s in (0, 1) for e in (1, 2, 3, 4)],
            "x-released-sa": [record(0, 1, None), record(0, 2, 0.9)]}
    vr.plot_training_curves(runs, str(tmp_path / "c.png"))
    axes = kept["fig"].axes
    assert [ax.get_ylabel() for ax in axes] == ["mean training a_z", "mean training loss",
                                                 "test accuracy", "test SAIF"]
    authors, released = axes[2].lines
    assert list(authors.get_xdata()) == [2, 4]
    assert np.allclose(authors.get_ydata(), [0.57, 0.59])         # (0.52 + 0.62) / 2, ...
    assert np.allclose(axes[3].lines[0].get_ydata(), [0.285, 0.295])
    assert list(axes[0].lines[0].get_xdata()) == [1, 2, 3, 4]
    assert authors.get_linestyle() == "-" and released.get_linestyle() == ":"
    # a seed the stop rule ends at epoch 3 is scored there alone: no point (a spike) at 3
    kept.clear()
    stopped = runs["x-authors-sa"] + [record(2, 1, None), record(2, 2, 0.7),
                                      record(2, 3, 0.99)]
    vr.plot_training_curves({"x-authors-sa": stopped}, str(tmp_path / "c.png"))
    line = kept["fig"].axes[2].lines[0]
    assert list(line.get_xdata()) == [2, 4]
    assert np.allclose(line.get_ydata(), [(0.52 + 0.62 + 0.7) / 3, 0.59])


def test_gpu_cells_runs_cells_end_to_end_on_the_cpu_and_packs_what_comes_home(tmp_path):
    """The path a GPU job takes, on the CPU (GPU_CELLS_DEVICE=cpu) in a scratch copy of the
    layout, so this repository's results are untouched: two tiny cells run, their records
    and the small files of their run folders are packed under $OUT, and the records import
    into another store."""
    import tarfile

    repo, out = tmp_path / "repo", tmp_path / "out"
    (repo / "benchmarks").mkdir(parents=True)
    out.mkdir()
    for script in ("gpu_cells.sh", "_budget.sh"):
        shutil.copy(ROOT / "benchmarks" / script, repo / "benchmarks")
    # a record of the store that the job does not write: it must not come home again
    (repo / "results" / "cells").mkdir(parents=True)
    shutil.copy(sorted((ROOT / "results" / "cells").glob("*.json"))[0],
                repo / "results" / "cells")
    env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable), OUT=str(out),
               GPU_CELLS_DEVICE="cpu", OMP_NUM_THREADS="1")
    cells_run = ["tiny-t1-synthetic-sa", "tiny-synthetic-copy"]
    done = subprocess.run(["bash", str(repo / "benchmarks" / "gpu_cells.sh"), "--budget",
                           "300", *cells_run], capture_output=True, text=True, timeout=600,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in cells_run:
        assert f"| {name} | DONE |" in done.stdout
        assert (repo / "results" / "cells" / f"{name}.json").is_file()
    with tarfile.open(out / "cells_results.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(f"results/cells/{n}.json" for n in cells_run)
    with tarfile.open(out / "cells_runs.tar.gz") as tar:
        names = tar.getnames()
    assert "runs/cells/tiny-t1-synthetic-sa/history.jsonl" in names
    assert "runs/cells/tiny-synthetic-copy/results.json" in names
    assert not any("checkpoints" in n or n.endswith(".npz") for n in names)
    summary = (out / "gpu_cells_summary.md").read_text()
    assert summary.count("| DONE |") == 2
    # and what they wrote, tabled as `cells report` does
    assert "synthetic images, m = 3, sa (smoke cell)" in summary
    assert "**Snell synthetic tasks**" in summary
    home = tmp_path / "home"
    result = CliRunner().invoke(cli, ["cells", "import", str(out / "cells_results.tar.gz"),
                                      "--results", str(home)])
    assert result.exit_code == 0, result.output
    assert cells.finished("tiny-t1-synthetic-sa", str(home))


def test_a_refused_cell_takes_back_its_code_history(tmp_path, monkeypatch):
    """A runner that refuses (or lacks torch) leaves the run folder's code history as it
    was, and no folder it created."""
    def refuse(*args, **kwargs):
        raise InputError("refused")

    def succeed(cell, data_dir, work, device, log, control=None, progress=None, inputs=None):
        return {"conditions": {}}, {}, "cpu"
    work = tmp_path / "w" / "deeper"
    monkeypatch.setitem(cells.cell_runners.RUNNERS, "synthetic", refuse)
    with pytest.raises(InputError, match="refused"):
        cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"), str(work),
                       source=("a" * 40, False))
    assert not (tmp_path / "w").exists()
    monkeypatch.setitem(cells.cell_runners.RUNNERS, "synthetic", succeed)
    cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"), str(work),
                   source=("a" * 40, False))
    history = work / "tiny-synthetic-copy" / results_store.CODE_HISTORY
    before = history.read_bytes()
    monkeypatch.setitem(cells.cell_runners.RUNNERS, "synthetic", refuse)
    with pytest.raises(InputError):
        cells.run_cell("tiny-synthetic-copy", None, str(tmp_path / "r"), str(work),
                       source=("b" * 40, False))
    assert history.read_bytes() == before
