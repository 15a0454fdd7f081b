"""Image mosaics of Section 5: one foreground per mosaic, balanced y and z, seeded."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import examples

from minimal_attn.data import Mosaics
from minimal_attn.datasets.mosaics import (
    CIFAR10_FOREGROUND,
    CIFAR10_MEAN,
    CIFAR10_STD,
    cifar10_classes,
    make_image_mosaics,
    sample_mosaic_indices,
    synthetic_image_mosaics,
    to_float_images,
)
from minimal_attn.errors import InputError

NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
         "truck"]
FG, BG = [0, 1, 2], [3, 4, 5, 6, 7, 8, 9]


def tagged_split(n_images, first_tag=0, n_classes=10):
    """Images whose pixels all equal their tag ``first_tag + i``: a mosaic names its sources."""
    tags = first_tag + np.arange(n_images)
    images = np.broadcast_to(tags.astype(np.uint8)[:, None, None, None],
                             (n_images, 3, 32, 32)).copy()
    return images, np.arange(n_images) % n_classes, tags


def source_index(mosaics, first_tag=0):
    """(n, m) index of the image each segment was copied from."""
    return mosaics.X[:, :, 0, 0, 0].astype(np.int64) - first_tag


def check_one_foreground(mos, labels, fg, bg):
    src = source_index(mos)                                   # (n, m)
    seg_label = labels[src]                                   # (n, m)
    is_fg = np.isin(seg_label, fg)
    assert np.all(is_fg.sum(axis=1) == 1)                     # exactly one foreground
    assert np.all(np.argmax(is_fg, axis=1) == mos.z)          # ... at position z
    assert np.all(seg_label[np.arange(len(mos.y)), mos.z] == np.asarray(fg)[mos.y])
    assert np.all(np.isin(seg_label[~is_fg], bg))             # all others background


def test_one_foreground_balanced_cifar_layout():
    images, labels, _ = tagged_split(200)
    mos = make_image_mosaics(images, labels, FG, BG, m=9, n=1000, seed=3)
    assert isinstance(mos, Mosaics)
    assert mos.X.shape == (1000, 9, 3, 32, 32) and mos.X.dtype == np.uint8
    assert mos.y.dtype == np.int64 and mos.z.dtype == np.int64
    check_one_foreground(mos, labels, FG, BG)
    assert np.bincount(mos.y).tolist() == [334, 333, 333]
    assert np.ptp(np.bincount(mos.z, minlength=9)) <= 1 and mos.z.max() == 8
    # the sampling is uniform: every image of the used classes gets drawn
    src = source_index(mos)
    assert set(np.unique(src)) == set(range(200))


@settings(deadline=None, max_examples=examples(25))
@given(data=st.data())
def test_one_foreground_property(data):
    n_classes = data.draw(st.integers(2, 6))
    n_fg = data.draw(st.integers(1, n_classes - 1))
    perm = data.draw(st.permutations(range(n_classes)))
    fg, bg = perm[:n_fg], perm[n_fg:]
    m = data.draw(st.integers(2, 7))
    n = data.draw(st.integers(1, 60))
    images, labels, _ = tagged_split(3 * n_classes, n_classes=n_classes)
    mos = make_image_mosaics(images, labels, fg, bg, m=m, n=n,
                             seed=data.draw(st.integers(0, 99)))
    assert mos.X.shape == (n, m, 3, 32, 32)
    check_one_foreground(mos, labels, fg, bg)
    assert np.ptp(np.bincount(mos.y, minlength=n_fg)) <= 1
    assert np.ptp(np.bincount(mos.z, minlength=m)) <= 1


def test_only_rows_fills_those_mosaics_and_leaves_the_rest_zero():
    """``only_rows`` (for a data fingerprint): the same draw as the whole build, those rows'
    pixels equal to it, every other pixel 0; y, z and the sources unchanged."""
    images, labels, _ = tagged_split(100)
    images = images + 1                                   # no image is all zero
    whole = make_image_mosaics(images, labels, FG, BG, m=4, n=50, seed=7)
    part = make_image_mosaics(images, labels, FG, BG, m=4, n=50, seed=7,
                              only_rows=slice(None, None, 3))
    for key in ("y", "z", "source"):
        np.testing.assert_array_equal(getattr(part, key), getattr(whole, key))
    assert part.X.shape == whole.X.shape and part.X.dtype == whole.X.dtype
    np.testing.assert_array_equal(part.X[::3], whole.X[::3])
    filled = np.zeros(50, bool)
    filled[::3] = True
    assert not part.X[~filled].any() and whole.X[~filled].all()


def test_seeded_reproducible():
    images, labels, _ = tagged_split(100)
    a = make_image_mosaics(images, labels, FG, BG, m=4, n=50, seed=7)
    b = make_image_mosaics(images, labels, FG, BG, m=4, n=50, seed=7)
    c = make_image_mosaics(images, labels, FG, BG, m=4, n=50, seed=8)
    for u, v in zip(a[:3], b[:3]):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a.X, c.X) and not np.array_equal(a.z, c.z)


def test_train_and_test_from_their_own_split():
    x_tr, y_tr, _ = tagged_split(100, first_tag=0)
    x_te, y_te, _ = tagged_split(50, first_tag=150)
    train = make_image_mosaics(x_tr, y_tr, FG, BG, m=5, n=80, seed=0)
    test = make_image_mosaics(x_te, y_te, FG, BG, m=5, n=40, seed=1)
    assert train.X.max() < 100 and test.X.min() >= 150
    check_one_foreground(train, y_tr, FG, BG)
    check_one_foreground(Mosaics(test.X - np.uint8(150), test.y, test.z), y_te, FG, BG)


def test_indices_match_images():
    images, labels, _ = tagged_split(60)
    idx, y, z = sample_mosaic_indices(labels, FG, BG, m=3, n=20, seed=5)
    mos = make_image_mosaics(images, labels, FG, BG, m=3, n=20, seed=5)
    np.testing.assert_array_equal(images[idx], mos.X)
    np.testing.assert_array_equal(y, mos.y)
    np.testing.assert_array_equal(z, mos.z)


@pytest.mark.parametrize("kwargs, message", [
    ({"m": 1}, "m .*>= 2"),
    ({"n": 0}, "n .*>= 1"),
    ({"fg": [], "bg": [3]}, "non-empty"),
    ({"fg": [0, 1], "bg": [1, 2]}, "overlap"),
    ({"fg": [0], "bg": [3, 3]}, "repeated"),
    ({"fg": [0], "bg": [12]}, "class 12 has no images"),
])
def test_validation(kwargs, message):
    images, labels, _ = tagged_split(40)
    args = {"m": 3, "n": 5, "fg": FG, "bg": BG}
    args.update(kwargs)
    with pytest.raises(InputError, match=message):
        make_image_mosaics(images, labels, args["fg"], args["bg"], m=args["m"], n=args["n"])


def test_images_labels_mismatch():
    images, labels, _ = tagged_split(40)
    with pytest.raises(InputError, match="one label per image"):
        make_image_mosaics(images, labels[:-1], FG, BG, m=3, n=5)


def test_cifar10_default_classes():
    assert cifar10_classes(NAMES) == (FG, BG)
    assert CIFAR10_FOREGROUND == ("airplane", "automobile", "bird")
    with pytest.raises(InputError, match="unknown class 'plane'"):
        cifar10_classes(NAMES, foreground=("plane",))


# ---------------------------------------------------------------- synthetic images

def test_synthetic_image_mosaics_shapes_and_balance():
    mos = synthetic_image_mosaics(31, 4, n_classes=3, seed=2, image_shape=(3, 8, 8))
    assert mos.X.shape == (31, 4, 3, 8, 8) and mos.X.dtype == np.float32
    assert np.ptp(np.bincount(mos.y, minlength=3)) <= 1
    assert np.ptp(np.bincount(mos.z, minlength=4)) <= 1
    again = synthetic_image_mosaics(31, 4, n_classes=3, seed=2, image_shape=(3, 8, 8))
    np.testing.assert_array_equal(mos.X, again.X)
    other = synthetic_image_mosaics(31, 4, n_classes=3, seed=3, image_shape=(3, 8, 8))
    assert not np.array_equal(mos.X, other.X)


def test_synthetic_foreground_is_learnable_and_shared_across_splits():
    """Nearest class-mean on train foregrounds labels test foregrounds; backgrounds differ."""
    shape = (3, 16, 16)
    train = synthetic_image_mosaics(90, 5, n_classes=3, seed=0, image_shape=shape)
    test = synthetic_image_mosaics(60, 5, n_classes=3, seed=1, image_shape=shape)
    rows = np.arange(90)
    fg_train = train.X[rows, train.z].reshape(90, -1)                # (90, 768)
    means = np.stack([fg_train[train.y == k].mean(0) for k in range(3)])
    fg_test = test.X[np.arange(60), test.z].reshape(60, -1)
    dist = ((fg_test[:, None] - means[None]) ** 2).sum(-1)           # (60, 3)
    assert np.all(np.argmin(dist, axis=1) == test.y)
    # a background segment is farther from every foreground mean than a foreground one
    bg = test.X[np.arange(60), (test.z + 1) % 5].reshape(60, -1)
    d_bg = ((bg[:, None] - means[None]) ** 2).sum(-1).min(1)
    assert np.median(d_bg) > 1.5 * np.median(dist.min(1))


def test_synthetic_validation():
    with pytest.raises(InputError, match="m .*>= 2"):
        synthetic_image_mosaics(10, 1)
    with pytest.raises(InputError, match="image_shape"):
        synthetic_image_mosaics(10, 3, image_shape=(32, 32))


# ---------------------------------------------------------------- normalisation

def test_to_float_images_constants_and_shape():
    X = np.zeros((2, 5, 3, 4, 4), dtype=np.uint8)
    X[1] = 255
    out = to_float_images(X)
    assert out.shape == X.shape and out.dtype == np.float32
    mean, std = np.array(CIFAR10_MEAN), np.array(CIFAR10_STD)
    np.testing.assert_allclose(out[0, 0, :, 2, 3], -mean / std, rtol=1e-6)
    np.testing.assert_allclose(out[1, 4, :, 0, 0], (1 - mean) / std, rtol=1e-6)
    assert to_float_images(X[0, 0]).shape == (3, 4, 4)


def test_to_float_images_rejects_bad_input():
    with pytest.raises(InputError, match="uint8"):
        to_float_images(np.zeros((1, 3, 4, 4), dtype=np.float32))
    with pytest.raises(InputError, match="3, H, W"):
        to_float_images(np.zeros((1, 4, 4, 3), dtype=np.uint8))


def test_normalised_real_images_have_zero_mean_unit_std(shared_dataset):
    from minimal_attn.datasets.cifar import load_cifar10

    d = load_cifar10(shared_dataset("cifar10", "cifar-10-batches-py"))
    out = to_float_images(d.x_train[:4000])
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0.0, atol=0.05)
    np.testing.assert_allclose(out.std(axis=(0, 2, 3)), 1.0, atol=0.05)
    idx, y, z = sample_mosaic_indices(d.y_test, *cifar10_classes(d.class_names),
                                      m=9, n=300, seed=1)
    seg_label = d.y_test[idx]                                        # (300, 9)
    assert np.all(np.isin(seg_label, FG).sum(axis=1) == 1)
    assert np.all(seg_label[np.arange(300), z] == y)                 # FG = [0, 1, 2]
