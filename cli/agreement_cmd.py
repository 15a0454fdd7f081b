"""``attn-dyn agreement``: one row of Table 2 of Snell et al. (2021) from real data."""

import os

import click

from minimal_attn.cli.options import CONTEXT, ProgressBar, echo_line, on_interrupt, resume_note
from minimal_attn.cli.seq_options import (
    D,
    agreement_config,
    data_and_model_options,
    paradigm_options,
)


@click.command(context_settings=CONTEXT)
@data_and_model_options
@paradigm_options
@click.option("--proxy-d", type=int, default=D.proxy_d, show_default=True,
              help="Embedding width of the proxy model, Snell Eq. (5) (A.10: 256).")
@click.option("--proxy-epochs", type=int, default=D.proxy_epochs, show_default=True)
@click.option("--frozen/--no-frozen", default=D.frozen, show_default=True,
              help="classify: also the frozen-beta model of A.6 (Table 10).")
@click.option("--logistic/--no-logistic", default=D.logistic, show_default=True,
              help="classify: also the logistic proxy beta^log of A.10 (Table 11).")
@click.option("--kendall/--no-kendall", default=D.kendall, show_default=True,
              help="Also the table with Kendall's tau instead of A (Table 3).")
@click.option("--workers", type=int, default=D.workers, show_default=True,
              help="Train N of the row's models (and the proxy) at once, each in its own "
                   "process with its share of the CPU threads; the numbers are those of one "
                   "after another at that many threads (on a GPU, the same). A GPU that "
                   "small models leave idle between launches fills with 4-5; on a CPU, one "
                   "per core. One progress bar for all of them.")
def agreement(out, progress, paradigm, switch_step, **options):
    """Train the models one row of Table 2 needs and write the agreement table.

    Trains (or reuses from --out) the standard model, a second seed, the
    uniform-attention model and, for classification, the frozen model; fits the
    proxy (Eqs. 5-6) and the logistic proxy (Eq. 55) on the same token ids; then
    writes agreement.json (A_alpha_beta_uf, A_beta_uf_beta_px, A_delta_beta_uf,
    A_alpha_beta, A_hat, xi_alpha_beta_uf, xi_alpha_beta, xi_star and extras),
    table.md and table.csv (the paper's row beside ours) and agreement_curves.png.

    \b
    Examples:
      attn-dyn agreement --dataset sst2 --data-dir DIR --out runs/sst2
      attn-dyn agreement --dataset multi30k --data-dir DIR --out runs/m30k \\
          --steps 2000 --hidden 128 --max-train 5000 --device cuda
    """
    from minimal_attn.backends.snell.agreement import run_agreement
    from minimal_attn.backends.snell.timing import seconds_line

    config = agreement_config(options, paradigm, switch_step)
    on_interrupt(lambda: resume_note(out))      # running the same command continues
    with ProgressBar(progress) as bar:
        result = run_agreement(config, out, progress=bar, log=echo_line)
    with open(os.path.join(out, "table.md"), encoding="utf-8") as f:
        click.echo(f.read(), nl=False)
    click.echo(f"Wrote {os.path.join(out, 'agreement.json')}, table.md, table.csv, "
               "agreement_curves.png")
    click.echo(seconds_line(result))
