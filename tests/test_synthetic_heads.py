"""The multi-head scenarios of Snell Sec. 5.2: every seed of a scenario gets its own head
set (the seeds share the rest of the model, so a repeated set would repeat the run)."""

import itertools
import math

import numpy as np
import pytest

from minimal_attn.backends.snell.synthetic_heads import SCENARIOS, multihead_runs
from minimal_attn.errors import InputError

#: The pool docs/synthetic.md reports (vocab 60, pool 24, base seed 0): 9 bad, 15 good.
DOC_POOL = {"good": list(range(9, 24)), "bad": list(range(9))}


def _sets(runs, scenario):
    return [frozenset(r.head_seeds) for r in runs if r.label == scenario]


def _random_pool(rng, size):
    bad = sorted(rng.choice(size, rng.integers(1, size), replace=False).tolist())
    return {"good": [c for c in range(size) if c not in bad], "bad": bad}


def test_every_seed_of_a_scenario_gets_a_distinct_head_set():
    runs, skipped = multihead_runs(6, 0, 8, DOC_POOL)
    assert not skipped
    for scenario in SCENARIOS:
        sets = _sets(runs, scenario)
        assert len(sets) == 6 and len(set(sets)) == 6, scenario
        assert all(len(s) == 8 for s in sets)
    assert all(s <= set(DOC_POOL["bad"]) for s in _sets(runs, "all-bad"))
    assert all(len(s & set(DOC_POOL["good"])) == 1 for s in _sets(runs, "one-good"))
    assert all(r.init_seed == 0 and r.data_seed == 0 for r in runs)


def test_distinct_sets_on_random_pools_and_a_pool_used_up_exactly():
    rng = np.random.default_rng(7)
    for _ in range(30):
        pool, heads, seeds = _random_pool(rng, 12), int(rng.integers(1, 5)), 4
        runs, skipped = multihead_runs(seeds, 3, heads, pool)
        for scenario in SCENARIOS:
            sets = _sets(runs, scenario)
            assert (scenario in skipped) == (sets == [])
            assert len(set(sets)) == len(sets) and len(sets) in (0, seeds)
    # as many seeds as sets: all-bad takes every set of 8 of the 9 bad heads once
    runs, skipped = multihead_runs(9, 0, 8, DOC_POOL)
    assert "all-bad" not in skipped
    every = {frozenset(c) for c in itertools.combinations(DOC_POOL["bad"], 8)}
    assert set(_sets(runs, "all-bad")) == every


def test_a_block_of_seeds_draws_what_the_whole_set_draws():
    whole, _ = multihead_runs(7, 0, 4, DOC_POOL)
    parts = []
    for first, n in ((0, 2), (2, 4), (6, 1)):
        part, skipped = multihead_runs(n, first, 4, DOC_POOL, pool_seed=0)
        assert not skipped
        parts += part
    for scenario in SCENARIOS:
        a = {r.seed: r.head_seeds for r in whole if r.label == scenario}
        b = {r.seed: r.head_seeds for r in parts if r.label == scenario}
        assert a == b and sorted(a) == list(range(7)), scenario
    assert all(r.init_seed == 0 for r in parts)


def test_a_pool_with_too_few_sets_skips_the_scenario_with_the_fix():
    # all-bad: C(9, 8) = 9 sets; one-good with one good head: 1 * C(4, 3) = 4
    runs, skipped = multihead_runs(10, 0, 8, DOC_POOL)
    assert set(skipped) == {"all-bad"}
    n_sets = math.comb(len(DOC_POOL["bad"]), 8)
    why = skipped["all-bad"]
    assert f"{n_sets} distinct sets" in why and "--pool" in why and "--seeds" in why
    assert "\n" not in why and _sets(runs, "all-bad") == []
    small = {"good": [5], "bad": [0, 1, 2, 3]}              # K = 4: one-good 1 * C(4, 3)
    runs, skipped = multihead_runs(4, 0, 4, small)
    assert set(skipped) == {"all-bad"} and len(set(_sets(runs, "one-good"))) == 4
    assert f"{math.comb(4, 4)} distinct sets" in skipped["all-bad"]
    _, skipped = multihead_runs(5, 0, 4, small)
    assert set(skipped) == {"one-good", "all-bad"}
    assert f"{1 * math.comb(4, 3)} distinct sets" in skipped["one-good"]
    # a later block counts the seeds before it: seeds 8-9 need sets 8 and 9 of 9
    assert "all-bad" in multihead_runs(2, 8, 8, DOC_POOL, pool_seed=0)[1]
    assert "all-bad" not in multihead_runs(1, 8, 8, DOC_POOL, pool_seed=0)[1]


def test_seeds_below_the_pool_seed_are_refused():
    with pytest.raises(InputError, match="first_seed 1 is below pool_seed 2"):
        multihead_runs(2, 1, 2, DOC_POOL, pool_seed=2)
    pytest.importorskip("torch")
    from minimal_attn.backends.snell.synthetic_experiments import check_synthetic
    from minimal_attn.backends.snell.synthetic_train import SyntheticConfig

    with pytest.raises(InputError, match="below pool_seed") as err:
        check_synthetic("multihead", SyntheticConfig(steps=2, hidden=4), seeds=2,
                        first_seed=0, pool_seed=1)
    assert err.value.param == "first_seed" and "\n" not in str(err.value)
