r"""Training FCAMs with SA, HA, LV or the hybrid, and their evaluation (Section 2.4, Table 1).

Vashisht & Ramaswamy (2023), Section 2.4. :func:`train_run` trains the CNN
FCAM of Appendix A.2 (:mod:`.torch_models`) on image mosaics with SGD and
momentum; :func:`train_numpy_run` trains the linear FCAM of the NumPy core
(:mod:`minimal_attn.fcam`) on vector mosaics. Both return the same result:

* ``train`` / ``test``: :func:`minimal_attn.saif.summarise` of the final model
  (accuracy, SAIF, the four focus-prediction fractions, the Figure 1 heat map);
* ``history``: one record per epoch (phase, lr, mean training loss, running
  training accuracy and mean :math:`a_z`, and test accuracy/SAIF after the epoch);
* ``instances``: per-instance :math:`a_z` and :math:`s_y` (NumPy arrays).

The hybrid trains SA for epochs ``0 .. switch_epoch - 1`` and HA afterwards,
each with its own learning rate, for the same total number of epochs as the
other paradigms (one optimiser throughout: its momentum carries over the switch).

Checkpoints: after every epoch the full state (networks, optimiser, shuffling
generator, history) is written atomically to ``out_dir/checkpoints``;
``resume=True`` continues from it. On the CPU a resumed run ends bit-for-bit
where an uninterrupted one does (``tests/test_torch_train.py``).

torch is imported inside the functions that need it, so the NumPy path runs
without torch installed.
"""

import hashlib
import os
import sys
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from minimal_attn import fcam as linear_fcam
from minimal_attn import losses, saif
from minimal_attn.errors import InputError, check_paradigm
from minimal_attn.io import atomic_open, ensure_dir

#: The paper's learning rates (Section 2.4): dataset -> loss paradigm -> lr.
#: Synthetic image mosaics use CIFAR-10's.
PAPER_LR = {"cifar10": {"sa": 0.01, "ha": 0.005, "lv": 0.01},
            "cifar100": {"sa": 0.005, "ha": 0.001, "lv": 0.01}}
#: Defaults for the linear FCAM (plain gradient descent from zero), chosen on the
#: synthetic Gaussian mosaics; the paper gives none for this experiment.
LINEAR_LR = {"sa": 0.5, "ha": 0.5, "lv": 0.5}
CHECKPOINT_FORMAT = 1


@dataclass
class TrainConfig:
    """One training run: a paradigm, a seed and the optimiser settings."""

    paradigm: str = "sa"                 # sa, ha, lv or hybrid
    epochs: int = 10
    lr: Optional[float] = None           # None: the paper's lr (hybrid: for its SA phase)
    hybrid_lr: Optional[float] = None    # hybrid's HA-phase lr; None: the paper's HA lr
    momentum: float = 0.9                # SGD momentum (torch backend only)
    batch_size: int = 100
    seed: int = 0                        # initialisation and shuffling
    switch_epoch: Optional[int] = None   # hybrid: first HA epoch; None: epochs // 2
    device: Optional[str] = None         # None: cuda if available, else cpu
    threshold: float = 0.8               # SAIF / focus-true threshold tau
    dataset: str = "cifar10"             # picks the Appendix A.2 networks and default lrs
    n_classes: int = 3
    chunk: Optional[int] = None          # images per network call; None: by device
    width: float = 1.0                   # network width multiplier (1 = Appendix A.2)

    def __post_init__(self):
        self.paradigm = check_paradigm(self.paradigm)

    def switch(self):
        return self.epochs // 2 if self.switch_epoch is None else int(self.switch_epoch)

    def phase(self, epoch):
        """The loss paradigm (sa, ha, lv) in force at ``epoch``."""
        return losses.phase(self.paradigm, epoch, self.switch())

    def learning_rate(self, epoch, table=None):
        """The lr at ``epoch``: the override if given, else ``table`` (the paper's)."""
        phase = self.phase(epoch)
        table = table or PAPER_LR["cifar100" if self.dataset == "cifar100" else "cifar10"]
        override = (self.hybrid_lr if self.paradigm == "hybrid" and phase == "ha"
                    else self.lr)
        return float(table[phase] if override is None else override)


