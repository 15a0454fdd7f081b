"""benchmarks/step_profile.py: the card's busy time is the union of its kernels' intervals."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

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
