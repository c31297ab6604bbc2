"""The op specification (nanguard.core.opspec): the table's integrity, the docstrings it
assembles and the settings and shapes it checks, without any framework."""

from __future__ import annotations

import pytest

from nanguard.core import op_checks, opspec
from nanguard.core.opspec_table import SPECS
from nanguard.core.opspec_types import ARG_KINDS, BACKENDS
from nanguard.core.vectors import OPS

SPELLING = op_checks.Spelling("jax", "a JAX array (or numpy array)", "jnp.asarray({name})",
                              "{name}.astype(jnp.float32)", "mask != 0")


def test_the_table_names_each_op_once_in_the_contract_order() -> None:
    names = [s.name for s in SPECS]
    assert len(set(names)) == len(names)
    assert tuple(names) == OPS
    for backend in BACKENDS:
        assert opspec.op_names(backend) == tuple(s.name for s in SPECS if backend in s.backends)


@pytest.mark.parametrize("row", SPECS, ids=[s.name for s in SPECS])
def test_each_row_is_complete(row) -> None:
    assert row.summary and row.formula and row.family
    assert row.singular or row.heading.startswith("Singular points: none")
    assert all(arg.kind in ARG_KINDS and set(arg.backends) <= set(BACKENDS) for arg in row.args)
    for backend in BACKENDS:  # every {word} of the text is one the backends spell
        for text in (row.summary, *row.singular, *(a.doc for a in row.args)):
            text.format_map(opspec.WORDS[backend])


def test_unknown_ops_and_backends_are_refused() -> None:
    with pytest.raises(KeyError, match="not a safe op"):
        opspec.spec("sqrtt")
    with pytest.raises(ValueError, match="unknown backend"):
        opspec.op_names("mxnet")


def test_document_puts_the_table_around_the_ops_own_text() -> None:
    def div(a, b, fill=0.0):
        """Why the framework's division fails.

        Returns:
            the quotient.

        Example:
            >>> div(1, 0)
        """

    doc = opspec.document("div", "tf")(div).__doc__
    lines = doc.splitlines()
    assert lines[0] == opspec.spec("div").summary
    order = [doc.index(part) for part in (".. math::", "Why the framework", "Singular points:", "Args:",
                                          "Returns:", "Example:")]
    assert order == sorted(order)
    assert "    Args:\n        a: numerator (floating tensor" in doc
    assert "* ``b = 0`` (either sign of zero)" in doc


def test_torch_docstrings_say_dim_where_the_others_say_axis() -> None:
    assert "``dim``" in opspec.render("softmax", "torch", "summary")
    assert "``axis``" in opspec.render("softmax", "jax", "summary")
    args = opspec.render("std", "torch", "args")
    assert "dim:" in args and "keepdim:" in args and "ddof" not in args
    assert "where:" in opspec.render("softmax", "jax", "args")


@pytest.mark.parametrize(("op", "name", "value", "error", "message"), [
    ("softplus", "beta", -1.0, ValueError, "nanguard.jax.softplus: `beta` must be > 0, got -1.0"),
    ("softplus", "beta", "1", TypeError, "`beta` must be a real number, got str"),
    ("pow", "exponent", float("inf"), ValueError, "`exponent` must be finite"),
    ("div", "fill", float("nan"), ValueError, "`fill` must be finite"),
    ("norm", "keepdims", 1, TypeError, "`keepdims` must be True or False, got 1"),
    ("var", "correction", -1, ValueError, "`correction` must be a finite number >= 0, got -1"),
    ("var", "correction", None, TypeError, "`correction` must be a number, got NoneType"),
])
def test_settings_are_checked_by_their_kind(op, name, value, error, message) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        opspec.check_setting(value, name, op, "jax")


def test_settings_pass_through_as_python_values() -> None:
    assert opspec.check_setting(2, "beta", "softplus", "tf") == 2.0
    assert opspec.check_setting(False, "keepdim", "norm", "torch") is False
    with pytest.raises(KeyError, match="not a setting"):
        opspec.check_setting(1.0, "x", "sqrt", "tf")


def test_axes_are_normalised_and_refused_in_a_users_words() -> None:
    assert op_checks.axes((-1, 0), 3, "(2, 3, 4)", "norm", SPELLING) == (0, 2)
    assert op_checks.axes(None, 3, "(2, 3, 4)", "norm", SPELLING) is None
    with pytest.raises(ValueError, match=r"axis 3 is out of range for an array with 3 dimension\(s\)"):
        op_checks.axes(3, 3, "(2, 3, 4)", "norm", SPELLING)
    with pytest.raises(ValueError, match="repeats an axis"):
        op_checks.axes((1, -2), 3, "(2, 3, 4)", "norm", SPELLING)
    with pytest.raises(TypeError, match="must be an int or a sequence of ints"):
        op_checks.axes(True, 3, "(2, 3, 4)", "norm", SPELLING)
    with pytest.raises(TypeError, match="`axis` is required"):
        op_checks.axes(None, 3, "(2, 3, 4)", "norm", SPELLING, allow_none=False)


def test_distance_matrix_shapes() -> None:
    op_checks.rows_and_features((5, 2, 3), (1, 4, 3), "distance_matrix", SPELLING)
    op_checks.rows_and_features((None, 2, None), (7, 4, 3), "distance_matrix", SPELLING)  # left to the run
    with pytest.raises(ValueError, match="`x` must have shape"):
        op_checks.rows_and_features((3,), (4, 3), "distance_matrix", SPELLING)
    with pytest.raises(ValueError, match="same number of features"):
        op_checks.rows_and_features((2, 3), (4, 5), "distance_matrix", SPELLING)
    with pytest.raises(ValueError, match=r"batch dimensions \(2,\) and \(3,\) do not broadcast"):
        op_checks.rows_and_features((2, 2, 3), (3, 4, 3), "distance_matrix", SPELLING)


def test_safe_where_values() -> None:
    assert op_checks.branch_value(2, "safe", "safe_where", SPELLING, lambda v: False) == 2.0
    with pytest.raises(TypeError, match="`safe` must be a number or array, got str"):
        op_checks.branch_value("1", "safe", "safe_where", SPELLING, lambda v: False)
    with pytest.raises(TypeError, match="`other` must be an array, number or callable"):
        op_checks.branch_value(None, "other", "safe_where", SPELLING, lambda v: False)
    with pytest.raises(TypeError, match="`fn` must return an array, got float"):
        op_checks.branch_value(1.0, "fn", "safe_where", SPELLING, lambda v: False)
