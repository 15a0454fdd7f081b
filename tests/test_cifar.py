"""CIFAR-10 / CIFAR-100 readers (Section 5 image mosaics): layout, decoding, errors."""

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from minimal_attn.datasets.cifar import CifarSplits, load_cifar10, load_cifar100
from minimal_attn.errors import InputError

CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck"]


def _dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def _rows(labels, offset):
    """Rows whose pixels encode (image number, channel): red = k, green = 100 + k, ..."""
    n = len(labels)
    rows = np.empty((n, 3072), dtype=np.uint8)
    for k in range(n):
        rows[k, :1024] = offset + k            # red plane
        rows[k, 1024:2048] = 100 + offset + k  # green plane
        rows[k, 2048:] = 200 + k % 50          # blue plane
        rows[k, 5] = 255                       # pixel (0, 5) of the red plane
    return rows


def write_tiny_cifar(folder, kind="cifar10", n_per_split=4, bytes_keys=True):
    """Write a tiny official-layout CIFAR archive under ``folder``; return its path."""
    key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    if kind == "cifar10":
        root = Path(folder) / "cifar-10-batches-py"
        root.mkdir(parents=True)
        for b in range(1, 6):
            labels = [(b + i) % 10 for i in range(n_per_split)]
            _dump(root / f"data_batch_{b}", {key("data"): _rows(labels, 10 * b),
                                            key("labels"): labels,
                                            key("batch_label"): key(f"batch {b}")})
        labels = [i % 10 for i in range(n_per_split)]
        _dump(root / "test_batch", {key("data"): _rows(labels, 0), key("labels"): labels})
        _dump(root / "batches.meta", {key("label_names"): [key(n) for n in CIFAR10_NAMES]})
        return root
    root = Path(folder) / "cifar-100-python"
    root.mkdir(parents=True)
    for split, offset in (("train", 0), ("test", 60)):
        fine = [(7 * i + offset) % 100 for i in range(n_per_split)]
        _dump(root / split, {key("data"): _rows(fine, offset), key("fine_labels"): fine,
                             key("coarse_labels"): [f // 5 for f in fine]})
    _dump(root / "meta", {key("fine_label_names"): [key(f"fine{i}") for i in range(100)],
                          key("coarse_label_names"): [key(f"coarse{i}") for i in range(20)]})
    return root


# ---------------------------------------------------------------- real subset

def test_real_cifar10_subset(shared_dataset):
    real_cifar10 = shared_dataset("cifar10", "cifar-10-batches-py")
    d = load_cifar10(real_cifar10.parent)          # the parent folder is accepted too
    assert isinstance(d, CifarSplits)
    assert d.x_train.shape == (10000, 3, 32, 32) and d.x_train.dtype == np.uint8
    assert d.x_test.shape == (5000, 3, 32, 32) and d.x_test.dtype == np.uint8
    assert d.y_train.dtype == np.int64 and d.y_test.dtype == np.int64
    assert d.class_names == CIFAR10_NAMES
    assert np.bincount(d.y_train).tolist() == [1000] * 10
    assert np.bincount(d.y_test).tolist() == [500] * 10
    # channel layout: the raw row is R plane, G plane, B plane, each row-major
    with open(real_cifar10 / "data_batch_2", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    row, label = raw[b"data"][7], raw[b"labels"][7]
    img = d.x_train[2000 + 7]                      # batch 2 starts after 2,000 images
    assert d.y_train[2007] == label
    assert img[0, 0, 0] == row[0] and img[1, 0, 0] == row[1024] and img[2, 0, 0] == row[2048]
    assert img[0, 1, 3] == row[32 + 3] and img[2, 31, 31] == row[3071]
    np.testing.assert_array_equal(img.reshape(-1), row)


# ---------------------------------------------------------------- tiny files

@pytest.mark.parametrize("bytes_keys", [True, False])
def test_tiny_cifar10_decodes_known_pixels(tmp_path, bytes_keys):
    root = write_tiny_cifar(tmp_path, "cifar10", n_per_split=4, bytes_keys=bytes_keys)
    for folder in (root, tmp_path):                # the folder itself or its parent
        d = load_cifar10(folder)
        assert d.x_train.shape == (20, 3, 32, 32) and d.x_test.shape == (4, 3, 32, 32)
        assert d.class_names == CIFAR10_NAMES
        # training image 4*(b-1)+k comes from batch b, image k: red = 10b + k
        b, k = 3, 2
        img = d.x_train[4 * (b - 1) + k]
        assert img[0, 0, 0] == 10 * b + k and img[0, 31, 31] == 10 * b + k
        assert np.all(img[1] == 100 + 10 * b + k) and np.all(img[2] == 200 + k)
        assert img[0, 0, 5] == 255 and img[0, 5, 0] == 10 * b + k   # row-major, not column
        assert d.y_train.tolist()[4 * (b - 1):4 * b] == [(b + i) % 10 for i in range(4)]
        assert d.y_test.tolist() == [0, 1, 2, 3] and d.x_test[3, 0, 0, 0] == 3


@pytest.mark.parametrize("label, n_names", [("fine", 100), ("coarse", 20)])
def test_tiny_cifar100(tmp_path, label, n_names):
    write_tiny_cifar(tmp_path, "cifar100", n_per_split=5)
    d = load_cifar100(tmp_path, label=label)
    fine_train = [(7 * i) % 100 for i in range(5)]
    fine_test = [(7 * i + 60) % 100 for i in range(5)]
    expect = (fine_train, fine_test) if label == "fine" else (
        [f // 5 for f in fine_train], [f // 5 for f in fine_test])
    assert d.y_train.tolist() == expect[0] and d.y_test.tolist() == expect[1]
    assert len(d.class_names) == n_names and d.class_names[1] == f"{label}1"
    assert d.x_train.shape == (5, 3, 32, 32) and d.x_train.dtype == np.uint8
    assert d.x_test[2, 1, 4, 4] == 100 + 60 + 2


def test_cifar100_rejects_bad_label(tmp_path):
    write_tiny_cifar(tmp_path, "cifar100")
    with pytest.raises(InputError, match="fine.*coarse"):
        load_cifar100(tmp_path, label="medium")


# ---------------------------------------------------------------- errors

def test_missing_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist.*--data-dir"):
        load_cifar10(tmp_path / "nowhere")


def test_folder_without_cifar_files(tmp_path):
    with pytest.raises(InputError, match="data_batch_1..5"):
        load_cifar10(tmp_path)
    with pytest.raises(InputError, match="cifar-100-python"):
        load_cifar100(tmp_path)
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"")      # the download, not unpacked
    with pytest.raises(InputError, match="only the archive cifar-10-python.tar.gz: unpack"):
        load_cifar10(tmp_path)


def test_missing_file_is_named(tmp_path):
    root = write_tiny_cifar(tmp_path, "cifar10")
    os.remove(root / "data_batch_4")
    with pytest.raises(InputError, match="data_batch_4"):
        load_cifar10(tmp_path)


def _corrupt(root, name, obj=None, raw=None):
    path = root / name
    if raw is not None:
        path.write_bytes(raw)
    else:
        _dump(path, obj)


@pytest.mark.parametrize("name, obj, raw, message", [
    ("data_batch_2", None, b"not a pickle at all", "malformed pickle .*data_batch_2"),
    ("test_batch", None, b"", "malformed pickle .*test_batch"),
    ("data_batch_1", [1, 2, 3], None, "data_batch_1.*expected a dict"),
    ("data_batch_3", {b"data": np.zeros((2, 3072), np.uint8)}, None,
     "data_batch_3.*'labels'"),
    ("data_batch_5", {b"data": np.zeros((2, 1024), np.uint8), b"labels": [0, 1]}, None,
     r"data_batch_5.*\(N, 3072\)"),
    ("test_batch", {b"data": np.zeros((3, 3072), np.uint8), b"labels": [0, 1]}, None,
     "test_batch.*2 labels for 3 images"),
    ("test_batch", {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, None,
     r"test_batch.*0\.\.9"),
    ("batches.meta", {b"names": []}, None, "batches.meta.*'label_names'"),
])
def test_malformed_cifar10(tmp_path, name, obj, raw, message):
    root = write_tiny_cifar(tmp_path, "cifar10")
    _corrupt(root, name, obj, raw)
    with pytest.raises(InputError, match=message):
        load_cifar10(root)


def test_malformed_cifar100(tmp_path):
    root = write_tiny_cifar(tmp_path, "cifar100")
    _corrupt(root, "train", {b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [0, 1]})
    load_cifar100(root, label="fine")              # fine labels are enough for "fine"
    with pytest.raises(InputError, match="train.*'coarse_labels'"):
        load_cifar100(root, label="coarse")


# ---------------------------------------------------------------- where test mosaics look

@pytest.mark.parametrize("test_images", ["test", "train"])
def test_test_mosaics_take_their_images_from_the_split_asked(tmp_path, test_images):
    """Every image of the tiny archive is known by its green plane (100 + 10 b + k for
    training image k of batch b, 100 + k for test image k): held-out test mosaics use test
    images only; the authors' (test_images="train") training images only. Training
    mosaics use training images either way."""
    from minimal_attn.datasets.splits import load_mosaic_splits

    write_tiny_cifar(tmp_path, "cifar10", n_per_split=10)
    splits = load_mosaic_splits("cifar10", 3, 20, 10, data_dir=tmp_path,
                                test_images=test_images)
    green = {name: s.X[:, :, 1, 0, 0].astype(int) for name, s in
             (("train", splits.train), ("test", splits.test))}
    assert green["train"].min() >= 110
    if test_images == "test":
        assert green["test"].max() < 110
    else:
        assert green["test"].min() >= 110
    with pytest.raises(InputError, match="n_test=11 mosaics but the test split"):
        load_mosaic_splits("cifar10", 3, 20, 11, data_dir=tmp_path)


class _Plants:
    """A pickle that calls a function when loaded (here a harmless one that leaves a mark)."""

    def __init__(self, mark):
        self.mark = mark

    def __reduce__(self):
        return (open, (self.mark, "w"))


def test_a_pickle_that_would_run_code_is_refused_before_it_runs(tmp_path):
    root = write_tiny_cifar(tmp_path, "cifar10")
    mark = tmp_path / "ran"
    (root / "data_batch_1").write_bytes(pickle.dumps({b"data": _Plants(str(mark))}))
    with pytest.raises(InputError, match="malformed pickle .*data_batch_1"):
        load_cifar10(root)
    assert not mark.exists()


def test_python3_protocol_2_resave_reads_as_the_original(tmp_path):
    """Python 3 pickles bytes at protocol 2 through ``_codecs.encode`` (data, not code): a
    batch re-saved that way reads the same images and labels as the original."""
    root = write_tiny_cifar(tmp_path / "a")
    copy = tmp_path / "b" / "cifar-10-batches-py"
    copy.mkdir(parents=True)
    for name in os.listdir(root):
        with open(root / name, "rb") as f:
            obj = pickle.load(f, encoding="bytes")
        with open(copy / name, "wb") as f:
            pickle.dump(obj, f, protocol=2)
    assert b"_codecs" in (copy / "data_batch_1").read_bytes()          # the case at hand
    a, b = load_cifar10(tmp_path / "a"), load_cifar10(tmp_path / "b")
    for field in ("x_train", "y_train", "x_test", "y_test", "class_names"):
        assert np.array_equal(getattr(a, field), getattr(b, field))


def test_a_damaged_batch_names_the_damage_not_the_folder(tmp_path):
    root = write_tiny_cifar(tmp_path)
    (root / "data_batch_3").write_bytes((root / "data_batch_3").read_bytes()[:100])
    with pytest.raises(InputError, match="damaged or not a CIFAR batch: download") as err:
        load_cifar10(tmp_path)
    assert "data_batch_3" in str(err.value)
