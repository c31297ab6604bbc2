"""Euclidean lengths and directions: ``norm``, ``normalize``, ``cosine_similarity``."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

from nanguard.core.opspec import document
from nanguard.torch._checks import broadcast_pair, broadcast_shape, check_dim, check_floating
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, compute_dtype, pow2_scale, public_op, unsqueeze_dims,
)


def _safe_range(dtype: torch.dtype) -> Tuple[float, float]:
    """Norms in [lo, hi] were computed without overflow or a loss to underflow.

    Below lo the squares of the largest entries may have been subnormal; above hi the
    product of two such norms could overflow (cosine similarity needs that margin).
    """
    finfo = torch.finfo(dtype)
    return finfo.tiny**0.5 / finfo.eps, finfo.max**0.5 / 4


def _l2_norm(x: torch.Tensor, dims: Optional[Tuple[int, ...]], keepdim: bool) -> torch.Tensor:
    """The 2-norm over `dims`, free of overflow and underflow.

    torch's vector_norm squares in the accumulation dtype (float32 for float32 and bfloat16
    inputs), so ``norm([1e30, 1e30])`` is inf and ``norm([1e-40])`` is 0. Slices outside the
    safe range are recomputed on inputs scaled by a power of two, which is exact.
    """
    fast = torch.linalg.vector_norm(x, 2, dim=dims, keepdim=keepdim)
    if x.dtype == torch.float16 or x.numel() == 0:
        return fast  # accumulated in float32, whose range holds every float16 square
    lo, hi = _safe_range(x.dtype)
    outside = (fast < lo) | (fast > hi)
    if can_branch_on_data(fast) and not bool(outside.any()):
        return fast
    scale = pow2_scale(x, dims)
    rescued = torch.linalg.vector_norm(x / scale, 2, dim=dims, keepdim=True) * scale
    if not keepdim:
        rescued = rescued.reshape(fast.shape)
    return torch.where(outside, rescued, fast)


def _norm_and_unit_for_graph(x: torch.Tensor, dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(|x|, x/|x|) along ``dim`` (keepdim), 0 for zero vectors, from plain torch ops.

    For the differentiable backward formulas: the double-where keeps their derivatives
    finite at the zero vector, and plain ops (no nested safe op) keep forward mode
    (``torch.func.jvp`` over these formulas, as in ``hessian``) traceable.
    """
    zero = (x == 0).all(dim, keepdim=True)
    safe_x = torch.where(zero, torch.ones_like(x), x)
    n = _l2_norm(safe_x, (dim,), keepdim=True)
    unit = torch.where(zero, torch.zeros_like(x), safe_x / n)
    return torch.where(zero, torch.zeros_like(n), n), unit


def _all_in_safe_range(n: torch.Tensor) -> bool:
    """Eager-only check that g / n can neither overflow nor underflow for any nonzero norm."""
    lo, hi = _safe_range(n.dtype)
    return can_branch_on_data(n) and bool((((n >= lo) & (n <= hi)) | (n == 0)).all())


