"""Internals shared by the safe ops: the autograd.Function base, dtype constants, rescue paths.

Two kinds of backward formula live in every op:

* the *fast* one, used when no graph of the gradient is being built
  (``torch.is_grad_enabled()`` is False inside ``backward``): as few passes over the data as
  possible, in place where possible, reusing what the forward pass made (returned as extra,
  non-differentiable outputs, since ``setup_context`` only sees inputs and outputs);
* the *differentiable* one, used under ``create_graph=True`` and ``torch.func``: built from the
  double-where pattern or from other safe ops, so that second and higher derivatives are
  finite at the singular points too.

Both compute the same values; tests check that they agree.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Tuple, TypeVar

import torch

from nanguard.torch._compat import (
    dispatch_stack_at, dispatch_stack_len, function_c_apply, functorch_transforms_active, is_functorch_wrapped_tensor,
)


def lowest(dtype: torch.dtype) -> float:
    """The most negative finite value: stands in for -inf where -inf - (-inf) would give NaN."""
    return torch.finfo(dtype).min


def can_branch_on_data(t: torch.Tensor) -> bool:
    """True in plain eager CPU code, where looking at values to pick a fast path is cheap.

    Under ``torch.compile``, ``torch.func`` transforms and on accelerators (where reading a
    value forces a device sync) the ops take their branch-free path instead.
    """
    return (
        t.device.type == "cpu"
        and not torch.compiler.is_compiling()
        and not is_functorch_wrapped_tensor(t)
    )


def may_hold_nan(t: torch.Tensor) -> bool:
    """False only if ``t`` holds no NaN: one reduction, no boolean tensor.

    The sum is NaN when an entry is NaN (or when +inf and -inf meet: a rare false alarm
    that only sends the caller down its careful path). ~5x cheaper than ``isnan(t).any()``.
    """
    return bool(torch.isnan(t.sum()))


def sum_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Reduce a broadcast gradient back to an input's shape."""
    if grad.shape == shape:
        return grad
    return grad.sum_to_size(shape)


def unsqueeze_dims(t: torch.Tensor, dims: Optional[Sequence[int]], keepdim: bool, ndim: int) -> torch.Tensor:
    """Re-insert reduced dims (non-negative; None = all) so a reduction broadcasts to its input."""
    if keepdim or t.dim() == ndim:
        return t
    if dims is None:
        return t.reshape([1] * ndim)
    for d in sorted(dims):
        t = t.unsqueeze(d)
    return t


def numel_over(x: torch.Tensor, dims: Optional[Tuple[int, ...]]) -> int:
    if dims is None:
        return x.numel()
    n = 1
    for d in dims:
        n *= x.shape[d] if x.dim() else 1
    return n


def pow2_scale(x: torch.Tensor, dims: Optional[Tuple[int, ...]]) -> torch.Tensor:
    """A power of two in (max|x| / 2, max|x|] over `dims` (keepdim), 1 for all-zero slices.

    Dividing by a power of two is exact, so a computation on ``x / scale`` neither overflows
    nor underflows and loses nothing; this is how the rescue paths of norm-like ops work.
    """
    if dims is None:
        amax = x.abs().amax().reshape([1] * x.dim())
    else:
        amax = x.abs().amax(dim=dims, keepdim=True)
    _, exponent = torch.frexp(amax)  # amax = m * 2**exponent with 0.5 <= m < 1
    # 2**(exponent - 1) <= amax, so the scale itself cannot overflow (2**128 would in float32)
    scale = torch.ldexp(torch.ones_like(amax), exponent - 1)
    ok = (amax > 0) & torch.isfinite(amax)
    return torch.where(ok, scale, torch.ones_like(scale))


# torch.autograd.Function.apply binds every call's arguments with inspect.signature (for
# default arguments, which no safe op's Function has) before calling this C apply: a third
# of the Python time of a small op. apply_op calls it directly outside torch.func transforms.
_C_APPLY = function_c_apply
_TENSOR = object()  # marks where a tensor input goes back among the constant inputs


# ---------------------------------------------------------------------------------------
# Checking dispatch modes (nanguard.detect) see a safe op as one op.
#
# A safe op's implementation may make a non-finite intermediate and repair it (the NaN of a
# dead softmax row before it is set to 0, the inf of a/0 before the fill): judged op by op,
# the advice "use nanguard.softmax" would itself be reported. A dispatch mode that defines
# ``watch_safe_op(fn, args, kwargs, reports_inf)`` and ``watch_safe_backward(function, ctx,
# grads, backward)`` runs the op (or one Function's backward) itself and judges it by its
# inputs and outputs. Nothing here knows the detector; with no such mode on the dispatch
# stack the cost is one C call.

