"""How the seed-batched trainer runs a step (backends/vr/batched_step.py): eagerly by
default, through torch.compile (equal to eager to float rounding), or as a CUDA graph
(equal to eager; CUDA only, skipped without a GPU).

The reference is the eager step, itself tested equal to torch.optim per seed
(tests/test_torch_batched.py, tests/test_authors_recipe.py, tests/test_batched_flat.py).
"""

import contextlib
from types import SimpleNamespace

import numpy as np
import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments.config import ExperimentConfig, check_config
from minimal_attn.experiments.train_loop import TrainConfig

torch = pytest.importorskip("torch")
from batched_helpers import Store, batched_seeds  # noqa: E402

from minimal_attn.backends.vr.batched import stacked_parameters  # noqa: E402
from minimal_attn.backends.vr.batched_step import (  # noqa: E402
    WARMUP,
    GraphStep,
    eager_step,
)
from minimal_attn.backends.vr.models import (  # noqa: E402
    build_fcam,
    classifier_config,
    focus_config,
    scaled,
)
from minimal_attn.backends.vr.table1 import run_config  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                             reason="the CUDA-graph step needs a CUDA GPU (torch sees none)")


def tiny_fcam(seed, dtype, device="cpu"):
    """Width 0.25, mirrored focus, LeNet classifier (the authors' networks)."""
    model = build_fcam(seed=seed, focus_cfg=scaled(focus_config(start="mirror"), 0.25),
                       classifier_cfg=scaled(classifier_config(kind="lenet"), 0.25))
    return model.to(device=device, dtype=dtype)


def train(compile, phases, epochs, optimizer="adam", dtype=torch.float32, device="cpu",
          n=12, seeds=(0, 1), mode="grouped_nchw"):
    """Per-epoch stats and the final stacked parameters of a few epochs on fixed data."""
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(n, 3, 3, 32, 32, generator=gen, dtype=dtype)
    z, y = torch.randint(0, 3, (n,), generator=gen), torch.randint(0, 3, (n,), generator=gen)
    seeds = list(seeds)
    run = batched_seeds([tiny_fcam(s, dtype, device) for s in seeds], seeds, mode,
                        Store(X.to(device), z.to(device)), y.to(device), device, optimizer,
                        compile=compile)
    lrs = [1e-3 * (k + 1) for k in range(len(seeds))] if optimizer == "adam" else \
        [0.02 * (k + 1) for k in range(len(seeds))]
    stats = [run.train_epoch(phases, lrs, e, lambda loss: None) for e in range(epochs)]
    return run, stats, [p.detach().clone() for p in stacked_parameters(run.model)]


def test_default_step_is_eager_and_bad_values_are_refused():
    assert TrainConfig().compile == "none"
    run, _, _ = train("none", ("ha", "ha"), 0)
    assert run.runner is None
    with pytest.raises(InputError, match="compile must be one of none, compile, cudagraph"):
        TrainConfig(compile="jit")
    with pytest.raises(InputError, match="needs a CUDA device.*use compile='compile' or"):
        train("cudagraph", ("ha", "ha"), 0)
    with pytest.raises(InputError, match="compile must be one of") as err:
        check_config(ExperimentConfig(compile="fast", batch_seeds=True))
    assert err.value.param == "compile"
    with pytest.raises(InputError, match="set batch_seeds"):
        check_config(ExperimentConfig(compile="compile"))
    check_config(ExperimentConfig(compile="compile", batch_seeds=True))
    assert run_config(ExperimentConfig(compile="cudagraph"), "ha", 3).compile == "cudagraph"


def test_conv_mode_reaches_the_model_and_bad_values_are_refused(tmp_path):
    """ExperimentConfig.conv_mode -> TrainConfig -> the stacked model (None: the
    device's default)."""
    from minimal_attn.backends.vr.batched import default_mode
    from minimal_attn.backends.vr.batched_train import BatchedSeeds

    assert run_config(ExperimentConfig(conv_mode="unfold", batch_seeds=True), "ha",
                      3).conv_mode == "unfold"
    assert (default_mode("cpu"), default_mode("cuda:1")) == ("loop", "grouped_nchw")
    with pytest.raises(InputError, match="conv_mode must be one of loop, grouped, "
                                         "grouped_nchw, unfold"):
        TrainConfig(conv_mode="fast")
    with pytest.raises(InputError, match="set batch_seeds") as err:
        check_config(ExperimentConfig(conv_mode="loop"))
    assert err.value.param == ("conv_mode", "batch_seeds")
    with pytest.raises(InputError, match="conv_mode must be one of"):
        check_config(ExperimentConfig(conv_mode="im2col", batch_seeds=True))
    data = SimpleNamespace(X=np.zeros((4, 3, 3, 32, 32), np.float32), y=np.zeros(4, int),
                           z=np.zeros(4, int))
    for asked, ran in ((None, "loop"), ("unfold", "unfold"), ("grouped", "grouped")):
        configs = [TrainConfig(seed=s, device="cpu", conv_mode=asked) for s in (0, 1)]
        run = BatchedSeeds(configs, data, None,
                           make_model=lambda seed: tiny_fcam(seed, torch.float32))
        assert run.model.focus.mode == run.model.classifier.mode == ran


