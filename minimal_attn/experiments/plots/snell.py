r"""Figures of Snell et al. (2021): agreement curves (Fig. 2), synthetic tasks (Figs. 3-8)."""

import numpy as np

from minimal_attn.experiments.io import save_figure
from minimal_attn.experiments.plots._base import pyplot


def plot_agreement_curves(result, path):
    r"""Snell Fig. 2's quantities against steps, from ``agreement.json``'s dict.

    Left: :math:`A(\alpha, \hat\alpha(\tau))` of the second run and
    :math:`A(\alpha, \beta^{uf}(\tau))` of the uniform-attention run, with
    :math:`A(\alpha, \beta)` and :math:`\hat A` as levels; right: the performance
    of both, with :math:`\xi(\alpha, \beta^{uf})` and :math:`\xi(\alpha, \beta)`
    (Snell Eq. (11)) marked.
    """
    plt = pyplot()
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
    plt = pyplot()
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
    plt = pyplot()
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
    plt = pyplot()
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
