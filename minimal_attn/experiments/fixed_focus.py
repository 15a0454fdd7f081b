r"""``attn-dyn fixed-focus`` as a library call: Figures 2 and 3 of V&R on any setting.

Vashisht & Ramaswamy (2023), Section 3: train only the classifier under a focus
frozen at :math:`\alpha` and record the fixed-focus loss (Figure 2) and the
focus-improvement incentive (Figure 3) after every epoch. Settings:

* ``linear-orthogonal``: the exact population of Section 4 with a linear
  classifier (NumPy), with Theorem 1's closed form beside the simulation;
* ``cifar10`` / ``cifar100``: CIFAR mosaics built by
  :func:`minimal_attn.datasets.splits.load_mosaic_splits` (the loader ``attn-dyn train``
  uses, so its foreground classes: the paper's airplane, automobile, bird for
  CIFAR-10; for CIFAR-100 this package's choice, the 50 animal and people classes) and the CNN
  classifier of Appendix A.2 (torch).

>>> from minimal_attn.experiments.fixed_focus import FixedFocusConfig, run_fixed_focus
>>> r = run_fixed_focus(FixedFocusConfig(m=4, n_classes=3, epochs=5, lr=0.1, alphas=(0.5,)))
>>> sorted(r["sa"]["0.5"])[:2]
['epoch', 'incentive']
"""

import dataclasses
import math
import os
from typing import Optional, Sequence

import numpy as np

from minimal_attn.errors import InputError, check_int_at_least, diverged
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.losses import LOSS_PARADIGMS

SETTINGS = ("linear-orthogonal", "cifar10", "cifar100")
#: setting -> (epochs, lr) when not given: Figures 2-3's bottom rows (1000 steps of 5
#: reach t = 5000 of Theorem 1) for the linear setting; a short CNN run on CIFAR.
DEFAULT_EPOCHS_LR = {"linear-orthogonal": (1000, 5.0), "cifar10": (20, 0.01),
                     "cifar100": (20, 0.01)}
#: CIFAR with ``optimizer="adam"``: the authors' released rate (authors-code-notes.md).
ADAM_LR = 5e-4
LINEAR_CLASSES = 20                    # C of Figures 2-3's bottom rows
CSV_HEADER = ["alpha", "epoch", "loss", "incentive", "loss_closed_form",
              "incentive_closed_form"]
GROWTH = 100.0                         # a loss this many times its start has diverged


@dataclasses.dataclass
class FixedFocusConfig:
    """What ``attn-dyn fixed-focus`` runs (every field is also a command-line option)."""

    setting: str = "linear-orthogonal"  # one of SETTINGS
    m: int = 20                         # segments per mosaic
    n_classes: Optional[int] = None     # None: 20 (linear), all foreground classes (CIFAR)
    alphas: Sequence = (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)  # numbers, numeric strings, "0.2,0.5"
    epochs: Optional[int] = None        # None: DEFAULT_EPOCHS_LR[setting]
    lr: Optional[float] = None          # None: DEFAULT_EPOCHS_LR[setting]
    delta: float = 0.01                 # incentive focus step: alpha' = min(alpha + delta, 1)
    paradigms: Sequence[str] = LOSS_PARADIGMS
    data_dir: Optional[str] = None      # CIFAR: folder with cifar-10-batches-py / cifar-100-python
    n_train: int = 1000                 # CIFAR: training mosaics
    device: str = "cpu"                 # CIFAR: torch device (cpu, cuda, cuda:K)
    optimizer: str = "sgd"              # CIFAR: sgd (momentum 0.9) or adam (authors' code)
    classifier: str = "paper"           # CIFAR: paper (A.2's layers) or lenet (authors')
    seed: int = 0                       # background draw (linear); mosaics and CNN (CIFAR)
    threads: Optional[int] = None       # CIFAR: torch CPU threads (None: torch's setting)


