r"""Image mosaics: SDC instances whose segments are images (V&R Sec. 2.4, used in Sec. 5).

Vashisht & Ramaswamy (2023), Section 2.4: a mosaic holds ``m`` images; exactly
one, at position ``z``, comes from a *foreground* class and gives the label
``y``; the other ``m - 1`` come from *background* classes and carry no
information about ``y``. On CIFAR-10 the default foreground classes are
airplane, automobile and bird, and the background classes the other seven.

Every builder returns :class:`minimal_attn.data.Mosaics` with ``X`` of shape
(N, m, 3, 32, 32) (uint8 for CIFAR, float32 for the synthetic images),
``y`` (N,) the index of the foreground class *within* ``foreground_classes``
(0..C-1) and ``z`` (N,) the foreground position (evaluation only).

Labels and positions are *balanced*: ``y`` cycles through 0..C-1 and ``z``
through 0..m-1, and each sequence is shuffled independently, so the counts of
any two labels (or positions) differ by at most one.
"""

import numpy as np

from minimal_attn.data import Mosaics
from minimal_attn.errors import InputError, check_int_at_least

#: Default CIFAR-10 foreground classes (class indices 0, 1, 2).
CIFAR10_FOREGROUND = ("airplane", "automobile", "bird")

#: Per-channel (R, G, B) mean and standard deviation of the CIFAR-10 training
#: pixels scaled to [0, 1], over all 50,000 images x 1024 pixels. (The often
#: copied std (0.2023, 0.1994, 0.2010) is a mean of per-image stds, not this.)
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
#: How pixels become network inputs, (mean, std) per channel of x / 255:
#: ``standard`` the CIFAR-10 statistics above (zero mean, unit spread; the paper
#: states none); ``half`` 0.5 and 0.5, pixels in [-1, 1], as the authors' released
#: notebooks do (``transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))``).
PIXEL_SCALINGS = {"standard": (CIFAR10_MEAN, CIFAR10_STD),
                  "half": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))}


def pixel_scaling(name):
    """``(mean, std)`` of :data:`PIXEL_SCALINGS` ``name``, for :func:`to_float_images`."""
    if name not in PIXEL_SCALINGS:
        raise InputError(f"pixels must be one of {', '.join(PIXEL_SCALINGS)}, got {name!r}",
                         param="pixels")
    return PIXEL_SCALINGS[name]


def class_indices(class_names, wanted):
    """Indices of the names ``wanted`` in ``class_names`` (e.g. CIFAR10_FOREGROUND)."""
    index = {name: i for i, name in enumerate(class_names)}
    missing = [w for w in wanted if w not in index]
    if missing:
        raise InputError(f"unknown class {missing[0]!r}: use names from "
                         f"{', '.join(class_names)}")
    return [index[w] for w in wanted]


def cifar10_classes(class_names, foreground=CIFAR10_FOREGROUND):
    """(foreground, background) class indices: the named foreground, all others background."""
    fg = class_indices(class_names, foreground)
    return fg, [i for i in range(len(class_names)) if i not in fg]


def balanced_labels(n, n_values, rng):
    """``n`` values cycling through 0..n_values-1, shuffled: counts differ by <= 1."""
    return rng.permutation(np.arange(n) % n_values)


def _check_classes(labels, foreground_classes, background_classes):
    fg = [int(c) for c in foreground_classes]
    bg = [int(c) for c in background_classes]
    if not fg or not bg:
        raise InputError("foreground and background classes must both be non-empty, "
                         f"got {fg} and {bg}")
    if len(set(fg)) != len(fg) or len(set(bg)) != len(bg):
        raise InputError(f"repeated class index in foreground {fg} or background {bg}")
    if set(fg) & set(bg):
        raise InputError(f"foreground and background classes overlap: "
                         f"{sorted(set(fg) & set(bg))}; a class can only be one of them")
    present = set(np.unique(labels).tolist())
    absent = [c for c in fg + bg if c not in present]
    if absent:
        raise InputError(f"class {absent[0]} has no images in this split; choose "
                         f"classes from {sorted(present)}")
    return fg, bg


