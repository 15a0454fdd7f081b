"""A sweep rerun compares a finished cell's data before it skips it: a V&R Table 1 record names
its mosaics (provenance.data_fingerprint), and a rerun whose --data-dir (or whose code)
gives other mosaics is refused in one line with nothing written, or, asked to, sets the old
record and folder aside and trains the cell afresh; a merged result never holds cells of
two data sets. Records that name no data are skipped as before. The fingerprint of CIFAR
mosaics is computed without building them, equal to the built mosaics' (a property)."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from test_cifar import write_tiny_cifar

from minimal_attn.backends.vr.table1 import mosaic_arguments
from minimal_attn.cli.main import cli
from minimal_attn.datasets.splits import load_mosaic_splits
from minimal_attn.errors import InputError
from minimal_attn.experiments import sweep_grid
from minimal_attn.experiments.checkpoints import data_fingerprint
from minimal_attn.experiments.config import check_config
from minimal_attn.experiments.sweep import run_sweep
from minimal_attn.experiments.sweep_cell import cell_config
from minimal_attn.experiments.sweep_data import OTHER_DATA, cell_fingerprint

pytest.importorskip("torch")

#: Images of each split of the tiny CIFAR-100 (two of each class).
C100 = 200
GRID = ["dataset=cifar10", "m=3", "paradigm=sa", "n_train=12", "n_test=6", "width=0.25",
        "batch_size=6", "seeds=1", "epochs=1"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny CIFAR-10 folders: ``small`` and ``large`` (as a subset and the full set),
    ``tiny`` (too few images for 12 mosaics); a tiny CIFAR-100 (``c100``)."""
    root = tmp_path_factory.mktemp("data")
    for name, n in (("small", 10), ("large", 20), ("tiny", 2)):
        write_tiny_cifar(root / name, n_per_split=n)
    _tiny_cifar100(root / "c100" / "cifar-100-python")
    return {name: str(root / name) for name in ("small", "large", "tiny", "c100")}


def _tiny_cifar100(root):
    """CIFAR-100's layout, two random images of each class in each split."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        fine = list(range(100)) * 2
        with open(root / split, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 256, (C100, 3072), dtype=np.uint8),
                         b"fine_labels": fine, b"coarse_labels": [k // 5 for k in fine]}, f)
    with open(root / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
                     b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}, f)


def sweep(out, data, *extra):
    return CliRunner().invoke(cli, ["sweep", "--grid", *GRID, *extra, "--threads", "1",
                                    "--data-dir", data, "--out", str(out)])


def _cell(tokens=GRID):
    cell, = sweep_grid.expand(sweep_grid.parse_tokens(tokens + ["data_dir=x"]))   # not named
    return cell


def _record(out):
    return json.loads((Path(out) / "cells" / f"{_cell().name}.json").read_text())


def _files(out):
    return {p: p.read_bytes() for p in sorted(Path(out).rglob("*")) if p.is_file()}


def _copy(done, out):
    """A copy of the finished sweep ``done`` at ``out``."""
    for path, data in _files(done).items():
        (out / path.relative_to(done)).parent.mkdir(parents=True, exist_ok=True)
        (out / path.relative_to(done)).write_bytes(data)


def _assert_refused_for_other_data(result, name, old, new, data_dir):
    """One line: cell ``name`` ran on data ``old``, ``data_dir`` gives ``new``; the fixes."""
    assert old != new
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {name} finished on other "
                                                   "data than this rerun would train on")
    assert f"fingerprint {old[:8]}; --data-dir {data_dir} gives {new[:8]}" in lines[0]
    assert "another --out" in lines[0] and "--retrain-other-data" in lines[0]


@pytest.fixture(scope="module")
def done(tmp_path_factory, folders):
    """A sweep of one cell on the small data."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    r = sweep(out, folders["small"])
    assert r.exit_code == 0, r.output
    return out


def test_a_rerun_on_other_data_is_refused_in_one_line_before_any_work(done, folders):
    same = sweep(done, folders["small"])
    assert same.exit_code == 0 and "already done" in same.output, same.output
    before = _files(done)
    r = sweep(done, folders["large"])
    assert r.exit_code == 2, r.output
    old = _record(done)["provenance"]["data_fingerprint"]
    new = cell_fingerprint(_cell(), {"data_dir": folders["large"]})
    _assert_refused_for_other_data(r, _cell().name, old, new, folders["large"])
    assert _files(done) == before                   # nothing written, nothing merged


def test_retrain_other_data_sets_the_old_aside_and_trains_afresh(tmp_path, done, folders):
    out = tmp_path / "s"
    _copy(done, out)
    old = _record(out)["provenance"]["data_fingerprint"]
    lines = []
    report = run_sweep(str(out), sweep_grid.parse_tokens(
        GRID + ["threads=1", f"data_dir={folders['large']}"]), log=lines.append,
        retrain_other_data=True)
    assert report["done"] == 1 and report["skipped"] == [] and not report["failed"]
    assert any("set aside" in line for line in lines), lines
    new = _record(out)["provenance"]["data_fingerprint"]
    assert new == cell_fingerprint(_cell(), {"data_dir": folders["large"]}) != old
    aside = out / OTHER_DATA / old[:8]
    assert json.loads((aside / f"{_cell().name}.json").read_text())["provenance"][
        "data_fingerprint"] == old
    assert (aside / _cell().name / "log.txt").exists()
    log = (out / "cells" / _cell().name / "log.txt").read_text()
    assert log.count(": start (") == 1 and "(resume=False)" in log   # afresh, new folder


