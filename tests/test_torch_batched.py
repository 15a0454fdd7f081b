"""S seeds batched as one model equal S separate runs (Appendix A.2 CNN FCAM, Table 1 seeds).

The references are independent of the code under test: plain ``FCAM`` models,
``torch.optim.SGD`` and the single-seed loop ``torch_train.train_run``.
"""

import numpy as np
import pytest

from minimal_attn.datasets.splits import load_mosaic_splits
from minimal_attn.errors import InputError

torch = pytest.importorskip("torch")
from batched_helpers import MODES, SEEDS, Store, batched_seeds, separate_epochs  # noqa: E402

from minimal_attn.backends.vr.batched import (  # noqa: E402
    stack_fcams,
    stacked_parameters,
    unstack,
)
from minimal_attn.backends.vr.batched_seeds import train_seeds  # noqa: E402
from minimal_attn.backends.vr.models import (  # noqa: E402
    build_fcam,
    classifier_config,
    focus_config,
    scaled,
)
from minimal_attn.backends.vr.train import TrainConfig, train_run  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
#: float64 on a GPU too: cuDNN's float64 kernels have no TF32 shortcut.
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch sees no CUDA GPU"))]


def tiny_fcam(seed, double=True, live_focus=True, device="cpu"):
    """A width-0.25 CIFAR-10 FCAM; ``live_focus`` replaces the zero focus output layer."""
    model = build_fcam(seed=seed, focus_cfg=scaled(focus_config(), 0.25),
                       classifier_cfg=scaled(classifier_config(), 0.25))
    if live_focus:      # scores that differ between segments, so attention matters
        gen = torch.Generator().manual_seed(100 + seed)
        with torch.no_grad():
            model.focus.output.weight.copy_(
                torch.randn(model.focus.output.weight.shape, generator=gen))
    return (model.double() if double else model).to(device)


