"""Bad input fails early with a TypeError/ValueError that says what is wrong; imports stay lazy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import nanguard.jax as ng

REPO = Path(__file__).resolve().parents[3]
X = jnp.array([[1.0, 2.0], [3.0, 4.0]])
INTEGERS = jnp.array([[1, 2], [3, 4]])
KEEP = jnp.ones((2, 2), bool)

UNARY = {
    "softplus": ng.softplus, "logsumexp": ng.logsumexp, "softmax": ng.softmax, "log_softmax": ng.log_softmax,
    "entropy": ng.entropy, "sqrt": ng.sqrt, "pow": lambda x: ng.pow(x, 2.0), "norm": ng.norm,
    "normalize": ng.normalize, "distance_matrix": ng.distance_matrix, "var": ng.var, "std": ng.std,
    "acos": ng.acos, "asin": ng.asin, "masked_mean": lambda x: ng.masked_mean(x, KEEP),
    "logaddexp": lambda x: ng.logaddexp(x, X), "xlogy": lambda x: ng.xlogy(x, X), "div": lambda x: ng.div(x, X),
    "cross_entropy_probs": lambda x: ng.cross_entropy_probs(x, X),
    "cosine_similarity": lambda x: ng.cosine_similarity(x, X),
    "safe_where": lambda x: ng.safe_where(KEEP, jnp.log, x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_integer_arrays_are_refused_with_the_fix(name: str) -> None:
    with pytest.raises(TypeError, match=r"floating-point array .*int32.*astype\(jnp\.float32\)"):
        UNARY[name](INTEGERS)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_python_lists_are_refused(name: str) -> None:
    with pytest.raises(TypeError, match="must be a JAX array|must be an array or a real number"):
        UNARY[name]([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("call", [
    lambda: ng.logsumexp(X, axis=2), lambda: ng.softmax(X, axis=-3), lambda: ng.norm(X, axis=(0, 0)),
    lambda: ng.var(X, axis=5), lambda: ng.entropy(X, axis=2), lambda: ng.masked_mean(X, KEEP, 3),
    lambda: ng.cosine_similarity(X, X, axis=2), lambda: ng.logsumexp(X, axis=[]),
], ids=["logsumexp", "softmax", "norm-repeat", "var", "entropy", "masked_mean", "cosine", "empty"])
def test_bad_axes_are_value_errors(call) -> None:
    with pytest.raises(ValueError, match="axis"):
        call()


@pytest.mark.parametrize("call", [lambda: ng.softmax(X, axis=1.0), lambda: ng.norm(X, axis="0"),
                                  lambda: ng.entropy(X, axis=(0, 1)), lambda: ng.norm(X, keepdims=1)])
def test_axis_and_keepdims_types(call) -> None:
    with pytest.raises(TypeError):
        call()


def test_masks_must_be_bool_and_broadcast_to_the_input() -> None:
    with pytest.raises(TypeError, match="bool array"):
        ng.softmax(X, mask=jnp.array([[1, 0], [1, 1]]))
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.logsumexp(X, axis=1, mask=jnp.array([True, False, True]))
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.masked_mean(X, jnp.ones((2, 2, 2), bool))  # would grow the input's shape
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.log_softmax(X, where=jnp.ones((3, 2), bool))


@pytest.mark.parametrize("call", [lambda: ng.softmax(X, mask=KEEP, where=KEEP),
                                  lambda: ng.log_softmax(X, mask=KEEP, where=KEEP),
                                  lambda: ng.logsumexp(X, mask=KEEP, where=KEEP),
                                  lambda: ng.masked_mean(X, KEEP, where=KEEP)],
                         ids=["softmax", "log_softmax", "logsumexp", "masked_mean"])
def test_mask_and_where_together_are_refused(call) -> None:
    with pytest.raises(ValueError, match="not both"):
        call()


def test_where_is_an_alias_of_mask() -> None:
    keep = jnp.array([[True, False], [True, True]])
    np.testing.assert_array_equal(ng.softmax(X, where=keep), ng.softmax(X, mask=keep))
    np.testing.assert_array_equal(ng.logsumexp(X, axis=1, where=keep), ng.logsumexp(X, axis=1, mask=keep))
    np.testing.assert_array_equal(ng.masked_mean(X, where=keep, axis=1), ng.masked_mean(X, keep, axis=1))
    with pytest.raises(TypeError, match="required"):
        ng.masked_mean(X)


def test_numbers_that_configure_an_op() -> None:
    with pytest.raises(ValueError, match="beta"):
        ng.softplus(X, beta=0.0)
    with pytest.raises(ValueError, match="exponent"):
        ng.pow(X, 0.0)
    with pytest.raises(ValueError, match="exponent"):
        ng.pow(X, float("nan"))
    with pytest.raises(TypeError, match="exponent"):
        ng.pow(X, X)
    with pytest.raises(ValueError, match="fill"):
        ng.div(X, X, fill=float("inf"))
    with pytest.raises(ValueError, match="correction"):
        ng.var(X, correction=-1)
    with pytest.raises(ValueError, match="not both"):
        ng.std(X, correction=0, ddof=1)
    with pytest.raises(TypeError, match="`b`"):
        ng.div(X, "2")
    with pytest.raises(TypeError, match="two numbers"):
        ng.div(1.0, 2.0)


def test_shapes_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="do not broadcast"):
        ng.logaddexp(X, jnp.zeros(3))
    with pytest.raises(ValueError, match=r"\(\.\.\., rows, features\)"):
        ng.distance_matrix(jnp.zeros(3))
    with pytest.raises(ValueError, match="same number of features"):
        ng.distance_matrix(jnp.zeros((3, 2)), jnp.zeros((3, 4)))
    with pytest.raises(ValueError, match="at least one dimension"):
        ng.normalize(jnp.array(1.0))
    with pytest.raises(TypeError, match="`cond` must be a bool"):
        ng.safe_where(X, jnp.log, X)
    with pytest.raises(TypeError, match="`fn` must be callable"):
        ng.safe_where(X > 0, 1.0, X)


def test_numpy_arrays_are_accepted() -> None:
    np.testing.assert_allclose(ng.sqrt(np.array([4.0], np.float32)), [2.0])
    assert float(ng.norm(np.array([3.0, 4.0], np.float32))) == 5.0


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_ops_are_imported_on_first_use_only() -> None:
    done = _python("import sys, nanguard.jax as ng\nassert 'nanguard.jax.ops' not in sys.modules\n"
                   "ng.sqrt\nassert 'nanguard.jax.ops.roots' in sys.modules\nprint(sorted(ng.ops.__all__) == "
                   "sorted(ng._OPS))")
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


def test_every_catalogue_op_is_public() -> None:
    from nanguard.core.vectors import OPS

    assert sorted(ng._OPS) == sorted(OPS)
    assert all(callable(getattr(ng, name)) for name in OPS)
