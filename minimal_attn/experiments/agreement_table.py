r"""One row of Table 2 of Snell et al. (2021) from attention, probe and saliency arrays.

Columns (Snell Section 3.1, Snell Eqs. (10)-(11), Appendices A.4-A.7), averaged over every
output word (translation) or sentence (classification) of a split:

* ``A_alpha_beta_uf``: A(alpha, beta^uf), the maximum over the uniform-attention
  model's checkpoints (A.7); the checkpoint reaching it gives the beta^uf used
  in the other columns.
* ``A_beta_uf_beta_px``: A(beta^uf, beta^px), the proxy of Snell Eq. (6).
* ``A_delta_beta_uf``: A(Delta, beta^uf), Delta the saliency of the standard model.
* ``A_alpha_beta``: A(alpha, beta) of the standard model at the end of training.
* ``A_hat``: the random baseline of Snell Eq. (10) (0 for Kendall's tau).
* ``xi_alpha_beta_uf``, ``xi_alpha_beta``: Snell Eq. (11) against a second,
  independently seeded run; when its attention never agrees with alpha more
  than the pair does, the value is that run's final performance (the paper's
  starred entries) and ``*_reached`` is False.
* ``xi_star``: the second run's performance at the end of training.

Extra: ``A_alpha_beta_px``, A(alpha, beta^px) (how a paradigm's attention
agrees with the proxy). Extras where given: ``A_beta_uf_beta_log`` (Table 11) and
``A_alpha_alpha_fr`` (Table 10, maximum over the frozen model's checkpoints). ``metric="tau"``
gives Table 3 (Kendall's tau-b instead of A).

The columns follow the paper's notation A(u, v) (u's top position among v's top 5%) and
A.7's one maximisation (of A(alpha, beta^uf) over the uniform model's checkpoints, whose
best checkpoint then serves every beta^uf column). The authors' analysis script, as
published, reads two columns otherwise: the proxy column as A(beta^px, beta^uf) (u =
beta^px) and the saliency column, each maximised over the uniform checkpoints on its
own, with alpha taken at the standard run's best-performing checkpoint. In small runs
(SST-2, Multi30k) the proxy column moved by 1-2 points between the two readings; the
saved arrays of every checkpoint let the other reading be recomputed.

A run is ``(history, evals)``: ``history`` a list of per-evaluation records
(``step``, ``<split>_perf``, ``<split>_bleu``) and ``evals[step]`` a dict of
lists of (T_n, L_n) arrays named ``<split>_alpha``, ``<split>_beta``,
``<split>_delta`` (as written by the torch backend's ``train_seq``).
"""

import math

import numpy as np

from minimal_attn import agreement

COLUMNS = ("A_alpha_beta_uf", "A_beta_uf_beta_px", "A_delta_beta_uf", "A_alpha_beta", "A_hat",
           "xi_alpha_beta_uf", "xi_alpha_beta", "xi_star")
HEADERS = ("A(α,β^uf)", "A(β^uf,β^px)", "A(Δ,β^uf)", "A(α,β)", "Â", "ξ(α,β^uf)", "ξ(α,β)", "ξ*")
#: Table 2 of the paper (percent).
PAPER_TABLE2 = {"IMDB": (53, 82, 62, 60, 5, 87, 87, 90), "AG News": (39, 55, 43, 48, 6, 94, 95, 96),
                "20 NG": (65, 41, 65, 63, 5, 91, 85, 94), "SST": (20, 34, 22, 25, 8, 78, 82, 84),
                "Multi30k": (31, 34, 27, 49, 7, 43, 49, 66),
                "IWSLT14": (36, 39, 28, 55, 7, 36, 44, 67),
                "News It-Pt": (29, 39, 25, 52, 6, 22, 25, 55)}
PAPER_NAME = {"sst2": "SST", "multi30k": "Multi30k"}
#: Table 11 (A(beta^uf, beta^px), A(beta^uf, beta^log)) and Table 10 (A(alpha, alpha^fr)), SST.
PAPER_EXTRAS = {"SST": {"A_beta_uf_beta_log": 0.46, "A_alpha_alpha_fr": 0.14}}


def kendall_rows(u, v):
    """Kendall's tau-b for every row of two (T, L) matrices (NaN where a row is constant)."""
    u, v = np.atleast_2d(u), np.atleast_2d(v)
    iu = np.triu_indices(u.shape[1], 1)
    du = np.sign(u[:, :, None] - u[:, None, :])[:, iu[0], iu[1]]        # (T, pairs)
    dv = np.sign(v[:, :, None] - v[:, None, :])[:, iu[0], iu[1]]
    denom = np.sqrt((du != 0).sum(1) * (dv != 0).sum(1).astype(float))   # tau-b
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (du * dv).sum(1) / np.where(denom > 0, denom, 1), np.nan)


def mean_metric(us, vs, metric="A", percent=5.0):
    """Mean of A(u, v) (Snell Eq. (10)) or Kendall's tau over the rows of paired lists."""
    if metric == "A":
        return agreement.average_agreement(us, vs, percent, kendall=False)["agreement"]
    taus = agreement.rows_by_length(kendall_rows, us, vs)     # kendall_rows of each pair
    return float(np.nanmean(taus)) if np.isfinite(taus).any() else float("nan")


