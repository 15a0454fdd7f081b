"""Run folders: a command refuses another command's --out (with or without --resume) before
writing; a refused resume changes nothing; a damaged checkpoint never displaces its .prev."""

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import (
    checkpoint_header,
    read_checkpoint,
    read_json,
    write_checkpoint,
)
from minimal_attn.experiments.run_folders import check_run_folder, run_commands

TRAIN = ["train", "--backend", "numpy", "--dataset", "linear-orthogonal", "--m", "2",
         "--paradigm", "all", "--seeds", "1", "--n-train", "20", "--n-test", "10",
         "--no-progress"]
SYN = ["synthetic", "copy-control", "--seeds", "1", "--steps", "2", "--hidden", "4", "--embed",
       "3", "--batch-size", "3", "--n-test", "4", "--eval-every", "1", "--no-progress"]
SEQ = ["--dataset", "sst2", "--steps", "2", "--hidden", "8", "--emb", "8", "--out-hidden", "8",
       "--max-train", "50", "--max-val", "10", "--eval-every", "1", "--vocab-size", "300",
       "--device", "cpu", "--no-progress"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def snapshot(folder):
    """Every path under ``folder`` with its bytes and modification time."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.stat(path)
            content = None if os.path.isdir(path) else open(path, "rb").read()
            out[os.path.relpath(path, folder)] = (content, st.st_mtime_ns)
    return out


def refused_in_one_line(res, *needles):
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def train_run(tmp_path_factory):
    """A finished one-epoch numpy train run (all paradigms, one seed)."""
    out = tmp_path_factory.mktemp("runs") / "train"
    res = run(*TRAIN, "--epochs", "1", "--out", out)
    assert res.exit_code == 0, res.output
    return out


def _fake(folder, files):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


@pytest.mark.parametrize("command,files", [
    ("train", {"history.jsonl": "", "checkpoints/sa_seed0.ckpt": "x"}),
    ("train", {"checkpoints/hybrid_seed3.ckpt.prev": "x"}),
    ("synthetic", {"checkpoints/train.ckpt": "x", "results.json": "{}"}),
    ("synthetic", {"results.json": json.dumps({"task": "copy", "conditions": {}})}),
    ("train-seq", {"checkpoint.pt": "x", "config.json": "{}"}),
    ("agreement", {"runs/standard/history.json": "[]", "spm.model": "x"}),
    ("agreement", {"agreement.json": "{}"}),
])
def test_each_command_run_is_recognised_and_refused_to_the_others(tmp_path, command, files):
    folder = _fake(tmp_path / "run", files)
    assert list(run_commands(str(folder))) == [command]
    check_run_folder(folder, command)                   # its own command goes on
    for other in {"train", "synthetic", "train-seq", "agreement"} - {command}:
        with pytest.raises(InputError, match=f"holds an attn-dyn {command} run") as err:
            check_run_folder(folder, other)
        assert err.value.param == "out" and "another --out" in str(err.value)


def test_a_folder_of_no_run_passes(tmp_path):
    _fake(tmp_path, {"notes.txt": "mine", "results.json": "[1, 2]", "config.json": "{}"})
    assert run_commands(str(tmp_path)) == {}
    check_run_folder(tmp_path, "train", resume=True)
    check_run_folder(tmp_path / "missing", "synthetic", resume=False)


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_synthetic_into_a_train_run_is_refused_before_writing(train_run, resume):
    pytest.importorskip("torch")
    before = snapshot(train_run)
    res = run(*SYN, "--out", train_run, *resume)
    refused_in_one_line(res, "holds an attn-dyn train run", "not a synthetic run", "--out")
    assert snapshot(train_run) == before


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_train_into_a_synthetic_run_is_refused_before_writing(tmp_path, torch_one_thread,
                                                              resume):
    out = tmp_path / "syn"
    assert run(*SYN, "--out", out).exit_code == 0
    before = snapshot(out)
    res = run(*TRAIN, "--epochs", "1", "--out", out, *resume)
    refused_in_one_line(res, "holds an attn-dyn synthetic run", "not a train run")
    assert snapshot(out) == before


@pytest.mark.parametrize("command", ["train-seq", "agreement"])
def test_train_seq_and_agreement_into_a_train_run_are_refused(train_run, shared_data,
                                                              torch_one_thread, command):
    before = snapshot(train_run)
    res = run(command, *SEQ, "--data-dir", shared_data / "sst2", "--out", train_run)
    refused_in_one_line(res, "holds an attn-dyn train run", f"not a {command} run")
    assert snapshot(train_run) == before


def test_a_fresh_train_into_its_own_run_still_says_resume(train_run):
    before = snapshot(train_run)
    res = run(*TRAIN, "--epochs", "1", "--out", train_run)
    refused_in_one_line(res, "already holds a run", "--resume")
    assert snapshot(train_run) == before


def test_resume_with_more_epochs_refused_before_any_run_trains(tmp_path, train_run):
    out = tmp_path / "copy"
    shutil.copytree(train_run, out)
    before = snapshot(out)
    res = run(*TRAIN, "--epochs", "2", "--out", out, "--resume")
    # the hybrid's switch depends on the epochs: its checkpoint is refused, and so
    # sa, ha and lv (trained before it) must not have been trained on
    refused_in_one_line(res, "hybrid_seed0.ckpt", "epochs=1 (now 2)")
    assert snapshot(out) == before
    again = run(*TRAIN, "--epochs", "1", "--out", out, "--resume")
    assert again.exit_code == 0, again.output
    # without the hybrid: here its results would be dropped; in a copy, extended
    more = run(*TRAIN, "--paradigm", "sa,ha,lv", "--epochs", "2", "--out", out,
               "--resume")
    refused_in_one_line(more, "leaves out paradigms hybrid", "copy its checkpoints/")
    shutil.copytree(out / "checkpoints", tmp_path / "three" / "checkpoints")
    out = tmp_path / "three"
    more = run(*TRAIN, "--paradigm", "sa,ha,lv", "--epochs", "2", "--out", out,
               "--resume")
    assert more.exit_code == 0, more.output
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert sorted((h["paradigm"], h["epoch"]) for h in history) == [
        ("ha", 1), ("ha", 2), ("lv", 1), ("lv", 2), ("sa", 1), ("sa", 2)]


def _save(path, step):
    header = checkpoint_header(1, "toy", {"lr": 0.1})
    write_checkpoint(str(path), lambda f: f.write(json.dumps({**header, "step": step}).encode()))


def _read(path, **kw):
    return read_checkpoint(str(path), read_json, 1, "toy", {"lr": 0.1}, **kw)


def test_a_damaged_checkpoint_is_set_aside_and_its_prev_survives_the_next_save(tmp_path):
    path = tmp_path / "run.ckpt"
    _save(path, 1)
    _save(path, 2)
    path.write_bytes(b"{\"format\": 1, ")                      # a cut-off write
    assert _read(path, aside=False)["step"] == 1                # a check moves nothing
    assert path.exists() and not (tmp_path / "run.ckpt.damaged").exists()
    lines = []
    assert _read(path, log=lines.append)["step"] == 1
    assert len(lines) == 1 and "using" in lines[0] and "run.ckpt.damaged" in lines[0]
    assert (tmp_path / "run.ckpt.damaged").read_bytes() == b"{\"format\": 1, "
    _save(path, 2)                                              # the resumed run saves
    assert json.loads((tmp_path / "run.ckpt.prev").read_text())["step"] == 1
    assert _read(path)["step"] == 2
    path.write_bytes(b"junk")                  # damaged again: the good .prev is still there
    assert _read(path, log=lines.append)["step"] == 1


def test_synthetic_resume_from_prev_keeps_the_good_prev(tmp_path, torch_one_thread):
    out = tmp_path / "syn"
    assert run(*SYN, "--out", out).exit_code == 0
    ckpt = out / "checkpoints" / "train.ckpt"
    good = (out / "checkpoints" / "train.ckpt.prev").read_bytes()
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    res = run(*SYN, "--out", out, "--resume")
    assert res.exit_code == 0, res.output
    assert "unreadable; using" in res.stderr and "train.ckpt.damaged" in res.stderr
    assert (out / "checkpoints" / "train.ckpt.prev").read_bytes() == good
    assert (out / "checkpoints" / "train.ckpt.damaged").stat().st_size == 1000
