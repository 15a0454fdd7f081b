r"""Figures of Vashisht & Ramaswamy (2023): Figs. 1-4 and training curves of Table 1 runs."""

import os
import sys

import numpy as np

from minimal_attn.errors import InputError
from minimal_attn.experiments.io import save_figure
from minimal_attn.experiments.plots._base import pyplot

PARADIGM_TITLES = {"sa": "soft attention (SA)", "ha": "hard attention (HA)",
                   "lv": "latent variable (LV)"}


def _plain_log_labels(ax):
    """Label a log axis with plain numbers ("0.1", "2"), not "1e-01"; its minor ticks too
    when it spans under a decade, where the major ticks alone would leave one label or none."""
    from matplotlib.ticker import FuncFormatter

    def minor(v, _):
        low, high = ax.get_ylim()
        return f"{v:g}" if 0 < low and high / low < 10 else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def _panels(result, key, ylabel, title, path, log_y):
    """One panel per paradigm, one curve per alpha; the closed form ``key + '_closed_form'``."""
    plt = pyplot()
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
            _plain_log_labels(ax)
        ax.set_title(PARADIGM_TITLES.get(p, p))
        ax.set_xlabel("epoch")
        if ax is axes[0][0] or not log_y:        # shared log axes: one label, one tick column
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
    """Mean a_z and mean training loss per epoch, and the test accuracy and SAIF at each
    evaluation, one curve per run, seeds averaged.

    ``histories``: ``{label: [record, ...]}`` with the history records of
    ``epochs.run_epochs`` (``seed``, ``epoch``, ``loss``, ``mean_a_z``, and
    ``test_accuracy``, ``test_saif`` where the test set was scored); labels ending in
    ``-sa``/``-ha``/``-lv``/``-hybrid`` share a colour, a label holding ``paper`` is
    dashed (the paper's protocol beside the authors') and one holding ``released``
    dotted (the released notebooks' test mosaics). An epoch is averaged over the seeds
    that ran it; the curve thins where seeds have stopped. The test panels keep the epochs
    at which every seed that ran them was scored: a seed the stop rule ends between two
    evaluations is scored at its last epoch alone, which would draw a spike there.
    """
    plt = pyplot()
    colours = {"sa": "tab:blue", "ha": "tab:orange", "lv": "tab:green",
               "hybrid": "tab:red"}
    panels = (("mean_a_z", "mean training a_z"), ("loss", "mean training loss"),
              ("test_accuracy", "test accuracy"), ("test_saif", "test SAIF"))
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    axes = axes.ravel()
    for label, records in histories.items():
        style = dict(color=colours.get(label.rsplit("-", 1)[-1]), lw=1.6, label=label,
                     ls="--" if "paper" in label else ":" if "released" in label else "-")
        ran = {}
        for r in records:
            ran[int(r["epoch"])] = ran.get(int(r["epoch"]), 0) + 1
        for ax, (key, _) in zip(axes, panels):
            by_epoch = {}
            for r in records:
                if r.get(key) is not None:
                    by_epoch.setdefault(int(r["epoch"]), []).append(r[key])
            epochs = sorted(e for e in by_epoch
                            if not key.startswith("test_") or len(by_epoch[e]) == ran[e])
            ax.plot(epochs, [np.mean(by_epoch[e]) for e in epochs], **style)
    for ax, (_, ylabel) in zip(axes, panels):
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
    """Draw a :func:`heatmap` grid as V&R's Figure 1 and save it atomically to ``path``.

    As in the paper (Sec. 2.4): a_z across (columns), s_y up (rows, the highest on top),
    so SAIF is the top-right cell, "correct despite a low focus" the top left, and a
    confident classifier leaves the middle rows empty. The grid itself is stored with
    rows = a_z bins (:func:`minimal_attn.saif.heatmap`), so it is drawn transposed.
    Each cell is annotated with its percentage. The figure format follows the extension
    of ``path`` (png, pdf, svg); its folder must exist.
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
    shown = grid.T                           # (s_y bin, a_z bin): row 0 at the bottom
    image = ax.imshow(shown, origin="lower", cmap="viridis", vmin=0.0, vmax=vmax)
    for i in range(bins):
        for j in range(bins):
            dark = shown[i, j] < 0.5 * vmax
            ax.text(j, i, f"{shown[i, j]:.1f}", ha="center", va="center", fontsize=8,
                    color="white" if dark else "black")
    ax.set_xticks(range(bins), labels, rotation=30)
    ax.set_yticks(range(bins), labels)
    ax.set_xlabel("focus on foreground a_z")
    ax.set_ylabel("true-class score s_y")
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
    plt = pyplot()
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
