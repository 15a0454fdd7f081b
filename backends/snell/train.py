r"""Training one LSTM attention model of Snell et al. (2021), Appendix A.8, with checkpoints.

:func:`train_seq` trains a :class:`~.seq_models.Classifier` or
:class:`~.seq_models.Seq2Seq` with Adam and evaluates it at the paper's
steps (classification: 0, 10, 50, 100, 150, 200, 250 and every 250;
translation: 0, 50, 100, 500, 1000, 1500 and every 2000; the last step always; an
``auto`` hybrid also at its latest switch, :func:`.attention_losses.switch_deadline`).
At every evaluation step it writes ``eval_<step>.npz`` with the validation
(and optionally training-subset) attention alpha, the probe beta (for the
uniform and frozen models at every step, for the others at the last step) and
the saliency Delta (learned model, last step), then a checkpoint in the shared
format of :mod:`minimal_attn.experiments.checkpoints` (atomic, the previous one
kept as ``checkpoint.pt.prev``). A run in a folder that already holds a
checkpoint continues from it (an unreadable one from its ``.prev``; one of
other settings or data is refused); on the CPU the result equals an
uninterrupted run (``tests/test_seq_train.py``).

Batches: step s uses positions s*B .. (s+1)*B - 1 of a stream of per-epoch
permutations drawn from ``seed``, so the data order needs no saved state.
"""

import functools
import json
import os
import time
from dataclasses import asdict

import numpy as np
import torch

from minimal_attn.backends.snell.attention_losses import phase, switch_deadline, switch_now
from minimal_attn.backends.snell.batches import SplitTensors
from minimal_attn.backends.snell.config import (  # noqa: F401 (re-exported)
    LATER_DEFAULTS,
    LR_SCHEDULES,
    PAPER,
    SeqTrainConfig,
)
from minimal_attn.backends.snell.eval import batch_loss, evaluate
from minimal_attn.backends.snell.inputs import check_run, embeddings_hash, load_embeddings
from minimal_attn.backends.snell.run_files import (  # noqa: F401 (load_run re-exported)
    load_run,
    save_rows,
)
from minimal_attn.backends.snell.seq_models import Classifier, Seq2Seq
from minimal_attn.backends.snell.timing import Clock
from minimal_attn.backends.torch_backend import (
    get_device,
    optimizer_step,
    read_torch,
    set_threads,
)
from minimal_attn.errors import DivergedError
from minimal_attn.experiments.checkpoints import (
    checkpoint_header,
    data_fingerprint,
    read_checkpoint,
    read_json,
    write_checkpoint,
)
from minimal_attn.experiments.io import ensure_dir, write_json
from minimal_attn.experiments.progress import counter

#: train-seq's checkpoint identity (experiments/checkpoints.checkpoint_header)
FORMAT, KIND = 2, "seq"
#: Settings of how a run runs, not of what it computes: a checkpoint written under
#: other values continues
RUN_CONTROL = ("device", "time_limit", "threads")
#: On a GPU the divergence check reads the device every this many steps (and before
#: every evaluation), not at every step: a read waits for all queued work.
SYNC_EVERY = 50


def focus(alpha_rows):
    """Mean over tokens of max_l alpha_{t,l}: how concentrated the attention is (1/L: uniform)."""
    return float(np.mean(np.concatenate([a.max(-1) for a in alpha_rows])))


def build_model(task, c):
    if task.task == "classify":
        return Classifier(task.n_vocab, c.emb, c.hidden, c.attention)
    return Seq2Seq(task.n_vocab, c.hidden, c.out_hidden, 2, c.dropout, c.attention)


_PERMS = {}    # (seed, n, epoch) -> permutation; a few recent epochs


