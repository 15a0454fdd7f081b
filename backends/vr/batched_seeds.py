r"""``batch_seeds=True``: all seeds of a paradigm as one model, in ``run_experiment``'s format.

Vashisht & Ramaswamy (2023), Table 1 protocol (12 seeds per paradigm).
:func:`train_seeds` trains the seeds as one :class:`.batched_train.BatchedSeeds`
through the one epoch loop, :func:`minimal_attn.experiments.epochs.run_seeds`,
so their per-seed results, history records and checkpoints are exactly the
separate runs' (a batched run resumes separately and vice versa), with the same
per-paradigm learning rates, automatic switch, stop rule, time limit,
divergence and collapse checks. A seed that reaches ``stop_loss`` leaves the
batch; its last checkpoint is the one of the epoch it stopped at.
"""

from minimal_attn.experiments.epochs import run_seeds
from minimal_attn.experiments.linear_train import data_fingerprint


def train_seeds(configs, train, test, out=None, resume=False, callback=None, log=None,
                progress=None, mode=None, make_model=None):
    """Train ``configs`` (one paradigm, a seed each) together; one result per seed.

    ``mode`` and ``make_model``: see :class:`.batched_train.BatchedSeeds`. With
    ``resume`` every seed's checkpoint must exist and hold the same epoch (a seed
    that stopped earlier by the stop rule excepted), or none may exist (a fresh
    start); otherwise this returns None and the caller trains the seeds separately.
    """
    from minimal_attn.backends.vr.batched_train import BatchedSeeds

    trainer = BatchedSeeds(configs, train, test, mode, make_model)
    return run_seeds(configs, trainer, data_fingerprint(train, test), out, resume, progress,
                     callback, log)
