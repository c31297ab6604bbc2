"""The shared checks of configuration arguments: one wording for every backend."""

from __future__ import annotations

import fractions
import importlib.util

import pytest

from nanguard.core import arguments

WHERE = "nanguard.tf.softplus"


@pytest.mark.parametrize("value", [0, 3, -2.5, 1e300, fractions.Fraction(1, 3)])
def test_real_numbers_pass_as_floats(value):
    assert arguments.check_number(value, "beta", WHERE) == float(value)
    assert type(arguments.check_number(value, "beta", WHERE)) is float


@pytest.mark.parametrize("value", [True, False, "1.0", None, [1.0], 1j])
def test_non_numbers_are_type_errors_naming_the_argument(value):
    with pytest.raises(TypeError, match=r"nanguard\.tf\.softplus: `beta` must be a real number, got "):
        arguments.check_number(value, "beta", WHERE)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_setting_must_be_finite(value):
    with pytest.raises(ValueError, match="`beta` must be finite"):
        arguments.check_number(value, "beta", WHERE)


def test_an_integer_beyond_the_float_range_is_a_clear_value_error():
    with pytest.raises(ValueError, match="`beta` is too large for a float"):
        arguments.check_number(10**400, "beta", WHERE)
    with pytest.raises(ValueError, match="too large"):
        arguments.check_real(-(10**400), "b", WHERE)


@pytest.mark.parametrize("value", [0, -1e-30, -3])
def test_positive_refuses_zero_and_negatives(value):
    with pytest.raises(ValueError, match="`beta` must be > 0"):
        arguments.check_number(value, "beta", WHERE, positive=True)


def test_operands_may_be_nan_or_inf_and_the_message_names_the_tensor_kind():
    assert arguments.check_real(float("-inf"), "b", WHERE) == float("-inf")
    assert arguments.check_real(float("nan"), "b", WHERE) != arguments.check_real(float("nan"), "b", WHERE)
    with pytest.raises(TypeError, match=r"`b` must be an array or a real number, got str"):
        arguments.check_real("2", "b", "nanguard.jax.div", tensor="an array")
    with pytest.raises(TypeError, match=r"`b` must be a tensor or a real number, got bool"):
        arguments.check_real(True, "b", WHERE)


@pytest.mark.parametrize("value", [0, 1, "yes", None, 1.0])
def test_flags_must_be_true_or_false(value):
    with pytest.raises(TypeError, match=r"nanguard\.tf\.softplus: `keepdims` must be True or False"):
        arguments.check_bool(value, "keepdims", WHERE)
    assert arguments.check_bool(True, "keepdims", WHERE) is True


def test_numpy_scalars_count_without_core_importing_numpy():
    np = pytest.importorskip("numpy")
    assert arguments.check_number(np.float32(0.5), "beta", WHERE) == 0.5
    assert arguments.check_number(np.int64(2), "beta", WHERE) == 2.0
    assert arguments.check_bool(np.bool_(False), "keepdims", WHERE) is False
    with pytest.raises(TypeError):
        arguments.check_number(np.bool_(True), "beta", WHERE)
    with pytest.raises(TypeError):
        arguments.check_number(np.zeros(2), "beta", WHERE)
    source = importlib.util.find_spec("nanguard.core.arguments").origin
    with open(source, encoding="utf-8") as handle:
        assert "import numpy" not in handle.read()
