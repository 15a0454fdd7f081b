r"""The multi-head rescue of Snell Sec. 5.2: the screened pool of candidate heads and
the runs of its three scenarios (Snell Eqs. (20)-(21), Fig. 6).

A candidate head ``W^(c)`` (head seed ``c``) is *good* when the single-head model
with it converges (final accuracy > 0.95), everything but the head started from
``pool_seed`` on data stream ``pool_seed``, so good is a property of the head
alone. Every candidate is a run of its own in a seed-batched model, so the pool
can be screened in blocks (:func:`screen_candidates`) and labelled once joined
(:func:`label_pool`); :func:`screen_heads` screens a whole pool and caches it.
Seed ``s`` of *all-bad* draws ``K`` distinct bad heads, *one-good* one good and
``K - 1`` bad ones, *independent* ``K`` unscreened heads (:func:`multihead_runs`); the
seeds of a scenario get distinct head sets (:func:`head_sets`), since they share the
rest of the model and a repeated set would repeat the run.
"""

import math
import os
from dataclasses import asdict, replace

import numpy as np

from minimal_attn.backends.snell.synthetic_train import CONVERGED, Run, train_runs
from minimal_attn.errors import InputError
from minimal_attn.experiments.checkpoints import load_guarded, read_json
from minimal_attn.experiments.io import ensure_dir, write_json

SCENARIOS = ("independent", "one-good", "all-bad")
INDEPENDENT_HEAD_OFFSET = 100_000     # unscreened heads never reuse a pool candidate


def _pool_problem(cached):
    keys = {"meta", "good", "bad", "final_accuracy"}
    return None if isinstance(cached, dict) and keys <= set(cached) else "not a head pool"


def pool_meta(pool_seed, pool, config):
    """What a head pool's labels depend on: the model seed the candidates are screened
    in, the pool size and the training settings (not where or how long it ran)."""
    return {"first_seed": pool_seed, "pool": pool,
            "config": {k: v for k, v in asdict(config).items()
                       if k not in ("device", "time_limit")}}


def label_pool(meta, final_accuracy):
    """A head pool from its candidates' final accuracies: candidate ``c`` is good when
    the single-head model with head ``W^(c)`` converged (> 0.95, Sec. 5.2)."""
    final = [float(a) for a in final_accuracy]
    return {"meta": meta, "final_accuracy": final,
            "good": [c for c, a in enumerate(final) if a > CONVERGED],
            "bad": [c for c, a in enumerate(final) if a <= CONVERGED]}


def screen_candidates(pool_seed, candidates, config, checkpoint=None, progress=None,
                      resume=True, log=None):
    """Train the single-head models of head candidates ``candidates`` (head seeds), the
    rest of each model from ``pool_seed`` on data stream ``pool_seed`` (Sec. 5.2).

    Each candidate is a run of its own in one seed-batched model, so any block of the
    pool screens as the whole pool does. Returns ``{"final_accuracy": [...],
    "stopped_at", "step_way"}``: ``stopped_at`` is the step a ``config.time_limit`` ended
    the screening at (its accuracies are then no labels), None when it ran to
    ``config.steps``; ``step_way`` how the steps ran (:func:`.synthetic_train.train_runs`).
    """
    runs = [Run("permutation", c, init_seed=pool_seed, head_seeds=[c], data_seed=pool_seed,
                label="candidate") for c in candidates]
    curves = train_runs(runs, config, checkpoint, progress, resume, log,
                        label="screening heads")
    return {"final_accuracy": [float(a) for a in curves["accuracy"][-1]],
            "stopped_at": curves["stopped_at"], "step_way": curves["step_way"]}


def screen_heads(first_seed, pool, config, out_dir, progress=None, resume=True, log=None):
    """Good/bad labels of ``pool`` candidate heads (Sec. 5.2 rejection sampling), cached."""
    # the labels need the screening complete: no time limit here
    config = replace(config, time_limit=None)
    meta = pool_meta(first_seed, pool, config)
    path = os.path.join(out_dir, "head_pool.json") if out_dir else None
    if path:
        cached = load_guarded(path, read_json, _pool_problem, what="head pool cache",
                              fix="delete it to screen the heads again", prev=False)
        if cached is not None and cached["meta"] == meta:
            return cached
    ckpt = os.path.join(out_dir, "checkpoints", "head_pool.ckpt") if out_dir else None
    final = screen_candidates(first_seed, range(pool), config, ckpt, progress, resume,
                              log)["final_accuracy"]
    result = label_pool(meta, final)
    if path:
        ensure_dir(out_dir)
        write_json(path, result)
    return result