@pytest.fixture(scope="module")
def images():
    gen = torch.Generator().manual_seed(7)
    X = torch.randn(len(SEEDS), 4, 3, 3, 32, 32, generator=gen, dtype=torch.float64)
    return X                                                   # (S, B, m, 3, 32, 32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_batched_forward_equals_separate_forwards(mode, device, images):
    images = images.to(device)
    models = [tiny_fcam(s, device=device) for s in SEEDS]
    batched = stack_fcams(models, mode)
    for paradigm in ("sa", "ha", "lv"):
        scores, logits = batched(images, paradigm)
        assert scores.shape == (3, 4, 3)
        assert logits.shape == ((3, 4, 3) if paradigm == "sa" else (3, 4, 3, 3))
        assert scores.std() > 1e-3                             # the focus is not uniform
        for k, model in enumerate(models):
            ref_scores, ref_logits = model(images[k], paradigm)
            torch.testing.assert_close(scores[k], ref_scores, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(logits[k], ref_logits, rtol=1e-12, atol=1e-12)
    for rule in ("sa", "ha", "lv", "hybrid"):
        s = batched.predict(images, rule)[1]                   # (S, B, C)
        for k, model in enumerate(models):
            torch.testing.assert_close(s[k], model.predict(images[k], rule)[1],
                                       rtol=1e-12, atol=1e-12)
    # a subset of seeds runs only those seeds' parameters
    pick = torch.tensor([2, 0], device=device)
    logits = batched(images[pick], "ha", pick)[1]
    torch.testing.assert_close(logits[0], models[2](images[2], "ha")[1], rtol=1e-12,
                               atol=1e-12)
    torch.testing.assert_close(logits[1], models[0](images[0], "ha")[1], rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_no_mode_reads_seed_indices_on_the_host(mode, images, monkeypatch):
    """A CUDA graph replays kernels only: a forward or backward that read a tensor's values
    on the host (``tolist``, ``item``) could not be captured. Checked on the CPU by making
    those reads raise while a subset of seeds runs, forward and backward."""
    batched = stack_fcams([tiny_fcam(s) for s in SEEDS], mode)
    pick = torch.tensor([2, 0])

    def host_read(*args, **kwargs):
        raise AssertionError("a tensor's values were read on the host")
    for name in ("tolist", "item"):
        monkeypatch.setattr(torch.Tensor, name, host_read)
    with pytest.raises(AssertionError, match="read on the host"):
        pick.tolist()                                          # the patch is in force
    for paradigm in ("sa", "ha"):
        scores, logits = batched(images[pick], paradigm, pick)
        (scores.sum() + logits.sum()).backward()
    monkeypatch.undo()
    reference = tiny_fcam(2)(images[2], "ha")[1]
    torch.testing.assert_close(batched(images[pick], "ha", pick)[1][0], reference,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("phases", [("sa", "sa", "sa"), ("ha", "ha", "ha"),
                                    ("lv", "lv", "lv"), ("sa", "ha", "sa")],
                         ids=["sa", "ha", "lv", "mixed"])
def test_sgd_momentum_steps_equal_separate_runs(mode, phases, device):
    """Two epochs of 3 steps each, float64, one lr per seed; 'mixed': the seeds in
    different phases within one step (a hybrid switched per seed)."""
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(12, 3, 3, 32, 32, generator=gen, dtype=torch.float64)
    z = torch.randint(0, 3, (12,), generator=gen)
    y = torch.randint(0, 3, (12,), generator=gen)
    X, z, y = X.to(device), z.to(device), y.to(device)
    store = Store(X, z)
    lrs = [0.05, 0.02, 0.08]
    run = batched_seeds([tiny_fcam(s, device=device) for s in SEEDS], SEEDS, mode, store, y,
                        device)
    before = [p.detach().clone() for p in stacked_parameters(run.model)]
    stats = [run.train_epoch(phases, lrs, epoch, lambda loss: None) for epoch in range(2)]
    moved = max(float((p.detach() - q).abs().max())
                for p, q in zip(stacked_parameters(run.model), before))
    assert moved > 1e-3
    states = unstack(run.model)
    for k, seed in enumerate(SEEDS):
        model = tiny_fcam(seed, device=device)
        optimizer = torch.optim.SGD(model.parameters(), lr=lrs[k], momentum=0.9)
        losses = separate_epochs(model, optimizer, store, y, [phases[k]] * 2, [lrs[k]] * 2, 4,
                                 seed)
        for name, p in model.named_parameters():
            torch.testing.assert_close(states[k][name], p.detach(), rtol=1e-9, atol=1e-12)
        assert [s[k][0] for s in stats] == pytest.approx(losses, rel=1e-10)


@pytest.fixture(scope="module")
def tiny_splits():
    return load_mosaic_splits("synthetic", 3, 40, 20)


def config_for(paradigm, **extra):
    return TrainConfig(paradigm=paradigm, epochs=2, switch_epoch=1, lr=0.05, hybrid_lr=0.02,
                       batch_size=10, width=0.25, device="cpu", **extra)


def assert_states_match(state, checkpoint):
    """A batched seed's state equals a train_run checkpoint to float32 tolerance."""
    assert state["model"].keys() == checkpoint["model"].keys()
    for name, value in checkpoint["model"].items():
        torch.testing.assert_close(state["model"][name], value, rtol=1e-4, atol=2e-6)
    ours, theirs = state["optimizer"], checkpoint["optimizer"]
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for i, buf in theirs["state"].items():
        torch.testing.assert_close(ours["state"][i]["momentum_buffer"], buf["momentum_buffer"],
                                   rtol=1e-4, atol=2e-6)
    assert torch.equal(state["generator"], checkpoint["generator"])


def configs_for(paradigm, seeds=SEEDS, **extra):
    return [config_for(paradigm, seed=s, **extra) for s in seeds]


def load(path):
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize("paradigm", ["sa", "ha", "lv", "hybrid"])
def test_batched_seeds_equal_separate_runs(paradigm, tiny_splits, tmp_path):
    """2 epochs, 4 steps each; the hybrid switches to HA (and its own lr) after epoch 1.
    Records, final results and checkpoint files match train_run's, seed by seed."""
    batched = train_seeds(configs_for(paradigm), tiny_splits.train, tiny_splits.test,
                          str(tmp_path / "b"))
    for k, seed in enumerate(SEEDS):
        single = train_run(config_for(paradigm, seed=seed), tiny_splits.train,
                           tiny_splits.test, out_dir=str(tmp_path / "s"), progress=False)
        name = f"checkpoints/{paradigm}_seed{seed}.ckpt"
        assert_states_match(load(tmp_path / "b" / name), load(tmp_path / "s" / name))
        ours = batched[k]
        assert [h["phase"] for h in ours["history"]] == [h["phase"] for h in single["history"]]
        assert [h["lr"] for h in ours["history"]] == [h["lr"] for h in single["history"]]
        for a, b in zip(ours["history"], single["history"]):
            assert set(a) == set(b)
            for key in ("loss", "train_accuracy", "mean_a_z", "test_accuracy", "test_saif"):
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), key
        for part in ("train", "test"):
            mine, theirs = dict(ours[part]), dict(single[part])
            np.testing.assert_allclose(mine.pop("heatmap"), theirs.pop("heatmap"), atol=1e-6)
            assert mine == pytest.approx(theirs, rel=1e-5, abs=1e-6)
            np.testing.assert_allclose(ours["instances"][part]["a_z"],
                                       single["instances"][part]["a_z"], rtol=1e-4, atol=1e-6)


def test_per_seed_hybrid_switch_equals_separate_runs(tiny_splits, tmp_path):
    """Each seed switches at its own epoch (as an automatic switch would)."""
    switch = {0: 1, 1: 2, 2: 3}                                # seed 2 never switches
    configs = [TrainConfig(paradigm="hybrid", epochs=3, batch_size=10, width=0.25,
                           device="cpu", lr=0.05, hybrid_lr=0.02, seed=s,
                           switch_epoch=switch[s]) for s in SEEDS]
    result = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "b"))
    assert [h["phase"] for h in result[0]["history"]] == ["sa", "ha", "ha"]
    assert [h["phase"] for h in result[1]["history"]] == ["sa", "sa", "ha"]
    for config in configs:
        train_run(config, tiny_splits.train, tiny_splits.test, out_dir=str(tmp_path / "s"),
                  progress=False)
        name = f"checkpoints/hybrid_seed{config.seed}.ckpt"
        assert_states_match(load(tmp_path / "b" / name), load(tmp_path / "s" / name))


