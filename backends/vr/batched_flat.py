r"""Stacked (S, ...) parameters as views into one flat buffer, for whole-buffer optimiser steps.

Used by :mod:`.stacked_optimizers` (the seeds of :class:`.batched.BatchedFCAM`,
Vashisht & Ramaswamy 2023, Appendix A.2). An elementwise optimiser step over
P parameters costs several operators per parameter, each a kernel launch on a
GPU; with every parameter a view into one contiguous buffer (per device and
dtype), and the optimiser state laid out the same way, a step is a handful of
operators over the whole buffer, whatever P is.

Layout: parameter i's (S, ...) block sits at ``offsets[i]`` with the
parameter's own strides (so its memory format, channels-last for the convolution
weights of :class:`.models.FCAM`, is kept: cuDNN and oneDNN choose their kernels by
it), each start rounded up to :data:`ALIGN` elements so that every view starts on
a 256-byte boundary (vectorised GPU kernels need aligned starts); the gaps hold
zeros and keep them, since their gradient is zero. ``seed_of`` gives each
element's seed, so per-seed factors (rows, S) reach the elements by one
``index_select``. (A buffer laid out seed by seed, (S, P), would broadcast them
instead, but then every parameter has seed stride P: the grouped convolutions'
weights are copied to standard layout in every forward, which changes the kernels
chosen, 1.7x slower on this CPU, and autograd gives such parameters standard
gradients, which a channels-last block does not match.)

The parameters stay the same Python objects (the model keeps its references):
their ``.data`` is moved into the buffer. Their gradients come from autograd as
usual and are gathered into one flat gradient by one ``cat`` per step.
"""

import torch

from minimal_attn.errors import InputError

#: Every parameter's view starts at a multiple of this many elements.
ALIGN = 64


def _physical_order(t):
    """The dims of a dense tensor from the largest stride to the smallest: permuted so,
    it is contiguous, and ``reshape(-1)`` lists its elements as they lie in memory."""
    return sorted(range(t.ndim), key=lambda d: (-t.stride(d), d))


class FlatGroup:
    """The parameters of one (device, dtype) in one flat buffer: ``flat`` (n,), ``seed_of`` (n,)."""

    def __init__(self, params, n_seeds):
        self.params = params
        self.offsets, total = [], 0
        for p in params:
            if p.shape[0] != n_seeds or not _dense(p):
                raise InputError(f"stacked parameters need a leading seed axis of {n_seeds} "
                                 f"and no gaps, got shape {tuple(p.shape)}, strides "
                                 f"{p.stride()}")
            self.offsets.append(total)
            total += -(-p.numel() // ALIGN) * ALIGN
        p0 = params[0]
        self.flat = torch.zeros(total, device=p0.device, dtype=p0.dtype)
        seed_of = torch.zeros(total, dtype=torch.int32)
        self.pieces = []                  # (offset, shape, strides, physical order) each
        for p, off in zip(params, self.offsets):
            order = _physical_order(p)
            piece = (off, p.shape, p.stride(), None if order == sorted(order) else order)
            view = self.view(self.flat, piece)
            with torch.no_grad():
                view.copy_(p)
            p.data = view                 # the parameter now lives in the flat buffer
            seeds = torch.arange(n_seeds, dtype=torch.int32).view((-1,) + (1,) * (p.ndim - 1))
            seed_of[off:off + p.numel()] = seeds.expand(p.shape).permute(order).reshape(-1)
            # (order None below: the parameter is contiguous, no permute needed)
            self.pieces.append(piece)
        self.seed_of = seed_of.to(p0.device)
        self.gaps = [nxt - off - p.numel() for p, off, nxt in
                     zip(params, self.offsets, self.offsets[1:] + [total])]
        # zeros for the gaps when gathering gradients, made once (no allocation in a step)
        self.zeros = {size: self.flat.new_zeros(size) for size in set(self.gaps) if size}

    @staticmethod
    def view(buffer, piece):
        """One parameter's view into ``buffer``, with the parameter's own strides (its
        memory format: the models keep convolution weights channels-last, and so does this)."""
        off, shape, stride, _ = piece
        return buffer.as_strided(shape, stride, buffer.storage_offset() + off)

    def new(self):
        """A zero buffer of the flat layout (optimiser state)."""
        return torch.zeros_like(self.flat)

    def views(self, buffer):
        """``buffer`` (flat layout) cut into the parameters' shapes: one view per parameter."""
        return [self.view(buffer, piece) for piece in self.pieces]

    def gather_grads(self):
        """The parameters' gradients as one flat tensor (one ``cat``), zeros in the gaps.

        autograd gives a dense parameter's gradient the parameter's strides, so each
        gradient, permuted to its memory order, flattens without a copy into the
        order of the parameter's elements in the buffer."""
        parts = []
        for p, (_, _, _, order), size in zip(self.params, self.pieces, self.gaps):
            g = p.grad if order is None else p.grad.permute(order)
            parts.append(g.reshape(-1))
            if size:
                parts.append(self.zeros[size])
        return torch.cat(parts)                                          # (n,)

    def per_element(self, factors):
        """Per-seed factors (rows, S) on the device -> per-element (rows, n)."""
        return factors.index_select(1, self.seed_of)


def _dense(t):
    """True when ``t``'s elements fill a block of ``t.numel()`` with no gaps or overlaps."""
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return span == t.numel() and all(stride > 0 or size == 1
                                     for size, stride in zip(t.shape, t.stride()))


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
