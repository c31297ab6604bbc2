"""Argument checks shared by the public API: fail early, in words a user understands."""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from nanguard.core import arguments, op_checks

Dim = Union[int, Sequence[int], None]

# how the shared checks (nanguard.core.op_checks) name torch's things
SPELLING = op_checks.Spelling("torch", "a torch.Tensor", "", "{name}.float()", "mask != 0")


def check_tensor(x: object, name: str, op: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"nanguard.{op}: `{name}` must be a torch.Tensor, got {type(x).__name__}")
    return x


def check_cond(cond: object, op: str) -> torch.Tensor:
    """``safe_where``'s condition: a bool tensor."""
    cond = check_tensor(cond, "cond", op)
    op_checks.check_bool_dtype(str(cond.dtype).removeprefix("torch."), "cond", op, SPELLING)
    return cond


def check_floating(x: object, name: str, op: str) -> torch.Tensor:
    """A real floating-point tensor; integer, bool and complex tensors are refused."""
    x = check_tensor(x, name, op)
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"nanguard.{op}: `{name}` must be a floating-point tensor "
            f"(float16, bfloat16, float32 or float64), got dtype {x.dtype}; "
            f"convert it first, e.g. `{name}.float()`"
        )
    return x


def as_floating(x: object, like: torch.Tensor, name: str, op: str) -> torch.Tensor:
    """A tensor or Python number in the dtype and device of `like` (for the second operand)."""
    if isinstance(x, torch.Tensor):
        return check_floating(x, name, op)
    return torch.tensor(check_real(x, name, op), dtype=like.dtype, device=like.device)


def check_real(x: object, name: str, op: str) -> float:
    """A real number (NaN and inf allowed: they are data, not a configuration error)."""
    return arguments.check_real(x, name, f"nanguard.{op}", tensor="a tensor")


def check_number(value: object, name: str, op: str, *, positive: bool = False) -> float:
    return arguments.check_number(value, name, f"nanguard.{op}", positive=positive)


def check_dim(x: torch.Tensor, dim: Dim, op: str, *, allow_none: bool = True) -> Optional[tuple[int, ...]]:
    """Normalise `dim` to a tuple of non-negative axes (None = all axes, when allowed)."""
    if dim is None:
        if not allow_none:
            raise TypeError(f"nanguard.{op}: `dim` is required")
        return None
    if isinstance(dim, bool) or not isinstance(dim, (int, Sequence)) or isinstance(dim, str):
        raise TypeError(f"nanguard.{op}: `dim` must be an int or a sequence of ints, got {dim!r}")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        # torch's reductions read an empty dim list as "every dimension"
        if not allow_none:
            raise ValueError(f"nanguard.{op}: `dim` must name at least one dimension, got {dim!r}")
        return None
    ndim = max(x.dim(), 1)  # a 0-d tensor accepts dim 0 / -1, as torch reductions do
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"nanguard.{op}: `dim` must be an int or a sequence of ints, got {dim!r}")
        if not -ndim <= d < ndim:
            raise ValueError(
                f"nanguard.{op}: dim {d} is out of range for a tensor with {x.dim()} dimension(s) "
                f"(shape {tuple(x.shape)}); valid dims are {-ndim}..{ndim - 1}"
            )
        out.append(d % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"nanguard.{op}: `dim` repeats an axis: {dim!r}")
    return tuple(out)


def check_mask(mask: object, x: torch.Tensor, op: str) -> torch.Tensor:
    """A boolean mask (True = keep) that broadcasts to `x` without changing x's shape."""
    mask = check_tensor(mask, "mask", op)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"nanguard.{op}: `mask` must be a bool tensor (True = keep), got dtype {mask.dtype}; "
            f"use e.g. `mask != 0`"
        )
    try:
        shape = broadcast_shape(mask.shape, x.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(
            f"nanguard.{op}: `mask` of shape {tuple(mask.shape)} does not broadcast to the input's "
            f"shape {tuple(x.shape)}"
        )
    if mask.device != x.device:
        raise ValueError(f"nanguard.{op}: `mask` is on {mask.device} but the input is on {x.device}")
    return mask


def broadcast_shape(*shapes: torch.Size) -> torch.Size:
    """``torch.broadcast_shapes``, without its ~25 us of Python when the shapes are equal."""
    first = shapes[0]
    if all(shape == first for shape in shapes[1:]):
        return torch.Size(first)
    return torch.broadcast_shapes(*shapes)


def broadcast_pair(a: torch.Tensor, b: torch.Tensor, op: str, names: tuple[str, str] = ("a", "b")) -> None:
    try:
        broadcast_shape(a.shape, b.shape)
    except RuntimeError:
        raise ValueError(
            f"nanguard.{op}: shapes {tuple(a.shape)} (`{names[0]}`) and {tuple(b.shape)} (`{names[1]}`) "
            f"do not broadcast"
        ) from None