def _alphas(alphas):
    """``{key: alpha}``; keys are the strings as given (``"0.50"``) or ``repr(float)``; a
    comma list or one number reads as a list (:func:`minimal_attn.fixed_focus.check_alphas`)."""
    from minimal_attn.errors import as_list
    from minimal_attn.fixed_focus import check_alphas

    items = as_list(alphas)
    values = check_alphas(items, param="alphas")
    return {a.strip() if isinstance(a, str) else repr(v): v for a, v in zip(items, values)}


def resolve(cfg):
    """A checked copy of ``cfg`` with the setting's defaults filled in."""
    if cfg.setting not in SETTINGS:
        raise InputError(f"unknown setting {cfg.setting!r}: use one of {', '.join(SETTINGS)}",
                         param="setting")
    epochs, lr = DEFAULT_EPOCHS_LR[cfg.setting]
    for name, allowed in (("optimizer", ("sgd", "adam")), ("classifier", ("paper", "lenet"))):
        if getattr(cfg, name) not in allowed:
            raise InputError(f"{name} must be one of {', '.join(allowed)}, got "
                             f"{getattr(cfg, name)!r}", param=name)
        if cfg.setting == "linear-orthogonal" and getattr(cfg, name) != allowed[0]:
            raise InputError(f"{name} {getattr(cfg, name)} applies to the CIFAR settings; "
                             "the linear-orthogonal setting follows gradient flow (Theorem 1)",
                             param=name)
    if cfg.optimizer == "adam":
        lr = ADAM_LR
    cfg = dataclasses.replace(cfg, epochs=epochs if cfg.epochs is None else cfg.epochs,
                              lr=lr if cfg.lr is None else cfg.lr)
    check_int_at_least("epochs", cfg.epochs, 1, param="epochs")
    if not (math.isfinite(cfg.lr) and cfg.lr > 0):
        raise InputError(f"lr must be a finite number > 0, got {cfg.lr}", param="lr")
    if not (math.isfinite(cfg.delta) and 0 < cfg.delta <= 1):
        raise InputError(f"delta must lie in (0, 1], got {cfg.delta}", param="delta")
    check_int_at_least("m (segments per mosaic)", cfg.m, 2, param="m")
    check_int_at_least("n_train", cfg.n_train, 1, param="n_train")
    check_int_at_least("seed", cfg.seed, 0, param="seed")     # numpy refuses negative seeds
    if cfg.threads is not None:
        check_int_at_least("threads", cfg.threads, 1, param="threads")
        if cfg.setting == "linear-orthogonal":
            raise InputError("threads applies to the CIFAR settings (torch); the "
                             "linear-orthogonal setting runs in NumPy: drop it",
                             param="threads")
    from minimal_attn.errors import as_list
    from minimal_attn.fixed_focus import check_paradigms

    if any(str(p).strip().lower() == "hybrid" for p in as_list(cfg.paradigms)):
        raise InputError("hybrid is a schedule, not a fixed-focus loss: use sa, ha, lv or all",
                         param="paradigm")
    paradigms = check_paradigms(cfg.paradigms, param="paradigms")
    n_alphas = len(_alphas(cfg.alphas))
    check_steps(cfg.epochs * len(paradigms), "training every paradigm", param="epochs")
    # loss, incentive and their closed forms: (epochs + 1, A) per paradigm
    check_memory(4 * 8 * (cfg.epochs + 1) * n_alphas * len(paradigms),
                 f"recording {cfg.epochs} epochs", param="epochs")
    if cfg.setting == "linear-orthogonal":
        C = LINEAR_CLASSES if cfg.n_classes is None else cfg.n_classes
        check_int_at_least("n_classes", C, 2, param="n_classes")
        if cfg.data_dir is not None:
            raise InputError(f"data_dir {cfg.data_dir} applies to the CIFAR settings; the "
                             "linear-orthogonal setting builds its exact population: drop "
                             "--data-dir or add --setting cifar10", param="data_dir")
        # exact population X (2 C m, m, C + 2) float64, its distinct segments and caches
        check_memory(6 * 8 * 2 * C * cfg.m * cfg.m * (C + 2),
                     f"the exact population of {cfg.m} segments and {C} classes",
                     param=("m", "n_classes"))
    else:
        from minimal_attn.datasets.splits import default_foreground

        n_fg = len(default_foreground(cfg.setting))
        C = n_fg if cfg.n_classes is None else cfg.n_classes
        if not (check_int_at_least("n_classes", C, 2, param="n_classes") <= n_fg):
            raise InputError(f"n_classes must be at most {n_fg} for {cfg.setting}: the "
                             "foreground classes of attn-dyn train (the rest are background)",
                             param="n_classes")
        if cfg.data_dir is None:
            raise InputError(f"setting {cfg.setting} needs data_dir: the folder holding "
                             + ("cifar-10-batches-py" if cfg.setting == "cifar10"
                                else "cifar-100-python"), param=("setting", "data_dir"))
        if not os.path.isdir(cfg.data_dir):
            raise InputError(f"data_dir {cfg.data_dir} is not a folder; give the folder "
                             "holding " + ("cifar-10-batches-py" if cfg.setting == "cifar10"
                                           else "cifar-100-python"), param="data_dir")
        # uint8 mosaics, their float32 copy and the CNN's working set, plus the data set
        check_memory(cfg.n_train * cfg.m * 3072 * 10 + 2**29,
                     f"{cfg.n_train} CIFAR mosaics of {cfg.m} images", param=("n_train", "m"))
    return dataclasses.replace(cfg, n_classes=C, paradigms=paradigms)


