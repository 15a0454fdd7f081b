"""What a first user meets: help texts that say what a default does, one ``--device``,
a note for a missing results store, progress in a batch log, honest provenance."""

import importlib
import io
import json
import subprocess

import click
import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import COMMANDS, cli
from minimal_attn.cli.options import DEVICE_HELP, ProgressBar
from minimal_attn.experiments import results_store
from minimal_attn.experiments.progress import StatusLines


def command(name):
    module, attr = COMMANDS[name].split(":")
    return getattr(importlib.import_module(f"minimal_attn.cli.{module}"), attr)


def _option(cmd, name):
    return next(p for p in cmd.params if p.name == name)


def test_train_protocol_help_says_what_runs_without_it():
    """No --protocol is batch 100 and 10 epochs; --protocol paper is batch 256, 150 epochs."""
    from minimal_attn.experiments.config import PROTOCOLS, ExperimentConfig

    text = _option(command("train"), "protocol").help
    d, paper = ExperimentConfig(), PROTOCOLS["paper"]
    assert "Without it each option keeps its own default: SGD" in text
    assert f"batch {d.batch_size}, {d.epochs} epochs, {d.seeds} seed," in text
    assert f"batch {paper['batch_size']}, {paper['epochs']} epochs" in text


def _device_commands():
    out = [command(name) for name in ("train", "train-text", "fixed-focus", "train-seq",
                                       "agreement", "synthetic", "sweep")]
    return out + [command("cells").commands["run"]]


@pytest.mark.parametrize("cmd", _device_commands(), ids=lambda c: c.name)
def test_every_device_option_takes_the_same_names(cmd):
    """auto, cpu, cuda and cuda:K everywhere (get_device resolves them), as the no-GPU error
    line suggests; one help text."""
    p = _option(cmd, "device")
    assert p.type == click.STRING and p.help.startswith(DEVICE_HELP)


