r"""``attn-dyn ode`` as a library call: Figure 4 of V&R, its settings, files and summary.

Vashisht & Ramaswamy (2023), Section 4, Theorems 1-2: the gradient-flow ODEs of
the classifier margin :math:`\mu(t)` and the focus score :math:`\nu(t)` on the
linear-orthogonal population, optionally with simulated gradient descent on
the exact population beside them (:mod:`.dynamics`).

>>> from minimal_attn.experiments.ode import OdeConfig, run_ode, write_ode
>>> result = run_ode(OdeConfig(paradigms=("lv",), m=5, n_classes=3, t_max=10))
>>> bool(result[0]["curves"]["lv"]["mu"][-1] > 0)
True
>>> write_ode(result, "runs/ode-lv")                     # doctest: +SKIP
['ode_lv.csv', 'ode.png']
"""

import dataclasses
import math
import os
from typing import Optional, Sequence

from minimal_attn.errors import InputError, check_alpha, check_int_at_least, check_positive
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.resources import MAX_STEPS, check_memory
from minimal_attn.losses import LOSS_PARADIGMS

#: Figure 4's two settings (m, C, t_max), used when neither m nor n_classes is given. The
#: values are this package's choice: V&R's text says only "two different values of m, C".
FIGURE4_SETTINGS = ((5, 3, 100.0), (20, 20, 1000.0))
#: The largest m and C the ODEs take: floats hold every integer up to here exactly.
MAX_SIZE = 10**15
COLUMNS = ("t", "mu", "nu", "alpha", "beta")


@dataclasses.dataclass
class OdeConfig:
    """What ``attn-dyn ode`` solves (every field is also a command-line option)."""

    paradigms: Sequence[str] = LOSS_PARADIGMS  # sa, ha, lv (Theorems 1-2); "sa,lv" reads as a list
    m: Optional[int] = None          # segments per mosaic; m and n_classes both None: Figure 4
    n_classes: Optional[int] = None  # classes C; a missing one takes Figure 4's first setting
    t_max: Optional[float] = None    # final time; None: 100 (1000 for m = C = 20)
    alpha: Optional[float] = None    # frozen foreground attention (Theorem 1); None: Theorem 2
    simulate: bool = False           # also run gradient descent on the exact population
    lr: float = 0.02                 # simulation step; step k sits at time k * lr
    t_eval: Optional[Sequence[float]] = None  # increasing times; None: 401 points in [0, t_max]


def settings(cfg):
    """The validated (m, C, t_max) settings of ``cfg``."""
    if cfg.m is None and cfg.n_classes is None:
        out = [(m, c, t if cfg.t_max is None else cfg.t_max) for m, c, t in FIGURE4_SETTINGS]
    else:
        m0, c0, _ = FIGURE4_SETTINGS[0]
        m, c = m0 if cfg.m is None else cfg.m, c0 if cfg.n_classes is None else cfg.n_classes
        # the final time of Figure 4's setting of this m and C (1000 for m = C = 20), else 100
        t0 = next((t for fm, fc, t in FIGURE4_SETTINGS if (fm, fc) == (m, c)),
                  FIGURE4_SETTINGS[0][2])
        out = [(m, c, t0 if cfg.t_max is None else cfg.t_max)]
    for m, c, t in out:
        check_int_at_least("m (segments per mosaic)", m, 2, param="m")
        check_int_at_least("n_classes", c, 2, param="n_classes")
        check_positive("t_max", t, param="t_max")
        for name, value in (("m (segments per mosaic)", m), ("n_classes", c)):
            if value > MAX_SIZE:      # the ODEs take m and C as floats: keep them exact
                raise InputError(f"{name} must be at most {MAX_SIZE:.0e}, got {value}",
                                 param="m" if name.startswith("m") else "n_classes")
    return out


def _t_end(setting, t_eval):
    """The final time of a setting: its t_max, or the last of the (checked) ``t_eval``."""
    return setting[2] if t_eval is None else max(setting[2], float(t_eval[-1]))


def _checked(cfg):
    """A copy of ``cfg`` with canonical paradigms, each once (``"SA"`` is ``sa``, the dict
    key and file name), alpha a float and t_eval an increasing array (one number: one time)."""
    from minimal_attn.fixed_focus import check_paradigms
    from minimal_attn.ode import check_times

    return dataclasses.replace(
        cfg, paradigms=check_paradigms(cfg.paradigms, param="paradigms"),
        alpha=None if cfg.alpha is None else check_alpha(cfg.alpha, "alpha", param="alpha"),
        t_eval=None if cfg.t_eval is None else check_times(cfg.t_eval, param="t_eval"))


def validate(cfg):
    """Check ``cfg`` and refuse a simulation too long or too big for this machine."""
    cfg = _checked(cfg)
    check_positive("lr", cfg.lr, param="lr")
    runs = settings(cfg)
    if cfg.simulate:
        steps = sum(round(_t_end(s, cfg.t_eval) / cfg.lr) for s in runs) * len(cfg.paradigms)
        short = min(_t_end(s, cfg.t_eval) for s in runs)
        if round(short / cfg.lr) < 1:
            raise InputError(f"a simulation step of lr {cfg.lr:g} is longer than the time "
                             f"horizon {short:g}, so gradient descent would take no step; "
                             "lower lr or raise t_max", param=("lr", "t_max"))
        if steps > MAX_STEPS:
            raise InputError(f"simulating would take {steps:.3g} gradient steps (limit "
                             f"{MAX_STEPS:.0e}); lower t_max or t_eval, or raise lr",
                             param=("t_max", "t_eval", "lr"))
        for m, c, _ in runs:   # exact population X (2 C m, m, C + 2), ~4 such arrays at once
            check_memory(4 * 8 * 2 * c * m * m * (c + 2),
                         f"simulating {m} segments and {c} classes",
                         param=("m", "n_classes"))
    return runs