@pytest.mark.slow
def test_compiled_step_equals_eager_to_float_rounding():
    """torch.compile (inductor, here on the CPU), Adam, HA, 2 epochs of 3 steps, float64
    (in float32 Adam turns the fused kernels' last-bit differences, where the mirrored
    halves cancel, into lr-sized steps: the same trajectory is then hard to tell from
    another). Cold, the compilation takes ~45 s on 2 shared cores (hence slow)."""
    args = dict(phases=("ha", "ha"), dtype=torch.float64)
    _, eager, eager_params = train("none", epochs=2, **args)
    try:
        run, compiled, compiled_params = train("compile", epochs=2, **args)
    finally:
        # Dynamo's caches would fail a later compile of this code with other dtypes in
        # this process (as tests/test_batched_precision.py says): tests in any order
        torch._dynamo.reset()
    assert type(run.runner).__name__ == "CompiledStep"
    for a, b in zip(eager, compiled):
        for lane_a, lane_b in zip(a, b):
            assert lane_b == pytest.approx(lane_a, rel=1e-9, abs=1e-12)   # loss, acc, a_z
    start = train("none", epochs=0, **args)[2]
    assert max(float((p - q).abs().max()) for p, q in zip(eager_params, start)) > 1e-3
    for p, q in zip(eager_params, compiled_params):
        torch.testing.assert_close(q, p, rtol=1e-8, atol=1e-8)


class ReplayOnCPU(GraphStep):
    """GraphStep's bookkeeping on the CPU (keys, warm-up, static inputs, factors sent before
    each replay): "capture" keeps the step's body, "replay" runs it. Only the CUDA capture
    itself is left to the CUDA test below."""

    replays = 0

    def _on(self, device):
        return contextlib.nullcontext()

    def _warm(self, idx, picks, sums, lrs):
        eager_step(self.trainer, idx, picks, sums, lrs)

    def _record(self, body):
        def replay():
            self.replays += 1
            self.trainer.optimizer.zero_grad()     # a graph rewrites its gradients
            body()
        return SimpleNamespace(replay=replay)


@pytest.mark.parametrize("optimizer,mode", [("sgd", "grouped_nchw"), ("adam", "grouped_nchw"),
                                            ("adam", "loop"), ("adam", "unfold")])
def test_graph_step_bookkeeping_equals_eager_on_the_cpu(optimizer, mode, monkeypatch):
    """3 seeds in mixed phases, 14 mosaics in batches of 4, 4 epochs, float64: bit for bit."""
    import minimal_attn.backends.vr.batched_train as batched_train

    args = dict(phases=("sa", "ha", "lv"), epochs=4, optimizer=optimizer,
                dtype=torch.float64, n=14, seeds=(0, 1, 2), mode=mode)
    _, eager, eager_params = train("none", **args)
    monkeypatch.setattr(batched_train, "step_runner",
                        lambda trainer, how, device: ReplayOnCPU(trainer))
    run, graphed, graph_params = train("none", **args)
    # per epoch 3 full steps and a ragged one; WARMUP = 2 eager steps per shape
    assert len(run.runner.graphs) == 2 and run.runner.replays == 16 - 2 * WARMUP
    assert graphed == eager
    assert all(torch.equal(p, q) for p, q in zip(eager_params, graph_params))
    run.restore(run.seed_states())                 # new optimizer buffers: graphs dropped
    assert run.runner.graphs == {}


@NO_CUDA
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("phases", [("ha", "ha", "ha"), ("sa", "ha", "lv")],
                         ids=["ha", "mixed"])
@pytest.mark.parametrize("mode", ["grouped_nchw", "loop", "unfold"])
def test_cuda_graph_step_equals_eager(optimizer, phases, mode):
    """float64, 14 mosaics in batches of 4 (3 full steps and a ragged one per epoch),
    4 epochs: the full steps are captured in the first epoch, the ragged one in the third;
    every replayed step must equal the eager one (cuDNN's autotuned algorithms aside)."""
    args = dict(phases=phases, epochs=4, optimizer=optimizer, dtype=torch.float64,
                device="cuda", n=14, seeds=(0, 1, 2), mode=mode)
    _, eager, eager_params = train("none", **args)
    run, graphed, graph_params = train("cudagraph", **args)
    # WARMUP = 2 eager steps per shape: the ragged shape is captured in epoch 3
    assert isinstance(run.runner, GraphStep) and len(run.runner.graphs) == 2 and WARMUP == 2
    for a, b in zip(eager, graphed):
        for lane_a, lane_b in zip(a, b):
            assert lane_b == pytest.approx(lane_a, rel=1e-8, abs=1e-12)
    # Adam turns last-bit differences of near-zero gradients (the mirrored halves cancel;
    # cuDNN may autotune another algorithm per run) into tiny steps, as in
    # test_stacked_adam_equals_separate_adam_in_float64
    for p, q in zip(eager_params, graph_params):
        torch.testing.assert_close(q, p, rtol=1e-8, atol=1e-8)