def _curve(run, split, key, reference, metric, percent, probe=None):
    """Per checkpoint: M(reference, run's key) or, with ``probe``, M(run's key, probe)."""
    history, evals = run
    return [mean_metric(evals[h["step"]][f"{split}_{key}"], probe, metric, percent)
            if probe is not None else
            mean_metric(reference, evals[h["step"]][f"{split}_{key}"], metric, percent)
            for h in history]


def agreement_row(standard, second, uniform, beta_px, frozen=None, beta_log=None, metric="A",
                  split="val", perf="perf", percent=5.0):
    """Every column of Table 2 (and the extras) for one data set; see the module docstring."""
    final = standard[1][standard[0][-1]["step"]]
    alpha, beta = final[f"{split}_alpha"], final[f"{split}_beta"]
    uf_curve = _curve(uniform, split, "beta", alpha, metric, percent)
    # the uniform model's best checkpoint; where no checkpoint has a value (Kendall's tau
    # is undefined when every beta or alpha row is constant) its last one, the value NaN
    best = int(np.nanargmax(uf_curve)) if np.isfinite(uf_curve).any() else len(uf_curve) - 1
    beta_uf = uniform[1][uniform[0][best]["step"]][f"{split}_beta"]
    row = {"A_alpha_beta_uf": uf_curve[best],
           "A_beta_uf_beta_px": mean_metric(beta_uf, beta_px, metric, percent),
           "A_delta_beta_uf": mean_metric(final[f"{split}_delta"], beta_uf, metric, percent),
           "A_alpha_beta": mean_metric(alpha, beta, metric, percent),
           "A_alpha_beta_px": mean_metric(alpha, beta_px, metric, percent),
           "A_hat": (agreement.average_agreement(beta, beta, percent, kendall=False)["baseline"]
                     if metric == "A" else 0.0)}
    run_a = _curve(second, split, "alpha", alpha, metric, percent)
    run_p = [h[f"{split}_{perf}"] for h in second[0]]
    row["xi_star"] = run_p[-1]
    for key, value in (("xi_alpha_beta_uf", row["A_alpha_beta_uf"]),
                       ("xi_alpha_beta", row["A_alpha_beta"])):
        x = agreement.xi(value, run_a, run_p)
        row[key + "_reached"] = not math.isnan(x)
        # an undefined agreement has no xi; one never reached gets the final performance
        row[key] = math.nan if math.isnan(value) else row["xi_star"] if math.isnan(x) else x
    if beta_log is not None:
        row["A_beta_uf_beta_log"] = mean_metric(beta_uf, beta_log, metric, percent)
    if frozen is not None:
        row["A_alpha_alpha_fr"] = float(np.nanmax(_curve(frozen, split, "alpha", alpha,
                                                         metric, percent)))
    row["curves"] = {"uniform_steps": [h["step"] for h in uniform[0]],
                     "A_alpha_beta_uf": uf_curve,
                     "A_beta_uf_beta_px": _curve(uniform, split, "beta", None, metric, percent,
                                                 probe=beta_px),
                     "uniform_perf": [h[f"{split}_{perf}"] for h in uniform[0]],
                     "second_steps": [h["step"] for h in second[0]],
                     "A_alpha_alpha_hat": run_a, "second_perf": run_p,
                     "best_uniform_step": uniform[0][best]["step"]}
    return row


def _fmt(x):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def table_rows(dataset, row, paper=True):
    """CSV/Markdown rows: the paper's Table 2 row (if it has one and ``paper``) and ours, in %."""
    rows = []
    name = PAPER_NAME.get(dataset)
    if name and paper:
        rows.append([f"{name} (paper)"] + [str(v) for v in PAPER_TABLE2[name]])
    ours = [_fmt(row[c]) + ("*" if not row.get(c + "_reached", True) else "") for c in COLUMNS]
    rows.append([f"{dataset} (ours)"] + ours)
    return rows


def markdown_table(dataset, rows_by_variant):
    """Markdown: one table per variant (``{"Table 2": row, "Table 3 (Kendall tau)": ...}``)."""
    out = []
    for title, row in rows_by_variant.items():
        out += [f"### {title}", "", "| Task | " + " | ".join(HEADERS) + " |",
                "|" + "---|" * (len(HEADERS) + 1)]
        out += ["| " + " | ".join(r) + " |"
                for r in table_rows(dataset, row, paper=title == "Table 2")]
        extras = [k for k in ("A_beta_uf_beta_log", "A_alpha_alpha_fr") if k in row]
        paper = PAPER_EXTRAS.get(PAPER_NAME.get(dataset), {})
        for k in extras:
            ref = f" (paper: {100 * paper[k]:.0f})" if k in paper and title == "Table 2" else ""
            out.append(f"\n{k}: {_fmt(row[k])}{ref}")
        out.append("")
    out.append("Percent. * = the second run's attention never agreed with alpha more than the "
               "pair does; the value is its final performance (as the paper's starred entries).")
    return "\n".join(out) + "\n"
