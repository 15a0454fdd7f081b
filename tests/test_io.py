"""Atomic result files: complete or absent, never half-written."""

import os
import stat

import pytest

from minimal_attn import io
from minimal_attn.errors import InputError


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


def test_ensure_dir_refuses_a_file_path(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="--out"):
        io.ensure_dir(str(tmp_path / "f" / "sub"))
