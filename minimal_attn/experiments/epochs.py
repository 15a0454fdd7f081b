r"""The one epoch loop of every FCAM trainer, for one run or S seeds at once (V&R Sec. 2.4).

Vashisht & Ramaswamy (2023), Section 2.4, Appendix A.2 and Table 1 (12 seeds
per paradigm). :func:`run_seeds` trains S *lanes* (seeds of one paradigm) through
a trainer with a seed axis (:class:`SeedTrainer`): the seed-batched CNN FCAM
(``backends/vr/batched_seeds.py``) is one, and any one-run trainer
(:class:`Trainer`: the linear FCAM, the CNN and text FCAMs) becomes one with
S = 1 through :class:`OneRun`; :func:`run_epochs` is that case. So every run,
batched or not, goes through the same steps:

* the schedule: the loss paradigm of each epoch (the hybrid trains SA until its
  switch, then HA; ``switch_epoch="auto"`` picks each lane's switch from its
  SA focus, :func:`.train_loop.auto_switch`) and its learning rate;
* after every epoch: the divergence check (the epoch's mean loss and, where the
  trainer has ``probe_loss``, the loss on one fixed batch after the epoch), a
  test evaluation scored with the inference rule of the epoch's phase (every
  ``eval_every`` epochs and at the end; None in between), one history record
  per lane, an atomic checkpoint per lane (every ``checkpoint_every`` epochs and
  at the end; the previous one kept as ``.ckpt.prev``) and the callbacks;
* the stop rule of the authors' released code (``stop_loss``): a lane ends after
  the first epoch whose mean training loss is at most ``stop_loss``; the others
  go on, and the stopped lane gets phase None (no step, no update). A hybrid's SA
  epochs never end it: there the rule switches an ``auto`` hybrid to HA
  (:meth:`.train_loop.TrainConfig.meets_stop`);
* ``time_limit``: every lane ends at the first epoch boundary after that many
  seconds, is evaluated as it stands and says ``time_limited``;
* resume: each lane's checkpoint is checked only against the settings that
  affect its run (:func:`.train_loop.affecting`); an unreadable one falls back
  to ``.ckpt.prev``. Lanes resume together from one epoch (a lane that the stop
  rule ended earlier excepted).
"""

import os
import time
from typing import Any, List, Optional, Protocol, Sequence, Tuple

from minimal_attn.experiments.checkpoints import write_checkpoint
from minimal_attn.experiments.progress import counter
from minimal_attn.experiments.train_loop import (
    CHECKPOINT_FORMAT,
    affecting,
    auto_switch,
    check_divergence,
    checkpoint_path,
    collapse_warnings,
    read_checkpoint,
)

Stats = Tuple[float, float, float]          # mean loss, running accuracy, mean a_z


class Trainer(Protocol):
    """One run's model for :func:`run_epochs` (CNN, text and linear FCAMs)."""

    KIND: str                               # the checkpoint kind, checked on resume
    LR_TABLE: Optional[dict]                # paradigm -> lr; None: TrainConfig's table
    m: int                                  # segments per mosaic

    def steps(self, batch_size: int) -> int: ...
    def train_epoch(self, phase: str, lr: float, epoch: int, step) -> Stats: ...
    def evaluate(self, split: str, rule: str) -> Tuple[dict, dict]: ...
    def read(self, path: str) -> Tuple[dict, Any]: ...
    def restore(self, payload: Any) -> None: ...
    def save(self, f, meta: dict) -> None: ...
    # optional: probe_loss(phase) -> float, the loss on one fixed batch


class SeedTrainer(Protocol):
    """S lanes (seeds) of one paradigm for :func:`run_seeds`; lists hold one entry per
    lane, None for a lane that does not run (phase None: stopped)."""

    KIND: str
    LR_TABLE: Optional[dict]
    m: int

    def steps(self, batch_size: int) -> int: ...
    def train_epoch(self, phases: Sequence[Optional[str]], lrs: Sequence[float], epoch: int,
                    step) -> List[Optional[Stats]]: ...
    def probe_loss(self, phases: Sequence[Optional[str]]) -> List[Optional[float]]: ...
    def evaluate(self, split: str, rules: Sequence[Optional[str]]) -> List[Optional[tuple]]: ...
    def read(self, path: str) -> Tuple[dict, Any]: ...
    def restore(self, payloads: Sequence[Any]) -> None: ...
    def save(self, k: int, f, meta: dict) -> None: ...


