r"""Which data a finished sweep cell trained on: a rerun compares before it skips the cell.

``data_dir`` says where a cell's data are, not what they are
(:data:`~minimal_attn.experiments.sweep_grid.OPERATIONAL`): it is in neither a cell's name
nor the settings its record must match, so the 10,000-image subset and the full CIFAR-10
give the same cells. A cell's record names its data instead:
``provenance.data_fingerprint`` (:func:`~minimal_attn.experiments.checkpoints.data_fingerprint`,
the one its checkpoints hold): of its train and test mosaics for a V&R Table 1 cell, of
its token ids for a Snell Table 2 row. Before a finished cell is skipped, :func:`check_data`
computes the fingerprint of the data this rerun would train on, nothing trained
(:meth:`.table1.MosaicTable1.fingerprint`: the mosaics built;
:func:`.sweep_table2.row_fingerprint`: the text read and tokenised, through the row's saved
SentencePiece model), and compares.

**A difference is refused** in one line, before anything is written or started, naming the
cell, both fingerprints and the two ways on: another ``out`` for the other data, or
``retrain_other_data``, which sets the old records and cell folders aside
(``out/other-data/FINGERPRINT/``, :func:`set_aside`) and trains those cells afresh.
Refusing is the default because a rerun on other data into the same ``out`` is a slip
far more often than a plan: retraining by itself would replace finished numbers (hours of
GPU time) without being asked, and skipping would merge numbers of two data sets as one
table. Either way no merged result ever holds records of two data sets.

Not compared (they are skipped as before): records written before records named their
data (one line says how many). The HateXplain rows are not sweep cells.

Cost: the mosaics' fingerprint hashes their shapes, labels and every (N // 16)-th
mosaic, so of CIFAR mosaics only those are filled (``load_mosaic_splits(only_rows=...)``:
well under a second a cell, where building 10,000 mosaics of m = 20 would take 600 MB and
seconds, a login node's memory for CIFAR-100); generated data (synthetic, vectors) are
built, in milliseconds at a sweep's tiny sizes. A Table 2 row's text is read whole (full
SST-2 or Multi30k: about 0.4 s, 60 MB). One computation serves the cells that share their data
(the paradigms of a grid, the seeds of a row).
"""

import json
import os
import shutil

from minimal_attn.errors import InputError

#: ``out/OTHER_DATA/FINGERPRINT/``: where ``retrain_other_data`` sets the records and folders
#: of cells of other data aside.
OTHER_DATA = "other-data"


def cell_fingerprint(cell, operational, memo=None):
    """The data fingerprint of the mosaics Table 1 ``cell`` would train on with
    ``operational`` (its ``data_dir``), without training or torch; ``memo`` (a dict)
    shares the work between cells of the same data."""
    from minimal_attn.backends.vr.table1 import MosaicTable1, mosaic_arguments
    from minimal_attn.experiments.config import check_config
    from minimal_attn.experiments.sweep_cell import cell_config

    memo = {} if memo is None else memo
    config = check_config(cell_config(cell, operational))
    args = mosaic_arguments(config)
    key = json.dumps(args, sort_keys=True)
    if key not in memo:
        memo[key] = MosaicTable1(config).fingerprint()
    return memo[key]


def fingerprint_now(out, cell, operational, memo=None):
    """The data fingerprint of what ``cell`` of the sweep ``out`` would train on now: a
    Table 1 cell's mosaics (:func:`cell_fingerprint`), a Table 2 row's token ids
    (:func:`.sweep_table2.row_fingerprint`)."""
    if cell.kind != "table2":
        return cell_fingerprint(cell, operational, memo)
    from minimal_attn.experiments.sweep_cell import cell_folder
    from minimal_attn.experiments.sweep_table2 import row_fingerprint

    return row_fingerprint(cell, operational, cell_folder(out, cell.name), memo)


