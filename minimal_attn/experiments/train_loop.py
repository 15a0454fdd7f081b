r"""The settings of an FCAM training run and the rules its epochs follow (V&R Sec. 2.4).

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. :class:`TrainConfig`
holds one run (a paradigm and a seed): its optimiser, learning rates (the
paper's table, Adam's, or given), the hybrid's switch, the stop rule of the
authors' released code (``stop_loss``) and run control (``eval_every``,
``checkpoint_every``, ``time_limit``). Beside it, the rules the one epoch loop
(:mod:`.epochs`) applies: the automatic hybrid switch (:func:`auto_switch`), the
divergence and late-collapse checks, and what a checkpoint must share with the
run that resumes it (:func:`affecting`, :func:`read_checkpoint`: an unreadable
checkpoint falls back to ``.ckpt.prev``).
"""

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional, Union

from minimal_attn import losses
from minimal_attn.datasets.mosaics import PIXEL_SCALINGS
from minimal_attn.datasets.splits import paper_setting  # noqa: F401 (re-exported)
from minimal_attn.errors import DivergedError, InputError, check_paradigm
from minimal_attn.experiments import checkpoints

#: The paper's learning rates (Appendix A.2): dataset -> loss paradigm -> lr.
#: Synthetic image mosaics use CIFAR-10's.
PAPER_LR = {"cifar10": {"sa": 0.01, "ha": 0.005, "lv": 0.01},
            "cifar100": {"sa": 0.005, "ha": 0.001, "lv": 0.01}}
#: Where A.2 gives another rate for another m: (dataset, m) -> paradigm -> lr. CIFAR-100 HA:
#: "0.001 and 0.007 for settings (m = 5, n = 50k; m = 20, n = 50k) respectively".
PAPER_LR_BY_M = {("cifar100", 20): {"ha": 0.007}}


def paper_lr(dataset, m=None):
    """Appendix A.2's learning rates of ``dataset`` (paper setting) at ``m`` segments:
    paradigm -> lr (``m`` None or a size A.2 gives nothing special for: the m = 5 rates)."""
    setting = paper_setting(dataset)
    return {**PAPER_LR[setting], **PAPER_LR_BY_M.get((setting, m), {})}


#: Adam (the authors' released code, ``../shared/papers/authors-code-notes.md``):
#: lr 5e-4 for both networks. They trained SA only; the other paradigms take the
#: same rate.
ADAM_LR = {"sa": 5e-4, "ha": 5e-4, "lv": 5e-4}
OPTIMIZERS = ("sgd", "adam")
#: How the seed-batched CNN trainer runs a step (backends/vr/batched_step.py): eagerly,
#: through torch.compile, or captured whole in a CUDA graph (CUDA only).
COMPILE_MODES = ("none", "compile", "cudagraph")
#: How the seed-batched CNN trainer runs the seeds' convolutions (backends/vr/batched.py):
#: each seed's own, one grouped convolution (channels-last or NCHW), or a batched matrix
#: product of image patches. Not set: grouped_nchw on CUDA, loop on the CPU.
CONV_MODES = ("loop", "grouped", "grouped_nchw", "unfold")
#: The arithmetic of the seed-batched CNN trainer (backends/vr/batched_step.py): float32,
#: float32 with TF32 matmuls (CUDA only), or its forwards under bfloat16 autocast.
PRECISIONS = ("fp32", "tf32", "bf16")
#: How CIFAR pixels become inputs (the scalings of minimal_attn.datasets.mosaics):
#: standardised by the CIFAR-10 statistics, or to [-1, 1] as the authors' notebooks.
PIXELS = tuple(PIXEL_SCALINGS)
#: Defaults for the linear FCAM (plain gradient descent from zero), chosen on the
#: synthetic Gaussian mosaics; the paper gives none for this experiment.
LINEAR_LR = {"sa": 0.5, "ha": 0.5, "lv": 0.5}
CHECKPOINT_FORMAT = 2
#: Auto switch and collapse: the focus has "risen" once mean a_z exceeds
#: 1/m + RISE (1 - 1/m); it has "stalled" when it gained less than MIN_GAIN
#: over PATIENCE epochs.
RISE, MIN_GAIN, PATIENCE = 0.1, 0.02, 2
#: Divergence: the epoch loss exceeds DIVERGE x max(log C, first epoch's loss).
DIVERGE = 100.0