def _assert_resumed_equals_full(resumed, full, tmp_path):
    """Resumed at epoch 1 with the uninterrupted run's losses and final weights, bit for bit
    (the runs in tmp_path/cut and tmp_path/full)."""
    for ours, theirs in zip(resumed, full):
        assert ours["resumed_from_epoch"] == 1
        assert [h["loss"] for h in ours["history"]] == [h["loss"] for h in theirs["history"]]
    for seed in SEEDS:
        name = f"checkpoints/hybrid_seed{seed}.ckpt"
        ours, theirs = load(tmp_path / "cut" / name), load(tmp_path / "full" / name)
        for key, value in theirs["model"].items():
            assert torch.equal(ours["model"][key], value), key


def test_resume_equals_uninterrupted(tiny_splits, tmp_path):
    configs = configs_for("hybrid")
    full = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "full"))

    def stop_after_first_epoch(epoch, record):
        if record["seed"] == SEEDS[-1]:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"),
                    callback=stop_after_first_epoch)
    resumed = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"),
                          resume=True)
    _assert_resumed_equals_full(resumed, full, tmp_path)
    # a seed without its checkpoint (nor the one before): the seeds cannot continue together
    # (without the newest alone, it and the others go on from the save before)
    for name in ("hybrid_seed1.ckpt", "hybrid_seed1.ckpt.prev"):
        (tmp_path / "cut" / "checkpoints" / name).unlink()
    assert train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"),
                       resume=True) is None