def check_head_pool(head_pool, pool_seed, pool, config):
    """Refuse a given head pool screened with other settings than this run's."""
    problem = _pool_problem(head_pool) and "is not a head pool (meta, good, bad, final_accuracy)"
    if problem is None and head_pool["meta"] != pool_meta(pool_seed, pool, config):
        problem = (f"was screened with other settings ({head_pool['meta']}) than this run's "
                   f"({pool_meta(pool_seed, pool, config)})")
    if problem is None and len(head_pool["final_accuracy"]) != pool:
        problem = f"has {len(head_pool['final_accuracy'])} candidates, not {pool}"
    if problem:
        raise InputError(f"the given head pool {problem}: screen it again with these "
                         "settings (or pass none)", param="head_pool")


def head_sets(scenario, screened, heads, count):
    """The first ``count`` distinct head sets of ``scenario`` (sorted lists of head seeds).

    One random stream keyed on the scenario (not on a seed) draws sets (*all-bad*: ``K``
    distinct bad heads; *one-good*: one good and ``K - 1`` bad) and keeps each new set
    (as a set: Snell Eq. (21) sums the contexts, so order makes no difference), so seed index
    ``i`` takes the ``i``-th: any block of seeds draws what the whole set draws. Needs
    ``count <= n_head_sets(...)``.
    """
    good, bad = screened["good"], screened["bad"]
    rng = np.random.default_rng([52, SCENARIOS.index(scenario)])
    seen, out = set(), []
    while len(out) < count:
        chosen = [] if scenario == "all-bad" else [rng.choice(good)]
        chosen = sorted(int(h) for h in chosen + list(rng.choice(bad, heads - len(chosen),
                                                                 replace=False)))
        if tuple(chosen) not in seen:
            seen.add(tuple(chosen))
            out.append(chosen)
    return out


def n_head_sets(scenario, screened, heads):
    """How many distinct head sets the pool holds: C(n_bad, K) for all-bad,
    n_good * C(n_bad, K - 1) for one-good."""
    n_good, n_bad = len(screened["good"]), len(screened["bad"])
    if scenario == "all-bad":
        return math.comb(n_bad, heads)
    return n_good * math.comb(n_bad, heads - 1)


def multihead_runs(seeds, first_seed, heads, screened, pool_seed=None):
    """Runs of the three Sec. 5.2 scenarios and the scenarios the pool cannot fill.

    Seeds ``first_seed .. first_seed + seeds - 1``; every run starts the rest of the
    model from ``pool_seed`` (default ``first_seed``) on its data stream, so the seeds of
    a scenario differ only in their heads, and each gets a head set of its own: seed
    ``s`` takes the ``(s - pool_seed)``-th distinct set (:func:`head_sets`), so a block
    of seeds runs as in the whole set. A scenario whose pool holds too few distinct sets
    is skipped, with the reason.
    """
    pool_seed = first_seed if pool_seed is None else pool_seed
    if first_seed < pool_seed:
        raise InputError(f"first_seed {first_seed} is below pool_seed {pool_seed}: number "
                         "the multi-head seeds from the pool's seed on", param="first_seed")
    need = first_seed - pool_seed + seeds              # seed indices 0 .. need - 1
    runs, skipped = [], {}
    for scenario in SCENARIOS:
        if scenario == "independent":       # fresh heads, distinct for distinct seeds
            sets = [[INDEPENDENT_HEAD_OFFSET + s * heads + k for k in range(heads)]
                    for s in range(first_seed, first_seed + seeds)]
        else:
            have = n_head_sets(scenario, screened, heads)
            if have < need:
                kind = (f"{heads} bad heads" if scenario == "all-bad" else
                        f"1 good and {heads - 1} bad heads")
                skipped[scenario] = (
                    f"the pool ({len(screened['good'])} good, {len(screened['bad'])} bad "
                    f"heads) holds {have} distinct sets of {kind}; seeds {pool_seed}-"
                    f"{first_seed + seeds - 1} need {need}: raise --pool or lower --seeds")
                continue
            sets = head_sets(scenario, screened, heads, need)[first_seed - pool_seed:]
        for s, chosen in zip(range(first_seed, first_seed + seeds), sets):
            runs.append(Run("permutation", s, init_seed=pool_seed, head_seeds=list(chosen),
                            data_seed=pool_seed, label=scenario))
    return runs, skipped