class OneRun:
    """A :class:`Trainer` as a :class:`SeedTrainer` of one lane."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.KIND, self.LR_TABLE, self.m = trainer.KIND, trainer.LR_TABLE, trainer.m

    def steps(self, batch_size):
        return self.trainer.steps(batch_size)

    def train_epoch(self, phases, lrs, epoch, step):
        return [self.trainer.train_epoch(phases[0], lrs[0], epoch, step)]

    def probe_loss(self, phases):
        probe = getattr(self.trainer, "probe_loss", None)
        return [None if probe is None else probe(phases[0])]

    def evaluate(self, split, rules):
        return [self.trainer.evaluate(split, rules[0])]

    def read(self, path):
        return self.trainer.read(path)

    def restore(self, payloads):
        self.trainer.restore(payloads[0])

    def save(self, k, f, meta):
        self.trainer.save(f, meta)


def run_epochs(config, trainer, fingerprint, out_dir=None, resume=False, progress=None,
               callback=None, log=None):
    """Train one :class:`Trainer` for ``config.epochs`` epochs (fewer under the stop rule or
    the time limit); the result dict of :func:`run_seeds` for its one lane."""
    return run_seeds([config], OneRun(trainer), fingerprint, out_dir, resume, progress,
                     callback, log)[0]


def _resume(configs, trainer, fingerprint, out_dir, log):
    """Per lane (meta, payload) of its checkpoint, all None for a fresh start, or None when
    the lanes cannot continue together (some lack a checkpoint, or they hold different
    epochs not explained by the stop rule).

    The lanes save one after another, so a run killed between two saves leaves some lanes
    one save ahead: those step back to their ``.prev`` (the save before, where the others
    are), and the lanes go on together exactly as if uninterrupted."""
    paths = [checkpoint_path(out_dir, c) for c in configs]
    saved = [read_checkpoint(path, trainer, c, fingerprint, log)
             for path, c in zip(paths, configs)]
    if all(meta is None for meta, _ in saved):
        return [(None, None)] * len(configs)
    if any(meta is None for meta, _ in saved):
        return None
    live = [meta["epoch"] for c, (meta, _) in zip(configs, saved)
            if not c.stopped(meta["history"])]
    start = min(live) if live else max(meta["epoch"] for meta, _ in saved)
    for k, (c, (meta, _)) in enumerate(zip(configs, saved)):
        if meta["epoch"] > start and os.path.exists(paths[k] + ".prev"):
            before = read_checkpoint(paths[k] + ".prev", trainer, c, fingerprint, log)
            if before[0] is not None and before[0]["epoch"] == start:
                log(f"{os.path.basename(paths[k])}: one save ahead of the other seeds (the "
                    f"run stopped between saves); continuing from its epoch {start} save")
                saved[k] = before
    if any(meta["epoch"] != start and not c.stopped(meta["history"])
           for c, (meta, _) in zip(configs, saved)):
        return None
    return saved


def _drop_cut_evaluation(history, config):
    """A time limit scores the test set after the epoch it cuts, due or not (a partial
    run's history ends scored); the run that continues it drops that score when the epoch
    was not due, so its history is the uninterrupted run's."""
    if history and not config.stopped(history) and \
            not config.due(config.eval_every, history[-1]["epoch"] - 1):
        history[-1].update(test_accuracy=None, test_saif=None)


def run_seeds(configs, trainer, fingerprint, out_dir=None, resume=False, progress=None,
              callback=None, log=None):
    """Train the S lanes of ``trainer``, lane k with ``configs[k]`` (one paradigm and
    epoch count, one seed each); return one result dict per lane, or None when
    ``resume`` finds checkpoints the lanes cannot continue from together.

    ``progress(label, done, total, note)`` hears of every step (one task per
    epoch, :mod:`.progress`); ``callback(epoch, record)`` runs after each
    checkpoint, once per live lane; ``log(line)`` receives warnings. A result holds ``train``,
    ``test`` (final summaries by the paradigm's rule), ``history``, ``instances``,
    ``resumed_from_epoch``, ``seconds`` (training time, the lanes' shares of the
    wall time, kept across resumes), ``switch_epoch``, ``stopped_epoch``,
    ``time_limited`` and ``warnings``.
    """
    log = log or (lambda line: None)
    config, S = configs[0], len(configs)
    paths = [checkpoint_path(out_dir, c) if out_dir is not None else None for c in configs]
    metas = [{"format": CHECKPOINT_FORMAT, "kind": trainer.KIND, "epoch": 0,
              "config": affecting(c, trainer.LR_TABLE), "data": fingerprint, "history": [],
              "train_seconds": 0.0, "switch_epoch": c.fixed_switch()} for c in configs]
    if resume and out_dir is not None:
        saved = _resume(configs, trainer, fingerprint, out_dir, log)
        if saved is None:
            return None
        if saved[0][0] is not None:
            trainer.restore([payload for _, payload in saved])
            metas = [meta for meta, _ in saved]
            for meta, c in zip(metas, configs):
                _drop_cut_evaluation(meta["history"], c)
    start = max(meta["epoch"] for meta in metas)
    rates = [c.rates(trainer.LR_TABLE) for c in configs]
    test_eval = [None] * S           # per lane: (rule, evaluation) of its latest epoch
    out_of_time, time_limited = config.deadline(), False

    saved_at = [meta["epoch"] for meta in metas]      # the epoch each lane's file holds

    def save(k):
        if paths[k] is not None:
            write_checkpoint(paths[k], lambda f: trainer.save(k, f, metas[k]))
            saved_at[k] = metas[k]["epoch"]

    for epoch in range(start, config.epochs):
        live = [k for k in range(S) if not configs[k].stopped(metas[k]["history"])]
        if not live:                     # the stop rule ended every lane (also on resume)
            break
        if out_of_time():
            time_limited = True
            for k in live:                     # an epoch between two checkpoints is kept
                if saved_at[k] != metas[k]["epoch"]:
                    save(k)
            break
        t0 = time.perf_counter()
        phases = [None] * S
        for k in live:
            phases[k] = configs[k].phase(epoch, metas[k]["switch_epoch"])
        lrs = [0.0 if p is None else rates[k][p] for k, p in enumerate(phases)]
        label = (f"{config.paradigm} seed {config.seed}" if S == 1 else
                 f"{config.paradigm} {len(live)} seeds") + f" epoch {epoch + 1}/{config.epochs}"
        tick = counter(progress, label, trainer.steps(config.batch_size))
        stats = trainer.train_epoch(
            phases, lrs, epoch,
            lambda value=None, tick=tick: tick(1, None if value is None else f"loss {value:.4f}"))
        probes = trainer.probe_loss(phases)
        for k in live:
            check_divergence(stats[k][0], metas[k]["history"], configs[k], probes[k])
        ends = out_of_time() or any(configs[k].meets_stop(stats[k][0], phases[k])
                                    for k in live)
        # the hybrid's SA phase is scored with SA's rule, its HA phase with HA's
        rules = [None if p is None else "sa" if config.paradigm == "hybrid" and p == "sa"
                 else config.paradigm for p in phases]
        test_eval = [None] * S
        if config.due(config.eval_every, epoch, ends):
            test_eval = [None if r is None else (r, e)
                         for r, e in zip(rules, trainer.evaluate("test", rules))]
        share = (time.perf_counter() - t0) / len(live)
        for k in live:
            meta, (loss, acc, a_z) = metas[k], stats[k]
            ev = test_eval[k]
            record = {"paradigm": config.paradigm, "seed": configs[k].seed, "epoch": epoch + 1,
                      "phase": phases[k], "rule": "ha" if rules[k] == "hybrid" else rules[k],
                      "lr": lrs[k], "loss": loss, "train_accuracy": acc, "mean_a_z": a_z,
                      "test_accuracy": None if ev is None else ev[1][0]["accuracy"],
                      "test_saif": None if ev is None else ev[1][0]["saif"]}
            meta["history"].append(record)
            sa_done = configs[k].stop_loss is not None and loss <= configs[k].stop_loss
            if configs[k].switch_epoch == "auto" and meta["switch_epoch"] is None and (
                    auto_switch([h["mean_a_z"] for h in meta["history"]], trainer.m)
                    or epoch + 1 >= configs[k].latest_switch() or sa_done):
                meta["switch_epoch"] = epoch + 1
            meta["train_seconds"] += share
            meta["epoch"] = epoch + 1
            record["seconds"] = meta["train_seconds"]
        for k in live:
            if config.due(config.checkpoint_every, epoch,
                          out_of_time() or configs[k].stopped(metas[k]["history"])):
                save(k)
        for k in live if callback is not None else ():
            callback(epoch, metas[k]["history"][-1])
    final_train = trainer.evaluate("train", [config.paradigm] * S)
    if any(ev is None or ev[0] != config.paradigm for ev in test_eval):
        test_eval = [(config.paradigm, e)
                     for e in trainer.evaluate("test", [config.paradigm] * S)]
    return [{"paradigm": config.paradigm, "seed": c.seed, "train": tr[0], "test": te[1][0],
             "history": meta["history"], "instances": {"train": tr[1], "test": te[1][1]},
             "resumed_from_epoch": start, "seconds": meta["train_seconds"],
             "switch_epoch": meta["switch_epoch"] if config.paradigm == "hybrid" else None,
             "stopped_epoch": stopped_epoch(c, meta["history"]),
             "time_limited": time_limited and not c.stopped(meta["history"]),
             "warnings": collapse_warnings(meta["history"], trainer.m)
             + sa_only_hybrid_warning(config.paradigm, meta["history"])}
            for c, meta, tr, te in zip(configs, metas, final_train, test_eval)]


def sa_only_hybrid_warning(paradigm, history):
    """A hybrid that never reached its HA phase (a switch at ``epochs``, or a time limit or
    stop rule within SA) is still scored by the hybrid's rule, HA's: say so."""
    if paradigm != "hybrid" or not history or any(h["phase"] == "ha" for h in history):
        return []
    return [f"the hybrid trained only with SA ({len(history)} epochs, no HA epoch); its "
            "scores use the hybrid's inference rule (HA's) on that SA-trained model"]


def stopped_epoch(config, history):
    """The epoch at which the stop rule ended the run, or None (it ran all its epochs)."""
    return history[-1]["epoch"] if config.stopped(history) else None
