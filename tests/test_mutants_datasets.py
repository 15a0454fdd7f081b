"""Mutation audit of the data readers (datasets.text, .hatexplain, .hatexplain_encode,
.cifar): refusals no test reached (dropping the raise crashed later, or read bad data
on) and defaults no test pinned. Each file is written here, small, by hand; the expected
refusal is the reader's documented one-line InputError."""

import json
import pickle

import numpy as np
import pytest

from minimal_attn.datasets.cifar import load_cifar10
from minimal_attn.datasets.hatexplain import (
    CLASSES,
    HateXplain,
    Posts,
    encode_splits,
    foreground_focus,
    read_hatexplain,
    summarise_posts,
)
from minimal_attn.datasets.text import Vocab, read_multi30k, read_text
from minimal_attn.errors import InputError

SPLIT = {"train": ["p1"], "val": [], "test": []}


# ------------------------------------------------------------------ text
def test_a_vocabulary_with_a_word_twice_is_refused():
    with pytest.raises(ValueError, match="vocabulary words must be distinct"):
        Vocab(["<unk>", "a", "b", "a"])


def test_a_path_that_cannot_be_read_as_text_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"cannot read file .*check its permissions"):
        read_text(str(tmp_path))                         # a folder: open() fails


def test_a_missing_multi30k_folder_is_named(tmp_path):
    with pytest.raises(InputError, match=r"Multi30k folder .*gone does not exist"):
        read_multi30k(tmp_path / "gone")


# ------------------------------------------------------------------ HateXplain files
def _jsonl(tmp_path, rows):
    path = tmp_path / "hatexplain_binary.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _original(tmp_path, data, divisions=SPLIT):
    path = tmp_path / "dataset.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    if divisions is not None:
        (tmp_path / "post_id_divisions.json").write_text(
            divisions if isinstance(divisions, str) else json.dumps(divisions))
    return path


def _post(*labels, tokens=("a", "b")):
    return {"post_id": "p1", "post_tokens": list(tokens),
            "annotators": [{"label": x} for x in labels], "rationales": []}


def test_a_jsonl_row_without_its_keys_is_refused(tmp_path):
    path = _jsonl(tmp_path, [{"post_id": "p1", "label": "toxic", "orig_split": "train"}])
    with pytest.raises(InputError, match="line 1 needs the keys post_id, tokens and label"):
        read_hatexplain(path)


def test_a_jsonl_of_blank_lines_is_empty(tmp_path):
    path = _jsonl(tmp_path, ["", "   "])
    with pytest.raises(InputError, match="is empty; give the JSONL with one post a line"):
        read_hatexplain(path)


def test_no_training_post_is_refused(tmp_path):
    path = _jsonl(tmp_path, [{"post_id": "p1", "tokens": ["a"], "label": "toxic",
                              "orig_split": "test"}])
    with pytest.raises(InputError, match="no post of .* is marked orig_split train"):
        read_hatexplain(path)


@pytest.mark.parametrize("data, divisions, match", [
    ("{not json", SPLIT, r"dataset\.json is not valid JSON \(line 1"),
    ([1, 2], SPLIT, "must map post ids to posts"),
    ({"p1": {"post_tokens": ["a"]}}, SPLIT, "post p1 needs the keys annotators"),
    ({"p1": _post("normal", "normal", "normal")}, {"train": ["p1"]},
     "must have the keys train, val, test"),
    ({"p1": _post("normal", "normal", "normal")}, None, "needs post_id_divisions.json"),
])
def test_a_malformed_original_file_is_refused(tmp_path, data, divisions, match):
    with pytest.raises(InputError, match=match):
        read_hatexplain(_original(tmp_path, data, divisions))


def test_a_tie_between_annotators_is_no_majority_label(tmp_path):
    """The label is the annotators' majority: a 1-1 (or 2-2) tie has none, and the post is
    dropped and counted, as a 1-1-1 split is."""
    data = {"p1": _post("normal", "normal", "hatespeech"),
            "p2": _post("normal", "offensive"),
            "p3": _post("hatespeech", "hatespeech", "normal", "normal"),
            "p4": _post("normal", "offensive", "hatespeech")}
    out = read_hatexplain(_original(tmp_path, data,
                                    {"train": ["p1", "p2", "p3", "p4"], "val": [], "test": []}))
    assert out.splits["train"].post_ids == ["p1"]
    assert out.splits["train"].y.tolist() == [CLASSES["original"].index("normal")]
    assert out.dropped["no majority label"] == 3


