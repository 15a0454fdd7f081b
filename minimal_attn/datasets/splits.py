r"""Mosaic data sets by name: the one place that turns (dataset, sizes, seed) into mosaics.

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. Every experiment that
needs SDC mosaics (``attn-dyn train``, ``attn-dyn fixed-focus``, the examples)
builds them here, so the foreground classes of a data set cannot drift between
commands.

* ``synthetic``: smooth random image patterns (:mod:`.mosaics`), no download;
* ``cifar10``: foreground airplane, automobile, bird (Section 2.4: "car, plane,
  bird"), the other seven classes background;
* ``cifar100``: foreground the 50 animal and people classes, the other 50
  background (the paper does not name them; Sec. 2.4 says only "CIFAR100 using
  large number of classes", so this split is this package's choice);
* ``synthetic-vectors`` and ``linear-orthogonal``: vector mosaics for the linear
  FCAM of the NumPy core (:mod:`.data`).
"""

from typing import NamedTuple, Optional, Sequence

from minimal_attn.data import Mosaics
from minimal_attn.errors import InputError


def paper_setting(dataset):
    """The paper's setting whose networks and rates a data set uses (V&R App. A.2;
    synthetic image mosaics and HateXplain take CIFAR-10's)."""
    return "cifar100" if dataset == "cifar100" else "cifar10"

#: Data sets of image mosaics (CNN FCAMs) and of vector mosaics (linear FCAM).
IMAGE_DATASETS = ("synthetic", "cifar10", "cifar100")
#: The CIFAR data sets (read from a folder; they take ``test_images``).
CIFAR_DATASETS = ("cifar10", "cifar100")
#: Where a CIFAR data set's test mosaics take their images: the held-out ``test`` split,
#: or the ``train`` split as the authors' released notebooks do.
TEST_IMAGES = ("test", "train")
VECTOR_DATASETS = ("synthetic-vectors", "linear-orthogonal")

#: CIFAR-100 foreground: the 50 animal and people classes (10 superclasses);
#: the other 50 (plants, objects, scenes, vehicles) are background.
CIFAR100_FOREGROUND = (
    "beaver", "dolphin", "otter", "seal", "whale", "aquarium_fish", "flatfish", "ray",
    "shark", "trout", "bee", "beetle", "butterfly", "caterpillar", "cockroach", "bear",
    "leopard", "lion", "tiger", "wolf", "camel", "cattle", "chimpanzee", "elephant",
    "kangaroo", "fox", "porcupine", "possum", "raccoon", "skunk", "crab", "lobster", "snail",
    "spider", "worm", "baby", "boy", "girl", "man", "woman", "crocodile", "dinosaur",
    "lizard", "snake", "turtle", "hamster", "mouse", "rabbit", "shrew", "squirrel")


class MosaicSplits(NamedTuple):
    """Train and test mosaics of one data set, with their classes."""

    train: Mosaics
    test: Mosaics
    n_classes: int                     # C, the number of foreground classes
    foreground: Optional[list]         # foreground class names (None for generated data)


def _split(full, n_train):
    """Train = the first ``n_train`` mosaics, test = the rest (one generator, shared classes)."""
    def cut(part):
        return Mosaics(full.X[part], full.y[part], full.z[part])

    return cut(slice(None, n_train)), cut(slice(n_train, None))


def default_foreground(dataset):
    """The paper's foreground class names for a CIFAR data set."""
    from minimal_attn.datasets.mosaics import CIFAR10_FOREGROUND

    return {"cifar10": CIFAR10_FOREGROUND, "cifar100": CIFAR100_FOREGROUND}[dataset]


def load_mosaic_splits(dataset, m, n_train, n_test, data_dir=None, n_classes=3,
                       foreground: Optional[Sequence[str]] = None, seed=0, test_images="test",
                       only_rows=None):
    """Train and test mosaics of ``dataset``; by default train and test never share a source
    image.

    Parameters
    ----------
    dataset : one of IMAGE_DATASETS or VECTOR_DATASETS
    m : segments per mosaic
    n_train, n_test : numbers of mosaics
    data_dir : folder holding ``cifar-10-batches-py`` / ``cifar-100-python``
        (CIFAR only)
    n_classes : C for generated data (CIFAR: the number of foreground classes)
    foreground : CIFAR foreground class names; None for the paper's
    seed : data seed (train uses ``2 seed``, test ``2 seed + 1``)
    test_images : CIFAR only: ``test`` draws the test mosaics from the held-out test
        images; ``train`` from the training images, as the authors' released notebooks do
        (their test mosaics are new mosaics of the images the training mosaics use: at
        10,000 mosaics each, about half of the test foregrounds were seen in training)
    only_rows : CIFAR only: ``only_rows(n)``, the slice of a set of n mosaics whose pixels
        are filled (:func:`~.mosaics.make_image_mosaics`); the others stay zero. None: all

    Returns
    -------
    MosaicSplits
    """
    from minimal_attn import data
    from minimal_attn.datasets import mosaics

    if dataset == "synthetic-vectors":
        full = data.gaussian_mosaics(n_train + n_test, m, n_classes, seed=seed)
        return MosaicSplits(*_split(full, n_train), n_classes, None)
    if dataset == "linear-orthogonal":
        full = data.linear_orthogonal(n_train + n_test, m, n_classes, seed=seed)
        return MosaicSplits(*_split(full, n_train), n_classes, None)
    if dataset == "synthetic":
        make = mosaics.synthetic_image_mosaics
        return MosaicSplits(make(n_train, m, n_classes, seed=2 * seed, pattern_seed=seed),
                            make(n_test, m, n_classes, seed=2 * seed + 1, pattern_seed=seed),
                            n_classes, None)
    if dataset not in CIFAR_DATASETS:
        raise InputError(f"unknown dataset {dataset!r}: use one of "
                         + ", ".join(IMAGE_DATASETS + VECTOR_DATASETS))
    from minimal_attn.datasets import cifar

    if data_dir is None:
        raise InputError(f"dataset {dataset} needs data_dir: the folder holding "
                         + ("cifar-10-batches-py" if dataset == "cifar10" else
                            "cifar-100-python"))
    splits = cifar.load_cifar10(data_dir) if dataset == "cifar10" else \
        cifar.load_cifar100(data_dir)
    if test_images not in TEST_IMAGES:
        raise InputError(f"test_images must be {' or '.join(TEST_IMAGES)}, got "
                         f"{test_images!r}",
                         param="test_images")
    x_test, y_test = (splits.x_train, splits.y_train) if test_images == "train" else \
        (splits.x_test, splits.y_test)
    # mosaics reuse images, but never more mosaics than the split has images
    for name, n, have, split in (("n_train", n_train, len(splits.y_train), "train"),
                                 ("n_test", n_test, len(y_test), test_images)):
        if n > have:
            raise InputError(f"{name}={n} mosaics but the {split} split of {data_dir} "
                             f"has only {have} images; lower {name} to at most {have}",
                             param=name)
    names = list(default_foreground(dataset) if foreground is None else foreground)
    fg, bg = mosaics.cifar10_classes(splits.class_names, names)
    rows = only_rows or (lambda n: None)
    train = mosaics.make_image_mosaics(splits.x_train, splits.y_train, fg, bg, m, n_train,
                                       seed=2 * seed, only_rows=rows(n_train))
    test = mosaics.make_image_mosaics(x_test, y_test, fg, bg, m, n_test, seed=2 * seed + 1,
                                      only_rows=rows(n_test))
    return MosaicSplits(train, test, len(fg), names)
