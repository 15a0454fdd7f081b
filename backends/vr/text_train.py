r"""Training the HateXplain text FCAMs with SA, HA, LV and the hybrid, V&R Section 5, Table 1.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.3. :class:`TextTrainer`
is the text FCAM (:class:`.text_models.TextFCAM`) for the shared epoch
skeleton :func:`minimal_attn.experiments.epochs.run_epochs`, which the CNN and the
linear FCAM use too: the hybrid's schedule (fixed or ``switch_epoch="auto"``),
per-paradigm learning rates, divergence and collapse checks, history records,
atomic checkpoints with the ``.ckpt.prev`` fallback, and exact resume (on the
CPU a resumed run ends bit-for-bit where an uninterrupted one does).
:func:`train_text_run` trains one (paradigm, seed); every paradigm and seed
of a Table 1 row is :func:`.hatexplain_table1.run_hatexplain` (the one Table 1
driver with the posts' adapter; it and the settings, :class:`TextTrainConfig`
and :class:`HateXplainConfig`, are importable from here too).

The focus is :math:`a_{z^*} = \sum_{z\in z^*} a_z` (posts without a rationale
count for accuracy and are left out of SAIF and of the mean :math:`a_{z^*}`).
A post has no fixed m: the auto switch and the collapse warning compare the
focus with the uniform one, :math:`1/m` read as the mean of
:math:`|z^*| / L` over the training posts with a rationale.
"""

from types import SimpleNamespace

import numpy as np
import torch

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.hatexplain_table1 import (  # noqa: F401 (the settings, re-exported)
    HATEXPLAIN_LR,
    HYBRID_HA_LR,
    HateXplainConfig,
    TextTrainConfig,
    run_hatexplain,
)
from minimal_attn.backends.vr.text_models import TextFCAMConfig, build_text_fcam
from minimal_attn.backends.vr.train import CNNTrainer
from minimal_attn.datasets import hatexplain
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.linear_train import data_fingerprint


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
