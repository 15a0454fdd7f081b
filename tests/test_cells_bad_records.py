"""Malformed cell records, run folders and output paths: every `attn-dyn cells` command
refuses them in one line naming the file (or the option), before any work and without
writing anything."""

import copy
import io
import json
import tarfile
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments import cell_runners, cells, results_store
from minimal_attn.experiments.results_import import import_records

ROOT = Path(__file__).resolve().parent.parent
#: One record of each kind from the repository's store, the good records the bad ones vary.
GOOD = {name: json.loads((ROOT / "results" / "cells" / f"{name}.json").read_text())
        for name in ("t1-cifar10-m5-authors-sa", "t2-sst2", "permute-copy@1")}


def _bad(name, change):
    record = copy.deepcopy(GOOD[name])
    change(record)
    return record


#: (label, cell, how the record is broken): each one crashed a command or lost a row.
BAD = [
    ("result a string", "t2-sst2", lambda r: r.update(result="x")),
    ("table1 result empty", "t1-cifar10-m5-authors-sa", lambda r: r.update(result={})),
    ("table1 stat without mean", "t1-cifar10-m5-authors-sa",
     lambda r: r["result"]["test"]["saif"].pop("mean")),
    ("table2 row a string", "t2-sst2", lambda r: r["result"].update(row="x")),
    ("table2 without performance", "t2-sst2", lambda r: r["result"].pop("performance")),
    ("synthetic conditions a list", "permute-copy@1",
     lambda r: r["result"].update(conditions=[1, 2])),
    ("time_limited a list", "permute-copy@1", lambda r: r["result"].update(time_limited=[1])),
    ("settings a string", "t2-sst2", lambda r: r.update(settings="x")),
    ("provenance date null", "t2-sst2", lambda r: r["provenance"].update(date=None)),
    ("paper a list", "t1-cifar10-m5-authors-sa", lambda r: r.update(paper=[1])),
    ("part of another cell", "permute-copy@1", lambda r: r["part"].update(of="other")),
]


def _store(tmp_path, name, record):
    """A results store holding the good records and ``record`` as ``name``.json."""
    folder = tmp_path / "results" / "cells"
    folder.mkdir(parents=True)
    for good, r in GOOD.items():
        (folder / f"{good}.json").write_text(json.dumps(r))
    (folder / f"{name}.json").write_text(json.dumps(record))
    return tmp_path / "results"


def _archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, obj in members.items():
            data = json.dumps(obj).encode()
            info = tarfile.TarInfo(f"results/cells/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _one_line(result, *words):
    """Exit 2, one ``Error:`` line holding ``words``, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.output.count("Error:") == 1 and "Traceback" not in result.output
    line = [x for x in result.output.splitlines() if x.startswith("Error:")][0]
    for word in words:
        assert word in line, (word, line)
    return line


def test_the_good_records_read():
    """The records the bad ones vary are well-formed (else every test below proves nothing)."""
    for name, record in GOOD.items():
        folder_record = results_store.parse_record(json.dumps(record).encode(), name, name)
        assert folder_record == record


@pytest.mark.parametrize("label, name, change", BAD, ids=[b[0] for b in BAD])
def test_a_malformed_record_is_refused_in_one_line_by_every_command(tmp_path, label, name,
                                                                    change):
    results = _store(tmp_path, name, _bad(name, change))
    path = str(results / "cells" / f"{name}.json")
    with pytest.raises(InputError, match="delete it or rerun its cell"):
        results_store.read_cells(str(results))
    runner = CliRunner()
    readme = tmp_path / "README.md"
    readme.write_text(results_store.BEGIN + results_store.END + "\n")
    for args in (["cells", "list", "--results", str(results)],
                 ["cells", "report", "--results", str(results), "--readme", str(readme)],
                 ["cells", "report", "--check", "--results", str(results), "--readme",
                  str(readme)]):
        _one_line(runner.invoke(cli, args), path)
    assert not (results / "README.md").exists()
    assert readme.read_text() == results_store.BEGIN + results_store.END + "\n"


@pytest.mark.parametrize("label, name, change", BAD, ids=[b[0] for b in BAD])
def test_import_refuses_a_malformed_record_before_writing_any(tmp_path, label, name, change):
    # a good record first: the bad one after it must stop the whole import
    source = _archive(tmp_path / "x.tar.gz", {"t1-cifar10-m5-authors-sa.json":
                                              GOOD["t1-cifar10-m5-authors-sa"],
                                              f"{name}.json": _bad(name, change)})
    results = tmp_path / "results"
    r = CliRunner().invoke(cli, ["cells", "import", source, "--results", str(results)])
    _one_line(r, f"results/cells/{name}.json", "nothing was imported")
    assert not results.exists()


def test_a_damaged_record_in_the_store_is_replaced_by_an_import(tmp_path):
    results = _store(tmp_path, "t2-sst2", _bad("t2-sst2", lambda r: r.update(result="x")))
    source = _archive(tmp_path / "x.tar.gz", {"t2-sst2.json": GOOD["t2-sst2"]})
    assert dict(import_records(source, str(results))) == {
        "t2-sst2": "replaced a malformed record, complete"}
    assert results_store.read_cells(str(results))[-1] == GOOD["t2-sst2"]


def test_a_record_of_another_cell_than_its_file_names_is_refused(tmp_path):
    """t2-sst2.json holding t2-multi30k's record: the report lost the row of one of them."""
    record = dict(copy.deepcopy(GOOD["t2-sst2"]), cell="t2-multi30k")
    results = _store(tmp_path, "t2-sst2", record)
    (results / "cells" / "t2-multi30k.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match="holds the record of cell 't2-multi30k', not "
                                         "'t2-sst2'"):
        results_store.read_cells(str(results))
    readme = tmp_path / "README.md"
    readme.write_text(results_store.BEGIN + results_store.END + "\n")
    r = CliRunner().invoke(cli, ["cells", "report", "--results", str(results), "--readme",
                                 str(readme)])
    _one_line(r, str(results / "cells" / "t2-sst2.json"), "t2-multi30k")
    assert not (results / "README.md").exists()
    # a cell's status reads its record through the same check
    with pytest.raises(InputError, match="holds the record of cell"):
        cells.status("t2-sst2", str(results))


def test_cells_plot_refuses_an_unsupported_format_up_front(tmp_path):
    """No run folder exists: the extension is refused before anything is read."""
    for out in ("plot.txt", "plot"):
        r = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-lv", "--work",
                                     str(tmp_path / "w"), "--out", str(tmp_path / out)])
        _one_line(r, "--out", ".png", ".pdf", ".svg")
        assert not (tmp_path / out).exists()


