"""Training, evaluation, checkpoints and resume of the CNN FCAM (Section 2.4, Table 1)."""

import copy

import numpy as np
import pytest

from minimal_attn import data, fixed_focus
from minimal_attn.data import Mosaics
from minimal_attn.datasets import mosaics
from minimal_attn.errors import InputError
from minimal_attn.experiments.linear_train import train_numpy_run
from minimal_attn.experiments.train_loop import LINEAR_LR, PAPER_LR, TrainConfig, checkpoint_path

torch = pytest.importorskip("torch")
from minimal_attn.backends.vr.fixed_focus import CNNFixedFocusModel  # noqa: E402
from minimal_attn.backends.vr.image_store import ImageStore  # noqa: E402
from minimal_attn.backends.vr.train import train_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def synthetic():
    return (mosaics.synthetic_image_mosaics(240, 5, seed=0),
            mosaics.synthetic_image_mosaics(120, 5, seed=1))


def test_short_cpu_run_learns_well_above_chance(synthetic):
    train, test = synthetic
    config = TrainConfig(paradigm="sa", epochs=5, lr=0.03, batch_size=20, width=0.5,
                         device="cpu")
    lines = []
    result = train_run(config, train, test, progress=False, log=lines.append)
    assert result["test"]["accuracy"] >= 0.8                      # chance: 1/3
    # the dead-unit report: every ReLU layer of both networks, printed at the start
    layers = result["dead_units"]
    assert [d["units"] for d in layers["focus"]] == [16, 32, 32, 256, 64, 10]
    assert all(0 <= d["dead"] < d["units"] for net in layers.values() for d in net)
    assert lines[0].startswith("sa seed 0: dead units at start")
    # each count labelled with its layer: "focus conv1 0/16 conv2 0/32 ...; classifier ..."
    focus = " ".join(f"{d['layer']} {d['dead']}/{d['units']}" for d in layers["focus"])
    assert f"focus {focus}; classifier conv1 " in lines[0]
    assert result["train"]["accuracy"] >= 0.8
    history = result["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3, 4, 5]
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    # the focus left its uniform start (a_z = 1/m) towards the foreground
    assert history[0]["mean_a_z"] == pytest.approx(0.2, abs=0.01)
    assert history[-1]["mean_a_z"] > 0.3
    assert 0 <= result["test"]["saif"] <= 1
    assert result["instances"]["test"]["a_z"].shape == (120,)


def _timeless(history):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in history]


def _stop_after_first_epoch(epoch, record):
    if epoch == 0:
        raise KeyboardInterrupt("killed after one epoch")


@pytest.mark.parametrize("runner,make_data,extra", [
    (train_run, lambda: (mosaics.synthetic_image_mosaics(40, 3, seed=0),
                         mosaics.synthetic_image_mosaics(20, 3, seed=1)),
     {"width": 0.25, "device": "cpu"}),
    (train_numpy_run, lambda: (data.gaussian_mosaics(60, 3, 3, seed=0),
                               data.gaussian_mosaics(30, 3, 3, seed=1)), {})])
def test_resume_equals_uninterrupted(tmp_path, runner, make_data, extra):
    train, test = make_data()
    # hybrid, switching after the interruption: the phase and lr schedule must resume too
    config = TrainConfig(paradigm="hybrid", epochs=3, switch_epoch=2, batch_size=20,
                         lr=0.05, hybrid_lr=0.02, seed=3, **extra)
    full = runner(config, train, test, out_dir=str(tmp_path / "a"), progress=False)
    with pytest.raises(KeyboardInterrupt):
        runner(config, train, test, out_dir=str(tmp_path / "b"), progress=False,
               callback=_stop_after_first_epoch)
    resumed = runner(config, train, test, out_dir=str(tmp_path / "b"), resume=True,
                     progress=False)
    assert resumed["resumed_from_epoch"] == 1
    assert [h["phase"] for h in full["history"]] == ["sa", "sa", "ha"]
    # everything but the wall-clock seconds is identical
    assert _timeless(resumed["history"]) == _timeless(full["history"])
    assert resumed["seconds"] >= resumed["history"][0]["seconds"] > 0
    assert resumed["train"] == full["train"] and resumed["test"] == full["test"]
    if runner is train_run:
        a = torch.load(checkpoint_path(str(tmp_path / "a"), config), weights_only=True)
        b = torch.load(checkpoint_path(str(tmp_path / "b"), config), weights_only=True)
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), key
        assert torch.equal(a["generator"], b["generator"])


