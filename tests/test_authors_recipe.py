"""The authors' recipe (V&R Table 1 as their released code trains it): Adam, the mirrored
uniform start, the LeNet classifier and the stop rule, alone and with seeds batched.

References are independent of the code under test: ``torch.optim.Adam`` on plain
``FCAM`` models, the architecture as ``../shared/papers/authors-code-notes.md``
describes it (parameter counts by hand), and separate ``train_run`` calls.
"""

import json

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.datasets.splits import load_mosaic_splits
from minimal_attn.errors import InputError
from minimal_attn.experiments.config import ExperimentConfig, apply_protocol, check_config
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.train_loop import TrainConfig, affecting

torch = pytest.importorskip("torch")
from batched_helpers import MODES, SEEDS, Store, batched_seeds, separate_epochs  # noqa: E402

from minimal_attn.backends import torch_backend as tb  # noqa: E402
from minimal_attn.backends.vr.batched import stacked_parameters, unstack  # noqa: E402
from minimal_attn.backends.vr.batched_seeds import train_seeds  # noqa: E402
from minimal_attn.backends.vr.models import (  # noqa: E402
    ConvNet,
    build_fcam,
    classifier_config,
    focus_config,
    scaled,
)
from minimal_attn.backends.vr.train import train_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")


# --- the networks --------------------------------------------------------------------

def test_lenet_classifier_has_the_authors_layers():
    """conv5x5 3->6, pool, conv5x5 6->16, pool, fc 400->120->84->10->3 (biases)."""
    net = ConvNet(classifier_config("cifar10", 3, kind="lenet"))
    expected = [3 * 6 * 25 + 6, 6 * 16 * 25 + 16, 400 * 120 + 120, 120 * 84 + 84,
                84 * 10 + 10, 10 * 3 + 3]
    assert sorted(p.numel() for p in net.parameters() if p.ndim > 1) == sorted([
        3 * 6 * 25, 6 * 16 * 25, 400 * 120, 120 * 84, 84 * 10, 10 * 3])
    assert sum(p.numel() for p in net.parameters()) == sum(expected)
    assert net(torch.randn(2, 3, 32, 32)).shape == (2, 3)


