r"""Table 1 on HateXplain: the text FCAMs' settings and their adapter for the one driver.

Vashisht & Ramaswamy (2023), Section 5, Appendix A.3 and Table 1 (rows
HateXplain-1, standard embedding, and HateXplain-2, self-attention).
:func:`run_hatexplain` is what ``attn-dyn train --dataset hatexplain`` runs:
:class:`HateXplainTable1`, the posts' adapter for the one Table 1 driver
(:func:`.table1_driver.run_table1`, which trains every paradigm and seed and
writes the result set of the CIFAR runs), checks the settings, reads and
encodes the posts (:mod:`minimal_attn.datasets.hatexplain`), refuses runs that
cannot fit in memory and trains one seed (:func:`.text_train.train_text_run`).
This module holds the settings (:class:`TextTrainConfig`,
:class:`HateXplainConfig`) and imports torch only when a run starts.

Learning rates (Appendix A.3): SA 0.1, HA 0.1, LV 0.3; the hybrid trains SA
at 0.1, then HA at 0.01, with one optimiser throughout, as for CIFAR. "Equal
compute time" (Section 5) is read as equal epochs (equal optimiser steps) for
every paradigm, as for CIFAR; the training seconds are written beside the
results.
"""

import os
from dataclasses import dataclass, field, fields, replace
from typing import Optional, Tuple

from minimal_attn import PARADIGMS
from minimal_attn.backends.vr.table1_driver import paradigm_rates, run_table1
from minimal_attn.errors import InputError, check_int_at_least, check_paradigm, check_positive
from minimal_attn.experiments import hatexplain_report as report
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.experiments.train_loop import TrainConfig

#: Appendix A.3: loss paradigm -> lr (both embeddings); the hybrid's HA phase uses 0.01.
HATEXPLAIN_LR = {"sa": 0.1, "ha": 0.1, "lv": 0.3}
HYBRID_HA_LR = 0.01


#: TrainConfig's fields the text FCAM never reads -> why; TextTrainConfig refuses any
#: value but the default rather than train as if it had been applied.
IGNORED = {
    "optimizer": "the HateXplain FCAMs train with SGD and momentum (V&R App. A.3)",
    "focus_init": "the text FCAM's focus always starts uniform (output layer zero)",
    "width": "the text FCAM's size is fixed by App. A.3 (choose the embedding)",
    "classifier": "the text FCAM's classifier is App. A.3's (choose the embedding)",
    "pixels": "posts have no pixels",
    "m": "a post has no fixed m; the rates are App. A.3's",
    "chunk": "it applies to the CNN FCAM only",
    "compile": "it applies to the seed-batched CNN trainer only",
    "conv_mode": "it applies to the seed-batched CNN trainer only",
    "precision": "it applies to the seed-batched CNN trainer only",
    "dataset": "the text FCAM trains on HateXplain only",
}


@dataclass
class TextTrainConfig(TrainConfig):
    """One training run of a text FCAM; the fields of TrainConfig (those in
    :data:`IGNORED` left at their defaults) plus the embedding."""

    embedding: str = "standard"          # standard (HateXplain-1) or self-attention (-2)
    batch_size: int = 128                # not in the paper; LV at lr 0.3 diverged at 32
    #                                      (at 128: 1 seed of 12 at the paper's size)
    dataset: str = "hatexplain"
    n_classes: int = 2                   # set from the data by run_hatexplain

    def __post_init__(self):
        from minimal_attn.backends.vr.text_models import check_embedding

        super().__post_init__()
        self.embedding = check_embedding(self.embedding)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in IGNORED and value != f.default:
                raise InputError(f"{f.name}={value!r} does not apply to the text FCAM: "
                                 f"{IGNORED[f.name]}; leave {f.name} at {f.default!r}",
                                 param=f.name)

    def rates(self, table=None):
        """Appendix A.3's rates unless given; the hybrid's HA phase defaults to 0.01."""
        rates = super().rates(table or HATEXPLAIN_LR)
        if self.paradigm == "hybrid" and self.hybrid_lr is None:
            rates["ha"] = HYBRID_HA_LR
        return rates


