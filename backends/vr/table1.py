r"""The Table 1 experiment in one call: FCAMs of every paradigm and seed, aggregated.

Vashisht & Ramaswamy (2023), Section 2.4, Table 1 and Appendix A.2.
:func:`run_experiment` is what ``attn-dyn train`` runs: it checks the
settings, refuses runs that cannot fit in memory, builds the mosaics
(:func:`minimal_attn.datasets.splits.load_mosaic_splits`), trains every paradigm and
seed (the CNN FCAM with torch, or the linear FCAM of the core with NumPy),
appends one line per epoch to ``history.jsonl`` and writes the result set
(:mod:`minimal_attn.experiments.train_report`). Progress goes through callbacks; torch is
imported only for ``backend="torch"``.

**The paper's protocol** (:data:`PROTOCOLS`, ``protocol="paper"``): n = 10k
training mosaics for CIFAR-10 (50k for CIFAR-100), the paper's learning rates,
12 seeds, and *equal compute*, which we define as the same number of epochs
(passes over the same mosaics) for every paradigm, the hybrid's SA and HA
epochs summing to it. **The authors' protocol** (``protocol="authors"``) is
their released code: Adam, the LeNet classifier, the mirrored start, and the
stop rule (a run ends once its mean epoch loss is <= 0.05); equal compute is
then the same epoch *budget* (at most 200), and config.json records the epoch
each run stopped at. Equal wall time is not reproducible (it depends on the
machine, its load and the paradigm's cost per epoch: HA and LV run the
classifier on all m segments, SA on one blended image), while equal epochs
give every paradigm the same data and the same number of updates.
"""

import os
from dataclasses import fields, replace

from minimal_attn.errors import InputError
from minimal_attn.experiments.config import (  # noqa: F401 (the API in one place)
    BACKEND_DATASETS,
    PROTOCOL_FIELDS,
    PROTOCOLS,
    ExperimentConfig,
    apply_protocol,
    check_config,
    check_writable,
    estimate_bytes,
    resume_note,
)
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.experiments.train_loop import TrainConfig, checkpoint_path, paper_setting
from minimal_attn.experiments.train_report import (
    HistoryLog,
    aggregate,
    recipe_text,
    summary_markdown,
    write_results,
)

TORCH_PIN = "pip install torch==2.13.0, then pip install \".[torch]\""


def run_config(c, paradigm, seed):
    """The :class:`TrainConfig` of one run: this paradigm's learning rates and switch."""
    lr = c.lr or {}
    default = lr.get("all")
    own = lr.get(paradigm, lr.get("sa", default) if paradigm == "hybrid" else default)
    hybrid_lr = c.hybrid_lr if c.hybrid_lr is not None else lr.get("ha", default)
    return TrainConfig(paradigm=paradigm, epochs=c.epochs, lr=own,
                       hybrid_lr=hybrid_lr if paradigm == "hybrid" else None,
                       optimizer=c.optimizer, momentum=c.momentum, stop_loss=c.stop_loss,
                       focus_init=c.focus_init, classifier=c.classifier,
                       batch_size=c.batch_size, seed=seed,
                       switch_epoch=c.switch_epoch if paradigm == "hybrid" else None,
                       device=c.device, threshold=c.threshold,
                       dataset=paper_setting(c.dataset), n_classes=c.n_classes,
                       chunk=c.chunk, width=c.width, eval_every=c.eval_every,
                       checkpoint_every=c.checkpoint_every, time_limit=c.time_limit)


def _format_epoch(r):
    test = "" if r.get("test_accuracy") is None else (
        f" test acc {100 * r['test_accuracy']:.1f}% test SAIF {100 * r['test_saif']:.1f}%")
    return (f"{r['paradigm']} seed {r['seed']} epoch {r['epoch']} ({r['phase']}): loss "
            f"{r['loss']:.4f} train acc {100 * r['train_accuracy']:.1f}% mean a_z "
            f"{r['mean_a_z']:.3f}" + test)


def _trainer(c):
    """(train function, momentum recorded, device name) of the backend."""
    if c.backend == "numpy":
        from minimal_attn.experiments.linear_train import LinearTrainer, train_numpy_run

        return train_numpy_run, LinearTrainer.MOMENTUM, "cpu"
    try:
        import torch

        from minimal_attn.backends import torch_backend
        from minimal_attn.backends.vr import train as torch_train
    except ImportError as exc:
        raise InputError(f"backend torch needs torch ({exc}); install it ({TORCH_PIN}) or "
                         "use backend numpy", param="backend") from None
    if c.threads is not None:
        torch.set_num_threads(int(c.threads))
    return torch_train.train_run, c.momentum, str(torch_backend.get_device(c.device))


