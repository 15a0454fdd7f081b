r"""Every figure of attn-dyn, drawn with matplotlib (Agg, no display), written atomically.

V&R (Vashisht & Ramaswamy 2023):

* :func:`plot_fixed_focus_losses`, :func:`plot_incentives`: Figures 2 and 3, from
  :func:`minimal_attn.fixed_focus.fixed_focus_curves`;
* :func:`plot_trajectories`: Figure 4, mu(t) and nu(t) of the ODEs (Theorems 1-2);
* :func:`plot_heatmap`: Figure 1's focus-prediction heat map of (a_z, s_y);
* :func:`plot_training_curves`: mean a_z and training loss per epoch of Table 1 runs.

Snell et al. (2021):

* :func:`plot_agreement_curves`: agreement and performance against steps (Fig. 2);
* :func:`plot_synthetic_curves`, :func:`plot_gammas`, :func:`plot_count_table`:
  Figs. 3-8 and Sec. 6.2 of the synthetic tasks.

Sweeps: :func:`plot_sweep_cells` (Table 1 cells), :func:`plot_table2_rows` (Table 2 rows).
"""

import os
import sys

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import save_figure

PARADIGM_TITLES = {"sa": "soft attention (SA)", "ha": "hard attention (HA)",
                   "lv": "latent variable (LV)"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _panels(result, key, ylabel, title, path, log_y):
    """One panel per paradigm, one curve per alpha; the closed form ``key + '_closed_form'``."""
    plt = _pyplot()
    paradigms = list(result)
    fig, axes = plt.subplots(1, len(paradigms), figsize=(4.2 * len(paradigms) + 1.4, 3.8),
                             squeeze=False, sharey=log_y)
    for ax, p in zip(axes[0], paradigms):
        curves = result[p]
        colours = plt.cm.viridis(np.linspace(0.0, 0.9, max(len(curves), 1)))
        for colour, (alpha, c) in zip(colours, sorted(curves.items(),
                                                      key=lambda kv: float(kv[0]))):
            epoch, y = np.asarray(c["epoch"]), np.asarray(c[key], dtype=float)
            if log_y:   # a loss is > 0; guard the plot against an exact 0 all the same
                y = np.where(y > 0, y, np.nan)
            ax.plot(epoch, y, color=colour, lw=1.8, label=f"α = {float(alpha):g}")
            exact = c.get(key + "_closed_form")
            if exact is not None:
                ax.plot(epoch, exact, color="black", lw=0.9, ls="--", alpha=0.8)
        if log_y:
            ax.set_yscale("log")
            # plain numbers ("1.1", "0.2") rather than "1.1 x 10^0" on a narrow log range
            from matplotlib.ticker import LogFormatter

            ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
            ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False,
                                                      minor_thresholds=(1, 0.4)))
        ax.set_title(PARADIGM_TITLES.get(p, p))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    if any(c.get(key + "_closed_form") is not None for cs in result.values()
           for c in cs.values()):
        handles.append(plt.Line2D([], [], color="black", lw=0.9, ls="--"))
        labels.append("closed form")
    # fixed margins (tight_layout costs seconds on log axes), the legend right of the
    # panels; bbox_inches="tight" then grows the canvas so that no tick label is clipped
    fig.subplots_adjust(left=0.85 / fig.get_figwidth(), right=1 - 1.45 / fig.get_figwidth(),
                        bottom=0.14, top=0.84, wspace=0.35)
    fig.legend(handles, labels, fontsize=8, loc="center right", frameon=False)
    fig.suptitle(title)
    save_figure(fig, path, dpi=120, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def plot_fixed_focus_losses(result, path):
    r"""Figure 2: :math:`L^{FF}(g_{\alpha,t}, \alpha)` per epoch, log-scale loss axis."""
    _panels(result, "loss", "fixed-focus loss", "Fixed-focus loss (focus frozen at α)",
            path, log_y=True)


def plot_incentives(result, path):
    r"""Figure 3: the incentive :math:`\delta_{\alpha,t}` per epoch, linear axis.

    :math:`\delta_{\alpha,t} = L^{FF}(g_{\alpha,t}, \alpha) - L^{FF}(g_{\alpha,t}, \alpha')`
    is 0 at epoch 0 (and for alpha = 1), so a log axis would hide the start.
    """
    _panels(result, "incentive", "incentive δ", "Focus-improvement incentive "
            "L(g, α) − L(g, α′), α′ = min(α + δα, 1)", path, log_y=False)


def plot_training_curves(histories, path, title="Training curves (mean over seeds)"):
    """Mean a_z and mean training loss per epoch, one curve per run, seeds averaged.

    ``histories``: ``{label: [record, ...]}`` with the history records of
    ``epochs.run_epochs`` (``seed``, ``epoch``, ``loss``, ``mean_a_z``);
    labels ending in ``-sa``/``-ha``/``-lv``/``-hybrid`` share a colour, and a
    label holding ``paper`` is dashed (the paper's protocol beside the authors').
    An epoch is averaged over the seeds that ran it; the curve thins where seeds
    have stopped. A dotted line marks 1/m where the records carry ``m``.
    """
    plt = _pyplot()
    colours = {"sa": "tab:blue", "ha": "tab:orange", "lv": "tab:green",
               "hybrid": "tab:red"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, records in histories.items():
        by_epoch = {}
        for r in records:
            by_epoch.setdefault(int(r["epoch"]), []).append(r)
        epochs = sorted(by_epoch)
        style = dict(color=colours.get(label.rsplit("-", 1)[-1]),
                     ls="--" if "paper" in label else "-", lw=1.6, label=label)
        for ax, key in zip(axes, ("mean_a_z", "loss")):
            ax.plot(epochs, [np.mean([r[key] for r in by_epoch[e]]) for e in epochs],
                    **style)
    for ax, ylabel in zip(axes, ("mean training a_z", "mean training loss")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[1].set_yscale("log")
    axes[1].legend(fontsize=7, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_heatmap(grid, title, path):
    """Draw a :func:`heatmap` grid (a_z up the vertical axis) and save it atomically to ``path``.

    Each cell is annotated with its percentage. The figure format follows
    the extension of ``path`` (png, pdf, svg); its folder must exist.
    """
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 2 or grid.shape[0] != grid.shape[1] or not np.all(np.isfinite(grid)):
        raise InputError(f"heat map must be a finite square grid, got shape {grid.shape}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"output folder {folder} does not exist; create it or "
                         "choose another --out")
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")        # headless; never switch a backend already in use
    from matplotlib.figure import Figure

    bins = grid.shape[0]
    labels = [f"{k / bins:.1f}-{(k + 1) / bins:.1f}" for k in range(bins)]
    fig = Figure(figsize=(5.2, 4.4))          # no pyplot: nothing global to clean up
    ax = fig.add_subplot()
    vmax = max(float(grid.max()), 1e-9)      # an all-zero grid still gets a valid scale
    image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0.0, vmax=vmax)
    for i in range(bins):
        for j in range(bins):
            dark = grid[i, j] < 0.5 * vmax
            ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    ax.set_xticks(range(bins), labels, rotation=30)
    ax.set_yticks(range(bins), labels)
    ax.set_xlabel("true-class score s_y")
    ax.set_ylabel("focus on foreground a_z")
    ax.set_title(str(title))
    fig.colorbar(image, ax=ax, label="% of instances")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return path


ODE_COLOURS = {"sa": "tab:blue", "ha": "tab:red", "lv": "tab:green"}
ODE_LABELS = {"sa": "soft (SA)", "ha": "hard (HA)", "lv": "LVML (LV)"}
#: panel key -> (title, y-axis label)
ODE_PANELS = {"mu": (r"$\mu(t)$ (classifier)", r"logit margin $\mu$"),
          "nu": (r"$\nu(t)$ (focus)", r"foreground score $\nu$"),
          "beta": (r"$\beta(t)$ (classifier)", r"true-class probability $\beta$")}


def plot_trajectories(settings, path):
    """One row per (m, C) setting; simulated gradient descent, when present, as dots.

    Columns mu(t) and nu(t) for the joint flow (Theorem 2); with the focus frozen
    (Theorem 1) nu is a constant (infinite at alpha = 1), so the second column
    shows the true-class probability beta(t) instead.

    ``settings`` is a list of dicts ``{"m", "C", "alpha", "curves": {paradigm:
    result}}`` where a result is the dict of :func:`minimal_attn.ode.solve`,
    optionally with a ``"simulated"`` dict of the same form.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(len(settings), 2, figsize=(10, 3.6 * len(settings)),
                             squeeze=False)
    simulated = False
    for row, setting in zip(axes, settings):
        keys = ("mu", "nu") if setting["alpha"] is None else ("mu", "beta")
        for paradigm, res in setting["curves"].items():
            for ax, key in zip(row, keys):
                ax.plot(res["t"], res[key], color=ODE_COLOURS[paradigm], label=ODE_LABELS[paradigm])
                sim = res.get("simulated")
                if sim is not None:
                    simulated = True
                    every = max(1, len(sim["t"]) // 25)
                    ax.plot(sim["t"][::every], sim[key][::every], "o", ms=3,
                            color=ODE_COLOURS[paradigm], alpha=0.7)
        fixed = "" if setting["alpha"] is None else f", alpha fixed at {setting['alpha']:g}"
        for ax, key in zip(row, keys):
            ax.set_title(f"{ODE_PANELS[key][0]}: m = {setting['m']}, C = {setting['C']}{fixed}")
            ax.set_xlabel("gradient-flow time t")
            ax.set_ylabel(ODE_PANELS[key][1])
            ax.grid(alpha=0.3)
    axes[0][0].legend(title="lines: ODE, dots: simulated GD" if simulated else "ODE",
                      fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


# --- Snell et al. ------------------------------------------------------------

def plot_agreement_curves(result, path):
    r"""Snell Fig. 2's quantities against steps, from ``agreement.json``'s dict.

    Left: :math:`A(\alpha, \hat\alpha(\tau))` of the second run and
    :math:`A(\alpha, \beta^{uf}(\tau))` of the uniform-attention run, with
    :math:`A(\alpha, \beta)` and :math:`\hat A` as levels; right: the performance
    of both, with :math:`\xi(\alpha, \beta^{uf})` and :math:`\xi(\alpha, \beta)`
    (Snell Eq. (11)) marked.
    """
    plt = _pyplot()
    cur = result["curves"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.plot(cur["second_steps"], cur["A_alpha_alpha_hat"], "o-",
             label=r"$A(\alpha,\hat\alpha(\tau))$")
    ax1.plot(cur["uniform_steps"], cur["A_alpha_beta_uf"], "s-",
             label=r"$A(\alpha,\beta^{uf}(\tau))$")
    ax1.axhline(result["A_alpha_beta"], color="C2", ls="--", label=r"$A(\alpha,\beta)$")
    ax1.axhline(result["A_hat"], color="gray", ls=":", label=r"$\hat A$")
    ax1.set_xlabel("training step")
    ax1.set_ylabel("agreement A")
    ax1.legend(fontsize=8)
    ax2.plot(cur["second_steps"], cur["second_perf"], "o-", label="second run")
    ax2.plot(cur["uniform_steps"], cur["uniform_perf"], "s-", label="uniform attention")
    for key, color in (("xi_alpha_beta_uf", "C3"), ("xi_alpha_beta", "C2")):
        ax2.axhline(result[key], color=color, ls="--", label=key)
    ax2.set_xlabel("training step")
    ax2.set_ylabel(result.get("performance", "performance"))
    ax2.legend(fontsize=8)
    fig.suptitle(f"{result.get('dataset', '')}: agreement and performance (Snell et al. Fig. 2)")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


#: condition -> colour; the paper's: hard distribution red, control blue, random heads green.
SYNTHETIC_COLOURS = {"permutation": "tab:red", "mixture": "tab:red", "control": "tab:blue",
           "permutation-function": "tab:red", "copy": "tab:blue",
           "all-bad": "tab:red", "one-good": "tab:blue", "independent": "tab:green",
           "keyword": "tab:purple"}
GAMMA_LABELS = {"gamma_lstar": r"$\gamma_{l^*}$", "gamma_lstar_next": r"$\gamma_{l^*+1}$",
                "gamma_mean": r"$\bar\gamma$", "gamma_last": r"$\gamma_L$"}


def plot_synthetic_curves(seeds, path, title):
    """Snell Figs. 3, 6: accuracy vs step, one curve per seed object (``condition``,
    ``step``, ``accuracy``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    seen = set()
    for s in seeds:
        cond = s["condition"]
        ax.plot(s["step"], s["accuracy"], color=SYNTHETIC_COLOURS.get(cond, "tab:gray"), alpha=0.6,
                lw=1.0, label=None if cond in seen else cond)
        seen.add(cond)
    ax.set_xlabel("training step")
    ax.set_ylabel("test token accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(loc="center right")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_gammas(seeds, path, title="keyword toy, uniform attention (Fig. 7)"):
    """Snell Fig. 7: mean over seeds (thick) and each seed (thin) of the Sec. 6.1 gammas."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    step = seeds[0]["step"]
    for colour, (key, label) in zip(("tab:red", "tab:orange", "tab:gray", "tab:blue"),
                                    GAMMA_LABELS.items()):
        values = np.array([s[key] for s in seeds])                  # (S, n_eval)
        for v in values:
            ax.plot(step, v, color=colour, alpha=0.25, lw=0.7)
        ax.plot(step, values.mean(0), color=colour, lw=2.0, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(r"log-odds $\gamma$ on positives")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_count_table(C, path, title, row_labels=None, col_labels=None):
    """The count table C (Snell Eq. (16)) as a heat map, input words down, output words across."""
    plt = _pyplot()
    C = np.asarray(C)
    fig, ax = plt.subplots(figsize=(5.0, 4.4))
    n_in, n_out = C.shape                                           # words are 1-based
    im = ax.imshow(C, cmap="viridis", aspect="auto", interpolation="nearest",
                   extent=(0.5, n_out + 0.5, n_in + 0.5, 0.5))
    fig.colorbar(im, ax=ax, label="C[i, o]")
    ax.set_xlabel("output word o")
    ax.set_ylabel("input word i")
    if col_labels is not None:
        ax.set_xticks(np.arange(1, len(col_labels) + 1), col_labels)
    if row_labels is not None:
        ax.set_yticks(np.arange(1, len(row_labels) + 1), row_labels)
    ax.set_title(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


# --- sweeps ----------------------------------------------------------------

def plot_sweep_cells(entries, path):
    """Test accuracy and SAIF per cell (mean ± std, %), the paper's value as a black mark."""
    plt = _pyplot()
    n = max(len(entries), 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.32 * n), sharey=True, squeeze=False)
    y = list(range(len(entries)))
    for ax, key, label in zip(axes[0], ("accuracy", "saif"),
                              ("test accuracy (%)", "test SAIF (%)")):
        means = [100 * e["result"]["test"][key]["mean"] for e in entries]
        stds = [100 * e["result"]["test"][key]["std"] for e in entries]
        ax.barh(y, means, xerr=stds, color="tab:blue", alpha=0.7, capsize=2)
        paper = [(i, e["paper"][key]) for i, e in enumerate(entries) if e.get("paper")]
        if paper:
            ax.plot([v for _, v in paper], [i for i, _ in paper], "kd", label="paper")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel(label)
        ax.set_xlim(0, 100)
        ax.grid(True, axis="x", alpha=0.3)
    axes[0][0].set_yticks(y)
    axes[0][0].set_yticklabels([e["cell"] for e in entries], fontsize=7)
    axes[0][0].invert_yaxis()
    fig.tight_layout()
    save_figure(fig, path, metadata={"Software": None})
    plt.close(fig)


def plot_table2_rows(entries, path):
    """Each column of Table 2 (%), one bar a cell, the paper's row as black marks."""
    from minimal_attn.experiments.agreement_table import HEADERS

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.8))
    x, width = np.arange(len(HEADERS)), 0.8 / max(len(entries), 1)
    for i, e in enumerate(entries):
        ours = [np.nan if v is None else 100 * v for v in e["result"]["row"]]
        ax.bar(x + i * width, ours, width, label=e["cell"])
        if e.get("paper"):
            ax.plot(x + i * width, e["paper"]["row"], "kd", ms=4)
    ax.set_xticks(x + 0.4 - width / 2)
    ax.set_xticklabels(HEADERS)
    ax.set_ylabel("% (black: the paper's)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, metadata={"Software": None})
    plt.close(fig)