class _Norm(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dims: Optional[Tuple[int, ...]], keepdim: bool) -> torch.Tensor:
        return _l2_norm(x, dims, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.dims, ctx.keepdim = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, n = ctx.saved_tensors
        n = unsqueeze_dims(n, ctx.dims, ctx.keepdim, x.dim())
        grad = unsqueeze_dims(grad, ctx.dims, ctx.keepdim, x.dim())
        positive = n != 0  # NaN counts as nonzero: x / NaN is NaN for every entry, not 0
        safe_n = torch.where(positive, n, torch.ones_like(n))
        masked_grad = torch.where(positive, grad, torch.zeros_like(grad))
        if torch.is_grad_enabled():
            return x / safe_n * masked_grad, None, None
        if _all_in_safe_range(n):
            return x * (masked_grad / safe_n), None, None  # one pass over x, as torch does
        return torch.div(x, safe_n).mul_(masked_grad), None, None


@public_op()
@document("norm", "torch")
def norm(x: torch.Tensor, dim: Union[int, Sequence[int], None] = None, keepdim: bool = False) -> torch.Tensor:
    r"""Writing ``torch.sqrt((x ** 2).sum())`` gives an inf/NaN gradient at the zero vector;
    ``torch.linalg.vector_norm`` fixes the first derivative but its second derivative
    there is NaN, and it overflows for entries above ~1e19 (float32) and returns 0 for
    subnormal vectors. This op is exact at both ends of the range.

    Example:
        >>> x = torch.zeros(3, requires_grad=True)
        >>> nanguard.norm(x).backward(); x.grad
        tensor([0., 0., 0.])
    """
    check_floating(x, "x", "norm")
    dims = check_dim(x, dim, "norm")
    if x.dim() == 0:
        dims = None
    return apply_op(_Norm, x, dims, bool(keepdim))


class _Normalize(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dim: int) -> torch.Tensor:
        n = _l2_norm(x, (dim,), keepdim=True)
        # `n == 0`, not `n > 0`: a NaN norm must divide (NaN in, NaN out), not take the zero branch
        if can_branch_on_data(n) and bool(torch.isfinite(n).all()):
            return x / torch.where(n == 0, torch.ones_like(n), n)
        # a norm beyond the largest float (e.g. entries near 3e38): divide the scaled vector
        scaled = x / pow2_scale(x, (dim,))
        scaled_n = torch.linalg.vector_norm(scaled, 2, dim=dim, keepdim=True)
        return scaled / torch.where(scaled_n == 0, torch.ones_like(scaled_n), scaled_n)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.dim = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, unit = ctx.saved_tensors
        dim = ctx.dim
        if torch.is_grad_enabled():
            n, _ = _norm_and_unit_for_graph(x, dim)
            positive = n != 0  # NaN counts as nonzero: its gradient is NaN, not 0
            safe_n = torch.where(positive, n, torch.ones_like(n))
            tangent = grad - unit * (unit * grad).sum(dim, keepdim=True)
            return torch.where(positive, tangent / safe_n, torch.zeros_like(tangent)), None
        n = _l2_norm(x, (dim,), keepdim=True)
        positive = n != 0
        safe_n = torch.where(positive, n, torch.ones_like(n))
        # (g - u (u·g)) / |x|: the part of g orthogonal to the direction, scaled by 1/|x|
        tangent = torch.addcmul(grad, unit, (unit * grad).sum(dim, keepdim=True), value=-1)
        if _all_in_safe_range(n):
            return tangent.mul_(positive / safe_n), None
        return tangent.div_(safe_n).mul_(positive), None


@public_op()
@document("normalize", "torch")
def normalize(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""``torch.nn.functional.normalize`` divides by ``max(||x||, 1e-12)``: for the zero vector
    its gradient is ``1e12``, and vectors shorter than ``1e-12`` come out shorter than 1.
    This op is exact for every nonzero vector, subnormal and huge ones included.

    Example:
        >>> x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
        >>> nanguard.normalize(x)
        tensor([[0.6000, 0.8000],
                [0.0000, 0.0000]], grad_fn=<_NormalizeBackward>)
    """
    check_floating(x, "x", "normalize")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.normalize: `dim` must be an int, got {dim!r}")
    if x.dim() == 0:
        raise ValueError("nanguard.normalize: `x` must have at least one dimension")
    (axis,) = check_dim(x, dim, "normalize")
    # float16 in float32: the norm of [60000, 60000] overflows float16 although the unit vector does not
    return apply_op(_Normalize, x.to(compute_dtype(x.dtype)), axis).to(x.dtype)


def _nan_of_either(na: torch.Tensor, nb: torch.Tensor) -> torch.Tensor:
    """0, or NaN where either norm is NaN (an inf norm with a zero vector stays 0)."""
    total = na + nb
    return torch.where(torch.isnan(total), total, torch.zeros((), dtype=total.dtype, device=total.device))


class _Cosine(SafeFunction):
    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor, dim: int) -> torch.Tensor:
        na = _l2_norm(a, (dim,), keepdim=False)
        nb = _l2_norm(b, (dim,), keepdim=False)
        lo, hi = _safe_range(a.dtype)
        both = (na != 0) & (nb != 0)  # a NaN norm is not the zero vector: NaN in, NaN out
        # against a zero vector, 0; but a NaN in the other vector makes it NaN
        degenerate = _nan_of_either(na, nb)
        eager_safe = (
            can_branch_on_data(na) and bool((((na >= lo) & (na <= hi)) | (na == 0)).all())
            and bool((((nb >= lo) & (nb <= hi)) | (nb == 0)).all())
        )
        if eager_safe:
            dot = (a * b).sum(dim)
            return torch.where(both, dot / torch.where(both, na * nb, torch.ones_like(na)), degenerate)
        # scale each vector by a power of two so that neither the dot product nor the
        # product of norms can overflow or underflow
        sa = a / pow2_scale(a, (dim,))
        sb = b / pow2_scale(b, (dim,))
        na_s = torch.linalg.vector_norm(sa, 2, dim=dim)
        nb_s = torch.linalg.vector_norm(sb, 2, dim=dim)
        dot = (sa * sb).sum(dim)
        return torch.where(both, dot / torch.where(both, na_s * nb_s, torch.ones_like(na_s)), degenerate)

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b, ctx.dim = inputs
        ctx.save_for_backward(a, b, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b, cos = ctx.saved_tensors
        dim = ctx.dim
        cos = cos.unsqueeze(dim)
        grad = grad.unsqueeze(dim)
        if torch.is_grad_enabled():
            (na, ua), (nb, ub) = _norm_and_unit_for_graph(a, dim), _norm_and_unit_for_graph(b, dim)
        else:
            na, nb = _l2_norm(a, (dim,), keepdim=True), _l2_norm(b, (dim,), keepdim=True)
            ua = _Normalize.forward(a, dim)
            ub = _Normalize.forward(b, dim)
        both = (na != 0) & (nb != 0)
        zero = _nan_of_either(na, nb)  # 0, or NaN where either vector holds NaN
        # d cos / d a = (u_b - cos u_a) / |a|, and symmetrically for b
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            safe_na = torch.where(both, na, torch.ones_like(na))
            grad_a = torch.where(both, (ub - ua * cos) * grad / safe_na, zero)
        if ctx.needs_input_grad[1]:
            safe_nb = torch.where(both, nb, torch.ones_like(nb))
            grad_b = torch.where(both, (ua - ub * cos) * grad / safe_nb, zero)
        return grad_a, grad_b, None


@public_op()
@document("cosine_similarity", "torch")
def cosine_similarity(a: torch.Tensor, b: torch.Tensor, dim: int = -1) -> torch.Tensor:
    r"""``torch.nn.functional.cosine_similarity`` clamps ``||a|| ||b||`` below by ``eps``,
    which biases the value for short vectors and makes the gradient at zero vectors
    depend on ``eps``. Broadcasts like the torch function.

    Huge and subnormal vectors give the exact cosine.

    Example:
        >>> a = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
        >>> nanguard.cosine_similarity(a, torch.tensor([1.0, 1.0]))
        tensor([0.7071, 0.0000])
    """
    check_floating(a, "a", "cosine_similarity")
    check_floating(b, "b", "cosine_similarity")
    broadcast_pair(a, b, "cosine_similarity")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"nanguard.cosine_similarity: `dim` must be an int, got {dim!r}")
    shape = broadcast_shape(a.shape, b.shape)
    if len(shape) == 0:
        raise ValueError("nanguard.cosine_similarity: inputs must have at least one dimension")
    (axis,) = check_dim(torch.empty(shape, device="meta"), dim, "cosine_similarity")
    dtype = torch.promote_types(a.dtype, b.dtype)
    # float16/bfloat16 in float32: |a||b| of two float16 vectors of length 256 overflows
    wide = compute_dtype(dtype)
    return apply_op(_Cosine, a.to(wide).expand(shape), b.to(wide).expand(shape), axis).to(dtype)