def test_synthetic_takes_device_auto(tmp_path, torch_one_thread):
    pytest.importorskip("torch")
    r = CliRunner().invoke(cli, ["synthetic", "copy-control", "--seeds", "1", "--steps", "2",
                                 "--hidden", "4", "--embed", "3", "--batch-size", "3",
                                 "--n-test", "4", "--eval-every", "1", "--no-progress",
                                 "--device", "auto", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["synthetic", "copy-control", "--device", "gpu", "--out",
                                 str(tmp_path / "p")])
    assert r.exit_code == 2 and "use auto, cpu, cuda or cuda:K" in r.output


def test_cells_list_names_a_missing_results_store(tmp_path):
    missing = str(tmp_path / "nowhere")
    r = CliRunner().invoke(cli, ["cells", "list", "--json", "--results", missing])
    assert r.exit_code == 0
    assert f"no results store at {missing}" in r.stderr and "--results DIR" in r.stderr
    assert all(row["status"] == "-" for row in json.loads(r.stdout))   # stdout stays JSON
    (tmp_path / "store" / "cells").mkdir(parents=True)
    r = CliRunner().invoke(cli, ["cells", "list", "--results", str(tmp_path / "store")])
    assert r.exit_code == 0 and r.stderr == ""


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_cells_report_refuses_a_missing_results_store_and_writes_nothing(tmp_path, check):
    # run outside the checkout, a report would replace the README's tables by empty ones
    readme = tmp_path / "README.md"
    block = f"x\n{results_store.BEGIN}\n| a table |\n{results_store.END}\n"
    readme.write_text(block)
    for res in (tmp_path / "res", tmp_path / "empty"):
        if res.name == "empty":
            res.mkdir()                                   # a folder, but no cells/ in it
        r = CliRunner().invoke(cli, ["cells", "report", "--results", str(res),
                                     "--readme", str(readme), *check])
        assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
        assert f"no results store at {res}" in r.output and "--results DIR" in r.output
        assert "Traceback" not in r.output
    assert readme.read_text() == block and sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md", "empty"]
    assert list((tmp_path / "empty").iterdir()) == []


def test_cells_run_without_data_root_says_which_option(tmp_path):
    r = CliRunner().invoke(cli, ["cells", "run", "cpu-t1-cifar10-m5-authors-sa",
                                 "--results", str(tmp_path / "r"), "--work", str(tmp_path / "w")])
    assert r.exit_code == 2 and r.output.count("Error:") == 1
    assert "pass --data-root DIR (the folder holding cifar10/" in r.output
    assert "None" not in r.output


def test_hatexplain_summary_header_says_it_holds_seed_ids():
    from minimal_attn.experiments import hatexplain_report as report

    split = {"accuracy": 0.6, "accuracy_std": 0.0, "saif": 0.2, "saif_std": 0.0, "n": 10,
             "n_without_rationale": 5, "per_seed": [{"seed": 0, "accuracy": 0.6, "saif": 0.2}]}
    md = report.summary_markdown({"sa": {"train": split, "test": split, "seconds": 1.0}},
                                 {"embedding": "standard", "layout": "binary", "seeds": [0],
                                  "epochs": 1, "device": "cpu"})
    header = next(line for line in md.splitlines() if line.startswith("| paradigm"))
    assert header.endswith("| ids of seeds averaged |") and "| 0 |" in md


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_provenance_names_a_commit_only_for_tracked_code(monkeypatch, tmp_path):
    """A `pip install .` copy in an ignored .venv inside a checkout is not the checkout's
    code: no commit, no dirty flag (they would describe the checkout)."""
    monkeypatch.delenv("ATTN_DYN_COMMIT", raising=False)
    repo = tmp_path / "repo"
    package = repo / "minimal_attn"
    installed = repo / ".venv" / "lib" / "site-packages" / "minimal_attn"
    stray = repo / "build" / "minimal_attn"                # untracked, not ignored
    for folder in (package, installed, stray):
        folder.mkdir(parents=True)
        (folder / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text(".venv/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".gitignore", "minimal_attn/a.py")
    _git(repo, "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert results_store.code_source(str(package)) == (head, False)
    (repo / "README").write_text("edited\n")
    _git(repo, "add", "README")                               # the checkout is now dirty
    assert results_store.code_source(str(package)) == (head, True)
    assert results_store.code_source(str(installed)) == (None, None)
    assert results_store.code_source(str(stray)) == (None, None)
    assert results_store.code_source(str(tmp_path)) == (None, None)    # no repository
    monkeypatch.setenv("ATTN_DYN_COMMIT", "f" * 40)
    monkeypatch.setenv("ATTN_DYN_DIRTY", "0")
    assert results_store.code_source(str(installed)) == ("f" * 40, False)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_status_lines_write_at_most_one_line_a_minute():
    clock, out = Clock(), io.StringIO()
    lines = StatusLines(out, every=60, clock=clock)
    for step in range(1, 60):                    # a short run: a step a second, nothing
        clock.now += 1
        lines("training", step, 500, "loss 0.5")
    assert out.getvalue() == ""
    for step in range(60, 200):                  # then a line a minute
        clock.now += 1
        lines("training", step, 500, f"loss {step}" if step % 10 == 5 else None)
    assert out.getvalue().splitlines() == ["training: 60/500 (loss 0.5), 0:01:00 elapsed",
                                           "training: 120/500 (loss 115), 0:02:00 elapsed",
                                           "training: 180/500 (loss 175), 0:03:00 elapsed"]
    clock.now += 3600 - 199                     # a new task: its own note, or none
    lines("sa seed 0 epoch 3/10", 7, 20)
    assert out.getvalue().splitlines()[-1] == "sa seed 0 epoch 3/10: 7/20, 1:00:00 elapsed"


def test_the_click_adapter_writes_status_lines_to_a_log(monkeypatch, capsys):
    """Off a terminal a long loop shows life on stderr; stdout (--json) is untouched;
    --no-progress silences it."""
    clock = Clock()
    monkeypatch.setattr("time.monotonic", clock)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    for enabled in (True, False):
        with ProgressBar(enabled) as bar:
            for step in range(1, 151):
                clock.now += 1
                bar("training", step, 150)
    assert err.getvalue().splitlines() == ["training: 60/150, 0:01:00 elapsed",
                                           "training: 120/150, 0:02:00 elapsed"]
    assert capsys.readouterr().out == ""


def test_progress_help_says_what_happens_off_a_terminal():
    p = _option(command("agreement"), "progress")
    assert "Not on a terminal (a log): a status line a minute." in p.help