_dispatch_depth = dispatch_stack_len
_dispatch_mode_at = dispatch_stack_at
_F = TypeVar("_F", bound=Callable[..., Any])


def _watcher(hook: str) -> Optional[Callable[..., Any]]:
    """The innermost dispatch mode's ``hook``, if it has one."""
    depth = _dispatch_depth()
    if not depth:
        return None
    return getattr(_dispatch_mode_at(depth - 1), hook, None)


def public_op(reports_inf: bool = False) -> Callable[[_F], _F]:
    """Mark a public safe op: one op for checking dispatch modes.

    ``reports_inf``: an infinity it returns from finite inputs is a real singularity
    (``xlogy(1, 0) = -inf``), not a convention (``logsumexp`` of an empty slice is ``-inf``),
    so a checker should report it. A NaN it returns from NaN-free inputs is always reported.
    """
    def mark(fn: _F) -> _F:
        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling():
                return fn(*args, **kwargs)
            watch = _watcher("watch_safe_op")
            if watch is None:
                return fn(*args, **kwargs)
            return watch(fn, args, kwargs, reports_inf)
        return op  # type: ignore[return-value]
    return mark


def _watched_backward(function: type, backward: Callable[..., Any]) -> Callable[..., Any]:
    def watched(ctx: Any, *grads: Any) -> Any:
        if torch.compiler.is_compiling():
            return backward(ctx, *grads)
        watch = _watcher("watch_safe_backward")
        if watch is None:
            return backward(ctx, *grads)
        return watch(function, ctx, grads, backward)
    return watched


class SafeFunction(torch.autograd.Function):
    """Base for the safe ops: ``setup_context`` style so torch.func and vmap work.

    Each subclass gets a twin, ``forward_mode``, that also has a ``jvp`` (derived from the
    backward, see ``_forward_mode``) for ``torch.func.jvp``, ``jacfwd``, ``hessian`` and
    dual numbers. Dynamo cannot trace a Function that defines ``jvp``, so ``apply_op``
    calls the plain class under ``torch.compile`` and the twin everywhere else.
    """

    generate_vmap_rule = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "setup_context" not in cls.__dict__ or "jvp" in cls.__dict__:
            return  # the twins below inherit (or call) the op's watched backward
        if "backward" in cls.__dict__:
            cls.backward = staticmethod(_watched_backward(cls, cls.__dict__["backward"].__func__))
        own = cls.__dict__["setup_context"].__func__

        def setup_context(ctx, inputs, output):
            own(ctx, inputs, output)
            ctx.save_for_forward(*[x for x in inputs if isinstance(x, torch.Tensor)])
            ctx.jvp_constants = [_TENSOR if isinstance(x, torch.Tensor) else x for x in inputs]

        def jvp(ctx, *tangents):
            from nanguard.torch.ops._forward_mode import jvp_from_backward

            tensors = iter(ctx.saved_for_forward)
            inputs = [next(tensors) if c is _TENSOR else c for c in ctx.jvp_constants]
            return jvp_from_backward(cls, inputs, tangents)

        # the same name, so that users see grad_fn=<_SqrtBackward>, whichever class ran
        cls.forward_mode = type(cls.__name__, (cls,), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "setup_context": staticmethod(setup_context), "jvp": staticmethod(jvp)})
        if _C_APPLY is not None:
            cls.forward_mode.raw_apply = _C_APPLY.__get__(None, cls.forward_mode)
        cls.under_transforms = _twin_for_transforms(cls, own)


def _twin_for_transforms(cls: type, own: Any) -> type:
    """The forward-mode twin for use under torch.func transforms (vmap above all).

    torch's generated vmap rule keeps one record of the batch dimensions of what a context
    saves, whether by ``save_for_backward`` or ``save_for_forward``, so both must save the
    same tensors: here both save what ``setup_context`` saves followed by the tensor inputs
    (for the jvp), and ``backward`` sees only the former.
    """

    def setup_context(ctx, inputs, output):
        recorder = _SaveRecorder(ctx)
        own(recorder, inputs, output)
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        ctx.save_for_backward(*recorder.saved, *tensors)
        ctx.save_for_forward(*recorder.saved, *tensors)
        ctx.own_saved = len(recorder.saved)
        ctx.jvp_constants = [_TENSOR if isinstance(x, torch.Tensor) else x for x in inputs]

    def backward(ctx, *grads):
        return cls.backward(_SavedPrefix(ctx), *grads)

    def jvp(ctx, *tangents):
        from nanguard.torch.ops._forward_mode import jvp_from_backward

        tensors = iter(ctx.saved_tensors[ctx.own_saved:])
        inputs = [next(tensors) if c is _TENSOR else c for c in ctx.jvp_constants]
        return jvp_from_backward(cls, inputs, tangents)

    return type(cls.__name__, (cls,), {
        "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        "setup_context": staticmethod(setup_context), "backward": staticmethod(backward),
        "jvp": staticmethod(jvp)})