def batch_indices(step, batch_size, n, seed):
    """Example ids of training step ``step``: a slice of per-epoch permutations."""
    pos = np.arange(step * batch_size, (step + 1) * batch_size)
    out = np.empty(batch_size, dtype=np.int64)
    for epoch in np.unique(pos // n):
        key = (seed, n, int(epoch))
        if key not in _PERMS:
            if len(_PERMS) > 8:
                _PERMS.clear()
            _PERMS[key] = np.random.default_rng([seed, int(epoch)]).permutation(n)
        sel = pos // n == epoch
        out[sel] = _PERMS[key][pos[sel] % n]
    return out


def _evaluate_all(model, task, c, step, data, rule="sa", last=False):
    """One evaluation's history record and arrays; ``last``: the run ends here (also
    the probe beta and saliency Delta of a learned model), as at ``c.steps``."""
    model.rule = "ha" if rule == "hybrid" else rule
    last = last or step == c.steps
    beta_every = c.attention in ("uniform", "frozen")
    arrays, record = {}, {"step": step}
    splits = [("val", data["val"], None)] + ([("train", data["train"], c.train_eval)]
                                             if c.train_eval else [])
    for name, split, n in splits:
        r = evaluate(model, task, split, n, want_beta=beta_every or last,
                     want_delta=last and c.attention == "learned",
                     bleu=c.bleu and task.task == "translate")
        record[f"{name}_perf"], record[f"{name}_bleu"] = r["perf"], r["bleu"]
        if c.paradigm != "sa":
            record[f"{name}_focus"] = focus(r["alpha"])
        arrays.update({f"{name}_{k}": r[k] for k in ("alpha", "beta", "delta") if k in r})
    return record, arrays


def _write_changed(path, obj):
    """``write_json`` unless ``path`` already holds ``obj`` (a reused run touches nothing)."""
    try:
        if read_json(path) == json.loads(json.dumps(obj)):
            return
    except (OSError, ValueError):
        pass
    write_json(path, obj)


def train_seq(task, config, out_dir, progress=None, embeddings=None, log=None, label="train"):
    """Train one model on ``task`` (a :class:`minimal_attn.datasets.seq.TextTask`) into ``out_dir``.

    Continues from ``out_dir/checkpoint.pt`` when it exists (and was written with
    the same settings and data; an unreadable one falls back to its ``.prev``).
    ``config.time_limit`` (seconds from the call): training ends at the first
    evaluation step after it (and after at least one step of this call), evaluated
    as a last step (beta and Delta too) and marked ``time_limited`` in the history;
    a rerun continues from there.
    ``progress(label, done, total, note)`` hears of every step, and of every
    evaluation with its score as note (:mod:`minimal_attn.experiments.progress`);
    ``log(line)`` warnings.

    Returns
    -------
    dict with ``config`` (resolved), ``history`` (one record per evaluation step:
    ``val_perf``, ``val_bleu``, ...), ``out_dir`` and ``stopped_at`` (the step a time
    limit ended training at, else None)
    """
    start = time.perf_counter()
    c = config.resolved()
    device = str(get_device(c.device, param="device"))
    set_threads(c.threads)
    check_run(task, c)
    ckpt_path, fingerprint = os.path.join(out_dir, "checkpoint.pt"), data_fingerprint(task)
    comparable = {k: v for k, v in asdict(c).items()         # what the run computes
                  if k not in RUN_CONTROL and not (k in LATER_DEFAULTS
                                                   and v == LATER_DEFAULTS[k])}
    if embeddings is not None:     # read only when a model starts: a resume must name them
        comparable["embeddings"] = embeddings_hash(embeddings)[:12]
    state = read_checkpoint(ckpt_path, read_torch, FORMAT, KIND, comparable, fingerprint,
                            LATER_DEFAULTS, log=log, param="out")
    torch.manual_seed(c.seed)
    model = build_model(task, c).to(device)
    if embeddings is not None:
        load_embeddings(model, embeddings, task.itos, log)
    # foreach: the same arithmetic as the per-tensor loop (bit for bit), in fewer passes; the
    # default on a GPU, and on the CPU it saves a quarter of the (dense) embedding's update
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=c.lr,
                           foreach=True)
    step, history = 0, []
    ensure_dir(out_dir)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        torch.set_rng_state(state["rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state(state["cuda_rng"])
        step, history = state["step"], state["history"]
        _write_changed(os.path.join(out_dir, "history.json"), history)  # the checkpoint's
    _write_changed(os.path.join(out_dir, "config.json"),
                   {**{k: v for k, v in asdict(c).items() if k not in ("time_limit", "threads")},
                    "data": task.info})
    evals, done = _eval_steps(c), {h["step"] for h in history}
    switch = c.switch_step
    if switch == "auto":        # chosen while training, recorded in the history
        switch = next((h["switch_step"] for h in history if "switch_step" in h), None)

    def rule_at(k):         # the loss (and inference rule) in force at step k
        return phase(c.paradigm, k, c.steps + 1 if switch in (None, "auto") else switch)
    tick = counter(progress, label, c.steps, done=step)
    # every split padded on the device once; a batch is an index into it (.batches)
    data = {"train": SplitTensors(task, task.train_src, task.train_tgt, device),
            "val": SplitTensors(task, task.val_src, task.val_tgt, device)}
    model.train()
    first_bad = None          # set at the first training step (see below)
    # a time limit stops at an evaluation after this call has trained (so a rerun under
    # the same limit always gets on)
    first_step, stopped_at = step, None
    clock = Clock(out_dir, device, step, start)
    while True:
        if step in evals and step not in done:
            clock.evaluating(step)
            if (c.time_limit is not None and first_step < step < c.steps
                    and time.perf_counter() - start >= c.time_limit):
                stopped_at = step
            record, arrays = _evaluate_all(model, task, c, step, data, rule_at(step),
                                           last=stopped_at is not None)
            if stopped_at is not None:
                record["time_limited"] = True
            if c.switch_step == "auto" and switch in (None, "auto"):
                switch = _auto_switch(c, task, history + [record], step)
                if switch is not None:
                    record["switch_step"] = switch
            save_rows(os.path.join(out_dir, f"eval_{step:06d}.npz"), arrays)
            history.append(record)
            write_json(os.path.join(out_dir, "history.json"), history)
            saved = {**checkpoint_header(FORMAT, KIND, comparable, fingerprint),
                     "model": model.state_dict(), "opt": opt.state_dict(),
                     "rng": torch.get_rng_state(), "step": step, "history": history,
                     "cuda_rng": (torch.cuda.get_rng_state()
                                  if str(device).startswith("cuda") else None)}
            write_checkpoint(ckpt_path, functools.partial(torch.save, saved))
            clock.evaluated()
            tick(0, f"step {step} perf {record['val_perf']:.3f}")
        if step >= c.steps or stopped_at is not None:
            break
        if first_bad is None:
            first_bad = torch.tensor(-1, device=device)
            sync_every = _sync_every(device)
            clock.training()
        rule = model.rule = rule_at(step)
        idx = batch_indices(step, c.batch_size, len(task.train_src), c.seed)
        loss = batch_loss(model, task, data["train"].batch(idx), rule)
        # the first step with a non-finite loss, kept on the device: reading it syncs, so
        # on a GPU it is read every SYNC_EVERY steps and before each evaluation
        first_bad = torch.where(torch.isfinite(loss) | (first_bad >= 0), first_bad, step)
        if (step + 1) % sync_every == 0 or step + 1 in evals or step + 1 >= c.steps:
            _check_finite(first_bad)
        opt.zero_grad()
        loss.backward()
        if c.clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.clip)
        for group in opt.param_groups:
            group["lr"] = c.lr_at(step)
        optimizer_step(opt, step)
        step += 1
        tick()
    return {"config": asdict(c), "history": history, "out_dir": out_dir,
            "stopped_at": stopped_at}


def _eval_steps(c):
    """The paper's evaluation steps, and an auto hybrid's latest switch (so it is met)."""
    evals = c.eval_steps()
    if c.switch_step == "auto":
        evals = sorted(set(evals) | {switch_deadline(c.steps)})
    return evals


def _sync_every(device):
    """Steps between reads of the divergence flag: every step on the CPU (a read is free)."""
    return 1 if torch.device(device).type == "cpu" else SYNC_EVERY


def _check_finite(first_bad):
    """Raise the divergence of the first step whose loss was not finite, if any."""
    bad = int(first_bad)
    if bad >= 0:
        raise DivergedError(f"training diverged at step {bad} (the loss is not finite); "
                            "lower --lr", param="lr")


def _auto_switch(c, task, history, step):
    """``step`` when the hybrid switches there (mean source length as m), else None."""
    m = float(np.mean([len(x) for x in task.val_src]))
    return step if switch_now([h["val_focus"] for h in history], m, step, c.steps) else None
