"""Test scores split by whether a test mosaic's foreground image was seen in training
(minimal_attn.experiments.seen_images: the authors' released test mosaics)."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.data import Mosaics
from minimal_attn.errors import InputError
from minimal_attn.experiments import seen_images
from minimal_attn.experiments.cell_parts import join
from minimal_attn.experiments.results_store import render


def _mosaics(source, z):
    source, z = np.asarray(source), np.asarray(z)
    return Mosaics(np.zeros(source.shape), np.zeros(len(z), int), z, source=source)


def test_a_test_foreground_is_seen_when_a_training_mosaic_has_it_as_its_foreground():
    train = _mosaics([[3, 9, 9], [8, 5, 8]], [0, 1])            # foregrounds 3 and 5
    test = _mosaics([[5, 1, 1], [2, 7, 2], [9, 9, 3], [8, 1, 1]], [0, 1, 2, 0])
    # 5 and 3 were training foregrounds; 7 was not; 8 was only a background there
    assert seen_images.foreground_seen(train, test).tolist() == [True, False, True, False]
    with pytest.raises(InputError, match="image mosaics"):
        seen_images.foreground_seen(Mosaics(None, None, np.zeros(1, int)), test)


def test_breakdown_scores_each_group_by_hand():
    seen = np.array([True, True, False, False, False])
    seed0 = {"a_z": np.array([0.9, 0.1, 0.95, 0.9, 0.2]),
             "s_y": np.array([0.9, 0.9, 0.85, 0.5, 0.9]),
             "correct": np.array([True, True, True, False, True])}
    seed1 = {"a_z": np.array([0.9, 0.9, 0.1, 0.1, 0.1]),
             "s_y": np.array([0.9, 0.81, 0.1, 0.1, 0.1]),
             "correct": np.array([True, False, False, False, False])}
    b = seen_images.breakdown([seed0, seed1], seen)
    assert (b["fraction_seen"], b["n_seen"], b["n_unseen"]) == (0.4, 2, 3)
    # seed 0: seen SAIF 1/2 (only the first has both above 0.8), accuracy 2/2; unseen SAIF
    # 1/3, accuracy 2/3. Seed 1: seen SAIF 2/2, accuracy 1/2; unseen 0 and 0.
    assert b["seen"]["saif"]["per_seed"] == [0.5, 1.0]
    assert b["seen"]["accuracy"]["per_seed"] == [1.0, 0.5]
    assert b["unseen"]["saif"]["per_seed"] == pytest.approx([1 / 3, 0.0])
    assert b["unseen"]["accuracy"]["per_seed"] == pytest.approx([2 / 3, 0.0])
    assert b["seen"]["accuracy"]["mean"] == 0.75
    # a run folder written before `correct` was kept: SAIF only
    old = seen_images.breakdown([{k: seed0[k] for k in ("a_z", "s_y")}], seen)
    assert old["seen"]["accuracy"] is None and old["seen"]["saif"]["per_seed"] == [0.5]
    # no seen mosaic at all (held-out images): that group is None
    assert seen_images.breakdown([seed0], np.zeros(5, bool))["seen"] is None
    with pytest.raises(InputError, match="not of these mosaics"):
        seen_images.breakdown([seed0], np.zeros(4, bool))


def test_seen_foregrounds_are_the_pixels_of_training_foregrounds(shared_dataset):
    """Independently of the source indices: a test foreground is seen exactly when its
    pixels are those of a training mosaic's foreground; and the seen fraction is the
    chance that one of n_train / C draws of a class hits a given one of its images."""
    from minimal_attn.datasets.splits import load_mosaic_splits

    data = shared_dataset("cifar10", "cifar-10-batches-py").parent
    s = load_mosaic_splits("cifar10", 5, 3000, 1000, data_dir=data, test_images="train")
    seen = seen_images.foreground_seen(s.train, s.test)

    def foreground_bytes(mosaics):
        return [mosaics.X[i, z].tobytes() for i, z in enumerate(mosaics.z)]

    trained = set(foreground_bytes(s.train))
    assert seen.tolist() == [b in trained for b in foreground_bytes(s.test)]
    # the shared subset: 1,000 images a foreground class, 1,000 training mosaics a class
    expected = 1 - (1 - 1 / 1000) ** 1000                       # about 1 - 1/e = 0.632
    assert abs(seen.mean() - expected) < 0.05
    held_out = load_mosaic_splits("cifar10", 5, 300, 200, data_dir=data)
    assert held_out.test.source is not None                      # indices of the test split


def test_a_released_run_reports_its_seen_and_unseen_test_scores(tmp_path, shared_dataset,
                                                                 torch_one_thread):
    data = shared_dataset("cifar10", "cifar-10-batches-py").parent
    cell = "cpu-t1-cifar10-m5-released-sa"          # its run folder, as `cells seen` reads
    out = tmp_path / "work" / cell
    result = CliRunner().invoke(cli, [
        "train", "--protocol", "released", "--dataset", "cifar10", "--data-dir", str(data),
        "--m", "3", "--paradigm", "sa,lv", "--n-train", "200", "--n-test", "150",
        "--epochs", "1", "--seeds", "2", "--width", "0.25", "--batch-size", "50",
        "--batch-seeds", "--device", "cpu", "--no-progress", "--out", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    for p in ("sa", "lv"):
        b = results[p]["test_seen"]
        assert 0 < b["n_seen"] < 150 and b["n_seen"] + b["n_unseen"] == 150
        f = b["fraction_seen"]
        # the two groups weighted by their sizes give the whole test set's scores
        for key in ("accuracy", "saif"):
            whole = [s[key] for s in results[p]["test"]["per_seed"]]
            parts = [f * a + (1 - f) * u for a, u in zip(b["seen"][key]["per_seed"],
                                                         b["unseen"][key]["per_seed"])]
            assert parts == pytest.approx(whole, abs=1e-12)
        # and the same numbers again from the folder alone
        again = seen_images.from_run(str(out), str(data))[p]
        assert again == b
    assert "training foreground" in (out / "summary.md").read_text()
    shown = CliRunner().invoke(cli, ["cells", "seen", cell, "--data-root", str(data.parent),
                                     "--work", str(tmp_path / "work")])
    assert shown.exit_code == 0, shown.output
    sa = results["sa"]["test_seen"]
    assert f"{100 * sa['seen']['accuracy']['mean']:.1f} ± " in shown.output
    assert f"({sa['n_seen']} of 150)" in shown.output


def test_cells_seen_refuses_a_cell_without_images(tmp_path):
    result = CliRunner().invoke(cli, ["cells", "seen", "t2-sst2", "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and "not a CIFAR Table 1 cell" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["cells", "seen", "cpu-t1-cifar10-m5-released-sa",
                                      "--data-root", str(tmp_path), "--work", str(tmp_path)])
    assert result.exit_code == 2 and "results.json" in result.output


def test_from_run_refuses_a_run_without_seen_images(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    config = {"dataset": "cifar10", "m": 5, "n_train": 10, "n_test": 10, "paradigms": ["sa"],
              "seeds": [0], "test_images": "test"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="held-out images"):
        seen_images.from_run(str(tmp_path), "x")
    with pytest.raises(InputError, match="no finished run"):
        seen_images.from_run(str(tmp_path / "nothing"), "x")


def test_from_run_refuses_malformed_files_in_one_line(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="config.json.*rerun the run"):
        seen_images.from_run(str(tmp_path), "x")
    (tmp_path / "config.json").write_text(json.dumps({"test_images": "train"}))
    with pytest.raises(InputError, match=r"of a CIFAR Table 1 run \(dataset, m"):
        seen_images.from_run(str(tmp_path), "x")
    config = {"dataset": "cifar10", "m": 5, "n_train": 10, "n_test": 10, "paradigms": ["sa"],
              "seeds": [0], "test_images": "train"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="instances_sa_seed0.npz is missing"):
        seen_images.from_run(str(tmp_path), "x")
    (tmp_path / "instances_sa_seed0.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(InputError, match="instances_sa_seed0.npz.*rerun the run"):
        seen_images.from_run(str(tmp_path), "x")
    np.savez(tmp_path / "instances_sa_seed0.npz", train_a_z=np.zeros(3))
    with pytest.raises(InputError, match="no test_a_z"):
        seen_images.from_run(str(tmp_path), "x")
    np.savez(tmp_path / "instances_sa_seed0.npz", test_a_z=np.array("x"), test_s_y=np.zeros(3))
    with pytest.raises(InputError, match="test_a_z not one number per mosaic"):
        seen_images.from_run(str(tmp_path), "x")


def _part(index, seen_acc, unseen_acc):
    seeds = len(seen_acc)
    group = {"accuracy": {"per_seed": seen_acc}, "saif": {"per_seed": [0.5] * seeds}}
    other = {"accuracy": {"per_seed": unseen_acc}, "saif": {"per_seed": [0.25] * seeds}}
    metric = {"per_seed": [0.6] * seeds}
    return {"format": 1, "cell": f"c@{index}", "kind": "table1", "scale": "paper",
            "title": "c", "settings": {"first_seed": 0}, "paper": None,
            "result": {split: {"accuracy": metric, "saif": metric} for split in ("train", "test")}
            | {"test_seen": {"fraction_seen": 0.5, "n_seen": 5, "n_unseen": 5,
                             "seen": group, "unseen": other}},
            "part": {"of": "c", "index": index, "parts": 2, "first_seed": 2 * index - 2,
                     "seeds": seeds, "title": "c"},
            "provenance": {"card": "CPU", "commit": "abc", "date": "2026-11-27"}}


def test_parts_join_their_seen_scores_and_the_report_shows_them():
    joined = join("c", [_part(1, [0.9, 0.7], [0.5, 0.6]), _part(2, [0.8, 1.0], [0.4, 0.5])])
    seen = joined["result"]["test_seen"]
    assert seen["seen"]["accuracy"]["per_seed"] == [0.9, 0.7, 0.8, 1.0]
    assert seen["seen"]["accuracy"]["mean"] == pytest.approx(0.85)
    assert seen["unseen"]["accuracy"]["std"] == pytest.approx(
        np.std([0.5, 0.6, 0.4, 0.5], ddof=1))
    assert seen["fraction_seen"] == 0.5
    text = render([_part(1, [0.9, 0.7], [0.5, 0.6]), _part(2, [0.8, 1.0], [0.4, 0.5])])
    row = [line for line in text.splitlines() if line.startswith("| c ") and "50.0%" in line]
    assert len(row) == 1
    assert "85.0 ± " in row[0] and f"{100 * math.fsum([0.5, 0.6, 0.4, 0.5]) / 4:.1f} ± " in row[0]
