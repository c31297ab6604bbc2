"""Edges: NaN in gives NaN out, ±0, subnormal and huge inputs, empty arrays, broadcasting, half dtypes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nanguard.jax as ng
from tests.jax.ops.specs import SPECS, Spec

NAN, INF = float("nan"), float("inf")
# safe_where's condition is False at NaN, so its value is `other` there, by definition
NAN_SPECS = [s for s in SPECS if s.name != "safe_where"]
# a mean's gradient (mask / count) does not depend on the values: NaN shows in the value only
VALUE_INDEPENDENT_GRADIENT = {"masked_mean"}
RTOL = {jnp.float16: 4e-3, jnp.bfloat16: 3e-2, jnp.float32: 1e-5}


def _value_and_grads(fn, *xs):
    xs = [jnp.asarray(x) for x in xs]
    argnums = tuple(range(len(xs)))
    return fn(*xs), jax.grad(lambda *a: jnp.sum(fn(*a)).astype(jnp.float32), argnums)(*xs)


@pytest.mark.parametrize("spec", NAN_SPECS, ids=[s.name for s in NAN_SPECS])
def test_nan_in_gives_nan_out_never_zero(spec: Spec) -> None:
    inputs = [a.astype(np.float32) for a in spec.regular(np.random.default_rng(0))]
    inputs[0].flat[0] = NAN
    out, grads = _value_and_grads(spec.safe, *inputs)
    assert np.isnan(out).any(), f"{spec.name}: a NaN input vanished from the value"
    if spec.name not in VALUE_INDEPENDENT_GRADIENT:
        assert any(np.isnan(g).any() for g in grads), f"{spec.name}: a NaN input vanished from the gradient"


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.float32], ids=["float16", "bfloat16", "float32"])
def test_output_and_gradient_keep_the_input_dtype(spec: Spec, dtype) -> None:
    regular = spec.regular(np.random.default_rng(0))
    inputs = [jnp.asarray(x, dtype) for x in regular]
    out, grads = _value_and_grads(spec.safe, *inputs)
    assert out.dtype == dtype
    assert all(g.dtype == dtype and np.all(np.isfinite(np.asarray(g, np.float32))) for g in grads)
    with jax.enable_x64(True):
        want = np.asarray(spec.textbook(*[jnp.asarray(x, jnp.float64) for x in regular]))
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=RTOL[dtype], atol=RTOL[dtype])


def test_float64_under_x64(x64) -> None:
    out, (grad,) = _value_and_grads(ng.norm, np.array([3.0, 4.0]))
    assert out.dtype == jnp.float64 and float(out) == 5.0
    np.testing.assert_allclose(grad, [0.6, 0.8], rtol=1e-15)


def test_signed_zero_and_tiny_negatives() -> None:
    out, (grad,) = _value_and_grads(ng.sqrt, np.array([0.0, -0.0, -1e-9, -1e-30], np.float32))
    assert out.tolist() == [0.0, 0.0, 0.0, 0.0] and grad.tolist() == [0.0, 0.0, 0.0, 0.0]
    _, (grad,) = _value_and_grads(lambda x: ng.pow(x, 0.5), np.array([-0.0, 0.0], np.float32))
    assert grad.tolist() == [0.0, 0.0]
    _, (ga, gb) = _value_and_grads(ng.div, np.array([1.0, 1.0], np.float32), np.array([0.0, -0.0], np.float32))
    assert ga.tolist() == [0.0, 0.0] and gb.tolist() == [0.0, 0.0]


def test_subnormal_and_huge_vectors_are_exact(x64) -> None:
    # XLA's CPU kernels flush subnormals to zero (FTZ/DAZ), as TensorFlow's: a subnormal vector
    # is the zero vector there, and must give the zero vector's finite conventions, not 0/0
    tiny = np.float32(1e-40)
    for op in (ng.normalize, ng.norm):
        out, (grad,) = _value_and_grads(op, np.array([tiny, tiny]))
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(grad))
    small = np.array([3e-300, 4e-300])  # the squares underflow, the norm does not
    assert float(ng.norm(jnp.asarray(small))) == pytest.approx(5e-300, rel=1e-12)
    np.testing.assert_allclose(ng.normalize(jnp.asarray(small)), [0.6, 0.8], rtol=1e-12)
    huge = np.array([3e20, 4e20], np.float32)  # jnp.linalg.norm overflows to inf here
    assert not np.isfinite(float(jnp.linalg.norm(jnp.asarray(huge))))
    assert float(ng.norm(jnp.asarray(huge))) == pytest.approx(5e20, rel=1e-6)
    np.testing.assert_allclose(ng.normalize(jnp.asarray(np.array([3e38, 3e38], np.float32))), [2**-0.5] * 2,
                               rtol=1e-6)
    cos = ng.cosine_similarity(jnp.asarray(np.array([3e38, 0.0], np.float32)),
                               jnp.asarray(np.array([1e-30, 1e-30], np.float32)))
    np.testing.assert_allclose(cos, 2**-0.5, rtol=1e-6)
    np.testing.assert_allclose(ng.distance_matrix(jnp.asarray(np.array([[0.0], [1e30]], np.float32))),
                               [[0, 1e30], [1e30, 0]], rtol=1e-6)
    _, (grad,) = _value_and_grads(ng.norm, huge)
    np.testing.assert_allclose(grad, [0.6, 0.8], rtol=1e-6)
    _, (grad,) = _value_and_grads(ng.norm, small)
    np.testing.assert_allclose(grad, [0.6, 0.8], rtol=1e-12)
    assert ng.softplus(jnp.array([1e4, -1e4], jnp.float16)).tolist() == [10000.0, 0.0]


def test_half_precision_does_not_overflow_internally() -> None:
    np.testing.assert_allclose(ng.normalize(jnp.array([60000.0, 60000.0], jnp.float16)).astype(np.float32),
                               [0.7071] * 2, rtol=1e-3)
    assert float(ng.div(jnp.array([1.0], jnp.float16), 1e5)[0]) == pytest.approx(1e-5, rel=1e-2)
    assert float(ng.softplus(jnp.array([20000.0], jnp.float16), beta=4.0)[0]) == 20000.0
    assert ng.div(jnp.array([1.0], jnp.float16), jnp.array([2.0], jnp.float32)).dtype == jnp.float32
    assert ng.div(1.0, jnp.array([2.0, 0.0], jnp.bfloat16)).dtype == jnp.bfloat16


def test_empty_arrays_and_slices() -> None:
    empty_rows = jnp.zeros((2, 0))
    assert ng.logsumexp(empty_rows, axis=1).tolist() == [-INF, -INF]
    assert ng.softmax(jnp.zeros((0, 3))).shape == (0, 3)
    assert ng.norm(empty_rows, axis=1).tolist() == [0.0, 0.0]
    assert ng.var(empty_rows, axis=1).tolist() == [0.0, 0.0]
    assert ng.std(empty_rows, axis=1).tolist() == [0.0, 0.0]
    assert ng.masked_mean(empty_rows, jnp.zeros((2, 0), bool), axis=1, fill=3.0).tolist() == [3.0, 3.0]
    assert ng.entropy(empty_rows).tolist() == [0.0, 0.0]
    assert ng.distance_matrix(jnp.zeros((0, 3)), jnp.zeros((2, 3))).shape == (0, 2)
    out, (grad,) = _value_and_grads(ng.sqrt, np.zeros([0], np.float32))
    assert out.shape == (0,) and grad.shape == (0,)


def test_broadcasting_reduces_gradients_to_each_shape() -> None:
    _, (ga, gb) = _value_and_grads(ng.logaddexp, np.zeros((3, 4), np.float32), np.zeros((4,), np.float32))
    assert ga.shape == (3, 4) and gb.shape == (4,) and np.allclose(gb, 1.5)
    _, (ga, gb) = _value_and_grads(ng.div, np.ones((2, 3), np.float32), np.array([2.0, 0.0, 4.0], np.float32))
    np.testing.assert_allclose(gb, [-0.5, 0.0, -0.125])
    _, (gx, gy) = _value_and_grads(ng.xlogy, np.array([[0.0], [1.0]], np.float32),
                                   np.array([1.0, np.e], np.float32))
    np.testing.assert_allclose(gx, [[1.0], [1.0]], rtol=1e-6)  # log 1 + log e, also at x = 0
    np.testing.assert_allclose(gy, [1.0, 1 / np.e], rtol=1e-6)
    out = ng.distance_matrix(jnp.zeros((2, 3, 2)), jnp.ones((4, 2)))
    assert out.shape == (2, 3, 4) and np.allclose(out, 2**0.5)
    out = ng.cosine_similarity(jnp.array([[1.0, 0.0], [0.0, 0.0]]), jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(out, [2**-0.5, 0.0], rtol=1e-6)
    out = ng.softmax(jnp.array([[1.0, 2.0], [3.0, 4.0]]), where=jnp.array([True, False]))
    assert out.tolist() == [[1.0, 0.0], [1.0, 0.0]]


def test_masked_entries_holding_nan_and_inf_have_no_influence() -> None:
    x = np.array([[1.0, NAN, INF, -INF], [2.0, 3.0, NAN, 4.0]], np.float32)
    mask = jnp.array([[True, False, False, False], [True, True, False, True]])
    for fn in (lambda v: ng.softmax(v, mask=mask), lambda v: ng.log_softmax(v, where=mask),
               lambda v: ng.logsumexp(v, axis=-1, where=mask), lambda v: ng.masked_mean(v, mask, axis=-1)):
        out, (grad,) = _value_and_grads(fn, x)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(grad))
        assert np.all(np.asarray(grad)[~np.asarray(mask)] == 0)


def test_acos_tolerates_rounding_but_not_bugs() -> None:
    eps = np.finfo(np.float32).eps
    out, (grad,) = _value_and_grads(ng.acos, np.array([1 + 3 * eps, -1 - 3 * eps, 1.01], np.float32))
    assert float(out[0]) == 0.0 and float(out[1]) == pytest.approx(np.pi)
    assert grad[:2].tolist() == [0.0, 0.0]
    assert np.isnan(out[2]) and np.isnan(grad[2])
