r"""Training the HateXplain text FCAMs with SA, HA, LV and the hybrid, V&R Section 5, Table 1.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.3. :class:`TextTrainer`
is the text FCAM (:class:`.text_models.TextFCAM`) for the shared epoch
skeleton :func:`minimal_attn.experiments.epochs.run_epochs`, which the CNN and the
linear FCAM use too: the hybrid's schedule (fixed or ``switch_epoch="auto"``),
per-paradigm learning rates, divergence and collapse checks, history records,
atomic checkpoints with the ``.ckpt.prev`` fallback, and exact resume (on the
CPU a resumed run ends bit-for-bit where an uninterrupted one does).
:func:`train_text_run` trains one (paradigm, seed); :func:`run_hatexplain`
reads the data, runs every paradigm and seed, appends ``history.jsonl`` and
writes the result set with :mod:`minimal_attn.experiments.train_report`.

The focus is :math:`a_{z^*} = \sum_{z\in z^*} a_z` (posts without a rationale
count for accuracy and are left out of SAIF and of the mean :math:`a_{z^*}`).
A post has no fixed m: the auto switch and the collapse warning compare the
focus with the uniform one, :math:`1/m` read as the mean of
:math:`|z^*| / L` over the training posts with a rationale.

Learning rates (Appendix A.3): SA 0.1, HA 0.1, LV 0.3; the hybrid trains SA
at 0.1, then HA at 0.01, with one optimiser throughout, as for CIFAR. "Equal
compute time" (Section 5) is read as equal epochs (equal optimiser steps) for
every paradigm, as for CIFAR; the training seconds are written beside the
results.
"""

import os
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Optional, Tuple

import numpy as np
import torch

from minimal_attn import PARADIGMS
from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.text_models import (
    TextFCAMConfig,
    build_text_fcam,
    check_embedding,
    estimate_bytes,
)
from minimal_attn.backends.vr.train import CNNTrainer
from minimal_attn.datasets import hatexplain
from minimal_attn.errors import InputError, check_int_at_least, check_paradigm, check_positive
from minimal_attn.experiments import hatexplain_report as report
from minimal_attn.experiments.config import check_writable
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.io import undo_on_refusal
from minimal_attn.experiments.linear_train import data_fingerprint
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.experiments.train_loop import TrainConfig, checkpoint_path
from minimal_attn.experiments.train_report import HistoryLog, write_results

#: Appendix A.3: loss paradigm -> lr (both embeddings); the hybrid's HA phase uses 0.01.
HATEXPLAIN_LR = {"sa": 0.1, "ha": 0.1, "lv": 0.3}
HYBRID_HA_LR = 0.01


@dataclass
class TextTrainConfig(TrainConfig):
    """One training run of a text FCAM; the fields of TrainConfig plus the embedding."""

    embedding: str = "standard"          # standard (HateXplain-1) or self-attention (-2)
    batch_size: int = 128                # not in the paper; 128 keeps LV at lr 0.3 stable
    dataset: str = "hatexplain"
    n_classes: int = 2                   # set from the data by run_hatexplain

    def __post_init__(self):
        super().__post_init__()
        self.embedding = check_embedding(self.embedding)

    def rates(self, table=None):
        """Appendix A.3's rates unless given; the hybrid's HA phase defaults to 0.01."""
        rates = super().rates(table or HATEXPLAIN_LR)
        if self.paradigm == "hybrid" and self.hybrid_lr is None:
            rates["ha"] = HYBRID_HA_LR
        return rates


