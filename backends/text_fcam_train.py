r"""Training the HateXplain text FCAMs with SA, HA, LV and the hybrid, V&R Section 5, Table 1.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.3. :func:`train_text_run`
trains one :class:`.torch_text_fcam.TextFCAM` (one paradigm, one seed) with SGD
and momentum and returns what :func:`.torch_train.train_run` returns
(``train``/``test`` summaries, ``history``, ``instances``), with
:math:`a_{z^*} = \sum_{z\in z^*} a_z` as the focus (posts without a rationale
count for accuracy and are left out of SAIF). :func:`run_hatexplain` reads the
data, runs every paradigm and seed and writes the results folder.

Learning rates (Appendix A.3): SA 0.1, HA 0.1, LV 0.3; the hybrid trains SA
at 0.1 for epochs ``0 .. switch_epoch - 1`` and HA at 0.01 afterwards, with
one optimiser throughout, as for CIFAR. "Equal compute time" (Section 5) is
read as equal epochs (equal optimiser steps) for every paradigm; the measured
seconds per run are written beside the results.

Checkpoints (after every epoch, atomic) hold the networks, the optimiser, the
shuffling generator and the history; ``resume=True`` continues from them and
on the CPU ends bit-for-bit where an uninterrupted run does. The checkpoint
helpers are those of :mod:`.torch_train`.
"""

import os
import time
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Optional, Tuple

import numpy as np
import torch

from minimal_attn import PARADIGMS, hatexplain, losses
from minimal_attn import hatexplain_report as report
from minimal_attn.errors import InputError, check_int_at_least, check_paradigm, check_positive
from minimal_attn.io import atomic_open, ensure_dir

from . import torch_backend as tb
from .torch_text_fcam import TextFCAMConfig, build_text_fcam, check_embedding
from .torch_train import (
    CHECKPOINT_FORMAT,
    _check_finite,
    _check_resumable,
    _comparable,
    checkpoint_path,
    data_fingerprint,
)

#: Appendix A.3: loss paradigm -> lr (both embeddings); the hybrid's HA phase uses 0.01.
HATEXPLAIN_LR = {"sa": 0.1, "ha": 0.1, "lv": 0.3}
HYBRID_HA_LR = 0.01


@dataclass
class TextTrainConfig:
    """One training run of a text FCAM: a paradigm, a seed and the optimiser settings."""

    paradigm: str = "sa"                 # sa, ha, lv or hybrid
    embedding: str = "standard"          # standard (HateXplain-1) or self-attention (-2)
    epochs: int = 10
    lr: Optional[float] = None           # None: Appendix A.3 (hybrid: its SA phase)
    hybrid_lr: Optional[float] = None    # hybrid's HA-phase lr; None: 0.01
    momentum: float = 0.9                # SGD momentum
    batch_size: int = 128                # not in the paper; 128 keeps LV at lr 0.3 stable
    seed: int = 0                        # initialisation and shuffling
    switch_epoch: Optional[int] = None   # hybrid: first HA epoch; None: epochs // 2
    device: Optional[str] = None         # None: cuda if available, else cpu
    threshold: float = 0.8               # SAIF threshold tau
    n_classes: int = 2                   # set from the data by run_hatexplain

    def __post_init__(self):
        self.paradigm = check_paradigm(self.paradigm)
        self.embedding = check_embedding(self.embedding)

    def switch(self):
        return self.epochs // 2 if self.switch_epoch is None else int(self.switch_epoch)

    def phase(self, epoch):
        """The loss paradigm (sa, ha, lv) in force at ``epoch``."""
        return losses.phase(self.paradigm, epoch, self.switch())

    def learning_rate(self, epoch):
        phase = self.phase(epoch)
        if self.paradigm == "hybrid" and phase == "ha":
            return float(HYBRID_HA_LR if self.hybrid_lr is None else self.hybrid_lr)
        return float(HATEXPLAIN_LR[phase] if self.lr is None else self.lr)


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
    """:func:`minimal_attn.hatexplain.summarise_posts` of a text FCAM on a split."""
    a = np.zeros(encoded.mask.shape, dtype=np.float64)                         # (N, L)
    s = np.zeros((store.n, model.config.n_classes))                            # (N, C)
    for idx in store.batches(batch_size):
        ids, mask, _, _ = store.batch(idx)
        scores, s_batch = model.predict(ids, mask, paradigm)
        a[idx.numpy(), : ids.shape[1]] = tb.attention(scores).cpu().numpy()
        s[idx.numpy()] = s_batch.cpu().numpy()
    return hatexplain.summarise_posts(a, s, encoded.y, encoded.rationale, threshold)


