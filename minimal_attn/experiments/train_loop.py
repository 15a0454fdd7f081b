r"""One epoch/checkpoint skeleton for every FCAM trainer (V&R Section 2.4, Table 1).

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. A *trainer* knows
its model (the CNN FCAM in ``backends/vr/train.py``, the linear FCAM in
:mod:`.linear_train`); this module runs the epochs the same way for both:

* the schedule: the loss paradigm of each epoch (the hybrid trains SA until its
  switch, then HA; ``switch_epoch="auto"`` picks the switch from SA's focus,
  :func:`auto_switch`) and its learning rate;
* after every epoch: the divergence check, a test evaluation scored with the
  inference rule of the epoch's phase (every ``eval_every`` epochs and at the
  end; the record's test fields are None in between), one history record, an
  atomic checkpoint (every ``checkpoint_every`` epochs and at the end; the
  previous one kept as ``.ckpt.prev``) and the callbacks;
* ``time_limit``: a run ends at the first epoch boundary after that many
  seconds, is evaluated as it stands and says ``time_limited``;
* the stop rule of the authors' released code (``stop_loss``): a run ends
  after the first epoch whose mean training loss is at most ``stop_loss``;
* resume: the checkpoint is checked only against the settings that affect its
  run (:func:`affecting`); an unreadable one falls back to ``.ckpt.prev``.

A trainer provides ``KIND``, ``LR_TABLE``, ``m``, ``steps(batch_size)``,
``train_epoch(phase, lr, epoch, step)``, ``evaluate(split, rule)``,
``read(path)``, ``restore(payload)``, ``save(file, meta)`` and optionally
``probe_loss(phase)`` (the loss on one fixed batch, for the divergence check).
"""

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional, Union

from minimal_attn import losses
from minimal_attn.errors import InputError, check_paradigm
from minimal_attn.experiments.checkpoints import check_format, load_guarded, write_checkpoint  # noqa: F401 (re-exported)
from minimal_attn.experiments.progress import counter

#: The paper's learning rates (Appendix A.2): dataset -> loss paradigm -> lr.
#: Synthetic image mosaics use CIFAR-10's.
PAPER_LR = {"cifar10": {"sa": 0.01, "ha": 0.005, "lv": 0.01},
            "cifar100": {"sa": 0.005, "ha": 0.001, "lv": 0.01}}
#: Adam (the authors' released code, ``../shared/papers/authors-code-notes.md``):
#: lr 5e-4 for both networks. They trained SA only; the other paradigms take the
#: same rate.
ADAM_LR = {"sa": 5e-4, "ha": 5e-4, "lv": 5e-4}
OPTIMIZERS = ("sgd", "adam")
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


