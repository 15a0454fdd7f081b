r"""SGD with momentum and Adam over stacked (S, ...) parameters: S seeds, one update.

Vashisht & Ramaswamy (2023), Appendix A.2 (SGD with momentum) and the authors'
released code (Adam); used by :mod:`.batched_train` for the seeds of
:class:`.batched.BatchedFCAM`. Each optimizer is elementwise with one
learning rate (and, for Adam, one step count) per seed, so seed s's slice
follows the update ``torch.optim.SGD`` / ``torch.optim.Adam`` makes in a
separate run; each converts its state to and from those optimizers' per-seed
``state_dict`` so checkpoints stay per seed.
"""

import torch

from minimal_attn.backends.vr.batched_flat import FlatParams
from minimal_attn.errors import InputError


class _Stacked:
    """What both optimizers share: the flat layout (:mod:`.batched_flat`) and the per-seed
    factors, computed on the host and sent to the device before the update.

    ``step(lrs)`` is ``prepare(lrs)`` (host: factors for this step) then ``update()``
    (device operators only, reading the factors from a tensor that stays in place, so
    the update can be captured in a CUDA graph and replayed after each ``prepare``).
    """

    ROWS = 1
    STATE = None                            # the attribute holding the state buffers

    def __init__(self, params):
        self.layout = FlatParams(params)
        self.params, self.n_seeds = self.layout.params, self.layout.n_seeds
        self.factors = [torch.zeros(self.ROWS, self.n_seeds, dtype=g.flat.dtype,
                                    device=g.flat.device) for g in self.layout.groups]

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def has_state(self):
        """True once a step made the optimizer's state (momentum or moments)."""
        return getattr(self, self.STATE) is not None

    def state_id(self):
        """Where the state lives (device addresses): a captured update is only valid there."""
        state = getattr(self, self.STATE) or []
        flat = [t for item in state for t in (item if isinstance(item, tuple) else (item,))]
        return tuple(t.data_ptr() for t in flat + self.factors)

    def _send(self, rows):
        """Per-seed factors (Python floats, ROWS lists of S) -> ``self.factors``, rounded to
        each group's dtype on the host as torch rounds a Python-float scalar; on a GPU
        they travel from pinned memory without waiting for the device."""
        values = torch.tensor(rows, dtype=torch.float64)               # (ROWS, S)
        for factors in self.factors:
            src = values.to(factors.dtype)
            if factors.device.type == "cuda":
                src = src.pin_memory()
            factors.copy_(src, non_blocking=True)

    def step(self, lrs):
        """One update; ``lrs``: S learning rates (Python floats), one per seed."""
        if self.layout.has_grads():
            self.prepare(lrs)
            self.update()


class StackedSGD(_Stacked):
    r"""SGD with momentum over stacked (S, ...) parameters, one learning rate per seed.

    torch's update without dampening, weight decay or Nesterov:
    :math:`b \leftarrow \mu b + g` (:math:`b = g` at the first step),
    :math:`\theta \leftarrow \theta - \eta_s b`. Every operation is elementwise,
    so seed s's slice follows exactly the update ``torch.optim.SGD`` makes in a
    separate run with lr :math:`\eta_s`; here each is one operator over the flat
    buffer of all parameters and seeds.
    """

    STATE = "momentum_buffers"

    def __init__(self, params, momentum=0.9):
        super().__init__(params)
        self.momentum = float(momentum)
        self.momentum_buffers = None            # one flat buffer per group once stepped

    @property
    def buffers(self):
        """Per parameter its momentum buffer (S, ...), a view; None before the first step."""
        if self.momentum_buffers is None:
            return [None] * len(self.params)
        return self.layout.views(self.momentum_buffers)

    def prepare(self, lrs):
        self._send([[float(v) for v in lrs]])

    @torch.no_grad()
    def update(self):
        groups = self.layout.groups
        grads = [group.gather_grads() for group in groups]             # each (n,), fresh
        if self.momentum_buffers is None:
            self.momentum_buffers = grads                               # b = g (torch: a clone)
        else:
            for b, g in zip(self.momentum_buffers, grads):              # b <- mu b + g
                b.mul_(self.momentum).add_(g)
        for group, b, factors in zip(groups, self.momentum_buffers, self.factors):
            # p - lr_s * b: value * lr * b with value = -1 is exact negation
            group.flat.addcmul_(group.per_element(factors)[0], b, value=-1)

    def seed_state_dict(self, s, lr):
        """Seed s's state as ``torch.optim.SGD(model.parameters(), lr, momentum).state_dict()``."""
        template = torch.optim.SGD([torch.zeros(()) for _ in self.params], lr=float(lr),
                                   momentum=self.momentum).state_dict()
        state = {i: {"momentum_buffer": b[s].detach().clone()}
                 for i, b in enumerate(self.buffers) if b is not None}
        return {"state": state, "param_groups": template["param_groups"]}

    def load_seed_state_dicts(self, states):
        """Stack per-seed ``torch.optim.SGD`` state dicts (all seeds at the same step)."""
        bufs = [[st["state"].get(i, {}).get("momentum_buffer") for st in states]
                for i in range(len(self.params))]
        if all(b is None for per_seed in bufs for b in per_seed):
            self.momentum_buffers = None
            return
        if any(b is None for per_seed in bufs for b in per_seed):
            raise InputError("resume: the seeds' optimiser states are at different steps")
        self.momentum_buffers = [g.new() for g in self.layout.groups]
        self.layout.load(self.momentum_buffers, [torch.stack(b) for b in bufs])