def test_data_that_cannot_build_the_cell_is_refused_and_a_failed_retrain_merges_nothing(
        tmp_path, done, folders):
    r = sweep(done, folders["tiny"])
    assert r.exit_code == 2 and "cannot build its mosaics" in r.output, r.output
    out = tmp_path / "s"
    _copy(done, out)
    report = run_sweep(str(out), sweep_grid.parse_tokens(
        GRID + ["threads=1", f"data_dir={folders['tiny']}"]), retrain_other_data=True)
    assert list(report["failed"]) == [_cell().name]
    merged = json.loads((out / "results.json").read_text())
    assert merged["cells"] == [] and merged["missing"] == [_cell().name]   # old one not merged


def test_a_record_that_names_no_data_is_skipped_as_before(tmp_path, done, folders):
    out = tmp_path / "s"
    _copy(done, out)
    path = out / "cells" / f"{_cell().name}.json"
    record = json.loads(path.read_text())
    del record["provenance"]["data_fingerprint"]            # written before records did
    path.write_text(json.dumps(record))
    r = sweep(out, folders["large"])
    assert r.exit_code == 0 and "already done" in r.output, r.output
    assert "1 finished cell(s) (" in r.output and "name no data" in r.output


def test_generated_data_of_other_code_is_refused_too(tmp_path):
    tokens = ["dataset=synthetic", *GRID[1:], "threads=1"]
    out = tmp_path / "s"
    run_sweep(str(out), sweep_grid.parse_tokens(tokens))
    assert run_sweep(str(out), sweep_grid.parse_tokens(tokens))["skipped"]
    path = out / "cells" / f"{_cell(tokens).name}.json"
    record = json.loads(path.read_text())
    record["provenance"]["data_fingerprint"] = "0" * 40     # as if the generator changed
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match=r"fingerprint 00000000; this code gives [0-9a-f]{8}"):
        run_sweep(str(out), sweep_grid.parse_tokens(tokens))


def _readable(cell, operational):
    """The fingerprint of the mosaics built whole, as the cell's training records it
    (``MosaicTable1.checkpoint_reader``): every pixel filled, not only the hashed rows."""
    splits = load_mosaic_splits(**mosaic_arguments(check_config(cell_config(cell, operational))))
    return data_fingerprint(splits.train, splits.test)


@given(data=st.data())
def test_the_fingerprint_of_cifar_mosaics_equals_the_built_mosaics(folders, data):
    c100 = data.draw(st.booleans())
    n_max = C100 if c100 else 50                    # images in the small train split
    tokens = [f"dataset={'cifar100' if c100 else 'cifar10'}", "paradigm=sa",
              f"m={data.draw(st.integers(2, 6))}", f"n_train={data.draw(st.integers(1, n_max))}",
              f"n_test={data.draw(st.integers(1, 10))}",
              f"data_seed={data.draw(st.integers(0, 3))}",
              f"test_images={data.draw(st.sampled_from(['test', 'train']))}"]
    names = [f"fine{i}" for i in range(100)] if c100 else \
        ["airplane", "automobile", "bird", "cat", "deer", "dog"]
    foreground = data.draw(st.lists(st.sampled_from(names), min_size=2, max_size=4,
                                    unique=True)) if c100 or data.draw(st.booleans()) else None
    tokens += [f"foreground={'+'.join(foreground)}"] if foreground else []
    cell = _cell(tokens)
    operational = {"data_dir": folders["c100" if c100 else "small"]}
    assert cell_fingerprint(cell, operational) == _readable(cell, operational)


def test_the_fingerprint_of_the_real_cifar10_subset(shared_dataset):
    folder = str(shared_dataset("cifar10", "cifar-10-batches-py"))
    memo = {}
    for tokens in (["m=5", "n_train=10000", "n_test=5000"], ["m=20", "n_train=1000",
                                                            "n_test=300"]):
        cell = _cell(["dataset=cifar10", "paradigm=sa", *tokens])
        assert cell_fingerprint(cell, {"data_dir": folder}, memo) == \
            _readable(cell, {"data_dir": folder})


def test_too_few_images_are_refused_by_both(folders):
    cell = _cell(["dataset=cifar10", "paradigm=sa", "n_train=12"])
    for fingerprint in (cell_fingerprint, _readable):
        with pytest.raises(InputError, match="n_train=12"):
            fingerprint(cell, {"data_dir": folders["tiny"]})


def test_the_cli_retrains_cells_of_other_data_when_asked(tmp_path, done, folders):
    out = tmp_path / "s"
    _copy(done, out)
    old = _record(out)["provenance"]["data_fingerprint"]
    r = sweep(out, folders["large"], "--retrain-other-data")
    assert r.exit_code == 0 and "set aside" in r.output, r.output
    assert _record(out)["provenance"]["data_fingerprint"] == \
        cell_fingerprint(_cell(), {"data_dir": folders["large"]}) != old