class TextStore:
    """A padded split on the device; ``store.batch(idx)`` cuts it to the batch's longest post."""

    def __init__(self, encoded, device):
        self.n = len(encoded.y)
        self.ids = torch.as_tensor(encoded.ids, device=device)                # (N, L)
        self.mask = torch.as_tensor(encoded.mask, device=device)              # (N, L)
        self.rationale = torch.as_tensor(encoded.rationale, device=device)    # (N, L)
        self.y = torch.as_tensor(encoded.y, device=device)                    # (N,)
        self.lengths = torch.as_tensor(encoded.mask.sum(axis=1))              # (N,) on the CPU

    def batches(self, batch_size, generator=None, bucket=50):
        """Index batches (CPU tensors) of posts of similar length, to cut padding.

        Training (a ``generator``): shuffle, sort each run of ``bucket``
        batches by length, cut into batches, shuffle the batches. Evaluation
        (no generator): all posts by length.
        """
        if generator is None:
            return torch.argsort(self.lengths, stable=True).split(batch_size)
        order = torch.randperm(self.n, generator=generator)                   # (N,)
        batches = [part for chunk in order.split(batch_size * bucket)
                   for part in chunk[torch.argsort(self.lengths[chunk], stable=True)]
                   .split(batch_size)]
        return [batches[i] for i in torch.randperm(len(batches), generator=generator)]

    def batch(self, idx):
        """(ids, mask, rationale, y) of the posts ``idx`` (a CPU index tensor)."""
        length = int(self.lengths[idx].max())             # no device sync: lengths on the CPU
        i = idx.to(self.ids.device)
        return (self.ids[i, :length], self.mask[i, :length], self.rationale[i, :length],
                self.y[i])


def evaluate(model, store, encoded, paradigm, threshold=0.8, batch_size=512):
    """:func:`minimal_attn.datasets.hatexplain.summarise_posts` of a text FCAM on a split."""
    a = np.zeros(encoded.mask.shape, dtype=np.float64)                         # (N, L)
    s = np.zeros((store.n, model.config.n_classes))                            # (N, C)
    for idx in store.batches(batch_size):
        ids, mask, _, _ = store.batch(idx)
        scores, s_batch = model.predict(ids, mask, paradigm)
        a[idx.numpy(), : ids.shape[1]] = tb.attention(scores).cpu().numpy()
        s[idx.numpy()] = s_batch.cpu().numpy()
    return hatexplain.summarise_posts(a, s, encoded.y, encoded.rationale, threshold)


def uniform_focus(encoded):
    """Mean |z*| / L over the posts with a rationale: a_{z*} of a uniform focus (the 1/m)."""
    has = encoded.rationale.any(axis=1)
    if not has.any():
        return 0.5
    return float(np.mean(encoded.rationale[has].sum(axis=1) / encoded.mask[has].sum(axis=1)))