def _train_epoch(model, optimizer, store, phase, generator, batch_size):
    """One pass over shuffled mini-batches: (mean loss, running accuracy, mean a_{z*})."""
    sums = torch.zeros(4, dtype=torch.float64, device=store.ids.device)  # loss, correct, a_z*, n*
    for idx in store.batches(batch_size, generator):
        ids, mask, rationale, y = store.batch(idx)
        scores, logits = model(ids, mask, phase)
        value = tb.loss(phase, scores, logits, y)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        with torch.no_grad():
            has = rationale.any(dim=1)                                          # (B,)
            a_fg = (tb.attention(scores) * rationale).sum(dim=1)                # (B,) a_{z*}
            sums += torch.stack([value.detach().double() * idx.numel(),
                                 (tb.infer(phase, scores, logits).argmax(1) == y).sum().double(),
                                 a_fg[has].sum().double(), has.sum().double()])
    loss, correct, a_fg, n_fg = sums.tolist()
    return loss / store.n, correct / store.n, a_fg / max(n_fg, 1.0)


def train_text_run(config, train, test, vocab_size, out_dir=None, resume=False, callback=None):
    """Train one text FCAM (one paradigm, one seed) and evaluate it, V&R Section 5.

    Parameters
    ----------
    config : TextTrainConfig
    train, test : minimal_attn.hatexplain.Encoded (padded ids, mask, rationale, y)
    vocab_size : int, rows of the embedding
    out_dir : folder for ``checkpoints/`` (None: no checkpoints)
    resume : continue from the checkpoint in ``out_dir`` if there is one
    callback : optional ``callback(epoch, record)`` after each checkpoint

    Returns
    -------
    dict with ``train``, ``test``, ``history``, ``instances`` as :func:`.torch_train.train_run`.
    """
    device = tb.get_device(config.device)
    model = build_text_fcam(TextFCAMConfig(vocab_size, config.n_classes, config.embedding),
                            config.seed, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate(0),
                                momentum=config.momentum)
    generator = torch.Generator().manual_seed(int(config.seed))
    stores = {"train": TextStore(train, device), "test": TextStore(test, device)}
    fingerprint = data_fingerprint(*(SimpleNamespace(X=e.ids, y=e.y, z=e.rationale)
                                     for e in (train, test)))
    path = checkpoint_path(out_dir, config) if out_dir is not None else None
    history, start = [], 0
    if resume and path is not None and os.path.exists(path):
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("format") == CHECKPOINT_FORMAT and state.get("data") != fingerprint:
            raise InputError(f"checkpoint {path} was written for other HateXplain data; use "
                             "the same --data-dir and --min-count or drop --resume")
        _check_resumable(state, config, fingerprint, path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        history, start = state["history"], state["epoch"]
    if path is not None:
        ensure_dir(os.path.dirname(path))

    test_eval = None                     # the latest epoch's test evaluation, reused at the end
    for epoch in range(start, config.epochs):
        phase, lr = config.phase(epoch), config.learning_rate(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, acc, a_fg = _train_epoch(model, optimizer, stores["train"], phase, generator,
                                       config.batch_size)
        _check_finite(loss, config, epoch)
        test_eval = evaluate(model, stores["test"], test, config.paradigm, config.threshold)
        record = {"epoch": epoch + 1, "phase": phase, "lr": lr, "loss": loss,
                  "train_running_accuracy": acc, "train_mean_a_z": a_fg,
                  "test_accuracy": test_eval[0]["accuracy"], "test_saif": test_eval[0]["saif"]}
        history.append(record)
        if path is not None:
            state = {"format": CHECKPOINT_FORMAT, "epoch": epoch + 1,
                     "config": _comparable(config), "data": fingerprint,
                     "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "generator": generator.get_state(), "history": history}
            with atomic_open(path, "wb") as f:
                torch.save(state, f)
        if callback is not None:
            callback(epoch, dict(record, paradigm=config.paradigm, seed=config.seed))

    train_summary, train_inst = evaluate(model, stores["train"], train, config.paradigm,
                                         config.threshold)
    test_summary, test_inst = test_eval or evaluate(model, stores["test"], test,
                                                    config.paradigm, config.threshold)
    return {"paradigm": config.paradigm, "seed": config.seed, "train": train_summary,
            "test": test_summary, "history": history, "resumed_from_epoch": start,
            "instances": {"train": train_inst, "test": test_inst}}


@dataclass
class HateXplainConfig:
    """A Table 1 experiment: paradigms x seeds of one embedding, V&R Section 5."""

    train: TextTrainConfig = field(default_factory=TextTrainConfig)  # paradigm/seed overridden
    paradigms: Tuple[str, ...] = PARADIGMS
    seeds: int = 1                       # seeds 0 .. seeds-1
    min_count: int = 2                   # training-split count below which a word is <unk>
    max_len: Optional[int] = None        # cut longer posts (None: keep every token)
    threads: Optional[int] = None        # torch CPU threads (None: leave torch's setting)


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
    for name in ("lr", "hybrid_lr"):
        if getattr(t, name) is not None:
            _named(check_positive, name, getattr(t, name))
    if t.switch_epoch is not None and not 0 <= t.switch_epoch <= t.epochs:
        raise InputError(f"switch_epoch must lie in 0..{t.epochs} (epochs)", param="switch_epoch")
    if not 0 < t.threshold < 1:
        raise InputError(f"threshold must lie in (0, 1), got {t.threshold}", param="threshold")
    if resume and out_dir is None:
        raise InputError("resume needs out: the folder whose checkpoints/ to resume from",
                         param="out")


def run_hatexplain(config, data_dir, out_dir=None, resume=False, callback=None):
    """Every paradigm and seed of ``config`` on HateXplain; results folder as the CIFAR runs.

    ``callback(record)`` gets ``{"event": "epoch", ...}`` after each epoch and
    ``{"event": "run", ...}`` after each (paradigm, seed). Returns
    ``(results, meta)``: ``results[paradigm]["train"|"test"]["accuracy"|"saif"]``
    are means over seeds (fractions), with ``_std``, ``per_seed`` and heat maps.
    """
    _check(config, out_dir, resume)
    paradigms = [check_paradigm(p) for p in config.paradigms]
    if config.threads is not None:
        torch.set_num_threads(_named(check_int_at_least, "threads", config.threads, 1))
    device = str(tb.get_device(config.train.device))
    data = hatexplain.read_hatexplain(data_dir)
    vocab, enc = hatexplain.encode_splits(data, config.min_count, config.max_len)
    template = replace(config.train, device=device,
                       n_classes=len(hatexplain.CLASSES[data.layout]))
    if out_dir is not None:              # every check that can fail is done: now write
        ensure_dir(out_dir)
    runs = {}
    for p in paradigms:
        runs[p] = []
        for seed in range(config.seeds):
            run_config = replace(template, paradigm=p, seed=seed)
            start = time.perf_counter()
            result = train_text_run(
                run_config, enc["train"], enc["test"], len(vocab), out_dir, resume,
                None if callback is None else
                (lambda epoch, record: callback(dict(record, event="epoch"))))
            result["seconds"] = time.perf_counter() - start
            runs[p].append(result)
            if callback is not None:
                callback({"event": "run", "paradigm": p, "seed": seed,
                          "seconds": result["seconds"],
                          **{f"{s}_{k}": result[s][k] for s in ("train", "test")
                             for k in ("accuracy", "saif")}})
    results = {p: report.aggregate(r) for p, r in runs.items()}
    meta = {"dataset": "hatexplain", "layout": data.layout, "data_dir": os.fspath(data_dir),
            "classes": list(hatexplain.CLASSES[data.layout]), "embedding": template.embedding,
            "paper_row": report.PAPER_ROWS[template.embedding]["name"],
            "vocab_size": len(vocab), "min_count": config.min_count, "max_len": config.max_len,
            "posts": {s: int(len(e.y)) for s, e in enc.items()}, "dropped": data.dropped,
            "epochs": template.epochs, "seeds": list(range(config.seeds)), "paradigms": paradigms,
            "lr": {p: sorted({h["lr"] for h in runs[p][0]["history"]}) for p in paradigms},
            "batch_size": template.batch_size, "momentum": template.momentum,
            "switch_epoch": template.switch(), "threshold": template.threshold,
            "device": device}
    if out_dir is not None:
        report.write_outputs(out_dir, results, runs, meta)
    return results, meta
