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

from minimal_attn.errors import InputError


def per_seed_tensor(rows, device):
    """Python floats (one list per row, one value per seed) as a float64 tensor on ``device``.

    On a GPU the values travel from pinned memory without waiting for the device
    (``non_blocking``), so an optimiser step adds no host synchronisation.
    """
    values = torch.tensor(rows, dtype=torch.float64)
    if torch.device(device).type == "cuda":
        return values.pin_memory().to(device, non_blocking=True)
    return values.to(device)


class StackedSGD:
    r"""SGD with momentum over stacked (S, ...) parameters, one learning rate per seed.

    torch's update without dampening, weight decay or Nesterov:
    :math:`b \leftarrow \mu b + g` (:math:`b = g` at the first step),
    :math:`\theta \leftarrow \theta - \eta_s b`. Every operation is elementwise,
    so seed s's slice follows exactly the update ``torch.optim.SGD`` makes in a
    separate run with lr :math:`\eta_s`.
    """

    def __init__(self, params, momentum=0.9):
        self.params, self.momentum = list(params), float(momentum)
        self.buffers = [None] * len(self.params)
        self.steps = [0] * len(self.params)      # updates made with each buffer
        self._lrs = (None, {})                   # the last lrs and their device copies

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def _lr_tensor(self, lrs, p):
        """``lrs`` on ``p``'s device and dtype, made once per distinct ``lrs`` (an epoch)."""
        key = tuple(float(v) for v in lrs)
        if self._lrs[0] != key:
            self._lrs = (key, {})
        cache = self._lrs[1]
        if (p.device, p.dtype) not in cache:
            cache[p.device, p.dtype] = per_seed_tensor(list(key), p.device).to(p.dtype)
        return cache[p.device, p.dtype]

    @torch.no_grad()
    def step(self, lrs):
        """One update; ``lrs``: S learning rates (Python floats), one per seed."""
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        for i in live:
            if self.buffers[i] is None:
                self.buffers[i] = self.params[i].grad.detach().clone()
        warm = [i for i in live if self.buffers[i] is not None and self.steps[i] > 0]
        for i in warm:                     # b <- mu b + g
            self.buffers[i].mul_(self.momentum).add_(self.params[i].grad)
        for i in live:
            p = self.params[i]
            lr = self._lr_tensor(lrs, p)
            # p - lr_s * b: value * lr * b with value = -1 is exact negation
            p.addcmul_(lr.view((-1,) + (1,) * (p.ndim - 1)), self.buffers[i], value=-1)
            self.steps[i] += 1

    def seed_state_dict(self, s, lr):
        """Seed s's state as ``torch.optim.SGD(model.parameters(), lr, momentum).state_dict()``."""
        template = torch.optim.SGD([torch.zeros(()) for _ in self.params], lr=float(lr),
                                   momentum=self.momentum).state_dict()
        state = {i: {"momentum_buffer": b[s].detach().clone()}
                 for i, b in enumerate(self.buffers) if b is not None}
        return {"state": state, "param_groups": template["param_groups"]}

    def load_seed_state_dicts(self, states):
        """Stack per-seed ``torch.optim.SGD`` state dicts (all seeds at the same step)."""
        for i, p in enumerate(self.params):
            bufs = [st["state"].get(i, {}).get("momentum_buffer") for st in states]
            if all(b is None for b in bufs):
                self.buffers[i] = None
            elif any(b is None for b in bufs):
                raise InputError("resume: the seeds' optimiser states are at different steps")
            else:
                self.buffers[i] = torch.stack(bufs).to(p.device, p.dtype)
            self.steps[i] = int(self.buffers[i] is not None)


