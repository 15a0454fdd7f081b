r"""Figures of the synthetic experiments of Snell et al. (2021): Figs. 3-8 and Sec. 6.2.

* :func:`plot_curves`: test accuracy against steps, one thin curve per seed,
  coloured by condition (Figs. 3, 6 and the Sec. 6.2 comparison);
* :func:`plot_gammas`: the four Sec. 6.1 log-odds against steps (Fig. 7);
* :func:`plot_count_table`: the co-occurrence table C, Snell Eq. (16) (Figs. 4, 5, 8).

All take the plain data of ``results.json`` and write atomically with
:func:`minimal_attn.experiments.io.save_figure`.
"""

import numpy as np

from minimal_attn.experiments.io import save_figure
from minimal_attn.experiments.plots import _pyplot

#: condition -> colour; the paper's: hard distribution red, control blue, random heads green.
COLOURS = {"permutation": "tab:red", "mixture": "tab:red", "control": "tab:blue",
           "permutation-function": "tab:red", "copy": "tab:blue",
           "all-bad": "tab:red", "one-good": "tab:blue", "independent": "tab:green",
           "keyword": "tab:purple"}
GAMMA_LABELS = {"gamma_lstar": r"$\gamma_{l^*}$", "gamma_lstar_next": r"$\gamma_{l^*+1}$",
                "gamma_mean": r"$\bar\gamma$", "gamma_last": r"$\gamma_L$"}


def plot_curves(seeds, path, title):
    """Accuracy vs step, one curve per seed object (``condition``, ``step``, ``accuracy``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    seen = set()
    for s in seeds:
        cond = s["condition"]
        ax.plot(s["step"], s["accuracy"], color=COLOURS.get(cond, "tab:gray"), alpha=0.6,
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
    """Mean over seeds (thick) and each seed (thin) of the four gammas of Sec. 6.1."""
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