def linear_model(cfg):
    """(fixed-focus model, foreground positions z) of a resolved linear-orthogonal ``cfg``."""
    from minimal_attn.data import exact_population
    from minimal_attn.fixed_focus import LinearFixedFocusModel

    data = exact_population(cfg.m, cfg.n_classes, seed=cfg.seed)
    return LinearFixedFocusModel(data.X, data.y, cfg.n_classes), data.z


class _Watched:
    """A fixed-focus model that stops the run once a loss is non-finite or grew GROWTH-fold."""

    def __init__(self, model):
        self.model, self.start = model, None

    def init(self, alphas):
        self.start = None
        return self.model.init(alphas)

    def step(self, state, log_attention, paradigm, lr):
        with np.errstate(over="ignore", invalid="ignore"):
            return self.model.step(state, log_attention, paradigm, lr)

    def losses(self, state, log_attention, paradigm):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = np.asarray(self.model.losses(state, log_attention, paradigm), dtype=float)
        if self.start is None:
            self.start = np.maximum(np.abs(out), 1.0)
        if not np.all(np.isfinite(out)) or np.any(np.abs(out) > GROWTH * self.start):
            raise diverged(f"the {paradigm} fixed-focus loss reached {np.max(np.abs(out)):.3g}")
        return out


def run_fixed_focus(cfg, progress=None, model=None):
    """Fixed-focus loss and incentive curves (and closed forms in the linear setting).

    ``model`` is a ``(fixed-focus model, z)`` pair built from the resolved config;
    None builds the linear one. The CIFAR settings need the torch CNN: call
    :func:`minimal_attn.backends.vr.fixed_focus.run_fixed_focus` (same
    arguments), which builds the mosaics and the model and then calls this.
    ``progress(label, done, total, note)``: one unit per paradigm and recorded
    epoch (:mod:`.progress`).

    Returns
    -------
    dict ``{paradigm: {alpha key: {"epoch", "loss", "incentive", "loss_closed_form",
    "incentive_closed_form"}}}`` of arrays (epochs + 1,); closed forms None on CIFAR.
    """
    from minimal_attn.fixed_focus import closed_form_curves, fixed_focus_curves

    cfg = resolve(cfg)
    alphas = _alphas(cfg.alphas)
    if model is None and cfg.setting != "linear-orthogonal":
        raise InputError(f"setting {cfg.setting} needs the torch CNN: use "
                         "minimal_attn.backends.vr.fixed_focus.run_fixed_focus",
                         param="setting")
    model, z = linear_model(cfg) if model is None else model
    tick = counter(progress, "training g", work_units(cfg))
    raw = fixed_focus_curves(_Watched(model), z, cfg.m, list(alphas.values()), cfg.paradigms,
                             cfg.epochs, cfg.lr, delta=cfg.delta,
                             callback=lambda p, k: tick())
    out = {}
    for p, curves in raw.items():
        exact = (closed_form_curves(p, list(alphas.values()), cfg.epochs, cfg.lr,
                                    cfg.n_classes, cfg.delta)
                 if cfg.setting == "linear-orthogonal" else {})
        out[p] = {key: {**curves[a], **exact.get(a, {"loss_closed_form": None,
                                                     "incentive_closed_form": None})}
                  for key, a in alphas.items()}
    return out


