r"""Training the linear FCAM of the core on vector mosaics (V&R Section 2.3, Table 1 setting).

Vashisht & Ramaswamy (2023), Section 2.3: focus :math:`f(x) = u^\top x`,
classifier :math:`g(x) = W x`, trained from zero (uniform focus) by plain
mini-batch gradient descent (:func:`minimal_attn.fcam.train`, no momentum).
Epoch ``e`` is one pass over the training mosaics: a permutation drawn from a generator
seeded by ``(seed, e)``, cut into ``ceil(N / batch_size)`` batches (as the CNN's epochs),
so a resumed run repeats the uninterrupted one exactly. The
epochs, checkpoints and results come from the shared skeleton
:func:`minimal_attn.experiments.epochs.run_epochs` (the CNN twin is
``minimal_attn.backends.vr.train.train_run``).
"""

import json

import numpy as np

from minimal_attn import fcam as linear_fcam
from minimal_attn import losses, saif
from minimal_attn.experiments.checkpoints import data_fingerprint
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.train_loop import LINEAR_LR


def summarise(a, s, mosaics, threshold):
    """``saif.summarise`` of attention ``a`` (N, m) and class scores ``s`` (N, C), with
    the per-instance a_z, s_y and ``correct`` (the prediction, argmax of ``s``, is y)."""
    summary = saif.summarise(a, s, mosaics.y, mosaics.z, threshold)
    a_z, s_y = saif.foreground_scores(a, s, mosaics.y, mosaics.z)
    correct = np.argmax(np.asarray(s), axis=1) == np.asarray(mosaics.y).reshape(-1)
    return summary, {"a_z": a_z, "s_y": s_y, "correct": correct}


class LinearTrainer:
    """The linear FCAM for :func:`run_epochs`: parameters {"W": (C, d), "u": (d,)}."""

    KIND = "numpy-linear"
    LR_TABLE = LINEAR_LR
    MOMENTUM = 0.0

    def __init__(self, config, train, test):
        self.config, self.sets = config, {"train": train, "test": test}
        n, self.m, d = train.X.shape
        self.params = linear_fcam.init_params(d, config.n_classes)

    def steps(self, batch_size):
        n = self.sets["train"].X.shape[0]
        return -(-n // min(batch_size, n))

    def train_epoch(self, phase, lr, epoch, step):
        train = self.sets["train"]
        n = train.X.shape[0]
        batch = min(self.config.batch_size, n)
        self.params, values = linear_fcam.train(
            self.params, train.X, train.y, phase, lr, self.steps(batch), batch_size=batch,
            seed=[self.config.seed, epoch], callback=lambda s, p, v: step(v), shuffle=True)
        a = losses.attention(train.X @ self.params["u"])                    # (N, m)
        s = linear_fcam.predict(self.params, train.X, phase)                # (N, C)
        return (float(np.mean(values)), float(np.mean(s.argmax(1) == train.y)),
                float(np.mean(a[np.arange(n), train.z])))

    def probe_loss(self, phase):
        train = self.sets["train"]
        b = min(self.config.batch_size, train.X.shape[0])
        with np.errstate(all="ignore"):
            return float(linear_fcam.loss(self.params, train.X[:b], train.y[:b], phase))

    def evaluate(self, split, rule):
        mosaics = self.sets[split]
        a = losses.attention(mosaics.X @ self.params["u"])                  # (N, m)
        return summarise(a, linear_fcam.predict(self.params, mosaics.X, rule), mosaics,
                         self.config.threshold)

    @staticmethod
    def read(path):
        with np.load(path) as saved:
            meta = json.loads(str(saved["state"]))
            return meta, {"W": saved["W"].copy(), "u": saved["u"].copy()}

    def restore(self, payload):
        self.params = payload

    def save(self, f, meta):
        np.savez(f, W=self.params["W"], u=self.params["u"], state=json.dumps(meta))


def train_numpy_run(config, train, test, out_dir=None, resume=False, progress=None,
                    callback=None, log=None):
    """Train the linear FCAM on vector mosaics (N, m, d) and evaluate it.

    Same arguments and result as ``minimal_attn.backends.vr.train.train_run``
    (see :func:`minimal_attn.experiments.epochs.run_epochs`); ``config.momentum`` is
    ignored (plain gradient descent).
    """
    trainer = LinearTrainer(config, train, test)
    return run_epochs(config, trainer, data_fingerprint(train, test), out_dir, resume,
                      progress, callback, log)
