"""The data formats of docs/paper2_neural.md and docs/hatexplain.md, held to their word.

Each test builds a tiny folder the way a user would (a BYOD audit case) and checks that it
reads as documented, or is refused in one line naming the file, the line and the fix:
column counts and the header rule of ``tsv``, empty sentences and tokens, lines with tabs
or no-break spaces, HateXplain splits, ``.gz`` names and trailing blank lines.
"""

import gzip
import json

import numpy as np
import pytest

from minimal_attn.datasets import hatexplain
from minimal_attn.datasets.seq import load_text_task
from minimal_attn.datasets.text import read_parallel, read_sst2, whitespace_tokens
from minimal_attn.errors import InputError

ROWS = ["good film\t1", "bad film\t0"] * 3           # every word three times: no <unk>


def _folder(path, files):
    path.mkdir(exist_ok=True)
    for name, text in files.items():
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        (path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def _tsv(tmp_path, train, dev="good\t1\nbad\t0\n"):
    return _folder(tmp_path / "tsv", {"train.tsv": train, "dev.tsv": dev})


def _refused(match, *args, **kwargs):
    with pytest.raises(InputError, match=match) as err:
        load_text_task(*args, **kwargs)
    assert "\n" not in str(err.value)
    return str(err.value)


def _labels(task):
    return [int(t[0]) for t in task.train_tgt]


# ------------------------------------------------------------------ tsv: columns (fix 1)
@pytest.mark.parametrize("train,line,found", [
    ("id\ttext\tlabel\n" + "".join(f"{k}\t{r}\n" for k, r in enumerate(ROWS)), 1, 3),
    ("\n".join(ROWS[:2] + ["good film\tpos\t1"] + ROWS[2:]) + "\n", 3, 3),   # a label leak
    ("\n".join(ROWS[:4] + ["good\tfilm\t1"] + ROWS[4:]) + "\n", 5, 3),       # a tab in the text
    ("\n".join(ROWS + ["good film"]) + "\n", 7, None)],
    ids=["id-column", "label-leak", "tab-in-text", "no-tab"])
def test_tsv_rows_need_exactly_two_columns(tmp_path, train, line, found):
    # the old reader split at the last tab: ids or a word label became words of the input
    message = _refused(f"line {line} has", "classify", "tsv", _tsv(tmp_path, train))
    assert "train.tsv" in message and "keep only the text and the label" in message
    assert (f"{found} tab-separated columns" if found else "no tab") in message


# ------------------------------------------------------------------ tsv: header (fix 2)
@pytest.mark.parametrize("header", ["text\tlabel", "sentence\tlabel", "Review\tLABEL",
                                    "tweet\tclass", "text\tsentiment"])
def test_a_first_row_without_a_0_1_label_is_the_header(tmp_path, header):
    plain = load_text_task("classify", "tsv", _tsv(tmp_path, "\n".join(ROWS) + "\n"))
    t = load_text_task("classify", "tsv", _tsv(tmp_path, "\n".join([header] + ROWS) + "\n"))
    assert _labels(t) == _labels(plain) and t.itos == plain.itos


def test_a_file_of_word_labels_says_its_first_row_was_read_as_the_header(tmp_path):
    # the old reader blamed line 2 of a word-label file without saying why line 1 passed
    for first in ("first row real data\tpos", "when are bears\tpositive"):
        train = "\n".join([first] + [r.replace("\t1", "\tpositive") for r in ROWS]) + "\n"
        _refused("line 2 is not 'text<TAB>0|1'.*line 1 was read as the header", "classify",
                 "tsv", _tsv(tmp_path, train))
    _refused(r"line 3 is not.*labels must be 0 or 1\):", "classify", "tsv",
             _tsv(tmp_path, "text\tlabel\nfine film\t1\nbad film\tpos\n"))


def test_the_first_data_row_is_kept(tmp_path):
    t = load_text_task("classify", "tsv", _tsv(tmp_path, "film\t0\n" + "\n".join(ROWS) + "\n"))
    assert len(t.train_src) == 7 and _labels(t)[0] == 0


# ------------------------------------------------------------------ empty texts (fix 3)
def test_an_empty_tsv_text_is_refused_naming_its_line(tmp_path):
    for row in ("\t0", "   \t1"):
        train = "\n".join(ROWS + [row]) + "\n"
        _refused("train.tsv line 7 has an empty text", "classify", "tsv", _tsv(tmp_path, train))
    t = load_text_task("classify", "tsv", _tsv(tmp_path, "\n".join(ROWS) + "\n\n\n"))
    assert len(t.train_src) == 6                       # blank lines are not rows


def test_an_empty_sst2_sentence_is_refused_naming_its_line(tmp_path):
    train = "sentence\tlabel\n" + "\n".join(ROWS[:3] + ["\t1"] + ROWS[3:]) + "\n"
    folder = _folder(tmp_path / "sst", {"train.tsv": train,
                                        "test.tsv": "sentence\tlabel\ngood\t1\n"})
    _refused("train.tsv line 5 has an empty sentence", "classify", "sst2", folder)
    with pytest.raises(InputError, match="line 5 has an empty sentence"):
        read_sst2(folder / "train.tsv")


def _par(tmp_path, train_src, train_tgt, val_src="a b\n", val_tgt="x y\n", name="par"):
    return _folder(tmp_path / name, {"train.src": train_src, "train.tgt": train_tgt,
                                     "val.src": val_src, "val.tgt": val_tgt})


def test_a_translation_pair_with_one_empty_side_is_dropped_and_counted(tmp_path):
    src, tgt = "a b\nb c\nc a\n", "x y\n\nz x\n"
    t = load_text_task("translate", "parallel", _par(tmp_path, src, tgt), tokenizer="word")
    assert t.info["n_train"] == 2 and t.info["one_sided_pairs"] == {"train": 1, "val": 0}
    # a line blank in both files is a blank line, not a pair
    t = load_text_task("translate", "parallel", _par(tmp_path, "a b\n\nc a\n", tgt, name="p2"),
                       tokenizer="word")
    assert t.info["n_train"] == 2


def _hx_rows(**change):
    rows = [{"post_id": f"p{k}", "tokens": ["you", "are", "bad" if k % 2 else "nice"],
             "label": "toxic" if k % 2 else "non-toxic", "rationale": [0, 0, k % 2],
             "orig_split": ("train", "train", "val", "test")[k % 4]} for k in range(12)]
    rows[5].update(change)
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_a_blank_hatexplain_token_is_dropped_with_its_rationale_entry(tmp_path):
    """No word to embed: "" or " " goes with its rationale entry; a post of blanks only is
    dropped and counted (post p5 is a training post: k = 5, 5 % 4 = 1)."""
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": _hx_rows(
        tokens=["you", " ", "bad"], rationale=[0, 1, 1])})
    train = hatexplain.read_hatexplain(folder).splits["train"]
    k = train.post_ids.index("p5")
    assert train.tokens[k] == ["you", "bad"] and train.rationale[k].tolist() == [0, 1]
    folder = _folder(tmp_path / "hx2", {"hatexplain_binary.jsonl": _hx_rows(
        tokens=[""], rationale=[1])})
    data = hatexplain.read_hatexplain(folder)
    assert "p5" not in data.splits["train"].post_ids and data.dropped["no word"] == 1
    t = load_text_task("classify", "hatexplain", folder)                # `train-seq` too
    assert t.info["n_train"] == len(data.splits["train"].post_ids)


