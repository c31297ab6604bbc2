"""The contract on ``nanguard.jax``: vectors become arrays, calls and ``jax.grad`` gradients.

One backend object per transformation: ``eager`` (the one registered in ``ADAPTERS``),
``jit`` (everything under ``jax.jit``), ``vmap`` (the op mapped over a batch of two copies of
the inputs) and ``hessian`` (second derivatives from ``jax.hessian`` rather than a gradient
of a gradient); ``tests/jax/ops`` runs the whole table in the other three.

float64 runs inside ``jax.enable_x64(True)``, a context, so other tests keep JAX's default.
"""

from __future__ import annotations

import contextlib
from typing import Callable, List, Optional

import jax
import jax.numpy as jnp
import numpy as np

import nanguard.jax as ng
from nanguard.core.vectors import Vector

DTYPE = {"float16": jnp.float16, "bfloat16": jnp.bfloat16, "float32": jnp.float32, "float64": jnp.float64}
NAME = {jnp.dtype(v).name: k for k, v in DTYPE.items()}

_CONDITIONS = {"nonzero": lambda x: x != 0, "positive": lambda x: x > 0}
_FUNCTIONS = {"reciprocal": lambda v: 1 / v, "log": jnp.log, "identity": lambda v: v}
MODES = ("eager", "jit", "vmap", "hessian")


def fn(vector: Vector) -> Callable[..., jax.Array]:
    """The safe op of ``vector`` with its keyword arguments bound, as a function of the inputs."""
    kwargs = dict(vector.kwargs)
    if "mask" in kwargs:
        kwargs["mask"] = jnp.asarray(kwargs["mask"])
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


def _x64(dtype: str):
    return jax.enable_x64(True) if dtype == "float64" else contextlib.nullcontext()


def arrays(vector: Vector, dtype: str) -> List[jax.Array]:
    return [jnp.asarray(np.asarray(values, np.float64), DTYPE[dtype]) for values in vector.inputs_for(dtype)]


def finite_part_loss(out: jax.Array, weights: Optional[list]) -> jax.Array:
    """sum(out * w) over the finite entries of out (an op may return -inf by convention)."""
    w = jnp.ones_like(out) if weights is None else jnp.asarray(weights, out.dtype)
    finite = jnp.isfinite(jax.lax.stop_gradient(out))
    return jnp.sum(jnp.where(finite, out, jnp.zeros_like(out)) * w)


def contract_loss(out: jax.Array, vector: Vector) -> jax.Array:
    """The vector's loss: sum(out * w) over the finite outputs, or over every output."""
    if vector.loss == "finite":
        return finite_part_loss(out, vector.weights)
    return jnp.sum(out if vector.weights is None else out * jnp.asarray(vector.weights, out.dtype))


def flushes_subnormals(dtype: str, compiled: bool = False) -> bool:
    """True where XLA reads and writes subnormal numbers as 0 (its CPU backend does)."""
    with _x64(dtype):
        tiny = jnp.asarray(jnp.finfo(DTYPE[dtype]).tiny, DTYPE[dtype])
        half = jax.jit(lambda t: t / 2) if compiled else (lambda t: t / 2)
        return bool(half(tiny) == 0)


def _combination(g: jax.Array) -> jax.Array:
    """A generic linear combination of a first derivative (weights linspace(0.5, 1.5))."""
    w = jnp.linspace(0.5, 1.5, g.size, dtype=g.dtype).reshape(g.shape)
    return jnp.sum(g * w)


def _floats(a: jax.Array):
    return np.asarray(a.astype(jnp.float32) if a.dtype == jnp.bfloat16 else a, np.float64).tolist()


class JaxBackend:
    dtypes = tuple(DTYPE)
    two_backward_paths = False

    def __init__(self, mode: str = "eager"):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.name = "jax" if mode == "eager" else f"jax-{mode}"

    def _op(self, vector: Vector) -> Callable[..., jax.Array]:
        op = fn(vector)
        if self.mode != "vmap":
            return op

        def mapped(*xs):
            # two copies along a new leading axis; the mapped result's first row is the op's
            return jax.vmap(op)(*[jnp.stack([x, x]) for x in xs])[0]

        return mapped

    def _compiled(self, f):
        return jax.jit(f) if self.mode == "jit" else f

    def flushes_subnormals(self, dtype: str) -> bool:
        return flushes_subnormals(dtype, compiled=self.mode == "jit")

    def output_dtype(self, vector: Vector, dtype: str) -> str:
        with _x64(dtype):
            out = self._compiled(self._op(vector))(*arrays(vector, dtype))
            return NAME.get(out.dtype.name, out.dtype.name)

    def _loss(self, vector: Vector):
        op = self._op(vector)
        return lambda *xs: contract_loss(op(*xs), vector)

    def value_and_grads(self, vector: Vector, dtype: str, create_graph: bool = False):
        with _x64(dtype):
            xs = arrays(vector, dtype)
            loss = self._loss(vector)
            argnums = tuple(range(len(xs)))
            run = self._compiled(lambda *a: (self._op(vector)(*a), jax.grad(loss, argnums)(*a)))
            out, grads = run(*xs)
            return _floats(out), [_floats(g) for g in grads]

    def second_derivative(self, vector: Vector, dtype: str):
        with _x64(dtype):
            xs = arrays(vector, dtype)
            loss = self._loss(vector)
            argnums = tuple(range(len(xs)))
            if self.mode == "hessian":
                hess = jax.hessian(loss, argnums)(*xs)  # hess[i][j]: d²/dx_i dx_j, shape xi.shape + xj.shape
                seconds = []
                for j, xj in enumerate(xs):
                    # the gradient of sum_i <g_i, w_i> with respect to x_j, from the Hessian blocks
                    total = jnp.zeros(xj.shape, xj.dtype)
                    for i, xi in enumerate(xs):
                        w = jnp.linspace(0.5, 1.5, xi.size, dtype=xi.dtype)
                        block = jnp.reshape(hess[i][j], (xi.size,) + xj.shape)
                        total = total + jnp.tensordot(w, block, axes=1)
                    seconds.append(total)
            else:
                def combined(*a):
                    grads = jax.grad(loss, argnums)(*a)
                    return sum(_combination(g) for g in grads)

                seconds = self._compiled(jax.grad(combined, argnums))(*xs)
            return [_floats(s) for s in seconds]


BACKEND = JaxBackend("eager")
