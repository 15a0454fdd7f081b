"""Input validation shared by the library and the CLI.

Every check raises :class:`InputError` with a one-line message that names the
problem and the fix; the CLI turns it into ``Error: ...`` on stderr and exit
status 2, without a traceback.
"""

import math
import numbers
import os
import reprlib

import numpy as np

from minimal_attn import PARADIGMS

#: Aliases accepted at the CLI edge only; the library speaks the canonical names.
PARADIGM_ALIASES = {"soft": "sa", "hard": "ha", "lvml": "lv"}


class InputError(ValueError):
    """Bad user input (a value, a file, a folder). The message is one line.

    The library names Python parameters (``n_train``); pass ``param=`` (one name
    or a tuple of names) and the CLI rewrites each into its option
    (``--n-train``) before printing.
    """

    def __init__(self, message, param=None):
        super().__init__(message)
        self.param = param


def check_paradigm(name, allowed=PARADIGMS):
    """Return the canonical paradigm name for ``name`` or raise InputError."""
    key = str(name).strip().lower()
    key = PARADIGM_ALIASES.get(key, key)
    if key not in allowed:
        raise InputError(
            f"unknown paradigm {name!r}: use one of {', '.join(allowed)}")
    return key


def real(value):
    """``value`` as a real number if it is one, else None: Python and NumPy scalars, 0-d
    NumPy arrays and torch tensors, ``Decimal`` and ``Fraction``; booleans are not numbers
    here (``alpha=True`` is a slip, not 1)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()                           # a 0-d array or tensor
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number) \
            or isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        return None
    return value


def shown(value):
    """``value`` for a one-line message: an array as its shape, anything else as a short
    repr (NumPy's repr of an array, or of a SeedSequence, spans lines)."""
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape):
        return f"an array of shape {tuple(shape)}"
    return " ".join(reprlib.repr(value).split())


def as_list(values):
    """``values`` as a list: a string is read as its comma list (``"sa,lv"``, ``"0.2,0.5"``)
    and a single number as one item, so neither is iterated character by character."""
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    try:
        return list(values)
    except TypeError:                    # a number, a 0-d array, None: one item
        return [values]


def check_paradigms(paradigms, allowed=PARADIGMS, name="paradigms", param=None):
    """Canonical names of ``allowed``, once each, in the order given.

    ``paradigms`` is a list (any iterable) of names, a comma list (``"sa,lv"``), one name or
    ``"all"``;
    case and aliases (``"SA"``, ``"soft"``) read as the canonical name, the key results are
    stored under, so a raw name cannot go missing after every run has trained. ``name``
    is what the messages call the argument (the CLI: ``--paradigm``).
    """
    if isinstance(paradigms, str) and paradigms.strip().lower() == "all":
        return list(allowed)
    try:
        out = [check_paradigm(p, allowed) for p in as_list(paradigms)]
    except InputError as err:
        raise InputError(f"{name}: {err}", param=param) from None
    if not out:
        raise InputError(f"{name} is empty: give at least one of {', '.join(allowed)} "
                         "(comma-separated, once each) or all", param=param)
    twice = sorted({p for p in out if out.count(p) > 1})
    if twice:
        raise InputError(f"{name} names {', '.join(twice)} twice ({shown(paradigms)}): give the "
                         "paradigms once each", param=param)
    return out


def check_int_at_least(name, value, low, param=None):
    """Require an integer ``value >= low`` (e.g. m >= 2 segments, C >= 2 classes)."""
    v = real(value)
    if v is None or not math.isfinite(v) or int(v) != v or v < low:
        raise InputError(f"{name} must be an integer >= {low}, got {shown(value)}", param=param)
    return int(v)


#: The largest seed a run may use: torch's and NumPy's generators both take it (torch
#: refuses seeds past 2**63 - 1 with an OverflowError), with room for seed + 1 runs.
MAX_SEED = 2**31 - 1


def check_seeds(name, first, count=1, param=None):
    """Require seeds ``first .. first + count - 1`` to be integers in [0, MAX_SEED]."""
    first = check_int_at_least(name, first, 0, param=param)
    if first + count - 1 > MAX_SEED:
        raise InputError(f"{name} must be at most {MAX_SEED - count + 1} (seeds run up to "
                         f"{MAX_SEED}), got {first}", param=param)
    return first


