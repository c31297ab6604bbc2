"""The detector's cheap check of a call's outputs (`values.special_flags`): one add-reduction
per leaf, then NaN told from Inf for the leaves it hit. Every special value, every floating
dtype, large outputs (the fused jitted path) and small ones (the host path)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from nanguard.jax.detector.values import special_flags

DTYPES = [jnp.float32, jnp.bfloat16, jnp.float16, jnp.complex64]


def leaf(value, dtype, n):
    x = jnp.zeros((n,), dtype)
    return x if value is None else x.at[n // 3].set(value)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("n", [10, 5000], ids=["host", "fused"])
def test_each_leaf_says_nan_and_inf_exactly(dtype, n):
    big = float(jnp.finfo(dtype).max)  # finite: big * 0 is 0, not NaN
    tiny = float(jnp.finfo(dtype).smallest_subnormal)
    values = [None, np.nan, np.inf, -np.inf, big, -big, tiny, -0.0]
    expected = [[False, False], [True, False], [False, True], [False, True]] + [[False, False]] * 4
    assert special_flags([leaf(v, dtype, n) for v in values]).tolist() == expected


def test_a_leaf_with_both_and_only_the_hit_leaves_among_many():
    leaves = [jnp.ones((100, 100)) for _ in range(20)]
    leaves[7] = leaves[7].at[0, 0].set(jnp.nan).at[5, 5].set(-jnp.inf)
    leaves[13] = leaves[13].at[99, 99].set(jnp.inf)
    flags = special_flags(leaves)
    assert flags.shape == (20, 2)
    assert flags[7].tolist() == [True, True] and flags[13].tolist() == [False, True]
    assert not np.delete(flags, [7, 13], axis=0).any()
    assert special_flags([]).shape == (0, 2)


@pytest.mark.parametrize("dtype,value", [(jnp.float32, 3e38), (jnp.float16, 60000.0), (jnp.bfloat16, 3e38)])
def test_finite_leaves_whose_sum_overflows_are_finite(dtype, value):
    # the cheap check sums each leaf: an overflowing sum is settled leaf by leaf, not reported
    leaves = [jnp.full((5000,), value, dtype), jnp.full((5000,), -value, dtype).at[7].set(jnp.inf)]
    np.testing.assert_array_equal(special_flags(leaves), [[False, False], [False, True]])
