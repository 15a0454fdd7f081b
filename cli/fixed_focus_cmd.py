"""``attn-dyn fixed-focus``: fixed-focus loss and incentive curves (Figures 2 and 3)."""

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

FF_PARADIGMS = ("sa", "ha", "lv")
SETTINGS = ("linear-orthogonal", "cifar10", "cifar100")
FIGURE_ALPHAS = "0.05,0.1,0.2,0.4,0.6,0.8,1.0"
#: (epochs, lr, classes) when not given: Figures 2-3's bottom rows for the linear
#: setting; a short CNN run on airplane/automobile/bird (CIFAR-10) otherwise.
DEFAULTS = {"linear-orthogonal": (1000, 5.0, 20), "cifar10": (20, 0.01, 3),
            "cifar100": (20, 0.01, 10)}
CSV_HEADER = ["alpha", "epoch", "loss", "incentive", "loss_closed_form",
              "incentive_closed_form"]


def _alphas(text):
    """(alpha values, their keys as typed) from ``--alphas``; no duplicates."""
    keys = [k.strip() for k in str(text).split(",") if k.strip()]
    values = [check_alpha(v, "--alphas value") for v in parse_float_list(text, "--alphas")]
    if len(set(values)) != len(values):
        raise InputError(f"--alphas has a repeated value in {text!r}: give each alpha once")
    return values, keys


def _paradigms(text):
    if any(n.strip().lower() == "hybrid" for n in str(text).split(",")):
        raise InputError("hybrid is a schedule, not a fixed-focus loss: use sa, ha, lv or all")
    return parse_paradigms(text, FF_PARADIGMS)


def _linear_model(m, classes, seed):
    from minimal_attn.data import exact_population
    from minimal_attn.fixed_focus import LinearFixedFocusModel

    data = exact_population(m, classes, seed=seed)
    return LinearFixedFocusModel(data.X, data.y, classes), data.z


def _cnn_model(setting, data_dir, m, classes, n_train, device, seed):
    """CIFAR mosaics (foreground: the first ``classes`` classes) and the torch CNN model."""
    from minimal_attn import cifar, mosaics

    if data_dir is None:
        raise InputError(f"--setting {setting} needs --data-dir: the folder holding "
                         + ("cifar-10-batches-py" if setting == "cifar10" else
                            "cifar-100-python"))
    try:
        from minimal_attn.backends.torch_fixed_focus import CNNFixedFocusModel
    except ImportError as exc:
        raise InputError(f"--setting {setting} needs the torch backend ({exc}); install "
                         "torch (pip install torch==2.13.0) or use --setting "
                         "linear-orthogonal") from None
    splits = (cifar.load_cifar10(data_dir) if setting == "cifar10"
              else cifar.load_cifar100(data_dir))
    n_total = len(splits.class_names)
    if classes >= n_total:
        raise InputError(f"--classes must be below {n_total} for {setting} (the other "
                         f"classes are background), got {classes}")
    fg, bg = list(range(classes)), list(range(classes, n_total))
    mos = mosaics.make_image_mosaics(splits.x_train, splits.y_train, fg, bg, m, n_train,
                                     seed=seed)
    X = mosaics.to_float_images(mos.X)                                  # (n, m, 3, 32, 32)
    return (CNNFixedFocusModel(X, mos.y, classes, device=device, seed=seed, dataset=setting),
            mos.z)


def _jsonable(values):
    if values is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in values]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--setting", type=click.Choice(SETTINGS), default="linear-orthogonal",
              show_default=True, help="Data and classifier: the exact linear-orthogonal "
              "population with a linear classifier, or CIFAR mosaics with a CNN (torch).")
@click.option("--m", "m", type=int, default=20, show_default=True,
              help="Segments per mosaic (>= 2).")
@click.option("--classes", type=int, default=None,
              help="Classes C [default: 20; CIFAR: 3 foreground classes (airplane, "
                   "automobile, bird) for cifar10, the first 10 for cifar100].")
@click.option("--alphas", default=FIGURE_ALPHAS, show_default=True,
              help="Comma-separated foreground scores alpha in [0, 1], one curve each.")
@click.option("--epochs", type=int, default=None,
              help="Epochs T [default: 1000; CIFAR: 20].")
@click.option("--lr", type=float, default=None,
              help="Step size [default: 5, so epoch k is time 5k of Theorem 1; CIFAR: 0.01].")
@click.option("--delta", type=float, default=0.01, show_default=True,
              help="Focus step of the incentive: alpha' = min(alpha + delta, 1).")
