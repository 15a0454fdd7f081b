r"""Training S seeds of one paradigm together as one :class:`.batched.BatchedFCAM`.

Vashisht & Ramaswamy (2023), Section 2.4 and Appendix A.2 (SGD with momentum,
or Adam as in the authors' released code; 12 seeds per paradigm for Table 1).
:func:`train_seeds_batched` is ``torch_train.train_run`` for S seeds at once:
the same initialisations (``build_fcam(seed=s)``), the same per-seed shuffling
(``torch.Generator().manual_seed(s)``), the same losses and inference rules
(:mod:`.torch_backend`), the same hybrid schedule and per-phase learning rate,
the same stop rule (a seed that reached ``stop_loss`` leaves the batch: it is
no longer run and its parameters no longer move), and per-seed results
(states, per-epoch records) in ``train_run``'s format.
Why S stacked runs equal S separate ones: :mod:`.batched`.
"""

import torch

from minimal_attn.backends import torch_backend as tb
from minimal_attn.backends.vr.batched import (
    parameter_names,
    stack_fcams,
    stacked_parameters,
    unstack,
)
from minimal_attn.backends.vr.stacked_optimizers import stacked_optimizer
from minimal_attn.backends.vr.train import ADAM_BETAS, ADAM_EPS
from minimal_attn.errors import InputError


def _seed_losses(phase, scores, logits, y):
    """Each seed's batch-mean loss, (S',): :func:`torch_backend.loss` mapped over the seed axis."""
    return torch.func.vmap(lambda s, g, t: tb.loss(phase, s, g, t))(scores, logits, y)