def test_resume_refuses_other_settings(tmp_path):
    train, test = data.gaussian_mosaics(30, 3, 3, seed=0), data.gaussian_mosaics(10, 3, 3)
    config = TrainConfig(paradigm="sa", epochs=1, batch_size=10)
    train_numpy_run(config, train, test, out_dir=str(tmp_path), progress=False)
    other = TrainConfig(paradigm="sa", epochs=1, batch_size=5)
    with pytest.raises(InputError, match="different settings"):
        train_numpy_run(other, train, test, out_dir=str(tmp_path), resume=True,
                        progress=False)
    with pytest.raises(InputError, match=r"different settings \(data \(another data set"):
        train_numpy_run(config, data.gaussian_mosaics(30, 3, 3, seed=9), test,
                        out_dir=str(tmp_path), resume=True, progress=False)


def test_divergence_is_a_clear_error():
    train = mosaics.synthetic_image_mosaics(20, 2, seed=0)
    config = TrainConfig(paradigm="lv", epochs=2, lr=1e12, batch_size=10, width=0.25,
                         device="cpu")
    with pytest.raises(InputError, match="diverged"):
        train_run(config, train, train, progress=False)


def test_learning_rates_and_hybrid_schedule():
    assert PAPER_LR["cifar10"] == {"sa": 0.01, "ha": 0.005, "lv": 0.01}
    assert PAPER_LR["cifar100"] == {"sa": 0.005, "ha": 0.001, "lv": 0.01}
    c = TrainConfig(paradigm="hybrid", epochs=6, dataset="cifar100")
    assert [c.phase(e) for e in range(6)] == ["sa"] * 3 + ["ha"] * 3
    assert [c.learning_rate(e) for e in (0, 3)] == [0.005, 0.001]
    # A.2.2: CIFAR-100 HA at m = 20 takes 0.007 (0.001 at m = 5); nothing else moves
    c20 = TrainConfig(paradigm="hybrid", epochs=6, dataset="cifar100", m=20)
    assert [c20.learning_rate(e) for e in (0, 3)] == [0.005, 0.007]
    assert TrainConfig(paradigm="ha", dataset="cifar10", m=20).rates() == {"ha": 0.005}
    assert TrainConfig(paradigm="lv", dataset="cifar100", m=20).rates() == {"lv": 0.01}
    c = TrainConfig(paradigm="hybrid", epochs=6, switch_epoch=1, lr=0.1, hybrid_lr=0.2)
    assert [c.learning_rate(e) for e in (0, 1, 5)] == [0.1, 0.2, 0.2]
    assert TrainConfig(paradigm="soft").paradigm == "sa"
    assert TrainConfig(paradigm="ha").learning_rate(0, LINEAR_LR) == LINEAR_LR["ha"]
    with pytest.raises(InputError):
        TrainConfig(paradigm="xx")


def test_uint8_images_are_normalised_like_the_core():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(4, 2, 3, 32, 32), dtype=np.uint8)
    store = ImageStore(X, torch.device("cpu"))
    batch = store[torch.tensor([3, 0])]
    assert batch.dtype == torch.float32
    np.testing.assert_array_equal(batch.numpy(), mosaics.to_float_images(X[[3, 0]]))


def test_the_authors_pixel_scaling_maps_0_255_onto_minus_1_1():
    """--pixels half: (x / 255 - 0.5) / 0.5 in every channel, by hand at 0, 51, 255."""
    X = np.array([0, 51, 255], dtype=np.uint8).reshape(1, 1, 1, 1, 3).repeat(3, axis=2)
    half = ImageStore(X, torch.device("cpu"), pixels="half")[torch.tensor([0])].numpy()
    np.testing.assert_allclose(half[0, 0, :, 0], [[-1.0, -0.6, 1.0]] * 3, rtol=0, atol=1e-6)
    standard = ImageStore(X, torch.device("cpu"))[torch.tensor([0])].numpy()
    assert standard[0, 0, 0, 0, 0] == pytest.approx(-0.4914 / 0.2470, rel=1e-6)
    with pytest.raises(InputError, match="pixels must be one of standard, half"):
        ImageStore(X, torch.device("cpu"), pixels="unit")


