r"""The synthetic experiments of Snell et al. (2021) end to end: runs, results.json, figures.

=============  ======================================  ==========================
task           conditions (first one fills "seeds")    paper
=============  ======================================  ==========================
copy           permutation, control                    Sec. 3.3, Fig. 3 left, Fig. 4
copy-control   control                                 Sec. 3.3 (blue curves)
copy-mixture   mixture, control                        Fig. 3 right, App. A.3, Fig. 8
multihead      independent, one-good, all-bad          Sec. 5.2, Snell Eqs. (20)-(21), Fig. 6
keyword        keyword (uniform attention)             Sec. 6.1, Snell Eqs. (22)-(24), Figs. 5, 7
permute        permutation-function, copy              Sec. 6.2, Snell Eq. (25)
=============  ======================================  ==========================

Every condition trains ``seeds`` runs; all runs of a task are one seed-batched
model (:func:`.synthetic_train.train_runs`). Run ``(condition, s)`` is
initialised from seed ``s`` and reads data stream ``s``, so conditions are
paired by seed.

**Multi-head (Sec. 5.2).** The paper leaves open what is held fixed while a head
is screened; here everything but the heads is: every multi-head run and every
screened candidate starts the rest of the model (embeddings, LSTMs, N) from
``first_seed`` (or ``pool_seed``) and reads its data stream, so a head is *good*
or *bad* by itself (:mod:`.synthetic_heads`: the pool, its cache
``DIR/head_pool.json``, the scenarios). A scenario the pool cannot fill is listed
under ``"skipped"`` with the counts.
"""

import os
from dataclasses import asdict, replace

import numpy as np

from minimal_attn import synthetic_tasks as tasks
from minimal_attn.backends.snell.synthetic_heads import (
    SCENARIOS,
    check_head_pool,
    multihead_runs,
    screen_heads,
)
from minimal_attn.backends.snell.synthetic_train import (
    CONVERGED,
    FAILED,
    Run,
    estimate_bytes,
    read_checkpoint,
    train_runs,
)
from minimal_attn.errors import InputError, check_int_at_least, check_positive, check_seeds
from minimal_attn.experiments import plots
from minimal_attn.experiments.io import check_output_dir, ensure_dir, undo_on_refusal, write_json
from minimal_attn.experiments.resources import check_memory, check_steps
from minimal_attn.experiments.run_folders import check_run_folder

TASKS = {
    "copy": ("permutation", "control"),
    "copy-control": ("control",),
    "copy-mixture": ("mixture", "control"),
    "multihead": SCENARIOS,
    "keyword": ("keyword",),
    "permute": ("permutation-function", "copy"),
}
TITLES = {
    "copy": "permutation copy vs control (Snell Fig. 3 left)",
    "copy-control": "copy control: 40 of 60 types (Snell Sec. 3.3)",
    "copy-mixture": "mixture of permutations vs control (Snell Fig. 3 right)",
    "multihead": "8-head rescue (Snell Fig. 6)",
    "keyword": "keyword toy, uniform attention (Snell Sec. 6.1)",
    "permute": "permutation function vs copy (Snell Sec. 6.2)",
}


def _check_count(name, value, low=1):
    check_int_at_least(name, value, low, param=name)


def fractions(seed_objects):
    """Converged (> 0.95) and failed (< 0.60) fractions of final accuracies, Sec. 3.3."""
    final = np.array([s["accuracy"][-1] for s in seed_objects])
    return {"converged_fraction": float(np.mean(final > CONVERGED)),
            "failed_fraction": float(np.mean(final < FAILED))}


def per_run_curves(curves, runs):
    """Split batched curves into one results.json object per run (Sec. 3.3 thresholds)."""
    out = []
    for r, run in enumerate(runs):
        acc = [float(a[r]) for a in curves["accuracy"]]
        obj = {"seed": run.seed, "condition": run.label or run.condition,
               "step": list(curves["step"]), "accuracy": acc,
               "final_accuracy": acc[-1], "converged": acc[-1] > CONVERGED,
               "converged_step": next((st for st, a in zip(curves["step"], acc)
                                       if a > CONVERGED), None),
               "failed": acc[-1] < FAILED}
        for key in curves:
            if key.startswith("gamma_") or key == "focus":
                obj[key] = [float(g[r]) for g in curves[key]]
        if "switch_step" in curves:
            obj["switch_step"] = curves["switch_step"][r]
        out.append(obj)
    return out


def plain_runs(task, seeds, first_seed):
    """Runs of every condition of a non-multihead task, paired by seed."""
    heads = lambda s: [] if task == "keyword" else [s]            # noqa: E731
    return [Run(cond, s, init_seed=s, head_seeds=heads(s), data_seed=s)
            for cond in TASKS[task] for s in range(first_seed, first_seed + seeds)]


