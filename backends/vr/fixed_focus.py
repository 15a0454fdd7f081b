r"""The fixed-focus model for CIFAR mosaics: the CNN classifier under a frozen focus.

Vashisht & Ramaswamy (2023), Section 3, top rows of Figures 2 and 3. The
focus is frozen at :math:`\alpha` on the foreground and
:math:`(1-\alpha)/(m-1)` on every background segment; only the classifier g
(the CNN of Appendix A.2, :mod:`.models`) trains, one copy per alpha,
all from the same initialisation. :class:`CNNFixedFocusModel` implements the
fixed-focus model protocol of :mod:`minimal_attn.fixed_focus`:

* ``init(alphas) -> state``;
* ``losses(state, log_attention, paradigm) -> (A,)``, the dataset loss of each
  alpha's classifier under ``log_attention`` (A, N, m) (``-inf`` allowed);
* ``step(state, log_attention, paradigm, lr) -> state``, one epoch of SGD with
  momentum (or Adam, the authors' optimizer) for every alpha's classifier
  (mini-batches in the same shuffled order for every alpha).

The losses are those of :mod:`.torch_backend` with the fixed log-attention
in place of the focus scores, so :math:`L^{FF,SA}, L^{FF,HA}, L^{FF,LV}` of
Section 3.1 are exactly the training losses with a frozen focus.
"""

import numpy as np
import torch

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.image_store import ImageStore
from minimal_attn.backends.vr.models import FCAM, ConvNet, classifier_config, scaled
from minimal_attn.backends.vr.train import make_optimizer
from minimal_attn.errors import check_int_at_least, check_paradigm
from minimal_attn.losses import LOSS_PARADIGMS as FF_PARADIGMS  # hybrid is a schedule


class CNNFixedFocusModel:
    """CNN classifiers (one per alpha) on image mosaics with the focus frozen.

    Parameters
    ----------
    X : array (N, m, 3, 32, 32), float32 images (e.g. ``mosaics.to_float_images``)
        or uint8 pixels (normalised the same way on the device)
    y : array (N,), labels 0..n_classes-1
    n_classes : int
    device : None/"auto", "cpu", "cuda", "cuda:K"
    batch_size, momentum : settings of :meth:`step` (momentum: SGD only)
    seed : the classifiers' initialisation and the batch order
    dataset : "cifar10" or "cifar100", picks the Appendix A.2 classifier
    chunk, width : as for :func:`.models.build_fcam` (width 1 = the paper's)
    optimizer : "sgd" (Appendix A.2) or "adam" (the authors' released code)
    classifier : "paper" or "lenet" (:func:`.models.classifier_config`)
    """

    def __init__(self, X, y, n_classes, device=None, batch_size=100, momentum=0.9, seed=0,
                 dataset="cifar10", chunk=None, width=1.0, optimizer="sgd",
                 classifier="paper"):
        self.device = tb.get_device(device)
        self.store = ImageStore(X, self.device)
        self.y = torch.as_tensor(np.asarray(y), dtype=torch.long, device=self.device)
        self.n_classes = check_int_at_least("n_classes", n_classes, 2)
        self.batch_size = check_int_at_least("batch_size", batch_size, 1)
        self.momentum, self.seed, self.chunk = momentum, int(seed), chunk
        self.config = scaled(classifier_config(dataset, n_classes, classifier), width)
        self.optimizer = optimizer
        self._la = (None, None)                 # (numpy array, its device tensor)
        self._memo = {}                         # segment logits of one state

    def init(self, alphas):
        """One classifier per alpha, all with the same initial weights."""
        nets = []
        for _ in alphas:
            generator = torch.Generator().manual_seed(self.seed)
            net = FCAM(None, ConvNet(self.config, generator), self.chunk)
            nets.append(net.to(self.device, memory_format=torch.channels_last))
        opts = [make_optimizer(self.optimizer, net.parameters(), self.momentum)
                for net in nets]
        return {"nets": nets, "opts": opts, "epoch": 0}

    def _log_attention(self, log_attention):
        """(A, N, m) on the device as float32; reused while the same array comes back."""
        if self._la[0] is not log_attention:
            la = torch.as_tensor(np.array(log_attention, dtype=np.float32),
                                 device=self.device)
            self._la = (log_attention, la)
        return self._la[1]

    def _batches(self, shuffle_epoch=None):
        if shuffle_epoch is None:
            order = torch.arange(self.store.n)
        else:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + shuffle_epoch)
            order = torch.randperm(self.store.n, generator=gen)
        return order.split(self.batch_size)

    @torch.no_grad()
    def losses(self, state, log_attention, paradigm):
        """Dataset-mean fixed-focus loss of each alpha's classifier, (A,)."""
        paradigm = check_paradigm(paradigm, FF_PARADIGMS)
        la = self._log_attention(log_attention)                            # (A, N, m)
        key = (id(state["nets"]), state["epoch"])
        if self._memo.get("key") != key:
            self._memo = {"key": key}
        out = np.empty(len(state["nets"]))
        for i, net in enumerate(state["nets"]):
            total = 0.0
            for b, idx in enumerate(self._batches()):
                X, yb, la_b = self.store[idx], self.y[idx], la[i, idx.to(la.device)]
                if paradigm == "sa":
                    _, logits = net(X, "sa", la_b)                         # (B, C)
                else:   # segment logits do not depend on the attention: reuse them
                    logits = self._memo.get((i, b))
                    if logits is None:
                        logits = self._memo[(i, b)] = net.segment_logits(X)   # (B, m, C)
                total += float(tb.loss(paradigm, la_b, logits, yb)) * idx.numel()
            out[i] = total / self.store.n
        return out

    def step(self, state, log_attention, paradigm, lr):
        """One epoch of the optimizer for every alpha's classifier, focus frozen."""
        paradigm = check_paradigm(paradigm, FF_PARADIGMS)
        la = self._log_attention(log_attention)
        for i, (net, opt) in enumerate(zip(state["nets"], state["opts"])):
            for group in opt.param_groups:
                group["lr"] = float(lr)
            for idx in self._batches(shuffle_epoch=state["epoch"]):
                X, yb, la_b = self.store[idx], self.y[idx], la[i, idx.to(la.device)]
                _, logits = net(X, paradigm, la_b)
                value = tb.loss(paradigm, la_b, logits, yb)
                opt.zero_grad(set_to_none=True)
                value.backward()
                opt.step()
        state["epoch"] += 1
        return state


