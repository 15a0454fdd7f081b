r"""Where torch runs: the device resolver, CPU threads, a guarded optimizer step and a safe
checkpoint reader, shared by the V&R and Snell torch modules (and re-exported by
:mod:`.torch_backend`, so ``tb.get_device`` works as before)."""

import torch

from minimal_attn.errors import DivergedError, InputError, check_int_at_least


def get_device(name=None, param=None):
    """The torch device to run on: CUDA when available, else the CPU.

    The one device resolver of the torch modules (V&R and Snell alike).

    Parameters
    ----------
    name : str or None
        ``None`` or ``"auto"`` picks ``cuda`` if torch sees a GPU, else ``cpu``.
        An explicit ``"cpu"``, ``"cuda"`` or ``"cuda:K"`` is checked: an
        unknown name or a GPU that is not there raises :class:`InputError`.
    param : the option the error names (``"device"``), passed to :class:`InputError`
    """
    if name is None or str(name).strip().lower() in ("", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    text = str(name).strip().lower()
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise InputError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:K",
                         param=param) from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise InputError(f"unsupported device {name!r}: use auto, cpu, cuda or cuda:K",
                         param=param)
    if not torch.cuda.is_available():
        raise InputError(f"device {name!r} requested but torch sees no CUDA GPU; "
                         "use --device cpu (or auto)", param=param)
    index = 0 if device.index is None else device.index
    if index >= torch.cuda.device_count():
        raise InputError(f"device {name!r} requested but only {torch.cuda.device_count()} "
                         "CUDA device(s) exist", param=param)
    return device


def set_threads(threads, param="threads"):
    """Give torch ``threads`` CPU threads in this process (None: leave torch's setting).

    The one place the commands' ``--threads`` and the configs' ``threads`` act; 1 is the
    fastest on a busy machine (each of its runs otherwise takes every core).
    """
    if threads is not None:
        torch.set_num_threads(check_int_at_least("threads", threads, 1, param=param))


def optimizer_step(optimizer, step):
    """``optimizer.step()``, refusing an update that overflows as a divergence at ``step``.

    An lr near float32's largest number makes Adam's update overflow inside
    torch (a RuntimeError); the trainers report it like any other divergence.
    """
    try:
        optimizer.step()
    except RuntimeError as exc:
        if "overflow" not in str(exc):
            raise
        raise DivergedError(f"training diverged at step {step} (the update overflows); "
                            "lower --lr", param="lr") from None


def read_torch(path):
    """A torch checkpoint as plain tensors and containers, on the CPU (never unpickles code);
    for :func:`minimal_attn.experiments.checkpoints.load_guarded`."""
    return torch.load(path, map_location="cpu", weights_only=True)
