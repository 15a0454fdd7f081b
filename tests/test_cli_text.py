"""`attn-dyn ibm1` and `attn-dyn proxy`: exit codes, output, files, bad input."""

import collections
import json

import numpy as np
import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli

SRC = ["The house is small.", "the house is big", "the book is small", "the house",
       "the book", "a book", "A small house", "the big book"]
TGT = ["das Haus ist klein.", "das haus ist groß", "das buch ist klein", "das haus",
       "das buch", "ein buch", "ein kleines haus", "das große buch"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def corpus(tmp_path):
    (tmp_path / "s.txt").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(TGT) + "\n", encoding="utf-8")
    return tmp_path / "s.txt", tmp_path / "t.txt"


def read_tsv(path):
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    assert all(len(r) == 3 for r in rows)
    return [(s, t, float(p)) for s, t, p in rows]


# ---------------------------------------------------------------------- ibm1
def test_ibm1_json_and_tsv(corpus, tmp_path):
    out = tmp_path / "t.tsv"
    r = run("ibm1", "--src", corpus[0], "--tgt", corpus[1], "--iterations", 4,
            "--out", out, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["pairs"] == 8 and report["null"] is True
    ll = report["log_likelihood"]
    assert len(ll) == 5 and all(b >= a - 1e-9 for a, b in zip(ll, ll[1:]))
    rows = read_tsv(out)
    assert len(rows) == report["entries"]
    totals = collections.defaultdict(float)
    for s, _, p in rows:
        assert p > 0
        totals[s] += p
    assert all(v == pytest.approx(1.0) for v in totals.values())
    # whitespace tokens, lower-cased, punctuation kept attached
    assert {"<NULL>", "the", "house", "small.", "small"} <= set(totals)
    assert "klein." in {t for _, t, _ in rows}
    assert report["source_vocab"] == len(totals) - 1


def test_ibm1_text_output_and_no_null(corpus, tmp_path):
    out = tmp_path / "sub" / "t.tsv"                   # the folder is created
    r = run("ibm1", "--src", corpus[0], "--tgt", corpus[1], "-k", 3, "--no-null",
            "--out", out)
    assert r.exit_code == 0, r.output
    assert "NULL off" in r.stdout and "log-likelihood" in r.stdout
    table_lines = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("  ")]
    assert [int(cols[0]) for cols in table_lines[1:]] == [0, 1, 2, 3]
    assert all(s != "<NULL>" for s, _, _ in read_tsv(out))
    table = {(s, t): p for s, t, p in read_tsv(out)}
    assert table[("book", "buch")] > table[("book", "das")]


@pytest.mark.parametrize("case", ["mismatch", "missing", "empty", "iterations", "out_dir"])
def test_ibm1_bad_input_is_one_line_exit_2(corpus, tmp_path, case):
    src, tgt = corpus
    args = ["ibm1", "--src", src, "--tgt", tgt]
    if case == "mismatch":
        (tmp_path / "short.txt").write_text("eins\n")
        args[-1] = tmp_path / "short.txt"
    elif case == "missing":
        args[-1] = tmp_path / "nope.txt"
    elif case == "empty":
        (tmp_path / "empty.txt").write_text("")
        args[2] = tmp_path / "empty.txt"
    elif case == "iterations":
        args += ["--iterations", 0]
    else:
        args += ["--out", tmp_path]
    r = run(*args)
    assert r.exit_code == 2
    assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1
    assert r.stdout == ""
    assert not list(tmp_path.glob("*.tsv"))            # nothing half-written


# --------------------------------------------------------------------- proxy
def make_copy_corpus(tmp_path, n=120, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(15)]
    src, tgt = [], []
    for _ in range(n):
        idx = rng.choice(15, size=rng.integers(3, 7), replace=False)
        src.append(" ".join(words[i] for i in idx))
        tgt.append(" ".join(words[i].upper().replace("W", "v") for i in idx))
    (tmp_path / "p.src").write_text("\n".join(src) + "\n")
    (tmp_path / "p.tgt").write_text("\n".join(tgt) + "\n")
    return tmp_path / "p.src", tmp_path / "p.tgt"


def test_proxy_json_report(tmp_path):
    src, tgt = make_copy_corpus(tmp_path)
    out = tmp_path / "report.json"
    r = run("proxy", "--src", src, "--tgt", tgt, "--epochs", 4, "--dim", 16, "--lr", 0.05,
            "--batch-size", 16, "--min-count", 1, "--holdout", 0.2, "--json", "--out", out)
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report == json.loads(out.read_text())
    assert report["train_pairs"] == 96 and report["heldout_pairs"] == 24
    assert len(report["history"]) == 4
    # a word-for-word copy: beta^px and beta^IBM both point at the source of each word
    assert report["agreement"] > 0.9 > report["baseline"]
    assert 0 < report["kendall_tau"] <= 1