def test_numpy_backend_learns_linear_orthogonal():
    full = data.linear_orthogonal(300, 4, 3, d=8, seed=0)
    train = Mosaics(full.X[:200], full.y[:200], full.z[:200])
    test = Mosaics(full.X[200:], full.y[200:], full.z[200:])
    result = train_numpy_run(TrainConfig(paradigm="lv", epochs=40, batch_size=50), train,
                             test, progress=False)
    assert result["test"]["accuracy"] == 1.0 and result["test"]["saif"] > 0.9


def test_cnn_fixed_focus_model_matches_the_section_3_losses():
    mos = mosaics.synthetic_image_mosaics(30, 3, seed=0)
    model = CNNFixedFocusModel(mos.X, mos.y, 3, device="cpu", batch_size=8, width=0.25)
    alphas = [0.2, 0.7, 1.0]
    la = np.stack([data.fixed_log_attention(mos.z, 3, a) for a in alphas])   # (A, N, m)
    state = model.init(alphas)
    g = copy.deepcopy(state["nets"][1].classifier).double()     # a float64 twin of alpha 0.7's g

    def g_numpy(x):                       # segments (..., 3, 32, 32) -> logits (..., C)
        with torch.no_grad():
            flat = torch.as_tensor(x).reshape((-1,) + x.shape[-3:])
            return g(flat).numpy().reshape(x.shape[:-3] + (-1,))

    X64 = mos.X.astype(np.float64)
    for paradigm in ("sa", "ha", "lv"):
        expected = fixed_focus.fixed_focus_loss(paradigm, g_numpy, X64, mos.y, mos.z, 0.7)
        assert model.losses(state, la, paradigm)[1] == pytest.approx(expected, rel=1e-5)
    # with alpha = 1 every paradigm sees only x_z: SA = HA = LV
    at_one = [model.losses(state, la, p)[2] for p in ("sa", "ha", "lv")]
    assert at_one == pytest.approx([at_one[0]] * 3, rel=1e-5)
    before = model.losses(state, la, "ha")
    for _ in range(3):
        state = model.step(state, la, "ha", lr=0.05)
    assert state["epoch"] == 3
    assert np.all(model.losses(state, la, "ha") < before)


def test_batch_seeds_equals_separate_runs_and_shares_checkpoints(tmp_path):
    pytest.importorskip("minimal_attn.backends.vr.batched_train",
                        reason="backends/vr/batched_train.py (batched seeds) not merged")
    from dataclasses import replace

    from minimal_attn.backends.vr.table1 import ExperimentConfig, run_experiment

    c = ExperimentConfig(backend="torch", dataset="synthetic", m=3, epochs=3, seeds=2,
                         n_train=20, n_test=10, batch_size=10, width=0.25, device="cpu",
                         paradigms=["hybrid"], switch_epoch="auto", lr={"sa": 0.05, "ha": 0.02})
    separate, _ = run_experiment(c, out=str(tmp_path / "a"))
    batched, meta = run_experiment(replace(c, batch_seeds=True), out=str(tmp_path / "b"))
    for s in range(2):
        a, b = (r["hybrid"]["history"][s]["epochs"] for r in (separate, batched))
        assert [h["phase"] for h in a] == [h["phase"] for h in b]
        np.testing.assert_allclose([h["loss"] for h in b], [h["loss"] for h in a], rtol=1e-5)
    assert batched["hybrid"]["test"]["accuracy"] == pytest.approx(
        separate["hybrid"]["test"]["accuracy"])
    # the batched run's checkpoints are ordinary ones: a separate resume reads them
    again, _ = run_experiment(c, out=str(tmp_path / "b"), resume=True)
    assert again["hybrid"]["test"]["per_seed"] == batched["hybrid"]["test"]["per_seed"]