class TextTrainer(CNNTrainer):
    """The text FCAM of Appendix A.3 for :func:`run_epochs` (checkpoints as the CNN's)."""

    KIND = "torch-text"
    LR_TABLE = HATEXPLAIN_LR

    def __init__(self, config, train, test, vocab_size):
        self.config, self.sets = config, {"train": train, "test": test}
        self.device = tb.get_device(config.device)
        self.model = build_text_fcam(
            TextFCAMConfig(vocab_size, config.n_classes, config.embedding), config.seed,
            self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.0,
                                         momentum=config.momentum)
        self.generator = torch.Generator().manual_seed(int(config.seed))
        self.stores = {name: TextStore(enc, self.device) for name, enc in self.sets.items()}
        self.m = 1.0 / uniform_focus(train)      # the skeleton compares a_{z*} with 1/m

    def train_epoch(self, phase, lr, epoch, step):
        """One pass over shuffled mini-batches: (mean loss, running accuracy, mean a_{z*})."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        store = self.stores["train"]
        every = 1 if store.ids.device.type == "cpu" else 20
        sums = torch.zeros(4, dtype=torch.float64, device=store.ids.device)  # loss, hits, a, n*
        for k, idx in enumerate(store.batches(self.config.batch_size, self.generator)):
            ids, mask, rationale, y = store.batch(idx)
            scores, logits = self.model(ids, mask, phase)
            value = tb.loss(phase, scores, logits, y)
            self.optimizer.zero_grad(set_to_none=True)
            value.backward()
            self.optimizer.step()
            with torch.no_grad():
                has = rationale.any(dim=1)                                      # (B,)
                a_fg = (tb.attention(scores) * rationale).sum(dim=1)            # (B,) a_{z*}
                sums += torch.stack([
                    value.detach().double() * idx.numel(),
                    (tb.infer(phase, scores, logits).argmax(1) == y).sum().double(),
                    a_fg[has].sum().double(), has.sum().double()])
            step(float(value.detach()) if k % every == 0 else None)
        loss, correct, a_fg, n_fg = sums.tolist()
        return loss / store.n, correct / store.n, a_fg / max(n_fg, 1.0)

    def steps(self, batch_size):
        return len(self.stores["train"].batches(batch_size, torch.Generator()))

    @torch.no_grad()
    def probe_loss(self, phase):
        store = self.stores["train"]
        ids, mask, _, y = store.batch(torch.arange(min(self.config.batch_size, store.n)))
        scores, logits = self.model(ids, mask, phase)
        return float(tb.loss(phase, scores, logits, y))

    def evaluate(self, split, rule):
        return evaluate(self.model, self.stores[split], self.sets[split], rule,
                        self.config.threshold)


def text_fingerprint(train, test):
    """:func:`data_fingerprint` of two encoded splits (ids, labels, rationales)."""
    return data_fingerprint(*(SimpleNamespace(X=e.ids, y=e.y, z=e.rationale)
                              for e in (train, test)))


def train_text_run(config, train, test, vocab_size, out_dir=None, resume=False, progress=None,
                   callback=None, log=None):
    """Train one text FCAM (one paradigm, one seed) and evaluate it, V&R Section 5.

    Parameters
    ----------
    config : TextTrainConfig
    train, test : minimal_attn.datasets.hatexplain.Encoded (padded ids, mask, rationale, y)
    vocab_size : int, rows of the embedding
    out_dir, resume, progress, callback, log : as :func:`.train.train_run`

    Returns
    -------
    dict as :func:`minimal_attn.experiments.epochs.run_epochs`; ``instances`` also
    hold ``has_rationale`` per post.
    """
    trainer = TextTrainer(config, train, test, vocab_size)
    return run_epochs(config, trainer, text_fingerprint(train, test), out_dir, resume,
                      progress, callback, log)


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

    def run_config(self, paradigm, seed):
        """The TextTrainConfig of one run: its paradigm's own lr (hybrid: sa's, else all's)."""
        lr = self.lr or {}
        own = lr.get(paradigm, lr.get("sa") if paradigm == "hybrid" else None)
        own = lr.get("all", self.train.lr) if own is None else own
        return replace(self.train, paradigm=paradigm, seed=seed, lr=own,
                       switch_epoch=self.train.switch_epoch if paradigm == "hybrid" else None,
                       hybrid_lr=self.train.hybrid_lr if paradigm == "hybrid" else None)


def _named(check, name, *args):
    """Run ``check(name, *args)``; its InputError names the parameter (the CLI shows the option)."""
    try:
        return check(name, *args)
    except InputError as exc:
        raise InputError(str(exc), param=name) from None


def _check(config, out_dir, resume):
    t = config.train
    for name, value in (("epochs", t.epochs), ("seeds", config.seeds),
                        ("batch_size", t.batch_size), ("min_count", config.min_count)):
        _named(check_int_at_least, name, value, 1)
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
    if resume and out_dir is None:
        raise InputError("resume needs out: the folder whose checkpoints/ to continue from",
                         param=("resume", "out"))
    if out_dir is not None:
        check_writable(out_dir)


def _format_epoch(r):
    return (f"{r['paradigm']} seed {r['seed']} epoch {r['epoch']} ({r['phase']}): loss "
            f"{r['loss']:.4f} train acc {100 * r['train_accuracy']:.1f}% mean a_z* "
            f"{r['mean_a_z']:.3f} test acc {100 * r['test_accuracy']:.1f}% test SAIF "
            f"{100 * r['test_saif']:.1f}%")