def test_resume_between_two_seeds_saves_equals_uninterrupted(tiny_splits, tmp_path,
                                                             monkeypatch):
    """Stopped after seed 0 saved epoch 2 and before the others did: seed 0 steps back to
    its .prev (epoch 1) and the seeds go on together, bit for bit as uninterrupted."""
    from minimal_attn.experiments import epochs

    configs = configs_for("hybrid")
    full = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "full"))
    saves, write = [], epochs.write_checkpoint

    def stop_between_saves(*args, **kwargs):
        write(*args, **kwargs)
        saves.append(1)
        if len(saves) == len(SEEDS) + 1:                     # the second epoch's first save
            raise KeyboardInterrupt

    monkeypatch.setattr(epochs, "write_checkpoint", stop_between_saves)
    with pytest.raises(KeyboardInterrupt):
        train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"))
    monkeypatch.setattr(epochs, "write_checkpoint", write)
    heard = []
    resumed = train_seeds(configs, tiny_splits.train, tiny_splits.test, str(tmp_path / "cut"),
                          resume=True, log=heard.append)
    assert resumed is not None and any("one save ahead" in line for line in heard)
    _assert_resumed_equals_full(resumed, full, tmp_path)


def test_unstack_stack_round_trip(images):
    models = [tiny_fcam(s, double=False) for s in SEEDS]
    batched = stack_fcams(models)
    states = unstack(batched)
    assert all(s.keys() == models[0].state_dict().keys() for s in states)
    fresh = []
    for k, state in enumerate(states):
        model = tiny_fcam(seed=50 + k, double=False, live_focus=False)   # other weights
        model.load_state_dict(state)
        fresh.append(model)
        for name, value in models[k].state_dict().items():
            assert torch.equal(model.state_dict()[name], value), name
    again = stack_fcams(fresh)
    for p, q in zip(stacked_parameters(again), stacked_parameters(batched)):
        assert torch.equal(p, q)
    X = images.float()
    torch.testing.assert_close(again(X, "lv")[1], batched(X, "lv")[1], rtol=0, atol=0)


def test_bad_input_raises_input_error():
    narrow = build_fcam(seed=0, focus_cfg=scaled(focus_config(), 0.25),
                        classifier_cfg=scaled(classifier_config(), 0.25))
    with pytest.raises(InputError, match="one architecture"):
        stack_fcams([narrow, build_fcam(seed=1)])
    with pytest.raises(InputError, match="mode"):
        stack_fcams([narrow], mode="vmap")
    with pytest.raises(InputError, match="at least one"):
        stack_fcams([])
    with pytest.raises(InputError, match="loss paradigm"):
        stack_fcams([narrow])(torch.zeros(1, 1, 2, 3, 32, 32), "hybrid")


def test_diverged_seed_is_named(tiny_splits):
    configs = [TrainConfig(paradigm="sa", epochs=1, lr=1e6, batch_size=10, width=0.25,
                           device="cpu", seed=s) for s in SEEDS]
    with pytest.raises(InputError, match=r"sa seed \d+ diverged"):
        train_seeds(configs, tiny_splits.train, tiny_splits.test)


def test_the_hybrid_sa_phase_is_scored_as_sa(tiny_splits):
    """A hybrid's SA epoch is scored by SA's rule, as the SA run with the same weights."""
    hybrid = train_seeds(configs_for("hybrid", [3]), tiny_splits.train,
                         tiny_splits.test)[0]["history"]
    sa = train_run(TrainConfig(**{**vars(config_for("sa", seed=3)), "epochs": 1}),
                   tiny_splits.train, tiny_splits.test, progress=False)["history"]
    assert hybrid[0]["rule"] == "sa" and hybrid[1]["rule"] == "ha"
    for key in ("test_accuracy", "test_saif"):
        assert hybrid[0][key] == pytest.approx(sa[0][key], abs=1e-9)
    assert hybrid[0]["loss"] == pytest.approx(sa[0]["loss"], rel=1e-6)  # float32 batched
