r"""Training the CNN FCAM with SA, HA, LV or the hybrid (V&R Section 2.4, Table 1).

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. :func:`train_run`
trains the CNN FCAM of :mod:`.models` on image mosaics with SGD and
momentum (Appendix A.2) or Adam (the authors' released code). The epochs,
the hybrid's schedule, checkpoints, resume, divergence and collapse checks are
the shared skeleton
:func:`minimal_attn.experiments.epochs.run_epochs` (the linear FCAM of the core uses
the same one, :mod:`minimal_attn.experiments.linear_train`). The result holds

* ``train`` / ``test``: :func:`minimal_attn.saif.summarise` of the final model
  (accuracy, SAIF, the four focus-prediction fractions, the Figure 1 heat map);
* ``history``: one record per epoch (phase, inference rule, lr, mean training
  loss, running training accuracy and mean :math:`a_z`, test accuracy/SAIF);
* ``instances``: per-instance :math:`a_z`, :math:`s_y` and ``correct`` (NumPy arrays);
* ``dead_units``: per ReLU layer, the units inactive on a batch of training
  mosaics at the start (a unit dead at initialisation never recovers in the
  bias-free focus network).

The hybrid uses one optimiser throughout: its momentum (or Adam's moments)
carries over the switch.
On the CPU a resumed run ends bit-for-bit where an uninterrupted one does
(``tests/test_torch_train.py``).
"""

import io

import numpy as np
import torch
from torch import nn

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.image_store import ImageStore
from minimal_attn.backends.vr.models import build_fcam_for
from minimal_attn.experiments.epochs import run_epochs
from minimal_attn.experiments.linear_train import (
    data_fingerprint,
    summarise,
    train_numpy_run,  # noqa: F401 (old home, re-exported)
)
from minimal_attn.experiments.train_loop import (  # noqa: F401 (re-exported)
    LINEAR_LR,
    PAPER_LR,
    TrainConfig,
    checkpoint_path,
)

#: Mosaics whose segments the dead-unit report pushes through the networks.
DEAD_UNIT_BATCH = 64


def evaluate(model, store, mosaics, paradigm, threshold=0.8, batch_size=400):
    """``saif.summarise`` of a CNN FCAM on a mosaic set, with per-instance a_z, s_y and
    ``correct``."""
    a_parts, s_parts = [], []
    for idx in torch.arange(store.n, device=store.X.device).split(batch_size):
        scores, s = model.predict(store[idx], paradigm)
        a_parts.append(tb.attention(scores))
        s_parts.append(s)
    a, s = torch.cat(a_parts).cpu().numpy(), torch.cat(s_parts).cpu().numpy()
    return summarise(a, s, mosaics, threshold)


def dead_units(net, images):
    """Per ReLU layer of ``net`` (a :class:`ConvNet`): (name, dead, units) on ``images``.

    A unit (a channel of a convolution, a neuron of a linear layer) is dead
    when its ReLU output is zero for every image (n, 3, 32, 32) of the batch.
    """
    out, x, name = [], images, None
    with torch.no_grad():
        for layer in net.body:
            x = layer(x)
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                kind = "conv" if isinstance(layer, nn.Conv2d) else "fc"
                name = f"{kind}{sum(1 for n, _, _ in out if n.startswith(kind)) + 1}"
            if isinstance(layer, nn.ReLU):
                alive = x.reshape(x.shape[0], x.shape[1], -1).amax(dim=(0, 2)) > 0
                out.append((name, int((~alive).sum()), int(alive.numel())))
    return out


#: Adam's constants: torch's defaults, which the authors' released code uses.
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8


def make_optimizer(name, params, momentum=0.9):
    """``sgd`` (with momentum, Appendix A.2) or ``adam`` (the authors' released code).

    One optimizer for focus and classifier: both optimizers update every
    parameter elementwise, so this equals the authors' one optimizer per
    network when both have the same rate. The lr is set at the start of every
    epoch (it depends on the hybrid's phase).
    """
    if name == "adam":
        return torch.optim.Adam(params, lr=0.0, betas=ADAM_BETAS, eps=ADAM_EPS)
    return torch.optim.SGD(params, lr=0.0, momentum=momentum)