def work_units(cfg):
    """Progress units of :func:`run_ode`: one per ODE solve and per simulated step."""
    cfg = _checked(cfg)
    runs = settings(cfg)
    steps = sum(round(_t_end(s, cfg.t_eval) / cfg.lr) for s in runs) if cfg.simulate else 0
    return len(cfg.paradigms) * (len(runs) + steps)


def run_ode(cfg, progress=None):
    """Solve (and optionally simulate) every paradigm at every setting of ``cfg``.

    ``progress(label, done, total, note)``: one unit per solve and per simulated
    step (:mod:`.progress`).

    Returns
    -------
    list of dict, one per setting: ``{"m", "C", "alpha", "curves": {paradigm: result}}``
    with ``result`` the dict of :func:`minimal_attn.ode.solve` (arrays ``t``, ``mu``,
    ``nu``, ``alpha``, ``beta``) plus ``"simulated"`` (same keys) when simulating.
    """
    from minimal_attn import dynamics, ode

    cfg = _checked(cfg)
    runs = validate(cfg)
    tick = counter(progress, "solving" + (" and simulating" if cfg.simulate else ""),
                   work_units(cfg))
    out = []
    for m, c, t_max in runs:
        curves = {}
        for p in cfg.paradigms:
            t_end = _t_end((m, c, t_max), cfg.t_eval)
            res = ode.solve(p, m, c, t_end, alpha=cfg.alpha, t_eval=cfg.t_eval)
            tick(1)
            if cfg.simulate:
                res["simulated"] = dynamics.simulate(p, m, c, t_end, lr=cfg.lr, alpha=cfg.alpha,
                                                     t_eval=cfg.t_eval,
                                                     callback=lambda step: tick())
            curves[p] = res
        out.append({"m": m, "C": c, "alpha": cfg.alpha, "curves": curves})
    return out


def file_names(result):
    """``{file name: (setting, paradigm, simulated?)}``: ``ode_<p>[_m<m>_C<C>][_simulated].csv``."""
    names = {}
    for s in result:
        tag = "" if len(result) == 1 else f"_m{s['m']}_C{s['C']}"
        for p, res in s["curves"].items():
            names[f"ode_{p}{tag}.csv"] = res
            if "simulated" in res:
                names[f"ode_{p}{tag}_simulated.csv"] = res["simulated"]
    return names


def write_ode(result, out):
    """Write the CSVs (columns t, mu, nu, alpha, beta) and ``ode.png`` into ``out``, all or
    none; they replace the files of an earlier ``ode`` run there."""
    from minimal_attn.experiments.io import write_csv
    from minimal_attn.experiments.plots import plot_trajectories
    from minimal_attn.experiments.run_folders import replacing_set

    with replacing_set(out, "ode") as stage:
        for name, res in file_names(result).items():
            write_csv(os.path.join(stage, name), list(COLUMNS),
                      zip(*(res[k] for k in COLUMNS)))
        plot_trajectories(result, os.path.join(stage, "ode.png"))
    return sorted(file_names(result)) + ["ode.png"]


def _series(res):
    """JSON-ready lists; a frozen nu of +-inf (alpha = 1 or 0) becomes null."""
    return {k: [float(v) if math.isfinite(v) else None for v in res[k]] for k in COLUMNS}


def ode_json(result):
    """``{paradigm: {t, mu, nu, alpha, beta, m, C[, simulated][, settings]}}`` (first setting;
    ``settings`` lists every setting's series when there are several)."""
    first, payload = result[0], {}
    for p, res in first["curves"].items():
        entry = dict(_series(res), m=first["m"], C=first["C"])
        if "simulated" in res:
            entry["simulated"] = _series(res["simulated"])
        if len(result) > 1:
            entry["settings"] = [dict(_series(s["curves"][p]), m=s["m"], C=s["C"])
                                 for s in result]
        payload[p] = entry
    return payload


def summary(result):
    """A plain-text table: the final mu, nu, alpha, beta of every paradigm and setting."""
    lines = []
    for s in result:
        sim = any("simulated" in r for r in s["curves"].values())
        lines.append(f"m = {s['m']}, C = {s['C']}" +
                     ("" if s["alpha"] is None else f", alpha = {s['alpha']:g} (Theorem 1)"))
        lines.append(f"  {'paradigm':8s} {'t':>9s} {'mu':>9s} {'nu':>9s} {'alpha':>7s} "
                     f"{'beta':>7s}" + ("   |mu - mu_GD|" if sim else ""))
        for p, r in s["curves"].items():
            line = (f"  {p:8s} {r['t'][-1]:9.3g} {r['mu'][-1]:9.4f} {r['nu'][-1]:9.4f} "
                    f"{r['alpha'][-1]:7.4f} {r['beta'][-1]:7.4f}")
            if sim:
                line += f"   {abs(r['mu'][-1] - r['simulated']['mu'][-1]):.2e}"
            lines.append(line)
    return "\n".join(lines)
