"""The arithmetic of the seed-batched CNN FCAM: ``TrainConfig.precision`` (vr/batched_step.py).

fp32 (default), tf32 (CUDA matmuls in TF32, for the run only) and bf16 (the
networks under bfloat16 autocast, with every softmax, loss and statistic in
float32 and float32 parameters and optimizer state). What is checked: the
refusals; that the TF32 scope restores torch's global setting; which operators
run in which dtype under bf16 (recorded at dispatch, so the autocast is seen
to act, not assumed); and the one claim that matters for results: training a
small problem over several seeds in bf16 gives test accuracy and SAIF within
seed noise of fp32 (V&R Sec. 2.4 training, SAIF as in V&R Sec. 3). CUDA-only
tests (skipped without a GPU): the same agreement for bf16 and tf32 on CUDA, a
CUDA-graph step in bf16 against the eager one, and TF32 actually changing a
float32 matmul.
"""

import collections
import math
import os
from dataclasses import replace

import numpy as np
import pytest

from minimal_attn.errors import InputError
from minimal_attn.experiments.config import ExperimentConfig, check_config
from minimal_attn.experiments.train_loop import TrainConfig, affecting

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from minimal_attn.backends.vr.batched import stacked_parameters  # noqa: E402
from minimal_attn.backends.vr.batched_step import (  # noqa: E402
    WARMUP,
    GraphStep,
    eager_step,
    precision_scope,
)
from minimal_attn.backends.vr.batched_train import BatchedSeeds  # noqa: E402
from minimal_attn.backends.vr.table1 import run_config, run_experiment  # noqa: E402
from minimal_attn.datasets.mosaics import synthetic_image_mosaics  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_one_thread")
NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                             reason="tf32, and bf16 on CUDA or in a CUDA graph, need a CUDA GPU "
                                    "(torch sees none)")


def trainer(precision, paradigm="sa", mode="loop", device="cpu", compile="none", n=12,
            seeds=(0, 1), optimizer="adam"):
    """A width-0.25 BatchedSeeds on ``n`` float32 synthetic mosaics of 3 segments."""
    data = synthetic_image_mosaics(n, 3, seed=0)
    configs = [TrainConfig(paradigm=paradigm, seed=s, batch_size=4, width=0.25, device=device,
                           optimizer=optimizer, precision=precision, compile=compile,
                           focus_init="mirror" if optimizer == "adam" else "zero")
               for s in seeds]
    return BatchedSeeds(configs, data, data, mode=mode)


def test_bad_values_are_refused_in_one_line():
    assert TrainConfig().precision == "fp32" and ExperimentConfig().precision == "fp32"
    with pytest.raises(InputError, match="precision must be one of fp32, tf32, bf16") as err:
        TrainConfig(precision="fp16")
    assert err.value.param == "precision"
    with pytest.raises(InputError, match="precision must be one of"):
        check_config(ExperimentConfig(precision="half", batch_seeds=True))
    with pytest.raises(InputError, match="set batch_seeds, or precision 'fp32'"):
        check_config(ExperimentConfig(precision="bf16"))
    with pytest.raises(InputError, match="tf32' is a CUDA matmul mode.*use precision 'bf16'"):
        check_config(ExperimentConfig(precision="tf32", batch_seeds=True, device="cpu"))
    check_config(ExperimentConfig(precision="bf16", batch_seeds=True, device="cpu"))
    with pytest.raises(InputError, match="needs a CUDA device, got cpu: use precision='bf16'"):
        trainer("tf32")
    assert run_config(ExperimentConfig(precision="bf16"), "ha", 3).precision == "bf16"
    # a checkpoint names a precision other than fp32, so a run does not mix them on resume;
    # fp32 is left out, so checkpoints written before the option existed still resume
    assert "precision" not in affecting(TrainConfig(), None)
    assert affecting(TrainConfig(precision="bf16"), None)["precision"] == "bf16"


