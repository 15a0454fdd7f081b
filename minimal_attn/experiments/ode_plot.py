"""Figure 4 of Vashisht & Ramaswamy (2023): mu(t) and nu(t) per paradigm."""

from minimal_attn.experiments.io import save_figure

COLOURS = {"sa": "tab:blue", "ha": "tab:red", "lv": "tab:green"}
LABELS = {"sa": "soft (SA)", "ha": "hard (HA)", "lv": "LVML (LV)"}
#: panel key -> (title, y-axis label)
PANELS = {"mu": (r"$\mu(t)$ (classifier)", r"logit margin $\mu$"),
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(settings), 2, figsize=(10, 3.6 * len(settings)),
                             squeeze=False)
    simulated = False
    for row, setting in zip(axes, settings):
        keys = ("mu", "nu") if setting["alpha"] is None else ("mu", "beta")
        for paradigm, res in setting["curves"].items():
            for ax, key in zip(row, keys):
                ax.plot(res["t"], res[key], color=COLOURS[paradigm], label=LABELS[paradigm])
                sim = res.get("simulated")
                if sim is not None:
                    simulated = True
                    every = max(1, len(sim["t"]) // 25)
                    ax.plot(sim["t"][::every], sim[key][::every], "o", ms=3,
                            color=COLOURS[paradigm], alpha=0.7)
        fixed = "" if setting["alpha"] is None else f", alpha fixed at {setting['alpha']:g}"
        for ax, key in zip(row, keys):
            ax.set_title(f"{PANELS[key][0]}: m = {setting['m']}, C = {setting['C']}{fixed}")
            ax.set_xlabel("gradient-flow time t")
            ax.set_ylabel(PANELS[key][1])
            ax.grid(alpha=0.3)
    axes[0][0].legend(title="lines: ODE, dots: simulated GD" if simulated else "ODE",
                      fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