def _count_table_figure(task, first_seed, out_dir):
    """Figs. 4, 5, 8: the count table C of the task's first condition; returns the file name."""
    cond = TASKS[task][0]
    if task == "keyword":
        x, y, _ = tasks.batch_stream("keyword", first_seed, -1, 400)
        C, _ = tasks.count_tables(x, y[:, None] + 1, tasks.LENGTH)
        C, cols = C[1:, 1:3], ["negative", "positive"]               # words x labels
    else:
        src, tgt = tasks.batch_stream(cond, first_seed, -1, 400)
        C, _ = tasks.count_tables(src, tgt, tasks.SEQ_VOCAB[cond])
        C, cols = C[1:, 1:], None
    name = "count_table.png"
    plots.plot_count_table(C, os.path.join(out_dir, name),
                           f"count table C (Snell Eq. (16))\n{cond}, 400 pairs", col_labels=cols)
    return name


def config_paradigm(config, task):
    """Refuse a paradigm the task cannot use, or a hybrid switch outside 0..steps."""
    from minimal_attn.backends.snell.attention_losses import check_switch
    from minimal_attn.errors import check_paradigm

    paradigm = check_paradigm(config.paradigm)
    if paradigm != "sa" and task in ("keyword", "multihead"):
        raise InputError(f"--paradigm {paradigm} needs a one-head seq2seq task (copy, "
                         "copy-control, copy-mixture, permute); keyword and multihead are SA "
                         "only", param="paradigm")
    check_switch(config.switch_step, config.steps, paradigm)


def check_synthetic(task, config, seeds=4, first_seed=0, heads=8, pool=24, out_dir=None,
                    pool_seed=None, head_pool=None):
    """Refuse, before any work, a setting that cannot run, fit in memory or finish."""
    # torch only when called
    from minimal_attn.backends.snell.synthetic_graph import check_compile
    from minimal_attn.backends.torch_backend import get_device

    if task not in TASKS:
        raise InputError(f"unknown task {task!r}: use one of {', '.join(TASKS)}", param="task")
    for name, value in (("seeds", seeds), ("steps", config.steps), ("hidden", config.hidden),
                        ("batch_size", config.batch_size), ("n_test", config.n_test),
                        ("eval_every", config.eval_every), ("heads", heads), ("pool", pool)):
        _check_count(name, value)
    if config.embed is not None:
        _check_count("embed", config.embed)
    check_seeds("first_seed", first_seed, seeds, param="first_seed")
    if pool_seed is not None:
        _check_count("pool_seed", pool_seed, 0)
        if task == "multihead" and first_seed < pool_seed:    # seed s takes head set s - pool_seed
            raise InputError(f"first_seed {first_seed} is below pool_seed {pool_seed}: number "
                             "the multi-head seeds from the pool's seed on", param="first_seed")
    if head_pool is not None:
        if task != "multihead":
            raise InputError(f"a head pool is for task multihead, not {task}: drop it",
                             param="head_pool")
        check_head_pool(head_pool, first_seed if pool_seed is None else pool_seed, pool,
                        config)
    check_positive("lr", config.lr, param="lr")
    if config.time_limit is not None:
        check_positive("time_limit", config.time_limit, param="time_limit")
    device = str(get_device(config.device, param="device"))         # "auto" names one
    check_compile(config.compile, device)
    config_paradigm(config, task)
    check_steps(config.steps, f"training {task}", param="steps")
    if task == "multihead":
        n_runs = 3 * seeds if head_pool is not None else max(pool, 3 * seeds)
        size = ("seeds", "pool", "hidden", "batch_size")
    else:
        n_runs, size = seeds * len(TASKS[task]), ("seeds", "hidden", "batch_size")
    vocab = max(max(tasks.SEQ_VOCAB.get(c, tasks.LENGTH) for c in TASKS[task]),
                config.vocab or 0) + 1                      # as the batched model sizes it
    if config.vocab is not None:
        size += ("vocab",)
    check_memory(estimate_bytes(n_runs, config, vocab, heads if task == "multihead" else 1),
                 f"{n_runs} batched run(s) of LSTM width {config.hidden}", param=size)
    if out_dir is not None:
        check_output_dir(out_dir)
        check_run_folder(out_dir, "synthetic")     # not another command's run folder


def saved_eval_every(out_dir):
    """The ``eval_every`` of the run checkpointed in ``out_dir`` (None: no checkpoint).

    A resumed run that does not set it keeps the cadence it started with: the default,
    a twentieth of the steps (:func:`.config.sized_config`), would change with a larger
    ``steps`` and the checkpoint would be refused as another run's.
    """
    ckpt = os.path.join(out_dir, "checkpoints", "train.ckpt")
    if not any(os.path.exists(p) for p in (ckpt, ckpt + ".prev")):
        return None
    return (read_checkpoint(ckpt, aside=False) or {}).get("config", {}).get("eval_every")


