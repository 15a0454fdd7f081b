"""Tokenisers, vocabularies, Multi30k and SST-2 readers (Snell et al. 2021, Sections 2.4, 4)."""

import os

import numpy as np
import pytest

from minimal_attn.datasets import text as td
from minimal_attn.errors import InputError


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


# ---------------------------------------------------------------- tokenisers
def test_tokenize_splits_words_and_punctuation():
    assert td.tokenize("Two young, White males are outside.") == [
        "two", "young", ",", "white", "males", "are", "outside", "."]
    assert td.tokenize("Männer  im\tFreien!?") == ["männer", "im", "freien", "!", "?"]
    assert td.tokenize("don't  3.5") == ["don", "'", "t", "3", ".", "5"]
    assert td.tokenize("   ") == []


def test_whitespace_tokens_keep_punctuation_attached():
    assert td.whitespace_tokens("The House.  is\tBIG") == ["the", "house.", "is", "big"]


# --------------------------------------------------------------- vocabulary
def test_vocab_min_count_unk_and_order():
    sents = [["b", "a", "c"], ["a", "b", "a"], ["d"]]
    v = td.Vocab.build(sents, min_count=2)
    assert v.itos == ["<unk>", "a", "b"]          # a: 3, b: 2; c, d dropped
    assert v.unk_id == 0 and len(v) == 3 and "a" in v and "c" not in v
    np.testing.assert_array_equal(v.encode(["a", "c", "b"]), [1, 0, 2])
    assert v.decode([2, 1]) == ["b", "a"]
    v1 = td.Vocab.build(sents)                    # ties broken alphabetically
    assert v1.itos == ["<unk>", "a", "b", "c", "d"]


def test_encode_all_matches_encode_and_handles_empty_sentences():
    sents = [["x", "y", "x"], [], ["zz"], ["y"]]
    v = td.Vocab.build(sents)
    enc = v.encode_all(sents)
    assert [e.tolist() for e in enc] == [v.encode(s).tolist() for s in sents]
    assert enc[1].dtype == np.int64 and enc[1].size == 0


def test_vocab_without_unk_rejects_unknown_words():
    v = td.Vocab.build([["a", "b"]], unk=False)
    assert v.itos == ["a", "b"] and v.unk_id is None
    with pytest.raises(KeyError, match="zz"):
        v.encode(["a", "zz"])
    with pytest.raises(KeyError, match="zz"):
        v.encode_all([["a"], ["zz"]])
    with pytest.raises(InputError, match="min_count"):
        td.Vocab.build([["a"]], min_count=0)


# --------------------------------------------------------------- raw files
def test_read_parallel_aligns_and_drops_empty_pairs(tmp_path):
    src = write(tmp_path / "a.en", "A house.\n\nThe book\nno target\n")
    tgt = write(tmp_path / "a.de", "Ein Haus.\nleer\nDas Buch\n\n")
    s, t = td.read_parallel(src, tgt)
    assert s == [["a", "house", "."], ["the", "book"]]
    assert t == [["ein", "haus", "."], ["das", "buch"]]
    s, t = td.read_parallel(src, tgt, td.whitespace_tokens, drop_empty=False)
    assert len(s) == 4 and s[1] == [] and t[3] == []


def test_read_parallel_keeps_lines_aligned_across_unicode_separators(tmp_path):
    # U+2028 would split a line for str.splitlines; files are split on newlines only
    src = write(tmp_path / "a.en", "one\u2028two\nthree\n")
    tgt = write(tmp_path / "a.de", "eins\ndrei\n")
    s, t = td.read_parallel(src, tgt, td.whitespace_tokens)
    assert len(s) == len(t) == 2


@pytest.mark.parametrize("case", ["mismatch", "empty", "blank", "missing", "folder",
                                  "binary", "no_pairs"])