def test_cli_refuses_in_one_line_and_one_seed_runs_batched(tmp_path):
    """``attn-dyn train --precision``: refusals as one line, exit 2, nothing written; with
    one seed the batched trainer still runs (the separate one has no precision), so bf16
    acts: its losses differ from fp32's, and config.json records it."""
    from click.testing import CliRunner

    from minimal_attn.cli.main import cli

    refusals = [(["--precision", "bf16"], "set --batch-seeds"),
                (["--precision", "tf32", "--batch-seeds", "--device", "cpu"],
                 "CUDA matmul mode")]
    if not torch.cuda.is_available():        # device auto is the CPU: the trainer refuses
        refusals.append((["--precision", "tf32", "--batch-seeds", "--seeds", "2"],
                         "needs a CUDA device"))
    for args, message in refusals:
        result = CliRunner().invoke(cli, ["train", "--epochs", "1", "--n-train", "20",
                                          "--n-test", "10", "--width", "0.25", "--out",
                                          str(tmp_path / "out")] + args)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]
        assert not (tmp_path / "out").exists()
    one = ExperimentConfig(backend="torch", dataset="synthetic", m=3, epochs=2, seeds=1,
                           n_train=20, n_test=10, batch_size=10, width=0.25, device="cpu",
                           paradigms=["sa"], batch_seeds=True)
    losses = {p: [h["loss"] for h in run_experiment(replace(one, precision=p), str(
        tmp_path / p))[0]["sa"]["history"][0]["epochs"]] for p in ("fp32", "bf16")}
    assert losses["fp32"] != losses["bf16"]
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.05)


def test_a_run_is_not_resumed_in_another_precision(tmp_path):
    c = ExperimentConfig(backend="torch", dataset="synthetic", m=3, epochs=1, seeds=2,
                         n_train=20, n_test=10, batch_size=10, width=0.25, device="cpu",
                         paradigms=["sa"], batch_seeds=True)
    for first, then in (("fp32", "bf16"), ("bf16", "fp32")):
        out = str(tmp_path / first)
        run_experiment(replace(c, precision=first), out)
        with pytest.raises(InputError, match="different settings.*precision"):
            run_experiment(replace(c, precision=then, epochs=2), out, resume=True)
        run_experiment(replace(c, precision=first, epochs=2), out, resume=True)


def test_tf32_scope_restores_the_global_setting():
    original = torch.get_float32_matmul_precision()
    try:
        for before in ("highest", "medium"):
            torch.set_float32_matmul_precision(before)
            with precision_scope("tf32"):
                assert torch.get_float32_matmul_precision() == "high"
                assert torch.backends.cuda.matmul.allow_tf32          # the legacy view agrees
            assert torch.get_float32_matmul_precision() == before
            with pytest.raises(KeyError), precision_scope("tf32"):
                raise KeyError("a failing epoch")
            assert torch.get_float32_matmul_precision() == before
            for other in ("fp32", "bf16"):
                with precision_scope(other):
                    assert torch.get_float32_matmul_precision() == before
    finally:
        torch.set_float32_matmul_precision(original)


class DtypeRecorder(TorchDispatchMode):
    """Operator name -> the floating dtypes of its outputs, as dispatched (after autocast)."""

    def __init__(self):
        super().__init__()
        self.seen = collections.defaultdict(set)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.seen[func.overloadpacket.__name__].add(t.dtype)
        return out


NETWORK_OPS = ("convolution", "convolution_backward", "bmm", "baddbmm")
FLOAT32_OPS = ("_softmax", "_log_softmax", "logsumexp", "mean", "_softmax_backward_data",
               "_log_softmax_backward_data", "addcdiv_", "lerp_")


@pytest.mark.parametrize("mode", ["loop", "grouped_nchw", "unfold"])
@pytest.mark.parametrize("paradigm", ["sa", "ha", "lv"])
def test_bf16_runs_the_networks_in_bfloat16_and_the_rest_in_float32(paradigm, mode):
    """One Adam step (after a first one that makes the optimizer state), its operators
    recorded: convolutions and matmuls (forward and backward) in bfloat16; softmaxes,
    log-softmaxes, log-sum-exps, the batch means and Adam's update in float32; the
    parameters, gradients and Adam's moments float32. In fp32 nothing is bfloat16."""
    idx = torch.stack([torch.arange(4), torch.arange(4, 8)])                  # (S, B)
    sums = torch.zeros(2, 3, dtype=torch.float64)
    losses = {}
    for precision in ("fp32", "bf16"):
        run = trainer(precision, paradigm, mode)
        picks = run._groups([paradigm] * 2)
        eager_step(run, idx, picks, sums, [1e-3, 1e-3])
        with DtypeRecorder() as rec:
            eager_step(run, idx, picks, sums, [1e-3, 1e-3])
        dtypes = set().union(*rec.seen.values())
        if precision == "fp32":
            assert torch.bfloat16 not in dtypes
        else:
            # unfold: every layer a (b)addbmm, no convolution
            for name in NETWORK_OPS[2:] if mode == "unfold" else NETWORK_OPS:
                assert rec.seen[name] == {torch.bfloat16}, name
            for name in FLOAT32_OPS:
                assert rec.seen.get(name, {torch.float32}) == {torch.float32}, name
            assert {"_log_softmax", "_softmax", "addcdiv_"} <= set(rec.seen)
        params = stacked_parameters(run.model)
        assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in params)
        assert all(t.dtype == torch.float32 for t in run.optimizer.seed_state_dict(0, 1e-3)
                   ["state"][0].values() if isinstance(t, torch.Tensor) and t.numel() > 1)
        with torch.no_grad():
            losses[precision] = run.forward(*run.batch(idx), picks, sums.clone())
    assert losses["bf16"].dtype == torch.float32
    # autocast changed the numbers, by bfloat16's rounding (8 bits: 2^-8 ~ 0.4%) and no more
    assert float(losses["bf16"]) != float(losses["fp32"])
    assert float(losses["bf16"]) == pytest.approx(float(losses["fp32"]), rel=0.05)


