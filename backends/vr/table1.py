r"""Table 1 on mosaics: CIFAR-10/100 and synthetic images (CNN FCAM), vector mosaics (linear).

Vashisht & Ramaswamy (2023), Section 2.4, Table 1 and Appendix A.2.
:func:`run_experiment` is what ``attn-dyn train`` runs for a mosaic data set:
:class:`MosaicTable1`, the mosaics' adapter for the one Table 1 driver
(:func:`.table1_driver.run_table1`, which trains every paradigm and seed and
writes the result set), checks the settings
(:func:`minimal_attn.experiments.config.check_config`), refuses runs that
cannot fit in memory, builds the mosaics
(:func:`minimal_attn.datasets.splits.load_mosaic_splits`) and trains one seed
(the CNN FCAM with torch, or the linear FCAM of the core with NumPy), or all
seeds of a paradigm as one stacked model (``batch_seeds``). Progress goes
through callbacks; torch is imported only for ``backend="torch"``.

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

from dataclasses import fields, replace

from minimal_attn.backends.vr.table1_driver import paradigm_rates, run_table1
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
from minimal_attn.experiments.seen_images import breakdown, foreground_seen, summary_lines
from minimal_attn.experiments.train_loop import LINEAR_LR, TrainConfig, paper_setting
from minimal_attn.experiments.train_report import aggregate, recipe_text, summary_markdown

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
                       dataset=paper_setting(c.dataset), m=c.m, n_classes=c.n_classes,
                       chunk=c.chunk, width=c.width, eval_every=c.eval_every,
                       checkpoint_every=c.checkpoint_every, time_limit=c.time_limit,
                       compile=c.compile, conv_mode=c.conv_mode, precision=c.precision,
                       pixels=c.pixels)


def run_experiment(c, out=None, resume=False, progress=None, log=None, on_epoch=None):
    """Train every paradigm and seed of ``c`` (an :class:`ExperimentConfig`); write to ``out``.

    ``progress(label, done, total, note)``: every step
    (:mod:`minimal_attn.experiments.progress`); ``log(line)``:
    one line per epoch, the dead-unit report, warnings and per-seed results;
    ``on_epoch(record)``: each epoch's history record. Returns (results, meta)
    (:func:`.table1_driver.run_table1`).
    """
    return run_table1(MosaicTable1(c), out, resume, progress, log, on_epoch)


class MosaicTable1:
    """The mosaics' adapter for :func:`.table1_driver.run_table1` (a ``Table1Data``)."""

    focus, title = "a_z", None

    def __init__(self, config):
        self.c = config          # read by check() alone: it may be anything a user passed
        self.paradigms, self.seeds, self.seen = (), range(0), None

    def check(self):
        self.c = check_config(self.c)          # canonical paradigms: the results' keys
        self.paradigms = self.c.paradigms
        # a range, not a list: a huge --seeds is refused by check_steps, not by memory
        self.seeds = range(self.c.first_seed, self.c.first_seed + self.c.seeds)
        if self.c.batch_seeds:
            _check_batched(self.c)

    def load(self, log):
        c = self.c
        self.run_one, self.momentum, device = _trainer(c)
        stacked = f" and {c.seeds} stacked models" if c.batch_seeds and c.seeds > 1 else ""
        check_memory(estimate_bytes(c), f"{c.n_train + c.n_test} mosaics of {c.m} segments"
                     f"{stacked}", ("n_train", "n_test", "m") + (("seeds",) if stacked else ()))
        check_steps(-(-c.n_train // c.batch_size) * c.epochs * c.seeds * len(c.paradigms),
                    "training every paradigm and seed", ("epochs", "seeds"))
        from minimal_attn.datasets.splits import load_mosaic_splits

        self.train, self.test, n_classes, self.names = load_mosaic_splits(**mosaic_arguments(c))
        self.c = replace(c, n_classes=n_classes, device=device)
        # test mosaics of training images: which foregrounds the classifier has fitted
        self.seen = foreground_seen(self.train, self.test) if c.test_images == "train" \
            else None

    def run_config(self, paradigm, seed):
        return run_config(self.c, paradigm, seed)

    def fingerprint(self):
        """The :func:`~minimal_attn.experiments.checkpoints.data_fingerprint` of the mosaics
        this run would train on (what its checkpoints and a sweep cell's record name), read
        as :meth:`load` reads them but with no torch, memory check or training, and of CIFAR
        mosaics only the rows the fingerprint hashes filled: what a sweep rerun compares
        with a finished cell's record (:mod:`minimal_attn.experiments.sweep_data`)."""
        from minimal_attn.datasets.splits import load_mosaic_splits
        from minimal_attn.experiments.checkpoints import data_fingerprint, hashed_rows

        splits = load_mosaic_splits(**mosaic_arguments(check_config(self.c)),
                                    only_rows=hashed_rows)
        return data_fingerprint(splits.train, splits.test)

    def checkpoint_reader(self):
        """The trainer class whose checkpoints the runs resume from, and the data's
        fingerprint (a seed-batched run writes the CNN run's checkpoints)."""
        from minimal_attn.experiments.checkpoints import data_fingerprint

        if self.c.backend == "numpy":
            from minimal_attn.experiments.linear_train import LinearTrainer as Trainer
        else:
            from minimal_attn.backends.vr.train import CNNTrainer as Trainer
        return Trainer, data_fingerprint(self.train, self.test)

    def train_seed(self, config, out, resume, progress, callback, log):
        return self.run_one(config, self.train, self.test, out_dir=out, resume=resume,
                            progress=progress, callback=callback, log=log)

    def train_seeds(self, paradigm, out, resume, progress, callback, log):
        """``batch_seeds``: all seeds of ``paradigm`` as one model (None: one by one; a
        single seed too, unless it asks for compile, conv_mode or precision, which only it
        has)."""
        c = self.c
        if not c.batch_seeds or c.seeds < 2 and (c.compile, c.conv_mode, c.precision) == \
                ("none", None, "fp32"):
            return None
        from minimal_attn.backends.vr.batched_seeds import train_seeds

        runs = train_seeds([self.run_config(paradigm, s) for s in self.seeds],
                           self.train, self.test, out, resume, callback, log, progress)
        if runs is None and log is not None:
            log(f"{paradigm}: the seeds' checkpoints in {out} hold different epochs (or some "
                "are missing), so they cannot go on batched; each seed resumes on its own, "
                "equal to the batched run to float rounding")
        return runs

    def aggregate(self, runs):
        """results.json's entry; on test mosaics of training images also ``test_seen``,
        the test scores of the seen and unseen foregrounds (:mod:`.seen_images`)."""
        entry = aggregate(runs)
        if self.seen is not None:
            entry["test_seen"] = breakdown([r["instances"]["test"] for r in runs], self.seen,
                                           self.c.threshold)
        return entry

    def describe(self, runs):
        """config.json: every setting as used, the lr of each paradigm, the stop epochs."""
        c = self.c
        meta = {f.name: getattr(c, f.name) for f in fields(c)}
        meta.update(foreground=self.names, seeds=list(self.seeds),
                    momentum=self.momentum if c.optimizer == "sgd" else None,
                    lr=paradigm_rates(self, LINEAR_LR if c.backend == "numpy" else None),
                    stopped_epochs=_per_seed(runs, lambda r: r.get("stopped_epoch")),
                    epochs_run=_per_seed(runs, lambda r: len(r["history"])),
                    time_limited=_per_seed(runs, lambda r: bool(r.get("time_limited"))))
        if c.optimizer == "adam":
            from minimal_attn.backends.vr.train import ADAM_BETAS, ADAM_EPS

            meta.update(adam_betas=list(ADAM_BETAS), adam_eps=ADAM_EPS)
        if "hybrid" in runs and c.switch_epoch is None:   # the default, as the runs resolved it
            meta["switch_epoch"] = runs["hybrid"][0]["switch_epoch"]
        return meta

    def summary(self, results, meta):
        seen = {p: e["test_seen"] for p, e in results.items() if "test_seen" in e}
        return recipe_text(meta) + "\n" + summary_markdown(results, self.c.m, self.c.dataset) \
            + ("\n" + summary_lines(seen) if seen else "")


def mosaic_arguments(c):
    """The keyword arguments of :func:`~minimal_attn.datasets.splits.load_mosaic_splits`
    for the (checked) config ``c``: every setting its mosaics depend on, and nothing else
    (the NumPy backend's synthetic data are vector mosaics)."""
    source = "synthetic-vectors" if (c.backend, c.dataset) == ("numpy", "synthetic") \
        else c.dataset
    return dict(dataset=source, m=c.m, n_train=c.n_train, n_test=c.n_test,
                data_dir=c.data_dir, n_classes=c.n_classes, foreground=c.foreground,
                seed=c.data_seed, test_images=c.test_images)


def _per_seed(runs, value):
    return {p: {str(r["seed"]): value(r) for r in runs[p]} for p in runs}


def _trainer(c):
    """(train function, momentum recorded, device name) of the backend."""
    if c.backend == "numpy":
        from minimal_attn.experiments.linear_train import LinearTrainer, train_numpy_run

        return train_numpy_run, LinearTrainer.MOMENTUM, "cpu"
    try:
        from minimal_attn.backends import torch_backend
        from minimal_attn.backends.vr import train as torch_train
    except ImportError as exc:
        raise InputError(f"backend torch needs torch ({exc}); install it ({TORCH_PIN}) or "
                         "use backend numpy", param="backend") from None
    torch_backend.set_threads(c.threads)
    return torch_train.train_run, c.momentum, str(torch_backend.get_device(c.device))


def _check_batched(c):
    if c.backend != "torch":
        raise InputError("batch_seeds applies to backend torch", param="batch_seeds")
    try:
        from minimal_attn.backends.vr import batched_train as torch_batched_train  # noqa: F401
    except ImportError as exc:
        raise InputError(f"batch_seeds needs backends/torch_batched_train ({exc}); train "
                         "the seeds one after another", param="batch_seeds") from None
