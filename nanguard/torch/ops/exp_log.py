"""Exponentials and logarithms: ``softplus``, ``logaddexp``, ``logsumexp``."""

from __future__ import annotations

import math

from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from nanguard.core.opspec import document
from nanguard.torch._checks import as_floating, broadcast_pair, check_dim, check_floating, check_mask, check_number
from nanguard.torch.ops._core import (
    SafeFunction, apply_op, can_branch_on_data, compute_dtype, lowest, may_hold_nan, public_op, sum_to,
    unsqueeze_dims,
)

# Above beta*x = t, log1p(exp(-beta*x)) is below half an ulp of x in the compute precision
# (float32 for float16/bfloat16/float32, float64 for float64), so returning x is exact
# after rounding: the switch is invisible, unlike torch's fixed threshold of 20 in float64.
_SOFTPLUS_EXACT_THRESHOLD = {torch.float64: 37.0}
_SOFTPLUS_DEFAULT_THRESHOLD = 20.0


@public_op()
@document("softplus", "torch")
def softplus(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""The textbook ``x.exp().log1p()`` overflows to inf for ``x > 88`` (float32) or ``x > 11``
    (float16), and masking the inf with ``torch.where`` still leaves a NaN *gradient*
    (``0 * inf``). This op is exact everywhere: for large ``beta * x`` it returns ``x``
    only where ``log1p(exp(-beta * x))`` is below half an ulp of ``x``, so there is no
    visible jump in value or gradient (float64 included).

    For a ``beta`` that is not a power of two, ``beta * x`` is rounded, and exp turns that
    rounding into a relative error of up to ``|beta * x| / 2`` ulps (torch's softplus: 50 ulps
    in the float32 tail at ``beta=0.3``); for ``beta < 1`` the tail's ``exp(beta * x)`` is
    also subnormal before ``1 / beta`` lifts it (1470 ulps at ``beta=1e-3``). Both are
    removed here (an exact two-product, and the tail as ``exp(beta * x - log(beta))``,
    applied where ``beta * x < -4``): the value and gradient stay within a few ulps for every
    beta. Cost, forward and backward on 1e6 floats: ``beta=1`` (or any power of two >= 1)
    as torch; other betas up to 4x torch when some ``beta * x < -4`` (eager CPU recomputes
    only those entries).

    Example:
        >>> x = torch.tensor([0.0, 1.0, 100.0], requires_grad=True)
        >>> nanguard.softplus(x)
        tensor([  0.6931,   1.3133, 100.0000], grad_fn=<SoftplusBackward0>)
        >>> nanguard.softplus(x).sum().backward(); x.grad
        tensor([0.5000, 0.7311, 1.0000])
    """
    check_floating(x, "x", "softplus")
    beta = check_number(beta, "beta", "softplus", positive=True)
    threshold = _SOFTPLUS_EXACT_THRESHOLD.get(x.dtype, _SOFTPLUS_DEFAULT_THRESHOLD)
    out = F.softplus(x, beta=beta, threshold=threshold)
    if (math.frexp(beta)[0] == 0.5 and beta >= 1) or x.dtype not in _SPLITTER:
        # beta * x is exact and exp(beta * x) / beta no more subnormal than exp(beta * x);
        # half precision is computed in float32 and rounds the error away
        return out
    if not can_branch_on_data(x):
        return _softplus_beyond_product_rounding(x, beta, out)
    # eager: only where beta * x < -4 is the product's rounding worth more than 2 ulps
    with torch.no_grad():
        needed = (x.detach().reshape(-1) < _ROUNDING_MATTERS / beta).nonzero().squeeze(-1)
    if not needed.numel():
        return out
    flat = out.reshape(-1)
    repaired = _softplus_beyond_product_rounding(x.reshape(-1)[needed], beta, flat[needed])
    # in place: softplus's backward keeps its input, not this output
    return flat.index_put_((needed,), repaired).reshape(out.shape)


_ROUNDING_MATTERS = -4.0
# Dekker's splitting constants: 2**ceil(p/2) + 1 for a p-bit significand
_SPLITTER = {torch.float32: 4097.0, torch.float64: 134217729.0}
# Below beta * x = -T, log1p(e) = e to within 0.15 ulp (e = exp(beta * x) < 2 ** -25 / 2 ** -54)
_SOFTPLUS_TAIL = {torch.float32: -18.0, torch.float64: -38.0}


def _two_product(x: torch.Tensor, b: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) with hi = fl(x * b) and hi + lo = x * b exactly (Dekker; no wider dtype)."""
    split = _SPLITTER[x.dtype]
    # |x| * split must not overflow: split a power-of-two-scaled copy (exact) of huge x
    big = x.abs() > torch.finfo(x.dtype).max / (4 * split)
    scale = torch.where(big, 2.0 ** -64, 1.0).to(x.dtype)
    xs = x * scale
    c = xs * split
    x_hi = c - (c - xs)
    x_lo = xs - x_hi
    b_split = float(torch.tensor(b * split, dtype=x.dtype))
    b_hi = float(torch.tensor(b_split - float(torch.tensor(b_split - b, dtype=x.dtype)), dtype=x.dtype))
    b_lo = b - b_hi
    hi = xs * b
    lo = ((x_hi * b_hi - hi) + x_hi * b_lo + x_lo * b_hi) + x_lo * b_lo
    return hi / scale, lo / scale


# ln 2 in two parts (fdlibm's): e * _LN2_HI is exact for |e| < 2**11
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10


def _log_two_parts(beta: float, dtype: torch.dtype) -> Tuple[float, float]:
    """log(beta) as hi (in ``dtype``) + lo, to about 2**-100 relative: math.log alone is off by
    up to half a float64 ulp of log(beta), which exp turns into 10 ulps of the result."""
    m, e = math.frexp(beta)
    exact = e * _LN2_HI
    rest = math.log(m) + e * _LN2_LO
    hi = float(torch.tensor(exact + rest, dtype=dtype))
    return hi, (exact - hi) + rest


def _softplus_beyond_product_rounding(x: torch.Tensor, beta: float, out: torch.Tensor) -> torch.Tensor:
    """softplus(x, beta) for beta not a power of two, free of the rounding of beta * x.

    That rounding is up to |beta·x|/2 ulps of 1, and exp turns it into a relative error of
    the same size (softplus(x, 0.3) was 50 ulps off in the float32 tail, float64 300, as
    torch's own); for beta < 1 the tail's exp(beta·x) is also subnormal before the division
    by beta lifts it back (softplus(x, 1e-3) was 1470 ulps off). With beta·x = hi + lo
    exactly (beta's own rounding to the dtype included):

    * tail, beta·x < -T: softplus = exp(beta·x - log beta), the exponent carried as a
      double-word (hi - log beta, then the small parts), so nothing is subnormal before the
      result itself;
    * -T <= beta·x < 0: softplus(hi) + lo·σ(hi)/beta (first order in lo);
    * beta·x >= 0: torch's value, already within an ulp (softplus >= beta·x there).

    The small parts are constants to autograd: the gradient is d/dx of the same expression,
    σ(beta·x) + O(lo²). The tail branch is evaluated on a double-where (its exp may overflow
    where it is not taken).
    """
    b = float(torch.tensor(beta, dtype=x.dtype))          # the factor torch multiplies by
    with torch.no_grad():
        hi, lo = _two_product(x.detach(), b)
        lo = lo + x.detach() * (beta - b)                 # beta's rounding to the dtype
        finite = torch.isfinite(hi)
        tail = finite & (hi < _SOFTPLUS_TAIL[x.dtype])
        middle = finite & (hi < 0) & ~tail
        lb_hi, lb_lo = _log_two_parts(beta, x.dtype)
        # s = hi - lb_hi with its rounding error (Knuth's two-sum)
        s = hi - lb_hi
        v = s - hi
        sum_error = (hi - (s - v)) + (-lb_hi - v)
        small = torch.where(tail, sum_error + lo - lb_lo, 0.0)
        corrected = torch.where(middle, lo, 0.0)
    exponent = torch.where(tail, x * b - lb_hi, 0.0)     # differentiable: d/dx = b
    tail_value = torch.exp(exponent) * (1 + small)
    value = torch.where(tail, tail_value, out)
    return value + corrected * torch.sigmoid(x * b) / beta


def _softmax_weights(x: torch.Tensor, shift: torch.Tensor, dims: tuple, grad: torch.Tensor) -> torch.Tensor:
    """grad * softmax(x) over ``dims``, as exp(x - shift) normalised by its own sum.

    ``shift`` is the rounded logsumexp: exp(x - shift) alone carries its rounding, up to
    |logsumexp| / 2 ulps (float32 at logsumexp = 4096: 1.2e-4 relative), in every weight
    alike; dividing by the weights' sum removes that common factor. A slice of -inf only has
    weights and sum 0: it stays 0. In place when no graph is built.
    """
    if torch.is_grad_enabled():
        weights = torch.exp(x - shift)
        total = weights.sum(dims, keepdim=True)
        return grad * weights / torch.where(total > 0, total, torch.ones_like(total))
    weights = torch.sub(x, shift).exp_()
    total = weights.sum(dims, keepdim=True)
    return weights.div_(total.masked_fill_(total == 0, 1.0)).mul_(grad)


def _sigmoid_of_difference(a: torch.Tensor, b: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """grad * sigmoid(a - b), with 0 where a = b = -inf and 1/2 where a = b = +inf.

    Both differences are NaN; at +inf the weight is sigmoid(0), the limit along a = b (and
    what a = b gives everywhere else), at -inf 0 (the convention: no term contributes).
    """
    if torch.is_grad_enabled():
        # only a = b = ±inf: a finite a = b keeps a - b, whose derivative (1, -1) the second
        # derivative needs (1/4 at a = b)
        same = (a == b) & torch.isinf(a)
        both_neg_inf = same & torch.isneginf(a)
        difference = torch.where(same, torch.zeros_like(a), a) - torch.where(same, torch.zeros_like(b), b)
        return torch.where(both_neg_inf, torch.zeros_like(grad), grad * torch.sigmoid(difference))
    # the only NaNs a - b makes from non-NaN inputs are at a = b = ±inf: weights 0 and 1/2
    # there, as in the differentiable branch; a NaN input keeps its NaN
    difference = torch.sub(a, b)
    if not can_branch_on_data(difference) or may_hold_nan(difference):
        same_inf = (a == b) & torch.isinf(a)
        difference = torch.where(same_inf, torch.where(a > 0, 0.0, float("-inf")), difference)
    return difference.sigmoid_().mul_(grad)


class _LogAddExp(SafeFunction):
    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logaddexp(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b = ctx.saved_tensors
        # d/da = sigmoid(a - b): exact even when a and b are huge and close, where
        # exp(a - logaddexp(a, b)) suffers from the rounding of the result.
        grad_a = sum_to(_sigmoid_of_difference(a, b, grad), a.shape) if ctx.needs_input_grad[0] else None
        grad_b = sum_to(_sigmoid_of_difference(b, a, grad), b.shape) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


@public_op()
@document("logaddexp", "torch")
def logaddexp(a: torch.Tensor, b: Union[torch.Tensor, float]) -> torch.Tensor:
    r"""``torch.logaddexp`` returns -inf for ``a = b = -inf`` but its gradient there is NaN
    (``exp(-inf - (-inf))``). Broadcasts like ``torch.logaddexp``.

    Example:
        >>> a = torch.tensor([float("-inf"), 0.0], requires_grad=True)
        >>> nanguard.logaddexp(a, torch.tensor([float("-inf"), 0.0])).sum().backward()
        >>> a.grad
        tensor([0.0000, 0.5000])
    """
    check_floating(a, "a", "logaddexp")
    b = as_floating(b, a, "b", "logaddexp")
    broadcast_pair(a, b, "logaddexp")
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = a.to(dtype), b.to(dtype)
    # torch.compile cannot trace a Function that receives one tensor twice
    return apply_op(_LogAddExp, a, b.view_as(b) if b is a else b)


class _LogSumExp(SafeFunction):
    @staticmethod
    def forward(x: torch.Tensor, dims: tuple, keepdim: bool) -> torch.Tensor:
        return torch.logsumexp(x, dims, keepdim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dims, keepdim = inputs
        ctx.dims, ctx.keepdim = dims, keepdim
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, out = ctx.saved_tensors
        out = unsqueeze_dims(out, ctx.dims, ctx.keepdim, x.dim())
        grad = unsqueeze_dims(grad, ctx.dims, ctx.keepdim, x.dim())
        # An all -inf slice has out = -inf; its finite stand-in makes every weight exp(-inf) = 0.
        shift = torch.clamp_min(out, lowest(out.dtype))
        return _softmax_weights(x, shift, ctx.dims, grad), None, None


@public_op()
@document("logsumexp", "torch")
def logsumexp(
    x: torch.Tensor,
    dim: Union[int, Sequence[int]],
    keepdim: bool = False,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    r"""``torch.logsumexp`` returns -inf for a slice that is all -inf but its gradient there is
    NaN. This op agrees with it everywhere else.

    Example:
        >>> x = torch.full((2, 3), float("-inf"), requires_grad=True)
        >>> nanguard.logsumexp(x, dim=1).sum().backward()
        >>> x.grad
        tensor([[0., 0., 0.],
                [0., 0., 0.]])
    """
    check_floating(x, "x", "logsumexp")
    dims = check_dim(x, dim, "logsumexp", allow_none=False)
    if mask is not None:
        check_mask(mask, x, "logsumexp")
        x = torch.where(mask, x, float("-inf"))
    if x.dtype in (torch.float16, torch.bfloat16):
        # in float32, and the float32 result is what backward reuses: exp(x - lse) from an
        # lse rounded to bfloat16 (8 bits) is off by up to |lse| * 2^-8 in the exponent
        return apply_op(_LogSumExp, x.to(compute_dtype(x.dtype)), dims, bool(keepdim)).to(x.dtype)
    return apply_op(_LogSumExp, x, dims, bool(keepdim))