def _metrics(config):
    """Per seed (test accuracy, test SAIF) and every epoch's mean training loss."""
    results, meta = run_experiment(config)
    assert meta["precision"] == config.precision            # config.json records it
    acc, saif, losses = [], [], []
    for paradigm in config.paradigms:
        acc += [r["accuracy"] for r in results[paradigm]["test"]["per_seed"]]
        saif += [r["saif"] for r in results[paradigm]["test"]["per_seed"]]
        losses += [h["loss"] for run in results[paradigm]["history"] for h in run["epochs"]]
    return np.array(acc), np.array(saif), losses


def within_seed_noise(config, other, floor=0.02):
    r"""Train ``config`` (fp32) and ``config`` with precision ``other``; assert that the
    mean test accuracy and SAIF of ``other`` lie within seed noise of fp32's:

    .. math:: |\bar x_{other} - \bar x_{fp32}| \le 2 \sqrt{(s_{fp32}^2 + s_{other}^2) / S}
              + \text{floor},

    two standard errors of a difference of two means over the S runs (seeds x
    paradigms; s: the sample std over them), plus a floor of 0.02 for metrics that
    saturate (all seeds at 1.0: s = 0). Also: every epoch's loss finite, the
    focus learned in fp32 (else the comparison says little), and ``other`` trained
    a different trajectory (else the precision did not act). Returns the figures."""
    base = _metrics(config)
    alt = _metrics(replace(config, precision=other))
    assert all(map(math.isfinite, base[2] + alt[2]))
    assert base[2] != alt[2]
    assert base[0].mean() > 0.8 and base[1].mean() > 0.3       # chance 1/3; SAIF 0 at start
    figures = {}
    for name, a, b in (("accuracy", base[0], alt[0]), ("saif", base[1], alt[1])):
        bound = 2 * math.sqrt((a.std(ddof=1) ** 2 + b.std(ddof=1) ** 2) / len(a)) + floor
        figures[name] = (a.mean(), a.std(ddof=1), b.mean(), b.std(ddof=1), bound)
        assert abs(b.mean() - a.mean()) <= bound, (name, figures[name])
    return figures


#: Adam at 5e-4 from the mirrored start (the authors' recipe: the focus learns in a few
#: epochs), m = 3, width 0.25; after 4 epochs the seeds are spread between a focus that
#: learned and one that has not yet, so the metrics are not all saturated. Batches of 12
#: and the test set scored once, at the end: a CPU without bfloat16 arithmetic emulates
#: it in the convolutions (about 7x fp32's time), and there this is the costliest test of
#: the default run (75 s on one thread, 127 s with batches of 20 and a score every epoch).
SMALL = ExperimentConfig(backend="torch", dataset="synthetic", m=3, epochs=4, seeds=8,
                         n_train=120, n_test=100, batch_size=12, width=0.25, device="cpu",
                         paradigms=["sa", "ha"], batch_seeds=True, optimizer="adam",
                         focus_init="mirror", classifier="lenet", eval_every=4)


def test_bf16_metrics_within_seed_noise_of_fp32():
    """8 seeds x SA and HA, 4 epochs of 10 steps: ~10 s on one thread where the CPU has
    bfloat16 arithmetic, ~75 s where it is emulated."""
    within_seed_noise(SMALL, "bf16")


