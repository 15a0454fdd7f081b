r"""Figures of a sweep: Table 1 cells and Table 2 rows beside the paper's values."""

import numpy as np

from minimal_attn.experiments.io import save_figure
from minimal_attn.experiments.plots._base import pyplot


def plot_sweep_cells(entries, path):
    """Test accuracy and SAIF per cell (mean ± std, %), the paper's value as a black mark.

    The axis labels name the mark: a legend inside the panels would cover the marks of the
    highest rows.
    """
    plt = pyplot()
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
            ax.plot([v for _, v in paper], [i for i, _ in paper], "kd")
        ax.set_xlabel(label + (", \u25c6 the paper's" if paper else ""))
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

    plt = pyplot()
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
