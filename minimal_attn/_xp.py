"""The array namespace of the core: the only module that may import CuPy.

Core functions are written against the Python array API standard, with the
namespace ``xp`` found from their inputs (``array-api-compat``'s
``array_namespace``), so the same code runs on NumPy, CuPy, torch tensors (CPU
or CUDA) and ``array-api-strict``. Without ``array-api-compat`` installed the
core still runs on NumPy (>= 2, whose main namespace follows the standard) and
CuPy.

Where the core genuinely needs NumPy (SciPy's ODE solver, ``np.unique`` with
``axis``, host-side index building) it converts at that boundary with
:func:`to_numpy` and says so in its docstring.
"""

import numpy as np


def _is_cupy(a):
    return type(a).__module__.split(".")[0] == "cupy"


def get_xp(*arrays):
    """The array namespace of the arrays among ``arrays`` (others, like ints and None, ignored).

    NumPy arrays (and Python scalars alone) give ``array_api_compat.numpy``
    (plain ``numpy`` without array-api-compat); CuPy, torch and array-api-strict
    arrays give their own compatible namespace. Mixing libraries is an error.
    """
    arrays = [a for a in arrays if a is not None and not isinstance(a, (int, float, bool))]
    if all(type(a) is np.ndarray for a in arrays):        # the common case, kept cheap
        return _numpy_namespace()
    try:
        from array_api_compat import array_namespace
    except ImportError:          # NumPy / CuPy only
        for a in arrays:
            if _is_cupy(a):
                import cupy

                return cupy
        return np
    if not arrays:
        arrays = [np.zeros(0)]
    return array_namespace(*arrays)


def _numpy_namespace():
    global _NUMPY
    if _NUMPY is None:
        try:
            from array_api_compat import numpy as compat_numpy
        except ImportError:
            compat_numpy = np
        _NUMPY = compat_numpy
    return _NUMPY


_NUMPY = None

#: Alias under the standard's name.
array_namespace = get_xp


def is_numpy(xp):
    """True for NumPy (plain or array-api-compat's wrapper)."""
    return xp is np or getattr(xp, "__name__", "") == "array_api_compat.numpy"


def to_numpy(a):
    """A NumPy array with the values of ``a`` (device arrays come back to the host)."""
    if isinstance(a, np.ndarray):
        return a
    if _is_cupy(a):
        return a.get()
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        return a.detach().cpu().numpy()
    if module == "array_api_strict":
        return np.from_dlpack(a)
    return np.asarray(a)


def like(xp, values, ref=None, dtype=None):
    """``values`` (NumPy or nested lists) as an array of namespace ``xp`` on ``ref``'s device."""
    kwargs = {} if dtype is None else {"dtype": dtype}
    if isinstance(values, np.ndarray) and not values.flags.writeable and not is_numpy(xp):
        values = values.copy()              # torch warns on (and may write to) read-only memory
    if ref is not None:
        try:
            from array_api_compat import device

            kwargs["device"] = device(ref)
        except ImportError:
            pass
    return xp.asarray(values, **kwargs)


def namespace(module):
    """The array-API namespace for a module (numpy, cupy, torch, array_api_strict)."""
    if module is np or getattr(module, "__name__", "") == "numpy":
        return _numpy_namespace()
    try:
        from array_api_compat import array_namespace as find
    except ImportError:
        return module
    return find(module.asarray(0.0))


def bincount(xp, index, weights, minlength):
    """``sum of weights per index`` (N,) -> (minlength,): the one scatter-add the core needs.

    The array API standard has no scatter-add; NumPy, CuPy and torch have
    ``bincount``, other namespaces go through NumPy on the host (correct, slower).
    """
    if hasattr(xp, "bincount"):
        return xp.bincount(index, weights=weights, minlength=minlength)
    out = np.bincount(to_numpy(index), weights=to_numpy(weights), minlength=minlength)
    return like(xp, out, weights)


def scatter_add_rows(xp, index, rows, n):
    """``out[index[k]] += rows[k]`` for rows (K, d) into (n, d), repeated indices all counting.

    In k's order for each row of ``out``, as ``np.bincount`` and torch's ``index_add_`` on
    the CPU both add. torch takes ``index_add_``: its ``bincount`` reads the index's range
    back from the device, which stops the host at every call.
    """
    if hasattr(rows, "index_add_"):
        return rows.new_zeros((n, rows.shape[1])).index_add_(0, index, rows)
    K, d = rows.shape
    cols = like(xp, np.arange(d), rows)
    flat = xp.reshape(index[:, None] * d + cols[None, :], (-1,))        # (K * d,)
    return xp.reshape(bincount(xp, flat, xp.reshape(rows, (-1,)), n * d), (n, d))


def cupy_available():
    """(True, "") if CuPy imports and sees a GPU, else (False, reason)."""
    try:
        import cupy
    except ImportError:
        return False, 'CuPy is not installed (pip install ".[cupy]")'
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False, "CuPy sees no GPU"
    except Exception as exc:  # CUDA driver missing or broken
        return False, f"CuPy cannot reach a GPU: {exc}"
    return True, ""
