"""``attn-dyn fixed-focus``: fixed-focus loss and incentive curves (Figures 2 and 3)."""

import json

import click

from minimal_attn.cli.options import (
    CONTEXT,
    ProgressBar,
    config,
    default,
    device_option,
    parse_paradigms,
    threads_option,
)
from minimal_attn.errors import InputError
from minimal_attn.experiments.fixed_focus import (
    DEFAULT_EPOCHS_LR,
    LINEAR_CLASSES,
    SETTINGS,
    FixedFocusConfig,
)
from minimal_attn.losses import LOSS_PARADIGMS

_D = FixedFocusConfig
(_EPOCHS, _LR), (_CIFAR_EPOCHS, _CIFAR_LR) = DEFAULT_EPOCHS_LR["linear-orthogonal"], \
    DEFAULT_EPOCHS_LR["cifar10"]


@click.command(context_settings=CONTEXT)
@click.option("--setting", type=click.Choice(SETTINGS), default=default(_D, "setting"),
              show_default=True, help="Data and classifier: the exact linear-orthogonal "
              "population with a linear classifier, or CIFAR mosaics with a CNN (torch).")
@click.option("--m", "m", type=int, default=default(_D, "m"), show_default=True,
              help="Segments per mosaic (>= 2).")
@click.option("--classes", "n_classes", type=int, default=None,
              help=f"Classes C [default: {LINEAR_CLASSES}; CIFAR: the foreground "
                   "classes of attn-dyn train: airplane, automobile, bird for cifar10 (the "
                   "paper's), the 50 animal and people classes for cifar100 (our choice: the "
                   "paper names none); a smaller C keeps the first C of them, "
                   "the others joining the background as in attn-dyn train].")
@click.option("--alphas", default=default(_D, "alphas"), show_default=True,
              help="Comma-separated foreground scores alpha in [0, 1], one curve each.")
@click.option("--epochs", type=int, default=None,
              help=f"Epochs T [default: {_EPOCHS}; CIFAR: {_CIFAR_EPOCHS}].")
@click.option("--lr", type=float, default=None,
              help=f"Step size [default: {_LR:g}, so epoch k is time {_LR:g}k of Theorem 1; "
                   f"CIFAR: {_CIFAR_LR:g} with sgd, 5e-4 with adam].")
@click.option("--delta", type=float, default=default(_D, "delta"), show_default=True,
              help="Focus step of the incentive: alpha' = min(alpha + delta, 1).")
@click.option("--paradigm", "paradigms", default=default(_D, "paradigms"), show_default=True,
              help="sa, ha, lv (comma-separated; aliases soft, hard, lvml) or all; hybrid "
                   "is a schedule, not a loss.")
@click.option("--data-dir", type=click.Path(), default=None, metavar="DIR",
              help="CIFAR: the folder holding cifar-10-batches-py or cifar-100-python.")
@click.option("--n-train", type=int, default=default(_D, "n_train"), show_default=True,
              help="CIFAR: number of training mosaics.")
@device_option(default(_D, "device"), then="CIFAR only (the linear setting runs NumPy).")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default=default(_D, "optimizer"),
              show_default=True, help="CIFAR: sgd with momentum 0.9 (A.2) or adam (the "
              "authors' code; lr 5e-4 unless --lr).")
@click.option("--classifier", type=click.Choice(["paper", "lenet"]),
              default=default(_D, "classifier"), show_default=True,
              help="CIFAR: the paper's classifier or the authors' LeNet.")
@click.option("--seed", type=int, default=default(_D, "seed"), show_default=True,
              help="Seed of the background draw (linear) or mosaics and CNN (CIFAR).")
@threads_option("CIFAR: ")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for fixed_focus_<paradigm>.csv (alpha, epoch, loss, incentive, "
                   "loss_closed_form, incentive_closed_form), fixed_focus_losses.png and "
                   "focus_incentives.png; created when the results are written.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {paradigm: {alpha: {"epoch", "loss", "incentive", '
                   '"loss_closed_form", "incentive_closed_form"}}} to stdout (closed forms '
                   'null on CIFAR).')
def fixed_focus(out, as_json, paradigms, alphas, **options):
    """Fixed-focus loss and focus-improvement incentive curves (Figures 2 and 3).

    The focus is frozen at alpha on the foreground segment and (1 - alpha)/(m - 1)
    on each background one; only the classifier trains, from zero, one full-batch
    gradient step of size --lr per epoch (linear setting). Recorded after every
    epoch: the fixed-focus loss L(g, alpha) and the incentive
    L(g, alpha) - L(g, alpha') with alpha' = min(alpha + delta, 1). A run whose
    loss becomes non-finite or grows 100-fold stops: lower --lr.

    The defaults reproduce the bottom rows of Figures 2 and 3 (C = m = 20):
    1000 epochs of step 5 reach time t = 5000 of Theorem 1, where SA's loss
    has fallen below 0.16 for alpha >= 0.2 while HA and LV have long flattened
    at (1 - alpha) log C and -log(alpha + (1 - alpha)/C); the step's Euler error
    keeps every simulated loss within 4% of the closed form (dashed), which is
    exact in the linear orthogonal setting.

    \b
    Examples:
      attn-dyn fixed-focus --out runs/ff                  # Figures 2-3, bottom rows
      attn-dyn fixed-focus --paradigm sa --alphas 0.2,0.6 --epochs 50 --json
      attn-dyn fixed-focus --setting cifar10 --data-dir DIR --epochs 5 --out runs/ff10
    """
    from minimal_attn.experiments import fixed_focus as lib
    from minimal_attn.experiments.run_folders import check_output_set

    cfg = config(FixedFocusConfig, paradigms=_paradigms(paradigms), **options,
                 alphas=[a for a in alphas.split(",") if a.strip()])
    run = lib.run_fixed_focus
    if cfg.setting != "linear-orthogonal":
        lib.resolve(cfg)                 # refuse bad options before importing torch
        try:
            from minimal_attn.backends.vr.fixed_focus import run_fixed_focus as run
        except ImportError as exc:
            raise InputError(f"--setting {cfg.setting} needs torch ({exc}); install it with "
                             "pip install torch==2.13.0, or use --setting "
                             "linear-orthogonal") from None
    if out is not None:
        check_output_set(out, "fixed-focus")
    with ProgressBar() as bar:
        result = run(cfg, progress=bar)
    if out is not None:
        lib.write_fixed_focus(result, out)
    if as_json:
        click.echo(json.dumps(lib.fixed_focus_json(result)))
        return
    click.echo(lib.summary(result, cfg))
    if out is not None:
        click.echo(f"wrote fixed_focus_<paradigm>.csv, fixed_focus_losses.png and "
                   f"focus_incentives.png to {out}")


def _paradigms(text):
    if any(n.strip().lower() == "hybrid" for n in str(text).split(",")):
        raise InputError("hybrid is a schedule, not a fixed-focus loss: use sa, ha, lv or all")
    return parse_paradigms(text, LOSS_PARADIGMS)
