"""`attn-dyn train`: results.json, summaries, heat maps, checkpoints, resume, bad input."""

import csv
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn import PARADIGMS
from minimal_attn.cli.main import cli

NUMPY = ["train", "--backend", "numpy", "--epochs", "3", "--n-train", "60", "--n-test", "30",
         "--m", "3", "--batch-size", "20"]
TORCH = ["train", "--backend", "torch", "--epochs", "1", "--n-train", "12", "--n-test", "6",
         "--m", "3", "--batch-size", "6", "--width", "0.25", "--device", "cpu",
         "--no-progress"]


def run(*args):
    return CliRunner().invoke(cli, list(args))


def _check_results(out, paradigms, n_seeds):
    results = json.loads((out / "results.json").read_text())
    assert list(results) == paradigms                  # top level: paradigm names only
    for p in paradigms:
        entry = results[p]
        for split in ("train", "test"):
            e = entry[split]
            for key in ("accuracy", "saif"):
                assert 0.0 <= e[key] <= 1.0
                values = [s[key] for s in e["per_seed"]]
                assert e[key] == pytest.approx(np.mean(values))
            assert len(e["per_seed"]) == n_seeds
            assert [s["seed"] for s in e["per_seed"]] == list(range(n_seeds))
            assert np.sum(e["heatmap"]) == pytest.approx(100.0)
            assert (out / f"heatmap_{p}_{split}.png").stat().st_size > 1000
        assert [len(h["epochs"]) for h in entry["history"]] == [
            json.loads((out / "config.json").read_text())["epochs"]] * n_seeds
        for seed in range(n_seeds):
            assert (out / "checkpoints" / f"{p}_seed{seed}.ckpt").exists()
            with np.load(out / f"instances_{p}_seed{seed}.npz") as inst:
                assert set(inst.files) == {f"{split}_{k}" for split in ("train", "test")
                                           for k in ("a_z", "s_y", "correct")}
                for split in ("train", "test"):       # per mosaic, the run's accuracy
                    assert np.mean(inst[f"{split}_correct"]) == pytest.approx(
                        entry[split]["per_seed"][seed]["accuracy"])
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["paradigm"] for r in rows] == paradigms
    assert float(rows[0]["test_accuracy_mean"]) == pytest.approx(
        results[paradigms[0]]["test"]["accuracy"])
    md = (out / "summary.md").read_text()
    recipe, table = md.split("\n\n")                    # the recipe line, then Table 1
    assert recipe.startswith("Recipe: ") and "optimizer" in recipe
    assert table.startswith("| paradigm | m |") and table.count("\n") == 2 + len(paradigms)
    return results


def test_numpy_backend_all_paradigms_two_seeds(tmp_path):
    out = tmp_path / "run"
    r = run(*NUMPY, "--seeds", "2", "--out", str(out))
    assert r.exit_code == 0, r.output
    results = _check_results(out, list(PARADIGMS), 2)
    assert "| hybrid | 3 |" in r.stdout                            # the table is printed
    assert results["sa"]["test"]["accuracy"] > 0.5                   # chance: 1/3
    config = json.loads((out / "config.json").read_text())
    assert config["backend"] == "numpy" and config["switch_epoch"] == 1
    assert "classifier linear" in r.stdout and "classifier paper" not in r.stdout
    # SA phase then HA phase for the hybrid
    phases = [h["phase"] for h in results["hybrid"]["history"][0]["epochs"]]
    assert phases == ["sa", "ha", "ha"]


def test_numpy_linear_orthogonal_and_resume_of_a_finished_run(tmp_path):
    out = tmp_path / "lo"
    args = [*NUMPY, "--dataset", "linear-orthogonal", "--paradigm", "lv,soft", "--out",
            str(out)]
    first = run(*args)
    assert first.exit_code == 0, first.output
    before = json.loads((out / "results.json").read_text())
    assert list(before) == ["lv", "sa"]
    again = run(*args, "--resume")
    assert again.exit_code == 0, again.output
    after = json.loads((out / "results.json").read_text())
    assert after == before        # the training time of finished seeds is kept too
    # a resume that leaves out a paradigm (or a seed) would write results without it
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for narrower in (["--paradigm", "lv"], ["--paradigm", "lv,sa", "--seeds", "1",
                                              "--first-seed", "1"]):
        r = run(*NUMPY, "--dataset", "linear-orthogonal", *narrower, "--out", str(out),
                "--resume")
        assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
        assert "leaves out" in r.output and "Traceback" not in r.output
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == files
    wider = run(*args, "--seeds", "2", "--resume")                      # more is fine
    assert wider.exit_code == 0, wider.output
    assert len(json.loads((out / "results.json").read_text())["lv"]["test"]["per_seed"]) == 2


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    r = run(*NUMPY, "--paradigm", "sa", "--out", str(tmp_path / "new"), "--resume")
    assert r.exit_code == 0, r.output
    assert "starting fresh" in r.stdout
    # killed between a save's two renames: only .prev is there, and the run continues from it
    ckpt = tmp_path / "new" / "checkpoints" / "sa_seed0.ckpt"
    ckpt.rename(str(ckpt) + ".prev")
    again = run(*NUMPY, "--paradigm", "sa", "--out", str(tmp_path / "new"), "--resume")
    assert again.exit_code == 0 and "starting fresh" not in again.stdout, again.output