def run_hatexplain(config, data_dir, out_dir=None, resume=False, progress=None, log=None,
                   on_epoch=None):
    """Every paradigm and seed of ``config`` on HateXplain; results folder as the CIFAR runs.

    ``progress(label, done, total, note)``: every training step
    (:mod:`minimal_attn.experiments.progress`); ``log(line)``: one line per
    epoch, per-seed results and warnings; ``on_epoch(record)``: each
    history record. Returns ``(results, meta)``:
    ``results[paradigm]["train"|"test"]["accuracy"|"saif"]`` are means over
    seeds (fractions), with ``_std``, ``per_seed`` and heat maps.
    """
    log = log or (lambda line: None)
    _check(config, out_dir, resume)
    paradigms = [check_paradigm(p) for p in config.paradigms]
    if config.threads is not None:
        torch.set_num_threads(_named(check_int_at_least, "threads", config.threads, 1))
    device = str(tb.get_device(config.train.device))
    data = hatexplain.read_hatexplain(data_dir)
    if not len(data.splits["test"].y):
        raise InputError(f"no post of {data_dir} is in the test split, which the models are "
                         "scored on; check the split file (or orig_split)", param="data_dir")
    vocab, enc = hatexplain.encode_splits(data, config.min_count, config.max_len)
    config = replace(config, train=replace(config.train, device=device,
                                           n_classes=len(hatexplain.CLASSES[data.layout])))
    _check_size(config, enc, len(vocab), paradigms)
    with undo_on_refusal(out_dir):
        return _train_all(config, data, data_dir, vocab, enc, paradigms, device, out_dir,
                          resume, progress, log, on_epoch)


def _check_size(config, enc, vocab_size, paradigms):
    """Refuse, before the first step, a run that cannot fit in memory or finish."""
    t, n = config.train, sum(len(e.y) for e in enc.values())
    length = max(e.ids.shape[1] for e in enc.values())
    need = estimate_bytes(TextFCAMConfig(vocab_size, t.n_classes, t.embedding), t.batch_size,
                          length, n)
    check_memory(need, f"the {t.embedding} text FCAM ({vocab_size} words, {n} posts of up "
                 f"to {length} tokens)", param="batch_size")
    steps = -(-len(enc["train"].y) // t.batch_size) * t.epochs * config.seeds * len(paradigms)
    check_steps(steps, "training every paradigm and seed", param=("epochs", "seeds"))


def _train_all(config, data, data_dir, vocab, enc, paradigms, device, out_dir, resume,
               progress, log, on_epoch):
    history = HistoryLog(out_dir)
    epoch_done = history.epoch_callback(log, _format_epoch, on_epoch)

    runs = {}
    for p in paradigms:
        runs[p] = []
        for seed in range(config.seeds):
            run_config = config.run_config(p, seed)
            if resume and not os.path.exists(checkpoint_path(out_dir, run_config)):
                log(f"no checkpoint for {p} seed {seed} in {out_dir}: starting fresh")
            r = train_text_run(run_config, enc["train"], enc["test"], len(vocab), out_dir,
                               resume, progress, epoch_done, log)
            runs[p].append(r)
            log(report.seed_line(r))
            for warning in r["warnings"]:
                log(f"warning: {p} seed {seed}: {warning}")
    results = {p: report.aggregate(r) for p, r in runs.items()}
    t = config.train
    meta = {"dataset": "hatexplain", "layout": data.layout, "data_dir": os.fspath(data_dir),
            "classes": list(hatexplain.CLASSES[data.layout]), "embedding": t.embedding,
            "paper_row": report.PAPER_ROWS[t.embedding]["name"],
            "paper_3class_test_pct": report.PAPER_ROWS[t.embedding],
            "vocab_size": len(vocab), "min_count": config.min_count, "max_len": config.max_len,
            "posts": {s: int(len(e.y)) for s, e in enc.items()}, "dropped": data.dropped,
            "epochs": t.epochs, "seeds": list(range(config.seeds)), "paradigms": paradigms,
            "lr": {p: _rates(config.run_config(p, 0)) for p in paradigms},
            "batch_size": t.batch_size, "momentum": t.momentum, "threshold": t.threshold,
            "switch_epoch": t.switch_epoch if t.switch_epoch is not None else t.fixed_switch(),
            "device": device}
    if "hybrid" in runs:
        meta["hybrid_switch_epochs"] = {str(r["seed"]): r["switch_epoch"] for r in runs["hybrid"]}
    if out_dir is not None:
        write_results(out_dir, results, runs, meta, report.summary_markdown(results, meta),
                      f"HateXplain {t.embedding}")
    return results, meta


def _rates(config):
    """The lr of a paradigm: a number, or {"sa": .., "ha": ..} for the hybrid."""
    rates = config.rates()
    return rates if config.paradigm == "hybrid" else rates[config.paradigm]
