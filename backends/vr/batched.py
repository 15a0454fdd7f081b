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
  fully connected layers, loss and update are batched.

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

#: How the seeds' convolutions run: see the module doc.
MODES = ("loop", "grouped", "grouped_nchw")


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
            ids = range(x.shape[0]) if seeds is None else seeds.tolist()
            h = torch.stack([self.seed_features(x[k], s) for k, s in enumerate(ids)])
        else:
            h = self.grouped_features(x, seeds)                        # (S', n, F)
        return self.head(h, seeds)

    def seed_features(self, x, s):
        """Seed ``s``'s convolutions alone: images (n, 3, H, W) -> features (n, F)."""
        h = x.contiguous(memory_format=torch.channels_last)            # (n, 3, H, W)
        for kind, p in self.plan[:self.cut]:
            if kind == "conv":
                b = self.param(p, "bias", None)
                h = functional.conv2d(h, self.param(p, "weight", None)[s],
                                      None if b is None else b[s])     # (n, c, h, w)
            else:
                h = p(h)                                               # pool, ReLU, flatten
        return h                                                       # (n, F)

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
        ids = range(x.shape[0]) if seeds is None else seeds.tolist()
        for part in x.split(size, dim=1):
            # loop: every net sees a seed's chunk while it is in cache, as in FCAM.run
            feats = [[] for _ in nets]
            for k, s in enumerate(ids):
                for f, net in zip(feats, nets):
                    f.append(net.seed_features(part[k], s))            # (n, F)
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


def stack_fcams(models, mode=None):
    """One :class:`BatchedFCAM` from S :class:`.FCAM` of one architecture (copies the weights).

    ``mode``: one of :data:`MODES` (see the module doc); None: grouped_nchw on CUDA, else loop.
    """
    if not models:
        raise InputError("stack_fcams needs at least one model")
    device = next(models[0].parameters()).device
    mode = mode or ("grouped_nchw" if device.type == "cuda" else "loop")
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