@pytest.mark.parametrize("width", [1.0, 0.25])
def test_mirrored_focus_is_uniform_with_every_weight_live(width):
    cfg = scaled(focus_config("cifar10", start="mirror"), width)
    net = ConvNet(cfg, torch.Generator().manual_seed(3)).double()
    x = torch.randn(16, 3, 32, 32, dtype=torch.float64)
    out = net(x).detach()
    # zero in exact arithmetic; the matmul's summation order leaves rounding only
    assert float(out.abs().max()) < 1e-14
    for name, p in net.named_parameters():
        assert (p != 0).float().mean() > 0.95, name                # every layer non-zero
    # every layer gets a gradient from the first step (the zero start: only the output)
    X = torch.randn(8, 5, 3, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    for start, live in (("mirror", "all"), ("zero", "output")):
        model = build_fcam("cifar10", 3, 0, focus_cfg=scaled(focus_config("cifar10", start),
                                                             width)).double()
        value = tb.loss("sa", *model(X, "sa"), y)
        value.backward()
        grads = {n: float(p.grad.abs().max()) for n, p in model.focus.named_parameters()}
        if live == "all":
            assert min(grads.values()) > 0, grads
        else:
            assert grads.pop("output.weight") > 0 and max(grads.values()) == 0


def test_mirror_needs_a_hidden_layer():
    cfg = focus_config("cifar10", "mirror")
    with pytest.raises(InputError, match="mirror"):
        ConvNet(type(cfg)(conv_channels=(8,), fc_widths=(), bias=False, start="mirror"))
    with pytest.raises(InputError, match="focus_init"):
        focus_config("cifar10", "ones")
    with pytest.raises(InputError, match="classifier"):
        classifier_config("cifar10", 3, kind="resnet")


# --- Adam with seeds batched equals separate Adam runs --------------------------------

def tiny_fcam(seed, device="cpu"):
    """Width 0.25, mirrored focus, LeNet classifier, float64 (the authors' networks)."""
    model = build_fcam(seed=seed, focus_cfg=scaled(focus_config(start="mirror"), 0.25),
                       classifier_cfg=scaled(classifier_config(kind="lenet"), 0.25))
    return model.double().to(device)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("phases", [("sa",) * 3, ("ha",) * 3, ("lv",) * 3, ("sa", "ha", "lv")],
                         ids=["sa", "ha", "lv", "mixed"])
def test_stacked_adam_equals_separate_adam_in_float64(mode, phases):
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(12, 3, 3, 32, 32, generator=gen, dtype=torch.float64)
    z, y = torch.randint(0, 3, (12,), generator=gen), torch.randint(0, 3, (12,), generator=gen)
    store, lrs = Store(X, z), [1e-3, 5e-4, 2e-3]
    run = batched_seeds([tiny_fcam(s) for s in SEEDS], SEEDS, mode, store, y,
                        optimizer="adam")
    before = [p.detach().clone() for p in stacked_parameters(run.model)]
    stats = [run.train_epoch(phases, lrs, epoch, lambda loss: None) for epoch in range(2)]
    assert max(float((p.detach() - q).abs().max())
               for p, q in zip(stacked_parameters(run.model), before)) > 1e-4
    states, seed_states = unstack(run.model), run.seed_states()
    for k, seed in enumerate(SEEDS):
        model = tiny_fcam(seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=lrs[k])
        losses = separate_epochs(model, optimizer, store, y, [phases[k]] * 2, [lrs[k]] * 2, 4,
                                 seed)
        for name, p in model.named_parameters():
            # Adam divides by sqrt(v): where a gradient is near zero (the mirrored halves
            # cancel), the gradients' last bits (batched matmuls sum in another order)
            # move a step by a tiny fraction of lr; the update itself is exact
            # (test_stacked_adam_update_is_torchs_bit_for_bit)
            torch.testing.assert_close(states[k][name], p.detach(), rtol=1e-8, atol=1e-8)
        assert [s[k][0] for s in stats] == pytest.approx(losses, rel=1e-10)
        theirs = optimizer.state_dict()
        ours = seed_states[k]["optimizer"]
        assert ours["param_groups"] == theirs["param_groups"]
        for i, entry in theirs["state"].items():
            assert float(ours["state"][i]["step"]) == float(entry["step"]) == 6
            for key in ("exp_avg", "exp_avg_sq"):
                # the gradients agree to rounding; relative to the moment's scale
                torch.testing.assert_close(ours["state"][i][key], entry[key], rtol=1e-6,
                                           atol=1e-9 * float(entry[key].abs().max()))


# --- the stop rule ----------------------------------------------------------------------

class Scripted:
    KIND, LR_TABLE, m = "scripted", {"sa": 0.1, "ha": 0.2, "lv": 0.3}, 5

    def __init__(self, loss):
        self.loss, self.epochs = loss, 0

    def steps(self, batch_size):
        return 1

    def train_epoch(self, phase, lr, epoch, step):
        self.epochs += 1
        return self.loss[epoch], 0.5, 0.2

    def evaluate(self, split, rule):
        return {"accuracy": 0.5, "saif": 0.0}, {}


def test_stop_rule_ends_at_the_first_epoch_at_or_below_the_threshold():
    trainer = Scripted([1.0, 0.5, 0.05, 0.01, 0.2, 0.1])
    result = run_epochs(TrainConfig(epochs=6, stop_loss=0.05), trainer, "data")
    assert trainer.epochs == 3 and result["stopped_epoch"] == 3
    assert [h["epoch"] for h in result["history"]] == [1, 2, 3]
    trainer = Scripted([1.0, 0.5, 0.06, 0.07, 0.2, 0.1])
    result = run_epochs(TrainConfig(epochs=6, stop_loss=0.05), trainer, "data")
    assert trainer.epochs == 6 and result["stopped_epoch"] is None


def test_the_stop_rule_never_ends_a_hybrid_in_its_sa_phase():
    # every epoch's loss meets the rule: SA epochs go on to the switch, HA's first ends it
    losses = [0.01] * 6
    trainer = Scripted(losses)
    result = run_epochs(TrainConfig(paradigm="hybrid", epochs=6, stop_loss=0.05,
                                    switch_epoch=3), trainer, "data")
    assert [h["phase"] for h in result["history"]] == ["sa", "sa", "sa", "ha"]
    assert result["stopped_epoch"] == 4 and trainer.epochs == 4
    # auto: SA meeting the rule is the switch; the first HA epoch then ends the run
    trainer = Scripted(losses)
    result = run_epochs(TrainConfig(paradigm="hybrid", epochs=6, stop_loss=0.05,
                                    switch_epoch="auto"), trainer, "data")
    assert [h["phase"] for h in result["history"]] == ["sa", "ha"]
    assert result["stopped_epoch"] == 2 and result["switch_epoch"] == 1
    # without the rule met, auto switches as before (at the latest, epochs - epochs // 4)
    trainer = Scripted([1.0] * 8)
    result = run_epochs(TrainConfig(paradigm="hybrid", epochs=8, stop_loss=0.05,
                                    switch_epoch="auto"), trainer, "data")
    assert result["switch_epoch"] == 6 and result["stopped_epoch"] is None


def test_checkpoints_of_default_recipe_keep_their_settings_key():
    """Runs with the paper's recipe record the same settings as before Adam existed, so
    their checkpoints still resume; the authors' recipe is told apart."""
    sgd = affecting(TrainConfig(paradigm="sa"), None)
    assert "optimizer" not in sgd and "focus_init" not in sgd and sgd["momentum"] == 0.9
    adam = affecting(TrainConfig(paradigm="sa", optimizer="adam", focus_init="mirror",
                                 classifier="lenet"), None)
    assert adam["optimizer"] == "adam" and adam["lr"] == {"sa": 5e-4}
    assert "momentum" not in adam and adam["classifier"] == "lenet"
    # the pixel scaling changes the trajectory: a checkpoint of one does not resume the other
    assert "pixels" not in sgd
    assert affecting(TrainConfig(paradigm="sa", pixels="half"), None)["pixels"] == "half"
    with pytest.raises(InputError, match="pixels must be one of standard, half"):
        TrainConfig(pixels="unit")
    with pytest.raises(InputError, match="optimizer"):
        TrainConfig(optimizer="rmsprop")


@pytest.fixture
def float64(monkeypatch):
    """Both trainers (separate and batched) build float64 models and keep float64 images,
    so the comparison is not blurred by float32 rounding (which Adam amplifies)."""
    from minimal_attn.backends.vr import batched_train, image_store
    from minimal_attn.backends.vr import models as torch_models
    from minimal_attn.backends.vr import train as torch_train

    class Store64(image_store.ImageStore):
        def __init__(self, X, device, z=None, pixels="standard"):
            super().__init__(X, device, z, pixels)
            self.X = self.X.double()

    def build64(*args, **kwargs):
        return torch_models.build_fcam_for(*args, **kwargs).double()

    for module in (image_store, torch_train, batched_train):
        monkeypatch.setattr(module, "ImageStore", Store64)
    monkeypatch.setattr(torch_train, "build_fcam_for", build64)
    original = torch_models.build_fcam_for
    monkeypatch.setattr(torch_models, "build_fcam_for",
                        lambda *a, **k: original(*a, **k).double())


@pytest.fixture(scope="module")
def tiny_splits():
    return load_mosaic_splits("synthetic", 3, 40, 20)


def recipe(paradigm, seed=0, **extra):
    return TrainConfig(**{**dict(paradigm=paradigm, epochs=3, switch_epoch=1, lr=2e-3,
                                 hybrid_lr=1e-3, batch_size=10, width=0.25, device="cpu",
                                 optimizer="adam", focus_init="mirror", classifier="lenet",
                                 seed=seed), **extra})


@pytest.mark.parametrize("paradigm", ["sa", "hybrid"])
def test_batched_adam_with_a_stop_rule_equals_separate_runs(paradigm, tiny_splits, tmp_path,
                                                             float64):
    """The threshold lies between the seeds' losses of the first epoch the rule may end
    (the hybrid's first HA epoch, epoch 2), so some seeds stop there while the others go
    on: the batched run must still equal separate runs."""
    free = [train_run(recipe(paradigm, s), tiny_splits.train, tiny_splits.test)
            for s in SEEDS]
    at = 1 if paradigm == "sa" else 2                         # the first epoch it may end
    first = sorted(r["history"][at - 1]["loss"] for r in free)
    stop = (first[0] + first[1]) / 2                          # one seed stops at epoch `at`
    configs = [recipe(paradigm, s, stop_loss=stop) for s in SEEDS]
    single = [train_run(cfg, tiny_splits.train, tiny_splits.test, out_dir=str(tmp_path / "s"))
              for cfg in configs]
    batched = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "b"))
    stopped = [r["stopped_epoch"] for r in single]
    assert stopped.count(at) >= 1 and len(set(len(r["history"]) for r in single)) > 1
    for ours, theirs in zip(batched, single):
        assert ours["stopped_epoch"] == theirs["stopped_epoch"]
        assert len(ours["history"]) == len(theirs["history"])
        for a, b in zip(ours["history"], theirs["history"]):
            assert (a["phase"], a["lr"], a["epoch"]) == (b["phase"], b["lr"], b["epoch"])
            for key in ("loss", "mean_a_z", "test_accuracy"):
                assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key
        assert ours["test"]["accuracy"] == pytest.approx(theirs["test"]["accuracy"], abs=1e-9)
    for cfg in configs:
        name = f"checkpoints/{paradigm}_seed{cfg.seed}.ckpt"
        a = torch.load(tmp_path / "b" / name, weights_only=True)
        b = torch.load(tmp_path / "s" / name, weights_only=True)
        assert a["epoch"] == b["epoch"]
        for key, value in b["model"].items():
            torch.testing.assert_close(a["model"][key], value, rtol=1e-8, atol=1e-8)
        for i, entry in b["optimizer"]["state"].items():
            assert float(a["optimizer"]["state"][i]["step"]) == float(entry["step"])
            torch.testing.assert_close(a["optimizer"]["state"][i]["exp_avg"], entry["exp_avg"],
                                       rtol=1e-6, atol=1e-9 * float(entry["exp_avg"].abs().max()))


