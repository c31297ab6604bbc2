"""Edges: NaN in gives NaN out, ±0, subnormal and huge inputs, empty tensors, broadcasting, half dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ng
from tests.tf.ops.specs import SPECS, Spec

NAN, INF = float("nan"), float("inf")
# safe_where's condition is False at NaN, so its value is `other` there, by definition
NAN_SPECS = [s for s in SPECS if s.name != "safe_where"]
# a mean's gradient (mask / count) does not depend on the values: NaN shows in the value only
VALUE_INDEPENDENT_GRADIENT = {"masked_mean"}


def _value_and_grads(fn, *xs):
    xs = [tf.constant(x) for x in xs]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        out = fn(*xs)
        total = tf.reduce_sum(out)
    return out, tape.gradient(total, xs, unconnected_gradients=tf.UnconnectedGradients.ZERO)


@pytest.mark.parametrize("spec", NAN_SPECS, ids=[s.name for s in NAN_SPECS])
def test_nan_in_gives_nan_out_never_zero(spec: Spec) -> None:
    inputs = spec.regular(np.random.default_rng(0))
    inputs[0] = inputs[0].copy()
    inputs[0].flat[0] = NAN
    out, grads = _value_and_grads(spec.safe, *inputs)
    assert np.isnan(out.numpy()).any(), f"{spec.name}: a NaN input vanished from the value"
    if spec.name not in VALUE_INDEPENDENT_GRADIENT:
        assert any(np.isnan(g.numpy()).any() for g in grads), f"{spec.name}: a NaN input vanished from the gradient"


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64])
def test_output_and_gradient_keep_the_input_dtype(spec: Spec, dtype: tf.DType) -> None:
    inputs = [tf.cast(x, dtype) for x in spec.regular(np.random.default_rng(0))]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = spec.safe(*inputs)
    grads = tape.gradient(out, inputs)
    assert out.dtype == dtype
    assert all(g.dtype == dtype and np.all(np.isfinite(tf.cast(g, tf.float64).numpy())) for g in grads)
    want = spec.textbook(*[tf.cast(x, tf.float64) for x in spec.regular(np.random.default_rng(0))])
    rtol = {tf.float16: 4e-3, tf.bfloat16: 3e-2, tf.float32: 1e-5, tf.float64: 1e-12}[dtype]
    np.testing.assert_allclose(tf.cast(out, tf.float64).numpy(), want.numpy(), rtol=rtol, atol=rtol)


def test_signed_zero_and_tiny_negatives() -> None:
    out, (grad,) = _value_and_grads(ng.sqrt, [0.0, -0.0, -1e-9, -1e-300])
    assert out.numpy().tolist() == [0.0, 0.0, 0.0, 0.0] and grad.numpy().tolist() == [0.0, 0.0, 0.0, 0.0]
    out, (grad,) = _value_and_grads(lambda x: ng.pow(x, 0.5), [-0.0, 0.0])
    assert grad.numpy().tolist() == [0.0, 0.0]


def test_subnormal_and_huge_vectors_are_exact() -> None:
    # TensorFlow's CPU kernels flush subnormals to zero (FTZ/DAZ): a subnormal vector is the
    # zero vector there, and must give the zero vector's finite conventions, not 0/0
    tiny = np.float32(1e-40)
    out, (grad,) = _value_and_grads(ng.normalize, np.array([tiny, tiny]))
    assert np.all(np.isfinite(out.numpy())) and np.all(np.isfinite(grad.numpy()))
    out, (grad,) = _value_and_grads(ng.norm, np.array([tiny, tiny]))
    assert np.all(np.isfinite(out.numpy())) and np.all(np.isfinite(grad.numpy()))
    # the smallest normal float64 numbers: their squares underflow, the norm does not
    small = np.array([3e-300, 4e-300])
    assert ng.norm(tf.constant(small)).numpy() == pytest.approx(5e-300, rel=1e-12)
    np.testing.assert_allclose(ng.normalize(tf.constant(small)).numpy(), [0.6, 0.8], rtol=1e-12)
    assert ng.norm(tf.constant([3e20, 4e20])).numpy() == pytest.approx(5e20, rel=1e-6)
    np.testing.assert_allclose(ng.normalize(tf.constant([3e38, 3e38])).numpy(), [2**-0.5] * 2, rtol=1e-6)
    np.testing.assert_allclose(ng.cosine_similarity(tf.constant([3e38, 0.0]), tf.constant([1e-30, 1e-30])).numpy(),
                               2**-0.5, rtol=1e-6)
    np.testing.assert_allclose(ng.distance_matrix(tf.constant([[0.0], [1e30]])).numpy(), [[0, 1e30], [1e30, 0]],
                               rtol=1e-6)
    _, (grad,) = _value_and_grads(lambda x: ng.norm(x), np.array([3e20, 4e20], np.float32))
    np.testing.assert_allclose(grad.numpy(), [0.6, 0.8], rtol=1e-6)
    _, (grad,) = _value_and_grads(lambda x: ng.norm(x), small)
    np.testing.assert_allclose(grad.numpy(), [0.6, 0.8], rtol=1e-12)
    assert ng.softplus(tf.constant([1e4, -1e4], tf.float16)).numpy().tolist() == [10000.0, 0.0]


def test_half_precision_does_not_overflow_internally() -> None:
    np.testing.assert_allclose(ng.normalize(tf.constant([60000.0, 60000.0], tf.float16)).numpy(), [0.7071] * 2,
                               rtol=1e-3)
    assert ng.div(tf.constant([1.0], tf.float16), 1e5).numpy()[0] == pytest.approx(1e-5, rel=1e-2)
    assert ng.softplus(tf.constant([20000.0], tf.float16), beta=4.0).numpy()[0] == 20000.0
    assert ng.div(tf.constant([1.0], tf.float16), tf.constant([2.0], tf.float32)).dtype == tf.float32


def test_empty_tensors_and_slices() -> None:
    empty_rows = tf.zeros([2, 0])
    assert ng.logsumexp(empty_rows, axis=1).numpy().tolist() == [-INF, -INF]
    assert ng.softmax(tf.zeros([0, 3])).shape == (0, 3)
    assert ng.norm(empty_rows, axis=1).numpy().tolist() == [0.0, 0.0]
    assert ng.var(empty_rows, axis=1).numpy().tolist() == [0.0, 0.0]
    assert ng.std(empty_rows, axis=1).numpy().tolist() == [0.0, 0.0]
    assert ng.masked_mean(empty_rows, tf.zeros([2, 0], tf.bool), axis=1, fill=3.0).numpy().tolist() == [3.0, 3.0]
    assert ng.entropy(empty_rows).numpy().tolist() == [0.0, 0.0]
    assert ng.distance_matrix(tf.zeros([0, 3]), tf.zeros([2, 3])).shape == (0, 2)
    out, (grad,) = _value_and_grads(ng.sqrt, np.zeros([0], np.float32))
    assert out.shape == (0,) and grad.shape == (0,)


def test_broadcasting_reduces_gradients_to_each_shape() -> None:
    _, (ga, gb) = _value_and_grads(ng.logaddexp, np.zeros((3, 4)), np.zeros((4,)))
    assert ga.shape == (3, 4) and gb.shape == (4,) and np.allclose(gb.numpy(), 1.5)
    _, (ga, gb) = _value_and_grads(ng.div, np.ones((2, 3)), np.array([2.0, 0.0, 4.0]))
    np.testing.assert_allclose(gb.numpy(), [-0.5, 0.0, -0.125])
    _, (gx, gy) = _value_and_grads(ng.xlogy, np.array([[0.0], [1.0]]), np.array([1.0, np.e]))
    np.testing.assert_allclose(gx.numpy(), [[1.0], [1.0]])  # log 1 + log e, also at x = 0
    np.testing.assert_allclose(gy.numpy(), [1.0, 1 / np.e])
    out = ng.distance_matrix(tf.zeros([2, 3, 2]), tf.ones([4, 2]))
    assert out.shape == (2, 3, 4) and np.allclose(out.numpy(), 2**0.5)
    out = ng.cosine_similarity(tf.constant([[1.0, 0.0], [0.0, 0.0]]), tf.constant([1.0, 1.0]))
    np.testing.assert_allclose(out.numpy(), [2**-0.5, 0.0], rtol=1e-6)
    out = ng.softmax(tf.constant([[1.0, 2.0], [3.0, 4.0]]), mask=tf.constant([True, False]))
    assert out.numpy().tolist() == [[1.0, 0.0], [1.0, 0.0]]


def test_masked_entries_holding_nan_and_inf_have_no_influence() -> None:
    x = np.array([[1.0, NAN, INF, -INF], [2.0, 3.0, NAN, 4.0]])
    mask = tf.constant([[True, False, False, False], [True, True, False, True]])
    for fn in (lambda v: ng.softmax(v, mask=mask), lambda v: ng.log_softmax(v, mask=mask),
               lambda v: ng.logsumexp(v, axis=-1, mask=mask), lambda v: ng.masked_mean(v, mask, axis=-1)):
        out, (grad,) = _value_and_grads(fn, x)
        assert np.all(np.isfinite(out.numpy())) and np.all(np.isfinite(grad.numpy()))
        assert np.all(grad.numpy()[~mask.numpy()] == 0)


def test_acos_tolerates_rounding_but_not_bugs() -> None:
    eps = np.finfo(np.float32).eps
    out, (grad,) = _value_and_grads(ng.acos, np.array([1 + 3 * eps, -1 - 3 * eps, 1.01], np.float32))
    assert out.numpy()[0] == 0.0 and out.numpy()[1] == pytest.approx(np.pi)
    assert grad.numpy()[:2].tolist() == [0.0, 0.0]
    assert np.isnan(out.numpy()[2]) and np.isnan(grad.numpy()[2])
