"""Every installed backend follows the op specification (nanguard.core.opspec): it exports
exactly the table's ops, with the table's arguments, documents the table's conventions, and
TensorFlow and JAX refuse bad input in the same words."""

from __future__ import annotations

import importlib
import inspect
import re

import numpy as np
import pytest

from nanguard.core import opspec
from tests.contract import backends

INSTALLED = set(backends.available())
ALL = ["torch", "tf", "jax"]


def _ops(backend: str):
    if backend not in INSTALLED:
        pytest.skip(f"{backend} is not installed")
    return importlib.import_module(f"nanguard.{backend}.ops")


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("backend", ALL)
def test_backend_exports_exactly_the_tables_ops(backend: str) -> None:
    ops = _ops(backend)
    package = importlib.import_module(f"nanguard.{backend}")
    assert ops.__all__ == list(opspec.op_names(backend))
    assert [n for n in package.__all__ if n in ops.__all__] == ops.__all__
    for name in ops.__all__:
        fn = getattr(package, name)
        assert fn is getattr(ops, name)
        assert fn.__module__ == f"nanguard.{backend}.ops.{opspec.spec(name).family}"


@pytest.mark.parametrize("op", opspec.op_names())
@pytest.mark.parametrize("backend", ALL)
def test_signature_and_docstring_follow_the_table(backend: str, op: str) -> None:
    fn = getattr(_ops(backend), op)
    params = list(inspect.signature(inspect.unwrap(fn)).parameters)
    assert params == [opspec.arg_name(a, backend) for a in opspec.args_of(op, backend)]
    doc = inspect.cleandoc(fn.__doc__)
    assert doc.splitlines()[0] == opspec.render(op, backend, "summary")
    for section in ("formula", "singular", "args"):
        assert _squash(opspec.render(op, backend, section)) in _squash(doc), f"{backend}.{op}: no {section}"
    assert "Example:" in doc and ">>>" in doc


def test_the_three_backends_state_the_same_conventions() -> None:
    docs = {b: _squash(inspect.cleandoc(getattr(_ops(b), "xlogy").__doc__)) for b in ALL if b in INSTALLED}
    bullet = _squash(opspec.spec("xlogy").singular[0])
    assert all(bullet in doc for doc in docs.values())


def _bad_calls(xp, ops):
    """(label, call) pairs of bad input, the same on TensorFlow and JAX; ``xp`` builds arrays."""
    x = xp(np.ones((2, 3), np.float32))
    return [
        ("a string instead of a tensor", lambda: ops.sqrt("1.0")),
        ("an integer dtype", lambda: ops.sqrt(xp(np.ones(3, np.int32)))),
        ("a negative beta", lambda: ops.softplus(x, beta=-1.0)),
        ("a beta of NaN", lambda: ops.softplus(x, beta=float("nan"))),
        ("a non-bool keepdims", lambda: ops.norm(x, keepdims=1)),
        ("a negative correction", lambda: ops.var(x, correction=-1)),
        ("an axis out of range", lambda: ops.norm(x, axis=2)),
        ("a repeated axis", lambda: ops.norm(x, axis=(0, -2))),
        ("a float mask", lambda: ops.softmax(x, mask=xp(np.ones((2, 3), np.float32)))),
        ("a misfit mask", lambda: ops.masked_mean(x, xp(np.ones((2, 4), bool)))),
        ("a 0-d input to softmax", lambda: ops.softmax(xp(np.float32(1.0)))),
        ("rows of different widths", lambda: ops.distance_matrix(x, xp(np.ones((2, 4), np.float32)))),
        ("an int fill", lambda: ops.div(x, x, fill="0")),
        ("a float cond", lambda: ops.safe_where(x, np.log, x)),
    ]


def _message(call) -> str:
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return str(caught.value)


def _neutral(message: str, backend: str) -> str:
    """The message with the backend's own spellings (its prefix, its tensor's name, hints) replaced."""
    checks = importlib.import_module(f"nanguard.{backend}._checks").SPELLING
    message = message.replace(checks.where(""), "OP.")
    message = message.replace(checks.tensor, "TENSOR").replace(checks.a_noun, "A_TENSOR")
    message = re.sub(rf"\b{checks.noun}\b", "TENSOR_NOUN", message)
    message = re.sub(r"; (wrap|convert|use) it first, e\.g\. `[^`]*`|; use e\.g\. `[^`]*`", "; HINT", message)
    return message


def test_tensorflow_and_jax_refuse_bad_input_in_the_same_words() -> None:
    if not {"tf", "jax"} <= INSTALLED:
        pytest.skip("needs TensorFlow and JAX")
    import jax.numpy as jnp
    import tensorflow as tf

    tf_calls = _bad_calls(tf.constant, _ops("tf"))
    jax_calls = _bad_calls(jnp.asarray, _ops("jax"))
    for (label, tf_call), (_, jax_call) in zip(tf_calls, jax_calls):
        tf_message, jax_message = _message(tf_call), _message(jax_call)
        assert tf_message.startswith("nanguard.tf.") and jax_message.startswith("nanguard.jax."), label
        assert _neutral(tf_message, "tf") == _neutral(jax_message, "jax"), (label, tf_message, jax_message)
