r"""HateXplain results beside V&R Table 1: aggregation over seeds, tables, output files.

Vashisht & Ramaswamy (2023), Table 1, rows HateXplain-1 (standard embedding)
and HateXplain-2 (self-attention embedding). The paper's rows are for the
original 3-class task (hate speech / offensive / normal); the shared data and
our default runs are binary (toxic / non-toxic), so the columns sit side by
side as a reference, not as a like-for-like comparison (the tables say so).

The output folder matches the CIFAR runs of ``attn-dyn train``:
``results.json`` (``results[paradigm]["train"|"test"]["accuracy"|"saif"]``,
fractions, mean over seeds, with ``_std`` and ``per_seed``), ``config.json``,
``summary.csv``, ``summary.md``, ``heatmap_<paradigm>_<split>.png`` and
``instances_<paradigm>_seed<k>.npz`` (per-post :math:`a_{z^*}`, :math:`s_y`).
"""

import os

import numpy as np

from .io import atomic_open, write_csv, write_json, write_text
from .saif import COUNT_KEYS, plot_heatmap

#: V&R Table 1 (test set, %): embedding -> row name, SAIF and accuracy per paradigm.
PAPER_ROWS = {
    "standard": {"name": "HateXplain-1",
                 "saif": {"ha": 2.7, "sa": 4.6, "hybrid": 21.6, "lv": 22.6},
                 "accuracy": {"ha": 54.3, "sa": 51.6, "hybrid": 54.6, "lv": 54.6}},
    "self-attention": {"name": "HateXplain-2",
                       "saif": {"ha": 23.4, "sa": 9.2, "hybrid": 24.6, "lv": 19.2},
                       "accuracy": {"ha": 49.8, "sa": 49.63, "hybrid": 49.0, "lv": 44.7}},
}
SUMMARY_HEADER = ["paradigm", "train accuracy (%)", "train SAIF (%)", "test accuracy (%)",
                  "test SAIF (%)", "paper accuracy (%)", "paper SAIF (%)", "seconds / seed"]


def mean_std(values):
    """Mean and sample standard deviation over seeds (std 0 for one seed)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def aggregate(runs):
    """results.json entry of one paradigm from its per-seed runs (each with ``seconds``)."""
    entry = {}
    for split in ("train", "test"):
        per_seed = [dict(r[split], seed=r["seed"], seconds=r["seconds"]) for r in runs]
        agg = {k: per_seed[0][k] for k in ("n", "n_posts", "n_without_rationale")}
        for key in ("accuracy", "saif") + COUNT_KEYS:
            agg[key], agg[key + "_std"] = mean_std([s[key] for s in per_seed])
        agg["heatmap"] = np.mean([s["heatmap"] for s in per_seed], axis=0).tolist()
        agg["per_seed"] = per_seed
        entry[split] = agg
    entry["seconds"] = mean_std([r["seconds"] for r in runs])[0]
    entry["history"] = [{"seed": r["seed"], "epochs": r["history"]} for r in runs]
    return entry


def _pct(entry, key):
    return f"{100 * entry[key]:.1f} ± {100 * entry[key + '_std']:.1f}"


def summary_rows(results, embedding):
    paper = PAPER_ROWS[embedding]
    return [[p, _pct(e["train"], "accuracy"), _pct(e["train"], "saif"),
             _pct(e["test"], "accuracy"), _pct(e["test"], "saif"),
             paper["accuracy"][p], paper["saif"][p], f"{e['seconds']:.1f}"]
            for p, e in results.items()]


def summary_markdown(results, meta):
    """Our rows (mean ± std over seeds, %) beside the paper's Table 1 row, with the caveats."""
    embedding, layout = meta["embedding"], meta["layout"]
    name = PAPER_ROWS[embedding]["name"]
    test = next(iter(results.values()))["test"]
    classes = "binary (toxic / non-toxic)" if layout == "binary" else "3-class"
    lines = [f"HateXplain, {embedding} embedding ({name}), {classes}, "
             f"{len(meta['seeds'])} seed(s), {meta['epochs']} epochs, on {meta['device']}.",
             f"SAIF counts the {test['n']} test posts with a rationale; the other "
             f"{test['n_without_rationale']} count for accuracy only.",
             f"Paper columns: V&R Table 1 row {name}, test set, 3-class task"
             + ("; not the same task as our binary rows." if layout == "binary" else "."),
             "",
             "| " + " | ".join(SUMMARY_HEADER) + " |",
             "|" + "---|" * len(SUMMARY_HEADER)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |"
              for row in summary_rows(results, embedding)]
    return "\n".join(lines) + "\n"


def write_outputs(out, results, runs, meta):
    """Write the results folder (see the module doc); every file atomically."""
    write_json(os.path.join(out, "results.json"), results)
    write_json(os.path.join(out, "config.json"), meta)
    keys = [f"{split}_{k}{s}" for split in ("train", "test") for k in ("accuracy", "saif")
            for s in ("_mean", "_std")]
    rows = [[p] + [e[split][k + s] for split in ("train", "test") for k in ("accuracy", "saif")
                   for s in ("", "_std")]
            + [PAPER_ROWS[meta["embedding"]][k][p] / 100 for k in ("accuracy", "saif")]
            for p, e in results.items()]
    write_csv(os.path.join(out, "summary.csv"),
              ["paradigm"] + keys + ["paper_test_accuracy_3class", "paper_test_saif_3class"],
              rows)
    write_text(os.path.join(out, "summary.md"), summary_markdown(results, meta))
    for p, entry in results.items():
        for split in ("train", "test"):
            plot_heatmap(entry[split]["heatmap"],
                         f"{p.upper()} {split}, HateXplain {meta['embedding']} "
                         f"(mean of {len(meta['seeds'])} seed(s))",
                         os.path.join(out, f"heatmap_{p}_{split}.png"))
        for r in runs[p]:
            with atomic_open(os.path.join(out, f"instances_{p}_seed{r['seed']}.npz"),
                             "wb") as f:
                np.savez(f, **{f"{split}_{k}": r["instances"][split][k]
                               for split in ("train", "test")
                               for k in ("a_z", "s_y", "has_rationale")})