def run_experiment(c, out=None, resume=False, progress=None, log=None, on_epoch=None):
    """Train every paradigm and seed of ``c`` and write the result set to ``out``.

    ``progress(label, done, total, note)``: every training step
    (:mod:`minimal_attn.experiments.progress`); ``log(line)``: one line per
    epoch, the dead-unit report, warnings and per-seed results;
    ``on_epoch(record)``: each epoch's history record. Returns (results, meta).
    """
    log = log or (lambda line: None)
    check_config(c)
    if resume and out is None:
        raise InputError("resume needs out: the folder whose checkpoints/ to continue from",
                         param=("resume", "out"))
    if c.batch_seeds:
        _check_batched(c)
    if out is not None:
        check_writable(out)
    run_one, momentum, device = _trainer(c)
    stacked = f" and {c.seeds} stacked models" if c.batch_seeds and c.seeds > 1 else ""
    check_memory(estimate_bytes(c), f"{c.n_train + c.n_test} mosaics of {c.m} segments{stacked}",
                 ("n_train", "n_test", "m") + (("seeds",) if stacked else ()))
    check_steps(-(-c.n_train // c.batch_size) * c.epochs * c.seeds * len(c.paradigms),
                "training every paradigm and seed", ("epochs", "seeds"))
    from minimal_attn.datasets.splits import load_mosaic_splits

    source = "synthetic-vectors" if (c.backend, c.dataset) == ("numpy", "synthetic") \
        else c.dataset
    train, test, n_classes, names = load_mosaic_splits(
        source, c.m, c.n_train, c.n_test, data_dir=c.data_dir, n_classes=c.n_classes,
        foreground=c.foreground, seed=c.data_seed)
    c = replace(c, n_classes=n_classes, device=device)
    history = HistoryLog(out)
    epoch_done = history.epoch_callback(log, _format_epoch, on_epoch)

    runs = {}
    try:
        for p in c.paradigms:
            runs[p] = _train_batched(c, p, train, test, out, resume, epoch_done, log) \
                or [_train_seed(c, p, seed, run_one, train, test, out, resume, progress,
                                epoch_done, log) for seed in range(c.seeds)]
        results = {p: aggregate(runs[p]) for p in c.paradigms}
        meta = _meta(c, runs, names, momentum)
        if out is not None:
            write_results(out, results, runs, meta, summary=recipe_text(meta) + "\n"
                          + summary_markdown(results, c.m, c.dataset))
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted; " + resume_note(out)) from None
    return results, meta


def _train_seed(c, p, seed, run_one, train, test, out, resume, progress, epoch_done, log):
    config = run_config(c, p, seed)
    if resume and not os.path.exists(checkpoint_path(out, config)):
        log(f"no checkpoint for {p} seed {seed} in {out}: starting fresh")
    r = run_one(config, train, test, out_dir=out, resume=resume, progress=progress,
                callback=epoch_done, log=log)
    _report(p, seed, r, log)
    return r


def _check_batched(c):
    if c.backend != "torch":
        raise InputError("batch_seeds applies to backend torch", param="batch_seeds")
    try:
        from minimal_attn.backends.vr import batched_train as torch_batched_train  # noqa: F401
    except ImportError as exc:
        raise InputError(f"batch_seeds needs backends/torch_batched_train ({exc}); train "
                         "the seeds one after another", param="batch_seeds") from None


def _train_batched(c, p, train, test, out, resume, epoch_done, log):
    """All seeds of ``p`` as one model; None where they must train separately."""
    if not c.batch_seeds or c.seeds < 2:
        return None
    from minimal_attn.backends.vr.batched_seeds import train_seeds

    runs = train_seeds([run_config(c, p, s) for s in range(c.seeds)], train, test, out,
                       resume, epoch_done, log)
    for seed, r in enumerate(runs or ()):
        _report(p, seed, r, log)
    return runs


def _report(p, seed, r, log):
    log(f"{p} seed {seed}: " + ", ".join(
        f"{s} accuracy {100 * r[s]['accuracy']:.1f}% SAIF {100 * r[s]['saif']:.1f}%"
        for s in ("train", "test")) + f" ({r['seconds']:.1f} s training)")
    for warning in r["warnings"]:
        log(f"warning: {p} seed {seed}: {warning}")


def _meta(c, runs, names, momentum):
    """config.json: every setting as used, the lr of each paradigm, the hybrid's switches."""
    meta = {f.name: getattr(c, f.name) for f in fields(c)}
    meta.update(foreground=names, seeds=list(range(c.seeds)),
                momentum=momentum if c.optimizer == "sgd" else None,
                lr={p: _rates(run_config(c, p, 0), c.backend) for p in c.paradigms},
                stopped_epochs={p: {str(r["seed"]): r.get("stopped_epoch") for r in runs[p]}
                                for p in runs},
                epochs_run={p: {str(r["seed"]): len(r["history"]) for r in runs[p]}
                            for p in runs},
                time_limited={p: {str(r["seed"]): bool(r.get("time_limited"))
                                  for r in runs[p]} for p in runs})
    if c.optimizer == "adam":
        from minimal_attn.backends.vr.train import ADAM_BETAS, ADAM_EPS

        meta.update(adam_betas=list(ADAM_BETAS), adam_eps=ADAM_EPS)
    if "hybrid" in runs:
        meta["hybrid_switch_epochs"] = {str(r["seed"]): r["switch_epoch"]
                                        for r in runs["hybrid"]}
        if c.switch_epoch is None:          # the default, as the runs resolved it
            meta["switch_epoch"] = runs["hybrid"][0]["switch_epoch"]
    return meta


def _rates(config, backend):
    """The lr of a paradigm: a number, or {"sa": .., "ha": ..} for the hybrid."""
    from minimal_attn.experiments.train_loop import LINEAR_LR

    rates = config.rates(LINEAR_LR if backend == "numpy" else None)
    return rates if config.paradigm == "hybrid" else rates[config.paradigm]
