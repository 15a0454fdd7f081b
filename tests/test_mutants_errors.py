"""Mutation audit of minimal_attn.errors: the edges of check_seeds and check_alpha that no
test stood on. Seeds run in [0, MAX_SEED] with MAX_SEED = 2**31 - 1 (the documented limit
both torch and NumPy take); alpha is a number in the closed interval [0, 1]."""

import pytest

from minimal_attn.errors import MAX_SEED, InputError, check_alpha, check_seeds


def test_max_seed_is_the_largest_31_bit_integer():
    assert MAX_SEED == 2**31 - 1 == 2147483647


def test_the_last_seed_may_be_max_seed_and_no_further():
    assert check_seeds("seed", 2**31 - 1) == 2**31 - 1            # one seed: first = last
    with pytest.raises(InputError, match=r"seed must be at most 2147483647 .*got 2147483648"):
        check_seeds("seed", 2**31)
    # ten runs from first: seeds first .. first + 9, the last of them at most MAX_SEED
    assert check_seeds("seed", 2**31 - 10, count=10) == 2**31 - 10
    with pytest.raises(InputError, match=r"seed must be at most 2147483638 \(seeds run up"):
        check_seeds("seed", 2**31 - 9, count=10)


@pytest.mark.parametrize("alpha", [0, 0.0, 1, 1.0])
def test_alpha_takes_both_ends_of_the_unit_interval(alpha):
    assert check_alpha(alpha) == float(alpha)


@pytest.mark.parametrize("alpha", [-1e-12, 1 + 1e-12])
def test_alpha_just_outside_the_unit_interval_is_refused(alpha):
    with pytest.raises(InputError, match=r"alpha must lie in \[0, 1\]"):
        check_alpha(alpha)
