"""Bad input fails early with a TypeError/ValueError that says what is wrong; imports stay lazy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ng

REPO = Path(__file__).resolve().parents[3]
X = tf.constant([[1.0, 2.0], [3.0, 4.0]])
INTEGERS = tf.constant([[1, 2], [3, 4]])

UNARY = {
    "softplus": ng.softplus, "logsumexp": ng.logsumexp, "softmax": ng.softmax, "log_softmax": ng.log_softmax,
    "entropy": ng.entropy, "sqrt": ng.sqrt, "pow": lambda x: ng.pow(x, 2.0), "norm": ng.norm,
    "normalize": ng.normalize, "distance_matrix": ng.distance_matrix, "var": ng.var, "std": ng.std,
    "acos": ng.acos, "asin": ng.asin, "masked_mean": lambda x: ng.masked_mean(x, tf.ones_like(x, tf.bool)),
    "logaddexp": lambda x: ng.logaddexp(x, X), "xlogy": lambda x: ng.xlogy(x, X), "div": lambda x: ng.div(x, X),
    "cross_entropy_probs": lambda x: ng.cross_entropy_probs(x, X),
    "cosine_similarity": lambda x: ng.cosine_similarity(x, X),
    "safe_where": lambda x: ng.safe_where(tf.ones_like(x, tf.bool), tf.math.log, x),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_integer_tensors_are_refused_with_the_fix(name: str) -> None:
    with pytest.raises(TypeError, match=r"floating-point tensor .*int32.*tf\.cast"):
        UNARY[name](INTEGERS)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_python_lists_are_refused(name: str) -> None:
    with pytest.raises(TypeError, match="must be a tf.Tensor"):
        UNARY[name]([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("call", [
    lambda: ng.logsumexp(X, axis=2), lambda: ng.softmax(X, axis=-3), lambda: ng.norm(X, axis=(0, 0)),
    lambda: ng.var(X, axis=5), lambda: ng.entropy(X, axis=2), lambda: ng.masked_mean(X, tf.ones_like(X, tf.bool), 3),
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
    with pytest.raises(TypeError, match="bool tensor"):
        ng.softmax(X, mask=tf.constant([[1, 0], [1, 1]]))
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.logsumexp(X, axis=1, mask=tf.constant([True, False, True]))
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.masked_mean(X, tf.ones([2, 2, 2], tf.bool))  # would grow the input's shape
    with pytest.raises(ValueError, match="does not broadcast"):
        ng.log_softmax(X, mask=tf.ones([3, 2], tf.bool))


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


def test_shapes_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="do not broadcast"):
        ng.logaddexp(X, tf.zeros([3]))
    with pytest.raises(ValueError, match=r"\(\.\.\., rows, features\)"):
        ng.distance_matrix(tf.zeros([3]))
    with pytest.raises(ValueError, match="same number of features"):
        ng.distance_matrix(tf.zeros([3, 2]), tf.zeros([3, 4]))
    with pytest.raises(ValueError, match="at least one dimension"):
        ng.normalize(tf.constant(1.0))
    with pytest.raises(TypeError, match="`cond` must be a bool"):
        ng.safe_where(X, tf.math.log, X)
    with pytest.raises(TypeError, match="`fn` must be callable"):
        ng.safe_where(X > 0, 1.0, X)


def test_unknown_rank_inside_tf_function_is_explained() -> None:
    run = tf.function(lambda x: ng.softmax(x), input_signature=[tf.TensorSpec(None, tf.float32)])
    with pytest.raises(ValueError, match="rank must be known"):
        run.get_concrete_function()


def test_numpy_arrays_and_variables_are_accepted() -> None:
    np.testing.assert_allclose(ng.sqrt(np.array([4.0])).numpy(), [2.0])
    assert ng.norm(tf.Variable([3.0, 4.0])).numpy() == 5.0


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_nanguard_tf_without_tensorflow_names_the_extra() -> None:
    done = _python("import sys; sys.modules['tensorflow'] = None\nimport nanguard.tf")
    assert done.returncode != 0 and "pip install 'nanguard[tf]'" in done.stderr, done.stderr


def test_ops_are_imported_on_first_use_only() -> None:
    done = _python("import sys, nanguard.tf as ng\nassert 'nanguard.tf.ops' not in sys.modules\n"
                   "ng.sqrt\nassert 'nanguard.tf.ops.roots' in sys.modules\nprint(sorted(ng.ops.__all__) == "
                   "sorted(ng._OPS))")
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