def test_torch_backend_synthetic(tmp_path, torch_one_thread):
    out = tmp_path / "cnn"
    r = run(*TORCH, "--seeds", "2", "--out", str(out))
    assert r.exit_code == 0, r.output
    _check_results(out, list(PARADIGMS), 2)
    config = json.loads((out / "config.json").read_text())
    assert config["device"] == "cpu" and config["lr"]["ha"] == 0.005
    assert config["lr"]["hybrid"] == {"sa": 0.01, "ha": 0.005}          # the paper's


def test_torch_backend_cifar10_subset(tmp_path, shared_data, torch_one_thread):
    folder = shared_data / "cifar10"
    out = tmp_path / "c10"
    r = run(*TORCH, "--dataset", "cifar10", "--data-dir", str(folder), "--paradigm", "sa,ha",
            "--out", str(out))
    assert r.exit_code == 0, r.output
    _check_results(out, ["sa", "ha"], 1)
    config = json.loads((out / "config.json").read_text())
    assert config["foreground"] == ["airplane", "automobile", "bird"]


@pytest.mark.parametrize("args,message", [
    (["--dataset", "mnist"], "mnist"),
    (["--paradigm", "attention"], "unknown paradigm"),
    (["--paradigm", "sa,sa"], "once each"),
    (["--m", "1"], "--m must be an integer >= 2"),
    (["--lr", "xx=0.1"], "unknown paradigm 'xx'"),
    (["--lr", "sa=fast"], "paradigm=number"),
    (["--switch-epoch", "soon"], "integer or auto"),
    (["--threads", "0"], "--threads"),
    (["--backend", "numpy", "--n-train", "1000000000"], "memory"),
    (["--backend", "numpy", "--m", "1000000", "--n-train", "1000"], "memory"),
    (["--m", "1000000"], "memory"),
    (["--epochs", "0"], "--epochs"),
    (["--threshold", "1.5"], "--threshold"),
    (["--switch-epoch", "9"], "--switch-epoch"),
    (["--lr", "-1"], "--lr"),
    (["--backend", "numpy", "--dataset", "cifar10"], "--backend torch"),
    (["--backend", "torch", "--dataset", "linear-orthogonal"], "--backend numpy"),
    (["--backend", "torch", "--dataset", "cifar10"], "needs --data-dir"),
    (["--backend", "torch", "--dataset", "cifar100", "--data-dir", "/nonexistent/x"],
     "does not exist"),
    (["--backend", "torch", "--device", "tpu"], "unknown device"),
    (["--backend", "numpy", "--device", "cuda"], "--device cuda applies to backend torch"),
    (["--resume"], "needs --out"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "never"
    r = run("train", "--epochs", "1", "--n-train", "5", "--n-test", "5", "--no-progress",
            *args,
            *([] if "--resume" in args else ["--out", str(out)]))
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], lines
    assert not out.exists()


def test_unwritable_out_exits_2(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    r = run(*NUMPY, "--out", str(blocker / "sub"))
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and "--out" in r.stderr


def test_malformed_cifar_folder_exits_2(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                 "data_batch_5", "test_batch", "batches.meta"]:
        (folder / name).write_bytes(b"not a pickle")
    pytest.importorskip("torch")
    r = run("train", "--dataset", "cifar10", "--data-dir", str(tmp_path), "--out",
            str(tmp_path / "o"))
    assert r.exit_code == 2 and "malformed" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_help_lists_the_options():
    r = run("train", "--help")
    assert r.exit_code == 0
    for option in ("--backend", "--dataset", "--data-dir", "--m", "--paradigm", "--epochs",
                   "--seeds", "--n-train", "--n-test", "--out", "--resume", "--device",
                   "--lr", "--batch-size", "--switch-epoch", "--threshold", "--chunk", "--threads",
                   "--protocol", "--hybrid-lr", "--momentum"):
        assert option in r.output


def _write_tiny_cifar100(root):
    """A tiny CIFAR-100 in the official pickle layout: 100 classes, 2 train / 1 test image each."""
    import pickle

    from minimal_attn.datasets.splits import CIFAR100_FOREGROUND

    folder = root / "cifar-100-python"
    folder.mkdir()
    names = list(CIFAR100_FOREGROUND) + [f"background_{i}" for i in range(50)]
    rng = np.random.default_rng(0)
    for split, per_class in (("train", 2), ("test", 1)):
        labels = np.repeat(np.arange(100), per_class)
        batch = {b"data": rng.integers(0, 256, (labels.size, 3072), dtype=np.uint8),
                 b"fine_labels": labels.tolist(), b"coarse_labels": (labels // 5).tolist()}
        (folder / split).write_bytes(pickle.dumps(batch))
    meta = {b"fine_label_names": [n.encode() for n in names],
            b"coarse_label_names": [f"super_{i}".encode() for i in range(20)]}
    (folder / "meta").write_bytes(pickle.dumps(meta))
    return root


def test_torch_backend_tiny_cifar100(tmp_path, torch_one_thread):
    data_dir = _write_tiny_cifar100(tmp_path)
    out = tmp_path / "c100"
    r = run(*TORCH, "--dataset", "cifar100", "--data-dir", str(data_dir), "--paradigm", "lv",
            "--out", str(out))
    assert r.exit_code == 0, r.output
    _check_results(out, ["lv"], 1)
    config = json.loads((out / "config.json").read_text())
    assert config["n_classes"] == 50 and config["lr"]["lv"] == 0.01
    # the CIFAR-100 networks: focus 2 conv + 2 fc, classifier 3 conv + 3 fc
    import torch

    state = torch.load(out / "checkpoints" / "lv_seed0.ckpt", weights_only=True)["model"]
    ndims = {net: sorted(v.ndim for k, v in state.items() if k.startswith(net) and
                         k.endswith("weight")) for net in ("focus", "classifier")}
    assert ndims == {"focus": [2, 2, 4, 4], "classifier": [2, 2, 2, 4, 4, 4]}


def test_the_interface_independent_checks_use(tmp_path, torch_one_thread):
    """Issue 10's command, at a tiny size: epoch lines, history.jsonl, config, resume."""
    out = tmp_path / "iface"
    args = ["train", "--dataset", "synthetic", "--m", "5", "--paradigm", "sa,ha,hybrid",
            "--epochs", "3", "--seeds", "2", "--n-train", "20", "--n-test", "10",
            "--lr", "sa=0.05,ha=0.01", "--switch-epoch", "auto", "--threads", "1",
            "--no-progress", "--width", "0.25", "--batch-size", "10", "--out", str(out)]
    r = run(*args)
    assert r.exit_code == 0, r.output
    epoch_lines = [line for line in r.stdout.splitlines() if " epoch " in line]
    assert len(epoch_lines) == 3 * 2 * 3
    records = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert [(h["paradigm"], h["seed"], h["epoch"]) for h in records] == [
        (p, s, e) for p in ("sa", "ha", "hybrid") for s in (0, 1) for e in (1, 2, 3)]
    for h in records:
        assert {"loss", "mean_a_z", "test_accuracy", "test_saif"} <= set(h)
        assert h["lr"] == {"sa": 0.05, "ha": 0.01}[h["phase"]]
    config = json.loads((out / "config.json").read_text())
    assert config["lr"] == {"sa": 0.05, "ha": 0.01, "hybrid": {"sa": 0.05, "ha": 0.01}}
    assert config["switch_epoch"] == "auto"
    chosen = config["hybrid_switch_epochs"]
    assert set(chosen) == {"0", "1"} and all(1 <= v <= 3 for v in chosen.values())
    hybrid = [h for h in records if h["paradigm"] == "hybrid" and h["seed"] == 0]
    assert [h["phase"] for h in hybrid] == ["sa" if h["epoch"] <= chosen["0"] else "ha"
                                            for h in hybrid]
    before = json.loads((out / "results.json").read_text())
    again = run(*args, "--resume")
    assert again.exit_code == 0, again.output
    after = json.loads((out / "results.json").read_text())
    for p in before:
        assert [s["seconds"] for s in after[p]["test"]["per_seed"]] == \
            [s["seconds"] for s in before[p]["test"]["per_seed"]]
    assert after == before
    assert (out / "history.jsonl").read_text().count("\n") == len(records)


def test_the_default_switch_epoch_given_explicitly_resumes(tmp_path):
    """--switch-epoch epochs // 2 is the default: a run resumes with or without it."""
    out = tmp_path / "h"
    first = run(*NUMPY, "--paradigm", "hybrid", "--out", str(out))
    assert first.exit_code == 0, first.output
    same = run(*NUMPY, "--paradigm", "hybrid", "--switch-epoch", "1", "--out", str(out),
               "--resume")
    assert same.exit_code == 0, same.output
    other = run(*NUMPY, "--paradigm", "hybrid", "--switch-epoch", "2", "--out", str(out),
                "--resume")
    assert other.exit_code == 2 and "switch_epoch=None (now 2)" in other.output


def test_per_paradigm_learning_rates_and_resume_checks_only_what_matters(tmp_path):
    out = tmp_path / "lr"
    first = run(*NUMPY, "--paradigm", "sa,hybrid", "--lr", "sa=0.3,lv=0.2", "--out", str(out))
    assert first.exit_code == 0, first.output
    config = json.loads((out / "config.json").read_text())
    assert config["lr"] == {"sa": 0.3, "hybrid": {"sa": 0.3, "ha": 0.5}}   # ha: numpy default
    # a new hybrid lr affects the hybrid's checkpoint only
    again = run(*NUMPY, "--paradigm", "sa,hybrid", "--lr", "sa=0.3", "--hybrid-lr", "0.1",
                "--out", str(out), "--resume")
    assert again.exit_code == 2 and "hybrid_seed0.ckpt" in again.stderr, again.output
    assert "sa_seed0.ckpt" not in again.stderr
    # resuming SA alone would write a results.json without the hybrid: refused
    sa_only = run(*NUMPY, "--paradigm", "sa", "--lr", "sa=0.3", "--hybrid-lr", "0.1",
                  "--switch-epoch", "2", "--out", str(out), "--resume")
    assert sa_only.exit_code == 2 and "leaves out paradigms hybrid" in sa_only.output


@pytest.mark.parametrize("option", [("--stop-loss", "0.7"), ("--threshold", "0.3")])
def test_resume_refuses_a_new_stop_rule_or_saif_threshold(tmp_path, option):
    # a stop rule moves where a run ends (and an auto hybrid's switch); a threshold would
    # score one history at two bars: both must match the checkpoint's
    out = tmp_path / "run"
    assert run(*NUMPY, "--paradigm", "sa", "--out", str(out)).exit_code == 0
    again = run(*NUMPY, "--paradigm", "sa", *option, "--out", str(out), "--resume")
    assert again.exit_code == 2 and again.stderr.count("\n") == 1, again.output
    assert option[0][2:].replace("-", "_") in again.stderr and "sa_seed0.ckpt" in again.stderr


def test_foreign_checkpoint_is_refused_with_its_name(tmp_path, torch_one_thread):
    out = tmp_path / "mixed"
    assert run(*TORCH, "--paradigm", "sa", "--out", str(out)).exit_code == 0
    r = run(*NUMPY, "--paradigm", "sa", "--epochs", "1", "--out", str(out), "--resume")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "sa_seed0.ckpt" in r.stderr and "cannot be read" in r.stderr


def test_n_test_beyond_the_images_is_refused(tmp_path, shared_data):
    r = run(*TORCH, "--dataset", "cifar10", "--data-dir", str(shared_data / "cifar10"),
            "--n-test", "100000", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "5000 images" in r.stderr and "--n-test" in r.stderr
    assert not (tmp_path / "o").exists()


def test_protocol_paper_fills_what_was_not_given():
    from minimal_attn.backends.vr.table1 import ExperimentConfig, apply_protocol

    c = apply_protocol(ExperimentConfig(dataset="cifar10", seeds=3), "paper", {"seeds"})
    assert (c.n_train, c.seeds, c.lr) == (10000, 3, None)
    c = apply_protocol(ExperimentConfig(dataset="cifar100"), "paper")
    assert (c.n_train, c.seeds) == (50000, 12)


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs Linux /sys")
def test_unwritable_system_folder_is_refused_before_training():
    r = run(*NUMPY, "--out", "/sys/kernel")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--out /sys/kernel" in r.stderr
    assert " epoch " not in r.stdout                               # nothing was trained


@pytest.mark.parametrize("saved", [False, True])
def test_ctrl_c_exits_130_with_how_to_resume(tmp_path, monkeypatch, saved):
    import minimal_attn.cli.train_cmd as train_cmd

    out = tmp_path / "run"

    def interrupted(*args, **kwargs):
        if saved:                               # Ctrl-C after the first checkpoint
            (out / "checkpoints").mkdir(parents=True)
            (out / "checkpoints" / "sa_seed0.ckpt").write_bytes(b"x")
        raise KeyboardInterrupt
    monkeypatch.setattr(train_cmd, "run_experiment", interrupted)
    r = run(*NUMPY, "--out", str(out))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 130 and len(lines) == 1 and lines[0].startswith("Error: interrupted")
    # the line says what is there when Ctrl-C comes: no claim of checkpoints not yet written
    assert (f"{out}/checkpoints" in r.stderr and "--resume" in r.stderr) == saved
    assert ("no checkpoint was written" in r.stderr) == (not saved)


# ---- one train command: no routing; --task belongs to train-seq
# (the HateXplain runs of `train --dataset hatexplain` are in tests/test_hatexplain_train.py)

def test_group_help_lists_every_command_by_paper_and_no_argv_is_rewritten():
    from minimal_attn.cli import main

    r = run("--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    for title, section in main.SECTIONS.items():
        assert title + ":" in r.output
        for name, (_, short) in section.items():
            assert f"{name} {' '.join(short.split())}" in text      # name, then its line
            assert main.cli.get_command(None, name) is not None    # and it loads
    assert set(main.COMMANDS) == {n for s in main.SECTIONS.values() for n in s}
    assert not hasattr(main, "route_train")
    assert "resolve_command" not in vars(main.AttnDynGroup)


@pytest.mark.parametrize("task", ["translate", "classify"])
def test_train_task_is_refused_in_one_line_naming_train_seq(tmp_path, task):
    out = tmp_path / "out"
    r = run("train", "--task", task, "--dataset", "sst2", "--data-dir", str(tmp_path),
            "--out", str(out))
    assert r.exit_code == 2, r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: --task")
    assert f"attn-dyn train-seq --task {task}" in lines[0]
    assert r.stdout == "" and not out.exists()
    helped = run("train", "--task", task, "--help")         # --task never shows train's help
    assert helped.exit_code == 2 and "train-seq" in helped.stderr


def test_train_help_names_hatexplain_and_train_seq():
    r = run("train", "--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "--dataset [synthetic|linear-orthogonal|cifar10|cifar100|hatexplain]" in text
    for option in ("--embedding [standard|self-attention]", "--min-count", "attn-dyn train-seq"):
        assert option in text
    assert "--task" not in text                               # not an option of train


@pytest.mark.parametrize("args,message", [
    (["--dataset", "hatexplain", "--data-dir", "x", "--m", "4"],
     "--m applies to the mosaic data sets"),
    (["--dataset", "hatexplain", "--data-dir", "x", "--protocol", "paper"],
     "--protocol applies to the mosaic data sets"),
    (["--dataset", "hatexplain", "--data-dir", "x", "--backend", "numpy"],
     "trains the text FCAM with torch: use --backend torch"),
    (["--embedding", "self-attention"], "--embedding applies to --dataset hatexplain only"),
    (["--backend", "numpy", "--min-count", "1"], "--min-count applies to --dataset hatexplain"),
    (["--dataset", "hatexplain"], "needs --data-dir"),
])
def test_options_of_the_other_kind_of_data_set_are_refused(tmp_path, args, message):
    out = tmp_path / "out"
    r = run("train", *args, "--out", str(out))
    assert r.exit_code == 2, r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert " epoch " not in r.stdout and not out.exists()


def test_train_text_is_train_with_hatexplain_as_its_default():
    from minimal_attn.cli.train_cmd import train, train_text

    assert train_text.callback is train.callback               # one code path
    assert [p.name for p in train_text.params] == [p.name for p in train.params]
    defaults = {p.name: p.default for p in train_text.params}
    assert defaults["dataset"] == "hatexplain"
    assert {p.name: p.default for p in train.params}["dataset"] == "synthetic"
    r = run("train-text", "--help")
    assert r.exit_code == 0 and " train-text [OPTIONS]" in r.output.splitlines()[0]


def test_a_fresh_run_never_starts_over_a_finished_one(tmp_path):
    # a new run (no --resume) over a finished one would replace its checkpoints one by one;
    # a failure half-way left results.json of one run beside checkpoints of another
    out = tmp_path / "done"
    assert run(*NUMPY, "--paradigm", "sa", "--out", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    r = run(*NUMPY, "--paradigm", "sa", "--lr", "0.2", "--out", str(out))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "already holds a run" in r.stderr and "--resume" in r.stderr
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert run(*NUMPY, "--paradigm", "sa", "--out", str(out), "--resume").exit_code == 0
