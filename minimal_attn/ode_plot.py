"""Figure 4 of Vashisht & Ramaswamy (2023): mu(t) and nu(t) per paradigm."""

from .io import save_figure

COLOURS = {"sa": "tab:blue", "ha": "tab:red", "lv": "tab:green"}
LABELS = {"sa": "soft (SA)", "ha": "hard (HA)", "lv": "LVML (LV)"}


def plot_trajectories(settings, path):
    """One row per (m, C) setting, columns mu(t) and nu(t); simulation as dots.

    ``settings`` is a list of dicts ``{"m", "C", "alpha", "curves": {paradigm:
    result}}`` where a result is the dict of :func:`minimal_attn.ode.solve`,
    optionally with a ``"simulated"`` dict of the same form.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(settings), 2, figsize=(10, 3.6 * len(settings)),
                             squeeze=False)
    for row, setting in zip(axes, settings):
        for paradigm, res in setting["curves"].items():
            for ax, key in zip(row, ("mu", "nu")):
                ax.plot(res["t"], res[key], color=COLOURS[paradigm], label=LABELS[paradigm])
                sim = res.get("simulated")
                if sim is not None:
                    every = max(1, len(sim["t"]) // 25)
                    ax.plot(sim["t"][::every], sim[key][::every], "o", ms=3,
                            color=COLOURS[paradigm], alpha=0.7)
        fixed = "" if setting["alpha"] is None else f", alpha fixed at {setting['alpha']:g}"
        for ax, name in zip(row, (r"$\mu(t)$ (classifier)", r"$\nu(t)$ (focus)")):
            ax.set_title(f"{name}: m = {setting['m']}, C = {setting['C']}{fixed}")
            ax.set_xlabel("gradient-flow time t")
            ax.grid(alpha=0.3)
        row[0].legend(title="lines: ODE, dots: simulated GD", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
