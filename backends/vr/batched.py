r"""S seeds of one paradigm's CNN FCAM trained as ONE model with a leading seed dimension.

Vashisht & Ramaswamy (2023), Section 5 and Appendix A.2: Table 1 averages 12
seeds per paradigm. :func:`stack_fcams` turns S ordinary FCAMs
(:func:`.models.build_fcam`) into one :class:`BatchedFCAM` whose every
parameter carries a leading seed axis, (S, ...); :func:`unstack` gives back one
``state_dict`` per seed, loadable into ``build_fcam`` models, so checkpoints
stay per seed. Each seed sees its own mini-batch: inputs (S, B, m, 3, 32, 32),
scores (S, B, m), logits (S, B, C) for SA and (S, B, m, C) for HA/LV.

**Why the runs stay separate.** The loss to backprop is the *sum* over seeds of
each seed's batch-mean loss, :math:`\sum_s L_s(\theta_s)`. Seed s's parameters
enter only :math:`L_s`, so :math:`\partial/\partial\theta_s` of the sum is
:math:`\nabla L_s(\theta_s)`, the gradient of the separate run. SGD with momentum
(:class:`.stacked_optimizers.StackedSGD`, torch's update :math:`b \leftarrow \mu b + g`,
:math:`\theta \leftarrow \theta - \eta b`) is elementwise, so one step over the
stacked parameters is S separate steps, each with its own learning rate.

Adam is elementwise too, with a step count and a learning rate per seed, so the
same holds for the authors' optimizer. The stacked optimizers are in
:mod:`.stacked_optimizers`.

**How the seeds are batched** (``mode``; measured by
``benchmarks/bench_batched_seeds.py``):

* ``grouped_nchw`` (GPU default) and ``grouped``: one grouped convolution per
  layer, one group per seed, the S*B*m images of a step in one kernel call, in
  torch's default layout or channels-last as :class:`.FCAM`. cuDNN's grouped
  kernels differ by layout: on an H200, 12 seeds at m = 5 ran 2.9x faster than
  sequential runs in NCHW and 1.5x in channels-last, hence the default. Fully
  connected layers are batched matmuls (``torch.baddbmm``).
  ``torch.func.vmap`` over ``functional_call`` lowers convolutions to the same
  grouped convolutions, with more dispatch overhead, so it is not used.
* ``loop`` (CPU default): on the CPU oneDNN's grouped 3-channel first layer is
  about 6x slower than S ordinary ones, so each seed's convolutions run on their
  own (in cache-sized chunks, as :class:`.models.FCAM` does) and only the
  fully connected layers, loss and update are batched. The seeds are taken
  from the stacked weights by tensor indexing, never read on the host, so a
  step in this mode can be captured in a CUDA graph (``TrainConfig.compile``),
  which removes the cost of its S times more launches.
* ``unfold``: each convolution as one batched matrix product over the seeds,
  ``torch.bmm`` of the (S, n*h*w, c_in*k*k) image patches (im2col, a strided
  view copied once) with the (S, c_in*k*k, c) weights, activations
  channels-last between layers. It trades the grouped kernels for the
  matrix-multiply kernels (tensor cores under TF32 or bf16) at the price of
  the patches' memory, k*k times a layer's input.

Hybrid seeds may be in different phases in one epoch (an automatic switch
chooses per seed): :meth:`BatchedFCAM.forward` takes the seeds it runs, and
:class:`BatchedSeeds` groups a step's seeds by phase.
"""

import torch
from torch import nn
from torch.nn import functional

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.models import CPU_CHUNK
from minimal_attn.errors import InputError
from minimal_attn.experiments.train_loop import CONV_MODES

#: How the seeds' convolutions run: see the module doc (``TrainConfig.conv_mode``).
MODES = CONV_MODES


def _key(name):
    return name.replace(".", "_")                 # ParameterDict keys may not hold dots


def _float32(parts):
    """The chunks' outputs joined, at least float32: under bfloat16 autocast
    (``TrainConfig.precision``) the softmaxes and losses that follow run in float32."""
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
    return out.float() if out.dtype in (torch.bfloat16, torch.float16) else out


