"""A sweep rerun compares a finished Snell Table 2 row's data before it skips it, as it does
a Table 1 cell's: the row's record names the fingerprint of its token ids (the one its
models' checkpoints hold), and a rerun whose --data-dir gives other token ids is refused in
one line with nothing written, or, asked to, sets the old record and folder aside and
trains the row afresh. A translation row is read through the SentencePiece model saved in
its folder; rows of the same data share one reading; records that name no data are
skipped as before, and counted. Tiny rows of generated text, a few seconds each."""

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_sweep_data import _assert_refused_for_other_data, _copy, _files

from minimal_attn.cli.main import cli
from minimal_attn.experiments import sweep_grid, sweep_table2
from minimal_attn.experiments.sweep_data import OTHER_DATA

torch = pytest.importorskip("torch")

#: The smallest row worth running: two steps of 4-wide LSTMs, no frozen, logistic or tau.
TINY = ["steps=2", "hidden=4", "out_hidden=4", "eval_every=2", "proxy_d=4", "proxy_epochs=1",
        "batch_size=4", "kendall=false"]
CLASSIFY = ["table=2", "dataset=tsv", *TINY, "emb=4", "frozen=false", "logistic=false"]
TRANSLATE = ["table=2", "dataset=parallel", "task=translate", *TINY, "bleu=false",
             "vocab_size=40"]
WORDS = "good bad fine awful great poor nice dull".split()
EN = "a man dog runs the park cat sits on mat red blue".split()
DE = "ein mann hund laeuft der park katze sitzt auf matte rot blau".split()


