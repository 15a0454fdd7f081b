"""HateXplain reader, vocabulary, a_{z*} and SAIF over rationale posts (V&R Section 5)."""

import json

import numpy as np
import pytest

from minimal_attn.datasets import hatexplain
from minimal_attn.errors import InputError


def _annotators(*labels):
    return [{"label": lab, "annotator_id": k, "target": ["None"]} for k, lab in enumerate(labels)]


ORIGINAL = {
    # majority hatespeech; rationale marks [2, 1, 0, 2] of 3 lists -> [1, 0, 0, 1]
    "p1": {"post_id": "p1", "annotators": _annotators("hatespeech", "hatespeech", "offensive"),
           "rationales": [[1, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1]],
           "post_tokens": ["you", "are", "a", "pest"]},
    # majority normal: the offensive annotator's rationale does not make a foreground
    "p2": {"post_id": "p2", "annotators": _annotators("normal", "offensive", "normal"),
           "rationales": [[0, 1, 0]], "post_tokens": ["nice", "day", "you"]},
    # all three disagree: dropped
    "p3": {"post_id": "p3", "annotators": _annotators("hatespeech", "offensive", "normal"),
           "rationales": [[1, 0], [0, 1]], "post_tokens": ["odd", "post"]},
    # offensive; two lists disagree everywhere, 1 of 2 is no strict majority -> no rationale
    "p4": {"post_id": "p4", "annotators": _annotators("offensive", "offensive", "offensive"),
           "rationales": [[1, 0], [0, 1]], "post_tokens": ["you", "pest"]},
    "p5": {"post_id": "p5", "annotators": _annotators("normal", "normal", "normal"),
           "rationales": [], "post_tokens": ["not", "in", "a", "split"]},
}
DIVISIONS = {"train": ["p1", "p2"], "val": ["p4"], "test": ["p3"]}


def _write(folder, name, obj):
    path = folder / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(o) + "\n" for o in obj))
    else:
        path.write_text(json.dumps(obj))
    return path


def test_original_layout_majority_labels_rationales_and_split(tmp_path):
    _write(tmp_path, "dataset.json", ORIGINAL)
    _write(tmp_path, "post_id_divisions.json", DIVISIONS)
    data = hatexplain.read_hatexplain(tmp_path)
    assert data.layout == "original"
    train, val, test = (data.splits[s] for s in ("train", "val", "test"))
    assert train.post_ids == ["p1", "p2"]
    assert train.classes == ("hatespeech", "offensive", "normal")
    assert train.y.tolist() == [0, 2]
    assert train.rationale[0].tolist() == [1, 0, 0, 1]
    assert train.rationale[1].tolist() == [0, 0, 0]
    assert val.post_ids == ["p4"] and val.y.tolist() == [1]
    assert val.rationale[0].tolist() == [0, 0]
    assert test.post_ids == []                           # p3 had no majority
    assert data.dropped == {"no majority label": 1, "not in a split": 1}


def _binary_rows():
    return [{"post_id": "a", "tokens": ["go", "away", "pest"], "label": "toxic",
             "rationale": [0, 0, 1], "orig_split": "train"},
            {"post_id": "b", "tokens": ["hello", "there"], "label": "non-toxic",
             "rationale": [0, 0], "orig_split": "train"},
            {"post_id": "c", "tokens": ["pest"], "label": "toxic", "rationale": [1],
             "orig_split": "test"}]


def test_binary_jsonl_split_by_divisions_file_else_orig_split(tmp_path):
    _write(tmp_path, "hatexplain_binary.jsonl", _binary_rows())
    data = hatexplain.read_hatexplain(tmp_path / "hatexplain_binary.jsonl")
    assert data.layout == "binary"
    assert data.splits["train"].post_ids == ["a", "b"]
    assert data.splits["train"].y.tolist() == [1, 0]                   # non-toxic 0, toxic 1
    assert data.splits["test"].rationale[0].tolist() == [1]
    _write(tmp_path, "post_id_divisions.json", {"train": ["c", "b"], "val": [], "test": ["a"]})
    data = hatexplain.read_hatexplain(tmp_path)
    assert data.splits["train"].post_ids == ["b", "c"]                 # file order kept
    assert data.splits["test"].post_ids == ["a"]


def test_encode_builds_vocab_on_train_pads_and_masks(tmp_path):
    _write(tmp_path, "hatexplain_binary.jsonl", _binary_rows())
    data = hatexplain.read_hatexplain(tmp_path)
    vocab, enc = hatexplain.encode_splits(data, min_count=1)
    # train words only: go, away, pest, hello, there (+ <pad>, <unk>)
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and len(vocab) == 7
    train = enc["train"]
    assert train.ids.shape == (2, 3)
    assert train.mask.tolist() == [[True, True, True], [True, True, False]]
    assert train.ids[1, 2] == 0                                         # padding id
    assert train.rationale.tolist() == [[False, False, True], [False, False, False]]
    assert vocab.decode(enc["test"].ids[0]) == ["pest"]
    with pytest.raises(InputError, match="every word would be <unk>"):  # every word seen once
        hatexplain.encode_splits(data, min_count=2)


