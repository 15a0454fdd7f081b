r"""Focus and classifier CNNs of Appendix A.2, and the CNN FCAM that joins them.

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. A mosaic is ``m``
images of 3 x 32 x 32. The *focus* CNN f maps each image to a score, the
attention is :math:`a = \mathrm{softmax}(f(x_1), \dots, f(x_m))`, and the
*classifier* CNN g maps an image to C logits:

* SA classifies the attention-weighted average image, :math:`g(\sum_j a_j x_j)`;
* HA and LV classify every segment, :math:`g(x_j)` for j = 1..m.

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

Weights are Xavier-normal, biases zero; the focus has no biases. Its start is
uniform, every score 0 and :math:`a = 1/m`, as the analysis of Sections 3-4
assumes, in one of two ways (``focus_init``):

* ``zero``: the output layer starts at zero. Every gradient below the output
  layer is then zero in the first step, so the focus's hidden layers wait for
  the output layer to grow;
* ``mirror`` (the authors' notebooks): the second half of the last hidden
  layer's rows copies the first half, and the output layer's weights on the
  second half are minus those on the first. The two halves cancel, so the
  output is 0 for every input (up to the rounding of the output layer's sum),
  while every weight is non-zero and every layer learns from the first step.

All segments of a batch go through a network together, reshaped to
(B*m, 3, 32, 32) and cut into chunks of ``chunk`` images: on a GPU one chunk
(the whole batch) is fastest; on a small CPU one huge batch falls out of cache,
so the CPU default :data:`CPU_CHUNK` was chosen by measurement
(``benchmarks/bench_cnn_throughput.py``). Each chunk is channels-last, and
focus and classifier process a chunk one after the other while it is in cache.

:class:`.image_store.ImageStore` keeps a mosaic set on the device for them.
"""

from dataclasses import dataclass, replace
from typing import Tuple

import torch
from torch import nn

from minimal_attn.backends import torch_backend as tb
from minimal_attn.errors import InputError
from minimal_attn.experiments.train_loop import paper_setting

#: Images per network call on the CPU (B*m segments are cut into chunks of this
#: size). Measured on a 2-core CPU with the CIFAR-10 networks: see the module doc.
CPU_CHUNK = 100


@dataclass(frozen=True)
class CNNConfig:
    """One CNN of Appendix A.2: 3 x 3 convolutions, then fully connected layers."""

    conv_channels: Tuple[int, ...] = (32, 64, 64)   # output channels of each conv
    fc_widths: Tuple[int, ...] = (512, 64, 10)      # hidden fully connected widths
    out_dim: int = 1                                # 1 (focus score) or C (class logits)
    bias: bool = True                               # the focus has none (Appendix A.2)
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
    :func:`minimal_attn.experiments.train_loop.paper_setting`, to its learning rates).
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


class ConvNet(nn.Module):
    """A CNN of :class:`CNNConfig`: images (n, 3, 32, 32) -> outputs (n, out_dim)."""

    def __init__(self, config, generator=None):
        super().__init__()
        self.config = config
        layers, channels = [], config.in_channels
        for i, out in enumerate(config.conv_channels):
            layers.append(nn.Conv2d(channels, out, config.kernel, bias=config.bias))
            if i < 2:
                # ReLU is monotone, so pool-then-ReLU equals ReLU-then-pool:
                # the same network, with 4x fewer ReLU evaluations
                layers.append(nn.MaxPool2d(2))
            layers.append(nn.ReLU())
            channels = out
        layers.append(nn.Flatten())
        width = config.flat_size()
        for hidden in config.fc_widths:
            layers += [nn.Linear(width, hidden, bias=config.bias), nn.ReLU()]
            width = hidden
        # registered before the body, so the generator initialises it first
        self.output = nn.Linear(width, config.out_dim, bias=config.bias)
        self.body = nn.Sequential(*layers)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        """Xavier-normal weights, zero biases; then the ``start`` of the output (module doc)."""
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_normal_(module.weight, generator=generator)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        if self.config.start == "zero":
            nn.init.zeros_(self.output.weight)
        elif self.config.start == "mirror":
            self.mirror_last()

    @torch.no_grad()
    def mirror_last(self):
        """The authors' uniform start: the last hidden layer's halves cancel in the output.

        Units k..2k-1 of the last hidden layer (width h, k = h // 2) copy units
        0..k-1, and the output weights on them are the negatives of those on
        0..k-1, so the output is 0 in exact arithmetic (a unit left over when h
        is odd gets output weight 0). Needs at least one hidden fully connected layer.
        """
        hidden = [layer for layer in self.body if isinstance(layer, nn.Linear)]
        if not hidden or hidden[-1].out_features < 2:
            raise InputError("focus_init=mirror needs a hidden fully connected layer of "
                             "at least 2 units", param="focus_init")
        last, k = hidden[-1], hidden[-1].out_features // 2
        last.weight[k:2 * k] = last.weight[:k]                          # (k, width)
        if last.bias is not None:
            last.bias[k:2 * k] = last.bias[:k]
        self.output.weight[:, k:2 * k] = -self.output.weight[:, :k]     # (out, k)
        self.output.weight[:, 2 * k:] = 0.0
        if self.output.bias is not None:
            self.output.bias.zero_()

    def forward(self, images):
        return self.output(self.body(images))                            # (n, out_dim)