class BatchedConvNet(nn.Module):
    """S :class:`.models.ConvNet` of one config: images (S, n, 3, H, W) -> (S, n, out)."""

    def __init__(self, nets, mode="loop"):
        super().__init__()
        if len({n.config for n in nets}) != 1:
            raise InputError("stack_fcams needs models of one architecture (same config)")
        self.config, self.mode = nets[0].config, mode
        self.names = [name for name, _ in nets[0].named_parameters()]
        self.stacked = nn.ParameterDict({_key(name): nn.Parameter(torch.stack(
            [dict(n.named_parameters())[name].detach() for n in nets]).clone())
            for name in self.names})                                   # each (S, ...)
        # the layers in order: (kind, parameter prefix or the stateless module)
        self.plan = []
        for prefix, module in [(f"body.{i}", mod) for i, mod in enumerate(nets[0].body)] + \
                [("output", nets[0].output)]:
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                if isinstance(module, nn.Conv2d) and (module.stride != (1, 1)
                                                      or module.padding != (0, 0)):
                    raise InputError("BatchedConvNet handles unit-stride unpadded convolutions")
                self.plan.append(("conv" if isinstance(module, nn.Conv2d) else "linear",
                                  prefix))
            elif isinstance(module, (nn.MaxPool2d, nn.ReLU, nn.Flatten)):
                self.plan.append(("flatten" if isinstance(module, nn.Flatten) else "map",
                                  module))
            else:
                raise InputError(f"BatchedConvNet cannot stack a {type(module).__name__}")

        self.cut = [kind for kind, _ in self.plan].index("flatten") + 1   # convs | fc layers

    def param(self, prefix, what, seeds):
        """The stacked ``prefix.what`` of ``seeds`` (all if None): (S', ...) or None."""
        p = self.stacked[_key(f"{prefix}.{what}")] if f"{prefix}.{what}" in self.names else None
        return p if p is None or seeds is None else p.index_select(0, seeds)

    def forward(self, x, seeds=None):
        """Images (S', n, 3, H, W) of ``seeds`` (None: all S) -> outputs (S', n, out)."""
        if self.mode == "loop":
            convs = self.conv_params(seeds)
            h = torch.stack([self.seed_features(x_k, convs, k)
                             for k, x_k in enumerate(x.unbind(0))])
        elif self.mode == "unfold":
            h = self.unfold_features(x, seeds)
        else:
            h = self.grouped_features(x, seeds)                        # (S', n, F)
        return self.head(h, seeds)

    def conv_params(self, seeds):
        """Per convolution, the weights and biases (or None) of ``seeds`` (None: all), one
        tensor per lane. Selected on the device (no seed index is read on the host) and
        split by ``unbind``, whose backward is one ``stack`` per parameter (indexing each
        lane would add S zero-filled stacked gradients)."""
        out = []
        for kind, p in self.plan[:self.cut]:
            if kind == "conv":
                w, b = self.param(p, "weight", seeds), self.param(p, "bias", seeds)
                out.append((w.unbind(0), [None] * w.shape[0] if b is None else b.unbind(0)))
        return out

    def seed_features(self, x, convs, k):
        """Lane ``k``'s convolutions (``convs`` from :meth:`conv_params`) alone: images
        (n, 3, H, W) -> features (n, F)."""
        h = x.contiguous(memory_format=torch.channels_last)            # (n, 3, H, W)
        layers = iter(convs)
        for kind, p in self.plan[:self.cut]:
            if kind == "conv":
                w, b = next(layers)
                h = functional.conv2d(h, w[k], b[k])                   # (n, c, h, w)
            else:
                h = p(h)                                               # pool, ReLU, flatten
        return h                                                       # (n, F)

    def unfold_features(self, x, seeds):
        """Each convolution one ``bmm`` over the seeds (im2col): (S', n, 3, H, W) -> (S', n, F).

        A layer's patches ``h.unfold`` (a view) are copied once into (S', n*h*w, c_in*k*k),
        in the weights' (c_in, k, k) order; the product comes out (S', n*h*w, c), i.e.
        channels-last, and is handed on as an (S'*n, c, h, w) view with those strides,
        which pooling and ReLU keep."""
        S, n = x.shape[:2]
        h = x.reshape((S * n,) + x.shape[2:])                          # (S*n, 3, H, W)
        for kind, p in self.plan[:self.cut]:
            if kind == "conv":
                w, b = self.param(p, "weight", seeds), self.param(p, "bias", seeds)
                c, k = w.shape[1], w.shape[-1]                         # w (S, c, c_in, k, k)
                rows, cols = h.shape[2] - k + 1, h.shape[3] - k + 1
                patches = h.unfold(2, k, 1).unfold(3, k, 1)      # (S*n, c_in, rows, cols, k, k)
                patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(S, n * rows * cols, -1)
                w_t = w.reshape(S, c, -1).transpose(1, 2)              # (S, c_in*k*k, c)
                out = torch.bmm(patches, w_t) if b is None else \
                    torch.baddbmm(b[:, None, :], patches, w_t)         # (S, n*rows*cols, c)
                h = out.view(S * n, rows, cols, c).permute(0, 3, 1, 2)  # channels-last view
            elif kind == "flatten":
                h = h.reshape(S, n, -1)                                # (S, n, c*h*w)
            else:
                h = p(h)                                               # pool, ReLU
        return h

    def grouped_features(self, x, seeds):
        """One grouped convolution per layer, one group per seed: (S', n, ...) -> (S', n, F)."""
        S, n = x.shape[:2]
        h = x.transpose(0, 1).reshape((n, -1) + x.shape[3:])           # (n, S*3, H, W)
        h = h.contiguous(memory_format=torch.contiguous_format if self.mode == "grouped_nchw"
                         else torch.channels_last)
        for kind, p in self.plan[:self.cut]:
            if kind == "conv":
                w, b = self.param(p, "weight", seeds), self.param(p, "bias", seeds)
                h = functional.conv2d(h, w.reshape((-1,) + w.shape[2:]),  # (S*c, c_in, 3, 3)
                                      None if b is None else b.reshape(-1),
                                      groups=S)                        # (n, S*c, h, w)
            elif kind == "flatten":
                h = h.reshape(n, S, -1).transpose(0, 1)                # (S, n, c*h*w)
            else:
                h = p(h)                                               # pool, ReLU
        return h

    def head(self, h, seeds):
        """The fully connected layers, batched matmuls: features (S', n, F) -> (S', n, out).

        The activations run transposed, (S', F, n), and each layer is ``w @ h``: so
        each weight's gradient, ``dh @ h^T``, comes out in the weight's own layout
        (S', out, in), and autograd does not copy it into that layout (one copy per
        weight and step with ``h @ w^T``)."""
        h = h.transpose(1, 2)                                          # (S', F, n)
        for kind, prefix in self.plan[self.cut:]:
            if kind == "linear":
                w, b = self.param(prefix, "weight", seeds), self.param(prefix, "bias", seeds)
                h = torch.bmm(w, h) if b is None else \
                    torch.baddbmm(b[:, :, None], w, h)                 # (S', out, n)
            else:
                h = prefix(h)                                          # ReLU
        return h.transpose(1, 2)                                       # (S', n, out)