def run_synthetic(task, config, seeds=4, first_seed=0, heads=8, pool=24, out_dir=None,
                  resume=False, progress=None, log=None, pool_seed=None, head_pool=None):
    """Train ``task`` over ``seeds`` seeds per condition; write results.json and figures.

    Parameters
    ----------
    task : one of TASKS
    config : SyntheticConfig (keyword forces ``uniform=True``)
    heads, pool : multihead only: heads K per model, candidate heads screened
    pool_seed : multihead only: the seed of the rest of the model (and of the data
        stream) that every candidate is screened in and every run starts from (default
        ``first_seed``); with it a block of seeds runs as part of a larger set
    head_pool : multihead only: the labelled pool to draw heads from instead of screening
        here (:func:`.synthetic_heads.label_pool`, e.g. of blocks screened by
        ``screen_candidates``); refused when screened with other settings (``pool_meta``)
    out_dir : folder for results.json, figures, checkpoints (None: nothing written)
    resume : continue from the checkpoints in ``out_dir`` (the head pool cache is
        reused whenever its settings match)
    progress : optional ``progress(label, done, total, note)`` of every step, the label
        naming the phase (``screening heads``, ``training``;
        :mod:`minimal_attn.experiments.progress`)
    log : optional ``log(line)`` for warnings

    Returns
    -------
    dict: ``seeds`` (first condition), ``converged_fraction``, ``failed_fraction``,
    ``conditions`` {name: {"seeds", fractions}}, and per task extras. A run
    refused midway (it diverged) leaves ``out_dir`` as it found it.
    """
    from minimal_attn.backends.devices import get_device

    # "auto" (or None) becomes the device it picks: the runs and checkpoints name a real one
    config = replace(config, device=str(get_device(config.device, param="device")))
    check_synthetic(task, config, seeds, first_seed, heads, pool, out_dir, pool_seed,
                    head_pool)
    with undo_on_refusal(out_dir):
        return _run(task, config, seeds, first_seed, heads, pool, out_dir, resume, progress,
                    log, pool_seed, head_pool)


def _run(task, config, seeds, first_seed, heads, pool, out_dir, resume, progress, log,
         pool_seed=None, head_pool=None):
    extra = {}
    ckpt = os.path.join(out_dir, "checkpoints", "train.ckpt") if out_dir else None
    if resume and ckpt and task == "multihead":    # a damaged checkpoint is refused before
        read_checkpoint(ckpt, aside=False)  # the head screening (train_runs reads it, warns)
    if task == "keyword":
        config = replace(config, uniform=True)
    if task == "multihead":
        pool_seed = first_seed if pool_seed is None else pool_seed
        screened = head_pool or screen_heads(pool_seed, pool, config, out_dir, progress,
                                             resume, log)
        runs, skipped = multihead_runs(seeds, first_seed, heads, screened, pool_seed)
        extra = {"head_pool": {k: screened[k] for k in ("good", "bad", "final_accuracy")},
                 "skipped": skipped, "heads": heads, "pool_seed": pool_seed}
    else:
        runs = plain_runs(task, seeds, first_seed)
    curves = train_runs(runs, config, ckpt, progress, resume, log)
    objects = per_run_curves(curves, runs)
    conditions = {}
    for obj in objects:
        conditions.setdefault(obj["condition"], {"seeds": []})["seeds"].append(obj)
    for entry in conditions.values():
        entry.update(fractions(entry["seeds"]))
    primary = conditions[TASKS[task][0]]
    result = {"task": task, "seeds": primary["seeds"],
              "converged_fraction": primary["converged_fraction"],
              "failed_fraction": primary["failed_fraction"],
              "conditions": conditions, "config": asdict(config),
              "first_seed": first_seed, "resumed_from_step": curves["resumed_from"],
              "stopped_at": curves["stopped_at"], "step_way": curves["step_way"], **extra}
    if out_dir is not None:
        ensure_dir(out_dir)
        figures = {"accuracy": "accuracy.png"}
        plots.plot_synthetic_curves(objects, os.path.join(out_dir, "accuracy.png"), TITLES[task])
        if task == "keyword":
            figures["gammas"] = "gammas.png"
            plots.plot_gammas(primary["seeds"], os.path.join(out_dir, "gammas.png"))
        if task != "multihead":
            figures["count_table"] = _count_table_figure(task, first_seed, out_dir)
        result["figures"] = figures
        write_json(os.path.join(out_dir, "results.json"), result)
    return result
