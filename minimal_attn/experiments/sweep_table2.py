r"""Snell Table 2 rows as sweep cells: the settings of ``attn-dyn agreement``, crossed.

Snell et al. (2021), Table 2: one row is one data set, four models (standard,
second seed, uniform and, for classification, frozen attention) and the
proxies, agreement A of Snell Eq. (10) and xi of Snell Eq. (11) between their attention
(:mod:`minimal_attn.experiments.agreement_table`). A grid with ``table=2`` has the
settings of ``attn-dyn agreement`` as keys
(:class:`~minimal_attn.backends.snell.agreement.AgreementConfig`); each
combination is one cell named ``t2-DATASET`` (as in ``attn-dyn cells``),
then ``key=value`` for each setting that differs from its default.

:func:`run_row` is what a worker runs for such a cell:
:func:`~minimal_attn.backends.snell.agreement.run_agreement`, which reuses
the models that finished, and the record's result of ``attn-dyn cells``, with the
fingerprint of the token ids the models trained on (:func:`row_fingerprint`), which a
rerun compares before it skips the row (:mod:`minimal_attn.experiments.sweep_data`).
"""

import itertools
import json
import math
import os
import typing
from dataclasses import fields

from minimal_attn.errors import InputError

#: Where and how fast, and the data's files: one value each, not in names nor in the match
#: of settings on rerun (the data fingerprint matches what data_dir and embeddings hold).
OPERATIONAL = ("data_dir", "device", "embeddings", "workers", "threads")
#: The task of each data set the paper runs (other tasks are named in the cell's name).
USUAL_TASK = {"sst2": "classify", "multi30k": "translate"}
_SIZES = ("steps", "hidden", "emb", "out_hidden", "batch_size", "max_train", "max_val",
          "vocab_size", "proxy_d", "proxy_epochs")


def _config_class():
    try:
        from minimal_attn.backends.snell.agreement import AgreementConfig
    except ImportError as exc:
        raise InputError(f"table 2 cells need torch ({exc}): pip install torch==2.13.0, then "
                         "pip install \".[torch]\"") from None
    return AgreementConfig


def keys():
    return tuple(sorted(f.name for f in fields(_config_class())))


def value(key, raw):
    """One value of ``key``, typed as its field of ``AgreementConfig``."""
    from minimal_attn.experiments.sweep_grid import typed

    f = {f.name: f for f in fields(_config_class())}[key]
    args = [a for a in typing.get_args(f.type) if a is not type(None)]
    return typed(key, raw, args[0] if args else f.type, f.default is None)


def expand(grid):
    """Every combination of ``grid`` (no ``table`` key) as a Table 2 cell, sorted by name."""
    from minimal_attn.experiments.agreement_table import PAPER_NAME, PAPER_TABLE2
    from minimal_attn.experiments.cell_catalogue import Cell
    from minimal_attn.experiments.sweep_grid import cell_name

    config_class = _config_class()
    from minimal_attn.backends.snell.agreement import check_options
    base = {f.name: f.default for f in fields(config_class) if f.name not in OPERATIONAL}
    names = sorted(grid)
    cells = {}
    for combo in itertools.product(*(grid[k] for k in names)):
        given = dict(zip(names, combo))
        config = config_class(**given)
        if config.task not in ("classify", "translate"):
            raise InputError(f"grid: task must be classify or translate, got {config.task!r}")
        check_options(config)            # every row's settings, before anything is written
        settings = {k: getattr(config, k) for k in base}
        head = ["t2", config.dataset] + (
            [config.task] if config.task != USUAL_TASK.get(config.dataset, "classify") else [])
        name = cell_name(head, settings, base, skip=("dataset", "task"))
        paper = PAPER_NAME.get(config.dataset)
        cells[name] = Cell(name, "table2", "cpu" if set(_SIZES) & set(given) else "paper",
                           f"{paper or config.dataset} agreement row ({config.task})",
                           settings, "", {"row": list(PAPER_TABLE2[paper])} if paper else {})
    return [cells[n] for n in sorted(cells)]