@dataclass
class HateXplainConfig:
    """A Table 1 experiment: paradigms x seeds of one embedding, V&R Section 5."""

    train: TextTrainConfig = field(default_factory=TextTrainConfig)  # paradigm/seed overridden
    paradigms: Tuple[str, ...] = PARADIGMS
    seeds: int = 1                       # seeds 0 .. seeds-1
    lr: Optional[dict] = None            # {"all" | paradigm: lr}; None: train.lr / Appendix A.3
    min_count: int = 2                   # training-split count below which a word is <unk>
    max_len: Optional[int] = None        # cut longer posts (None: keep every token)
    threads: Optional[int] = None        # torch CPU threads (None: leave torch's setting)
    on_divergence: str = "stop"          # or "record": a diverged seed is reported, the
    #                                      others go on (table1_driver.run_table1)

    def run_config(self, paradigm, seed):
        """The TextTrainConfig of one run: its paradigm's own lr (hybrid: sa's, else all's)."""
        lr = self.lr or {}
        own = lr.get(paradigm, lr.get("sa") if paradigm == "hybrid" else None)
        own = lr.get("all", self.train.lr) if own is None else own
        return replace(self.train, paradigm=paradigm, seed=seed, lr=own,
                       switch_epoch=self.train.switch_epoch if paradigm == "hybrid" else None,
                       hybrid_lr=self.train.hybrid_lr if paradigm == "hybrid" else None)


def run_hatexplain(config, data_dir, out_dir=None, resume=False, progress=None, log=None,
                   on_epoch=None):
    """Every paradigm and seed of ``config`` on HateXplain; results folder as the CIFAR runs.

    ``progress(length, label)``: a per-epoch bar factory; ``log(line)``: one
    line per epoch, per-seed results and warnings; ``on_epoch(record)``: each
    history record. Returns ``(results, meta)``:
    ``results[paradigm]["train"|"test"]["accuracy"|"saif"]`` are means over
    seeds (fractions), with ``_std``, ``per_seed``, heat maps and post counts, and
    ``diverged`` (seed -> error) where ``config.on_divergence`` is ``"record"``;
    ``summary.csv`` and ``summary.md`` name the seeds each paradigm's means average.
    """
    return run_table1(HateXplainTable1(config, data_dir), out_dir, resume, progress, log,
                      on_epoch, on_divergence=config.on_divergence)


