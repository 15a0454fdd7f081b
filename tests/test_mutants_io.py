"""Mutation audit of minimal_attn.experiments.io (files complete or absent): the failure
paths no test reached and the replacement of a file set. The contract is the module's
docstring: every failure to write is an InputError, nothing half-written is left, a set
of files replaces its last run's set, a figure is written in its extension's format."""

import os

import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments import io


def test_a_write_failing_midway_is_an_input_error_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(InputError, match=r"cannot write .*No space left on device"):
        with io.atomic_open(str(path), "w") as f:
            f.write("new, half")
            raise OSError(28, "No space left on device")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["results.json"]


def test_a_staged_set_failing_midway_is_an_input_error_and_leaves_no_folder(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(InputError, match=r"cannot write to .*No space left on device"):
        with io.staged_folder(str(out)) as stage:
            (open(os.path.join(stage, "a.csv"), "w")).close()
            raise OSError(28, "No space left on device")
    assert not out.exists()


def test_a_staged_set_replaces_the_last_sets_files_and_keeps_the_others(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for name, text in (("ode_a.csv", "old a"), ("ode_b.csv", "old b"), ("notes.txt", "mine")):
        (out / name).write_text(text)
    with io.staged_folder(str(out), replaces=("ode_*.csv",)) as stage:
        for name in ("ode_a.csv", "ode_c.csv"):
            with open(os.path.join(stage, name), "w") as f:
                f.write("new " + name)
    assert sorted(os.listdir(out)) == ["notes.txt", "ode_a.csv", "ode_c.csv"]
    assert (out / "ode_a.csv").read_text() == "new ode_a.csv"
    assert (out / "ode_c.csv").read_text() == "new ode_c.csv"
    assert (out / "notes.txt").read_text() == "mine"


def test_undo_on_refusal_keeps_a_file_advanced_in_the_block_as_it_was_left(tmp_path):
    """A checkpoint that existed before and was advanced stays, with its new content and
    the time it was written (only the folders' times are put back, their listings being
    as before)."""
    ckpt = tmp_path / "seed0.ckpt"
    ckpt.write_text("epoch 1")
    os.utime(ckpt, (1_000_000_000, 1_000_000_000))              # written in 2001
    with pytest.raises(InputError, match="refused"):
        with io.undo_on_refusal(str(tmp_path)):
            ckpt.write_text("epoch 2")
            (tmp_path / "new.txt").write_text("x")
            raise InputError("refused")
    assert os.listdir(tmp_path) == ["seed0.ckpt"] and ckpt.read_text() == "epoch 2"
    assert os.stat(ckpt).st_mtime > 1_000_000_000 + 3600


@pytest.mark.parametrize("name, magic", [("f.pdf", b"%PDF"), ("f.svg", b"<?xml"),
                                         ("f.png", b"\x89PNG"), ("f", b"\x89PNG")])
def test_a_figure_is_written_in_the_format_of_its_extension(tmp_path, name, magic):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    try:
        io.save_figure(fig, str(tmp_path / name))
    finally:
        plt.close(fig)
    assert (tmp_path / name).read_bytes().startswith(magic)