def row_task(cell, operational, folder):
    """The token ids the row's models train on (a :class:`~minimal_attn.datasets.seq.TextTask`),
    read as ``agreement.prepare`` reads them: translation through the SentencePiece model
    saved in the row's ``folder`` where there is one. Writes nothing."""
    from minimal_attn.datasets.seq import load_text_task

    c = _config_class()(**cell.settings, **operational)
    spm = os.path.join(folder, "spm.model")
    return load_text_task(c.task, c.dataset, c.data_dir, c.max_train, c.max_val, c.vocab_size,
                          model_file=spm if os.path.exists(spm) else None, max_len=c.max_len)


def row_fingerprint(cell, operational, folder, memo=None):
    """The :func:`~minimal_attn.experiments.checkpoints.data_fingerprint` of
    :func:`row_task` (the one the row's model checkpoints hold), with the content of the
    row's GloVe file where it has one (its models' checkpoints name that in their
    settings); ``memo`` (a dict) shares it between rows of the same data (and,
    translating, the same SentencePiece model)."""
    from minimal_attn.backends.snell.inputs import embeddings_hash
    from minimal_attn.experiments.checkpoints import data_fingerprint, file_hash

    memo = {} if memo is None else memo
    s, spm, glove = cell.settings, os.path.join(folder, "spm.model"), operational.get("embeddings")
    pieces = file_hash(spm) if s["task"] == "translate" and os.path.exists(spm) else None
    vectors = [f"embeddings {embeddings_hash(glove)}"] if glove else []
    key = "table2 " + json.dumps([s["task"], s["dataset"], operational.get("data_dir"),
                                  s["max_train"], s["max_val"], s["max_len"],
                                  s["vocab_size"] if s["task"] == "translate" else None, pieces,
                                  vectors])
    if key not in memo:
        memo[key] = data_fingerprint(row_task(cell, operational, folder), *vectors)
    return memo[key]


def run_row(cell, folder, operational, log):
    """Train or reuse the row's models in ``folder``; ``(result, device, data)`` of its
    record, ``data`` the fingerprint of the token ids they trained on (:func:`row_fingerprint`,
    read once more after training: a translation row has saved its SentencePiece model)."""
    from minimal_attn.backends.snell.agreement import AgreementConfig, run_agreement
    from minimal_attn.experiments.cell_runners import agreement_result

    def progress(label, done, total, note=None):      # a log line per model and evaluation
        if note is not None:
            log(f"{label}: {note} of {total}")
        elif done == total:
            log(f"{label}: done")

    config = AgreementConfig(**cell.settings, **operational)
    result = agreement_result(run_agreement(config, folder, progress=progress))
    return result, str(config.device or "auto"), row_fingerprint(cell, operational, folder)


def _pct(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def headline(record):
    r = record["result"]
    return f"A(α,β) {_pct(r['row'][3])}%, {r['performance_name']} {_pct(r['performance'])}%"


def summary_lines(entries):
    """Markdown: our row of each cell (%), then the paper's where it has one."""
    from minimal_attn.experiments.agreement_table import HEADERS

    lines = ["| cell | " + " | ".join(HEADERS) + " | performance |",
             "|---" * (len(HEADERS) + 2) + "|"]
    for e in entries:
        r = e["result"]
        lines.append(f"| {e['cell']} | " + " | ".join(_pct(v) for v in r["row"])
                     + f" | {r['performance_name']} {_pct(r['performance'])} |")
        if e.get("paper"):
            lines.append("| paper | " + " | ".join(f"{v:g}" for v in e["paper"]["row"])
                         + " | |")
    return lines


def csv_rows(entries):
    from minimal_attn.experiments.agreement_table import COLUMNS

    header = ["cell", "dataset", "task"] + list(COLUMNS) + ["performance", "performance_name"] \
        + [f"paper_{c}_pct" for c in COLUMNS]
    rows = [[e["cell"], e["settings"]["dataset"], e["settings"]["task"]] + e["result"]["row"]
            + [e["result"]["performance"], e["result"]["performance_name"]]
            + list((e.get("paper") or {}).get("row") or [""] * len(COLUMNS)) for e in entries]
    return header, rows