class BatchedSeeds:
    """S seeds of one paradigm as one :class:`BatchedFCAM`, each with its own shuffling order.

    ``models[k]`` is seed ``seeds[k]``'s fresh FCAM; its mini-batches come from
    ``torch.Generator().manual_seed(seeds[k])``, as in a separate ``train_run``;
    ``optimizer``: ``sgd`` (with ``momentum``) or ``adam``.
    """

    def __init__(self, models, seeds, momentum=0.9, mode=None, optimizer="sgd"):
        self.seeds = [int(s) for s in seeds]
        self.model = stack_fcams(models, mode)
        self.optimizer = stacked_optimizer(optimizer, stacked_parameters(self.model),
                                           momentum, ADAM_BETAS, ADAM_EPS)
        self.generators = [torch.Generator().manual_seed(s) for s in self.seeds]
        self.lrs = [None] * len(self.seeds)

    def train_epoch(self, store, y, phases, lrs, batch_size, on_step=None):
        """One pass over each seed's shuffled batches; ``phases``/``lrs`` one per seed.

        A seed whose phase is None (stopped) is not run and gets lr 0, so its
        parameters stay as they are. Returns per seed (mean loss, running
        accuracy, mean a_z), like ``CNNTrainer.train_epoch`` (zeros when stopped).
        """
        S, device = len(self.seeds), store.X.device
        self.lrs = [float(lr) if ph is not None else 0.0 for ph, lr in zip(phases, lrs)]
        groups = {ph: [k for k in range(S) if phases[k] == ph]
                  for ph in dict.fromkeys(phases) if ph is not None}
        picks = {ph: None if len(ks) == S else torch.tensor(ks, device=device)
                 for ph, ks in groups.items()}
        orders = torch.stack([torch.randperm(store.n, generator=g)
                              for g in self.generators]).to(device)   # (S, N)
        sums = torch.zeros(S, 3, dtype=torch.float64, device=device)  # loss, correct, a_z
        batches = orders.split(batch_size, dim=1)
        for step, idx in enumerate(batches):                          # idx (S, B)
            X, yb, zb = store[idx], y[idx], store.z[idx]              # (S, B, m, 3, 32, 32)
            self.optimizer.zero_grad()
            total = 0.0
            for ph, ks in picks.items():
                Xg, yg, zg = (X, yb, zb) if ks is None else (X[ks], yb[ks], zb[ks])
                scores, logits = self.model(Xg, ph, ks)               # (S', B, m), ...
                values = _seed_losses(ph, scores, logits, yg)         # (S',)
                total = total + values.sum()
                with torch.no_grad():
                    flat = (scores.reshape((-1,) + scores.shape[2:]),
                            logits.reshape((-1,) + logits.shape[2:]))
                    right = tb.infer(ph, *flat).argmax(1).reshape(yg.shape) == yg
                    a_z = tb.attention(scores).gather(2, zg[..., None])[..., 0]  # (S', B)
                    part = torch.stack([values.double() * idx.shape[1],
                                        right.sum(1).double(), a_z.sum(1).double()], 1)
                    if ks is None:
                        sums += part
                    else:
                        sums.index_add_(0, ks, part)
            total.backward()
            self.optimizer.step(self.lrs)
            if on_step is not None:
                on_step(step, len(batches))
        return (sums / store.n).tolist()

    def evaluate(self, store, mosaics, rules, threshold=0.8, batch_size=400):
        """Per seed ``(summary, {"a_z", "s_y"})`` by ``rules[k]``, as ``torch_train.evaluate``
        (None for a seed whose rule is None)."""
        from minimal_attn import saif

        S, device = len(self.seeds), store.X.device
        a_parts, s_parts = [[] for _ in range(S)], [[] for _ in range(S)]
        for idx in torch.arange(store.n, device=device).split(batch_size):
            X = store[idx]                                            # (B, m, 3, 32, 32)
            for rule in dict.fromkeys(r for r in rules if r is not None):
                ks = [k for k in range(S) if rules[k] == rule]
                pick = None if len(ks) == S else torch.tensor(ks, device=device)
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
            a_z, s_y = saif.foreground_scores(a, s, mosaics.y, mosaics.z)
            out.append((saif.summarise(a, s, mosaics.y, mosaics.z, threshold),
                        {"a_z": a_z, "s_y": s_y}))
        return out

    def seed_states(self):
        """Per seed ``{"model", "optimizer", "generator"}``, as ``train_run`` checkpoints them."""
        return [{"model": sd, "optimizer": self.optimizer.seed_state_dict(k, self.lrs[k] or 0.0),
                 "generator": self.generators[k].get_state()}
                for k, sd in enumerate(unstack(self.model))]

    def load_seed_states(self, states):
        """Continue from per-seed :meth:`seed_states` (all seeds after the same epoch)."""
        with torch.no_grad():
            for name, p in zip(parameter_names(self.model), stacked_parameters(self.model)):
                p.copy_(torch.stack([st["model"][name] for st in states]))
        self.optimizer.load_seed_state_dicts([st["optimizer"] for st in states])
        for g, st in zip(self.generators, states):
            g.set_state(st["generator"])