def _native_bf16():
    """Whether this CPU computes bfloat16 in hardware (oneDNN emulates it otherwise, about
    10x slower: the small test below took 150 s instead of 15 s on such a CPU)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return True                           # not Linux: run them
    return any(flag in flags for flag in ("avx512_bf16", "amx_bf16"))


@pytest.mark.slow
@pytest.mark.skipif(not _native_bf16() and os.environ.get("ATTN_DYN_SLOW") != "1",
                    reason="bfloat16 is emulated on this CPU (no avx512_bf16 / amx_bf16): "
                           "about 10x slower; ATTN_DYN_SLOW=1 runs it anyway")
@pytest.mark.parametrize("paradigm", ["sa", "lv"])
def test_bf16_metrics_within_seed_noise_of_fp32_at_m5(paradigm):
    """12 seeds at m = 5, 6 epochs of 10 steps (~25 s each on one thread). SA: the
    attention-weighted mixture goes through a bfloat16 matmul; LV: log-sum-exps."""
    within_seed_noise(replace(SMALL, m=5, epochs=6, seeds=12, paradigms=[paradigm], n_train=200,
                              batch_size=20, eval_every=1), "bf16")


@pytest.mark.slow
def test_compiled_bf16_step_agrees_with_eager_bf16():
    """torch.compile (inductor, CPU) traces the autocast region: 2 epochs of 3 Adam steps
    agree with the eager bf16 step to bfloat16 rounding (inductor computes bfloat16
    elementwise chains in float32, so not bit for bit). Cold compile: ~1 min. Dynamo's
    caches are cleared after: a later compile of the same code in this process with
    float64 buffers (tests/test_batched_step.py) otherwise fails building its guards
    (torch 2.13, "sources must not be empty for symbol s1")."""
    stats = {}
    try:
        for how in ("none", "compile"):
            run = trainer("bf16", "ha", "grouped_nchw", compile=how)
            stats[how] = [run.train_epoch(["ha", "ha"], [1e-3, 2e-3], e, lambda loss: None)
                          for e in range(2)]
    finally:
        torch._dynamo.reset()
    assert type(run.runner).__name__ == "CompiledStep"
    for a, b in zip(stats["none"], stats["compile"]):
        for lane_a, lane_b in zip(a, b):
            assert lane_b[0] == pytest.approx(lane_a[0], rel=0.02)         # loss
            assert lane_b[2] == pytest.approx(lane_a[2], abs=0.01)         # mean a_z


@NO_CUDA
@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_cuda_metrics_within_seed_noise_of_fp32(precision):
    """As the CPU test, on CUDA (grouped convolutions, cuDNN; fp32 there already runs
    the convolutions in TF32, PyTorch's default)."""
    within_seed_noise(replace(SMALL, device="cuda"), precision)


@NO_CUDA
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_cuda_graph_bf16_step_equals_eager_bf16(optimizer):
    """3 seeds in mixed phases, 14 mosaics in batches of 4, 4 epochs: the full steps are
    captured in the first epoch (after WARMUP eager ones), the ragged one in the third;
    the replayed bf16 steps (autocast without a cast cache) agree with eager bf16 steps
    (cuDNN may autotune another algorithm per run: bfloat16 rounding, not bits)."""
    out = {}
    for how in ("none", "cudagraph"):
        run = trainer("bf16", "sa", "grouped_nchw", "cuda", how, n=14, seeds=(0, 1, 2),
                      optimizer=optimizer)
        stats = [run.train_epoch(["sa", "ha", "lv"], [1e-3, 2e-3, 3e-3], e,
                                 lambda loss: None) for e in range(4)]
        out[how] = (run, stats, [p.detach().clone() for p in stacked_parameters(run.model)])
    run = out["cudagraph"][0]
    assert isinstance(run.runner, GraphStep) and len(run.runner.graphs) == 2 and WARMUP == 2
    for a, b in zip(out["none"][1], out["cudagraph"][1]):
        for lane_a, lane_b in zip(a, b):
            assert lane_b[0] == pytest.approx(lane_a[0], rel=0.02)          # loss
            assert lane_b[2] == pytest.approx(lane_a[2], abs=0.01)          # mean a_z
    for p, q in zip(out["none"][2], out["cudagraph"][2]):
        assert p.dtype == q.dtype == torch.float32
        torch.testing.assert_close(q, p, rtol=0.02, atol=2e-3)


@NO_CUDA
def test_tf32_scope_changes_cuda_matmuls_and_restores():
    """A float32 matmul on CUDA rounds its inputs to TF32 (10 mantissa bits) inside the
    scope: the product moves by ~1e-3 relative, and is exact again after it."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(512, 512, device="cuda", generator=gen)
    b = torch.randn(512, 512, device="cuda", generator=gen)
    exact = (a.double() @ b.double()).float()
    before = a @ b
    with precision_scope("tf32"):
        inside = a @ b
    after = a @ b
    scale = float(exact.abs().mean())
    assert float((before - exact).abs().max()) < 1e-4 * scale
    assert 1e-4 * scale < float((inside - exact).abs().max()) < 0.05 * scale
    assert torch.equal(after, before)
