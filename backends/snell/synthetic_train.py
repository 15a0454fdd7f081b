r"""Train many seeds of a synthetic task as one seed-batched model (Snell Secs. 3.3, 5.2, 6.1, 6.2).

A *run* is one (condition, seed) pair: its own initialisation
(``init_seed``, ``head_seeds``), its own data stream
(:func:`minimal_attn.synthetic_tasks.batch_stream` of ``data_seed``) and its
own result. :func:`train_runs` trains a list of runs together: one forward
over the stacked parameters, the *sum* of per-run losses, one backward, one
Adam step; because the runs share no parameter and Adam is elementwise, run
``r`` follows the same trajectory as if it were trained alone
(``tests/test_synthetic_models.py`` checks this for 3 seeds).

Every ``eval_every`` steps (an ``auto`` hybrid also at its latest switch,
:func:`.attention_losses.switch_deadline`) each run is scored on its own fixed test sample
(teacher-forced token accuracy for seq2seq, accuracy and the Sec. 6.1 log-odds
gamma for the keyword classifier) and the whole state (parameters, Adam,
curves) is written to ``checkpoint`` in the shared format of
:mod:`minimal_attn.experiments.checkpoints` (atomic, the previous one kept as
``.prev``); ``train_runs`` resumes from it exactly (the data stream is a
function of the step, so nothing else is saved), falls back to the ``.prev``
of an unreadable one and refuses one of other settings.
"""

from dataclasses import asdict, dataclass, field

import numpy as np

from minimal_attn.backends.snell.config import (  # noqa: F401 (re-exported)
    SYNTHETIC_SIZES,
    SyntheticConfig,
    sized_config,
)
from minimal_attn.errors import DivergedError, InputError
from minimal_attn.experiments import checkpoints
from minimal_attn.synthetic_tasks import LENGTH, SEQ_VOCAB, batch_stream

CHECKPOINT_FORMAT, KIND = 2, "synthetic"
#: Final test accuracy above which a run converged / below which it failed. Our reading of
#: Sec. 3.3's curves (Figs. 3, 6): the paper shows the curves and gives no number.
CONVERGED, FAILED = 0.95, 0.60


@dataclass
class Run:
    """One curve of a figure: a condition trained from one initialisation on one data stream."""

    condition: str                    # data distribution, a key of batch_stream
    seed: int                         # the seed reported in results.json
    init_seed: int                    # model generator seed
    head_seeds: list = field(default_factory=list)   # one per head; [] for the classifier
    data_seed: int = 0                # data stream seed
    label: str = ""                   # condition shown in results/figure (default: condition)


def estimate_bytes(n_runs, config, n_vocab, heads=1):
    """Memory ``n_runs`` batched runs need (bytes, an estimate): the parameters with their
    gradients and two Adam moments, the activations one step keeps for the backward
    pass, and the fixed test sequences."""
    E, H, V, L = config.embed or config.hidden, config.hidden, n_vocab, LENGTH
    size = 8 if config.dtype == "float64" else 4
    lstm = (E + H + 1) * 4 * H
    params = 2 * V * E + 2 * lstm + heads * H * H + 2 * H * H + H + H * V + V
    # per sequence: embeddings, gates and states of two LSTMs, attention, N and logits
    step = config.batch_size * L * (2 * (E + 7 * H) + heads * L + 3 * H + 3 * V)
    return n_runs * (size * (4 * params + 2 * step) + 8 * 2 * L * config.n_test)


def _stack_batches(runs, step, n, device):
    """Per-run batches of ``step`` stacked on the seed axis, as torch tensors on ``device``."""
    import torch

    parts = [batch_stream(r.condition, r.data_seed, step, n) for r in runs]
    return [torch.as_tensor(np.stack(p), device=device) for p in zip(*parts)]


def _is_keyword(runs):
    kinds = {r.condition == "keyword" for r in runs}
    if len(kinds) != 1:
        raise InputError("runs mix the keyword classifier with seq2seq tasks; train them apart")
    return kinds.pop()


def init_params(runs, config):
    """Stacked initial parameters of ``runs`` (see :mod:`.batched_lstm`)."""
    import torch

    from minimal_attn.backends.snell import batched_lstm as tsm
    from minimal_attn.backends.torch_backend import get_device

    dtype, device = getattr(torch, config.dtype), get_device(config.device, param="device")
    if _is_keyword(runs):
        return tsm.init_classifier([r.init_seed for r in runs], LENGTH + 1, config.hidden,
                                   config.embed, dtype, device)
    # one shared vocabulary, the largest of the runs' conditions (ids 0..V), or config.vocab
    need = max(SEQ_VOCAB[r.condition] for r in runs)
    if config.vocab is not None and config.vocab < need:
        raise InputError(f"vocab must be at least {need} for these tasks, got {config.vocab}",
                         param="vocab")
    if len({len(r.head_seeds) for r in runs}) != 1:
        raise InputError("runs batched together need the same number of heads")
    return tsm.init_seq2seq([r.init_seed for r in runs], [r.head_seeds for r in runs],
                            (config.vocab or need) + 1, config.hidden, config.embed, dtype,
                            device)