class StackedAdam:
    r"""Adam over stacked (S, ...) parameters, one learning rate and step count per seed.

    ``torch.optim.Adam``'s update without weight decay or AMSGrad, in its order
    of operations: :math:`m \leftarrow m + (1 - \beta_1)(g - m)` (``lerp``),
    :math:`v \leftarrow \beta_2 v + (1 - \beta_2) g^2`, :math:`t \leftarrow t + 1`,
    :math:`\theta \leftarrow \theta - \frac{\eta_s}{1 - \beta_1^t}\, m \,/\,
    (\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon)`. Every operation is
    elementwise and the bias corrections are computed per seed as torch does
    (Python floats), so seed s's slice follows the update of a separate run.
    """

    def __init__(self, params, betas=(0.9, 0.999), eps=1e-8):
        self.params = list(params)
        self.betas, self.eps = (float(betas[0]), float(betas[1])), float(eps)
        self.n_seeds = self.params[0].shape[0]
        self.exp_avg = [None] * len(self.params)
        self.exp_avg_sq = [None] * len(self.params)
        self.steps = [[0] * self.n_seeds for _ in self.params]   # per parameter, per seed

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lrs):
        """One update; ``lrs``: S learning rates (Python floats), one per seed.

        The per-seed factors are computed in Python floats, as torch does, and
        sent to the device once per distinct step count (usually once a step),
        without waiting for the device.
        """
        beta1, beta2 = self.betas
        lrs = [float(v) for v in lrs]
        factors = {}           # (steps, device, dtype, ndim) -> (-step size, sqrt(bc2)), (2, S)
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            if self.exp_avg[i] is None:
                self.exp_avg[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
                self.exp_avg_sq[i] = torch.zeros_like(p, memory_format=torch.preserve_format)
            g, m, v = p.grad, self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            steps = self.steps[i] = [t + 1 for t in self.steps[i]]
            key = (tuple(steps), p.device, p.dtype, p.ndim)
            if key not in factors:
                rows = [[-lr / (1 - beta1 ** t) for lr, t in zip(lrs, steps)],
                        [(1 - beta2 ** t) ** 0.5 for t in steps]]
                factors[key] = per_seed_tensor(rows, p.device).to(p.dtype).view(
                    (2, -1) + (1,) * (p.ndim - 1))               # each (S, 1, ...)
            neg_step, bc2_sqrt = factors[key]
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            # torch's addcdiv(p, m, denom, value=-step_size): p + (-step_size * m) / denom
            p.add_(m.mul(neg_step).div_(denom))

    def seed_state_dict(self, s, lr):
        """Seed s's state as ``torch.optim.Adam(model.parameters(), lr).state_dict()``."""
        template = torch.optim.Adam([torch.zeros(()) for _ in self.params], lr=float(lr),
                                    betas=self.betas, eps=self.eps).state_dict()
        state = {i: {"step": torch.tensor(float(self.steps[i][s])),
                     "exp_avg": m[s].detach().clone(),
                     "exp_avg_sq": self.exp_avg_sq[i][s].detach().clone()}
                 for i, m in enumerate(self.exp_avg) if m is not None}
        return {"state": state, "param_groups": template["param_groups"]}

    def load_seed_state_dicts(self, states):
        """Stack per-seed ``torch.optim.Adam`` state dicts (steps may differ per seed)."""
        for i, p in enumerate(self.params):
            per_seed = [st["state"].get(i) for st in states]
            if all(entry is None for entry in per_seed):
                self.exp_avg[i] = self.exp_avg_sq[i] = None
                self.steps[i] = [0] * self.n_seeds
                continue
            if any(entry is None for entry in per_seed):
                raise InputError("resume: some seeds' optimiser states lack a parameter")
            self.exp_avg[i] = torch.stack([e["exp_avg"] for e in per_seed]).to(p.device, p.dtype)
            self.exp_avg_sq[i] = torch.stack([e["exp_avg_sq"] for e in per_seed]).to(
                p.device, p.dtype)
            self.steps[i] = [int(float(e["step"])) for e in per_seed]


def stacked_optimizer(name, params, momentum=0.9, betas=(0.9, 0.999), eps=1e-8):
    """:class:`StackedSGD` (``sgd``) or :class:`StackedAdam` (``adam``) over ``params``."""
    if name == "adam":
        return StackedAdam(params, betas, eps)
    return StackedSGD(params, momentum)
