r"""The one Table 1 driver: every paradigm and seed of one data set, aggregated and written.

Vashisht & Ramaswamy (2023), Section 2.4, Section 5 and Table 1. A Table 1
row is FCAMs of every paradigm (SA, HA, LV, the hybrid) trained with several
seeds, scored by accuracy and SAIF, mean +- std over seeds. :func:`run_table1`
does that once for every data set:

1. the settings are checked, then ``out`` (writable; ``resume`` needs it);
2. the data set loads (and refuses a run that cannot fit in memory or finish);
3. each paradigm trains its seeds (all at once where the data set can, else one
   after another, each resuming from its checkpoint in ``out/checkpoints``),
   one line and one ``history.jsonl`` record per epoch, one line per seed;
4. the runs are aggregated over seeds and the result set is written
   (:func:`minimal_attn.experiments.train_report.write_results`): results.json,
   config.json (with every paradigm's learning rates and the hybrid's switch
   epochs), history.jsonl, summary.md/csv, heat maps and per-instance scores.

A refusal (:class:`~minimal_attn.errors.InputError`) in steps 3-4 removes what
this call wrote; Ctrl-C keeps the checkpoints (a rerun with ``resume``
continues). What differs between data sets is a small adapter,
:class:`Table1Data`: :class:`.table1.MosaicTable1` (CIFAR-10/100, synthetic
image mosaics, the NumPy linear FCAM's vector mosaics) and
:class:`.hatexplain_table1.HateXplainTable1` (HateXplain posts, the text FCAM).
"""

import json
import os
from typing import Optional, Protocol, Sequence

from minimal_attn.errors import DivergedError, InputError, check_paradigms
from minimal_attn.experiments.config import check_writable, resume_note
from minimal_attn.experiments.io import undo_on_refusal
from minimal_attn.experiments.run_folders import check_run_folder
from minimal_attn.experiments.train_loop import checkpoint_path, read_checkpoint
from minimal_attn.experiments.train_report import HistoryLog, write_results


class Table1Data(Protocol):
    """What the driver needs to know of one data set."""

    paradigms: Sequence[str]    # canonical names (after check()), trained in this order
    seeds: Sequence[int]        # the seed values (a range), trained in this order
    focus: str                  # the focus's name in epoch lines: a_z, or a_z* for a rationale
    title: Optional[str]        # the heat maps' label (None: m=<m>)

    def check(self) -> None:
        """Raise InputError for a setting that cannot run, before anything is read."""

    def load(self, log) -> None:
        """Resolve the device, check memory and steps, read the data."""

    def run_config(self, paradigm, seed):
        """The TrainConfig of one run (its paradigm's learning rates, the hybrid's switch)."""

    def checkpoint_reader(self):
        """(trainer class: ``KIND``, ``LR_TABLE``, static ``read``; data fingerprint) of its
        checkpoints, so a resume checks them all before training (optional: without it,
        each is checked when its run resumes)."""

    def train_seed(self, config, out, resume, progress, callback, log) -> dict:
        """One (paradigm, seed) through ``run_epochs``: its result dict."""

    def train_seeds(self, paradigm, out, resume, progress, callback, log) -> Optional[list]:
        """Every seed of ``paradigm`` at once, or None to train them one by one."""

    def aggregate(self, runs) -> dict:
        """results.json's entry of one paradigm from its runs."""

    def describe(self, runs) -> dict:
        """config.json: the settings as used (see :func:`paradigm_rates`)."""

    def summary(self, results, meta) -> str:
        """summary.md: our rows beside the paper's."""


def _is_checkpoint(path):
    return os.path.basename(os.path.dirname(path)) == "checkpoints" and ".ckpt" in path

def run_table1(data, out=None, resume=False, progress=None, log=None, on_epoch=None,
               on_divergence="stop"):
    """Train every paradigm and seed of ``data`` (a :class:`Table1Data`); write to ``out``.

    ``progress(label, done, total, note)``: every step
    (:mod:`minimal_attn.experiments.progress`); ``log(line)``:
    one line per epoch, per-seed results and warnings; ``on_epoch(record)``:
    each epoch's history record. Returns ``(results, meta)``:
    ``results[paradigm]["train"|"test"]`` holds the means over seeds (fractions)
    with ``_std``, ``per_seed`` and the heat map; ``meta`` is config.json.

    ``on_divergence``: ``"stop"`` refuses the whole run when one seed diverges
    (:class:`~minimal_attn.errors.DivergedError`); ``"record"`` (seeds trained one by one)
    keeps that seed out of the means, names it in ``results[paradigm]["diverged"]``
    (seed -> the error) and goes on, so a paper-size run reports how many of its seeds
    the paper's rates carry through; a paradigm whose every seed diverges is refused.
    """
    if on_divergence not in ("stop", "record"):
        raise InputError(f"on_divergence must be stop or record, got {on_divergence!r}",
                         param="on_divergence")
    log = log or (lambda line: None)
    data.check()
    # results are keyed by these names: canonical, once each, at least one (every data set)
    data.paradigms = check_paradigms(data.paradigms, param="paradigms")
    if resume and out is None:
        raise InputError("resume needs out: the folder whose checkpoints/ to continue from",
                         param=("resume", "out"))
    if out is not None:
        check_writable(out)
        check_run_folder(out, "train")             # not another command's run folder
    data.load(log)
    if resume:
        _check_scope(data, out)
        _check_checkpoints(data, out)
    epoch_done = HistoryLog(out).epoch_callback(log, lambda r: format_epoch(r, data.focus),
                                                on_epoch)
    try:
        # a refusal (a diverged run, a checkpoint of other settings) removes this call's
        # new files but keeps the checkpoints other runs wrote: they resume
        with undo_on_refusal(out, keep=_is_checkpoint):
            failed = {}
            runs = {p: _train_paradigm(data, p, out, resume, progress, epoch_done, log,
                                       failed.setdefault(p, {}) if on_divergence == "record"
                                       else None)
                    for p in data.paradigms}
            results = {p: data.aggregate(runs[p]) for p in data.paradigms}
            for p, seeds in failed.items():
                if seeds:
                    results[p]["diverged"] = seeds
            meta = data.describe(runs)
            if "hybrid" in runs:
                meta["hybrid_switch_epochs"] = {str(r["seed"]): r["switch_epoch"]
                                                for r in runs["hybrid"]}
            if out is not None:
                write_results(out, results, runs, meta, data.summary(results, meta), data.title)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted; " + resume_note(out)) from None
    return results, meta


