"""Test helpers for the seed-batched CNN FCAM (tests/test_torch_batched.py,
tests/test_authors_recipe.py): a float64 image store and a BatchedSeeds over given models."""

from types import SimpleNamespace

import numpy as np

#: The seeds and the ways of running their convolutions (``batched.MODES``) the tests use.
SEEDS = [0, 1, 2]
MODES = ["loop", "grouped", "grouped_nchw", "unfold"]


class Store:
    """The ``ImageStore`` interface over float64 images (ImageStore keeps float32)."""

    def __init__(self, X, z):
        self.X, self.z, self.n = X, z, X.shape[0]

    def __getitem__(self, idx):
        return self.X[idx]


def batched_seeds(models, seeds, mode, store, y, device="cpu", optimizer="sgd",
                  batch_size=4, compile="none"):
    """A ``BatchedSeeds`` over ``models`` (one per seed) training on a float64 ``store``;
    ``compile``: how it runs a step (``TrainConfig.compile``)."""
    from minimal_attn.backends.vr.batched_train import BatchedSeeds
    from minimal_attn.experiments.train_loop import TrainConfig

    configs = [TrainConfig(batch_size=batch_size, momentum=0.9, device=device, seed=s,
                           optimizer=optimizer, compile=compile) for s in seeds]
    data = SimpleNamespace(X=np.zeros((1, 3, 3, 32, 32), np.float32), y=np.zeros(1, int),
                           z=np.zeros(1, int))              # replaced by the float64 store
    run = BatchedSeeds(configs, data, None, mode, make_model=lambda s: models[seeds.index(s)])
    run.stores["train"], run.y = store, y
    return run


def separate_epochs(model, optimizer, store, y, phases, lrs, batch_size, seed):
    """The reference a batched lane must equal: ``optimizer`` (a torch.optim one) on one
    model, one epoch per (phase, lr), batches drawn as the lane draws them; epoch losses."""
    import torch

    from minimal_attn.backends import torch_backend as tb

    generator = torch.Generator().manual_seed(seed)
    losses = []
    for phase, lr in zip(phases, lrs):
        for group in optimizer.param_groups:
            group["lr"] = lr
        total = 0.0
        for idx in torch.randperm(store.n, generator=generator).split(batch_size):
            value = tb.loss(phase, *model(store[idx], phase), y[idx])
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            total += float(value.detach()) * idx.numel()
        losses.append(total / store.n)
    return losses
