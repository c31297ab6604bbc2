"""The JAX detector decides through core (issue 29): `check="all"`, the rule of
`nanguard.core.nonfinite` in the replay and for eager ops (an output both NaN and Inf under
``check="inf"``, the rounded ``finfo.min`` mask) and the options' errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import nanguard.jax as ngj


def test_check_all_is_both():
    with ngj.detect(check="all", mode="record") as det:
        jnp.log(jnp.zeros(2))
    assert det.report is not None and det.report.kind == "inf" and det.report.op == "log"
    assert det.check == frozenset({"nan", "inf"}) and "check='both'" in repr(det)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"check": "any"}, ValueError, "'nan', 'inf', 'both' or 'all'"),
    ({"mode": "stop"}, ValueError, "'raise', 'warn' or 'record'"),
])
def test_bad_options_name_every_accepted_one(kwargs, error, words):
    with pytest.raises(error, match="nanguard.jax.detect") as caught:
        ngj.detect(**kwargs)
    assert words in str(caught.value)


def _divide(a, b):
    return a / b


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_an_output_with_nan_and_inf_is_found_when_only_inf_is_checked(compiled):
    fn = jax.jit(_divide) if compiled else jnp.divide
    with ngj.detect(check="inf", mode="record") as det:
        fn(jnp.array([1.0, 0.0]), jnp.array([0.0, 0.0]))        # [inf, nan] from finite values
    assert det.report is not None, "the division made an Inf"
    assert det.report.kind == "inf" and det.report.op == "div" and det.report.phase == "forward"


def _mask(x):
    return x + jnp.finfo(jnp.float16).min


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_a_float16_min_mask_rounded_to_minus_inf_is_deliberate(compiled):
    fn = jax.jit(_mask) if compiled else _mask
    with ngj.detect(mode="record") as det:
        out = fn(jnp.array([-100.0, 0.0, 2.0], jnp.float16))
    assert bool(jnp.isneginf(out[0])) and det.report is None, det.report


def _overflow(x):
    return x * jnp.float16(4.0)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_a_real_float16_overflow_is_still_found(compiled):
    fn = jax.jit(_overflow) if compiled else _overflow
    with ngj.detect(mode="record") as det:
        fn(jnp.array([3e4, 1.0], jnp.float16))
    assert det.report is not None and det.report.kind == "inf" and det.report.op == "mul"
