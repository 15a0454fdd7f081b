r"""Table 1 of an FCAM training experiment: aggregation over seeds, summaries, result files.

Vashisht & Ramaswamy (2023), Section 2.4 and Table 1. :func:`aggregate` turns
per-seed runs (``run_epochs`` results) into mean +- std over seeds;
:func:`summary_markdown` prints them beside the paper's Table 1 numbers
(:data:`PAPER_TABLE1`); :func:`write_results` writes the whole result set so
that a reader never sees a partial one (``results.json`` is removed first and
written last); :class:`HistoryLog` appends one JSON line per epoch as it happens.
"""

import json
import math
import os

import numpy as np

from minimal_attn.datasets.splits import CIFAR_DATASETS
from minimal_attn.experiments.io import atomic_open, ensure_dir, write_csv, write_json, write_text

#: Table 1 of the paper (test set, %): (dataset, m) -> paradigm -> (SAIF, accuracy).
PAPER_TABLE1 = {
    ("cifar10", 5): {"ha": (37.8, 63.3), "sa": (37.1, 75.3), "hybrid": (59.0, 76.6),
                     "lv": (62.0, 77.9)},
    ("cifar10", 20): {"ha": (1.9, 42.1), "sa": (23.8, 65.2), "hybrid": (38.2, 66.0),
                      "lv": (47.2, 71.0)},
    ("cifar100", 5): {"ha": (13.6, 46.6), "sa": (79.2, 83.2), "hybrid": (83.2, 80.0),
                      "lv": (77.5, 79.7)},
    ("cifar100", 20): {"ha": (1.7, 8.2), "sa": (67.0, 72.2), "hybrid": (66.8, 71.0),
                       "lv": (66.5, 69.0)},
}
METRICS = ("accuracy", "saif", "ftpt", "ftpf", "ffpt", "ffpf")


def mean_std(values):
    """Mean and sample standard deviation over seeds (std 0 for one seed)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def aggregate(runs):
    """results.json entry of one paradigm from its per-seed runs."""
    entry = {}
    for split in ("train", "test"):
        per_seed = [dict(r[split], seed=r["seed"], seconds=r["seconds"]) for r in runs]
        agg = {}
        for key in METRICS:
            agg[key], agg[key + "_std"] = mean_std([s[key] for s in per_seed])
        agg["heatmap"] = np.mean([s["heatmap"] for s in per_seed], axis=0).tolist()
        agg["per_seed"] = per_seed
        entry[split] = agg
    entry["history"] = [{"seed": r["seed"], "epochs": r["history"]} for r in runs]
    entry["warnings"] = {str(r["seed"]): r["warnings"] for r in runs if r["warnings"]}
    if any(r.get("dead_units") for r in runs):
        entry["dead_units"] = {str(r["seed"]): r["dead_units"] for r in runs}
    if runs and runs[0]["paradigm"] == "hybrid":
        entry["switch_epoch"] = {str(r["seed"]): r["switch_epoch"] for r in runs}
    return entry


def pct(entry, key):
    """``mean ± std`` in percent; "n/a" where the metric is undefined (NaN: e.g. SAIF on
    posts of which none has a rationale)."""
    if not math.isfinite(entry[key]):
        return "n/a"
    return f"{100 * entry[key]:.1f} ± {100 * entry[key + '_std']:.1f}"


SUMMARY_HEADER = ["paradigm", "m", "train accuracy (%)", "train SAIF (%)",
                  "test accuracy (%)", "test SAIF (%)", "paper test accuracy (%)",
                  "paper test SAIF (%)"]


def summary_rows(results, m, dataset=None):
    """One row per paradigm: ours (mean ± std) and the paper's Table 1 ('-' if none)."""
    paper = PAPER_TABLE1.get((dataset, m), {})
    rows = []
    for p, e in results.items():
        saif, acc = paper.get(p, ("-", "-"))
        rows.append([p, m, pct(e["train"], "accuracy"), pct(e["train"], "saif"),
                     pct(e["test"], "accuracy"), pct(e["test"], "saif"), acc, saif])
    return rows


def summary_markdown(results, m, dataset=None):
    """Table-1-style Markdown table: mean ± std over seeds, in percent, beside the paper's."""
    lines = ["| " + " | ".join(SUMMARY_HEADER) + " |",
             "|" + "---|" * len(SUMMARY_HEADER)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |"
              for row in summary_rows(results, m, dataset)]
    return "\n".join(lines) + "\n"