def sample_mosaic_indices(labels, foreground_classes, background_classes, m, n, seed=0):
    """Image indices of ``n`` mosaics: ``(idx (n, m), y (n,), z (n,))``.

    ``images[idx]`` is the mosaic array; building from indices lets a caller
    gather one mini-batch at a time instead of holding all N*m images. The
    foreground image of mosaic i is drawn uniformly from the images of class
    ``foreground_classes[y[i]]``; each background segment uniformly from all
    images of the background classes, independently and with replacement.
    """
    m = check_int_at_least("m (segments per mosaic)", m, 2)
    n = check_int_at_least("n (mosaics)", n, 1)
    labels = np.asarray(labels).reshape(-1)
    fg, bg = _check_classes(labels, foreground_classes, background_classes)
    rng = np.random.default_rng([seed, 5])
    y = balanced_labels(n, len(fg), rng)
    z = balanced_labels(n, m, rng)

    # Images of each foreground class k sit at order[start[k] : start[k] + count[k]].
    fg_label = np.asarray(fg)[y]                                          # (n,)
    order = np.argsort(labels, kind="stable")
    start = np.searchsorted(labels[order], fg_label, side="left")
    count = np.searchsorted(labels[order], fg_label, side="right") - start
    fg_idx = order[start + (rng.random(n) * count).astype(np.int64)]     # (n,)

    bg_pool = np.flatnonzero(np.isin(labels, bg))
    bg_idx = bg_pool[rng.integers(bg_pool.size, size=(n, m - 1))]        # (n, m-1)

    idx = np.empty((n, m), dtype=np.int64)
    is_fg = np.arange(m)[None, :] == z[:, None]                          # (n, m)
    idx[is_fg] = fg_idx                      # row-major: row i gets fg_idx[i]
    idx[~is_fg] = bg_idx.reshape(-1)
    return idx, y.astype(np.int64), z.astype(np.int64)


def make_image_mosaics(images, labels, foreground_classes, background_classes, m, n,
                       seed=0, only_rows=None):
    """``n`` image mosaics of ``m`` segments from one split (V&R Sec. 2.4).

    Parameters
    ----------
    images : array, shape (N_img, 3, 32, 32)   e.g. ``CifarSplits.x_train``
    labels : array, shape (N_img,)             class index per image
    foreground_classes, background_classes : sequences of int
        Disjoint, non-empty sets of class indices present in ``labels``.
    m, n : int
        Segments per mosaic (>= 2) and number of mosaics (>= 1).
    seed : int
        Build training mosaics from the training images and test mosaics from
        the test images, with different seeds.
    only_rows : slice, optional
        Fill only these mosaics' pixels; the others stay zero and, never touched, take
        no memory (a data fingerprint reads only some rows:
        :func:`~minimal_attn.experiments.checkpoints.hashed_rows`).

    Returns
    -------
    Mosaics
        ``X`` (n, m, 3, 32, 32) of the images' dtype, ``y`` (n,) the index of
        the foreground class within ``foreground_classes``, ``z`` (n,) its
        position; ``y`` and ``z`` balanced (counts differ by at most one);
        ``source`` (n, m) the index in ``images`` of every segment.
    """
    images = np.asarray(images)
    if images.ndim < 2 or images.shape[0] != np.asarray(labels).reshape(-1).shape[0]:
        raise InputError(f"images {images.shape} and labels must have the same "
                         "first dimension (one label per image)")
    idx, y, z = sample_mosaic_indices(labels, foreground_classes, background_classes,
                                      m, n, seed)
    if only_rows is None:
        return Mosaics(images[idx], y, z, source=idx)                    # (n, m, 3, 32, 32)
    X = np.zeros((n, m) + images.shape[1:], images.dtype)                # (n, m, 3, 32, 32)
    X[only_rows] = images[idx[only_rows]]
    return Mosaics(X, y, z, source=idx)