class _SaveRecorder:
    """A context for ``setup_context`` that records what it saves; everything else goes through."""

    def __init__(self, ctx: Any) -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "saved", ())

    def save_for_backward(self, *tensors: Any) -> None:
        object.__setattr__(self, "saved", tensors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._ctx, name, value)


class _SavedPrefix:
    """A context whose ``saved_tensors`` are what the op's own ``setup_context`` saved."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.saved_tensors = ctx.saved_tensors[:ctx.own_saved]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def apply_op(function: type, *args: object):
    """``function.apply(*args)`` (every argument positional), with forward-mode AD outside ``torch.compile``."""
    if torch.compiler.is_compiling():
        return function.apply(*args)
    if functorch_transforms_active():
        return function.under_transforms.apply(*args)
    twin = function.forward_mode
    if _C_APPLY is None:
        return twin.apply(*args)
    return twin.raw_apply(*args)


def zero_indicator(x: torch.Tensor) -> torch.Tensor:
    """1.0 where x == 0 (either sign), else 0.0, in x's dtype; NaN counts as nonzero.

    On eager CPU a comparison written into a float tensor is vectorised and ~5x faster
    than producing a bool tensor and converting it.
    """
    if can_branch_on_data(x):
        return torch.eq(x, 0, out=torch.empty_like(x))
    return (x == 0).to(x.dtype)


def zero_positions(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Where x == 0, in the form `fill_at` wants, for tensors shaped like `like`.

    On eager CPU, when x is not broadcast: the flat indices (zeros of a denominator are
    few, so filling by index touches only them, while `where`/`masked_fill_` cost several
    passes; finding them once here saves the backward pass from doing it again). Elsewhere
    (compile, vmap, accelerators, broadcasting) a bool mask.
    """
    if can_branch_on_data(x) and x.shape == like.shape:
        # a float comparison is vectorised; producing bool directly is ~3x slower on CPU
        return zero_indicator(x).reshape(-1).to(torch.bool).nonzero().squeeze(-1)
    return x == 0


def fill_at(t: torch.Tensor, positions: torch.Tensor, value: float) -> torch.Tensor:
    """`t` with `value` at `positions` (from `zero_positions`), in place for indices."""
    if positions.dtype == torch.bool:
        return torch.where(positions, value, t)
    if not t.is_contiguous():
        # indices are positions in row-major order; a transposed or channels_last tensor
        # has no flat view in that order
        t = t.contiguous()
    t.view(-1).index_fill_(0, positions, value)
    return t


def nonpositive_is_singular(v: torch.Tensor) -> torch.Tensor:
    """Where the differentiable backward may divide by `v`: v > 0, and NaN.

    ``~(v <= 0)`` rather than ``v > 0``: a NaN must reach the division and give a NaN
    gradient (NaN in, NaN out), not be mistaken for the singular point's convention.
    """
    return ~(v <= 0)


def zero_over_zero_to_zero(quotient: torch.Tensor, num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """``num / den`` with 0 at 0/0 (the conventions' value) and every other NaN kept.

    Eager: one scan for NaN, and the fix only when there is one; when neither operand holds
    a NaN or an inf, every NaN of the quotient is a 0/0 and is replaced in place.
    ``quotient`` must be a fresh tensor (it may be modified).
    """
    if can_branch_on_data(quotient):
        if not may_hold_nan(quotient):
            return quotient
        if sum_is_finite(num) and sum_is_finite(den):
            return quotient.nan_to_num_(nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    return torch.where((num == 0) & (den == 0), 0.0, quotient)


def nan_marks(x: torch.Tensor) -> torch.Tensor:
    """0 for every number, NaN for NaN (an inf counts as a number here)."""
    return torch.where(torch.isnan(x), x, torch.zeros((), dtype=x.dtype, device=x.device))


def nan_where_nan(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``grad`` with NaN where ``x`` (same shape) is NaN: the derivative at a NaN input is NaN.

    For the gradients that do not read the input they belong to (div's 1/b, a mean's
    1/count): without this, a NaN from the data would leave no trace in its own gradient.
    Eager CPU looks first (one reduction) and returns ``grad`` itself when ``x`` holds no NaN.
    """
    if can_branch_on_data(x) and not may_hold_nan(x):
        return grad
    return torch.where(torch.isnan(x), x, grad)


def sum_is_finite(t: torch.Tensor) -> bool:
    """True only if ``t`` holds no NaN and no inf (a sum that overflows is a false alarm)."""
    return bool(torch.isfinite(t.sum())) if t.numel() else True


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Reductions over float16/bfloat16 run in float32, as torch's own kernels accumulate."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