# ------------------------------------------------------------------ shared pieces
def checkpoint_path(out_dir, config):
    return os.path.join(out_dir, "checkpoints", f"{config.paradigm}_seed{config.seed}.ckpt")


def data_fingerprint(*sets):
    """A short hash of mosaic sets (shapes, labels, positions, a sample of pixels)."""
    h = hashlib.sha1()
    for mosaics in sets:
        X = np.asarray(mosaics.X)
        h.update(repr((X.shape, str(X.dtype))).encode())
        for part in (np.asarray(mosaics.y), np.asarray(mosaics.z),
                     X[:: max(1, X.shape[0] // 16)]):
            h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()


def _comparable(config):
    """Settings a checkpoint must share with the run that resumes it."""
    return {k: v for k, v in asdict(config).items() if k not in ("device", "chunk")}


def _check_resumable(state, config, fingerprint, path):
    if state.get("format") != CHECKPOINT_FORMAT:
        raise InputError(f"checkpoint {path} has an unknown format; delete it or drop --resume")
    saved = state["config"]
    diff = [k for k, v in _comparable(config).items() if saved.get(k) != v]
    if diff:
        raise InputError(f"checkpoint {path} was written with different settings "
                         f"({', '.join(f'{k}={saved.get(k)!r}' for k in diff)}); "
                         "use the same options or drop --resume")
    if state["data"] != fingerprint:
        raise InputError(f"checkpoint {path} was written for different mosaics; use the "
                         "same --dataset/--m/--n-train/--n-test/--data-dir or drop --resume")


def _result(config, train_summary, test_summary, history, instances, start_epoch):
    return {"paradigm": config.paradigm, "seed": config.seed, "train": train_summary,
            "test": test_summary, "history": history, "instances": instances,
            "resumed_from_epoch": start_epoch}


def _check_finite(loss, config, epoch):
    if not np.isfinite(loss):
        raise InputError(f"training diverged: {config.paradigm} seed {config.seed} has loss "
                         f"{loss} in epoch {epoch + 1}; lower --lr")
    return loss


def _summarise(a, s, mosaics, threshold):
    summary = saif.summarise(a, s, mosaics.y, mosaics.z, threshold)
    a_z, s_y = saif.foreground_scores(a, s, mosaics.y, mosaics.z)
    return summary, {"a_z": a_z, "s_y": s_y}


class _Progress:
    """A click progress bar per epoch showing the running loss (or nothing)."""

    def __init__(self, enabled, length, label):
        import click

        self.text = None
        self.bar = (click.progressbar(length=length, label=label, file=sys.stderr,
                                      item_show_func=lambda text: text)
                    if enabled else None)

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def update(self, loss=None):
        """Advance one step; show ``loss`` if given, else keep the last one shown."""
        if self.bar is not None:
            if loss is not None:
                self.text = f"loss {loss:.4f}"
            self.bar.update(1, self.text)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)


# ------------------------------------------------------------------ torch: CNN FCAM
def evaluate(model, store, mosaics, paradigm, threshold=0.8, batch_size=400):
    """``saif.summarise`` of a CNN FCAM on a mosaic set, with per-instance a_z and s_y."""
    import torch

    from . import torch_backend as tb

    a_parts, s_parts = [], []
    for idx in torch.arange(store.n, device=store.X.device).split(batch_size):
        scores, s = model.predict(store[idx], paradigm)
        a_parts.append(tb.attention(scores))
        s_parts.append(s)
    a, s = torch.cat(a_parts).cpu().numpy(), torch.cat(s_parts).cpu().numpy()
    return _summarise(a, s, mosaics, threshold)


def _train_epoch(model, optimizer, store, y, phase, generator, batch_size, bar):
    """One pass over shuffled mini-batches; returns (mean loss, running accuracy, mean a_z).

    Running sums stay on the device; the progress bar reads the loss every
    step on the CPU but only every 20 steps on a GPU, where reading syncs.
    """
    import torch

    from . import torch_backend as tb

    sums = torch.zeros(3, dtype=torch.float64, device=store.X.device)  # loss, correct, a_z
    every = 1 if store.X.device.type == "cpu" else 20
    order = torch.randperm(store.n, generator=generator).to(y.device)     # one copy per epoch
    for step, idx in enumerate(order.split(batch_size)):
        X, yb, zb = store[idx], y[idx], store.z[idx]
        scores, logits = model(X, phase)
        value = tb.loss(phase, scores, logits, yb)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        with torch.no_grad():
            n = idx.numel()
            sums += torch.stack([
                value.detach().double() * n,
                (tb.infer(phase, scores, logits).argmax(1) == yb).sum().double(),
                tb.attention(scores)[torch.arange(n, device=zb.device), zb].sum().double()])
        bar.update(float(value.detach()) if step % every == 0 else None)
    loss, correct, a_z = (sums / store.n).tolist()
    return loss, correct, a_z


def train_run(config, train, test, out_dir=None, resume=False, progress=True,
              callback=None):
    """Train one CNN FCAM (one paradigm, one seed) and evaluate it, Section 2.4.

    Parameters
    ----------
    config : TrainConfig
    train, test : minimal_attn.data.Mosaics with X (N, m, 3, 32, 32), uint8
        CIFAR pixels (normalised by ``to_float_images``) or float32 images
    out_dir : folder for ``checkpoints/`` (None: no checkpoints)
    resume : continue from the checkpoint in ``out_dir`` if there is one
        (a missing checkpoint starts fresh; a mismatched one raises InputError)
    callback : optional ``callback(epoch, record)`` after each checkpoint

    Returns
    -------
    dict with ``train``, ``test``, ``history``, ``instances`` (see the module doc).
    """
    import torch

    from . import torch_backend as tb
    from .torch_models import ImageStore, build_fcam, classifier_config, focus_config, scaled

    device = tb.get_device(config.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    model = build_fcam(config.dataset, config.n_classes, config.seed, config.chunk, device,
                       scaled(focus_config(config.dataset), config.width),
                       scaled(classifier_config(config.dataset, config.n_classes),
                              config.width))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate(0),
                                momentum=config.momentum)
    generator = torch.Generator().manual_seed(int(config.seed))
    stores = {name: ImageStore(mos.X, device, mos.z)
              for name, mos in (("train", train), ("test", test))}
    y_train = torch.as_tensor(np.asarray(train.y), device=device)
    fingerprint = data_fingerprint(train, test)
    path = checkpoint_path(out_dir, config) if out_dir is not None else None
    history, start = [], 0
    if resume and path is not None and os.path.exists(path):
        # on the CPU: the generator state must stay a CPU tensor; load_state_dict
        # moves the rest onto the model's device
        state = torch.load(path, map_location="cpu", weights_only=True)
        _check_resumable(state, config, fingerprint, path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        history, start = state["history"], state["epoch"]
    if path is not None:
        ensure_dir(os.path.dirname(path))

    test_eval = None        # the test evaluation after the latest epoch, reused at the end
    for epoch in range(start, config.epochs):
        phase, lr = config.phase(epoch), config.learning_rate(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr
        label = f"{config.paradigm} seed {config.seed} epoch {epoch + 1}/{config.epochs}"
        n_batches = -(-stores["train"].n // config.batch_size)
        with _Progress(progress, n_batches, label) as bar:
            loss, acc, a_z = _train_epoch(model, optimizer, stores["train"], y_train, phase,
                                          generator, config.batch_size, bar)
        _check_finite(loss, config, epoch)
        test_eval = evaluate(model, stores["test"], test, config.paradigm, config.threshold)
        test_summary = test_eval[0]
        record = {"epoch": epoch + 1, "phase": phase, "lr": lr, "loss": loss,
                  "train_running_accuracy": acc, "train_mean_a_z": a_z,
                  "test_accuracy": test_summary["accuracy"], "test_saif": test_summary["saif"]}
        history.append(record)
        if path is not None:
            state = {"format": CHECKPOINT_FORMAT, "epoch": epoch + 1,
                     "config": _comparable(config), "data": fingerprint,
                     "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                     "generator": generator.get_state(), "history": history}
            with atomic_open(path, "wb") as f:
                torch.save(state, f)
        if callback is not None:
            callback(epoch, record)

    train_summary, train_inst = evaluate(model, stores["train"], train, config.paradigm,
                                         config.threshold)
    test_summary, test_inst = test_eval or evaluate(model, stores["test"], test,
                                                    config.paradigm, config.threshold)
    return _result(config, train_summary, test_summary, history,
                   {"train": train_inst, "test": test_inst}, start)


# ------------------------------------------------------------------ NumPy: linear FCAM
def _linear_evaluate(params, mosaics, paradigm, threshold):
    a = losses.attention(mosaics.X @ params["u"])                         # (N, m)
    return _summarise(a, linear_fcam.predict(params, mosaics.X, paradigm), mosaics, threshold)


def train_numpy_run(config, train, test, out_dir=None, resume=False, progress=True,
                    callback=None):
    """Train the linear FCAM of the NumPy core on vector mosaics (N, m, d).

    Plain mini-batch gradient descent (:func:`minimal_attn.fcam.train`, no
    momentum) from zero parameters, so the focus starts uniform; epoch ``e``
    draws ``ceil(N / batch_size)`` batches from a generator seeded by
    ``(seed, e)``, so a resumed run repeats the uninterrupted one exactly.
    Same result format and checkpoints as :func:`train_run`.
    """
    import json

    n, _, d = train.X.shape
    params = linear_fcam.init_params(d, config.n_classes)
    fingerprint = data_fingerprint(train, test)
    path = checkpoint_path(out_dir, config) if out_dir is not None else None
    history, start = [], 0
    if resume and path is not None and os.path.exists(path):
        with np.load(path) as saved:
            state = json.loads(str(saved["state"]))
            _check_resumable(state, config, fingerprint, path)
            params = {"W": saved["W"].copy(), "u": saved["u"].copy()}
        history, start = state["history"], state["epoch"]
    if path is not None:
        ensure_dir(os.path.dirname(path))
    batch = min(config.batch_size, n)
    steps = -(-n // batch)
    test_eval = None        # the test evaluation after the latest epoch, reused at the end
    for epoch in range(start, config.epochs):
        phase, lr = config.phase(epoch), config.learning_rate(epoch, LINEAR_LR)
        with _Progress(progress, steps, f"{config.paradigm} seed {config.seed} "
                       f"epoch {epoch + 1}/{config.epochs}") as bar:
            params, values = linear_fcam.train(
                params, train.X, train.y, phase, lr, steps, batch_size=batch,
                seed=[config.seed, epoch], callback=lambda step, p, v: bar.update(v))
        a = losses.attention(train.X @ params["u"])
        test_eval = _linear_evaluate(params, test, config.paradigm, config.threshold)
        test_summary = test_eval[0]
        history.append({"epoch": epoch + 1, "phase": phase, "lr": lr,
                        "loss": _check_finite(float(np.mean(values)), config, epoch),
                        "train_mean_a_z": float(np.mean(a[np.arange(n), train.z])),
                        "test_accuracy": test_summary["accuracy"],
                        "test_saif": test_summary["saif"]})
        if path is not None:
            state = {"format": CHECKPOINT_FORMAT, "epoch": epoch + 1,
                     "config": _comparable(config), "data": fingerprint, "history": history}
            with atomic_open(path, "wb") as f:
                np.savez(f, W=params["W"], u=params["u"], state=json.dumps(state))
        if callback is not None:
            callback(epoch, history[-1])
    train_summary, train_inst = _linear_evaluate(params, train, config.paradigm,
                                                 config.threshold)
    test_summary, test_inst = test_eval or _linear_evaluate(params, test, config.paradigm,
                                                            config.threshold)
    return _result(config, train_summary, test_summary, history,
                   {"train": train_inst, "test": test_inst}, start)
