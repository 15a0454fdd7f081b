"""The loss backends agree: the core on NumPy / CuPy and the torch backend (autograd).

The core itself runs on every array namespace (``tests/test_conformance.py``);
here the torch backend, a separate implementation with autograd, must
reproduce the core's values on identical float64 inputs. Absent backends are
skipped with the reason.
"""

import numpy as np
import pytest

from minimal_attn import losses
from minimal_attn._xp import cupy_available, to_numpy


def _torch_device(kind):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if kind == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA GPU")
    return torch, torch.device(kind)


BACKENDS = ["numpy", "cupy", "torch_cpu", "torch_cuda"]


def _namespace(name):
    """(module with the core's loss names, to_backend, to_numpy) for a backend."""
    if name == "numpy":
        return losses, np.asarray, np.asarray
    if name == "cupy":
        ok, reason = cupy_available()
        if not ok:
            pytest.skip(reason)
        import cupy

        return losses, cupy.asarray, to_numpy
    torch, device = _torch_device(name.split("_")[1])
    from minimal_attn.backends import torch_backend

    return (torch_backend, lambda a: torch.as_tensor(np.asarray(a), device=device),
            lambda t: t.detach().cpu().numpy())


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    n, m, c = 7, 4, 3
    scores = 3 * rng.standard_normal((n, m))
    scores[0] = [1e4, -1e4, 0.0, 5.0]                       # extreme magnitudes stay finite
    logits = 3 * rng.standard_normal((n, m, c))
    logits[1, 0] = [-1e4, 1e4, 0.0]
    y = rng.integers(c, size=n)
    return scores, logits, y


@pytest.mark.parametrize("backend", BACKENDS)
def test_losses_and_inference_conform(backend, problem):
    ns, to_b, to_np = _namespace(backend)
    scores, logits, y = problem
    s, lg, yy = to_b(scores), to_b(logits), to_b(y)
    for name in ("ha", "lv"):
        expected = losses.loss(name, scores, logits, y)
        got = float(to_np(ns.loss(name, s, lg, yy)))
        assert got == pytest.approx(float(expected), rel=1e-12)
        np.testing.assert_allclose(to_np(ns.infer(name, s, lg)),
                                   losses.infer(name, scores, logits), rtol=1e-10, atol=1e-300)
    assert float(to_np(ns.loss_sa(lg[:, 0], yy))) == pytest.approx(
        float(losses.loss_sa(logits[:, 0], y)), rel=1e-12)
    np.testing.assert_allclose(to_np(ns.attention(s)), losses.attention(scores), rtol=1e-12)
