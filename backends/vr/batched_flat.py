r"""Stacked (S, ...) parameters as views into one flat buffer, for whole-buffer optimiser steps.

Used by :mod:`.stacked_optimizers` (the seeds of :class:`.batched.BatchedFCAM`,
Vashisht & Ramaswamy 2023, Appendix A.2). An elementwise optimiser step over
P parameters costs several operators per parameter, each a kernel launch on a
GPU; with every parameter a view into one contiguous buffer (per device and
dtype), and the optimiser state laid out the same way, a step is a handful of
operators over the whole buffer, whatever P is.

Layout: seed by seed, a buffer (S, P): row s holds seed s's slice of every
parameter, parameter i at columns ``offsets[i]`` onwards, each start rounded up
to :data:`ALIGN` elements so that every view starts on a 256-byte boundary
(vectorised GPU kernels need aligned starts); the gaps hold zeros and keep them,
since their gradient is zero. A per-seed factor (S,) then reaches every element
of its seed by broadcasting, (S, 1) against (S, P), with no per-element copy.
Parameter i is the view ``flat[:, off:off + k]`` reshaped to (S, ...): its seed
stride is P, so where a model merges the seed axis with the next one (the
grouped convolutions' weights) ``reshape`` copies that (small) weight.

The parameters stay the same Python objects (the model keeps its references):
their ``.data`` is moved into the buffer. Their gradients come from autograd as
usual, contiguous (S, ...), and are gathered into the layout by one ``cat``
along the per-seed axis per step.
"""

import torch

from minimal_attn.errors import InputError

#: Every parameter's view starts at a multiple of this many elements.
ALIGN = 64


class FlatGroup:
    """The parameters of one (device, dtype) in one buffer ``flat`` (S, P), seed by seed."""

    def __init__(self, params, n_seeds):
        self.params, S = params, n_seeds
        self.offsets, total = [], 0
        for p in params:
            if p.shape[0] != S:
                raise InputError(f"stacked parameters need a leading seed axis of {S}, "
                                 f"got shape {tuple(p.shape)}")
            self.offsets.append(total)
            total += -(-(p.numel() // S) // ALIGN) * ALIGN
        p0 = params[0]
        self.flat = torch.zeros(S, total, device=p0.device, dtype=p0.dtype)   # (S, P)
        self.pieces = []                  # (offset, numel per seed, shape) per parameter
        for p, off in zip(params, self.offsets):
            k = p.numel() // S
            view = self.flat[:, off:off + k].view(p.shape)      # seed stride P, not k
            with torch.no_grad():
                view.copy_(p)
            p.data = view                 # the parameter now lives in the flat buffer
            self.pieces.append((off, k, p.shape))
        self.gaps = [nxt - off - k for (off, k, _), nxt in
                     zip(self.pieces, self.offsets[1:] + [total])]
        # zeros for the gaps when gathering gradients, made once (no allocation in a step)
        self.zeros = {size: self.flat.new_zeros(S, size) for size in set(self.gaps) if size}

    def new(self):
        """A zero buffer of the flat layout (optimiser state), (S, P)."""
        return torch.zeros_like(self.flat)

    def views(self, buffer):
        """``buffer`` (S, P) cut into the parameters' shapes: one view per parameter."""
        return [buffer[:, off:off + k].view(shape) for off, k, shape in self.pieces]

    def gather_grads(self):
        """The parameters' gradients in the flat layout (S, P), zeros in the gaps: one
        ``cat`` along the per-seed axis (each gradient is (S, ...), contiguous)."""
        parts = []
        for p, size in zip(self.params, self.gaps):
            parts.append(p.grad.reshape(p.shape[0], -1))                  # (S, k)
            if size:
                parts.append(self.zeros[size])
        return torch.cat(parts, dim=1)                                    # (S, P)

    @staticmethod
    def per_seed(factors):
        """Per-seed factors (rows, S) -> (rows, S, 1), broadcasting over each seed's row."""
        return factors[..., None]


class FlatParams:
    """Stacked (S, ...) parameters re-homed into one :class:`FlatGroup` per (device, dtype)."""

    def __init__(self, params):
        self.params = list(params)
        if not self.params:
            raise InputError("a stacked optimiser needs at least one parameter")
        self.n_seeds = self.params[0].shape[0]
        keys = {}
        for p in self.params:
            keys.setdefault((p.device, p.dtype), []).append(p)
        self.groups = [FlatGroup(ps, self.n_seeds) for ps in keys.values()]
        where = {id(p): (g, k) for g, group in enumerate(self.groups)
                 for k, p in enumerate(group.params)}
        self.where = [where[id(p)] for p in self.params]   # param index -> (group, slot)

    def has_grads(self):
        """True when every parameter has a gradient, False when none has (an error else:
        a step over the flat buffer updates all parameters, as torch's would only those
        with gradients)."""
        have = [p.grad is not None for p in self.params]
        if any(have) and not all(have):
            raise InputError("every stacked parameter needs a gradient for a flat optimiser "
                             "step: run all parameters in the forward pass")
        return all(have)

    def views(self, buffers):
        """One flat buffer per group -> one view per parameter, in ``params`` order."""
        per_group = [g.views(b) for g, b in zip(self.groups, buffers)]
        return [per_group[g][k] for g, k in self.where]

    def load(self, buffers, per_param):
        """Copy ``per_param`` tensors (params order) into ``buffers`` (one per group)."""
        for view, value in zip(self.views(buffers), per_param):
            view.copy_(value)
