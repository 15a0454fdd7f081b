"""attn-dyn cells import: records a GPU job returned come home checked, all or none,
and a partial record never replaces a complete one."""

import io
import json
import tarfile

import pytest
from click.testing import CliRunner

from minimal_attn.cli.main import cli
from minimal_attn.errors import InputError
from minimal_attn.experiments.results_import import import_records
from minimal_attn.experiments.results_store import cell_path, write_cell


def _record(name, cut=False, accuracy=0.5):
    stat = {"per_seed": [accuracy], "mean": accuracy, "std": 0.0}
    return {"format": 1, "cell": name, "kind": "table1", "scale": "paper", "title": name,
            "settings": {}, "provenance": {"card": "H200", "commit": "c" * 40},
            "result": {"train": {"accuracy": stat, "saif": stat},
                       "test": {"accuracy": stat, "saif": stat},
                       "time_limited": {"0": cut}}}


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
    write_cell(str(results), _record("a", accuracy=0.7))          # complete, here already
    write_cell(str(results), _record("b", cut=True))              # partial, here already
    source = _archive(tmp_path / "x.tar.gz", {
        "a.json": _record("a", cut=True, accuracy=0.1), "b.json": _record("b", accuracy=0.9),
        "c@2.json": _record("c@2", cut=True)})
    done = dict(import_records(source, str(results)))
    assert done["a"].startswith("kept")
    assert _read(results, "a")["result"]["test"]["accuracy"]["mean"] == 0.7
    assert done["b"] == "replaced, complete" and _read(results, "b")["result"]["test"][
        "accuracy"]["mean"] == 0.9
    assert done["c@2"] == "new, partial"
    assert dict(import_records(source, str(results)))["b"] == "unchanged"
    # a folder of records imports the same way
    other = tmp_path / "other"
    assert dict(import_records(str(results), str(other))) == {
        "a": "new, complete", "b": "new, complete", "c@2": "new, partial"}


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
    write_cell(str(results), _cut("a", **here))
    done = dict(import_records(_archive(tmp_path / "s.tar.gz", {"a.json": _cut("a", **shorter)}),
                               str(results)))
    assert done["a"].startswith("kept the partial record here")
    assert _read(results, "a")["result"] == _cut("a", **here)["result"]
    done = dict(import_records(_archive(tmp_path / "l.tar.gz", {"a.json": _cut("a", **longer)}),
                               str(results)))
    assert done["a"] == "replaced, partial"
    assert _read(results, "a")["result"] == _cut("a", **longer)["result"]


@pytest.mark.parametrize("bad, match", [
    (b"{not json", "not JSON"),
    (json.dumps({"cell": "z"}).encode(), "not a cell record"),
    (json.dumps(_record("y")).encode(), "holds the record of cell 'y'")])
def test_one_bad_record_imports_nothing(tmp_path, bad, match):
    results = tmp_path / "results"
    source = _archive(tmp_path / "x.tar.gz", {"a.json": _record("a"), "z.json": bad})
    with pytest.raises(InputError, match=match):
        import_records(source, str(results))
    assert not results.exists()


def test_the_import_command(tmp_path):
    runner = CliRunner()
    source = _archive(tmp_path / "x.tar.gz", {"a.json": _record("a")})
    r = runner.invoke(cli, ["cells", "import", source, "--results", str(tmp_path / "r")])
    assert r.exit_code == 0 and "a: new, complete" in r.output and "cells report" in r.output
    for bad in (str(tmp_path / "missing.tar.gz"), str(tmp_path / "x.txt")):
        (tmp_path / "x.txt").write_text("plain text")
        r = runner.invoke(cli, ["cells", "import", bad, "--results", str(tmp_path / "s")])
        assert r.exit_code == 2 and r.output.count("Error:") == 1, r.output
        assert "Traceback" not in r.output and not (tmp_path / "s").exists()


def test_a_cut_write_left_beside_the_records_is_not_a_record(tmp_path):
    # a kill between writing the temporary file and renaming it leaves .tmp-*NAME.json
    from minimal_attn.experiments.results_store import read_cells

    results = tmp_path / "results"
    write_cell(str(results), _record("a"))
    folder = results / "cells"
    (folder / ".tmp-x1b2a.json").write_text(json.dumps(_record("a", accuracy=0.1)))
    (folder / ".tmp-empty.json").write_text("")
    assert [r["cell"] for r in read_cells(str(results))] == ["a"]
    assert read_cells(str(results))[0]["result"]["test"]["accuracy"]["mean"] == 0.5
    # nor does one come home in a GPU job's archive or a folder of records
    source = _archive(tmp_path / "x.tar.gz", {"b.json": _record("b"),
                                              ".tmp-zz.json": _record("z")})
    assert dict(import_records(source, str(results))) == {"b": "new, complete"}
    assert dict(import_records(str(folder), str(tmp_path / "other"))) == {
        "a": "new, complete", "b": "new, complete"}


def test_parts_of_another_split_or_holding_a_seed_twice_import_nothing(tmp_path):
    """A cell re-cut into another number of parts, or parts whose seed blocks overlap,
    would count a seed twice in the joined row."""
    def part(index, parts, first, seeds=1):
        record = dict(_record(f"tiny-t1-synthetic-sa@{index}"), scale="tiny")
        record["part"] = {"of": "tiny-t1-synthetic-sa", "index": index, "parts": parts,
                          "first_seed": first, "seeds": seeds, "title": "T"}
        return record

    results = tmp_path / "results"
    write_cell(str(results), part(1, 2, 0))                         # the catalogue: 2 parts
    before = sorted(p.name for p in (results / "cells").iterdir())
    for members, match in (({"tiny-t1-synthetic-sa@2.json": part(2, 3, 1)}, "now cut into 2"),
                           ({"tiny-t1-synthetic-sa@2.json": part(2, 2, 0)}, "both hold seed 0")):
        with pytest.raises(InputError, match=match):
            import_records(_archive(tmp_path / "x.tar.gz", members), str(results))
        assert sorted(p.name for p in (results / "cells").iterdir()) == before
    done = import_records(_archive(tmp_path / "x.tar.gz",
                                   {"tiny-t1-synthetic-sa@2.json": part(2, 2, 1)}),
                          str(results))
    assert done == [("tiny-t1-synthetic-sa@2", "new, complete")]
