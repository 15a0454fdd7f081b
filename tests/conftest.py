"""Shared test configuration: hypothesis profiles and the shared data folder."""

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from strategies import STRESS_FACTOR, hypothesis_profile

# Profiles: ``dev`` by default, ``ci`` when CI is set (40 fixed examples), and ``stress``
# when ATTN_DYN_HYPOTHESIS=stress (1,000 fresh examples a test, and a test's own
# max_examples times STRESS_FACTOR through strategies.examples): a search for the example
# CI's 40 never draw, e.g. ``ATTN_DYN_HYPOTHESIS=stress pytest tests/test_losses.py
# --hypothesis-seed=random``. ATTN_DYN_HYPOTHESIS=dev or ci picks those profiles by name.
# Stress keeps no example database (.hypothesis/ is shared by whoever runs the tests
# next) and prints the @reproduce_failure blob of a failure instead.
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile("ci", deadline=None, max_examples=40, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("stress", deadline=None, max_examples=40 * STRESS_FACTOR,
                          derandomize=False, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(hypothesis_profile())

#: ../shared/data beside the checkout (read-only; tests skip when it is absent). The one
#: place the tests name it: take the ``shared_data`` or ``shared_dataset`` fixture
#: (``invalid_inputs.py``, also a script, imports this name).
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data():
    """The shared data folder, or a skip when the checkout has none beside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared datasets not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def shared_dataset(shared_data):
    """``shared_dataset("cifar10", "cifar-10-batches-py")``: that path of the shared data,
    or a skip when it is absent."""
    def need(*parts):
        path = shared_data.joinpath(*parts)
        if not path.exists():
            pytest.skip(f"shared dataset {path} not found (it sits beside the checkout)")
        return path
    return need


@contextlib.contextmanager
def _one_torch_thread():
    """torch at one thread while the block runs, where torch is installed."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def torch_one_thread():
    """Small networks gain nothing from threads; a shared CPU loses a lot to them."""
    pytest.importorskip("torch")
    with _one_torch_thread():
        yield


@pytest.fixture
def one_thread_if_torch():
    """As ``torch_one_thread`` for tests that also run without torch (the CLI's refusals)."""
    with _one_torch_thread():
        yield


# ------------------------------------------------------------------ array namespaces
#: Test ids of the namespaces the core runs on (issue 14): select with ``-k``.
NAMESPACES = ["numpy", "array_api_strict", "torch_cpu", "cupy", "torch_cuda"]


class Namespace:
    """One array library: its array-API namespace, and conversions from and to NumPy."""

    def __init__(self, name):
        import contextlib

        import numpy as np

        from minimal_attn import _xp

        self.name, self.device_context = name, contextlib.nullcontext
        if name == "numpy":
            self.module = np
        elif name == "array_api_strict":
            self.module = pytest.importorskip("array_api_strict",
                                              reason="array-api-strict is not installed")
        elif name == "cupy":
            ok, reason = _xp.cupy_available()
            if not ok:
                pytest.skip(reason)
            import cupy

            self.module = cupy
        else:
            torch = pytest.importorskip("torch", reason="torch is not installed")
            if name == "torch_cuda" and not torch.cuda.is_available():
                pytest.skip("torch sees no CUDA GPU")
            self.module = torch
            device = torch.device("cuda" if name == "torch_cuda" else "cpu")
            self.device_context = lambda: device      # torch.device is a default-device context
        self.xp = _xp.namespace(self.module)
        self.to_numpy = _xp.to_numpy

    def asarray(self, a):
        """A NumPy array (or nested list) as an array of this namespace, on its device."""
        import numpy as np

        with self.device_context():
            return self.xp.asarray(np.asarray(a))


@pytest.fixture(params=NAMESPACES)
def ns(request):
    """Every array namespace of :data:`NAMESPACES`, skipping absent ones with the reason."""
    return Namespace(request.param)
