"""`attn-dyn fixed-focus`: JSON shape, files, the closed-form overlay, bad input."""

import csv
import json
import pickle

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn import fixed_focus as ff
from minimal_attn.cli.main import cli

SMALL = ["fixed-focus", "--m", "4", "--classes", "3", "--epochs", "6", "--lr", "0.1"]


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_json_shape_keys_as_typed_and_closed_form():
    r = run(*SMALL, "--alphas", "0.50,1.0,0.05", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)                       # the progress bar stays on stderr
    assert sorted(out) == ["ha", "lv", "sa"]
    for p, curves in out.items():
        assert list(curves) == ["0.50", "1.0", "0.05"]
        for key, c in curves.items():
            assert set(c) == {"epoch", "loss", "incentive", "loss_closed_form",
                              "incentive_closed_form"}
            assert c["epoch"] == list(range(7))
            assert all(len(c[k]) == 7 for k in c)
            exact = ff.closed_form_curves(p, [float(key)], 6, 0.1, 3)[float(key)]
            np.testing.assert_allclose(c["loss_closed_form"], exact["loss_closed_form"])
            np.testing.assert_allclose(c["loss"], c["loss_closed_form"], rtol=2e-3)
            np.testing.assert_allclose(c["incentive"], c["incentive_closed_form"], atol=1e-4)
        assert curves["1.0"]["incentive"] == [0.0] * 7          # alpha' = min(1.01, 1) = 1
        assert curves["0.50"]["loss"][0] == pytest.approx(np.log(3))


