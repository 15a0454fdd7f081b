"""Token ids for the neural experiments (Snell et al. 2021, A.8): vocabularies and bad input."""

import gzip
import json

import numpy as np
import pytest

from minimal_attn.datasets.seq import load_text_task
from minimal_attn.errors import InputError


def _write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_tsv_classification_min_count_three(tmp_path):
    rows = ["text\tlabel"] + ["good movie\t1"] * 3 + ["bad movie\t0"] * 2 + ["rare\t0"]
    _write(tmp_path / "train.tsv", "\n".join(rows) + "\n")
    _write(tmp_path / "dev.tsv", "good bad rare\t1\n")
    t = load_text_task("classify", "tsv", tmp_path)
    assert t.itos[0] == "<unk>" and set(t.itos) == {"<unk>", "good", "movie"}  # bad: 2 times
    assert t.val_src[0].tolist() == [t.itos.index("good"), 0, 0]
    assert [int(v[0]) for v in t.train_tgt] == [1, 1, 1, 0, 0, 0]
    assert t.pad_id == len(t.itos) and t.n_out == 2


@pytest.mark.parametrize("content,encoding", [("a b\t2\n", "utf-8"), ("a\n", "utf-8"),
                                              ("caf\u00e9\t1\n", "latin-1"), ("\n", "utf-8")])
def test_bad_tsv_is_an_input_error(tmp_path, content, encoding):
    _write(tmp_path / "train.tsv", content, encoding)
    _write(tmp_path / "dev.tsv", "a\t1\n")
    with pytest.raises(InputError):
        load_text_task("classify", "tsv", tmp_path)


def test_hatexplain_jsonl_binary(tmp_path):
    rows = [{"post_id": "a", "tokens": ["You", "idiot"], "label": "toxic", "orig_split": "train"},
            {"post_id": "b", "tokens": ["hello"], "label": "non-toxic", "orig_split": "val"},
            {"post_id": "c", "tokens": ["bye"], "label": "toxic", "orig_split": "test"}]
    _write(tmp_path / "hatexplain_binary.jsonl", "\n".join(map(json.dumps, rows)))
    t = load_text_task("classify", "hatexplain", tmp_path)
    assert [int(v[0]) for v in t.train_tgt] == [1] and [int(v[0]) for v in t.val_tgt] == [0]
    # the official split file beside it wins over orig_split, as for V&R's reader
    _write(tmp_path / "post_id_divisions.json",
           json.dumps({"train": ["a", "c"], "val": ["b"], "test": []}))
    t = load_text_task("classify", "hatexplain", tmp_path)
    assert [int(v[0]) for v in t.train_tgt] == [1, 1] and len(t.val_tgt) == 1


def test_sst2_in_glues_layout_evaluates_on_the_labelled_dev_file(tmp_path):
    _write(tmp_path / "train.tsv", "sentence\tlabel\n" + "good film\t1\nbad film\t0\n" * 3)
    _write(tmp_path / "dev.tsv", "sentence\tlabel\ngood\t1\nbad\t0\nfilm\t0\n")
    _write(tmp_path / "test.tsv", "index\tsentence\n0\tgood\n")          # GLUE: no labels
    t = load_text_task("classify", "sst2", tmp_path)
    assert [int(v[0]) for v in t.val_tgt] == [1, 0, 0]
    (tmp_path / "dev.tsv").unlink()
    with pytest.raises(InputError, match="no labels.*dev.tsv"):
        load_text_task("classify", "sst2", tmp_path)


def test_hatexplain_original_dataset_json_is_binary_toxic(tmp_path):
    def post(label, tokens):
        return {"post_id": tokens[0], "post_tokens": tokens, "rationales": [],
                "annotators": [{"label": label, "annotator_id": k, "target": []}
                               for k in range(3)]}
    posts = [post("hatespeech", ["a", "b"]), post("normal", ["c"]),
             post("offensive", ["d", "e"]), post("normal", ["f"])]
    _write(tmp_path / "dataset.json", json.dumps({p["post_id"]: p for p in posts}))
    _write(tmp_path / "post_id_divisions.json",
           json.dumps({"train": ["a", "c", "d"], "val": ["f"], "test": []}))
    t = load_text_task("classify", "hatexplain", tmp_path)
    assert [int(v[0]) for v in t.train_tgt] == [1, 0, 1]         # toxic: hate or offensive
    assert [int(v[0]) for v in t.val_tgt] == [0] and t.n_out == 2