class CNNTrainer:
    """The CNN FCAM of Appendix A.2 for :func:`run_epochs`."""

    KIND = "torch-cnn"
    LR_TABLE = None                      # the paper's, by dataset (TrainConfig.rates)

    def __init__(self, config, train, test):
        self.config, self.sets = config, {"train": train, "test": test}
        self.device = tb.get_device(config.device)
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True
        self.model = build_fcam_for(config, self.device)
        self.optimizer = make_optimizer(config.optimizer, self.model.parameters(),
                                        config.momentum)
        self.generator = torch.Generator().manual_seed(int(config.seed))
        self.stores = {name: ImageStore(mos.X, self.device, mos.z, config.pixels)
                       for name, mos in self.sets.items()}
        self.y = torch.as_tensor(np.asarray(train.y), device=self.device)
        self.m = train.X.shape[1]

    def dead_units(self):
        """Per layer (name, dead, total) of focus and classifier on training segments."""
        idx = torch.arange(min(DEAD_UNIT_BATCH, self.stores["train"].n))
        X = self.stores["train"][idx]
        flat = X.reshape((-1,) + X.shape[2:])                         # (B*m, 3, 32, 32)
        return {net: dead_units(getattr(self.model, net), flat)
                for net in ("focus", "classifier")}

    def steps(self, batch_size):
        return -(-self.stores["train"].n // batch_size)

    def train_epoch(self, phase, lr, epoch, step):
        """One pass over shuffled mini-batches: (mean loss, running accuracy, mean a_z).

        Running sums stay on the device; ``step`` reads the loss every step on
        the CPU but only every 20 steps on a GPU, where reading syncs.
        """
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        store, y = self.stores["train"], self.y
        sums = torch.zeros(3, dtype=torch.float64, device=store.X.device)  # loss, hits, a_z
        every = 1 if store.X.device.type == "cpu" else 20
        order = torch.randperm(store.n, generator=self.generator).to(y.device)
        for k, idx in enumerate(order.split(self.config.batch_size)):
            X, yb, zb = store[idx], y[idx], store.z[idx]
            scores, logits = self.model(X, phase)
            value = tb.loss(phase, scores, logits, yb)
            self.optimizer.zero_grad(set_to_none=True)
            value.backward()
            self.optimizer.step()
            with torch.no_grad():
                n = idx.numel()
                sums += torch.stack([
                    value.detach().double() * n,
                    (tb.infer(phase, scores, logits).argmax(1) == yb).sum().double(),
                    tb.attention(scores)[torch.arange(n, device=zb.device), zb].sum().double()])
            step(float(value.detach()) if k % every == 0 else None)
        loss, correct, a_z = (sums / store.n).tolist()
        return loss, correct, a_z

    @torch.no_grad()
    def probe_loss(self, phase):
        idx = torch.arange(min(self.config.batch_size, self.stores["train"].n))
        scores, logits = self.model(self.stores["train"][idx], phase)
        return float(tb.loss(phase, scores, logits, self.y[idx.to(self.y.device)]))

    def evaluate(self, split, rule):
        return evaluate(self.model, self.stores[split], self.sets[split], rule,
                        self.config.threshold)

    @staticmethod
    def read(path):
        # the generator state must stay a CPU tensor; load_state_dict moves the
        # rest onto the model's device
        state = torch.load(path, map_location="cpu", weights_only=True)
        payload = {k: state.pop(k) for k in ("model", "optimizer", "generator")}
        return state, payload

    def restore(self, payload):
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.generator.set_state(payload["generator"])

    def save(self, f, meta):
        buffer = io.BytesIO()
        torch.save(dict(meta, model=self.model.state_dict(),
                        optimizer=self.optimizer.state_dict(),
                        generator=self.generator.get_state()), buffer)
        f.write(buffer.getvalue())


def train_run(config, train, test, out_dir=None, resume=False, progress=None,
              callback=None, log=None):
    """Train one CNN FCAM (one paradigm, one seed) and evaluate it, Section 2.4.

    Parameters
    ----------
    config : TrainConfig
    train, test : minimal_attn.data.Mosaics with X (N, m, 3, 32, 32), uint8
        CIFAR pixels (normalised by ``to_float_images``) or float32 images
    out_dir : folder for ``checkpoints/`` (None: no checkpoints)
    resume : continue from the checkpoint in ``out_dir`` if there is one
        (a missing checkpoint starts fresh; a mismatched one raises InputError;
        an unreadable one falls back to ``.ckpt.prev`` with a warning)
    progress : ``progress(label, done, total, note)`` for every step, or None
        (:mod:`minimal_attn.experiments.progress`)
    callback : optional ``callback(epoch, record)`` after each checkpoint
    log : optional ``log(line)`` for the dead-unit report and warnings

    Returns
    -------
    dict with ``train``, ``test``, ``history``, ``instances``, ``dead_units``,
    ``seconds`` (training time, kept across resumes), ``switch_epoch``,
    ``warnings`` (see :func:`minimal_attn.experiments.epochs.run_epochs`).
    """
    trainer = CNNTrainer(config, train, test)
    dead = trainer.dead_units()
    if log is not None:
        log(f"{config.paradigm} seed {config.seed}: dead units at start (of "
            f"{min(DEAD_UNIT_BATCH, trainer.stores['train'].n)} training mosaics): "
            + "; ".join(f"{net} " + " ".join(f"{name} {d}/{t}" for name, d, t in layers)
                        for net, layers in dead.items()))
    result = run_epochs(config, trainer, data_fingerprint(train, test), out_dir, resume,
                        progress, callback, log)
    result["dead_units"] = {net: [{"layer": name, "dead": d, "units": t}
                                  for name, d, t in layers] for net, layers in dead.items()}
    return result