# ------------------------------------------------------------------ encoding, summaries
def _posts(tokens, rationale=None):
    rationale = rationale or [np.zeros(len(t), dtype=np.int8) for t in tokens]
    return Posts([f"p{k}" for k in range(len(tokens))], tokens,
                 np.zeros(len(tokens), dtype=np.int64), rationale, CLASSES["binary"])


def test_encode_splits_keeps_words_seen_twice_by_default():
    """min_count = 2: a word seen twice in training keeps its id, a word seen once is <unk>."""
    train = _posts([["seen", "once"], ["seen", "twice"], ["twice"]])
    data = HateXplain({"train": train, "val": _posts([["once"]]), "test": _posts([["x"]])},
                      "binary")
    vocab, enc = encode_splits(data)
    assert vocab.itos == ["<pad>", "<unk>", "seen", "twice"]
    assert enc["val"].ids.tolist() == [[vocab.stoi["<unk>"]]]


def test_summarise_posts_counts_focus_and_prediction_above_0_8_by_default():
    # post 0: a_z = 0.85 and s_y = 0.85, both above 0.8; post 1: a_z = 0.5 (focus false)
    a = np.array([[0.85, 0.15], [0.5, 0.5]])
    rationale = np.array([[1, 0], [1, 0]])
    s = np.array([[0.85, 0.15], [0.9, 0.1]])
    out, _ = summarise_posts(a, s, np.array([0, 0]), rationale)
    assert out["threshold"] == 0.8 and out["saif"] == 0.5
    assert (out["ftpt"], out["ffpt"]) == (0.5, 0.5)


def test_foreground_focus_refuses_a_rationale_of_another_shape():
    """(1, L) would broadcast over every post, giving each the first post's rationale."""
    with pytest.raises(InputError, match="must match"):
        foreground_focus(np.full((2, 3), 1 / 3), np.ones((1, 3)))


# ------------------------------------------------------------------ CIFAR
NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
         "truck"]


def _cifar(tmp_path, data=None, labels=None, names=None, drop=()):
    """A tiny official-layout CIFAR-10 folder: 2 images a batch, ``data``/``labels`` of
    test_batch replaced when given."""
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    rows = np.arange(2 * 3072).reshape(2, 3072) % 256
    for name in [f"data_batch_{b}" for b in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rows.astype(np.uint8), b"labels": [0, 1]}
        if name == "test_batch":
            batch = {b"data": batch[b"data"] if data is None else data,
                     b"labels": batch[b"labels"] if labels is None else labels}
        if name not in drop:
            with open(root / name, "wb") as f:
                pickle.dump(batch, f)
    with open(root / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": NAMES if names is None else names}, f)
    return tmp_path


def test_whole_number_pixels_of_another_dtype_are_read_as_uint8(tmp_path):
    rows = (np.arange(2 * 3072).reshape(2, 3072) % 256).astype(np.int64)
    x_test = load_cifar10(_cifar(tmp_path, data=rows)).x_test
    assert x_test.dtype == np.uint8 and x_test.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(x_test.reshape(2, 3072), rows)


@pytest.mark.parametrize("data", [np.full((2, 3072), 256, dtype=np.int64),
                                  np.full((2, 3072), -1, dtype=np.int64),
                                  np.full((2, 3072), 0.5)])
def test_pixels_outside_0_255_or_not_whole_are_refused(tmp_path, data):
    with pytest.raises(InputError, match="expected uint8 pixel values 0..255"):
        load_cifar10(_cifar(tmp_path, data=data))


def test_labels_that_are_not_integers_are_refused(tmp_path):
    with pytest.raises(InputError, match="'labels' must be a list of integers"):
        load_cifar10(_cifar(tmp_path, labels=["cat", "dog"]))


def test_class_names_that_are_not_a_list_are_refused(tmp_path):
    with pytest.raises(InputError, match="'label_names' must be a list of class names"):
        load_cifar10(_cifar(tmp_path, names=5))


def test_a_missing_batch_is_named(tmp_path):
    with pytest.raises(InputError, match=r"missing file .*data_batch_3"):
        load_cifar10(_cifar(tmp_path, drop=("data_batch_3",)))
