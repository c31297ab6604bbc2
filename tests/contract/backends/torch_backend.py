"""The contract on ``nanguard.torch``: vectors become tensors, calls and autograd gradients."""

from __future__ import annotations

from typing import Callable, List, Optional

import torch

import nanguard.torch as ng
from nanguard.core.vectors import Vector

DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
NAME = {v: k for k, v in DTYPE.items()}

_CONDITIONS = {"nonzero": lambda x: x != 0, "positive": lambda x: x > 0}
_FUNCTIONS = {"reciprocal": lambda v: 1 / v, "log": torch.log, "identity": lambda v: v}
_RENAMES = {"axis": "dim", "keepdims": "keepdim"}


def fn(vector: Vector) -> Callable[..., torch.Tensor]:
    """The safe op of ``vector`` with its keyword arguments bound, as a function of the inputs."""
    kwargs = {_RENAMES.get(k, k): v for k, v in vector.kwargs.items()}
    if "mask" in kwargs:
        kwargs["mask"] = torch.tensor(kwargs["mask"])
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


def tensors(vector: Vector, dtype: torch.dtype, requires_grad: bool = True) -> List[torch.Tensor]:
    return [torch.tensor(values, dtype=dtype).requires_grad_(requires_grad)
            for values in vector.inputs_for(NAME[dtype])]


def weights(vector: Vector, dtype: torch.dtype = torch.float64) -> Optional[torch.Tensor]:
    return None if vector.weights is None else torch.tensor(vector.weights, dtype=dtype)


def finite_part_loss(out: torch.Tensor, w: Optional[torch.Tensor]) -> torch.Tensor:
    """sum(out * w) over the finite entries of out (an op may return -inf by convention)."""
    w = torch.ones_like(out) if w is None else w.to(out.dtype)
    finite = torch.isfinite(out.detach())
    return torch.where(finite, out, torch.zeros_like(out)).mul(w).sum()


def contract_loss(out: torch.Tensor, vector: Vector) -> torch.Tensor:
    """The vector's loss: sum(out * w) over the finite outputs, or over every output."""
    w = weights(vector, out.dtype)  # built in the output's dtype: no float32 detour for float64
    if vector.loss == "finite":
        return finite_part_loss(out, w)
    return (out if w is None else out * w).sum()


def flushes_subnormals(dtype: torch.dtype) -> bool:
    """True where arithmetic reads and writes subnormal numbers as 0 (torch.set_flush_denormal)."""
    tiny = torch.tensor(torch.finfo(dtype).tiny, dtype=dtype)
    return bool(tiny / 2 == 0)


def _grads(vector: Vector, inputs: List[torch.Tensor], create_graph: bool):
    out = fn(vector)(*inputs)
    loss = contract_loss(out, vector)
    grads = torch.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True)
    return out, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]


def _floats(t: torch.Tensor):
    return t.detach().to(torch.float64).tolist()


def _combination(g: torch.Tensor) -> torch.Tensor:
    """A generic linear combination of a first derivative (weights linspace(0.5, 1.5))."""
    return (g * torch.linspace(0.5, 1.5, g.numel(), dtype=g.dtype).reshape(g.shape)).sum()


class TorchBackend:
    """``eager`` (autograd, both backward paths) or ``func`` (``torch.func.grad`` for the
    derivatives and ``vmap`` over two copies for the value: the branch-free code paths)."""

    dtypes = tuple(DTYPE)

    def __init__(self, mode: str = "eager"):
        if mode not in ("eager", "func"):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.name = "torch" if mode == "eager" else f"torch-{mode}"
        self.two_backward_paths = mode == "eager"

    def flushes_subnormals(self, dtype: str) -> bool:
        return flushes_subnormals(DTYPE[dtype])

    def output_dtype(self, vector: Vector, dtype: str) -> str:
        out = fn(vector)(*tensors(vector, DTYPE[dtype], requires_grad=False))
        return NAME.get(out.dtype, str(out.dtype))

    def _func_loss(self, vector: Vector):
        op = fn(vector)
        return lambda *xs: contract_loss(op(*xs), vector)

    def value_and_grads(self, vector: Vector, dtype: str, create_graph: bool = False):
        if self.mode == "func":
            inputs = tensors(vector, DTYPE[dtype], requires_grad=False)
            value = torch.func.vmap(fn(vector))(*[torch.stack([t, t]) for t in inputs])[0]
            grads = torch.func.grad(self._func_loss(vector), argnums=tuple(range(len(inputs))))(*inputs)
            return _floats(value), [_floats(g) for g in grads]
        out, grads = _grads(vector, tensors(vector, DTYPE[dtype]), create_graph)
        return _floats(out), [_floats(g) for g in grads]

    def second_derivative(self, vector: Vector, dtype: str):
        if self.mode == "func":
            inputs = tensors(vector, DTYPE[dtype], requires_grad=False)
            argnums = tuple(range(len(inputs)))
            first = torch.func.grad(self._func_loss(vector), argnums=argnums)
            second = torch.func.grad(lambda *xs: sum(_combination(g) for g in first(*xs)), argnums=argnums)(*inputs)
            return [_floats(s) for s in second]
        inputs = tensors(vector, DTYPE[dtype])
        _, grads = _grads(vector, inputs, create_graph=True)
        # differentiate a generic combination of the first derivatives once more
        terms = [_combination(g) for g in grads if g.requires_grad]
        if not terms:
            return None
        second = torch.autograd.grad(sum(terms), inputs, allow_unused=True)
        return [_floats(torch.zeros_like(t) if s is None else s) for s, t in zip(second, inputs)]


BACKEND = TorchBackend()