# ------------------------------------------------------------------ tabs, no-break spaces (fix 4)
@pytest.mark.parametrize("space", ["\t", "\u00a0"])
def test_every_line_with_a_tab_or_no_break_space_is_text(tmp_path, space):
    src = "".join(f"a{space}b c{space}!\n" for _ in range(6))
    tgt = "".join(f"x{space}y z\n" for _ in range(6))
    folder = _folder(tmp_path / "m30k", {"train.en": src, "train.de": tgt, "val.en": src,
                                         "val.de": tgt})
    t = load_text_task("translate", "multi30k", folder, tokenizer="word")
    assert t.info["n_train"] == 6 and "a" in t.itos and "!" in t.itos
    t = load_text_task("translate", "parallel", _par(tmp_path, src, tgt), tokenizer="word")
    assert t.info["n_train"] == 6
    s, _ = read_parallel(folder / "train.en", folder / "train.de", whitespace_tokens)
    assert len(s) == 6
    ctl = _folder(tmp_path / "ctl", {"a": "\x01\t\x02\n", "b": "x\n"})
    with pytest.raises(InputError, match="no usable word"):         # still refused
        read_parallel(ctl / "a", ctl / "b")


# ------------------------------------------------------------------ HateXplain errors (fix 6)
def test_a_hatexplain_file_that_is_not_utf8_says_so(tmp_path):
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": b"\x80\xc8\xff junk\n"})
    with pytest.raises(InputError, match="is not UTF-8 text") as err:
        hatexplain.read_hatexplain(folder)
    assert "check the path" not in str(err.value)


def test_a_hatexplain_split_without_orig_split_or_split_file_names_both(tmp_path):
    rows = "".join(json.dumps({"post_id": f"p{k}", "tokens": ["a"], "label": "toxic"}) + "\n"
                   for k in range(3))
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": rows})
    with pytest.raises(InputError, match="line 1 has no orig_split.*post_id_divisions.json"):
        hatexplain.read_hatexplain(folder)