def test_gzipped_files_and_byte_order_marks_read_as_plain_text(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(), packed.mkdir()
    for split in ("train", "val"):
        for lang, text in (("en", "a b c\nb c\n" * 20), ("de", "x y\ny z w\n" * 20)):
            _write(plain / f"{split}.{lang}", text)
            # the release's layout: gzipped, and here a byte-order mark inside as well
            (packed / f"{split}.{lang}.gz").write_bytes(gzip.compress(
                text.encode("utf-8-sig")))
    a, b = (load_text_task("translate", "multi30k", d, tokenizer="word") for d in (plain, packed))
    assert a.itos == b.itos and "\ufeff" not in "".join(b.itos)
    assert all(np.array_equal(x, y) for x, y in zip(a.train_src + a.val_tgt,
                                                   b.train_src + b.val_tgt))
    _write(tmp_path / "train.tsv", "good film\t1\nbad film\t0\n" * 3, "utf-8-sig")  # no header
    _write(tmp_path / "dev.tsv", "good\t1\n")
    t = load_text_task("classify", "tsv", tmp_path)
    assert t.itos[t.train_src[0][0]] == "good" and len(t.train_src) == 6
    whole = gzip.compress(" ".join(map(str, range(3000))).encode())
    (packed / "train.en.gz").write_bytes(whole[:len(whole) // 2])                # cut short
    with pytest.raises(InputError, match="damaged gzip"):
        load_text_task("translate", "multi30k", packed, tokenizer="word")


def test_parallel_word_level_and_sentencepiece(tmp_path):
    for split in ("train", "val"):
        _write(tmp_path / f"{split}.src", "a b c\nb c\n" * 20)
        _write(tmp_path / f"{split}.tgt", "x y\ny z w\n" * 20)
    w = load_text_task("translate", "parallel", tmp_path, tokenizer="word")
    assert w.itos[:3] == ["<unk>", "<s>", "</s>"]
    assert all(t[-1] == 2 for t in w.train_tgt)                        # targets end with </s>
    assert w.decode(w.val_tgt[0][:-1]) == "x y"
    s = load_text_task("translate", "parallel", tmp_path, vocab_size=30)
    assert s.info["tokenizer"] == "sentencepiece" and s.val_references()[0] == "x y"
    assert np.all(np.concatenate(s.train_src) < s.n_vocab)


def test_mismatched_parallel_and_wrong_task(tmp_path):
    _write(tmp_path / "train.src", "a\nb\n")
    _write(tmp_path / "train.tgt", "a\n")
    with pytest.raises(InputError, match="line-aligned"):
        load_text_task("translate", "parallel", tmp_path)
    with pytest.raises(InputError, match="--task translate"):
        load_text_task("classify", "multi30k", tmp_path)


def test_max_len_filters_training_pairs_only(tmp_path):
    rows = ["a b c d e\t1", "a b\t0", "b c d\t1", "c\t0"] * 3
    _write(tmp_path / "train.tsv", "\n".join(rows) + "\n")
    _write(tmp_path / "dev.tsv", "a b c d e\t1\nc\t0\n")
    full = load_text_task("classify", "tsv", tmp_path)
    short = load_text_task("classify", "tsv", tmp_path, max_len=3)
    assert [len(s) for s in short.train_src] == [2, 3, 1] * 3          # the 5-word rows gone
    assert [int(t[0]) for t in short.train_tgt] == [0, 1, 0] * 3
    assert short.info["n_train_dropped"] == 3 and short.info["n_train"] == 9
    assert [s.tolist() for s in short.val_src] == [s.tolist() for s in full.val_src]
    with pytest.raises(InputError, match="max_len"):
        load_text_task("classify", "tsv", tmp_path, max_len=0)


def test_max_len_counts_pieces_and_end_of_sentence(tmp_path):
    _write(tmp_path / "train.src", "a b c\nb\n" * 10)
    _write(tmp_path / "train.tgt", "x y\nx y z w\n" * 10)
    for split in ("val",):
        _write(tmp_path / f"{split}.src", "a\n")
        _write(tmp_path / f"{split}.tgt", "x\n")
    t = load_text_task("translate", "parallel", tmp_path, tokenizer="word", max_len=3)
    assert len(t.train_src) == 10 and all(len(s) == 3 for s in t.train_src)   # x y </s>
    with pytest.raises(InputError, match="raise"):
        load_text_task("translate", "parallel", tmp_path, tokenizer="word", max_len=2)