def cifar_model(cfg):
    """(CNNFixedFocusModel, z) for a resolved CIFAR ``FixedFocusConfig``.

    The mosaics come from :func:`minimal_attn.datasets.splits.load_mosaic_splits`, the
    loader ``attn-dyn train`` uses: the foreground is the first ``cfg.n_classes``
    of the paper's foreground classes (all of them by default).
    """
    from minimal_attn.datasets.mosaics import to_float_images
    from minimal_attn.datasets.splits import default_foreground, load_mosaic_splits

    tb.get_device(cfg.device)                    # refuse an absent GPU before loading CIFAR
    tb.set_threads(cfg.threads)
    names = list(default_foreground(cfg.setting))[:cfg.n_classes]
    splits = load_mosaic_splits(cfg.setting, cfg.m, cfg.n_train, 1, data_dir=cfg.data_dir,
                                foreground=names, seed=cfg.seed)
    X = to_float_images(splits.train.X)                                # (n, m, 3, 32, 32)
    return (CNNFixedFocusModel(X, splits.train.y, cfg.n_classes, device=cfg.device,
                               seed=cfg.seed, dataset=cfg.setting, optimizer=cfg.optimizer,
                               classifier=cfg.classifier), splits.train.z)


def run_fixed_focus(cfg, progress=None):
    """:func:`minimal_attn.experiments.fixed_focus.run_fixed_focus` for every setting,
    CIFAR ones included (mosaics and CNN built by :func:`cifar_model`)."""
    from minimal_attn.experiments import fixed_focus as ff

    resolved = ff.resolve(cfg)
    model = None if resolved.setting == "linear-orthogonal" else cifar_model(resolved)
    return ff.run_fixed_focus(cfg, progress=progress, model=model)