class FCAM(nn.Module):
    r"""CNN focus-classify attention model on mosaics (B, m, 3, 32, 32).

    ``forward(X, paradigm)`` returns ``(scores, logits)``: scores (B, m) and
    logits (B, C) of :math:`g(\sum_j a_j x_j)` for ``sa``, (B, m, C) of
    :math:`g(x_j)` for ``ha``/``lv`` (a hybrid caller passes its phase).
    ``log_attention`` (B, m) replaces the focus by a fixed one (Section 3).
    """

    def __init__(self, focus, classifier, chunk=None):
        super().__init__()
        self.focus = focus
        self.classifier = classifier
        self.chunk = chunk            # images per network call; None: by device

    def _chunk_size(self, n, device):
        if self.chunk is not None:
            return max(1, int(self.chunk))
        return n if device.type == "cuda" else CPU_CHUNK

    def run(self, images, *nets):
        """Each of ``nets`` on images (n, 3, 32, 32), chunk by chunk; one output per net.

        All nets see a chunk while it is in cache; the chunk is made
        channels-last, the layout oneDNN and cuDNN convolve fastest.
        """
        size = self._chunk_size(images.shape[0], images.device)
        outs = [[] for _ in nets]
        for part in images.split(size):
            part = part.contiguous(memory_format=torch.channels_last)
            for out, net in zip(outs, nets):
                out.append(net(part))
        return [o[0] if len(o) == 1 else torch.cat(o) for o in outs]

    def scores(self, X):
        """Focus scores f(x_j), (B, m)."""
        B, m = X.shape[:2]
        flat = X.reshape((B * m,) + X.shape[2:])                          # (B*m, 3, 32, 32)
        return self.run(flat, self.focus)[0].reshape(B, m)                # (B, m)

    def segment_logits(self, X):
        """Classifier logits of every segment, g(x_j): (B, m, C)."""
        B, m = X.shape[:2]
        flat = X.reshape((B * m,) + X.shape[2:])                          # (B*m, 3, 32, 32)
        return self.run(flat, self.classifier)[0].reshape(B, m, -1)       # (B, m, C)

    def forward(self, X, paradigm, log_attention=None):
        if paradigm == "sa":
            scores = self.scores(X) if log_attention is None else log_attention
            a = tb.attention(scores)                                      # (B, m)
            x_tilde = torch.einsum("bm,bmchw->bchw", a, X)                # (B, 3, 32, 32)
            return scores, self.run(x_tilde, self.classifier)[0]          # (B, C)
        if paradigm not in ("ha", "lv"):
            raise InputError(f"FCAM.forward needs a loss paradigm sa, ha or lv, got "
                             f"{paradigm!r} (resolve hybrid with losses.phase)")
        if log_attention is not None:
            return log_attention, self.segment_logits(X)                  # (B, m, C)
        B, m = X.shape[:2]
        flat = X.reshape((B * m,) + X.shape[2:])                          # (B*m, 3, 32, 32)
        scores, logits = self.run(flat, self.focus, self.classifier)
        return scores.reshape(B, m), logits.reshape(B, m, -1)             # (B, m), (B, m, C)

    @torch.no_grad()
    def predict(self, X, paradigm):
        """(scores (B, m), class scores s (B, C)) by the paradigm's inference rule.

        HA (and hybrid) classify only the most-attended segment, which equals
        :func:`torch_backend.infer_ha` on all segments at 1/m of the cost.
        """
        scores = self.scores(X)
        if paradigm == "sa":
            return scores, tb.infer_sa(self.forward(X, "sa", scores)[1])
        if paradigm in ("ha", "hybrid"):
            top = scores.argmax(dim=1)                                    # (B,)
            chosen = X[torch.arange(X.shape[0], device=X.device), top]    # (B, 3, 32, 32)
            return scores, tb.softmax(self.run(chosen, self.classifier)[0])
        return scores, tb.infer_lv(scores, self.segment_logits(X))


def build_fcam_for(config, device="cpu", seed=None):
    """The FCAM of a :class:`~minimal_attn.experiments.train_loop.TrainConfig`: its dataset,
    C, width, focus start and classifier, initialised from ``seed`` (None: ``config.seed``)."""
    return build_fcam(config.dataset, config.n_classes,
                      config.seed if seed is None else seed, config.chunk, device,
                      scaled(focus_config(config.dataset, config.focus_init), config.width),
                      scaled(classifier_config(config.dataset, config.n_classes,
                                               config.classifier), config.width))


def build_fcam(dataset="cifar10", n_classes=3, seed=0, chunk=None, device="cpu",
               focus_cfg=None, classifier_cfg=None):
    """A fresh :class:`FCAM` of Appendix A.2, initialised from ``seed`` (CPU generator).

    The initial weights depend only on ``seed``, not on the device or on
    global torch RNG state. ``focus_cfg``/``classifier_cfg`` override the
    architectures (e.g. narrower networks for quick tests).
    """
    generator = torch.Generator().manual_seed(int(seed))
    focus = ConvNet(focus_cfg or focus_config(dataset), generator)
    classifier_cfg = classifier_cfg or classifier_config(dataset, n_classes)
    classifier = ConvNet(replace(classifier_cfg, out_dim=int(n_classes)), generator)
    return FCAM(focus, classifier, chunk).to(device, memory_format=torch.channels_last)
