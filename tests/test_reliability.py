"""Files read back through one guard, refused runs that leave nothing, and the messages.

Issue 20: every checkpoint, history and cache a command reads again is checked
(format, kind, settings) and answered in one line, with the ``.prev`` fallback
where the writer keeps one; a run refused midway removes what it created;
Ctrl-C (and SIGTERM, as from a scheduler) says what was kept and the command
that continues; options that the paradigms trained leave unused are warned about
on stderr.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.cli.options import unused_warnings
from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import (
    check_format,
    load_guarded,
    read_json,
    write_checkpoint,
)
from minimal_attn.experiments.io import undo_on_refusal

SYN = ["synthetic", "copy-control", "--seeds", "2", "--hidden", "4", "--embed", "3",
       "--batch-size", "3", "--n-test", "4", "--eval-every", "1", "--no-progress"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error_line(r):
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), r.output
    return lines[0]


# ------------------------------------------------------------------ the guarded loader
def _write_json(path, obj):
    write_checkpoint(str(path), lambda f: f.write(json.dumps(obj).encode()))


def test_write_checkpoint_keeps_the_previous_one(tmp_path):
    path = tmp_path / "c" / "x.ckpt"
    _write_json(path, {"step": 1})
    _write_json(path, {"step": 2})
    assert read_json(path)["step"] == 2 and read_json(str(path) + ".prev")["step"] == 1
    assert sorted(os.listdir(tmp_path / "c")) == ["x.ckpt", "x.ckpt.prev"]


def test_a_checkpoint_is_never_missing_while_the_next_is_written(tmp_path, monkeypatch):
    """At every rename of the second and third writes a complete ``x.ckpt`` exists (so a
    kill, or Ctrl-C's note of what was kept, never finds none), and ``.prev`` is the one
    before."""
    path = tmp_path / "x.ckpt"
    _write_json(path, {"step": 1})
    seen, replace = [], os.replace

    def spy(src, dst):
        seen.append(path.exists() and read_json(path)["step"] >= 1)
        replace(src, dst)
    monkeypatch.setattr(os, "replace", spy)
    for step in (2, 3):
        _write_json(path, {"step": step})
        assert read_json(path)["step"] == step
        assert read_json(str(path) + ".prev")["step"] == step - 1
    monkeypatch.undo()
    assert len(seen) >= 4 and all(seen)
    assert sorted(os.listdir(tmp_path)) == ["x.ckpt", "x.ckpt.prev"]


def test_load_guarded_falls_back_to_prev_with_one_warning(tmp_path):
    path = tmp_path / "x.ckpt"
    _write_json(path, {"format": 1, "kind": "k", "step": 1})
    _write_json(path, {"format": 1, "kind": "k", "step": 2})
    path.write_bytes(b"\x00garbage")
    warnings = []
    state = load_guarded(str(path), read_json, lambda s: check_format(s, 1, "k"),
                         log=warnings.append)
    assert state["step"] == 1
    assert len(warnings) == 1 and warnings[0].startswith("warning: checkpoint")
    assert "x.ckpt.prev" in warnings[0]


@pytest.mark.parametrize("second", [b"", b"{\"format\": 1, \"kind\": \"other\"}",
                                    b"{\"format\": 9, \"kind\": \"k\"}"])
def test_load_guarded_refuses_in_one_line_when_nothing_is_usable(tmp_path, second):
    path = tmp_path / "x.ckpt"
    path.write_bytes(b"[1, 2")                       # truncated JSON
    (tmp_path / "x.ckpt.prev").write_bytes(second)
    with pytest.raises(InputError, match="cannot be read and no usable") as info:
        load_guarded(str(path), read_json, lambda s: check_format(s, 1, "k"), fix="delete it")
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_load_guarded_settings_refusal_does_not_fall_back(tmp_path):
    path = tmp_path / "x.ckpt"
    _write_json(path, {"format": 1, "kind": "k", "lr": 0.1})
    _write_json(path, {"format": 1, "kind": "k", "lr": 0.2})

    def same_lr(state, candidate):
        if state["lr"] != 0.1:
            raise InputError(f"{candidate} has another lr")
    with pytest.raises(InputError, match="another lr"):
        load_guarded(str(path), read_json, lambda s: check_format(s, 1, "k"), same_lr)
    assert load_guarded(str(tmp_path / "none.ckpt"), read_json) is None


def test_check_format_names_what_it_found():
    assert check_format({"format": 2, "kind": "seq"}, 2, "seq") is None
    assert "synthetic" in check_format({"format": 2, "kind": "synthetic"}, 2, "seq")
    assert "another version" in check_format({"format": 1, "kind": "seq"}, 2, "seq")
    assert check_format([1, 2], 2, "seq") == "not an attn-dyn checkpoint"


def test_undo_on_refusal_removes_only_what_the_block_created(tmp_path):
    out = tmp_path / "out"
    (out / "old").mkdir(parents=True)
    (out / "old" / "kept.txt").write_text("before")
    with pytest.raises(InputError):
        with undo_on_refusal(str(out)):
            (out / "old" / "kept.txt").write_text("advanced")     # an existing file moves on
            (out / "new" / "deep").mkdir(parents=True)
            (out / "new" / "deep" / "x.ckpt").write_text("new")
            raise InputError("diverged")
    assert sorted(p.name for p in out.rglob("*")) == ["kept.txt", "old"]
    assert (out / "old" / "kept.txt").read_text() == "advanced"
    with pytest.raises(KeyboardInterrupt):                      # Ctrl-C keeps everything
        with undo_on_refusal(str(out)):
            (out / "ckpt").write_text("kept")
            raise KeyboardInterrupt
    assert (out / "ckpt").exists()


# ------------------------------------------------------------------ commands that resume
def test_synthetic_resumes_from_prev_when_the_checkpoint_is_damaged(tmp_path):
    pytest.importorskip("torch")
    full, part = tmp_path / "full", tmp_path / "part"
    assert run(*SYN, "--steps", "4", "--out", full).exit_code == 0
    assert run(*SYN, "--steps", "3", "--out", part).exit_code == 0
    ckpt = part / "checkpoints" / "train.ckpt"
    assert (part / "checkpoints" / "train.ckpt.prev").exists()           # step 2
    ckpt.write_bytes(ckpt.read_bytes()[:100])                            # a cut-off write
    r = run(*SYN, "--steps", "4", "--out", part, "--resume")
    assert r.exit_code == 0, r.output
    assert "warning: checkpoint" in r.stderr and "train.ckpt.prev" in r.stderr
    a, b = (json.loads((d / "results.json").read_text()) for d in (full, part))
    assert b["resumed_from_step"] == 2
    assert [s["accuracy"] for s in a["seeds"]] == [s["accuracy"] for s in b["seeds"]]


def test_synthetic_divergence_leaves_no_checkpoint(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    r = run(*SYN, "--steps", "6", "--lr", "1e20", "--out", out)
    assert "diverged" in one_error_line(r) and "--lr" in r.stderr
    assert not out.exists()


def _seq_args(tmp_path, command="train-seq"):
    data = tmp_path / "data"
    if not data.exists():
        data.mkdir()
        rows = [f"the {a} {b} is here\t{k % 2}" for k, (a, b) in enumerate(
            (a, b) for a in ("small", "big", "red", "old") for b in ("house", "book", "car"))]
        (data / "train.tsv").write_text("\n".join(rows * 2) + "\n")
        (data / "dev.tsv").write_text("\n".join(rows[:6]) + "\n")
    args = [command, "--dataset", "tsv", "--data-dir", data, "--steps", "3", "--hidden", "4",
            "--emb", "4", "--eval-every", "1", "--device", "cpu", "--no-progress"]
    return args + (["--proxy-d", "4", "--proxy-epochs", "1"] if command == "agreement" else [])


def test_train_seq_falls_back_to_prev_and_repairs_its_history(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert run(*_seq_args(tmp_path), "--out", out).exit_code == 0
    history = json.loads((out / "history.json").read_text())
    (out / "checkpoint.pt").write_bytes(os.urandom(256))
    (out / "history.json").write_text("[{\"step\": ")                  # damaged too
    r = run(*_seq_args(tmp_path), "--out", out)
    assert r.exit_code == 0, r.output
    assert "warning: checkpoint" in r.stderr and "checkpoint.pt.prev" in r.stderr
    assert json.loads((out / "history.json").read_text()) == history  # re-evaluated the same


@pytest.mark.parametrize("damage", ["proxy.npz", "runs/uniform/history.json",
                                    "runs/second/eval_000003.npz"])
def test_agreement_refuses_a_damaged_file_in_its_folder(tmp_path, damage):
    pytest.importorskip("torch")
    out = tmp_path / "row"
    args = [*_seq_args(tmp_path, "agreement"), "--no-logistic", "--no-frozen", "--out", out]
    assert run(*args).exit_code == 0
    (out / damage).write_bytes(b"PK\x03\x04" + os.urandom(40))
    if damage.endswith("history.json"):                    # the checkpoint rewrites it
        (out / damage).write_text("not json")
        r = run(*args)
        assert r.exit_code == 0, r.output
        assert json.loads((out / damage).read_text())[-1]["step"] == 3
        return
    before = sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*"))
    line = one_error_line(run(*args))
    assert str(out / damage) in line and "delete" in line
    assert sorted((p, p.stat().st_mtime_ns) for p in out.rglob("*")) == before


# ------------------------------------------------------------------ messages
def test_out_that_is_a_file_is_named_by_its_path(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").write_text("x")
    line = one_error_line(run(*_seq_args(tmp_path), "--out", "out"))
    assert "--out 'out' is a file" in line


def test_data_dir_that_is_a_file_is_not_a_folder(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "f.tsv").write_text("a\t1\n")
    args = _seq_args(tmp_path)
    args[args.index("--data-dir") + 1] = tmp_path / "f.tsv"
    line = one_error_line(run(*args, "--out", tmp_path / "o"))
    assert "is not a folder" in line and "--data-dir" in line


def test_resume_without_out_names_both_options():
    line = one_error_line(run("train", "--backend", "numpy", "--resume"))
    assert "--resume needs --out" in line


def test_ctrl_c_says_what_was_kept_and_the_command_that_continues(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from minimal_attn.backends.snell import synthetic_train as tst

    real = tst.train_runs

    def interrupted(runs, config, checkpoint=None, progress=None, resume=True, log=None,
                    label="training"):
        def stop(label, done, total, note=None):
            if done == 2:
                raise KeyboardInterrupt
        return real(runs, config, checkpoint, stop, resume, log, label)
    monkeypatch.setattr("minimal_attn.backends.snell.synthetic_experiments.train_runs",
                        interrupted)
    out = tmp_path / "o"
    r = run(*SYN, "--steps", "4", "--out", out)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 130 and len(lines) == 1, r.output
    assert f"kept in {out}" in lines[0] and lines[0].endswith(f"--out {out} --resume")
    assert (out / "checkpoints" / "train.ckpt").exists()
    monkeypatch.undo()
    r = CliRunner().invoke(cli, lines[0].split("continue with: attn-dyn ")[1].split())
    assert r.exit_code == 0, r.output
    assert json.loads((out / "results.json").read_text())["resumed_from_step"] == 2


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix",
                    reason="sends SIGTERM to a child process (POSIX)")
def test_sigterm_keeps_the_checkpoints_leaves_no_temporary_file_and_the_run_continues(
        tmp_path):
    """A real process, stopped by SIGTERM (kill, a Slurm time limit) mid-run: exit status
    143, one line saying what was kept, no half-written ``.tmp-*`` file, and ``--resume``
    finishes the run from the saved epoch."""
    out = tmp_path / "o"
    args = ["train", "--backend", "numpy", "--n-train", "60", "--n-test", "30", "--m", "3",
            "--batch-size", "20", "--paradigm", "sa", "--seeds", "1", "--no-progress",
            "--out", str(out)]
    command = [sys.executable, "-c", "from minimal_attn.cli.main import main; main()"]
    child = subprocess.Popen(command + args + ["--epochs", "1000000"], text=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpt, deadline = out / "checkpoints" / "sa_seed0.ckpt", time.monotonic() + 60
    while not (ckpt.exists() and (out / "history.jsonl").exists()):
        assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
        time.sleep(0.05)
    time.sleep(0.3)                                  # mid-run: a few more epochs, writes
    child.send_signal(signal.SIGTERM)
    stderr = child.communicate(timeout=60)[1]
    lines = stderr.splitlines()                      # one line, no blank one before it
    assert child.returncode == 128 + signal.SIGTERM and len(lines) == 1, stderr
    assert lines[0].startswith("Error: terminated (SIGTERM); checkpoints")
    assert "--resume" in lines[0] and str(out / "checkpoints") in lines[0]
    assert [p.name for p in out.rglob(".tmp-*")] == []
    assert not (out / "results.json").exists()
    done = len((out / "history.jsonl").read_text().splitlines())
    assert done >= 1
    r = subprocess.run(command + args + ["--epochs", str(done + 2), "--resume"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    epochs = [json.loads(line)["epoch"] for line in (out / "history.jsonl").open()]
    assert epochs == list(range(1, done + 3))      # every epoch once: none lost, none twice
    assert "sa" in json.loads((out / "results.json").read_text())


def test_unused_options_are_warned_about_and_contradictions_refused(tmp_path):
    assert unused_warnings(["sa"], {"ha": 0.1, "all": 0.2}, "auto", 0.01) == [
        "warning: --lr ha=... is unused: ha is not trained (--paradigm sa)",
        "warning: --switch-epoch is unused: it applies to the hybrid, which is not trained",
        "warning: --hybrid-lr is unused: it applies to the hybrid, which is not trained"]
    assert unused_warnings(["hybrid"], {"sa": 0.1, "ha": 0.1}, 2) == []
    assert unused_warnings(["hybrid"], {"ha": 0.1}, hybrid_uses=("sa",)) != []
    r = run("train", "--backend", "numpy", "--paradigm", "sa", "--lr", "lv=0.1",
            "--switch-epoch", "1", "--epochs", "1", "--n-train", "20", "--n-test", "10",
            "--no-progress")
    warnings = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.exit_code == 0 and len(warnings) == 2, r.output
    assert all(w.startswith("warning: ") for w in warnings)
    line = one_error_line(run("train", "--backend", "numpy", "--paradigm", "sa", "--lr",
                              "sa=0.1,sa=0.2", "--switch-epoch", "1"))
    assert "sa twice" in line                         # refused alone, no warning before it


def test_synthetic_memory_estimate_counts_a_large_vocab(tmp_path):
    """--vocab sizes the embedding and output layers: a huge one is refused before training."""
    from click.testing import CliRunner

    from minimal_attn.cli.main import cli

    r = CliRunner().invoke(cli, ["synthetic", "copy", "--vocab", "100000000", "--steps", "5",
                                 "--seeds", "2", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--vocab" in r.output and "GiB" in r.output
    assert not (tmp_path / "x").exists()