class StackedAdam(_Stacked):
    r"""Adam over stacked (S, ...) parameters, one learning rate and step count per seed.

    ``torch.optim.Adam``'s update without weight decay or AMSGrad, in its order
    of operations: :math:`m \leftarrow m + (1 - \beta_1)(g - m)` (``lerp``),
    :math:`v \leftarrow \beta_2 v + (1 - \beta_2) g^2`, :math:`t \leftarrow t + 1`,
    :math:`\theta \leftarrow \theta - \frac{\eta_s}{1 - \beta_1^t}\, m \,/\,
    (\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon)`. Every operation is
    elementwise and the bias corrections are computed per seed as torch does
    (Python floats, rounded to the parameters' dtype), so seed s's slice follows
    the update of a separate run bit for bit; each operation runs once over the
    flat buffer of all parameters and seeds, the per-seed factors spread to the
    elements by one ``index_select``.
    """

    ROWS = 2                                # -lr_s / (1 - beta1^t), sqrt(1 - beta2^t)
    STATE = "moments"

    def __init__(self, params, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params)
        self.betas, self.eps = (float(betas[0]), float(betas[1])), float(eps)
        self.moments = None                 # per group (exp_avg, exp_avg_sq) once stepped
        self.steps = [0] * self.n_seeds     # per seed (every parameter steps together)

    @property
    def exp_avg(self):
        """Per parameter its first moment (S, ...), a view; None before the first step."""
        return self._views(0)

    @property
    def exp_avg_sq(self):
        return self._views(1)

    def _views(self, which):
        if self.moments is None:
            return [None] * len(self.params)
        return self.layout.views([pair[which] for pair in self.moments])

    def prepare(self, lrs):
        """Count the step and send this step's per-seed factors, as torch computes them."""
        beta1, beta2 = self.betas
        self.steps = [t + 1 for t in self.steps]
        self._send([[-float(lr) / (1 - beta1 ** t) for lr, t in zip(lrs, self.steps)],
                    [(1 - beta2 ** t) ** 0.5 for t in self.steps]])

    @torch.no_grad()
    def update(self):
        beta1, beta2 = self.betas
        if self.moments is None:
            self.moments = [(g.new(), g.new()) for g in self.layout.groups]
        for group, (m, v), factors in zip(self.layout.groups, self.moments, self.factors):
            g = group.gather_grads()                                    # (n,)
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            neg_step, bc2_sqrt = group.per_element(factors)             # each (n,)
            denom = v.sqrt().div_(bc2_sqrt).add_(self.eps)
            # torch's addcdiv(p, m, denom, value=-step_size) is p + (-step_size * m) / denom;
            # with a per-element step size, the product first, then addcdiv with value 1
            # (exact), so the same roundings in the same order
            group.flat.addcdiv_(m.mul(neg_step), denom)

    def seed_state_dict(self, s, lr):
        """Seed s's state as ``torch.optim.Adam(model.parameters(), lr).state_dict()``."""
        template = torch.optim.Adam([torch.zeros(()) for _ in self.params], lr=float(lr),
                                    betas=self.betas, eps=self.eps).state_dict()
        if self.moments is None:
            return {"state": {}, "param_groups": template["param_groups"]}
        state = {i: {"step": torch.tensor(float(self.steps[s])),
                     "exp_avg": m[s].detach().clone(), "exp_avg_sq": v[s].detach().clone()}
                 for i, (m, v) in enumerate(zip(self.exp_avg, self.exp_avg_sq))}
        return {"state": state, "param_groups": template["param_groups"]}

    def load_seed_state_dicts(self, states):
        """Stack per-seed ``torch.optim.Adam`` state dicts (steps may differ per seed, not
        between one seed's parameters)."""
        entries = [[st["state"].get(i) for st in states] for i in range(len(self.params))]
        if all(e is None for per_seed in entries for e in per_seed):
            self.moments, self.steps = None, [0] * self.n_seeds
            return
        if any(e is None for per_seed in entries for e in per_seed):
            raise InputError("resume: some seeds' optimiser states lack a parameter")
        steps = [{int(float(per_seed[s]["step"])) for per_seed in entries}
                 for s in range(self.n_seeds)]
        if any(len(t) != 1 for t in steps):
            raise InputError("resume: a seed's parameters are at different Adam steps; the "
                             "stacked Adam steps them together (start that seed afresh)")
        self.steps = [t.pop() for t in steps]
        self.moments = [(g.new(), g.new()) for g in self.layout.groups]
        for which, key in enumerate(("exp_avg", "exp_avg_sq")):
            self.layout.load([pair[which] for pair in self.moments],
                             [torch.stack([e[key] for e in per_seed]) for per_seed in entries])


def stacked_optimizer(name, params, momentum=0.9, betas=(0.9, 0.999), eps=1e-8):
    """:class:`StackedSGD` (``sgd``) or :class:`StackedAdam` (``adam``) over ``params``."""
    if name == "adam":
        return StackedAdam(params, betas, eps)
    return StackedSGD(params, momentum)