def recorded_fingerprint(record):
    """The data fingerprint a record names (None: written before records named it)."""
    return (record.get("provenance") or {}).get("data_fingerprint")


def check_data(out, cells, statuses, operational, retrain=False, log=None):
    """The finished cells whose records name other data than this rerun's.

    ``statuses``: :func:`.sweep_cell.record_status` of each cell, by name;
    ``operational``: the sweep's ``data_dir`` and the like. Returns ``{name: (recorded,
    now)}`` (``now`` a fingerprint, or ``(None, why)`` when this data cannot build the
    cell's mosaics or a row's token ids); unless ``retrain``, a non-empty answer is refused instead
    (InputError, one line). Reads only: :func:`set_aside` moves the old records.
    """
    from minimal_attn.experiments.sweep_cell import read_record

    log = log or (lambda line: None)
    memo, other, unnamed = {}, {}, []
    for cell in cells:
        if statuses[cell.name] != "done":
            continue
        old = recorded_fingerprint(read_record(out, cell.name))
        if old is None:
            unnamed.append(cell.name)
            continue
        try:
            new = fingerprint_now(out, cell, operational, memo)
        except InputError as exc:                     # this data cannot build its mosaics
            new = None, " ".join(str(exc).split())
        if new != old:
            other[cell.name] = (old, new)
    if unnamed:
        log(f"{len(unnamed)} finished cell(s) ({unnamed[0]}{', ...' if len(unnamed) > 1 else ''})"
            " have records that name no data (written before records did): not compared "
            "with the data of this rerun")
    if other and not retrain:
        raise InputError(_refusal(out, cells, other, operational),
                         param=("out", "retrain_other_data", "data_dir"))
    return other


def set_aside(out, other, log=None):
    """Move the folder, then the record, of each cell of ``other`` (:func:`check_data`) to
    ``out/other-data/FINGERPRINT/``, where no merge reads them: the cells then train
    afresh, from no checkpoint of the old data, and a driver killed between the two moves
    finds the record still in place, so compares again."""
    from minimal_attn.experiments.results_store import cell_path
    from minimal_attn.experiments.sweep_cell import cell_folder

    log = log or (lambda line: None)
    for name, (old, new) in other.items():
        aside = os.path.join(out, OTHER_DATA, _short(old))
        os.makedirs(aside, exist_ok=True)
        if os.path.isdir(cell_folder(out, name)):
            shutil.rmtree(os.path.join(aside, name), ignore_errors=True)    # set aside before
            os.replace(cell_folder(out, name), os.path.join(aside, name))
        os.replace(cell_path(out, name), os.path.join(aside, f"{name}.json"))
        log(f"{name}: its record is of other data ({_short(old)}; this rerun's "
            f"{_short(new)}): it and the cell's folder are set aside in {aside}; the cell "
            "trains afresh")


def _short(fingerprint):
    return fingerprint[:8] if isinstance(fingerprint, str) else "none"


def _refusal(out, cells, other, operational):
    """The one line that refuses a rerun on other data."""
    name, (old, new) = next(iter(other.items()))
    cell = next(c for c in cells if c.name == name)
    read = cell.kind == "table2" or cell.settings["dataset"].startswith("cifar")
    source = f"data_dir {operational['data_dir']}" if operational.get("data_dir") and read \
        else "this code"
    now = f"{source} gives {_short(new)}" if isinstance(new, str) else \
        f"{source} cannot {'read its data' if cell.kind == 'table2' else 'build its mosaics'}" \
        f": {new[1]}"
    more = f"; so did {len(other) - 1} more finished cell(s)" if len(other) > 1 else ""
    return (f"{name} finished on other data than this rerun would train on (its record's "
            f"data fingerprint {_short(old)}; {now}){more}: give this data another out, or "
            f"pass retrain_other_data to train {'them' if more else 'it'} again on this data "
            f"({'their old records and folders' if more else 'its old record and folder'}"
            f" are set aside in {os.path.join(out, OTHER_DATA)})")
