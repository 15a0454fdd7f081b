"""attn-dyn cells import: records a GPU job returned come home checked, all or none,
and a partial record never replaces a complete one."""

import io
import json
import tarfile

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments.cells import get_cell
from minimal_attn.experiments.results_import import import_records
from minimal_attn.experiments.results_store import cell_path, write_cell

# cells of the catalogue (an import refuses a record of a cell it does not have)
A, B, C2 = "tiny-t1-synthetic-sa", "tiny-t1-synthetic-lv", "t1-cifar10-m5-authors-sa@2"


def _record(name, cut=False, accuracy=0.5, date=None):
    """A record of catalogue cell ``name`` as the catalogue defines it (title, kind, scale,
    part); a name it does not have gets a title of its own."""
    stat = {"per_seed": [accuracy], "mean": accuracy, "std": 0.0}
    try:
        cell = get_cell(name)
        kind, scale, title, part = cell.kind, cell.scale, cell.title, cell.part
    except InputError:
        kind, scale, title, part = "table1", "paper", name, None
    record = {"format": 1, "cell": name, "kind": kind, "scale": scale, "title": title,
              "settings": {}, "provenance": {"card": "H200", "commit": "c" * 40},
              "result": {"train": {"accuracy": stat, "saif": stat},
                         "test": {"accuracy": stat, "saif": stat},
                         "time_limited": {"0": cut}}}
    if part is not None:
        record["part"] = dict(part)
    if date is not None:
        record["provenance"]["date"] = date
    return record


