r"""CIFAR-10 and CIFAR-100 readers for the image mosaics of V&R Sec. 2.4 and Sec. 5.

Vashisht & Ramaswamy (2023) build their image SDC tasks from CIFAR-10 (and
CIFAR-100): a mosaic's segments are 32 x 32 colour images. This module reads
the official "python version" archives (Krizhevsky 2009), already unpacked:

* ``cifar-10-batches-py/``: ``data_batch_1`` .. ``data_batch_5``, ``test_batch``,
  ``batches.meta`` (``label_names``); each batch a dict with ``data``
  (N x 3072 uint8) and ``labels``.
* ``cifar-100-python/``: ``train``, ``test``, ``meta`` (``fine_label_names``,
  ``coarse_label_names``); each split a dict with ``data``, ``fine_labels`` and
  ``coarse_labels``.

A row of ``data`` holds the 1024 red values, then the 1024 green, then the 1024
blue, each a 32 x 32 image in row-major order, so ``row.reshape(3, 32, 32)`` is
the image in channels-first layout.

Security: the files are Python pickles, and unpickling can run arbitrary
code. Point these readers only at the official dataset files (or copies you
made yourself), never at pickles from an untrusted source.
"""

import os
import pickle
from typing import NamedTuple

import numpy as np

from minimal_attn.errors import InputError, check_folder

IMAGE_SHAPE = (3, 32, 32)          # channels-first: red, green, blue planes
ROW_LENGTH = 3 * 32 * 32           # 3072 bytes per image

CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
CIFAR10_META = "batches.meta"

CIFAR100_DIR = "cifar-100-python"
CIFAR100_FILES = ("train", "test", "meta")

_CIFAR10_EXPECTED = (f"expected {CIFAR10_DIR} with data_batch_1..5, test_batch, "
                     "batches.meta; pass --data-dir pointing at it")
_CIFAR100_EXPECTED = (f"expected {CIFAR100_DIR} with train, test, meta; "
                      "pass --data-dir pointing at it")


class CifarSplits(NamedTuple):
    """The train and test images of a CIFAR archive, with the class names."""

    x_train: np.ndarray      # (N_train, 3, 32, 32) uint8
    y_train: np.ndarray      # (N_train,) int64, class index
    x_test: np.ndarray       # (N_test, 3, 32, 32) uint8
    y_test: np.ndarray       # (N_test,) int64
    class_names: list[str]   # class index -> name


def _find_folder(folder, subdir, files, expected):
    """``folder`` itself if it holds ``files``, else ``folder/subdir``; or InputError."""
    folder = check_folder(folder, param="data_dir", hint=expected)
    for candidate in (folder, os.path.join(folder, subdir)):
        if any(os.path.isfile(os.path.join(candidate, f)) for f in files):
            missing = [f for f in files if not os.path.isfile(os.path.join(candidate, f))]
            if missing:
                raise InputError(f"missing file {os.path.join(candidate, missing[0])}: "
                                 f"{expected}")
            return candidate
    archives = sorted(n for n in os.listdir(folder) if n.endswith((".tar.gz", ".tgz")))
    if archives:                       # the download itself, not yet unpacked
        raise InputError(f"no CIFAR files in {folder}, only the archive {archives[0]}: "
                         f"unpack it there (tar xzf {archives[0]})")
    raise InputError(f"no CIFAR files in {folder}: {expected}")


#: What a CIFAR pickle may build besides plain containers: NumPy arrays and dtypes (the
#: official batches hold lists and bytes; re-saved ones often hold arrays), and the text
#: codec with which Python 3's pickle protocol 2 writes bytes (``_codecs.encode``, data
#: only). Anything else (a function, a class) is refused before it is called: unpickling
#: runs what it names.
_NUMPY_GLOBALS = {("numpy", "ndarray"), ("numpy", "dtype"),
                  ("numpy.core.multiarray", "_reconstruct"),
                  ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
                  ("_codecs", "encode")}
#: The fix for a CIFAR file that is there but cannot be read as a batch.
_DAMAGED = ("the file is damaged or not a CIFAR batch: download and unpack it again (or "
            "rebuild it with to_pickles.py)")


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to build {module}.{name}")


def _unpickle(path, expected):
    """Load one pickle as a dict with str keys (Python 2 pickles give bytes keys).

    Only data is built (containers, numbers, strings, NumPy arrays): a pickle that
    names any other global is refused as malformed instead of being run.
    """
    try:
        with open(path, "rb") as f:
            obj = _DataUnpickler(f, encoding="bytes").load()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}; {expected}") from None
    except Exception as exc:  # noqa: BLE001 - any unpickling failure: truncated, not a pickle
        raise InputError(f"malformed pickle {path} ({type(exc).__name__}): "
                         f"{_DAMAGED}") from None
    if not isinstance(obj, dict):
        raise InputError(f"malformed pickle {path}: expected a dict, got "
                         f"{type(obj).__name__}; {_DAMAGED}")
    return {(k.decode("latin1") if isinstance(k, bytes) else str(k)): v
            for k, v in obj.items()}


