"""``attn-dyn ode``: the gradient-flow ODEs of Theorems 1-2 (Figure 4)."""

import json
import math
import os
import sys

import click

from minimal_attn.cli.options import parse_float_list, parse_paradigms
from minimal_attn.errors import (
    InputError,
    check_alpha,
    check_int_at_least,
    check_positive,
)

#: Figure 4's two settings (m, C, t_max), used when neither --m nor --classes is given.
FIGURE4_SETTINGS = ((5, 3, 100.0), (20, 20, 1000.0))
ODE_PARADIGMS = ("sa", "ha", "lv")


def _settings(m, classes, t_max):
    """The (m, C, t_max) settings to run, validated."""
    if m is None and classes is None:
        settings = [(mm, cc, tt if t_max is None else t_max) for mm, cc, tt in FIGURE4_SETTINGS]
    else:  # one setting; a missing --m or --classes takes Figure 4's first setting
        m0, c0, t0 = FIGURE4_SETTINGS[0]
        settings = [(m0 if m is None else m, c0 if classes is None else classes,
                     t0 if t_max is None else t_max)]
    for mm, cc, tt in settings:
        check_int_at_least("--m (segments per mosaic)", mm, 2)
        check_int_at_least("--classes", cc, 2)
        check_positive("--t-max", tt)
    return settings


def _series(res):
    """JSON-ready lists; a frozen nu of +-inf (alpha = 1 or 0) becomes null."""
    return {k: [float(v) if math.isfinite(v) else None for v in res[k]]
            for k in ("t", "mu", "nu", "alpha", "beta")}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--paradigm", default="all", show_default=True,
              help="sa, ha, lv, a comma list such as sa,lv, or all (aliases: soft, hard).")
@click.option("--m", "m", type=int, default=None,
              help="Segments per mosaic (>= 2). Omit --m and --classes for Figure 4's "
                   "two settings: (m, C) = (5, 3) and (20, 20).")
@click.option("--classes", "classes", type=int, default=None, help="Number of classes C (>= 2).")
@click.option("--t-max", type=float, default=None,
              help="Final gradient-flow time [default: 100; 1000 for m = C = 20].")
@click.option("--alpha", type=float, default=None,
              help="Freeze the focus at this foreground attention (Theorem 1); "
                   "omit for the joint flow of mu and nu (Theorem 2).")
@click.option("--simulate", is_flag=True,
              help="Overlay gradient descent on the exact population (step --lr).")
@click.option("--lr", type=float, default=0.02, show_default=True,
              help="Step size of the simulation; step k sits at time k * lr.")
@click.option("--t-eval", default=None,
              help="Comma-separated times to report (default: 401 points in [0, t-max]).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for ode_<paradigm>.csv (t,mu,nu,alpha,beta) and ode.png.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {paradigm: {"t": [...], "mu": [...], "nu": [...], '
                   '"alpha": [...], "beta": [...]}} to stdout.')
def ode(paradigm, m, classes, t_max, alpha, simulate, lr, t_eval, out, as_json):
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
    from minimal_attn import dynamics
    from minimal_attn import ode as ode_lib
    from minimal_attn.io import ensure_dir, write_csv
    from minimal_attn.ode_plot import plot_trajectories

    paradigms = parse_paradigms(paradigm, ODE_PARADIGMS)
    settings = _settings(m, classes, t_max)
    if alpha is not None:
        check_alpha(alpha, "--alpha")
    check_positive("--lr", lr)
    times = None
    if t_eval is not None:
        times = parse_float_list(t_eval, "--t-eval")
        if min(times) < 0:
            raise InputError("--t-eval times must be >= 0")
    if out is not None:
        ensure_dir(out)

    results = []
    jobs = [(s, p) for s in settings for p in paradigms]
    t_ends = {s: max([s[2]] + (times or [])) for s in settings}
    # one unit per ODE solve, plus one per simulated gradient step
    total = len(jobs) + (sum(int(round(t_ends[s] / lr)) for s, _ in jobs) if simulate else 0)
    with click.progressbar(length=total, label="solving" + (" and simulating" if simulate else ""),
                           file=sys.stderr) as bar:
        for (mm, cc, tt), p in jobs:
            t_end = t_ends[(mm, cc, tt)]
            res = ode_lib.solve(p, mm, cc, t_end, alpha=alpha, t_eval=times)
            bar.update(1)
            if simulate:
                res["simulated"] = dynamics.simulate(p, mm, cc, t_end, lr=lr, alpha=alpha,
                                                     t_eval=times, progress=bar.update)
            results.append(((mm, cc), p, res))

    by_setting = []
    for mm, cc, _ in settings:
        curves = {p: r for (s, p, r) in results if s == (mm, cc)}
        by_setting.append({"m": mm, "C": cc, "alpha": alpha, "curves": curves})

    if out is not None:
        tag = (lambda s: "") if len(settings) == 1 else (lambda s: f"_m{s['m']}_C{s['C']}")
        for s in by_setting:
            for p, res in s["curves"].items():
                for suffix, r in (("", res), ("_simulated", res.get("simulated"))):
                    if r is None:
                        continue
                    rows = zip(*(r[k] for k in ("t", "mu", "nu", "alpha", "beta")))
                    write_csv(os.path.join(out, f"ode_{p}{tag(s)}{suffix}.csv"),
                              ["t", "mu", "nu", "alpha", "beta"], rows)
        plot_trajectories(by_setting, os.path.join(out, "ode.png"))

    if as_json:
        first = by_setting[0]
        payload = {}
        for p, res in first["curves"].items():
            entry = _series(res)
            entry.update(m=first["m"], C=first["C"])
            if "simulated" in res:
                entry["simulated"] = _series(res["simulated"])
            if len(by_setting) > 1:
                entry["settings"] = [dict(_series(s["curves"][p]), m=s["m"], C=s["C"])
                                     for s in by_setting]
            payload[p] = entry
        click.echo(json.dumps(payload))
    else:
        for s in by_setting:
            click.echo(f"m = {s['m']}, C = {s['C']}"
                       + ("" if alpha is None else f", alpha = {alpha:g} (Theorem 1)"))
            click.echo(f"  {'paradigm':8s} {'t':>9s} {'mu':>9s} {'nu':>9s} {'alpha':>7s} "
                       f"{'beta':>7s}" + ("   |mu - mu_GD|" if simulate else ""))
            for p, r in s["curves"].items():
                line = (f"  {p:8s} {r['t'][-1]:9.3g} {r['mu'][-1]:9.4f} {r['nu'][-1]:9.4f} "
                        f"{r['alpha'][-1]:7.4f} {r['beta'][-1]:7.4f}")
                if simulate:
                    line += f"   {abs(r['mu'][-1] - r['simulated']['mu'][-1]):.2e}"
                click.echo(line)
        if out is not None:
            click.echo(f"wrote CSVs and ode.png to {out}")