def _smooth_patterns(rng, k, image_shape, coarse=4):
    """``k`` fixed patterns of shape ``image_shape``: coarse random blocks, upsampled.

    Block patterns (a ``coarse`` x ``coarse`` grid per channel, nearest-neighbour
    upsampled) survive convolution and pooling, so a small CNN separates them
    within a few epochs.
    """
    c, h, w = image_shape
    low = rng.standard_normal((k, c, coarse, coarse)).astype(np.float32)
    rows = np.arange(h) * coarse // h
    cols = np.arange(w) * coarse // w
    return low[:, :, rows][:, :, :, cols]                                # (k, c, h, w)


def synthetic_image_mosaics(n, m, n_classes=3, seed=0, image_shape=(3, 32, 32),
                            n_background=7, noise=0.5, pattern_seed=0):
    """Files-free image mosaics for ``attn-dyn train --dataset synthetic``.

    Foreground class k is a fixed random block pattern ``P_k`` plus Gaussian
    noise; each background segment is one of ``n_background`` other fixed
    patterns (chosen uniformly) plus noise. Values are float32, roughly zero
    mean and unit scale, i.e. already "normalised": do not pass them to
    :func:`to_float_images`.

    ``pattern_seed`` fixes the patterns and ``seed`` the sampling, so a train
    and a test set share classes when they share ``pattern_seed`` and differ
    in ``seed``. ``y`` and ``z`` are balanced as in :func:`make_image_mosaics`.
    """
    m = check_int_at_least("m (segments per mosaic)", m, 2)
    n = check_int_at_least("n (mosaics)", n, 1)
    n_classes = check_int_at_least("n_classes", n_classes, 2)
    n_background = check_int_at_least("n_background", n_background, 1)
    image_shape = tuple(int(s) for s in image_shape)
    if len(image_shape) != 3 or min(image_shape) < 1:
        raise InputError(f"image_shape must be (channels, height, width), got {image_shape}")
    if not (np.isfinite(noise) and noise >= 0):
        raise InputError(f"noise must be a finite number >= 0, got {noise}")
    patterns = _smooth_patterns(np.random.default_rng([pattern_seed, 6]),
                                n_classes + n_background, image_shape)
    rng = np.random.default_rng([seed, 7])
    y = balanced_labels(n, n_classes, rng).astype(np.int64)
    z = balanced_labels(n, m, rng).astype(np.int64)
    which = n_classes + rng.integers(n_background, size=(n, m))          # (n, m)
    which[np.arange(n), z] = y
    X = rng.standard_normal((n, m) + image_shape, dtype=np.float32)       # (n, m, c, h, w)
    X *= np.float32(noise)
    for j in range(m):                       # per position, not per mosaic: small temporaries
        X[:, j] += patterns[which[:, j]]
    return Mosaics(X, y, z)


def to_float_images(X_uint8, mean=CIFAR10_MEAN, std=CIFAR10_STD):
    r"""Scale uint8 images to [0, 1], then normalise each channel: :math:`(x/255 - \mu_c)/\sigma_c`.

    ``X_uint8`` has shape (..., 3, H, W) with any leading shape, e.g. a batch
    of mosaics (B, m, 3, 32, 32); the channel axis is the third from last.
    Defaults are the CIFAR-10 training statistics :data:`CIFAR10_MEAN` and
    :data:`CIFAR10_STD`. Returns float32 of the same shape.
    """
    X = np.asarray(X_uint8)
    if X.dtype != np.uint8:
        raise InputError(f"to_float_images expects uint8 pixels 0..255, got {X.dtype}; "
                         "synthetic image mosaics are already float and normalised")
    mean = np.asarray(mean, dtype=np.float32)
    std = np.asarray(std, dtype=np.float32)
    if X.ndim < 3 or X.shape[-3] != mean.shape[0]:
        raise InputError(f"expected images of shape (..., {mean.shape[0]}, H, W), "
                         f"got {X.shape}")
    out = X.astype(np.float32)
    out *= np.float32(1.0 / 255.0)
    out -= mean[:, None, None]
    out /= std[:, None, None]
    return out