def test_read_parallel_errors_are_one_line(tmp_path, case):
    good = write(tmp_path / "good", "a b\nc\n")
    other = {"mismatch": lambda: write(tmp_path / "o", "x\n"),
             "empty": lambda: write(tmp_path / "o", ""),
             "blank": lambda: write(tmp_path / "o", "\n  \n"),
             "missing": lambda: str(tmp_path / "nope.txt"),
             "folder": lambda: str(tmp_path),
             "binary": lambda: write(tmp_path / "o", b"\xff\xfe\x00a\nb\n"),
             "no_pairs": lambda: write(tmp_path / "o", "x\n\n")}[case]()
    if case == "no_pairs":
        good = write(tmp_path / "good", "\n  \nnon-empty\n")
        other = write(tmp_path / "o", "x\n\n\n")
    with pytest.raises(InputError) as err:
        td.read_parallel(good, other)
    assert "\n" not in str(err.value)
    word = {"mismatch": "line-aligned", "empty": "empty", "blank": "empty",
            "missing": "does not exist", "folder": "folder", "binary": "UTF-8",
            "no_pairs": "both sides"}[case]
    assert word in str(err.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path):
    path = write(tmp_path / "locked", "a\n")
    os.chmod(path, 0)
    with pytest.raises(InputError, match="cannot read"):
        td.read_lines(path)


def test_read_multi30k_layout(tmp_path):
    write(tmp_path / "val.de", "Ein Hund.\nZwei Katzen\n")
    write(tmp_path / "val.en", "A dog.\nTwo cats\n")
    src, tgt = td.read_multi30k(tmp_path, "val")
    assert src == [["ein", "hund", "."], ["zwei", "katzen"]]
    assert tgt[1] == ["two", "cats"]
    src, tgt = td.read_multi30k(tmp_path, "val", src_lang="en", tgt_lang="de", max_pairs=1)
    assert src == [["a", "dog", "."]]
    with pytest.raises(InputError, match="does not exist"):
        td.read_multi30k(tmp_path / "missing")
    with pytest.raises(InputError, match="does not exist"):
        td.read_multi30k(tmp_path, "train")


def test_read_multi30k_real_data(shared_dataset):
    folder = shared_dataset("multi30k")
    src, tgt = td.read_multi30k(folder, "train", src_lang="en", tgt_lang="de")
    assert len(src) == len(tgt) == 29000
    assert src[0][:4] == ["two", "young", ",", "white"]
    assert tgt[0][:3] == ["zwei", "junge", "weiße"]
    assert len(td.read_multi30k(folder, "val")[0]) == 1014


# ---------------------------------------------------------------------- SST-2
def test_read_sst2(tmp_path):
    path = write(tmp_path / "dev.tsv", "sentence\tlabel\nit 's good \t1\n\nawful , truly\t0\n")
    sents, labels = td.read_sst2(path)
    assert sents == [["it", "'s", "good"], ["awful", ",", "truly"]]
    assert labels.tolist() == [1, 0] and labels.dtype == np.int64
    targets = td.labels_as_targets(labels)
    assert [t.tolist() for t in targets] == [[1], [0]]


@pytest.mark.parametrize("text, word", [
    ("text\tlabel\nfine\t1\n", "header"),
    ("sentence\tlabel\nfine\t2\n", "line 2"),
    ("sentence\tlabel\nno tab here\n", "line 2"),
    ("sentence\tlabel\n", "no rows"),
    ("sentence\tlabel\n\n", "no rows")])
def test_read_sst2_errors(tmp_path, text, word):
    path = write(tmp_path / "bad.tsv", text)
    with pytest.raises(InputError, match=word):
        td.read_sst2(path)


def test_read_sst2_real_data(shared_dataset):
    folder = shared_dataset("sst2")
    sents, labels = td.read_sst2(folder / "test.tsv")
    assert len(sents) == 872 and set(labels.tolist()) == {0, 1}
    assert all(s for s in sents)
