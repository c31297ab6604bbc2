"""Numeric gradient checks away from every singular point: ``jax.test_util.check_grads`` in float64.

Forward and reverse mode, first and second order, against finite differences.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from tests.jax.ops.specs import SPECS, Spec


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_first_and_second_derivatives_match_finite_differences(spec: Spec, x64) -> None:
    xs = [jnp.asarray(a, jnp.float64) for a in spec.regular(np.random.default_rng(0))]
    check_grads(spec.safe, xs, order=2, modes=("fwd", "rev"), eps=1e-6, atol=1e-5, rtol=1e-5)
