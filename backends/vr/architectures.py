r"""The architectures of Appendix A.2's CNNs and of the authors' LeNet, as configs.

Vashisht & Ramaswamy (2023), Appendix A.2 and the authors' released code
(``../shared/papers/authors-code-notes.md``). :class:`.models.ConvNet` builds a
network from a :class:`CNNConfig`.

Architectures (ReLU, 2 x 2 max-pooling after the first two convolutions):

=========  =========================  ===========================
dataset    focus f                    classifier g ("paper")
=========  =========================  ===========================
CIFAR-10   3 conv3x3 (32, 64, 64) +   3 conv3x3 (32, 64, 64) +
           4 fc (512, 64, 10, 1)      4 fc (512, 64, 10, C)
CIFAR-100  2 conv3x3 (32, 64) +       3 conv3x3 (32, 64, 64) +
           2 fc (64, 1)               3 fc (512, 64, C)
=========  =========================  ===========================

The layer counts are those of Appendix A.2. The widths of the focus are those
of the authors' released code; the paper's classifier widths were not at hand,
so the "paper" classifier reuses the focus's. ``classifier="lenet"`` is the
classifier of the authors' released CIFAR-10 notebooks
(``../shared/papers/authors-code-notes.md``): conv5x5 3->6, pool, conv5x5
6->16, pool, fc 400->120->84->10->C.
"""

from dataclasses import dataclass, replace
from typing import Tuple

from minimal_attn.datasets.splits import paper_setting
from minimal_attn.errors import InputError


@dataclass(frozen=True)
class CNNConfig:
    """One CNN of Appendix A.2: 3 x 3 convolutions, then fully connected layers."""

    conv_channels: Tuple[int, ...] = (32, 64, 64)   # output channels of each conv
    fc_widths: Tuple[int, ...] = (512, 64, 10)      # hidden fully connected widths
    out_dim: int = 1                                # 1 (focus score) or C (class logits)
    bias: bool = True                               # the focus has none (authors' code)
    start: str = "xavier"                           # xavier; zero or mirror: output 0
    kernel: int = 3                                 # convolution size (LeNet: 5)
    in_channels: int = 3
    image_size: int = 32

    def flat_size(self):
        """Features entering the first fully connected layer."""
        size = self.image_size
        for i in range(len(self.conv_channels)):
            size -= self.kernel - 1                  # unpadded convolution
            if i < 2:
                size //= 2                           # 2x2 max-pool after the first two
        if size < 1:
            raise InputError(f"images of size {self.image_size} are too small for "
                             f"{len(self.conv_channels)} convolutions")
        return self.conv_channels[-1] * size * size


#: (conv channels, hidden fc widths) per dataset and network.
ARCHITECTURES = {
    "cifar10": {"focus": ((32, 64, 64), (512, 64, 10)),
                "classifier": ((32, 64, 64), (512, 64, 10))},
    "cifar100": {"focus": ((32, 64), (64,)),
                 "classifier": ((32, 64, 64), (512, 64))},
}
#: The authors' released CIFAR-10 classifier (a LeNet): 5x5 convolutions.
LENET = {"conv_channels": (6, 16), "fc_widths": (120, 84, 10), "kernel": 5}
CLASSIFIERS = ("paper", "lenet")
FOCUS_STARTS = ("zero", "mirror")


def architecture(dataset):
    """The Appendix A.2 networks of ``dataset``; synthetic images use CIFAR-10's.

    The one place that maps a data set to its networks (and, through
    :func:`minimal_attn.datasets.splits.paper_setting`, to its learning rates).
    """
    return ARCHITECTURES[paper_setting(dataset)]


def focus_config(dataset="cifar10", start="zero"):
    """The focus CNN of Appendix A.2 for ``dataset``: no biases, output 0 at the start.

    ``start``: ``zero`` (output layer at zero) or ``mirror`` (the authors' start;
    see the module doc).
    """
    if start not in FOCUS_STARTS:
        raise InputError(f"focus_init must be one of {', '.join(FOCUS_STARTS)}, got "
                         f"{start!r}", param="focus_init")
    conv, fc = architecture(dataset)["focus"]
    return CNNConfig(conv, fc, out_dim=1, bias=False, start=start)


def classifier_config(dataset="cifar10", n_classes=3, kind="paper"):
    """The classifier CNN for ``dataset`` with ``n_classes`` outputs.

    ``kind``: ``paper`` (Appendix A.2's layer counts) or ``lenet`` (the
    authors' released notebooks, :data:`LENET`, for any data set).
    """
    if kind not in CLASSIFIERS:
        raise InputError(f"classifier must be one of {', '.join(CLASSIFIERS)}, got "
                         f"{kind!r}", param="classifier")
    if kind == "lenet":
        return CNNConfig(out_dim=int(n_classes), bias=True, **LENET)
    conv, fc = architecture(dataset)["classifier"]
    return CNNConfig(conv, fc, out_dim=int(n_classes), bias=True)


#: Width scaling never takes a convolution below this many channels, nor a
#: fully connected layer below min(its paper width, MIN_FC) units.
MIN_CHANNELS, MIN_FC = 8, 64


def scaled(config, width=1.0):
    """``config`` with its hidden widths times ``width``; the narrow layers keep their width.

    ``width=1`` is Appendix A.2; smaller widths make quick CPU runs and tests.
    Convolutions scale but keep at least MIN_CHANNELS channels; a fully
    connected layer keeps at least min(paper width, MIN_FC) units, so the
    narrow last hidden layers (64 and 10 units in CIFAR-10's networks) keep the
    paper's width: at width 0.25 a 10-unit layer shrunk to 2 units started with
    both units dead on some seeds, and the bias-free focus never recovers.
    """
    if width == 1.0:
        return config
    if not width > 0:
        raise InputError(f"width must be > 0, got {width}", param="width")
    conv = tuple(max(min(c, MIN_CHANNELS), round(c * width)) for c in config.conv_channels)
    fc = tuple(max(min(f, MIN_FC), round(f * width)) for f in config.fc_widths)
    return replace(config, conv_channels=conv, fc_widths=fc)