def train_seeds_batched(config, seeds, train, test=None, make_model=None, schedule=None,
                        mode=None, resume=None, callback=None, on_step=None,
                        score_by_phase=False, out_of_time=None):
    """Train S seeds of ``config.paradigm`` together for ``config.epochs`` epochs.

    Parameters
    ----------
    config : ``torch_train.TrainConfig``; its ``seed`` is ignored, ``seeds`` rule
    seeds : the seeds; seed s starts from ``make_model(s)`` and shuffles with
        ``torch.Generator().manual_seed(s)``, exactly as ``train_run`` with ``seed=s``
    train, test : Mosaics; with ``test`` every record also has test accuracy and SAIF
    make_model : ``seed -> FCAM``; None: ``build_fcam`` as ``train_run`` builds it
    schedule : ``(k, epoch, history_k) -> (phase, lr)`` for seed ``seeds[k]``;
        None: ``(config.phase(epoch), config.learning_rate(epoch))``, or
        ``(None, 0.0)`` once the seed reached ``config.stop_loss``. A per-seed
        automatic hybrid switch is a schedule that reads ``history_k``; a phase
        of None stops the seed.
    mode : one of ``torch_batched.MODES``; None: grouped on CUDA, loop on the CPU
    resume : ``(epoch, [seed_states], [histories])`` to continue from
    callback : ``callback(epoch, records, run)`` after each epoch; ``records[k]``
        is seed k's (None once it stopped); ``run.seed_states()`` gives what to
        checkpoint
    on_step : ``on_step(step, n_steps)`` after each optimiser step
    score_by_phase : score each epoch's test set by the phase's inference rule
        (a hybrid in its SA phase as SA); False: by ``config.paradigm``, as ``train_run``
    out_of_time : ``() -> bool``, True once the run must end (``config.time_limit``);
        None: ``config.deadline()``. The test set is scored every ``config.eval_every``
        epochs, at the last epoch and once the time is up.

    Returns
    -------
    dict: ``seeds``, ``states`` (per seed model/optimizer/generator), ``history``
    (per seed, one record per epoch with the keys of ``train_run``'s), ``time_limited``
    (True when ``out_of_time`` ended the run before its epochs), ``run``
    (the :class:`BatchedSeeds`) and, with ``test``, ``results``: per seed what
    ``train_run`` returns (final train/test summaries, history, instances).
    """
    import numpy as np

    from minimal_attn.backends.vr.image_store import ImageStore
    from minimal_attn.backends.vr.models import build_fcam_for

    device = tb.get_device(config.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True                       # as train_run
    if make_model is None:
        def make_model(seed):
            return build_fcam_for(config, device, seed)
    if schedule is None:
        def schedule(k, epoch, history):
            if config.stopped(history):
                return None, 0.0
            return config.phase(epoch), config.learning_rate(epoch)
    run = BatchedSeeds([make_model(s) for s in seeds], seeds, config.momentum, mode,
                       config.optimizer)
    store = ImageStore(train.X, device, train.z)
    test_store = None if test is None else ImageStore(test.X, device, test.z)
    y = torch.as_tensor(np.asarray(train.y), device=device)
    start, history, evals, rules = 0, [[] for _ in seeds], None, None
    if resume is not None:
        start, states, history = resume[0], resume[1], [list(h) for h in resume[2]]
        run.load_seed_states(states)
    out_of_time, time_limited = out_of_time or config.deadline(), False
    for epoch in range(start, config.epochs):
        plan = [schedule(k, epoch, history[k]) for k in range(len(seeds))]
        if all(phase is None for phase, _ in plan):
            break                                                   # every seed stopped
        if out_of_time():
            time_limited = True
            break
        stats = run.train_epoch(store, y, [p for p, _ in plan], [lr for _, lr in plan],
                                config.batch_size, on_step)
        records = []
        for k, ((phase, lr), (loss, acc, a_z)) in enumerate(zip(plan, stats)):
            if phase is None:
                records.append(None)
                continue
            if not np.isfinite(loss):
                raise InputError(f"training diverged: {config.paradigm} seed {seeds[k]} has "
                                 f"loss {loss} in epoch {epoch + 1}; lower --lr")
            records.append({"epoch": epoch + 1, "phase": phase, "lr": lr, "loss": loss,
                             "train_running_accuracy": acc, "train_mean_a_z": a_z})
        evals, rules = None, None                 # a skipped epoch: the end scores afresh
        if test_store is not None and config.due(config.eval_every, epoch, out_of_time()):
            rules = [p if score_by_phase or p is None else config.paradigm for p, _ in plan]
            evals = run.evaluate(test_store, test, rules, config.threshold)
            for record, ev in zip(records, evals):
                if record is not None:
                    record.update(test_accuracy=ev[0]["accuracy"], test_saif=ev[0]["saif"])
        for h, record in zip(history, records):
            if record is not None:
                h.append(record)
        if callback is not None:
            callback(epoch, records, run)
    out = {"seeds": list(seeds), "states": run.seed_states(), "history": history, "run": run,
           "time_limited": time_limited}
    if test_store is not None:
        final = [config.paradigm] * len(seeds)                  # the paradigm's rule at the end
        final_train = run.evaluate(store, train, final, config.threshold)
        if rules != final:                          # else reuse the last epoch's evaluation
            evals = run.evaluate(test_store, test, final, config.threshold)
        out["results"] = [
            {"paradigm": config.paradigm, "seed": seed, "train": tr[0], "test": te[0],
             "history": h, "instances": {"train": tr[1], "test": te[1]},
             "resumed_from_epoch": start}
            for seed, tr, te, h in zip(seeds, final_train, evals, history)]
    return out