def check_alpha(alpha, name="alpha", param=None):
    """Require a foreground focus score, a number in [0, 1] (NumPy scalars included)."""
    v = real(alpha)
    if v is None:
        raise InputError(f"{name} must be a number in [0, 1], got {shown(alpha)}", param=param)
    if not 0.0 <= v <= 1.0:
        raise InputError(f"{name} must lie in [0, 1], got {float(v):g}", param=param)
    return float(v)


def check_real(name, value, ok, rule, param=None):
    """Require a real number (:func:`real`) with ``ok(number)``, ``rule`` saying which in
    words ("a finite number > 0"); returns the number as :func:`real` reads it."""
    v = real(value)
    if v is None or not ok(v):
        raise InputError(f"{name} must be {rule}, got {shown(value)}", param=param)
    return v


def check_positive(name, value, param=None):
    """Require a finite number > 0 (a time horizon, a learning rate)."""
    check_real(name, value, lambda v: math.isfinite(v) and v > 0, "a finite number > 0", param)
    return value


def shape_of(a):
    """The shape of an array of any namespace (its own ``.shape``: nothing is converted or
    read back), or of a nested list."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def dtype_is(dtype, kind):
    """Whether ``dtype`` is of ``kind``, "integer" or "floating" (real): NumPy and CuPy
    dtypes are ``np.dtype``; torch's and array-api-strict's print as "torch.int64", ...
    (only the dtype is read, never an array's values)."""
    if isinstance(dtype, np.dtype):
        return np.issubdtype(dtype, {"integer": np.integer, "floating": np.floating}[kind])
    prefixes = {"integer": ("int", "uint"), "floating": ("float", "bfloat")}[kind]
    return str(dtype).rsplit(".", 1)[-1].startswith(prefixes)


def check_labels(y, n_classes, n=None, name="y", param=None):
    """Require class labels: integers in [0, n_classes), one per instance (``n`` of them).

    A negative label would wrap around to the last class and a float one would be
    truncated, each giving a loss without error. The range is checked on host (NumPy)
    arrays only; a device array's dtype and length are checked without reading it back.
    """
    shape = shape_of(y)
    if len(shape) != 1 or (n is not None and shape[0] != n):
        count = "N" if n is None else f"N = {n}"
        raise InputError(f"{name} must be a vector of {count} integer class labels, one per "
                         f"instance, got shape {shape}", param=param)
    dtype = np.asarray(y).dtype if isinstance(y, (list, tuple)) else y.dtype
    if not dtype_is(dtype, "integer"):
        raise InputError(f"{name} must hold integer class labels, got dtype {dtype}; cast "
                         "whole-number labels to int64 (y.astype(int))", param=param)
    if isinstance(y, (np.ndarray, list, tuple)):
        flat = np.asarray(y)
        if flat.size and (flat.min() < 0 or flat.max() >= n_classes):
            raise InputError(f"{name} must hold labels in 0..{n_classes - 1}, got "
                             f"{int(flat.min())}..{int(flat.max())}", param=param)
    return y


def check_ids(ids, n_vocab, side, param=None):
    """Require integer word ids in [0, n_vocab) (a NumPy array or a list; device arrays are
    read back by the caller). An id past the table would read another word's entry through
    a flat index, and a negative one would wrap around, instead of failing."""
    flat = np.asarray(ids).reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= n_vocab):
        raise InputError(f"{side} ids must lie in [0, {n_vocab}); got "
                         f"{int(flat.min())}..{int(flat.max())}", param=param)
    return ids


def check_folder(path, what="data folder", param="data_dir", hint=None):
    """Require an existing folder, telling a missing path from a file (``hint``: the fix)."""
    path = os.fspath(path)
    hint = hint or f"check {param}"
    if not os.path.exists(path):
        raise InputError(f"{what} {path} does not exist; {hint}", param=param)
    if not os.path.isdir(path):
        raise InputError(f"{what} {path} is not a folder (it is a file); {hint}", param=param)
    return path


class DivergedError(InputError):
    """A run whose loss became non-finite or grew by orders of magnitude: refused like any
    bad input, unless the caller records it and goes on (a paper-size Table 1 cell keeps
    the other seeds, :func:`minimal_attn.backends.vr.table1_driver.run_table1`)."""


def diverged(what, param="lr"):
    """The error of a run whose loss became non-finite or grew by orders of magnitude."""
    return DivergedError(f"{what}: diverged; lower the learning rate {param}", param=param)
