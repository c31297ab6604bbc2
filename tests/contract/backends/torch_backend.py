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


def weights(vector: Vector) -> Optional[torch.Tensor]:
    return None if vector.weights is None else torch.tensor(vector.weights)


def finite_part_loss(out: torch.Tensor, w: Optional[torch.Tensor]) -> torch.Tensor:
    """sum(out * w) over the finite entries of out (an op may return -inf by convention)."""
    w = torch.ones_like(out) if w is None else w.to(out.dtype)
    finite = torch.isfinite(out.detach())
    return torch.where(finite, out, torch.zeros_like(out)).mul(w).sum()


def _grads(vector: Vector, inputs: List[torch.Tensor], create_graph: bool):
    out = fn(vector)(*inputs)
    loss = finite_part_loss(out, weights(vector))
    grads = torch.autograd.grad(loss, inputs, create_graph=create_graph, allow_unused=True)
    return out, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]


def _floats(t: torch.Tensor):
    return t.detach().to(torch.float64).tolist()


class TorchBackend:
    name = "torch"
    dtypes = tuple(DTYPE)
    two_backward_paths = True

    def output_dtype(self, vector: Vector, dtype: str) -> str:
        out = fn(vector)(*tensors(vector, DTYPE[dtype], requires_grad=False))
        return NAME.get(out.dtype, str(out.dtype))

    def value_and_grads(self, vector: Vector, dtype: str, create_graph: bool = False):
        out, grads = _grads(vector, tensors(vector, DTYPE[dtype]), create_graph)
        return _floats(out), [_floats(g) for g in grads]

    def second_derivative(self, vector: Vector, dtype: str):
        inputs = tensors(vector, DTYPE[dtype])
        _, grads = _grads(vector, inputs, create_graph=True)
        # differentiate a generic combination of the first derivatives once more
        terms = [(g * torch.linspace(0.5, 1.5, g.numel(), dtype=g.dtype).reshape(g.shape)).sum()
                 for g in grads if g.requires_grad]
        if not terms:
            return None
        second = torch.autograd.grad(sum(terms), inputs, allow_unused=True)
        return [_floats(torch.zeros_like(t) if s is None else s) for s, t in zip(second, inputs)]


BACKEND = TorchBackend()