def _archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, obj in members.items():
            data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
            info = tarfile.TarInfo(f"results/cells/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _read(results, name):
    with open(cell_path(str(results), name)) as f:
        return json.load(f)


def test_a_partial_record_never_replaces_a_complete_one(tmp_path):
    results = tmp_path / "results"
    write_cell(str(results), _record(A, accuracy=0.7))          # complete, here already
    write_cell(str(results), _record(B, cut=True))              # partial, here already
    source = _archive(tmp_path / "x.tar.gz", {
        f"{A}.json": _record(A, cut=True, accuracy=0.1), f"{B}.json": _record(B, accuracy=0.9),
        f"{C2}.json": _record(C2, cut=True)})
    done = dict(import_records(source, str(results)))
    assert done[A].startswith("kept")
    assert _read(results, A)["result"]["test"]["accuracy"]["mean"] == 0.7
    assert done[B] == "replaced, complete" and _read(results, B)["result"]["test"][
        "accuracy"]["mean"] == 0.9
    assert done[C2] == "new, partial"
    assert dict(import_records(source, str(results)))[B] == "unchanged"
    # a folder of records imports the same way
    other = tmp_path / "other"
    assert dict(import_records(str(results), str(other))) == {
        A: "new, complete", B: "new, complete", C2: "new, partial"}


def _cut(name, **result):
    record = _record(name, cut=True)
    record["result"].update(result)
    return record


@pytest.mark.parametrize("here, shorter, longer", [
    # Table 1: epochs summed over seeds (59 + 59 here)
    ({"epochs_run": {"0": 59, "1": 59}}, {"epochs_run": {"0": 20, "1": 97}},
     {"epochs_run": {"0": 60, "1": 59}}),
    # Table 2: steps summed over the row's models
    ({"steps_run": {"standard": 18000, "uniform": 14000}},
     {"steps_run": {"standard": 20000, "uniform": 4000}},
     {"steps_run": {"standard": 18000, "uniform": 16000}}),
    # synthetic: the steps every seed ran
    ({"steps_run": 1500}, {"steps_run": 900}, {"steps_run": 1650})])
def test_a_partial_record_is_replaced_only_by_one_that_trained_further(tmp_path, here,
                                                                        shorter, longer):
    results = tmp_path / "results"
    write_cell(str(results), _cut(A, **here))
    done = dict(import_records(_archive(tmp_path / "s.tar.gz", {f"{A}.json": _cut(A, **shorter)}),
                               str(results)))
    assert done[A].startswith("kept the partial record here")
    assert _read(results, A)["result"] == _cut(A, **here)["result"]
    done = dict(import_records(_archive(tmp_path / "l.tar.gz", {f"{A}.json": _cut(A, **longer)}),
                               str(results)))
    assert done[A] == "replaced, partial"
    assert _read(results, A)["result"] == _cut(A, **longer)["result"]


@pytest.mark.parametrize("bad, match", [
    (b"{not json", "not JSON"),
    (json.dumps({"cell": "z"}).encode(), "not a cell record"),
    (json.dumps(_record("y")).encode(), "holds the record of cell 'y'")])
def test_one_bad_record_imports_nothing(tmp_path, bad, match):
    results = tmp_path / "results"
    source = _archive(tmp_path / "x.tar.gz", {f"{A}.json": _record(A), "z.json": bad})
    with pytest.raises(InputError, match=match):
        import_records(source, str(results))
    assert not results.exists()


def test_the_import_command(tmp_path):
    runner = CliRunner()
    source = _archive(tmp_path / "x.tar.gz", {f"{A}.json": _record(A)})
    r = runner.invoke(cli, ["cells", "import", source, "--results", str(tmp_path / "r")])
    assert r.exit_code == 0 and f"{A}: new, complete" in r.output and "cells report" in r.output
    for bad in (str(tmp_path / "missing.tar.gz"), str(tmp_path / "x.txt")):
        (tmp_path / "x.txt").write_text("plain text")
        r = runner.invoke(cli, ["cells", "import", bad, "--results", str(tmp_path / "s")])
        assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
        assert "Traceback" not in r.output and not (tmp_path / "s").exists()


def test_a_cut_write_left_beside_the_records_is_not_a_record(tmp_path):
    # a kill between writing the temporary file and renaming it leaves .tmp-*NAME.json
    from minimal_attn.experiments.results_store import read_cells

    results = tmp_path / "results"
    write_cell(str(results), _record(A))
    folder = results / "cells"
    (folder / ".tmp-x1b2a.json").write_text(json.dumps(_record(A, accuracy=0.1)))
    (folder / ".tmp-empty.json").write_text("")
    assert [r["cell"] for r in read_cells(str(results))] == [A]
    assert read_cells(str(results))[0]["result"]["test"]["accuracy"]["mean"] == 0.5
    # nor does one come home in a GPU job's archive or a folder of records
    source = _archive(tmp_path / "x.tar.gz", {f"{B}.json": _record(B),
                                              ".tmp-zz.json": _record("z")})
    assert dict(import_records(source, str(results))) == {B: "new, complete"}
    assert dict(import_records(str(folder), str(tmp_path / "other"))) == {
        A: "new, complete", B: "new, complete"}


def test_parts_of_another_split_or_holding_a_seed_twice_import_nothing(tmp_path):
    """A cell re-cut into another number of parts, or parts whose seed blocks overlap,
    would count a seed twice in the joined row."""
    def part(index, parts, first, seeds=1):
        record = _record(f"tiny-t1-synthetic-sa@{index}")
        record["part"] = dict(record["part"], parts=parts, first_seed=first, seeds=seeds)
        return record

    results = tmp_path / "results"
    write_cell(str(results), part(1, 2, 0))                         # the catalogue: 2 parts
    before = sorted(p.name for p in (results / "cells").iterdir())
    for members, match in (({"tiny-t1-synthetic-sa@2.json": part(2, 3, 1)}, "now cut into 2"),
                           ({"tiny-t1-synthetic-sa@2.json": part(2, 2, 0)},
                            "catalogue's cell tiny-t1-synthetic-sa@2 in its part")):
        with pytest.raises(InputError, match=match):
            import_records(_archive(tmp_path / "x.tar.gz", members), str(results))
        assert sorted(p.name for p in (results / "cells").iterdir()) == before
    done = import_records(_archive(tmp_path / "x.tar.gz",
                                   {"tiny-t1-synthetic-sa@2.json": part(2, 2, 1)}),
                          str(results))
    assert done == [("tiny-t1-synthetic-sa@2", "new, complete")]


def test_a_complete_record_made_later_here_is_kept(tmp_path):
    """An archive of records made before a cell was rerun here must not bring the older
    record back; a newer incoming one still replaces it, and the line says why."""
    results = tmp_path / "results"
    write_cell(str(results), _record(A, accuracy=0.7, date="2026-11-28T11:19:40+00:00"))
    write_cell(str(results), _record(B, accuracy=0.7, date="2026-11-28T11:19:40+00:00"))
    source = _archive(tmp_path / "x.tar.gz", {
        f"{A}.json": _record(A, accuracy=0.1, date="2026-11-28T11:18:10+00:00"),
        f"{B}.json": _record(B, accuracy=0.9, date="2026-11-29T08:00:00+00:00")})
    done = dict(import_records(source, str(results)))
    assert done[A] == ("kept the complete record here, made later (2026-11-28T11:19:40+00:00 "
                       "against the incoming one's 2026-11-28T11:18:10+00:00)")
    assert _read(results, A)["result"]["test"]["accuracy"]["mean"] == 0.7
    assert done[B].startswith("replaced, complete (the incoming one is newer: 2026-11-29")
    assert _read(results, B)["result"]["test"]["accuracy"]["mean"] == 0.9


def _settings(record, **settings):
    record["settings"].update(settings)
    return record


@pytest.mark.parametrize("member, record, match", [
    ("no-such-cell.json", _record("no-such-cell"), "which the catalogue does not have"),
    # A's record (its settings as the catalogue gives them) renamed to B
    (f"{B}.json", dict(_record(A), cell=B, settings=dict(get_cell(A).settings)),
     f"cell {B} in its title, settings.paradigm"),
    (f"{A}.json", _settings(_record(A), epochs=99), f"cell {A} in its settings.epochs"),
    (f"{A}.json", dict(_record(A), scale="paper"), f"cell {A} in its scale"),
    # a part of a split the catalogue no longer has
    ("t1-cifar10-m5-authors-sa@5.json", dict(_record(C2), cell="t1-cifar10-m5-authors-sa@5",
                                             part=dict(_record(C2)["part"], index=5, parts=5)),
     "is part 5 of 5, but cell t1-cifar10-m5-authors-sa is now cut into 4 parts")])
def test_a_record_that_is_not_its_catalogue_cells_imports_nothing(tmp_path, member, record,
                                                                  match):
    results = tmp_path / "results"
    source = _archive(tmp_path / "x.tar.gz", {f"{C2}.json": _record(C2), member: record})
    r = CliRunner().invoke(cli, ["cells", "import", source, "--results", str(results)])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert f"x.tar.gz:results/cells/{member}" in r.output and match in r.output, r.output
    assert "nothing was imported" in r.output and not results.exists()


def test_one_cell_twice_in_an_archive_imports_nothing(tmp_path):
    path = tmp_path / "x.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for folder, accuracy in (("x", 0.1), ("y", 0.9)):
            data = json.dumps(_record(A, accuracy=accuracy)).encode()
            info = tarfile.TarInfo(f"{folder}/cells/{A}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(InputError, match=f"both hold a record of cell {A}"):
        import_records(str(path), str(tmp_path / "results"))
    assert not (tmp_path / "results").exists()