def _get(batch, key, path):
    if key not in batch:
        raise InputError(f"malformed pickle {path}: expected key {key!r}, "
                         f"found {sorted(batch)}")
    return batch[key]


def _read_batch(path, label_key, expected):
    """Images (N, 3, 32, 32) uint8 and labels (N,) int64 of one batch file."""
    batch = _unpickle(path, expected)
    data = np.asarray(_get(batch, "data", path))
    labels = _get(batch, label_key, path)
    if data.ndim != 2 or data.shape[1] != ROW_LENGTH:
        raise InputError(f"malformed pickle {path}: expected 'data' of shape "
                         f"(N, {ROW_LENGTH}), got {data.shape}")
    if data.dtype != np.uint8:
        if not (np.issubdtype(data.dtype, np.integer)
                and (data.size == 0 or (data.min() >= 0 and data.max() <= 255))):
            raise InputError(f"malformed pickle {path}: expected uint8 pixel values "
                             f"0..255, got dtype {data.dtype}")
        data = data.astype(np.uint8)
    try:
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"malformed pickle {path}: {label_key!r} must be a list "
                         "of integers") from None
    if labels.shape[0] != data.shape[0]:
        raise InputError(f"malformed pickle {path}: {labels.shape[0]} labels for "
                         f"{data.shape[0]} images")
    images = data.reshape((-1,) + IMAGE_SHAPE)      # (N, 3, 32, 32): R, G, B planes
    return images, labels


def _read_names(path, key, expected):
    meta = _unpickle(path, expected)
    names = _get(meta, key, path)
    try:
        return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names]
    except (TypeError, UnicodeDecodeError):
        raise InputError(f"malformed pickle {path}: {key!r} must be a list of "
                         "class names") from None


def _check_labels(labels, n_classes, path):
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise InputError(f"malformed pickle {path}: labels must lie in "
                         f"0..{n_classes - 1} (the classes in the meta file), got "
                         f"{labels.min()}..{labels.max()}")


def load_cifar10(folder):
    """Read CIFAR-10 from ``folder`` (``cifar-10-batches-py`` itself or its parent).

    Parameters
    ----------
    folder : str or path
        The unpacked official archive. Only open official dataset files: they
        are pickles (see the module docstring).

    Returns
    -------
    CifarSplits
        ``x_train`` (N, 3, 32, 32) uint8 from ``data_batch_1..5`` in order,
        ``x_test`` from ``test_batch``, int64 labels, and the 10 class names.

    Raises
    ------
    InputError
        Missing folder or file, or a pickle with the wrong keys or shapes.
    """
    files = CIFAR10_TRAIN + (CIFAR10_TEST, CIFAR10_META)
    root = _find_folder(folder, CIFAR10_DIR, files, _CIFAR10_EXPECTED)
    meta_path = os.path.join(root, CIFAR10_META)
    names = _read_names(meta_path, "label_names", _CIFAR10_EXPECTED)
    splits = []
    for group in (CIFAR10_TRAIN, (CIFAR10_TEST,)):
        parts = []
        for name in group:
            path = os.path.join(root, name)
            images, labels = _read_batch(path, "labels", _CIFAR10_EXPECTED)
            _check_labels(labels, len(names), path)
            parts.append((images, labels))
        splits.append((np.concatenate([p[0] for p in parts]),
                       np.concatenate([p[1] for p in parts])))
    (x_train, y_train), (x_test, y_test) = splits
    return CifarSplits(x_train, y_train, x_test, y_test, names)


def load_cifar100(folder, label="fine"):
    """Read CIFAR-100 from ``folder`` (``cifar-100-python`` itself or its parent).

    Parameters
    ----------
    folder : str or path
        The unpacked official archive (official files only: they are pickles).
    label : {"fine", "coarse"}
        The 100 fine classes or the 20 coarse superclasses.

    Returns
    -------
    CifarSplits
        Images (N, 3, 32, 32) uint8, int64 labels of the chosen granularity,
        and the matching class names from ``meta``.
    """
    if label not in ("fine", "coarse"):
        raise InputError(f"CIFAR-100 label must be 'fine' or 'coarse', got {label!r}")
    root = _find_folder(folder, CIFAR100_DIR, CIFAR100_FILES, _CIFAR100_EXPECTED)
    names = _read_names(os.path.join(root, "meta"), f"{label}_label_names",
                        _CIFAR100_EXPECTED)
    out = []
    for split in ("train", "test"):
        path = os.path.join(root, split)
        images, labels = _read_batch(path, f"{label}_labels", _CIFAR100_EXPECTED)
        _check_labels(labels, len(names), path)
        out += [images, labels]
    return CifarSplits(*out, names)