class HateXplainTable1:
    r"""The posts' adapter for :func:`.table1_driver.run_table1` (a ``Table1Data``).

    The focus is :math:`a_{z^*} = \sum_{z\in z^*} a_z`, the attention on the
    annotators' rationale (posts without one count for accuracy only).
    """

    focus = "a_z*"

    def __init__(self, config, data_dir):
        self.config, self.data_dir = config, data_dir
        self.paradigms, self.seeds = list(config.paradigms), range(config.seeds)
        self.title = f"HateXplain {config.train.embedding}"

    def check(self):
        if self.data_dir is None:
            raise InputError("dataset hatexplain needs data_dir: the folder (or file) with "
                             "hatexplain_binary.jsonl or dataset.json", param="data_dir")
        _check(self.config)
        self.paradigms = [check_paradigm(p) for p in self.config.paradigms]

    def load(self, log):
        from minimal_attn.backends import torch_backend as tb
        from minimal_attn.datasets import hatexplain

        config = self.config
        tb.set_threads(config.threads)
        self.device = str(tb.get_device(config.train.device))
        self.data = hatexplain.read_hatexplain(self.data_dir)
        if not len(self.data.splits["test"].y):
            raise InputError(f"no post of {self.data_dir} is in the test split, which the "
                             "models are scored on; check the split file (or orig_split)",
                             param="data_dir")
        self.vocab, self.enc = hatexplain.encode_splits(self.data, config.min_count,
                                                        config.max_len)
        self.classes = list(hatexplain.CLASSES[self.data.layout])
        self.config = replace(config, train=replace(config.train, device=self.device,
                                                    n_classes=len(self.classes)))
        self._check_size()

    def _check_size(self):
        """Refuse, before the first step, a run that cannot fit in memory or finish."""
        from minimal_attn.backends.vr.text_models import TextFCAMConfig, estimate_bytes

        t, enc, vocab_size = self.config.train, self.enc, len(self.vocab)
        n = sum(len(e.y) for e in enc.values())
        length = max(e.ids.shape[1] for e in enc.values())
        need = estimate_bytes(TextFCAMConfig(vocab_size, t.n_classes, t.embedding),
                              t.batch_size, length, n)
        check_memory(need, f"the {t.embedding} text FCAM ({vocab_size} words, {n} posts of "
                     f"up to {length} tokens)", param="batch_size")
        steps = (-(-len(enc["train"].y) // t.batch_size) * t.epochs * len(self.seeds)
                 * len(self.paradigms))
        check_steps(steps, "training every paradigm and seed", param=("epochs", "seeds"))

    def run_config(self, paradigm, seed):
        return self.config.run_config(paradigm, seed)

    def checkpoint_reader(self):
        """The trainer whose checkpoints the runs resume from, and the data's fingerprint."""
        from minimal_attn.backends.vr.text_train import TextTrainer, text_fingerprint

        return TextTrainer, text_fingerprint(self.enc["train"], self.enc["test"])

    def train_seed(self, config, out, resume, progress, callback, log):
        from minimal_attn.backends.vr.text_train import train_text_run

        return train_text_run(config, self.enc["train"], self.enc["test"], len(self.vocab),
                              out, resume, progress, callback, log)

    def train_seeds(self, paradigm, out, resume, progress, callback, log):
        return None                      # the text FCAM trains its seeds one by one

    def aggregate(self, runs):
        return report.aggregate(runs)

    def describe(self, runs):
        """config.json: the data, the embedding, the settings as used, the paper's row."""
        c, t = self.config, self.config.train
        return {"dataset": "hatexplain", "layout": self.data.layout,
                "data_dir": os.fspath(self.data_dir), "classes": self.classes,
                "embedding": t.embedding, "paper_row": report.PAPER_ROWS[t.embedding]["name"],
                "paper_3class_test_pct": report.PAPER_ROWS[t.embedding],
                "vocab_size": len(self.vocab), "min_count": c.min_count,
                "max_len": c.max_len, "posts": {s: int(len(e.y)) for s, e in self.enc.items()},
                "dropped": self.data.dropped, "epochs": t.epochs,
                "seeds": list(self.seeds), "paradigms": self.paradigms,
                "lr": paradigm_rates(self), "batch_size": t.batch_size,
                "momentum": t.momentum, "threshold": t.threshold,
                "switch_epoch": t.switch_epoch if t.switch_epoch is not None
                else t.fixed_switch(), "device": self.device}

    def summary(self, results, meta):
        return report.summary_markdown(results, meta)


def _named(check, name, *args):
    """Run ``check(name, *args)``; its InputError names the parameter (the CLI shows the option)."""
    try:
        return check(name, *args)
    except InputError as exc:
        raise InputError(str(exc), param=name) from None


def _check(config):
    t = config.train
    for name, value in (("epochs", t.epochs), ("seeds", config.seeds),
                        ("batch_size", t.batch_size), ("min_count", config.min_count)):
        _named(check_int_at_least, name, value, 1)
    if config.max_len is not None:                          # None: posts are not cut
        _named(check_int_at_least, "max_len", config.max_len, 1)
    rates = [("lr", v) for v in (config.lr or {}).values()] + [
        (name, getattr(t, name)) for name in ("lr", "hybrid_lr")]
    for name, value in rates:
        if value is not None:
            _named(check_positive, name, value)
    unknown = sorted(set(config.lr or {}) - set(PARADIGMS) - {"all"})
    if unknown:
        raise InputError(f"lr names unknown paradigm {unknown[0]!r}: use sa, ha, lv, hybrid",
                         param="lr")
    if t.switch_epoch not in (None, "auto") and not 0 <= int(t.switch_epoch) <= t.epochs:
        raise InputError(f"switch_epoch must be auto or lie in 0..{t.epochs} (epochs)",
                         param="switch_epoch")
    if not 0 < t.threshold < 1:
        raise InputError(f"threshold must lie in (0, 1), got {t.threshold}", param="threshold")
