"""Result files: complete or absent, never half-written, and checked before the work."""

import os
import stat
import time

import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments import io

UNWRITABLE = "/proc/attn-dyn-test"      # even root cannot create files in /proc
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no Linux /proc")


def test_atomic_write_is_all_or_nothing(tmp_path):
    target = tmp_path / "r.json"
    io.write_json(target, {"a": 1})
    with pytest.raises(RuntimeError):
        with io.atomic_open(target, "w") as f:
            f.write("partial")
            raise RuntimeError("crash mid-write")
    assert target.read_text().strip().startswith("{")      # old content intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left


def test_files_get_ordinary_permissions(tmp_path):
    io.write_csv(tmp_path / "c.csv", ["a"], [[1]])
    mode = stat.S_IMODE(os.stat(tmp_path / "c.csv").st_mode)
    assert mode & stat.S_IRGRP and mode & stat.S_IROTH


def test_ensure_dir_refuses_a_file_path_naming_the_parameter(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError) as info:
        io.ensure_dir(str(tmp_path / "f" / "sub"), param="folder")
    assert info.value.param == "folder" and "f/sub" in str(info.value)


def test_checks_create_nothing(tmp_path):
    io.check_output_dir(str(tmp_path / "a" / "b"))
    io.check_output_file(str(tmp_path / "c" / "r.json"))
    assert list(tmp_path.iterdir()) == []


def test_checks_refuse_files_and_folders(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        io.check_output_dir(str(tmp_path / "f"))
    with pytest.raises(InputError, match="is a file"):
        io.check_output_dir(str(tmp_path / "f" / "sub"))
    with pytest.raises(InputError, match="is a folder"):
        io.check_output_file(str(tmp_path))


@needs_proc
def test_unwritable_places_are_refused_before_and_at_write_time():
    with pytest.raises(InputError) as info:
        io.check_output_dir(UNWRITABLE)
    assert info.value.param == "out"
    with pytest.raises(InputError):
        io.check_output_file(UNWRITABLE + ".tsv")
    with pytest.raises(InputError):                   # at write time: no OSError escapes
        io.write_text(UNWRITABLE + ".tsv", "x")


def test_staged_folder_appears_whole_or_not_at_all(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RuntimeError):
        with io.staged_folder(str(out)) as stage:
            io.write_text(os.path.join(stage, "a.txt"), "a")
            raise RuntimeError("crash between two files")
    assert not out.exists()                           # the folder it created is gone again
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep.txt").write_text("k")
    with pytest.raises(KeyboardInterrupt):
        with io.staged_folder(str(tmp_path / "old")) as stage:
            io.write_text(os.path.join(stage, "a.txt"), "a")
            raise KeyboardInterrupt
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["keep.txt"]
    with io.staged_folder(str(out)) as stage:
        io.write_text(os.path.join(stage, "a.txt"), "a")
        io.write_text(os.path.join(stage, "b.txt"), "b")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "b.txt"]


def test_a_device_pipe_or_link_is_never_replaced_by_a_file(tmp_path):
    # the atomic rename would put a regular file where /dev/null or a pipe stood
    fifo, target, link = tmp_path / "pipe", tmp_path / "real.txt", tmp_path / "link.txt"
    os.mkfifo(fifo)
    target.write_text("kept")
    link.symlink_to(target)
    for path, kind in ((fifo, "pipe"), (link, "link")):
        with pytest.raises(InputError, match=kind):
            io.check_output_file(str(path))
        with pytest.raises(InputError, match=kind):
            with io.atomic_open(str(path)) as f:
                f.write("new")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert target.read_text() == "kept"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    with pytest.raises(InputError, match="device"):
        io.check_output_file(os.devnull)


def test_a_killed_writers_old_temporary_file_is_swept_by_the_next_write(tmp_path):
    """SIGKILL leaves ``.tmp-<random>results.json``; the next write of results.json removes
    it once it is older than STALE_AFTER. A fresh one (a writer still at work), another
    file's temporary and the user's own files stay."""
    old = time.time() - io.STALE_AFTER - 60
    stale, fresh = tmp_path / ".tmp-abcd1234results.json", tmp_path / ".tmp-efgh5678results.json"
    other, mine = tmp_path / ".tmp-ijkl9012history.json", tmp_path / ".tmp-results.json"
    for p in (stale, fresh, other, mine):
        p.write_text("{")
    for p in (stale, other, mine):
        os.utime(p, (old, old))
    io.write_json(str(tmp_path / "results.json"), {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["results.json", fresh.name, other.name, mine.name])
    io.write_json(str(tmp_path / "history.json"), [])
    assert not other.exists() and fresh.exists() and mine.exists()


def test_a_killed_runs_old_staging_folder_is_swept_by_the_next_staging(tmp_path):
    out = tmp_path / "out"
    stale, fresh = out / ".staging-abcd1234", out / ".staging-efgh5678"
    for d in (stale, fresh):
        d.mkdir(parents=True)
        (d / "results.json").write_text("{")
    old = time.time() - io.STALE_AFTER - 60
    os.utime(stale, (old, old))
    with io.staged_folder(str(out)) as stage:
        io.write_text(os.path.join(stage, "a.txt"), "a")
    assert sorted(p.name for p in out.iterdir()) == sorted(["a.txt", fresh.name])