def _loss(params, batch, keyword, uniform, phases="sa"):
    from minimal_attn.backends.snell import batched_lstm as tsm

    if keyword:
        return tsm.classifier_loss(params, batch[0], batch[1])
    return tsm.seq2seq_loss(params, batch[0], batch[1], uniform, phases)


#: Fields added with the paradigms: left out of a checkpoint's settings at these values, so
#: an SA run written before them still resumes.
LATER_DEFAULTS = {"paradigm": "sa", "switch_step": None}


def switch_steps(config, n_runs):
    """Per-run first HA step of a hybrid (None: not yet chosen by ``auto``; SA/HA/LV: None)."""
    if config.paradigm != "hybrid":
        return [None] * n_runs
    if config.switch_step == "auto":
        return [None] * n_runs
    return [config.steps // 2 if config.switch_step is None else int(config.switch_step)] * n_runs


def phases_at(config, step, switches):
    """The loss in force for every run at ``step`` (V&R's hybrid: SA, then HA)."""
    from minimal_attn.losses import phase

    return [phase(config.paradigm, step, config.steps + 1 if s is None else s)
            for s in switches]


def evaluate(params, runs, config, chunk=50, phases="sa"):
    """Each run on its own fixed test sample: {"accuracy": (R,)} (+ gamma_* for keyword;
    + ``focus``, the mean max_l alpha, when the paradigm is not SA); ``phases``: each run's
    inference rule."""
    import torch

    from minimal_attn.backends.snell import batched_lstm as tsm

    keyword = _is_keyword(runs)
    test = _stack_batches(runs, -1, config.n_test, params["enc_Wx"].device)
    sums = {}
    with torch.no_grad():
        for lo in range(0, config.n_test, chunk):
            part = [t[:, lo:lo + chunk] for t in test]
            w = part[0].shape[1] / config.n_test
            out = {"accuracy": _loss(params, part, keyword, config.uniform, phases)[1]}
            if config.paradigm != "sa" and not keyword:
                out["focus"] = tsm.seq2seq_focus(params, *part, config.uniform)
            for k, v in out.items():
                sums[k] = sums.get(k, 0) + w * v.double().cpu().numpy()
            if keyword:    # gamma averages over the positives: summed here, divided below
                for k, (total, count) in tsm.keyword_gammas(params, *part, sums=True).items():
                    for key, v in ((f"gamma_{k}", total), (f"positives_{k}", count)):
                        sums[key] = sums.get(key, 0) + v.double().cpu().numpy()
    for k in [k for k in sums if k.startswith("positives_")]:
        count = sums.pop(k)
        gamma = "gamma_" + k[len("positives_"):]
        sums[gamma] = sums[gamma] / np.maximum(count, 1)
    return {k: v.tolist() for k, v in sums.items()}


def _comparable(runs, config):
    """What a checkpoint must share with the run resuming it (``steps`` may grow)."""
    cfg = {k: v for k, v in asdict(config).items()
           if k not in ("device", "steps", "time_limit", "compile")
           and not (k in LATER_DEFAULTS and v == LATER_DEFAULTS[k])}
    if config.paradigm == "hybrid":       # its switch (steps // 2, auto's latest) needs them
        cfg["steps"] = config.steps
    return {**cfg, "runs": [asdict(r) for r in runs]}


def _save(path, settings, state):
    """The shared checkpoint header, then ``state``, written atomically at ``path``."""
    import torch

    state = {**checkpoints.checkpoint_header(CHECKPOINT_FORMAT, KIND, settings), **state}
    checkpoints.write_checkpoint(path, lambda f: torch.save(state, f))


def _read(path):
    """A synthetic checkpoint; one written before the shared header kept its settings
    under ``meta`` (same format 2), which is mapped onto ``config``."""
    from minimal_attn.backends.torch_backend import read_torch

    state = read_torch(path)
    if isinstance(state, dict) and "config" not in state and "meta" in state:
        state["config"] = {**state["meta"]["config"], "runs": state["meta"]["runs"]}
    return state


def read_checkpoint(path, settings=None, log=None, aside=True):
    """The saved state at ``path`` (or its ``.prev``) for runs whose settings are
    ``settings`` (None: any readable synthetic checkpoint); ``aside=False`` for a read
    that only looks (an unreadable ``path`` stays, for the resuming read to set aside)."""
    return checkpoints.read_checkpoint(path, _read, CHECKPOINT_FORMAT, KIND, settings, log=log,
                                       aside=aside)


def _record(curves, step, scores):
    curves["step"].append(step)
    for k, v in scores.items():
        curves.setdefault(k, []).append(v)


def train_runs(runs, config, checkpoint=None, progress=None, resume=True, log=None,
               label="training"):
    """Train ``runs`` as one seed-batched model; return per-run curves.

    Parameters
    ----------
    runs : list of Run        (all seq2seq, or all keyword)
    config : SyntheticConfig
    checkpoint : path or None; written after every evaluation
    resume : continue from ``checkpoint`` when it exists (a mismatched one raises
        InputError; an unreadable one falls back to its ``.prev``); False starts
        afresh and overwrites it
    config.time_limit : seconds; training ends at the first evaluation after it, and
        ``"stopped_at"`` gives that step (None: the run reached config.steps)
    progress : optional ``progress(label, step, total_steps, note)`` after every step, the
        mean loss as note at each evaluation (:mod:`minimal_attn.experiments.progress`)
        (``mean_loss`` is a float at evaluation steps, else None: reading it syncs a GPU)
    log : optional ``log(line)`` for warnings (a checkpoint replaced by its ``.prev``)

    config.compile : ``cudagraph`` (CUDA) replays each step as a CUDA graph, checked
        against an eager step first (:mod:`.synthetic_graph`)

    Returns
    -------
    dict ``{"step": [...], "accuracy": [[per run] per eval], ...}`` plus ``"resumed_from"``,
    ``"stopped_at"``, ``"step_way"`` (how the steps ran: ``none``, ``cudagraph``, or
    ``none (why the graph was given up)``) and ``"params"``.
    """
    import time

    import torch

    from minimal_attn.backends.snell import synthetic_graph
    from minimal_attn.backends.snell.attention_losses import switch_deadline

    t0, stopped_at = time.perf_counter(), None
    synthetic_graph.check_compile(config.compile, config.device)
    params = init_params(runs, config)
    optimizer = synthetic_graph.make_adam(params.values(), config.lr, config.compile)
    keyword, device = _is_keyword(runs), params["enc_Wx"].device
    settings = _comparable(runs, config)
    curves, start = {"step": []}, 0
    state = read_checkpoint(checkpoint, settings, log) if resume and checkpoint else None
    if state is not None:
        with torch.no_grad():
            for k, v in state["params"].items():
                params[k].copy_(v)
        optimizer.load_state_dict(state["optimizer"])
        synthetic_graph.set_capturable(optimizer, config.compile == "cudagraph")
        curves, start = state["curves"], state["step"]
    resumed_from = start
    if config.paradigm != "sa":
        if keyword or len(runs[0].head_seeds) != 1:
            raise InputError("--paradigm ha, lv and hybrid need a one-head seq2seq task "
                             "(copy, copy-control, copy-mixture, permute); use sa",
                             param="paradigm")
        curves.setdefault("switch_step", switch_steps(config, len(runs)))
    switches = curves.get("switch_step", [None] * len(runs))
    auto = config.paradigm == "hybrid" and config.switch_step == "auto"
    if start == 0 and not curves["step"]:
        _record(curves, 0, evaluate(params, runs, config, phases=phases_at(config, 0, switches)))
        if auto:            # one step in all: the deadline is step 0
            _auto_switch(curves, switches, 0, config)
    step_of = synthetic_graph.step_runner(
        params, optimizer, lambda b, p: _loss(params, b, keyword, config.uniform, p)[0],
        config.compile, log)
    for step in range(start, config.steps):
        batch = _stack_batches(runs, step, config.batch_size, device)
        done = step + 1
        loss = step_of(batch, phases_at(config, step, switches), done)
        if done % config.eval_every == 0 or done == config.steps or \
                (auto and done == switch_deadline(config.steps)):
            value = float(loss.detach().mean())
            if not np.isfinite(value):
                raise DivergedError(f"training diverged at step {done} (loss {value}); "
                                    "lower --lr", param="lr")
            _record(curves, done, evaluate(params, runs, config,
                                           phases=phases_at(config, done, switches)))
            if auto:
                _auto_switch(curves, switches, done, config)
            if checkpoint is not None:
                _save(checkpoint, settings, {
                    "step": done, "params": {k: v.detach().cpu() for k, v in params.items()},
                    "optimizer": optimizer.state_dict(), "curves": curves})
            if progress:
                progress(label, done, config.steps, f"loss {value:.3f}")
            if config.time_limit is not None and done < config.steps and \
                    time.perf_counter() - t0 >= config.time_limit:
                stopped_at = done
                break
        elif progress:
            progress(label, done, config.steps, None)
    return dict(curves, resumed_from=resumed_from, stopped_at=stopped_at,
                step_way=step_of.way,
                params={k: v.detach() for k, v in params.items()})


def _auto_switch(curves, switches, done, config):
    """Switch each run still in SA whose focus has risen and stalled (m = L), or at the
    latest step (:func:`.attention_losses.switch_now`; ``train_runs`` evaluates there)."""
    from minimal_attn.backends.snell.attention_losses import switch_now

    for r, s in enumerate(switches):
        if s is None and switch_now([f[r] for f in curves["focus"]], LENGTH, done,
                                    config.steps):
            switches[r] = done
