r"""Focus and classifier CNNs of Appendix A.2, and the CNN FCAM that joins them.

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2. A mosaic is ``m``
images of 3 x 32 x 32. The *focus* CNN f maps each image to a score, the
attention is :math:`a = \mathrm{softmax}(f(x_1), \dots, f(x_m))`, and the
*classifier* CNN g maps an image to C logits:

* SA classifies the attention-weighted average image, :math:`g(\sum_j a_j x_j)`;
* HA and LV classify every segment, :math:`g(x_j)` for j = 1..m.

Architectures: :mod:`.architectures` (Appendix A.2 and the authors' LeNet).

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
  while every weight is non-zero. The mirrored halves' backward signals cancel too,
  so in the first step only the last two layers move (below them the gradient is
  rounding noise); from the second step every layer learns.

All segments of a batch go through a network together, reshaped to
(B*m, 3, 32, 32) and cut into chunks of ``chunk`` images: on a GPU one chunk
(the whole batch) is fastest; on a small CPU one huge batch falls out of cache,
so the CPU default :data:`CPU_CHUNK` was chosen by measurement
(``benchmarks/bench_cnn_throughput.py``). Each chunk is channels-last, and
focus and classifier process a chunk one after the other while it is in cache.

:class:`.image_store.ImageStore` keeps a mosaic set on the device for them.
"""

from dataclasses import replace

import torch
from torch import nn

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.architectures import (  # noqa: F401 (re-exported)
    ARCHITECTURES,
    CLASSIFIERS,
    FOCUS_STARTS,
    LENET,
    CNNConfig,
    architecture,
    classifier_config,
    focus_config,
    scaled,
)
from minimal_attn.errors import InputError

#: Images per network call on the CPU (B*m segments are cut into chunks of this
#: size). Measured on a 2-core CPU with the CIFAR-10 networks: see the module doc.
CPU_CHUNK = 100


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