def test_delta_and_single_paradigm():
    r = run(*SMALL, "--alphas", "0.3", "--paradigm", "hard", "--delta", "0.2", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert list(out) == ["ha"]
    c = out["ha"]["0.3"]
    # HA: L = -alpha log beta + (1 - alpha) log C, so the incentive for alpha' = alpha + 0.2
    # is 0.2 (log C + log beta), with -log beta = (L - 0.7 log C) / 0.3
    for kind in ("", "_closed_form"):
        loss, inc = np.array(c["loss" + kind]), np.array(c["incentive" + kind])
        np.testing.assert_allclose(inc, 0.2 * (np.log(3) - (loss - 0.7 * np.log(3)) / 0.3),
                                   atol=1e-12)


def test_out_writes_csvs_and_figures(tmp_path):
    out = tmp_path / "figs"
    r = run(*SMALL, "--alphas", "0.2,0.6", "--paradigm", "sa,lv", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == [
        "fixed_focus_losses.png", "fixed_focus_lv.csv", "fixed_focus_sa.csv",
        "focus_incentives.png"]
    for png in ("fixed_focus_losses.png", "focus_incentives.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / png).stat().st_size > 20_000
    with open(out / "fixed_focus_lv.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["alpha", "epoch", "loss", "incentive", "loss_closed_form",
                       "incentive_closed_form"]
    assert len(rows) == 1 + 2 * 7
    assert [r[0] for r in rows[1:]] == ["0.2"] * 7 + ["0.6"] * 7
    assert [int(r[1]) for r in rows[1:8]] == list(range(7))
    assert float(rows[1][2]) == pytest.approx(np.log(3))
    assert abs(float(rows[-1][2]) / float(rows[-1][4]) - 1) < 2e-3
    assert "fixed_focus_losses.png" in r.stdout and "paradigm" in r.stdout


def test_help_states_the_defaults():
    r = run("fixed-focus", "--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "1000 epochs of step 5" in text and "Figures 2 and 3" in text


@pytest.mark.parametrize("args, message", [
    (["--alphas", "0.2,1.5"], "[0, 1]"),
    (["--alphas", "0.2,x"], "comma-separated"),
    (["--alphas", "0.2,nan"], "[0, 1]"),
    (["--alphas", "0.2,0.20"], "repeated"),
    (["--paradigm", "hybrid"], "schedule"),
    (["--paradigm", "sa,banana"], "unknown paradigm"),
    (["--epochs", "0"], "--epochs"),
    (["--lr", "-1"], "--lr"),
    (["--delta", "0"], "--delta"),
    (["--delta", "nan"], "--delta"),
    (["--m", "1"], "--m"),
    (["--classes", "1"], "--classes"),
    (["--setting", "mnist"], "--setting"),
    (["--setting", "cifar10"], "--data-dir"),
    (["--threads", "2"], "--threads applies to the CIFAR settings"),
    (["--setting", "cifar10", "--threads", "0"], "--threads must be an integer >= 1"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, args, message):
    out = tmp_path / "out"
    r = run(*SMALL, *args, "--out", str(out))
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("Error:") and len(r.stderr.strip().splitlines()) == 1
    assert message in r.stderr
    assert not out.exists()


def test_out_is_a_file(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    r = run(*SMALL, "--out", str(target))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_missing_cifar_folder_is_one_line(tmp_path):
    r = run("fixed-focus", "--setting", "cifar10", "--data-dir", str(tmp_path / "nope"),
            "--epochs", "1")
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1


def test_cifar10_runs_through_the_torch_model(shared_data, tmp_path):
    pytest.importorskip("minimal_attn.backends.vr.fixed_focus")    # needs torch too
    r = run("fixed-focus", "--setting", "cifar10", "--data-dir", str(shared_data / "cifar10"),
            "--n-train", "12", "--m", "3", "--epochs", "1", "--alphas", "0.3,0.9",
            "--json", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert sorted(out) == ["ha", "lv", "sa"]
    c = out["sa"]["0.3"]
    assert c["epoch"] == [0, 1] and len(c["loss"]) == 2 and c["loss_closed_form"] is None
    assert all(np.isfinite(c["loss"])) and all(np.isfinite(c["incentive"]))
    assert (tmp_path / "fixed_focus_losses.png").stat().st_size > 0


class StandInCNN:
    """Stands in for backends.torch_fixed_focus.CNNFixedFocusModel: a linear g on pixels."""

    made = []                                           # constructor calls, for the tests

    def __init__(self, X, y, n_classes, device="cpu", seed=0, dataset="cifar10",
                 optimizer="sgd", classifier="paper"):
        assert X.dtype == np.float32 and X.ndim == 5 and X.shape[2:] == (3, 32, 32)
        assert abs(float(X.mean())) < 3                  # normalised, not 0..255
        StandInCNN.made.append({"shape": X.shape, "n_classes": n_classes, "device": device,
                                "labels": sorted(set(y.tolist())), "dataset": dataset,
                                "optimizer": optimizer, "classifier": classifier,
                                "X": X, "y": y})
        self.inner = ff.LinearFixedFocusModel(X.reshape(X.shape[0], X.shape[1], -1) / 50.0,
                                              y, n_classes)

    def __getattr__(self, name):                        # init, losses, step
        return getattr(self.inner, name)


@pytest.fixture
def stand_in(monkeypatch):
    tff = pytest.importorskip("minimal_attn.backends.vr.fixed_focus")
    monkeypatch.setattr(tff, "CNNFixedFocusModel", StandInCNN)
    StandInCNN.made.clear()
    return StandInCNN.made


def test_cifar10_wiring(shared_data, stand_in, tmp_path, torch_one_thread):
    """Real CIFAR-10 subset -> mosaics (airplane/automobile/bird foreground) -> the model
    (with torch's --threads)."""
    import torch

    r = run("fixed-focus", "--setting", "cifar10", "--data-dir", str(shared_data / "cifar10"),
            "--n-train", "9", "--m", "3", "--epochs", "2", "--lr", "0.01", "--alphas", "0.5",
            "--device", "cpu", "--json", "--out", str(tmp_path), "--threads", "2")
    assert r.exit_code == 0, r.output
    assert torch.get_num_threads() == 2
    made = {k: v for k, v in stand_in[0].items() if k not in ("X", "y")}
    assert made == {"shape": (9, 3, 3, 32, 32), "n_classes": 3, "device": "cpu",
                    "labels": [0, 1, 2], "dataset": "cifar10", "optimizer": "sgd",
                    "classifier": "paper"}
    c = json.loads(r.stdout)["lv"]["0.5"]
    assert c["loss_closed_form"] is None and c["incentive_closed_form"] is None
    assert c["loss"][0] == pytest.approx(np.log(3)) and c["loss"][-1] < c["loss"][0]
    with open(tmp_path / "fixed_focus_sa.csv") as f:
        rows = list(csv.reader(f))
    assert rows[1][4:] == ["", ""]                      # no closed form for CIFAR


def _fake_cifar100(root):
    """A CIFAR-100 archive with 2 images per fine class; every pixel of an image of class k
    is k, so a mosaic segment tells which class it came from."""
    from minimal_attn.datasets.splits import CIFAR100_FOREGROUND

    others = [f"thing{k:02d}" for k in range(50)]
    names = sorted(list(CIFAR100_FOREGROUND) + others)  # the paper's classes, not the first 50
    (root / "cifar-100-python").mkdir()
    labels = [k for k in range(100) for _ in range(2)]
    for split in ("train", "test"):
        with open(root / "cifar-100-python" / split, "wb") as f:
            pickle.dump({b"data": np.repeat(np.array(labels, np.uint8)[:, None], 3072, 1),
                         b"fine_labels": labels,
                         b"coarse_labels": [k // 5 for k in labels]}, f)
    with open(root / "cifar-100-python" / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [n.encode() for n in names],
                     b"coarse_label_names": [f"s{k}".encode() for k in range(20)]}, f)
    return names


def test_cifar100_foreground_is_the_papers_as_in_train(tmp_path, stand_in):
    """The first --classes of the 50 animal and people classes, whatever the archive order."""
    from minimal_attn.datasets.mosaics import CIFAR10_MEAN, CIFAR10_STD
    from minimal_attn.datasets.splits import CIFAR100_FOREGROUND

    names = _fake_cifar100(tmp_path)
    r = run("fixed-focus", "--setting", "cifar100", "--data-dir", str(tmp_path),
            "--classes", "4", "--n-train", "8", "--m", "2", "--epochs", "1", "--paradigm", "ha")
    assert r.exit_code == 0, r.output
    made = stand_in[0]
    assert made["n_classes"] == 4 and made["labels"] == [0, 1, 2, 3]
    assert made["dataset"] == "cifar100"
    # undo the normalisation of the red channel: the pixel value is the archive class index
    red = made["X"][:, :, 0, 0, 0] * CIFAR10_STD[0] + CIFAR10_MEAN[0]          # (n, m)
    segment_class = np.rint(red * 255).astype(int)
    for n, label in enumerate(made["y"]):
        fg_classes = {names[k] for k in segment_class[n]} & set(CIFAR100_FOREGROUND[:4])
        assert fg_classes == {CIFAR100_FOREGROUND[label]}
    r = run("fixed-focus", "--setting", "cifar100", "--data-dir", str(tmp_path),
            "--classes", "51", "--epochs", "1")
    assert r.exit_code == 2 and "--classes must be at most 50" in r.stderr


def test_cifar10_with_the_real_cnn(shared_data, tmp_path):
    """End to end: CIFAR-10 mosaics through the torch CNN classifier of Appendix A.2."""
    pytest.importorskip("torch")
    r = run("fixed-focus", "--setting", "cifar10", "--data-dir", str(shared_data / "cifar10"),
            "--n-train", "6", "--m", "2", "--epochs", "1", "--alphas", "0.2,1.0",
            "--paradigm", "sa,lv", "--device", "cpu", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for p in ("sa", "lv"):
        for a in ("0.2", "1.0"):
            c = out[p][a]
            assert len(c["loss"]) == 2 and all(np.isfinite(c["loss"]))
            # a freshly initialised classifier is close to uniform over 3 classes
            assert abs(c["loss"][0] - np.log(3)) < 0.3
        assert out[p]["1.0"]["incentive"] == [0.0, 0.0]        # alpha' = alpha at alpha = 1


def test_divergence_and_size_are_refused_with_the_fix(tmp_path):
    r = run(*SMALL, "--lr", "1e300", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "diverged; lower the learning rate --lr" in r.stderr
    assert not (tmp_path / "o").exists()
    r = run("fixed-focus", "--m", "1000000")
    assert r.exit_code == 2 and "GiB" in r.stderr and "lower --m or --classes" in r.stderr


def test_library_call_equals_the_command():
    from minimal_attn.experiments.fixed_focus import (
        FixedFocusConfig,
        fixed_focus_json,
        run_fixed_focus,
    )

    r = run(*SMALL, "--alphas", "0.3,1", "--paradigm", "lv", "--json")
    cfg = FixedFocusConfig(m=4, n_classes=3, epochs=6, lr=0.1, alphas=["0.3", "1"],
                           paradigms=["lv"])
    assert json.loads(r.stdout) == json.loads(json.dumps(fixed_focus_json(
        run_fixed_focus(cfg))))


def test_the_authors_optimizer_and_classifier_reach_the_cnn(shared_data, stand_in, tmp_path):
    r = run("fixed-focus", "--setting", "cifar10", "--data-dir", str(shared_data / "cifar10"),
            "--n-train", "9", "--m", "3", "--epochs", "1", "--alphas", "0.5", "--optimizer",
            "adam", "--classifier", "lenet", "--json")
    assert r.exit_code == 0, r.output
    assert (stand_in[0]["optimizer"], stand_in[0]["classifier"]) == ("adam", "lenet")
    from minimal_attn.experiments import fixed_focus as lib

    resolved = lib.resolve(lib.FixedFocusConfig(setting="cifar10", data_dir=str(tmp_path),
                                                optimizer="adam"))
    assert resolved.lr == 5e-4                           # the authors' rate unless --lr
    r = run("fixed-focus", "--optimizer", "adam", "--out", str(tmp_path / "x"))
    assert r.exit_code == 2 and "linear-orthogonal" in r.stderr
    assert not (tmp_path / "x").exists()


def test_adam_trains_the_lenet_classifier_under_a_fixed_focus():
    """One Adam epoch per step lowers the fixed-focus loss at alpha = 1 (the classifier
    sees the foreground alone), from about log C at the start."""
    torch = pytest.importorskip("torch")
    from minimal_attn.backends.vr.fixed_focus import CNNFixedFocusModel

    gen = np.random.default_rng(0)
    X = gen.normal(size=(40, 2, 3, 32, 32)).astype(np.float32)
    y = gen.integers(0, 3, 40)
    X[np.arange(40), 0, y] += 1.5                       # class-coloured foreground
    model = CNNFixedFocusModel(X, y, 3, device="cpu", batch_size=10, optimizer="adam",
                               classifier="lenet", width=0.25)
    state = model.init([1.0])
    assert isinstance(state["opts"][0], torch.optim.Adam)
    la = np.log(np.broadcast_to(np.array([1.0, 1e-30]), (1, 40, 2)))
    before = model.losses(state, la, "sa")[0]
    for _ in range(5):
        state = model.step(state, la, "sa", 2e-3)
    after = model.losses(state, la, "sa")[0]
    assert abs(before - np.log(3)) < 0.3 and after < 0.5 * before