def test_an_unknown_orig_split_is_refused_not_dropped(tmp_path):
    # the old `train` dropped these posts with no message; train-seq blamed --data-dir
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": _hx_rows(
        orig_split="validation")})
    with pytest.raises(InputError, match="line 6: orig_split 'validation' is not train, val"):
        hatexplain.read_hatexplain(folder)
    _refused("orig_split 'validation'", "classify", "hatexplain", folder)


def test_an_empty_validation_split_is_named(tmp_path):
    rows = _hx_rows().replace('"val"', '"test"')
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": rows})
    _refused("the val split has no post; give posts with orig_split val", "classify",
             "hatexplain", folder)


def test_integer_post_ids_in_the_split_file_are_read_as_strings(tmp_path):
    rows = "".join(json.dumps({"post_id": k, "tokens": ["a", "b"], "label": "toxic"}) + "\n"
                   for k in range(6))
    folder = _folder(tmp_path / "hx", {
        "hatexplain_binary.jsonl": rows,
        "post_id_divisions.json": json.dumps({"train": [0, 1, 2], "val": [3, "4"],
                                              "test": [5]})})
    data = hatexplain.read_hatexplain(folder)
    assert [len(data.splits[s].y) for s in hatexplain.SPLITS] == [3, 2, 1]
    assert data.splits["train"].post_ids == ["0", "1", "2"]
    (folder / "post_id_divisions.json").write_text(json.dumps(
        {"train": [0.5], "val": [], "test": []}))
    with pytest.raises(InputError, match="train must be a list of post ids"):
        hatexplain.read_hatexplain(folder)


# ------------------------------------------------------------------ docs promises (fix 7)
def test_gzipped_files_are_found_under_their_gz_names(tmp_path):
    plain = load_text_task("classify", "tsv", _tsv(tmp_path, "\n".join(ROWS) + "\n"))
    packed = _folder(tmp_path / "tsvgz", {"train.tsv.gz": "\n".join(ROWS) + "\n",
                                          "dev.tsv.gz": "good\t1\nbad\t0\n"})
    t = load_text_task("classify", "tsv", packed)
    assert t.itos == plain.itos and _labels(t) == _labels(plain)
    sst = "sentence\tlabel\n" + "\n".join(ROWS) + "\n"
    t = load_text_task("classify", "sst2", _folder(tmp_path / "sstgz", {
        "train.tsv.gz": sst, "test.tsv.gz": "sentence\tlabel\ngood\t1\n"}))
    assert _labels(t) == _labels(plain) and len(t.val_src) == 1
    hx = _folder(tmp_path / "hxgz", {"hatexplain_binary.jsonl.gz": _hx_rows()})
    data = hatexplain.read_hatexplain(hx)
    assert data.layout == "binary" and len(data.splits["train"].y) == 6
    assert load_text_task("classify", "hatexplain", hx).info["n_train"] == 6


def test_a_trailing_blank_line_in_one_parallel_file_is_not_a_mismatch(tmp_path):
    src, tgt = "a b\nb c\nc a\n", "x y\ny z\nz x\n"
    base = load_text_task("translate", "parallel", _par(tmp_path, src, tgt), tokenizer="word")
    t = load_text_task("translate", "parallel", _par(tmp_path, src + "\n", tgt, name="p2"),
                       tokenizer="word")
    assert t.itos == base.itos and all(np.array_equal(a, b) for a, b in
                                       zip(t.train_src + t.train_tgt, base.train_src +
                                           base.train_tgt))
    folder = _par(tmp_path, src, tgt + "\n  \n", name="p3")
    assert len(read_parallel(folder / "train.src", folder / "train.tgt")[0]) == 3   # ibm1
    _refused("line-aligned", "translate", "parallel", _par(tmp_path, src + "d\n", tgt,
                                                           name="p4"))


def test_parallel_records_its_own_direction(tmp_path):
    t = load_text_task("translate", "parallel", _par(tmp_path, "a b\n", "x y\n"),
                       tokenizer="word")
    assert t.info["direction"] == "src->tgt"


def test_hatexplain_data_dir_may_be_the_file_itself(tmp_path):
    folder = _folder(tmp_path / "hx", {"hatexplain_binary.jsonl": _hx_rows()})
    a = load_text_task("classify", "hatexplain", folder)
    b = load_text_task("classify", "hatexplain", folder / "hatexplain_binary.jsonl")
    assert a.itos == b.itos and _labels(a) == _labels(b)
    _refused("is not a folder", "classify", "tsv", folder / "hatexplain_binary.jsonl")


def test_a_byte_order_mark_does_not_hide_the_first_embedding(tmp_path):
    from minimal_attn.backends.snell.inputs import _vectors

    path = tmp_path / "glove.txt"
    path.write_text("\ufeffthe 0.1 0.2\nfilm 0.3 0.4\n", encoding="utf-8")
    assert next(_vectors(path))[0] == "the"