class BatchedFCAM(nn.Module):
    r"""S CNN FCAMs on mosaics (S, B, m, 3, 32, 32); the batched twin of :class:`.FCAM`.

    ``forward(X, paradigm, seeds=None)`` returns scores (S', B, m) and logits
    (S', B, C) of :math:`g(\sum_j a_j x_j)` for ``sa``, (S', B, m, C) for
    ``ha``/``lv``; ``seeds`` (a LongTensor of seed indices, None: all S) picks
    the seeds whose parameters run, X holding their mosaics.
    """

    def __init__(self, focus, classifier, chunk=None):
        super().__init__()
        self.focus, self.classifier, self.chunk = focus, classifier, chunk
        self.n_seeds = next(iter(focus.stacked.values())).shape[0]

    def run(self, x, seeds, *nets):
        """Each of ``nets`` on images (S', n, 3, H, W), in chunks of n; one output per net
        (float32 or float64, also under autocast)."""
        if self.chunk is not None:
            size = max(1, int(self.chunk))
        elif x.device.type == "cuda":
            size = x.shape[1]
        else:   # grouped: S images per kernel call per image index, so S times fewer
            size = CPU_CHUNK if self.focus.mode == "loop" else max(1, CPU_CHUNK // x.shape[0])
        outs = [[] for _ in nets]
        if self.focus.mode != "loop":
            for part in x.split(size, dim=1):
                for out, net in zip(outs, nets):
                    out.append(net(part, seeds))
            return [_float32(o) for o in outs]
        convs = [net.conv_params(seeds) for net in nets]
        for part in x.split(size, dim=1):
            # loop: every net sees a seed's chunk while it is in cache, as in FCAM.run
            feats = [[] for _ in nets]
            for k, part_k in enumerate(part.unbind(0)):
                for f, net, c in zip(feats, nets, convs):
                    f.append(net.seed_features(part_k, c, k))          # (n, F)
            for out, f, net in zip(outs, feats, nets):
                out.append(net.head(torch.stack(f), seeds))            # (S', n, out)
        return [_float32(o) for o in outs]

    def forward(self, X, paradigm, seeds=None):
        S, B, m = X.shape[:3]
        flat = X.reshape((S, B * m) + X.shape[3:])                     # (S, B*m, 3, 32, 32)
        if paradigm == "sa":
            scores = self.run(flat, seeds, self.focus)[0].reshape(S, B, m)
            x_tilde = torch.einsum("sbm,sbmchw->sbchw", tb.attention(scores), X)
            return scores, self.run(x_tilde, seeds, self.classifier)[0]   # (S, B, C)
        if paradigm not in ("ha", "lv"):
            raise InputError(f"BatchedFCAM.forward needs a loss paradigm sa, ha or lv, got "
                             f"{paradigm!r} (resolve hybrid with losses.phase)")
        scores, logits = self.run(flat, seeds, self.focus, self.classifier)
        return scores.reshape(S, B, m), logits.reshape(S, B, m, -1)    # (S, B, m), (S, B, m, C)

    @torch.no_grad()
    def predict(self, X, paradigm, seeds=None):
        """Scores (S', B, m) and class scores s (S', B, C) by the rule, as FCAM.predict."""
        S, B, m = X.shape[:3]
        flat = X.reshape((S, B * m) + X.shape[3:])
        scores = self.run(flat, seeds, self.focus)[0].reshape(S, B, m)  # (S, B, m)
        if paradigm == "sa":
            x_tilde = torch.einsum("sbm,sbmchw->sbchw", tb.attention(scores), X)
            return scores, tb.infer_sa(self.run(x_tilde, seeds, self.classifier)[0])
        if paradigm in ("ha", "hybrid"):
            top = scores.argmax(dim=2)                                 # (S, B)
            s_idx = torch.arange(S, device=X.device)[:, None]
            chosen = X[s_idx, torch.arange(B, device=X.device), top]   # (S, B, 3, 32, 32)
            return scores, tb.softmax(self.run(chosen, seeds, self.classifier)[0])
        logits = self.run(flat, seeds, self.classifier)[0].reshape(S, B, m, -1)
        return scores, torch.stack([tb.infer_lv(scores[k], logits[k]) for k in range(S)])


def default_mode(device):
    """The mode seeds on ``device`` (a torch.device or its name) run in when none is
    asked for: grouped_nchw on CUDA (the fastest measured there), else loop."""
    return "grouped_nchw" if str(device).startswith("cuda") else "loop"


def stack_fcams(models, mode=None):
    """One :class:`BatchedFCAM` from S :class:`.FCAM` of one architecture (copies the weights).

    ``mode``: one of :data:`MODES` (see the module doc); None: :func:`default_mode`.
    """
    if not models:
        raise InputError("stack_fcams needs at least one model")
    device = next(models[0].parameters()).device
    mode = mode or default_mode(device)
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}", param="mode")
    return BatchedFCAM(BatchedConvNet([m.focus for m in models], mode),
                       BatchedConvNet([m.classifier for m in models], mode), models[0].chunk)


def parameter_names(batched):
    """The FCAM parameter names in ``FCAM.parameters()`` order (the optimiser's indices)."""
    return [f"{part}.{name}" for part in ("focus", "classifier")
            for name in getattr(batched, part).names]


def stacked_parameters(batched):
    """The stacked (S, ...) parameters in :func:`parameter_names` order."""
    return [getattr(batched, part).stacked[_key(name)] for part in ("focus", "classifier")
            for name in getattr(batched, part).names]


def unstack(batched):
    """One FCAM ``state_dict`` per seed (detached copies), loadable into ``build_fcam`` models."""
    pairs = list(zip(parameter_names(batched), stacked_parameters(batched)))
    return [{name: p[s].detach().clone() for name, p in pairs}
            for s in range(batched.n_seeds)]