@dataclass
class TrainConfig:
    """One training run: a paradigm, a seed and the optimiser settings."""

    paradigm: str = "sa"                 # sa, ha, lv or hybrid
    epochs: int = 10
    lr: Optional[float] = None           # None: the table's lr (hybrid: its SA phase)
    hybrid_lr: Optional[float] = None    # hybrid's HA-phase lr; None: the table's HA lr
    optimizer: str = "sgd"               # sgd (the paper's A.2) or adam (authors' code)
    momentum: float = 0.9                # SGD momentum (the CNN; the linear FCAM uses none)
    stop_loss: Optional[float] = None    # stop after the first epoch with mean loss <= this
    batch_size: int = 100
    seed: int = 0                        # initialisation and shuffling
    switch_epoch: Union[int, str, None] = None  # hybrid: first HA epoch; None: epochs // 2;
    #                                      "auto": when SA's focus stalls (auto_switch)
    #                                      or SA meets the stop rule
    device: Optional[str] = None         # None: cuda if available, else cpu
    threshold: float = 0.8               # SAIF / focus-true threshold tau
    dataset: str = "cifar10"             # picks the Appendix A.2 networks and default lrs
    m: Optional[int] = None              # segments; only picks A.2's rate (paper_lr)
    n_classes: int = 3
    chunk: Optional[int] = None          # images per network call; None: by device
    width: float = 1.0                   # network width multiplier (1 = Appendix A.2)
    focus_init: str = "zero"             # uniform start: output layer zero, or mirror
    classifier: str = "paper"            # paper (A.2's layers) or lenet (authors' code)
    pixels: str = "standard"             # image scaling: standard (CIFAR-10 stats) or half
    # run control only (no effect on the trajectory, so not in `affecting`):
    eval_every: int = 1                  # score the test set every k epochs and at the end
    checkpoint_every: int = 1            # checkpoint every k epochs and at the end
    time_limit: Optional[float] = None   # seconds: end the run at the next epoch boundary
    compile: str = "none"                # seeds batched: none, compile or cudagraph (CUDA)
    conv_mode: Optional[str] = None      # seeds batched: CONV_MODES; None: by device
    precision: str = "fp32"              # seeds batched: fp32, tf32 (CUDA) or bf16 autocast

    def __post_init__(self):
        self.paradigm = check_paradigm(self.paradigm)
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got "
                             f"{self.optimizer!r}", param="optimizer")
        for key in ("eval_every", "checkpoint_every"):
            if int(getattr(self, key)) < 1:
                raise InputError(f"{key} must be a whole number >= 1, got "
                                 f"{getattr(self, key)!r}", param=key)
        for key, allowed in (("compile", COMPILE_MODES), ("precision", PRECISIONS),
                             ("conv_mode", (None,) + CONV_MODES), ("pixels", PIXELS)):
            if getattr(self, key) not in allowed:
                named = ", ".join(a for a in allowed if a is not None)
                raise InputError(f"{key} must be one of {named}, got "
                                 f"{getattr(self, key)!r}", param=key)
        if self.time_limit is not None and not float(self.time_limit) > 0:
            raise InputError(f"time_limit must be a positive number of seconds, got "
                             f"{self.time_limit!r}", param="time_limit")

    def due(self, every, epoch, last=False):
        """True when epoch index ``epoch`` (0-based) ends a period of ``every`` epochs,
        is the last epoch or ``last`` says the run ends after it."""
        return last or (epoch + 1) % int(every) == 0 or epoch + 1 >= self.epochs

    def deadline(self):
        """A ``clock() -> bool`` that turns True once ``time_limit`` seconds have passed."""
        start = time.perf_counter()
        return lambda: (self.time_limit is not None
                        and time.perf_counter() - start >= float(self.time_limit))

    def meets_stop(self, loss, phase):
        """Whether an epoch of mean training loss ``loss`` in ``phase`` ends the run.

        The stop rule (``stop_loss``) ends a hybrid in its HA phase only: an SA epoch
        that meets it does not end the run (which would leave an SA model scored by
        HA's rule); under ``switch_epoch="auto"`` it switches the hybrid to HA instead.
        """
        return (self.stop_loss is not None and loss <= self.stop_loss
                and not (self.paradigm == "hybrid" and phase == "sa"))

    def stopped(self, history):
        """True once the latest epoch met the stop rule (:meth:`meets_stop`)."""
        return bool(history) and self.meets_stop(history[-1]["loss"],
                                                 history[-1].get("phase"))

    def fixed_switch(self):
        """The hybrid's number of SA epochs (0-based index of its first HA epoch; the
        history's epochs count from 1) when fixed; None for ``auto`` (chosen while training)."""
        if self.switch_epoch == "auto":
            return None
        return self.epochs // 2 if self.switch_epoch is None else int(self.switch_epoch)

    def latest_switch(self):
        """``auto`` switches at the latest here, so HA gets at least a quarter of the epochs."""
        return self.epochs - max(1, self.epochs // 4)

    def rates(self, table=None):
        """Learning rate of each loss phase of this run, e.g. {"sa": 0.01, "ha": 0.005}."""
        table = table or (ADAM_LR if self.optimizer == "adam"
                          else paper_lr(self.dataset, self.m))
        if self.paradigm != "hybrid":
            p = self.paradigm
            return {p: float(table[p] if self.lr is None else self.lr)}
        return {"sa": float(table["sa"] if self.lr is None else self.lr),
                "ha": float(table["ha"] if self.hybrid_lr is None else self.hybrid_lr)}

    def learning_rate(self, epoch, table=None, switch=None):
        """The lr at ``epoch`` (``switch``: the hybrid's switch when ``auto`` chose one)."""
        return self.rates(table)[self.phase(epoch, switch)]

    def phase(self, epoch, switch=None):
        """The loss paradigm (sa, ha, lv) in force at ``epoch``."""
        switch = self.fixed_switch() if switch is None else switch
        return losses.phase(self.paradigm, epoch, self.epochs if switch is None else switch)


def affecting(config, table):
    """The settings a checkpoint must share with the run that resumes it.

    Only what changes this run's trajectory: an SA checkpoint ignores the
    hybrid's switch and HA rate, and a single-paradigm run may be extended
    with more epochs (the hybrid's default switch depends on them).
    """
    keep = ("paradigm", "seed", "batch_size", "dataset", "n_classes", "width",
            "embedding")                 # embedding: the text FCAM's (TextTrainConfig)
    out = {k: v for k, v in asdict(config).items() if k in keep}
    if config.optimizer == "sgd":        # Adam has no momentum setting
        out["momentum"] = config.momentum
    # named only when not the default, so checkpoints written before these
    # options existed still resume
    # (precision: bf16 moves the trajectory by more than rounding; not mixed within a run;
    # stop_loss: where a run ends and an auto hybrid switches; threshold: SAIF's bar, one
    # per history)
    for key, default in (("optimizer", "sgd"), ("focus_init", "zero"),
                         ("classifier", "paper"), ("precision", "fp32"),
                         ("pixels", "standard"), ("stop_loss", None), ("threshold", 0.8)):
        if getattr(config, key, default) != default:
            out[key] = getattr(config, key)
    out["lr"] = config.rates(table)
    if config.paradigm == "hybrid":
        switch = config.switch_epoch
        if switch not in (None, "auto") and int(switch) == config.epochs // 2:
            switch = None            # the default, epochs // 2, given explicitly: one setting
        out["switch_epoch"] = switch
        out["epochs"] = config.epochs
    return out


def checkpoint_path(out_dir, config):
    return os.path.join(out_dir, "checkpoints", f"{config.paradigm}_seed{config.seed}.ckpt")


def auto_switch(a_z, m):
    """True when SA's focus has risen and stalled: time to switch the hybrid to HA.

    ``a_z``: mean training a_z after each SA epoch so far. Risen: the last value
    exceeds 1/m + RISE (1 - 1/m); stalled: it gained less than MIN_GAIN over
    the last PATIENCE epochs.
    """
    if len(a_z) <= PATIENCE:
        return False
    risen = a_z[-1] > 1 / m + RISE * (1 - 1 / m)
    return bool(risen and a_z[-1] - a_z[-1 - PATIENCE] < MIN_GAIN)


def collapse_warnings(history, m, rising=3):
    """Warnings for a late collapse: the loss rose ``rising`` epochs in a row, or the
    focus rose clearly above 1/m and fell most of the way back."""
    out = []
    loss = [h["loss"] for h in history]
    for e in range(rising, len(loss)):
        if all(loss[k] > loss[k - 1] for k in range(e - rising + 1, e + 1)):
            out.append(f"training loss rose for {rising} epochs in a row "
                       f"(epochs {e - rising + 2}-{e + 1}: {loss[e - rising]:.4g} -> "
                       f"{loss[e]:.4g})")
            break
    a_z = [h["mean_a_z"] for h in history]
    if a_z:
        peak = max(range(len(a_z)), key=a_z.__getitem__)
        if a_z[peak] > 1 / m + RISE * (1 - 1 / m) and \
                a_z[-1] - 1 / m < 0.2 * (a_z[peak] - 1 / m):
            out.append(f"focus collapsed: mean a_z rose to {a_z[peak]:.3f} in epoch "
                       f"{peak + 1} and fell back to {a_z[-1]:.3f} (1/m = {1 / m:.3f})")
    return out


def check_divergence(loss, history, config, after=None):
    """Raise :class:`~minimal_attn.errors.DivergedError` when the loss is non-finite or
    grew by orders of magnitude.

    ``loss``: the epoch's mean loss; ``after``: the loss on one batch after the
    epoch (an epoch of one step shows a blow-up only there).
    """
    reference = max(math.log(config.n_classes), history[0]["loss"] if history else 0.0)
    for value in (loss, loss if after is None else after):
        if not math.isfinite(value) or value > DIVERGE * reference:
            raise DivergedError(f"{config.paradigm} seed {config.seed} diverged; lower "
                                f"the learning rate lr (loss {value:.4g} in epoch "
                                f"{len(history) + 1})", param="lr")
    return loss


def read_checkpoint(path, trainer, config, fingerprint, log, aside=True):
    """(meta, payload) of the newest readable checkpoint, falling back to ``.prev``:
    the one reader of every trainer (:func:`.checkpoints.read_checkpoint`), which
    refuses other settings or other data in one line; (None, None) when none exists.
    ``aside=False``: a read that only checks leaves an unreadable ``path`` in place."""
    state = checkpoints.read_checkpoint(
        path, trainer.read, CHECKPOINT_FORMAT, trainer.KIND,
        affecting(config, trainer.LR_TABLE), fingerprint, header=lambda state: state[0],
        instead="drop --resume", log=log, aside=aside)
    if state is None:
        return None, None
    if state[0]["epoch"] > config.epochs:
        raise InputError(f"checkpoint {path} already holds {state[0]['epoch']} epochs, more "
                         f"than epochs={config.epochs}", param="epochs")
    return state
