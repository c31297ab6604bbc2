"""The decisions every backend takes from core: the non-finite rule over flags, detect()'s
options, the dtype limits and the one-line message (issue 29: one contract, one implementation)."""

from __future__ import annotations

import pytest

from nanguard.core import dtypes
from nanguard.core.location import Frame
import itertools

from nanguard.core.nonfinite import PYTHON, Flags, Verdict, made, made_masks, rounded_extreme
from nanguard.core.options import CHECKS, MODES, check_name, parse_check, parse_exhaustive, parse_mode
from nanguard.core.report import message, where


@pytest.mark.parametrize("flags, check, verdict", [
    (Flags(out_nan=True, out_inf=False, in_nan=False, in_finite=True), {"nan", "inf"}, Verdict("nan", "created")),
    (Flags(out_nan=True, out_inf=False, in_nan=True, in_finite=False), {"nan", "inf"}, Verdict("nan", "input")),
    (Flags(out_nan=False, out_inf=True, in_nan=False, in_finite=True), {"nan", "inf"}, Verdict("inf", "created")),
    (Flags(out_nan=False, out_inf=True, in_nan=False, in_finite=False), {"nan", "inf"}, None),
    (Flags(out_nan=False, out_inf=True, in_nan=False, in_finite=True, rounded_extreme=True), {"inf"}, None),
    (Flags(out_nan=True, out_inf=True, in_nan=False, in_finite=True), {"inf"}, Verdict("inf", "created")),
    (Flags(out_nan=True, out_inf=False, in_nan=False, in_finite=True), {"inf"}, None),
])
def test_the_rule_over_flags(flags, check, verdict):
    assert made(flags, frozenset(check)) == verdict


@pytest.mark.parametrize("check", [{"nan"}, {"inf"}, {"nan", "inf"}])
def test_the_compiled_form_of_the_rule_is_the_rule(check):
    """`made_masks` (what in-graph checks compute) says "created" exactly where `made` does."""
    for out_nan, out_inf, in_nan, in_finite in itertools.product((False, True), repeat=4):
        if in_nan and in_finite:
            continue                                   # a NaN input is not finite
        verdict = made(Flags(out_nan, out_inf, in_nan, in_finite), frozenset(check))
        created = verdict is not None and verdict.origin == "created"
        expected = (created and verdict.kind == "nan", created and verdict.kind == "inf")
        assert made_masks(out_nan, out_inf, in_nan, in_finite, PYTHON, frozenset(check)) == expected


@pytest.mark.parametrize("signs, rounded", [
    ((False, True, False, True), True), ((True, False, True, False), True), ((True, True, True, True), True),
    ((True, True, False, True), False), ((False, True, True, False), False), ((False, False, True, True), False),
])
def test_rounded_extreme_needs_an_extreme_of_each_sign_of_infinity(signs, rounded):
    assert rounded_extreme(*signs) is rounded


@pytest.mark.parametrize("check, kinds", [
    ("nan", {"nan"}), ("inf", {"inf"}), ("both", {"nan", "inf"}), ("all", {"nan", "inf"}), ("ALL", {"nan", "inf"}),
    (["nan"], {"nan"}), (("inf", "nan"), {"nan", "inf"}),
])
def test_check_is_parsed_once_for_every_backend(check, kinds):
    assert parse_check(check, "nanguard.x.detect") == frozenset(kinds)


@pytest.mark.parametrize("check, error, words", [
    ("nans", ValueError, "check must be 'nan', 'inf', 'both' or 'all', got 'nans'"),
    ([], ValueError, "check must name 'nan' and/or 'inf'"),
    (["nan", "zero"], ValueError, "check must name 'nan' and/or 'inf'"),
    (3, TypeError, "check must be a string ('nan', 'inf', 'both' or 'all') or a collection"),
])
def test_a_bad_check_names_the_caller_and_the_options(check, error, words):
    with pytest.raises(error, match="^nanguard.tf.detect: ") as caught:
        parse_check(check, "nanguard.tf.detect")
    assert words in str(caught.value)


@pytest.mark.parametrize("mode", [None, "stop", "RAISE", 1])
def test_an_unknown_mode_names_the_options(mode):
    with pytest.raises(ValueError, match="nanguard.jax.detect: mode must be 'raise', 'warn' or 'record'"):
        parse_mode(mode, "nanguard.jax.detect")


def test_the_options_are_the_literal_types():
    assert CHECKS == ("nan", "inf", "both", "all") and MODES == ("raise", "warn", "record")
    assert all(parse_mode(m, "x") == m for m in MODES)
    assert parse_exhaustive(True, "x") is True
    with pytest.raises(TypeError, match="x: exhaustive must be True or False"):
        parse_exhaustive("yes", "x")
    assert [check_name(parse_check(c, "x")) for c in ("nan", "inf", "both", "all")] == ["nan", "inf", "both", "both"]


def test_the_dtype_limits_are_the_ieee_and_bfloat16_formats():
    import struct

    float32_max = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
    assert dtypes.limits("float16").max == 65504.0 and dtypes.limits("torch.float16").max == 65504.0
    assert dtypes.max_finite("float32") == float32_max
    assert dtypes.max_finite("bfloat16") == struct.unpack("<f", struct.pack("<I", 0x7F7F0000))[0]
    assert dtypes.max_finite("float64") == 1.7976931348623157e308
    assert dtypes.limits("float32").tiny == 2.0 ** -126 and dtypes.limits("float16").eps == 2.0 ** -10
    assert dtypes.max_finite("complex64") is None and dtypes.max_finite("int32") is None
    assert f"{dtypes.exp_limit('float32'):.2f}" == "88.72" and f"{dtypes.exp_limit('float16'):.2f}" == "11.09"
    assert dtypes.exp_limit("float8_e4m3fn") == dtypes.exp_limit("float32")
    assert dtypes.is_extreme(-65504.0) and dtypes.is_extreme(-65504.0, "float16")
    assert not dtypes.is_extreme(-65504.0, "float32") and not dtypes.is_extreme(1e38)


@pytest.mark.parametrize("phase, kind, words", [
    ("forward", "inf", "log produced Inf from finite inputs at m.py:3"),
    ("backward", "nan", "backward of log produced NaN from finite values at m.py:3"),
    ("input", "nan", "NaN entered from outside and was first consumed by log at m.py:3"),
    ("optimizer", "nan", "the optimizer step (log) produced NaN in the parameters from finite gradients at m.py:3"),
])
def test_one_message_for_every_backend(phase, kind, words):
    assert message(phase, kind, "log", where(Frame("m.py", 3, "f"))) == words
    assert where(None) == "an unknown line"
