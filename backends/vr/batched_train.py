r"""S seeds of one paradigm as one :class:`.batched.BatchedFCAM`: a trainer with a seed axis.

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2 (SGD with momentum,
or Adam as in the authors' released code; 12 seeds per paradigm for Table 1).
:class:`BatchedSeeds` is the :class:`minimal_attn.experiments.epochs.SeedTrainer`
that :func:`minimal_attn.experiments.epochs.run_seeds` trains (the one epoch
loop, as for a single run): the same initialisations (``build_fcam(seed=s)``),
the same per-seed shuffling (``torch.Generator().manual_seed(s)``), the same
losses and inference rules (:mod:`.torch_backend`) as S separate
:class:`.train.CNNTrainer` runs, and per-seed checkpoints in their format, so a
batched run resumes separately and vice versa. A lane whose phase is None (the
stop rule ended it) is not run and its parameters no longer move.
Why S stacked runs equal S separate ones: :mod:`.batched`. How a step runs
(``TrainConfig.compile``) and in which arithmetic (``TrainConfig.precision``:
fp32, tf32 or bf16 autocast): :mod:`.batched_step`.
"""

import io

import numpy as np
import torch

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.batched import (
    parameter_names,
    stack_fcams,
    stacked_parameters,
    unstack,
)
from minimal_attn.backends.vr.batched_step import (
    autocast,
    check_precision,
    eager_step,
    precision_scope,
    step_runner,
)
from minimal_attn.backends.vr.image_store import ImageStore
from minimal_attn.backends.vr.stacked_optimizers import stacked_optimizer
from minimal_attn.backends.vr.train import ADAM_BETAS, ADAM_EPS, CNNTrainer
from minimal_attn.experiments.linear_train import summarise


def _seed_losses(phase, scores, logits, y):
    """Each seed's batch-mean loss, (S',): :func:`torch_backend.loss` mapped over the seed axis."""
    return torch.func.vmap(lambda s, g, t: tb.loss(phase, s, g, t))(scores, logits, y)