def _check_scope(data, out):
    """Refuse a resume that leaves out paradigms or seeds of the run in ``out``: its
    results.json and history.jsonl are written anew from this call's runs, so theirs
    would be lost while their checkpoints and figures stay (a superset is fine)."""
    try:
        with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
            old = json.load(f)
        before = {"paradigm": list(old["paradigms"]), "seed": list(old["seeds"])}
    except (OSError, ValueError, KeyError, TypeError):
        return                       # no finished run here yet: the checkpoints decide
    now = {"paradigm": list(data.paradigms), "seed": list(data.seeds)}
    dropped = {k: [v for v in before[k] if v not in now[k]] for k in before}
    if any(dropped.values()):
        left = "; ".join(f"{k}s {', '.join(map(str, v))}" for k, v in dropped.items() if v)
        raise InputError(f"{out} holds a run of paradigms {', '.join(before['paradigm'])} and "
                         f"seeds {', '.join(map(str, before['seed']))}; this resume leaves out "
                         f"{left}, whose results it would drop: resume with the run's "
                         "paradigms and seeds (more is fine), or copy its checkpoints/ to "
                         "another --out and resume there",
                         param=("resume", "out"))


def _check_checkpoints(data, out):
    """Refuse a resume, before any run trains, when one checkpoint it will read (of every
    paradigm and seed) is unreadable without a usable ``.prev``, of other settings or data,
    or holds more epochs than asked: else the runs before it would be trained further and
    the refusal come half-way (a larger ``epochs`` extends SA but is refused by the
    hybrid, whose switch depends on it)."""
    reader = getattr(data, "checkpoint_reader", None)
    if reader is None:
        return
    trainer, fingerprint = reader()
    for p in data.paradigms:
        for seed in data.seeds:
            config = data.run_config(p, seed)
            read_checkpoint(checkpoint_path(out, config), trainer, config, fingerprint, None,
                            aside=False)     # the resuming read warns and sets a file aside


def _train_paradigm(data, p, out, resume, progress, epoch_done, log, failed=None):
    """The runs of paradigm ``p``; with ``failed`` (a dict) a seed that diverges is put
    there (seed -> its error) instead of refusing the run (seeds one by one only)."""
    runs = data.train_seeds(p, out, resume, progress, epoch_done, log)
    if runs:
        for r in runs:
            _report(r, log)
        return runs
    runs = []
    for seed in data.seeds:
        config = data.run_config(p, seed)
        if resume and not any(os.path.exists(checkpoint_path(out, config) + end)
                              for end in ("", ".prev")):
            log(f"no checkpoint for {p} seed {seed} in {out}: starting fresh")
        try:
            runs.append(data.train_seed(config, out, resume, progress, epoch_done, log))
        except DivergedError as err:
            if failed is None or len(failed) + 1 == len(data.seeds):
                raise                          # refused, or no seed left to report
            failed[str(seed)] = str(err)
            log(f"{p} seed {seed}: {err}; recorded, the other seeds go on")
            continue
        _report(runs[-1], log)
    return runs


def _report(r, log):
    """One line for a finished (paradigm, seed), then its warnings."""
    p, seed = r["paradigm"], r["seed"]
    log(f"{p} seed {seed}: " + ", ".join(
        f"{s} accuracy {100 * r[s]['accuracy']:.1f}% SAIF {100 * r[s]['saif']:.1f}%"
        for s in ("train", "test")) + f" ({r['seconds']:.1f} s training)")
    for warning in r["warnings"]:
        log(f"warning: {p} seed {seed}: {warning}")


def format_epoch(r, focus="a_z"):
    """The line of one epoch's history record (test numbers on the epochs that score them)."""
    test = "" if r.get("test_accuracy") is None else (
        f" test acc {100 * r['test_accuracy']:.1f}% test SAIF {100 * r['test_saif']:.1f}%")
    return (f"{r['paradigm']} seed {r['seed']} epoch {r['epoch']} ({r['phase']}): loss "
            f"{r['loss']:.4f} train acc {100 * r['train_accuracy']:.1f}% mean {focus} "
            f"{r['mean_a_z']:.3f}" + test)


def paradigm_rates(data, table=None):
    """config.json's ``lr``: paradigm -> its lr, or {"sa": .., "ha": ..} for the hybrid.

    ``table``: the rates of paradigms given none (None: the run config's own).
    """
    out = {}
    for p in data.paradigms:
        rates = data.run_config(p, 0).rates(table)
        out[p] = rates if p == "hybrid" else rates[p]
    return out
