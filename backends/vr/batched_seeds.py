r"""``batch_seeds=True``: all seeds of a paradigm as one model, in ``run_experiment``'s format.

Vashisht & Ramaswamy (2023), Table 1 protocol (12 seeds per paradigm). Wraps
:func:`.batched_train.train_seeds_batched` (S seeds stacked, identical
to S separate :func:`.train.train_run` calls up to float tolerance) so
that its per-seed results, history records and checkpoints look exactly like
the separate runs' (:func:`minimal_attn.experiments.train_loop.run_epochs`): the same
checkpoint files (a batched run resumes separately and vice versa), the same
per-paradigm learning rates, automatic switch, stop rule, divergence and
collapse checks. A seed that reaches ``stop_loss`` leaves the batch; its last
checkpoint is the one of the epoch it stopped at.

The hybrid's SA epochs are scored with SA's rule, as in the separate runs.
"""

import time

import torch

from minimal_attn.backends.vr.train import CNNTrainer
from minimal_attn.experiments.linear_train import data_fingerprint
from minimal_attn.experiments.train_loop import (
    CHECKPOINT_FORMAT,
    affecting,
    auto_switch,
    check_divergence,
    checkpoint_path,
    collapse_warnings,
    read_checkpoint,
    stopped_epoch,
    write_checkpoint,
)


def _record(config, k_seed, raw, rule):
    """A batched history record in ``run_epochs``' keys."""
    return {"paradigm": config.paradigm, "seed": k_seed, "epoch": raw["epoch"],
            "phase": raw["phase"], "rule": rule, "lr": raw["lr"], "loss": raw["loss"],
            "train_accuracy": raw["train_running_accuracy"],
            "mean_a_z": raw["train_mean_a_z"], "test_accuracy": raw.get("test_accuracy"),
            "test_saif": raw.get("test_saif")}


def train_seeds(configs, train, test, out=None, resume=False, callback=None, log=None):
    """Train ``configs`` (one paradigm, seeds 0..S-1) together; per-seed results.

    With ``resume`` every seed's checkpoint must exist and hold the same epoch
    (a seed that stopped earlier by the stop rule excepted), or none may
    exist (a fresh start); otherwise this returns None and the caller trains
    the seeds separately.
    """
    from minimal_attn.backends.vr.batched_train import train_seeds_batched

    config, seeds = configs[0], [cfg.seed for cfg in configs]
    m, rates = train.X.shape[1], config.rates()
    fingerprint = data_fingerprint(train, test)
    switch = [cfg.fixed_switch() for cfg in configs]
    history = [[] for _ in seeds]
    start, states, seconds, metas = 0, None, [0.0] * len(seeds), []
    if resume and out is not None:
        metas = [read_checkpoint(checkpoint_path(out, cfg), CNNTrainer, cfg, fingerprint,
                                 log or (lambda line: None)) for cfg in configs]
        if all(meta is None for meta, _ in metas):
            metas = []                                 # nothing to resume: start fresh
        elif any(meta is None for meta, _ in metas):
            return None
    if metas:
        start = max(meta["epoch"] for meta, _ in metas)
        if any(meta["epoch"] != start and not cfg.stopped(meta["history"])
               for cfg, (meta, _) in zip(configs, metas)):
            return None
        states = [payload for _, payload in metas]
        for k, (meta, _) in enumerate(metas):
            history[k], switch[k] = meta["history"], meta["switch_epoch"]
            seconds[k] = meta["train_seconds"]

    def schedule(k, epoch, raw):
        if configs[k].stopped(history[k]):
            return None, 0.0
        if config.switch_epoch == "auto" and switch[k] is None and epoch > 0 and (
                auto_switch([h["mean_a_z"] for h in history[k]], m)
                or epoch >= config.latest_switch()):
            switch[k] = epoch
        phase = config.phase(epoch, switch[k])
        return phase, rates[phase]

    clock, out_of_time = [time.perf_counter()], config.deadline()

    def after_epoch(epoch, records, run):
        share = (time.perf_counter() - clock[0]) / len(seeds)     # wall time per seed
        clock[0] = time.perf_counter()
        live = [k for k, raw in enumerate(records) if raw is not None]
        for k in live:
            raw = records[k]
            check_divergence(raw["loss"], history[k], configs[k])
            seconds[k] += share * len(seeds) / len(live)
            rule = raw["phase"] if config.paradigm == "hybrid" else config.paradigm
            history[k].append(dict(_record(config, seeds[k], raw, rule), seconds=seconds[k]))
        due = [k for k in live if config.due(config.checkpoint_every, epoch, out_of_time()
                                             or configs[k].stopped(history[k]))]
        if out is not None and due:
            states = run.seed_states()
            for k in due:
                state = states[k]
                meta = {"format": CHECKPOINT_FORMAT, "kind": CNNTrainer.KIND,
                        "epoch": epoch + 1, "config": affecting(configs[k], None),
                        "data": fingerprint, "history": history[k],
                        "train_seconds": seconds[k], "switch_epoch": switch[k]}
                write_checkpoint(checkpoint_path(out, configs[k]),
                                 lambda f, obj=dict(meta, **state): torch.save(obj, f))
        if callback is not None:
            for k in live:
                callback(epoch, history[k][-1])

    raw = train_seeds_batched(
        config, seeds, train, test, schedule=schedule, callback=after_epoch,
        score_by_phase=True, out_of_time=out_of_time,
        resume=None if states is None else (start, states, [[{
            "train_mean_a_z": h["mean_a_z"]} for h in hk] for hk in history]))
    return [dict(r, history=history[k], seconds=seconds[k], resumed_from_epoch=start,
                 switch_epoch=switch[k] if config.paradigm == "hybrid" else None,
                 stopped_epoch=stopped_epoch(configs[k], history[k]),
                 time_limited=raw["time_limited"] and not configs[k].stopped(history[k]),
                 warnings=collapse_warnings(history[k], m))
            for k, r in enumerate(raw["results"])]
