"""benchmarks/step_profile.py and snell_profile.py: the card's busy time is the union of its
kernels' intervals; the host waits are the runtime calls that block the host; a Snell step's
profile adds up."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from snell_profile import PARTS, host_waits, profile_seq_step  # noqa: E402
from step_profile import device_busy  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402


def _event(name, start, end, device=DeviceType.CUDA):
    return SimpleNamespace(name=name, device_type=device,
                           time_range=SimpleNamespace(start=start, end=end))


def test_busy_time_is_the_union_of_the_kernels_intervals():
    # kernels on [0, 10], [5, 12] (another stream), [20, 25] and [21, 22] inside it: busy
    # [0, 12] and [20, 25], 17 us by hand; the CPU event is no kernel
    events = [_event("a", 20, 25), _event("a", 0, 10), _event("host op", 0, 100, DeviceType.CPU),
              _event("b", 5, 12), _event("c", 21, 22)]
    busy, per_kernel = device_busy(events)
    assert busy == 17
    assert per_kernel == {"a": 15, "b": 7, "c": 1}
    assert device_busy([_event("host op", 0, 100, DeviceType.CPU)]) == (0.0, {})


def test_host_waits_are_the_calls_that_block_the_host():
    # the runtime's calls are host events; a launch and an asynchronous copy do not wait
    events = [_event(name, 0, 1, DeviceType.CPU) for name in (
        "cudaStreamSynchronize", "cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemcpy",
        "cudaStreamSynchronize", "aten::item")]
    assert host_waits(events) == {"cudaStreamSynchronize": 2, "cudaMemcpy": 1}
    assert host_waits(events[1:3]) == {}


def test_a_snell_step_profile_adds_up_on_the_cpu(shared_data, torch_one_thread, capsys):
    """A tiny SST-2 classifier, 3 paced steps: the parts' host times lie inside the paced
    wall time, every part dispatches operators (the forward runs the LSTM), and the CPU
    has no kernels and no host waits."""
    from minimal_attn.backends.snell.config import SeqTrainConfig
    from minimal_attn.datasets.seq import load_text_task

    task = load_text_task("classify", "sst2", shared_data / "sst2", max_train=200, max_val=20)
    c = SeqTrainConfig(task="classify", hidden=8, emb=8, device="cpu").resolved()
    got = profile_seq_step(task, c, "cpu", steps=3)
    assert 0 < sum(got["host_ms"].values()) <= got["paced_ms"]
    assert got["synced_ms"] > 0
    assert all(got["aten_ops"][p] > 0 for p in PARTS)
    assert got["kernels"] is None and got["busy_ms"] is None
    assert got["host_waits"] == dict.fromkeys(PARTS, 0)
    table = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in table if line.split()
            and line.split()[0] in PARTS + ("step",)}
    assert [int(rows[p][2]) for p in PARTS] == [got["aten_ops"][p] for p in PARTS]
    assert int(rows["step"][2]) == sum(got["aten_ops"].values())
    assert got["outermost"]["forward"]["aten::lstm"] == 1
