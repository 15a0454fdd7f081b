r"""HateXplain beside V&R Table 1: the paper's rows, the 3-class note, rationale counts.

Vashisht & Ramaswamy (2023), Table 1, rows HateXplain-1 (standard embedding)
and HateXplain-2 (self-attention embedding). The paper's rows are for the
original 3-class task (hate speech / offensive / normal); the shared data and
our default runs are binary (toxic / non-toxic), so the columns sit side by
side as a reference, not as a like-for-like comparison (the table says so).

Aggregation over seeds and the result files are those of every FCAM run
(:mod:`.train_report`): ``results.json``
(``results[paradigm]["train"|"test"]["accuracy"|"saif"]``, fractions, mean
over seeds, with ``_std`` and ``per_seed``), ``config.json``,
``history.jsonl``, ``summary.csv``, ``summary.md`` (:func:`summary_markdown`
here), heat maps and ``instances_<paradigm>_seed<k>.npz`` (per-post
:math:`a_{z^*}`, :math:`s_y`, ``has_rationale``). This module adds only what
is HateXplain's: the paper's rows, the posts with and without a rationale, and
per paradigm the seeds its means average (a seed that diverged under
``on_divergence="record"`` is named and left out; summary.csv's ``seeds`` and
``diverged_seeds`` columns are every run's, :func:`.train_report.write_results`).
"""

from minimal_attn.experiments import train_report
from minimal_attn.experiments.train_report import mean_std, pct, seeds_used

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
                  "test SAIF (%)", "paper accuracy (%)", "paper SAIF (%)", "seconds / seed",
                  "ids of seeds averaged"]
POST_COUNTS = ("n", "n_posts", "n_without_rationale")


def aggregate(runs):
    """:func:`.train_report.aggregate` plus the post counts (the same for every seed):
    ``n`` posts with a rationale (in SAIF), ``n_posts``, ``n_without_rationale``."""
    entry = train_report.aggregate(runs)
    for split in ("train", "test"):
        entry[split].update({k: runs[0][split][k] for k in POST_COUNTS})
    entry["seconds"] = mean_std([r["seconds"] for r in runs])[0]
    return entry


def _seeds_cell(entry):
    used, diverged = seeds_used(entry)
    return ", ".join(map(str, used)) + (f" (seed {', '.join(map(str, diverged))} diverged)"
                                        if diverged else "")


def summary_rows(results, embedding):
    paper = PAPER_ROWS[embedding]
    return [[p, pct(e["train"], "accuracy"), pct(e["train"], "saif"),
             pct(e["test"], "accuracy"), pct(e["test"], "saif"),
             paper["accuracy"][p], paper["saif"][p], f"{e['seconds']:.1f}", _seeds_cell(e)]
            for p, e in results.items()]


def summary_markdown(results, meta):
    """Our rows (mean ± std over seeds, %) beside the paper's Table 1 row, with the caveats."""
    embedding, layout = meta["embedding"], meta["layout"]
    name = PAPER_ROWS[embedding]["name"]
    test = next(iter(results.values()))["test"]
    classes = "binary (toxic / non-toxic)" if layout == "binary" else "3-class"
    diverged = [f"{p} seed {k}" for p, e in results.items() for k in seeds_used(e)[1]]
    lines = [f"HateXplain, {embedding} embedding ({name}), {classes}, "
             f"{len(meta['seeds'])} seed(s) trained per paradigm, {meta['epochs']} epochs, "
             f"on {meta['device']}; each row averages the seeds it names.",
             *([f"Diverged, left out of the means: {', '.join(diverged)}."] if diverged
               else []),
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