def test_foreground_focus_is_the_sum_over_rationale_tokens():
    a = np.array([[0.5, 0.3, 0.2, 0.0],
                  [0.1, 0.1, 0.1, 0.7],
                  [0.25, 0.25, 0.25, 0.25]])
    rationale = np.array([[1, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    np.testing.assert_allclose(hatexplain.foreground_focus(a, rationale), [0.7, 0.7, 0.0])


def test_summarise_posts_leaves_posts_without_rationale_out_of_saif():
    a = np.array([[0.9, 0.1, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
    rationale = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
    s = np.array([[0.05, 0.95], [0.1, 0.9], [0.1, 0.9], [0.9, 0.1]])
    y = np.array([1, 1, 1, 0])
    summary, inst = hatexplain.summarise_posts(a, s, y, rationale, threshold=0.8)
    # a_z* = 0.9, 0.5, 0.5; s_y = 0.95, 0.9, 0.9 -> only post 0 is focus-true and
    # prediction-true; post 3 (no rationale) counts for accuracy only
    assert summary["n_posts"] == 4 and summary["n"] == 3 and summary["n_without_rationale"] == 1
    assert summary["accuracy"] == 1.0
    assert summary["saif"] == pytest.approx(1 / 3)
    assert summary["ffpt"] == pytest.approx(2 / 3)
    assert inst["has_rationale"].tolist() == [True, True, True, False]


@pytest.mark.parametrize("row,message", [
    ({"post_id": "x", "tokens": ["a", "b"], "label": "toxic", "rationale": [1]},
     "rationale has 1 entries but the post has 2 tokens"),
    ({"post_id": "x", "tokens": ["a"], "label": "hateful", "rationale": [1]},
     "unknown label 'hateful'"),
    ({"post_id": "x", "tokens": ["a"], "label": "toxic", "rationale": [2]}, "0 or 1"),
])
def test_bad_jsonl_rows_raise_one_line(tmp_path, row, message):
    _write(tmp_path, "hatexplain_binary.jsonl", _binary_rows() + [row])
    with pytest.raises(InputError, match=message) as info:
        hatexplain.read_hatexplain(tmp_path)
    assert "line 4" in str(info.value) and "\n" not in str(info.value)


def test_bad_files_raise(tmp_path):
    with pytest.raises(InputError, match="holds neither"):
        hatexplain.read_hatexplain(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        hatexplain.read_hatexplain(tmp_path / "missing.jsonl")
    (tmp_path / "hatexplain_binary.jsonl").write_text('{"post_id": "a", "tokens": [\n')
    with pytest.raises(InputError, match="line 1 is not valid JSON"):
        hatexplain.read_hatexplain(tmp_path)
    bad = dict(ORIGINAL)
    bad["p1"] = dict(ORIGINAL["p1"], rationales=[[1, 0]])
    _write(tmp_path, "dataset.json", bad)
    _write(tmp_path, "post_id_divisions.json", DIVISIONS)
    with pytest.raises(InputError, match="post p1: rationale has 2 entries"):
        hatexplain.read_hatexplain(tmp_path / "dataset.json")


@pytest.mark.parametrize("tokens,message", [(None, "tokens must be a non-empty list"),
                                            ([], "tokens must be a non-empty list"),
                                            ("a post", "tokens must be a non-empty list")])
def test_original_tokens_are_checked_in_posts_without_rationales(tmp_path, tokens, message):
    # p5 (normal, rationales []) is checked as the posts with rationale lists are
    _write(tmp_path, "dataset.json", dict(ORIGINAL, p5=dict(ORIGINAL["p5"], post_tokens=tokens)))
    _write(tmp_path, "post_id_divisions.json", DIVISIONS)
    with pytest.raises(InputError, match=f"post p5: {message}"):
        hatexplain.read_hatexplain(tmp_path)


def test_a_byte_order_mark_is_dropped(tmp_path):
    rows = "".join(json.dumps(o) + "\n" for o in _binary_rows())
    (tmp_path / "hatexplain_binary.jsonl").write_bytes(rows.encode("utf-8-sig"))
    (tmp_path / "post_id_divisions.json").write_bytes(
        json.dumps({"train": ["a", "b"], "val": [], "test": ["c"]}).encode("utf-8-sig"))
    data = hatexplain.read_hatexplain(tmp_path)
    assert data.splits["train"].post_ids == ["a", "b"] and data.splits["test"].y.tolist() == [1]


def test_shared_binary_copy(shared_data):
    data = hatexplain.read_hatexplain(shared_data / "hatexplain")
    sizes = {s: len(p.y) for s, p in data.splits.items()}
    assert sizes == {"train": 5514, "val": 1922, "test": 1924}          # data/README.md
    for posts in data.splits.values():
        toxic = posts.y == 1
        has = np.array([r.any() for r in posts.rationale])
        assert np.array_equal(has, toxic)      # README: non-empty for every toxic post