@pytest.mark.parametrize("content", [b"\x8c\x00\xff\xfe binary", b"[1, 2]\n", b'"x"\n',
                                     b'{"epoch": "one", "loss": 1.0}\n'])
def test_cells_plot_names_an_unreadable_history(tmp_path, content):
    run = tmp_path / "w" / "tiny-t1-synthetic-lv"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_bytes(content)
    r = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-lv", "--work",
                                 str(tmp_path / "w"), "--out", str(tmp_path / "c.png")])
    _one_line(r, str(run / "history.jsonl"), "rerun the cell")
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("option", ["--results", "--work"])
def test_cells_run_checks_its_folders_before_any_work(tmp_path, option):
    """A folder under a plain file cannot be created: refused before the cell trains,
    naming the option that gave it."""
    (tmp_path / "file").write_text("x")
    folders = {"--results": str(tmp_path / "r"), "--work": str(tmp_path / "w")}
    folders[option] = str(tmp_path / "file" / "sub")
    with mock.patch.dict(cell_runners.RUNNERS, {"fcam": mock.Mock(side_effect=AssertionError(
            "trained"))}):
        r = CliRunner().invoke(cli, ["cells", "run", "tiny-t1-synthetic-lv", "--device", "cpu",
                                     "--results", folders["--results"], "--work",
                                     folders["--work"]])
        line = _one_line(r, "is a file, not a folder")
        assert line.endswith(f"choose another {option}"), line
        # the library refuses the same way, by its parameter
        with pytest.raises(InputError, match="results_dir" if option == "--results"
                           else "work_root"):
            cells.run_cell("tiny-t1-synthetic-lv", None, folders["--results"],
                           folders["--work"], device="cpu")
    assert not (tmp_path / "r").exists() and not (tmp_path / "w").exists()


def test_import_and_plot_name_their_own_options_for_an_unwritable_path(tmp_path):
    (tmp_path / "file").write_text("x")
    source = _archive(tmp_path / "x.tar.gz", {"t2-sst2.json": GOOD["t2-sst2"]})
    r = CliRunner().invoke(cli, ["cells", "import", source, "--results",
                                 str(tmp_path / "file" / "r")])
    assert _one_line(r).endswith("choose another --results")
    r = CliRunner().invoke(cli, ["cells", "plot", "tiny-t1-synthetic-lv", "--work",
                                 str(tmp_path), "--out", str(tmp_path / "file" / "c.png")])
    assert _one_line(r).endswith("choose another --out")


def test_an_unknown_cell_is_named_as_a_cell_not_an_option(tmp_path):
    for command in ("run", "plot"):
        args = ["cells", command, "nope"] + (["--out", str(tmp_path / "x.png")]
                                             if command == "plot" else [])
        line = _one_line(CliRunner().invoke(cli, args), "unknown cell 'nope'",
                         "attn-dyn cells list")
        assert "--cell" not in line
    for name, words in (("nope@0", "cell part 'nope@0'"), ("t2-sst2@1", "cell t2-sst2 has no "
                                                                         "parts")):
        line = _one_line(CliRunner().invoke(cli, ["cells", "run", name]), words)
        assert "--cell" not in line
