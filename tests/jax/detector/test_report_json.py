"""A JAX report is frozen, names the user's spelling as `api`, and its JSON reads back exactly."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import nanguard.jax as ngj
from tests.core.report_checks import assert_settled


def test_an_eager_finding_names_the_spelling_on_the_line() -> None:
    with ngj.detect(mode="record") as d:
        jnp.log(jnp.zeros(3))
    r = d.report
    assert (r.op, r.api, r.phase) == ("log", "jnp.log", "forward")
    assert_settled(r, "jax")


def test_a_jitted_gradient_finding_names_its_forward_op() -> None:
    with ngj.detect(mode="record") as d:
        jax.jit(jax.grad(lambda x: jnp.sqrt(x).sum()))(jnp.zeros(3))
    r = d.report
    assert (r.phase, r.api, r.forward.op, r.how) == ("backward", "jnp.sqrt", "sqrt", "replay")
    assert r.forward.line == r.where.line and r.call is None
    assert_settled(r, "jax")
