r"""Agreement and performance against training steps, as behind Figure 2 of Snell et al. (2021).

Left: :math:`A(\alpha, \hat\alpha(\tau))` of the second run and
:math:`A(\alpha, \beta^{uf}(\tau))` of the uniform-attention run, with the
levels :math:`A(\alpha, \beta)` and :math:`\hat A` as horizontal lines. Right:
the performance :math:`\hat p(\tau)` of the second run and of the uniform
model, with :math:`\xi(\alpha, \beta^{uf})` and :math:`\xi(\alpha, \beta)`
(Snell Eq. (11)) marked.
"""

from minimal_attn.experiments.io import save_figure
from minimal_attn.experiments.plots import _pyplot


def plot_curves(result, path):
    """Draw the two panels from ``agreement.json``'s dict (``curves`` and the columns)."""
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
