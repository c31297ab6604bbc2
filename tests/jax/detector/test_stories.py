"""Each real JAX NaN bug is found at its exact line and phase, jitted and eager; each fixed
version is quiet."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nanguard.jax as ngj
from nanguard.errors import NonFiniteError
from tests.jax.detector import programs as P


def found(call, **options):
    """The report ``detect`` raises for ``call()``; fails if nothing is raised."""
    with pytest.raises(NonFiniteError) as info:
        with ngj.detect(**options):
            jax.block_until_ready(call())
    report = info.value.report
    assert report is not None and report.file == P.__file__, report
    return report


def quiet(call, **options):
    with ngj.detect(mode="record", **options) as d:
        out = jax.block_until_ready(call())
    assert d.report is None, d.report.format(color=False)
    return out


def grad_jit(fn, argnums=0):
    return jax.jit(jax.grad(fn, argnums=argnums))


ZERO_AND_POS = jnp.array([0.0, 1.0, 4.0])

# (name, program, args, differentiate, expected phase, forward function, hazard words, fixed)
STORIES = [
    ("double-where", P.double_where, (ZERO_AND_POS,), True, "backward", "sqrt", "nanguard.jax.sqrt",
     P.double_where_fixed),
    ("log of 0", P.log_of_zero, (jnp.array([0.0, 0.5]),), False, "forward", "log", "log 0 = −inf", None),
    ("log of 0 behind where", P.log_masked, (jnp.array([0.0, 0.5]),), True, "backward", "log", "1/x is inf",
     P.log_masked_fixed),
    ("xlogy at 0", P.entropy_xlogy, (jnp.array([0.0, 0.25, 0.75]),), True, "backward", "xlogy", "0·log 0 = 0",
     P.entropy_xlogy_fixed),
    ("exp overflow", P.exp_overflow, (jnp.array([1.0, 100.0]),), False, "forward", "exp", "exceed 88.72", None),
    ("softplus by hand", P.softplus_by_hand, (jnp.array([0.0, 1.0, 100.0]),), True, "backward", "exp",
     "nanguard.jax.softplus", P.softplus_fixed),
    ("norm of zero vector", P.pair_norm, (jnp.ones((3, 2)), jnp.ones((3, 2)).at[0].set(2.0)), True, "backward",
     "norm", "zero vector", P.pair_norm_fixed),
    ("distance diagonal", P.gram_distances, (jnp.arange(12.0).reshape(4, 3) / 7,), True, "backward", "sqrt",
     "distance_matrix", P.gram_distances_fixed),
    ("empty masked mean", P.masked_mean, (jnp.ones((2, 3)), jnp.array([[True, False, True], [False] * 3])),
     False, "forward", "mean", "nanguard.jax.masked_mean", P.masked_mean_fixed),
]


def _call(program, args, differentiate, jit):
    fn = jax.grad(program) if differentiate else program
    fn = jax.jit(fn) if jit else fn
    return lambda: fn(*args)


@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
@pytest.mark.parametrize("story", STORIES, ids=[s[0] for s in STORIES])
def test_story_found_at_its_line(story, jit):
    name, program, args, differentiate, phase, fn, words, fixed = story
    check = "nan" if name == "softplus by hand" else "both"   # "both" stops at exp's overflow
    report = found(_call(program, args, differentiate, jit), check=check)
    assert report.line == P.line_of(program), report.format(color=False)
    assert report.phase == phase, report.format(color=False)
    text = report.format(color=False)
    assert f"{phase} of {fn}" in text
    assert words in report.explanation + report.suggestion, text
    if phase == "backward":
        assert report.forward_line == report.line and report.forward_op == fn
    if fixed is not None:
        quiet(_call(fixed, args, differentiate, jit))


def test_double_where_nan_check_names_the_transposed_multiply():
    report = found(lambda: grad_jit(P.double_where)(ZERO_AND_POS), check="nan")
    assert (report.phase, report.op, report.kind) == ("backward", "mul", "nan")
    assert "transpose" in report.node and report.line == P.line_of(P.double_where)
    assert report.forward_inputs and report.forward_inputs[0].zeros == 1


def test_double_where_inf_check_names_the_residual_of_sqrt():
    report = found(lambda: grad_jit(P.double_where)(ZERO_AND_POS), check="inf")
    assert (report.phase, report.op, report.kind, report.what) == ("backward", "div", "inf", "+Inf")


def test_deliberate_neg_inf_mask_is_quiet_forward_and_backward():
    scores = jnp.arange(6.0).reshape(2, 3)
    mask = jnp.array([[True, False, True], [False, True, False]])
    values = jnp.ones((3, 2))
    quiet(lambda: jax.jit(P.masked_attention)(scores, mask, values))
    quiet(lambda: grad_jit(P.masked_attention)(scores, mask, values))
    quiet(lambda: jax.grad(P.masked_attention)(scores, mask, values))


def test_fully_masked_row_is_found_at_the_softmax():
    scores = jnp.arange(6.0).reshape(2, 3)
    mask = jnp.array([[True, False, True], [False, False, False]])
    report = found(lambda: jax.jit(P.fully_masked_attention)(scores, mask, jnp.ones((3, 2))))
    assert report.line == P.line_of(P.fully_masked_attention) and report.phase == "forward"
    assert "softmax" in report.format(color=False) and "1 of 2 rows" in report.explanation


def test_nan_inside_a_scan_body_is_found_at_the_body_line():
    xs = jnp.array([1.0, 2.0, 0.0, 3.0])
    report = found(lambda: jax.jit(P.scan_of_logs)(xs))
    assert report.line == P.line_of(P.scan_of_logs) and report.op == "log" and report.phase == "forward"
    assert any("iteration 2" in note for note in report.notes)


def test_nan_in_the_data_is_an_input_finding():
    data = jnp.array([np.nan, 1.0])   # made before detection: NaN from outside
    report = found(lambda: jax.jit(P.log_of_zero)(data), check="nan")
    assert report.phase == "input" and report.line == P.line_of(P.log_of_zero)
    assert report.inputs[0].nan == 1