def test_proxy_text_output_with_validation_files(tmp_path):
    src, tgt = make_copy_corpus(tmp_path)
    (tmp_path / "val").mkdir()
    vsrc, vtgt = make_copy_corpus(tmp_path / "val", n=20, seed=1)
    r = run("proxy", "--src", src, "--tgt", tgt, "--val-src", vsrc, "--val-tgt", vtgt,
            "--epochs", 2, "--dim", 8, "--tokenizer", "whitespace")
    assert r.exit_code == 0, r.output
    assert "A(beta^px, beta^IBM)" in r.stdout and "20 held-out pairs" in r.stdout


@pytest.mark.parametrize("extra, word", [
    (["--holdout", 1.5], "--holdout"),
    (["--val-src", "x"], "--val-tgt"),
    (["--epochs", 0], "--epochs"),
    (["--lr", -1], "--lr"),
    (["--percent", 0], "--percent"),
    (["--tokenizer", "bpe"], "tokenizer")])
def test_proxy_bad_input(tmp_path, extra, word):
    src, tgt = make_copy_corpus(tmp_path, n=10)
    r = run("proxy", "--src", src, "--tgt", tgt, *extra)
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and word in r.stderr


def test_proxy_on_multi30k_subset(shared_dataset):
    folder = shared_dataset("multi30k")
    r = run("proxy", "--src", folder / "train.de", "--tgt", folder / "train.en",
            "--max-pairs", 400, "--epochs", 2, "--dim", 16, "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["heldout_pairs"] == 40
    assert report["agreement"] > report["baseline"]


@pytest.mark.parametrize("command", ["ibm1", "proxy"])
def test_help(command):
    r = run(command, "--help")
    assert r.exit_code == 0
    assert "Examples:\n" in r.stdout and f"attn-dyn {command} --src" in r.stdout


@pytest.mark.parametrize("extra, words", [
    (["--lr", "1e30"], ["diverged; lower the learning rate --lr"]),
    (["--min-count", "1000"], ["<unk>", "lower --min-count"]),
    (["--dim", "100000000"], ["GiB", "--dim"]),
])
def test_proxy_refusals_say_what_to_change(corpus, tmp_path, extra, words):
    r = run("proxy", "--src", corpus[0], "--tgt", corpus[1], "--epochs", "1",
            "--holdout", "0.25", "--min-count", "1", *extra, "--out", tmp_path / "r.json")
    assert r.exit_code == 2 and all(w in r.stderr for w in words), r.stderr
    assert not (tmp_path / "r.json").exists()


def test_ibm1_refuses_nul_bytes(tmp_path):
    (tmp_path / "n.txt").write_bytes(b"\x00" * 50)
    r = run("ibm1", "--src", tmp_path / "n.txt", "--tgt", tmp_path / "n.txt")
    assert r.exit_code == 2 and "NUL bytes" in r.stderr


def test_proxy_library_call_and_holdout_split(corpus):
    from minimal_attn.experiments.text import ProxyExperiment, holdout_split, run_proxy
    from minimal_attn.proxy import ProxyConfig

    train, held = holdout_split((list("abcdefghij"), list("ABCDEFGHIJ")), 0.3)
    assert train == (list("abcdefg"), list("ABCDEFG")) and held == (list("hij"), list("HIJ"))
    cfg = ProxyExperiment(model=ProxyConfig(epochs=2), min_count=1, holdout=0.25)
    report = run_proxy(corpus[0], corpus[1], cfg)
    r = run("proxy", "--src", corpus[0], "--tgt", corpus[1], "--epochs", "2",
            "--min-count", "1", "--holdout", "0.25", "--json")
    assert json.loads(r.stdout) == json.loads(json.dumps(report))
    assert report["train_pairs"] == 6 and report["heldout_pairs"] == 2


@pytest.mark.parametrize("command, which", [("ibm1", 0), ("ibm1", 1), ("proxy", 0),
                                            ("proxy", 1)])
def test_out_may_not_be_an_input_file(corpus, command, which, monkeypatch):
    # --out naming --src or --tgt (here through another spelling of its path) would
    # replace the corpus with the results
    monkeypatch.chdir(corpus[0].parent)
    before = [p.read_bytes() for p in corpus]
    r = run(command, "--src", corpus[0], "--tgt", corpus[1], "--out", f"./{corpus[which].name}")
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"is the input --{('src', 'tgt')[which]}" in lines[0]
    assert [p.read_bytes() for p in corpus] == before
