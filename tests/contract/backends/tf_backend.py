"""The contract on ``nanguard.tf``: vectors become tensors, calls and ``GradientTape`` gradients.

One backend object per execution mode: ``eager`` (the one registered in ``ADAPTERS``),
``function`` (inside ``tf.function``) and ``jit`` (``tf.function(jit_compile=True)``, XLA);
``tests/tf`` runs the whole table in the other two modes.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import nanguard.tf as ng  # noqa: E402
from nanguard.core.vectors import Vector  # noqa: E402

DTYPE = {"float16": tf.float16, "bfloat16": tf.bfloat16, "float32": tf.float32, "float64": tf.float64}
NAME = {v: k for k, v in DTYPE.items()}

_CONDITIONS = {"nonzero": lambda x: tf.not_equal(x, 0), "positive": lambda x: x > 0}
_FUNCTIONS = {"reciprocal": lambda v: 1 / v, "log": tf.math.log, "identity": lambda v: v}


def fn(vector: Vector) -> Callable[..., tf.Tensor]:
    """The safe op of ``vector`` with its keyword arguments bound, as a function of the inputs."""
    kwargs = dict(vector.kwargs)
    if "mask" in kwargs:
        kwargs["mask"] = tf.constant(kwargs["mask"])
    op = vector.op
    if op == "safe_where":
        cond, branch = _CONDITIONS[kwargs.pop("where")], _FUNCTIONS[kwargs.pop("fn")]
        if "other" in kwargs:
            kwargs["other"] = _FUNCTIONS[kwargs["other"]]
        return lambda x: ng.safe_where(cond(x), branch, x, **kwargs)
    if op == "pow":
        exponent = kwargs.pop("exponent")
        return lambda x: ng.pow(x, exponent, **kwargs)
    if op == "masked_mean":
        mask = kwargs.pop("mask")
        return lambda x: ng.masked_mean(x, mask, **kwargs)
    safe = getattr(ng, op)
    return lambda *xs: safe(*xs, **kwargs)


def tensors(vector: Vector, dtype: tf.DType) -> List[tf.Tensor]:
    return [tf.constant(values, dtype=dtype) for values in vector.inputs_for(NAME[dtype])]


def finite_part_loss(out: tf.Tensor, weights: Optional[list]) -> tf.Tensor:
    """sum(out * w) over the finite entries of out (an op may return -inf by convention)."""
    w = tf.ones_like(out) if weights is None else tf.constant(weights, out.dtype)
    finite = tf.math.is_finite(tf.stop_gradient(out))
    return tf.reduce_sum(tf.where(finite, out, tf.zeros_like(out)) * w)


def contract_loss(out: tf.Tensor, vector: Vector) -> tf.Tensor:
    """The vector's loss: sum(out * w) over the finite outputs, or over every output."""
    if vector.loss == "finite":
        return finite_part_loss(out, vector.weights)
    return tf.reduce_sum(out if vector.weights is None else out * tf.constant(vector.weights, out.dtype))


def flushes_subnormals(dtype: tf.DType, mode: str = "eager") -> bool:
    """True where TensorFlow reads and writes subnormal numbers as 0 (its CPU kernels and XLA do)."""
    half = lambda t: t / 2  # noqa: E731
    if mode != "eager":
        half = tf.function(half, jit_compile=mode == "jit")
    tiny = tf.constant(dtype.as_numpy_dtype(tf.experimental.numpy.finfo(dtype.as_numpy_dtype).tiny), dtype)
    return bool(half(tiny).numpy() == 0)


def _combination(g: tf.Tensor) -> tf.Tensor:
    """A generic linear combination of a first derivative (weights linspace(0.5, 1.5))."""
    n = int(tf.size(g)) if g.shape.num_elements() is None else g.shape.num_elements()
    w = tf.reshape(tf.cast(tf.linspace(0.5, 1.5, n), g.dtype), tf.shape(g))
    return tf.reduce_sum(g * w)


def _derivatives(vector: Vector, second: bool):
    """A function of the inputs: (out, first derivatives, second derivatives or Nones)."""
    op = fn(vector)
    zero = tf.UnconnectedGradients.ZERO

    def run(*xs):
        with tf.GradientTape(watch_accessed_variables=False) as outer:
            outer.watch(xs)
            with tf.GradientTape(watch_accessed_variables=False) as inner:
                inner.watch(xs)
                out = op(*xs)
                loss = contract_loss(out, vector)
            grads = inner.gradient(loss, list(xs), unconnected_gradients=zero)
            total = tf.add_n([_combination(g) for g in grads]) if second else None
        seconds = outer.gradient(total, list(xs)) if second else [None] * len(xs)
        return out, grads, seconds

    return run


def _floats(t: tf.Tensor):
    return tf.cast(t, tf.float64).numpy().tolist()


_FLUSHES: Dict[Tuple[str, str], bool] = {}


class TensorFlowBackend:
    dtypes = tuple(DTYPE)
    two_backward_paths = False

    def __init__(self, mode: str = "eager"):
        if mode not in ("eager", "function", "jit"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.name = "tf" if mode == "eager" else f"tf-{mode}"

    def _compiled(self, run):
        if self.mode == "eager":
            return run
        return tf.function(run, jit_compile=self.mode == "jit", reduce_retracing=False)

    def flushes_subnormals(self, dtype: str) -> bool:
        if (self.mode, dtype) not in _FLUSHES:
            _FLUSHES[self.mode, dtype] = flushes_subnormals(DTYPE[dtype], self.mode)
        return _FLUSHES[self.mode, dtype]

    def output_dtype(self, vector: Vector, dtype: str) -> str:
        out = self._compiled(fn(vector))(*tensors(vector, DTYPE[dtype]))
        return NAME.get(out.dtype, out.dtype.name)

    def value_and_grads(self, vector: Vector, dtype: str, create_graph: bool = False):
        out, grads, _ = self._compiled(_derivatives(vector, second=False))(*tensors(vector, DTYPE[dtype]))
        return _floats(out), [_floats(g) for g in grads]

    def second_derivative(self, vector: Vector, dtype: str):
        _, _, seconds = self._compiled(_derivatives(vector, second=True))(*tensors(vector, DTYPE[dtype]))
        if all(s is None for s in seconds):
            return None  # the first derivative does not depend on the inputs
        inputs = tensors(vector, DTYPE[dtype])
        return [_floats(tf.zeros_like(t) if s is None else s) for s, t in zip(seconds, inputs)]


BACKEND = TensorFlowBackend("eager")
