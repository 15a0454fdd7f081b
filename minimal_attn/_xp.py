"""The only module that may import CuPy.

Core functions are written against an array namespace ``xp`` (numpy or cupy),
found from their inputs, so the same code runs on the CPU and on a GPU.
"""


def get_xp(*arrays):
    """Return ``cupy`` if any argument is a CuPy array, else ``numpy``."""
    for a in arrays:
        if type(a).__module__.split(".")[0] == "cupy":
            import cupy

            return cupy
    import numpy

    return numpy


def to_numpy(a):
    """A NumPy copy of ``a`` (CuPy arrays come back to the host)."""
    if type(a).__module__.split(".")[0] == "cupy":
        return a.get()
    import numpy

    return numpy.asarray(a)


def cupy_available():
    """(True, "") if CuPy imports and sees a GPU, else (False, reason)."""
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install attn-dyn[cupy])"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False, "CuPy sees no GPU"
    except Exception as exc:  # CUDA driver missing or broken
        return False, f"CuPy cannot reach a GPU: {exc}"
    return True, ""