def test_batched_adam_resumes_where_an_uninterrupted_run_ends(tiny_splits, tmp_path, float64):
    configs = [recipe("lv", s) for s in SEEDS]
    full = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "full"))
    calls = []

    def interrupt(epoch, record):
        calls.append(epoch)
        if epoch == 1 and len(calls) == 2 * len(SEEDS):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):       # resume with no checkpoint: a fresh start,
        train_seeds(configs, tiny_splits.train, tiny_splits.test,   # still batched
                    str(tmp_path / "cut"), resume=True, callback=interrupt)
    resumed = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"),
                          resume=True)
    assert resumed[0]["resumed_from_epoch"] == 2
    for ours, theirs in zip(resumed, full):
        assert [h["loss"] for h in ours["history"]] == [h["loss"] for h in theirs["history"]]
    # a batched checkpoint continues as a separate run, with Adam's state
    single = train_run(recipe("lv", 1, epochs=4), tiny_splits.train, tiny_splits.test,
                       out_dir=str(tmp_path / "full"), resume=True)
    assert single["resumed_from_epoch"] == 3 and len(single["history"]) == 4


# --- the protocol and the command ------------------------------------------------------

def test_protocol_authors_fills_what_was_not_given():
    c = apply_protocol(ExperimentConfig(dataset="cifar10", data_dir="x"), "authors",
                       explicit={"seeds"})
    assert (c.optimizer, c.focus_init, c.classifier, c.stop_loss) == (
        "adam", "mirror", "lenet", 0.05)
    assert (c.batch_size, c.epochs, c.n_train, c.seeds, c.protocol) == (100, 200, 10000, 1,
                                                                        "authors")
    released = apply_protocol(ExperimentConfig(dataset="cifar10", data_dir="x"), "released")
    assert (released.optimizer, released.stop_loss, released.pixels,
            released.test_images) == ("adam", 0.05, "half", "train")
    # the notebooks' data choices are CIFAR's: a synthetic run takes the rest of the recipe
    synthetic = apply_protocol(ExperimentConfig(dataset="synthetic"), "released")
    assert (synthetic.optimizer, synthetic.pixels, synthetic.test_images) == (
        "adam", "standard", "test")
    check_config(synthetic)
    assert (c.pixels, c.test_images) == ("standard", "test")        # authors: as before
    paper = apply_protocol(ExperimentConfig(optimizer="adam"), "paper")
    assert paper.optimizer == "sgd" and paper.stop_loss is None
    with pytest.raises(InputError, match="backend torch"):
        check_config(ExperimentConfig(backend="numpy", optimizer="adam"))
    with pytest.raises(InputError, match="stop_loss"):
        check_config(ExperimentConfig(stop_loss=float("nan")))