def paper_setting(dataset):
    """The paper's setting whose networks and rates a data set uses (synthetic: CIFAR-10's)."""
    return "cifar100" if dataset == "cifar100" else "cifar10"


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
    device: Optional[str] = None         # None: cuda if available, else cpu
    threshold: float = 0.8               # SAIF / focus-true threshold tau
    dataset: str = "cifar10"             # picks the Appendix A.2 networks and default lrs
    n_classes: int = 3
    chunk: Optional[int] = None          # images per network call; None: by device
    width: float = 1.0                   # network width multiplier (1 = Appendix A.2)
    focus_init: str = "zero"             # uniform start: output layer zero, or mirror
    classifier: str = "paper"            # paper (A.2's layers) or lenet (authors' code)
    # run control only (no effect on the trajectory, so not in `affecting`):
    eval_every: int = 1                  # score the test set every k epochs and at the end
    checkpoint_every: int = 1            # checkpoint every k epochs and at the end
    time_limit: Optional[float] = None   # seconds: end the run at the next epoch boundary

    def __post_init__(self):
        self.paradigm = check_paradigm(self.paradigm)
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got "
                             f"{self.optimizer!r}", param="optimizer")
        for key in ("eval_every", "checkpoint_every"):
            if int(getattr(self, key)) < 1:
                raise InputError(f"{key} must be a whole number >= 1, got "
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

    def stopped(self, history):
        """True once the latest epoch's mean training loss reached ``stop_loss``."""
        return (self.stop_loss is not None and bool(history)
                and history[-1]["loss"] <= self.stop_loss)

    def fixed_switch(self):
        """The hybrid's first HA epoch when fixed; None for ``auto`` (chosen while training)."""
        if self.switch_epoch == "auto":
            return None
        return self.epochs // 2 if self.switch_epoch is None else int(self.switch_epoch)

    def latest_switch(self):
        """``auto`` switches at the latest here, so HA gets at least a quarter of the epochs."""
        return self.epochs - max(1, self.epochs // 4)

    def rates(self, table=None):
        """Learning rate of each loss phase of this run, e.g. {"sa": 0.01, "ha": 0.005}."""
        table = table or (ADAM_LR if self.optimizer == "adam"
                          else PAPER_LR[paper_setting(self.dataset)])
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
    for key, default in (("optimizer", "sgd"), ("focus_init", "zero"),
                         ("classifier", "paper")):
        if getattr(config, key) != default:
            out[key] = getattr(config, key)
    out["lr"] = config.rates(table)
    if config.paradigm == "hybrid":
        out["switch_epoch"] = config.switch_epoch
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
    """Raise InputError when the loss is non-finite or grew by orders of magnitude.

    ``loss``: the epoch's mean loss; ``after``: the loss on one batch after the
    epoch (an epoch of one step shows a blow-up only there).
    """
    reference = max(math.log(config.n_classes), history[0]["loss"] if history else 0.0)
    for value in (loss, loss if after is None else after):
        if not math.isfinite(value) or value > DIVERGE * reference:
            raise InputError(f"{config.paradigm} seed {config.seed} diverged; lower the "
                             f"learning rate lr (loss {value:.4g} in epoch "
                             f"{len(history) + 1})", param="lr")
    return loss


def read_checkpoint(path, trainer, config, fingerprint, log):
    """(meta, payload) of the newest readable checkpoint, falling back to ``.prev``."""
    state = load_guarded(
        path, trainer.read, lambda state: check_format(state[0], CHECKPOINT_FORMAT, trainer.KIND),
        lambda state, candidate: _check_settings(state[0], config, trainer, fingerprint,
                                                 candidate),
        fix="delete it or drop --resume", log=log)
    return (None, None) if state is None else state


def _check_settings(meta, config, trainer, fingerprint, path):
    saved, now = meta["config"], affecting(config, trainer.LR_TABLE)
    diff = [k for k in dict.fromkeys([*now, *saved]) if saved.get(k) != now.get(k)]
    if diff:
        raise InputError(f"checkpoint {path} was written with different settings "
                         f"({', '.join(f'{k}={saved.get(k)!r}' for k in diff)}); "
                         "use the same options or drop --resume")
    if meta["data"] != fingerprint:
        raise InputError(f"checkpoint {path} was written for different mosaics; use the "
                         "same dataset/m/n_train/n_test/data_dir or drop resume")
    if meta["epoch"] > config.epochs:
        raise InputError(f"checkpoint {path} already holds {meta['epoch']} epochs, more "
                         f"than epochs={config.epochs}", param="epochs")


def run_epochs(config, trainer, fingerprint, out_dir=None, resume=False, progress=None,
               callback=None, log=None):
    """Train ``trainer`` for ``config.epochs`` epochs (fewer if ``config.stop_loss`` is
    reached); return the result dict.

    ``progress(label, done, total, note)`` hears of every step (one task per
    epoch, :mod:`.progress`); ``callback(epoch, record)`` runs after each
    checkpoint; ``log(line)`` receives warnings.
    """
    log = log or (lambda line: None)
    path = checkpoint_path(out_dir, config) if out_dir is not None else None
    meta = {"format": CHECKPOINT_FORMAT, "kind": trainer.KIND, "epoch": 0,
            "config": affecting(config, trainer.LR_TABLE), "data": fingerprint,
            "history": [], "train_seconds": 0.0, "switch_epoch": config.fixed_switch()}
    if resume and path is not None:
        saved, payload = read_checkpoint(path, trainer, config, fingerprint, log)
        if saved is not None:
            trainer.restore(payload)
            meta = saved
    start, history, rates = meta["epoch"], meta["history"], config.rates(trainer.LR_TABLE)
    test_eval = None                       # the latest epoch's test evaluation, reused
    out_of_time, time_limited = config.deadline(), False
    for epoch in range(start, config.epochs):
        if config.stopped(history):      # the stop rule (also after a resume)
            break
        if out_of_time():
            time_limited = True
            if path is not None and epoch > start:   # the last epoch may not be saved yet
                write_checkpoint(path, lambda f: trainer.save(f, meta))
            break
        t0 = time.perf_counter()
        phase = config.phase(epoch, meta["switch_epoch"])
        # the hybrid's SA phase is scored with SA's rule, its HA phase with HA's
        rule = "sa" if config.paradigm == "hybrid" and phase == "sa" else config.paradigm
        label = f"{config.paradigm} seed {config.seed} epoch {epoch + 1}/{config.epochs}"
        tick = counter(progress, label, trainer.steps(config.batch_size))
        loss, acc, a_z = trainer.train_epoch(
            phase, rates[phase], epoch,
            lambda value=None, tick=tick: tick(1, None if value is None else f"loss {value:.4f}"))
        check_divergence(loss, history, config, trainer.probe_loss(phase)
                         if hasattr(trainer, "probe_loss") else None)
        ends = config.stop_loss is not None and loss <= config.stop_loss or out_of_time()
        test_eval = (rule, trainer.evaluate("test", rule)) \
            if config.due(config.eval_every, epoch, ends) else None
        record = {"paradigm": config.paradigm, "seed": config.seed, "epoch": epoch + 1,
                  "phase": phase, "rule": "ha" if rule == "hybrid" else rule,
                  "lr": rates[phase], "loss": loss, "train_accuracy": acc, "mean_a_z": a_z,
                  "test_accuracy": None if test_eval is None else test_eval[1][0]["accuracy"],
                  "test_saif": None if test_eval is None else test_eval[1][0]["saif"]}
        history.append(record)
        if config.switch_epoch == "auto" and meta["switch_epoch"] is None and (
                auto_switch([h["mean_a_z"] for h in history], trainer.m)
                or epoch + 1 >= config.latest_switch()):
            meta["switch_epoch"] = epoch + 1
        meta["train_seconds"] += time.perf_counter() - t0
        meta["epoch"] = epoch + 1
        record["seconds"] = meta["train_seconds"]
        if path is not None and config.due(config.checkpoint_every, epoch, ends):
            write_checkpoint(path, lambda f: trainer.save(f, meta))
        if callback is not None:
            callback(epoch, record)
    train_summary, train_inst = trainer.evaluate("train", config.paradigm)
    if test_eval is None or test_eval[0] != config.paradigm:
        test_eval = config.paradigm, trainer.evaluate("test", config.paradigm)
    test_summary, test_inst = test_eval[1]
    return {"paradigm": config.paradigm, "seed": config.seed, "train": train_summary,
            "test": test_summary, "history": history,
            "instances": {"train": train_inst, "test": test_inst},
            "resumed_from_epoch": start, "seconds": meta["train_seconds"],
            "switch_epoch": meta["switch_epoch"] if config.paradigm == "hybrid" else None,
            "stopped_epoch": stopped_epoch(config, history), "time_limited": time_limited,
            "warnings": collapse_warnings(history, trainer.m)}


def stopped_epoch(config, history):
    """The epoch at which the stop rule ended the run, or None (it ran all its epochs)."""
    return history[-1]["epoch"] if config.stopped(history) else None