def _tsv(folder, n, seed):
    """``train.tsv`` of ``n`` labelled rows and ``dev.tsv`` of n // 4 (at least 4)."""
    r = random.Random(seed)
    folder.mkdir(parents=True)
    for name, k in (("train.tsv", n), ("dev.tsv", max(4, n // 4))):
        rows = [[r.choice(WORDS) for _ in range(r.randint(2, 6))] for _ in range(k)]
        (folder / name).write_text("".join(f"{' '.join(w)}\t{int(w[0] in WORDS[::2])}\n"
                                           for w in rows))


def _parallel(folder, seed):
    r = random.Random(seed)
    folder.mkdir(parents=True)
    for split, n in (("train", 30), ("val", 8)):
        idx = [[r.randrange(len(EN)) for _ in range(r.randint(2, 5))] for _ in range(n)]
        for side, words in (("src", EN), ("tgt", DE)):
            (folder / f"{split}.{side}").write_text(
                "".join(" ".join(words[i] for i in s) + "\n" for s in idx))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Two TSV data sets (``small``, ``large``) and two parallel ones (``par``, ``par2``)."""
    root = tmp_path_factory.mktemp("text")
    _tsv(root / "small", 24, 0)
    _tsv(root / "large", 40, 1)
    _parallel(root / "par", 0)
    _parallel(root / "par2", 1)
    return {name: str(root / name) for name in ("small", "large", "par", "par2")}


def sweep(out, data, grid=CLASSIFY, *extra):
    return CliRunner().invoke(cli, ["sweep", "--grid", *grid, *extra, "--threads", "1",
                                    "--device", "cpu", "--data-dir", data, "--out", str(out)])


def _cell(grid=CLASSIFY):
    cell, = sweep_grid.expand(sweep_grid.parse_tokens(grid))
    return cell


def _record(out, grid=CLASSIFY):
    return json.loads((Path(out) / "cells" / f"{_cell(grid).name}.json").read_text())


def _checkpoint_data(out, grid=CLASSIFY, model="standard"):
    """The data fingerprint a model of the row holds in its checkpoint (train_seq's)."""
    path = Path(out) / "cells" / _cell(grid).name / "runs" / model / "checkpoint.pt"
    return torch.load(path, weights_only=False)["data"]


@pytest.fixture(scope="module")
def done(tmp_path_factory, folders):
    """A sweep of one classification row on the small data."""
    out = tmp_path_factory.mktemp("sweep") / "s"
    r = sweep(out, folders["small"])
    assert r.exit_code == 0, r.output
    return out


def test_a_row_records_the_fingerprint_its_models_checkpoints_hold(done, folders):
    recorded = _record(done)["provenance"]["data_fingerprint"]
    assert recorded == _checkpoint_data(done) == _checkpoint_data(done, model="uniform")
    folder = str(done / "cells" / _cell().name)
    assert recorded == sweep_table2.row_fingerprint(_cell(), {"data_dir": folders["small"]},
                                                    folder)


def test_a_rerun_of_a_row_on_other_data_is_refused_in_one_line_before_any_work(done, folders):
    same = sweep(done, folders["small"])
    assert same.exit_code == 0 and "already done" in same.output, same.output
    assert "name no data" not in same.output
    before = _files(done)
    r = sweep(done, folders["large"])
    assert r.exit_code == 2, r.output
    old = _record(done)["provenance"]["data_fingerprint"]
    new = sweep_table2.row_fingerprint(_cell(), {"data_dir": folders["large"]}, "nowhere")
    _assert_refused_for_other_data(r, _cell().name, old, new, folders["large"])
    assert _files(done) == before                   # nothing written, nothing merged


def test_a_rerun_of_a_row_with_glove_vectors_is_refused_as_other_data(tmp_path, done, folders):
    # embeddings= is neither in the row's name nor a compared setting: without its content
    # in the fingerprint the rerun would say "already done" of a row trained without them
    glove = tmp_path / "glove.txt"
    glove.write_text("".join(f"{w} {k} 1 0 {-k}\n" for k, w in enumerate(WORDS)))
    before = _files(done)
    r = sweep(done, folders["small"], [*CLASSIFY, f"embeddings={glove}"])
    assert r.exit_code == 2, r.output
    old = _record(done)["provenance"]["data_fingerprint"]
    operational = {"data_dir": folders["small"], "embeddings": str(glove)}
    new = sweep_table2.row_fingerprint(_cell(), operational, "nowhere")
    _assert_refused_for_other_data(r, _cell().name, old, new, folders["small"])
    assert _files(done) == before
    out = tmp_path / "g"                            # with the vectors from the start
    assert sweep(out, folders["small"], [*CLASSIFY, f"embeddings={glove}"]).exit_code == 0
    assert _record(out)["provenance"]["data_fingerprint"] == new
    again = sweep(out, folders["small"], [*CLASSIFY, f"embeddings={glove}"])
    assert again.exit_code == 0 and "already done" in again.output, again.output


def test_retrain_other_data_sets_a_row_aside_and_trains_it_afresh(tmp_path, done, folders):
    out = tmp_path / "s"
    _copy(done, out)
    old = _record(out)["provenance"]["data_fingerprint"]
    r = sweep(out, folders["large"], CLASSIFY, "--retrain-other-data")
    assert r.exit_code == 0 and "set aside" in r.output, r.output
    new = _record(out)["provenance"]["data_fingerprint"]
    assert new == _checkpoint_data(out) != old                   # models trained anew
    aside = out / OTHER_DATA / old[:8]
    assert json.loads((aside / f"{_cell().name}.json").read_text())["provenance"][
        "data_fingerprint"] == old
    assert (aside / _cell().name / "runs" / "standard" / "checkpoint.pt").exists()
    log = (out / "cells" / _cell().name / "log.txt").read_text()
    assert log.count(": start (") == 1 and "(resume=False)" in log   # afresh, new folder
    merged = json.loads((out / "results.json").read_text())
    assert [e["cell"] for e in merged["cells"]] == [_cell().name]


def test_a_row_record_that_names_no_data_is_skipped_and_counted(tmp_path, done, folders):
    out = tmp_path / "s"
    _copy(done, out)
    path = out / "cells" / f"{_cell().name}.json"
    record = json.loads(path.read_text())
    del record["provenance"]["data_fingerprint"]            # written before rows named it
    path.write_text(json.dumps(record))
    r = sweep(out, folders["large"])
    assert r.exit_code == 0 and "already done" in r.output, r.output
    assert "1 finished cell(s) (" in r.output and "name no data" in r.output


def test_a_translation_row_is_compared_through_its_saved_pieces(tmp_path, folders):
    out = tmp_path / "t"
    first = sweep(out, folders["par"], TRANSLATE)
    assert first.exit_code == 0, first.output
    folder = out / "cells" / _cell(TRANSLATE).name
    assert (folder / "spm.model").exists()
    assert _record(out, TRANSLATE)["provenance"]["data_fingerprint"] == \
        _checkpoint_data(out, TRANSLATE)
    again = sweep(out, folders["par"], TRANSLATE)           # the same ids: skipped
    assert again.exit_code == 0 and "already done" in again.output, again.output
    before = _files(out)
    other = sweep(out, folders["par2"], TRANSLATE)
    assert other.exit_code == 2 and "finished on other data" in other.output, other.output
    assert _files(out) == before


def test_rows_of_the_same_data_share_one_reading(monkeypatch, folders):
    cells = sweep_grid.expand(sweep_grid.parse_tokens(CLASSIFY + ["seed=0,1,2"]))
    reads, real = [], sweep_table2.row_task
    monkeypatch.setattr(sweep_table2, "row_task", lambda *a: reads.append(a) or real(*a))
    memo, operational = {}, {"data_dir": folders["small"]}
    prints = {sweep_table2.row_fingerprint(c, operational, "nowhere", memo) for c in cells}
    assert len(cells) == 3 and len(prints) == 1 and len(reads) == 1