def test_train_command_runs_the_authors_protocol(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, [
        "train", "--protocol", "authors", "--dataset", "synthetic", "--m", "3", "--paradigm",
        "sa,lv", "--n-train", "20", "--n-test", "10", "--epochs", "2", "--seeds", "2",
        "--width", "0.25", "--batch-size", "10", "--stop-loss", "100", "--batch-seeds",
        "--device", "cpu", "--no-progress", "--out", str(out)])
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert (config["protocol"], config["optimizer"], config["focus_init"],
            config["classifier"]) == ("authors", "adam", "mirror", "lenet")
    assert config["lr"] == {"sa": 5e-4, "lv": 5e-4} and config["momentum"] is None
    # a loss below 100 at once: every run stops after its first epoch
    assert config["stopped_epochs"] == {"sa": {"0": 1, "1": 1}, "lv": {"0": 1, "1": 1}}
    summary = (out / "summary.md").read_text()
    assert "optimizer adam" in summary and "focus start mirror" in summary
    assert "stop at mean epoch loss <= 100" in summary
    sgd = CliRunner().invoke(cli, [
        "train", "--protocol", "authors", "--optimizer", "sgd", "--dataset", "synthetic",
        "--m", "3", "--paradigm", "sa", "--n-train", "20", "--n-test", "10", "--epochs", "1",
        "--seeds", "1", "--width", "0.25", "--device", "cpu", "--no-progress", "--out",
        str(tmp_path / "sgd")])
    assert sgd.exit_code == 0, sgd.output
    config = json.loads((tmp_path / "sgd" / "config.json").read_text())
    assert config["optimizer"] == "sgd" and config["lr"] == {"sa": 0.01}
    assert config["momentum"] == 0.9


def test_adam_on_the_numpy_backend_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["train", "--backend", "numpy", "--optimizer", "adam",
                                      "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert result.output.count("Error:") == 1 and "backend torch" in result.output
    assert not (tmp_path / "x").exists()