class BatchedSeeds:
    """The seeds of ``configs`` (one paradigm) as one stacked model with a seed axis.

    ``configs[k]`` is lane k's ``TrainConfig`` (its ``seed`` picks the start
    ``make_model(seed)``, default :func:`.models.build_fcam_for`, and the
    shuffling generator); ``mode``: one of :data:`.batched.MODES` (None: the configs'
    ``conv_mode``; if that is None too, grouped_nchw on CUDA, loop on the CPU). Implements
    :class:`minimal_attn.experiments.epochs.SeedTrainer`.
    """

    KIND = CNNTrainer.KIND                  # per-seed checkpoints are the CNN run's
    LR_TABLE = None
    read = staticmethod(CNNTrainer.read)

    def __init__(self, configs, train, test, mode=None, make_model=None):
        from minimal_attn.backends.vr.models import build_fcam_for

        config = configs[0]
        self.config, self.sets = config, {"train": train, "test": test}
        self.seeds = [int(c.seed) for c in configs]
        device = tb.get_device(config.device)
        check_precision(config.precision, device)
        self.precision, self.device = config.precision, device
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = True                   # as CNNTrainer
        make_model = make_model or (lambda seed: build_fcam_for(config, device, seed))
        self.model = stack_fcams([make_model(s) for s in self.seeds], mode or config.conv_mode)
        self.optimizer = stacked_optimizer(config.optimizer, stacked_parameters(self.model),
                                           config.momentum, ADAM_BETAS, ADAM_EPS)
        self.generators = [torch.Generator().manual_seed(s) for s in self.seeds]
        self.lrs = [0.0] * len(self.seeds)
        self.stores = {name: None if mos is None else
                       ImageStore(mos.X, device, mos.z, config.pixels)
                       for name, mos in self.sets.items()}
        self.y = torch.as_tensor(np.asarray(train.y), device=device)
        self.m = train.X.shape[1]
        self._states = None                  # (step count, per-seed states) for save()
        self._step_count = 0
        # how a step runs (config.compile: none, compile or cudagraph; .batched_step)
        self.runner = step_runner(self, config.compile, device)

    def steps(self, batch_size):
        return -(-self.stores["train"].n // batch_size)

    def _groups(self, phases):
        """phase -> LongTensor of its lanes (None: all of them), for the lanes that run."""
        S, device = len(self.seeds), self.y.device
        groups = {ph: [k for k in range(S) if phases[k] == ph]
                  for ph in dict.fromkeys(phases) if ph is not None}
        return {ph: None if len(ks) == S else torch.tensor(ks, device=device)
                for ph, ks in groups.items()}

    def train_epoch(self, phases, lrs, epoch, step):
        """One pass over each lane's shuffled batches: per lane (mean loss, running
        accuracy, mean a_z), None for a lane whose phase is None (it gets lr 0)."""
        S, store, y = len(self.seeds), self.stores["train"], self.y
        self.lrs = [float(lr) if ph is not None else 0.0 for ph, lr in zip(phases, lrs)]
        picks = self._groups(phases)
        orders = torch.stack([torch.randperm(store.n, generator=g)
                              for g in self.generators]).to(y.device)   # (S, N)
        sums = torch.zeros(S, 3, dtype=torch.float64, device=y.device)  # loss, correct, a_z
        with precision_scope(self.precision):
            for idx in orders.split(self.config.batch_size, dim=1):    # idx (S, B)
                if self.runner is None:
                    eager_step(self, idx, picks, sums, self.lrs)
                else:
                    self.runner(idx, picks, sums, self.lrs, tuple(phases))
                self._step_count += 1
                step(None)                   # no loss read: that would sync the device
        stats = (sums / store.n).tolist()
        return [tuple(st) if ph is not None else None for ph, st in zip(phases, stats)]

    def batch(self, idx):
        """Mosaics (S, B, m, 3, 32, 32), labels and positions (S, B) of indices ``idx`` (S, B)."""
        store = self.stores["train"]
        return store[idx], self.y[idx], store.z[idx]

    def forward(self, X, yb, zb, picks, sums):
        """The sum over the running lanes of their batch-mean losses (backprop gives each
        lane its own gradient, :mod:`.batched`); adds each lane's (loss x B, correct,
        a_z sum) to ``sums`` (S, 3) without reading anything back. Only the network
        call is under autocast (bf16): its scores and logits come back float32, and
        the losses, softmaxes and statistics here run in float32."""
        total = None                         # not 0.0: one addition (a launch) fewer
        for ph, ks in picks.items():
            Xg, yg, zg = (X, yb, zb) if ks is None else (X[ks], yb[ks], zb[ks])
            with autocast(self.precision, self.device):
                scores, logits = self.model(Xg, ph, ks)               # (S', B, m), ...
            values = _seed_losses(ph, scores, logits, yg)             # (S',)
            total = values.sum() if total is None else total + values.sum()
            with torch.no_grad():
                flat = (scores.reshape((-1,) + scores.shape[2:]),
                        logits.reshape((-1,) + logits.shape[2:]))
                right = tb.infer(ph, *flat).argmax(1).reshape(yg.shape) == yg
                a_z = tb.attention(scores).gather(2, zg[..., None])[..., 0]  # (S', B)
                part = torch.stack([values.double() * yg.shape[1],
                                    right.sum(1).double(), a_z.sum(1).double()], 1)
                if ks is None:
                    sums += part
                else:
                    sums.index_add_(0, ks, part)
        return total

    @torch.no_grad()
    def probe_loss(self, phases):
        """Per lane the loss on the first batch of training mosaics (None where not run)."""
        store = self.stores["train"]
        idx = torch.arange(min(self.config.batch_size, store.n), device=self.y.device)
        X, yb, out = store[idx], self.y[idx], [None] * len(self.seeds)
        for ph, ks in self._groups(phases).items():
            lanes = range(len(self.seeds)) if ks is None else ks.tolist()
            n = len(lanes)
            with precision_scope(self.precision), autocast(self.precision, self.device):
                scores, logits = self.model(X.expand((n,) + X.shape), ph, ks)
            values = _seed_losses(ph, scores, logits, yb.expand(n, -1)).tolist()
            for k, v in zip(lanes, values):
                out[k] = v
        return out

    def evaluate(self, split, rules, batch_size=400):
        """Per lane ``(summary, {"a_z", "s_y", "correct"})`` by ``rules[k]``, as
        ``train.evaluate`` (None for a lane whose rule is None)."""
        store, mosaics, S = self.stores[split], self.sets[split], len(self.seeds)
        a_parts, s_parts = [[] for _ in range(S)], [[] for _ in range(S)]
        for idx in torch.arange(store.n, device=self.y.device).split(batch_size):
            X = store[idx]                                            # (B, m, 3, 32, 32)
            for rule in dict.fromkeys(r for r in rules if r is not None):
                ks = [k for k in range(S) if rules[k] == rule]
                pick = None if len(ks) == S else torch.tensor(ks, device=self.y.device)
                with torch.no_grad(), precision_scope(self.precision), \
                        autocast(self.precision, self.device):           # s: float32
                    scores, s = self.model.predict(X.expand((len(ks),) + X.shape), rule, pick)
                for j, k in enumerate(ks):
                    a_parts[k].append(tb.attention(scores[j]))
                    s_parts[k].append(s[j])
        out = []
        for k in range(S):
            if rules[k] is None:
                out.append(None)
                continue
            a, s = torch.cat(a_parts[k]).cpu().numpy(), torch.cat(s_parts[k]).cpu().numpy()
            out.append(summarise(a, s, mosaics, self.config.threshold))
        return out

    def seed_states(self):
        """Per seed ``{"model", "optimizer", "generator"}``, as ``CNNTrainer`` checkpoints them."""
        return [{"model": sd, "optimizer": self.optimizer.seed_state_dict(k, self.lrs[k]),
                 "generator": self.generators[k].get_state()}
                for k, sd in enumerate(unstack(self.model))]

    def save(self, k, f, meta):
        """Lane k's checkpoint, the file a separate ``CNNTrainer`` run writes."""
        if self._states is None or self._states[0] != self._step_count:
            self._states = (self._step_count, self.seed_states())    # once per epoch
        buffer = io.BytesIO()
        torch.save(dict(meta, **self._states[1][k]), buffer)
        f.write(buffer.getvalue())

    def restore(self, payloads):
        """Continue from per-seed checkpoints (``seed_states``' form)."""
        with torch.no_grad():
            for name, p in zip(parameter_names(self.model), stacked_parameters(self.model)):
                p.copy_(torch.stack([st["model"][name] for st in payloads]))
        self.optimizer.load_seed_state_dicts([st["optimizer"] for st in payloads])
        for g, st in zip(self.generators, payloads):
            g.set_state(st["generator"])
        self._states = None
        if self.runner is not None:
            self.runner.reset()              # captured graphs held the old optimizer state