@click.option("--paradigm", default="all", show_default=True,
              help="sa, ha, lv (comma-separated) or all; hybrid is a schedule, not a loss.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="CIFAR folder (cifar-10-batches-py or cifar-100-python, or its parent).")
@click.option("--n-train", type=int, default=1000, show_default=True,
              help="CIFAR: number of training mosaics.")
@click.option("--device", default="cpu", show_default=True, help="CIFAR: torch device.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the background draw (linear) or mosaics and CNN (CIFAR).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for fixed_focus_<paradigm>.csv, fixed_focus_losses.png and "
                   "focus_incentives.png.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {paradigm: {alpha: {"epoch", "loss", "incentive", '
                   '"loss_closed_form", "incentive_closed_form"}}} to stdout.')
def fixed_focus(setting, m, classes, alphas, epochs, lr, delta, paradigm, data_dir, n_train,
                device, seed, out, as_json):
    """Fixed-focus loss and focus-improvement incentive curves (Figures 2 and 3).

    The focus is frozen at alpha on the foreground segment and (1 - alpha)/(m - 1)
    on each background one; only the classifier trains, from zero, one full-batch
    gradient step of size --lr per epoch (linear setting). Recorded after every
    epoch: the fixed-focus loss L(g, alpha) and the incentive
    L(g, alpha) - L(g, alpha') with alpha' = min(alpha + delta, 1).

    The defaults reproduce the bottom rows of Figures 2 and 3 (C = m = 20):
    1000 epochs of step 5 reach time t = 5000 of Theorem 1, where SA's loss
    has fallen below 0.16 for alpha >= 0.2 while HA and LV have long flattened
    at (1 - alpha) log C and -log(alpha + (1 - alpha)/C); the step's Euler error
    keeps every simulated loss within 4% of the closed form (dashed), which is
    exact in the linear orthogonal setting.

    \b
    Examples:
      attn-dyn fixed-focus --out figs                  # Figures 2-3, bottom rows
      attn-dyn fixed-focus --paradigm sa --alphas 0.2,0.6 --epochs 50 --json
      attn-dyn fixed-focus --setting cifar10 --data-dir data/cifar10 --epochs 5
    """
    from minimal_attn.fixed_focus import closed_form_curves, fixed_focus_curves

    default_epochs, default_lr, default_classes = DEFAULTS[setting]
    epochs = check_int_at_least("--epochs", default_epochs if epochs is None else epochs, 1)
    lr = check_positive("--lr", default_lr if lr is None else lr)
    classes = check_int_at_least("--classes", default_classes if classes is None else classes, 2)
    m = check_int_at_least("--m (segments per mosaic)", m, 2)
    if not (math.isfinite(delta) and 0 < delta <= 1):
        raise InputError(f"--delta must lie in (0, 1], got {delta}")
    alpha_values, alpha_keys = _alphas(alphas)
    paradigms = _paradigms(paradigm)
    check_int_at_least("--n-train", n_train, 1)
    if setting == "linear-orthogonal":
        model, z = _linear_model(m, classes, seed)
    else:
        model, z = _cnn_model(setting, data_dir, m, classes, n_train, device, seed)
    if out is not None:   # after every check that can fail, before the long part
        from minimal_attn.io import ensure_dir

        ensure_dir(out)

    with click.progressbar(length=len(paradigms) * (epochs + 1), label="training g",
                           file=sys.stderr) as bar:
        result = fixed_focus_curves(model, z, m, alpha_values, paradigms, epochs, lr,
                                    delta=delta, progress=bar.update)
    for p in paradigms:
        exact = (closed_form_curves(p, alpha_values, epochs, lr, classes, delta)
                 if setting == "linear-orthogonal" else {})
        for a in alpha_values:
            result[p][a].update(exact.get(a, {"loss_closed_form": None,
                                              "incentive_closed_form": None}))
    keyed = {p: {k: result[p][a] for a, k in zip(alpha_values, alpha_keys)} for p in result}

    if out is not None:
        _write(out, keyed)
    if as_json:
        click.echo(json.dumps({p: {k: {name: (_jsonable(v) if name != "epoch"
                                              else [int(e) for e in v])
                                       for name, v in c.items()}
                                   for k, c in curves.items()}
                               for p, curves in keyed.items()}))
    else:
        _summary(keyed, epochs, lr, setting)
        if out is not None:
            click.echo(f"wrote fixed_focus_<paradigm>.csv, fixed_focus_losses.png and "
                       f"focus_incentives.png to {out}")


def _write(out, keyed):
    from minimal_attn.io import write_csv
    from minimal_attn.plots import plot_fixed_focus_losses, plot_incentives

    def cell(values, k):
        return "" if values is None else repr(float(values[k]))

    for p, curves in keyed.items():
        rows = [[key, int(e), cell(c["loss"], k), cell(c["incentive"], k),
                 cell(c["loss_closed_form"], k), cell(c["incentive_closed_form"], k)]
                for key, c in curves.items() for k, e in enumerate(c["epoch"])]
        write_csv(os.path.join(out, f"fixed_focus_{p}.csv"), CSV_HEADER, rows)
    plot_fixed_focus_losses(keyed, os.path.join(out, "fixed_focus_losses.png"))
    plot_incentives(keyed, os.path.join(out, "focus_incentives.png"))


def _summary(keyed, epochs, lr, setting):
    """A short table: final loss and incentive per paradigm and alpha."""
    exact = setting == "linear-orthogonal"
    click.echo(f"after {epochs} epochs (lr {lr:g}" + (f", t = {epochs * lr:g})" if exact
                                                      else ")"))
    click.echo(f"  {'paradigm':8s} {'alpha':>6s} {'loss':>10s} {'incentive':>10s}"
               + (f" {'loss (exact)':>12s}" if exact else ""))
    for p, curves in keyed.items():
        for key, c in curves.items():
            line = f"  {p:8s} {key:>6s} {c['loss'][-1]:10.4g} {c['incentive'][-1]:10.4g}"
            if exact:
                line += f" {c['loss_closed_form'][-1]:12.4g}"
            click.echo(line)