def recipe_text(meta):
    """One Markdown paragraph naming the training recipe of a result set's ``config.json``:
    protocol, optimizer and its rates, the focus start, the classifier, (CIFAR) the pixel
    scaling and where the test images come from, and the stop rule."""
    rates = "; ".join(f"{p} " + (", ".join(f"{k} {v:g}" for k, v in lr.items())
                                 if isinstance(lr, dict) else f"{lr:g}")
                      for p, lr in meta.get("lr", {}).items())
    optimizer = meta.get("optimizer", "sgd")
    extra = (f", momentum {meta['momentum']:g}" if optimizer == "sgd" and meta.get("momentum")
             else "")
    if optimizer == "adam" and meta.get("adam_betas"):
        extra = f", betas {meta['adam_betas'][0]:g}/{meta['adam_betas'][1]:g}"
    parts = [f"protocol {meta.get('protocol') or 'none (options as given)'}",
             f"optimizer {optimizer}{extra}, lr {rates}",
             f"batch {meta.get('batch_size')}",
             f"focus start {meta.get('focus_init', 'zero')}",
             "classifier " + ("linear, the core's W (V&R Sec. 4)" if meta.get("backend") ==
                              "numpy" else meta.get("classifier", "paper"))]
    if meta.get("dataset") in CIFAR_DATASETS:
        parts.append({"standard": "pixels standardised (CIFAR-10 mean, std)",
                      "half": "pixels in [-1, 1]"}[meta.get("pixels", "standard")])
        parts.append({"test": "test mosaics from the held-out test images",
                      "train": "test mosaics from the training images (seen images, new "
                               "mosaics)"}[meta.get("test_images", "test")])
    stop = meta.get("stop_loss")
    if stop is None:
        parts.append(f"no stop rule: every run trains {meta.get('epochs')} epochs")
    else:
        stopped = {p: [e for e in by_seed.values() if e is not None]
                   for p, by_seed in meta.get("stopped_epochs", {}).items()}
        said = "; ".join(f"{p} {len(e)} of {len(meta['stopped_epochs'][p])} seeds "
                         f"(epochs {', '.join(map(str, e))})" if e else f"{p} none"
                         for p, e in stopped.items())
        parts.append(f"stop at mean epoch loss <= {stop:g} within {meta.get('epochs')} "
                     f"epochs; stopped: {said or 'none'}")
    return "Recipe: " + "; ".join(parts) + ".\n"


class HistoryLog:
    """``history.jsonl`` in ``out``: one JSON object per (paradigm, seed, epoch)."""

    def __init__(self, out):
        self.path = None if out is None else os.path.join(out, "history.jsonl")

    def append(self, record):
        if self.path is not None:
            ensure_dir(os.path.dirname(self.path))     # created only when first written
            with open(self.path, "a") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()

    def epoch_callback(self, log, format_record, on_epoch=None):
        """``callback(epoch, record)`` for the training loop: append, print one line, notify."""
        def done(epoch, record):
            self.append(record)
            log(format_record(record))
            if on_epoch is not None:
                on_epoch(record)
        return done

    def rewrite(self, runs):
        """The complete file, atomically, in (paradigm, seed, epoch) order."""
        if self.path is not None:
            with atomic_open(self.path, "w") as f:
                for p in runs:
                    for r in runs[p]:
                        for record in r["history"]:
                            f.write(json.dumps(record) + "\n")


def seeds_used(entry):
    """(the seeds one paradigm's means average, those that diverged and are left out:
    ``entry["diverged"]``, seeds trained one by one with ``on_divergence="record"``)."""
    return ([s["seed"] for s in entry["test"]["per_seed"]],
            sorted(int(k) for k in entry.get("diverged", {})))


def write_results(out, results, runs, meta, summary=None, title=None):
    """Write the result set into ``out``; ``results.json`` goes last (the completion mark).

    ``summary``: the text of ``summary.md`` (default: :func:`summary_markdown`);
    ``title``: the heat maps' data set label (default: ``m=<m>``). The
    ``instances_*.npz`` hold every per-instance array a run returns.
    """
    from minimal_attn.experiments.plots import plot_heatmap

    m, dataset = meta.get("m"), meta["dataset"]
    ensure_dir(out)
    final = os.path.join(out, "results.json")
    if os.path.exists(final):
        os.unlink(final)                 # a reader never pairs old results with new files
    write_json(os.path.join(out, "config.json"), meta)
    by_m = [] if m is None else [m]          # text FCAMs have no fixed m
    header = ["paradigm"] + ["m"] * len(by_m) + [
        f"{split}_{k}{s}" for split in ("train", "test") for k in ("accuracy", "saif")
        for s in ("_mean", "_std")] + ["seeds", "diverged_seeds"]
    rows = [[p] + by_m + [e[split][k + s] for split in ("train", "test")
                          for k in ("accuracy", "saif") for s in ("", "_std")]
            + [" ".join(map(str, seeds)) for seeds in seeds_used(e)]
            for p, e in results.items()]
    write_csv(os.path.join(out, "summary.csv"), header, rows)
    write_text(os.path.join(out, "summary.md"),
               summary if summary is not None else summary_markdown(results, m, dataset))
    title = title or f"m={m}"
    for p, entry in results.items():
        n_seeds = len(seeds_used(entry)[0])
        for split in ("train", "test"):
            plot_heatmap(entry[split]["heatmap"],
                         f"{p.upper()} {split}, {title} (mean of {n_seeds} seed(s))",
                         os.path.join(out, f"heatmap_{p}_{split}.png"))
        for r in runs[p]:
            with atomic_open(os.path.join(out, f"instances_{p}_seed{r['seed']}.npz"),
                             "wb") as f:
                np.savez(f, **{f"{split}_{k}": v for split in ("train", "test")
                               for k, v in r["instances"][split].items()})
    HistoryLog(out).rewrite(runs)
    write_json(final, results)
