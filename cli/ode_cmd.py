"""``attn-dyn ode``: the gradient-flow ODEs of Theorems 1-2 (Figure 4)."""

import json

import click

from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    config,
    default,
    parse_float_list,
    parse_paradigms,
)
from minimal_attn.experiments.ode import FIGURE4_SETTINGS, OdeConfig
from minimal_attn.losses import LOSS_PARADIGMS


@click.command(context_settings=CONTEXT)
@click.option("--paradigm", default=default(OdeConfig, "paradigms"), show_default=True,
              help="sa, ha, lv, a comma list such as sa,lv, or all "
                   "(aliases: soft, hard, lvml).")
@click.option("--m", "m", type=int, default=None,
              help="Segments per mosaic (>= 2). Omit --m and --classes for Figure 4's "
                   "two settings: (m, C) = " + " and ".join(
                       f"({m}, {c})" for m, c, _ in FIGURE4_SETTINGS)
              + " (our choice: the paper names no values); a missing one takes the first "
                "setting's value.")
@click.option("--classes", "n_classes", type=int, default=None,
              help="Number of classes C (>= 2).")
@click.option("--t-max", type=float, default=None,
              help="Final gradient-flow time [default: " + "; ".join(
                  f"{t:g} for m = {m}, C = {c}" for m, c, t in FIGURE4_SETTINGS)
              + "; the first for any other m, C].")
@click.option("--alpha", type=float, default=None,
              help="Freeze the focus at this foreground attention (Theorem 1); "
                   "omit for the joint flow of mu and nu (Theorem 2).")
@click.option("--simulate", is_flag=True,
              help="Overlay gradient descent on the exact population (step --lr).")
@click.option("--lr", type=float, default=default(OdeConfig, "lr"), show_default=True,
              help="Step size of the simulation; step k sits at time k * lr.")
@click.option("--t-eval", default=None,
              help="Comma-separated times >= 0 to report (default: 401 points in "
                   "[0, t-max]).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for ode_<paradigm>.csv (t,mu,nu,alpha,beta), "
                   "ode_<paradigm>_simulated.csv with --simulate (names get _m<m>_C<C> for "
                   "Figure 4's two settings) and ode.png; created when the results are "
                   "written.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {paradigm: {"t", "mu", "nu", "alpha", "beta": [...], "m", "C", '
                   '"simulated" (with --simulate): {"t", ...}, "settings" (both Figure 4 '
                   'settings): [{"t", ..., "m", "C"}]}} to stdout (null for an infinite nu).')
def ode(paradigm, m, n_classes, t_max, alpha, simulate, lr, t_eval, out, as_json):
    """Solve the linear-orthogonal gradient-flow ODEs (Theorems 1-2, Figure 4).

    mu is the classifier's logit margin (beta = e^mu / (e^mu + C - 1) is its
    true-class probability on a clean foreground) and nu the focus's
    foreground score (alpha = e^nu / (e^nu + m - 1) is the attention on the
    foreground). Both start at 0.

    \b
    Examples:
      attn-dyn ode --paradigm lv                  # Figure 4, both settings
      attn-dyn ode --m 5 --classes 3 --simulate   # check ODE against GD
      attn-dyn ode --alpha 0.4 --m 20 --classes 20 --json --t-eval 10,100
    """
    from minimal_attn.experiments import ode as lib
    from minimal_attn.experiments.run_folders import check_output_set

    cfg = config(OdeConfig, paradigms=parse_paradigms(paradigm, LOSS_PARADIGMS), m=m,
                 n_classes=n_classes, t_max=t_max, alpha=alpha, simulate=simulate, lr=lr,
                 t_eval=parse_float_list(t_eval, "--t-eval"))
    lib.validate(cfg)
    if out is not None:
        check_output_set(out, "ode")
    with ProgressBar() as bar:
        result = lib.run_ode(cfg, progress=bar)
    if out is not None:
        lib.write_ode(result, out)
    if as_json:
        click.echo(json.dumps(lib.ode_json(result)))
        return
    click.echo(lib.summary(result))
    if out is not None:
        click.echo(f"wrote CSVs and ode.png to {out}")