def work_units(cfg):
    """Progress units of :func:`run_fixed_focus`: one per paradigm and recorded epoch."""
    cfg = resolve(cfg)
    return len(cfg.paradigms) * (cfg.epochs + 1)


def _cells(values, n):
    return [""] * n if values is None else [repr(float(v)) for v in values]


def write_fixed_focus(result, out):
    """``fixed_focus_<paradigm>.csv`` (columns CSV_HEADER), ``fixed_focus_losses.png`` and
    ``focus_incentives.png`` into ``out``, all or none, replacing the files of an earlier
    ``fixed-focus`` run there; returns the file names."""
    from minimal_attn.experiments.io import write_csv
    from minimal_attn.experiments.plots import plot_fixed_focus_losses, plot_incentives
    from minimal_attn.experiments.run_folders import replacing_set

    names = [f"fixed_focus_{p}.csv" for p in result]
    with replacing_set(out, "fixed-focus") as stage:
        for name, curves in zip(names, result.values()):
            rows = []
            for key, c in curves.items():
                cols = [_cells(c[k], len(c["epoch"])) for k in CSV_HEADER[2:]]
                rows += [[key, int(e), *cells] for e, *cells in zip(c["epoch"], *cols)]
            write_csv(os.path.join(stage, name), CSV_HEADER, rows)
        plot_fixed_focus_losses(result, os.path.join(stage, "fixed_focus_losses.png"))
        plot_incentives(result, os.path.join(stage, "focus_incentives.png"))
    return names + ["fixed_focus_losses.png", "focus_incentives.png"]


def fixed_focus_json(result):
    """JSON-ready copy: lists of floats (null for non-finite or absent), epochs as ints."""
    def series(name, v):
        if v is None:
            return None
        if name == "epoch":
            return [int(e) for e in v]
        return [float(x) if math.isfinite(x) else None for x in v]

    return {p: {k: {name: series(name, v) for name, v in c.items()} for k, c in curves.items()}
            for p, curves in result.items()}


def summary(result, cfg):
    """A short table: final loss and incentive per paradigm and alpha."""
    cfg = resolve(cfg)
    exact = cfg.setting == "linear-orthogonal"
    lines = [f"after {cfg.epochs} epochs (lr {cfg.lr:g}"
             + (f", t = {cfg.epochs * cfg.lr:g})" if exact else ")"),
             f"  {'paradigm':8s} {'alpha':>6s} {'loss':>10s} {'incentive':>10s}"
             + (f" {'loss (exact)':>12s}" if exact else "")]
    for p, curves in result.items():
        for key, c in curves.items():
            line = f"  {p:8s} {key:>6s} {c['loss'][-1]:10.4g} {c['incentive'][-1]:10.4g}"
            lines.append(line + (f" {c['loss_closed_form'][-1]:12.4g}" if exact else ""))
    return "\n".join(lines)
