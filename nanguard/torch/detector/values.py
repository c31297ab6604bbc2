"""Looking at values: the cheap finiteness test, exact counts, and the "who created it" rule.

The cheap test is a single reduction: ``t.sum()`` is finite exactly when every element is
finite, except when finite values overflow the sum. So a finite sum proves the tensor is
clean, and only a non-finite sum (rare) pays for the exact element-wise test. On CPU this is
20-50x cheaper than ``torch.isfinite(t).all()``, which allocates a boolean tensor.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch

from nanguard.core.nonfinite import INF, NAN, Flags, made
from nanguard.core.nonfinite import Verdict as _CoreVerdict
from nanguard.core.summary import ScalarArg, TensorSummary
from nanguard.torch._compat import set_grad_enabled

FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
COMPLEX = frozenset({torch.complex32, torch.complex64, torch.complex128})
CHECKED = FLOATING | COMPLEX
_LOW_PRECISION = frozenset({torch.float16, torch.bfloat16, torch.complex32})
_Tensor = torch.Tensor



# Tensor subclasses with their own semantics (FakeTensor, DTensor, wrapper subclasses) are
# not judged: their values are not plain memory, or reading them would change what they do.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter, getattr(torch.nn.parameter, "Buffer", torch.Tensor)})


def _local(t: Any) -> Any:
    """A DTensor's local shard (`sharded.local`); any other tensor itself."""
    if type(t) in PLAIN_TYPES:
        return t
    from nanguard.torch.detector.sharded import local
    return local(t)


def checkable(t: torch.Tensor) -> bool:
    """A dense, materialised floating or complex tensor (the only kind that can hold NaN/Inf)."""
    return (type(t) in PLAIN_TYPES and t.dtype in CHECKED and t.layout is torch.strided and not t.is_meta
            and not t.is_nested)


def fast_finite(t: torch.Tensor) -> bool:
    """True when every element of ``t`` is finite. One reduction; exact confirm only on failure.

    Must be called with autograd off or below autograd (inside a dispatch handler), so the
    reduction does not enter the graph.
    """
    try:
        if t.dtype in _LOW_PRECISION:
            # float16 sums overflow at 65504 long before any element is infinite.
            s = t.sum(dtype=torch.complex64 if t.is_complex() else torch.float32).item()
        else:
            s = t.sum().item()
    except (RuntimeError, NotImplementedError, TypeError):
        # A tensor whose values cannot be read here (meta, fake, nested...): nothing to judge.
        return True
    if type(s) is complex:
        if math.isfinite(s.real) and math.isfinite(s.imag):
            return True
    elif math.isfinite(s):
        return True
    # The sum may have overflowed from finite values; decide exactly.
    return bool(torch.isfinite(t).all())


_set_grad = set_grad_enabled


def all_finite(tensors: Sequence[torch.Tensor]) -> bool:
    """Every tensor finite? One reduction each; on an accelerator one host sync per device."""
    by_device: Dict[Any, List[torch.Tensor]] = {}
    grad_was = torch.is_grad_enabled()
    _set_grad(False)   # the reductions must not join the graph (cheaper than a no_grad object)
    try:
        for t in tensors:
            t = _local(t)
            if checkable(t) and t.numel():
                if t.device.type == "cpu":
                    if not fast_finite(t):        # on CPU .item() costs no sync
                        return False
                else:
                    by_device.setdefault(t.device, []).append(t)
        for group in by_device.values():
            try:
                sums = torch.stack([(torch.view_as_real(t) if t.is_complex() else t).sum(dtype=torch.float64)
                                    for t in group])
                total = sums.sum().item()
            except (RuntimeError, TypeError):   # a device whose values cannot be read here
                continue
            if not math.isfinite(total):
                return all(fast_finite(t) for t in group)   # maybe only an overflowing sum
        return True
    finally:
        _set_grad(grad_was)


def is_finite(t: torch.Tensor) -> bool:
    """`fast_finite` for any tensor, from anywhere (turns autograd off itself)."""
    t = _local(t)
    if not checkable(t) or t.numel() == 0:
        return True
    with torch.no_grad():
        return fast_finite(t)


def has_nan(t: torch.Tensor) -> bool:
    t = _local(t)
    if not checkable(t) or t.numel() == 0:
        return False
    with torch.no_grad():
        if fast_finite(t):
            return False
        return bool(torch.isnan(t).any())


def has_inf(t: torch.Tensor) -> bool:
    t = _local(t)
    if not checkable(t) or t.numel() == 0:
        return False
    with torch.no_grad():
        if fast_finite(t):
            return False
        return bool(torch.isinf(t).any())



def iter_scalars(obj: Any, depth: int = 0) -> Iterator[float]:
    """Python floats inside an argument structure (e.g. the -inf of ``masked_fill``)."""
    if isinstance(obj, float):
        yield obj
    elif isinstance(obj, complex):
        yield obj.real
        yield obj.imag
    elif depth < 4:
        if isinstance(obj, (list, tuple)):
            for item in obj:
                yield from iter_scalars(item, depth + 1)
        elif isinstance(obj, dict):
            for item in obj.values():
                yield from iter_scalars(item, depth + 1)


# The verdict and the rule itself live in core (one rule for the detector, the audit and every
# backend); this module reads the flags off torch tensors.
Verdict = _CoreVerdict


def judge(inputs: Sequence[torch.Tensor], scalars: Iterable[float], outputs: Sequence[torch.Tensor],
          check: frozenset) -> Optional[Verdict]:
    """`nanguard.core.nonfinite.made` on an op whose output is known to be non-finite.

    The flags are read lazily: a NaN output needs only the inputs' NaN, an infinite one their
    finiteness and (for the ``finfo.min`` masks of float16 attention) `rounded_extreme`.
    """
    scalars = list(scalars)
    out_nan = NAN in check and any(has_nan(o) for o in outputs)
    in_nan = out_nan and (any(math.isnan(s) for s in scalars) or any(has_nan(t) for t in inputs))
    out_inf = not out_nan and INF in check and any(has_inf(o) for o in outputs)
    in_finite = out_inf and all(math.isfinite(s) for s in scalars) and all(is_finite(t) for t in inputs)
    rounded = in_finite and rounded_extreme(inputs, scalars, outputs)
    return made(Flags(out_nan=out_nan, out_inf=out_inf, in_nan=in_nan, in_finite=in_finite,
                      rounded_extreme=rounded), check)


_EXTREMES = frozenset(torch.finfo(d).max for d in FLOATING)


def _extreme_signs(t: torch.Tensor) -> Tuple[bool, bool]:
    """Whether finite ``t`` holds its dtype's largest value, and its most negative one."""
    if not checkable(t) or t.dtype not in FLOATING or t.numel() == 0:
        return False, False
    limit = torch.finfo(t.dtype).max
    with torch.no_grad():
        return float(t.max()) == limit, float(t.min()) == -limit


def rounded_extreme(inputs: Sequence[torch.Tensor], scalars: Sequence[float],
                    outputs: Sequence[torch.Tensor]) -> bool:
    """Every sign of infinity in ``outputs`` comes from an input at a dtype's extreme.

    ``torch.finfo(dtype).min`` (or ``.max``) stands for "minus (plus) infinity" in masks;
    adding anything of the same sign to it, or casting it to a narrower dtype, rounds to ±Inf,
    which is what the user meant. Only the exact extreme counts: an activation of 1e5 cast
    to float16 is a real overflow.
    """
    floats = [o for o in outputs if checkable(o) and o.dtype in FLOATING]
    with torch.no_grad():
        need_pos = any(bool((o == math.inf).any()) for o in floats)
        need_neg = any(bool((o == -math.inf).any()) for o in floats)
    if not (need_pos or need_neg):
        return False
    have_pos = any(s in _EXTREMES for s in scalars)
    have_neg = any(-s in _EXTREMES for s in scalars)
    for t in inputs:
        if (have_pos or not need_pos) and (have_neg or not need_neg):
            break
        pos, neg = _extreme_signs(t)
        have_pos, have_neg = have_pos or pos, have_neg or neg
    return (have_pos or not need_pos) and (have_neg or not need_neg)


# ----------------------------------------------------------------------------------------
# Exact summaries (computed only once something was found)


def _unravel(flat_index: int, shape: Sequence[int]) -> Tuple[int, ...]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim if dim else 0)
        flat_index //= dim if dim else 1
    return tuple(reversed(out))


def summarize(t: torch.Tensor, name: str, role: str = "input") -> TensorSummary:
    """Exact statistics of ``t`` (a few passes over it; only used after a detection); of a
    DTensor, this rank's shard."""
    shard = _local(t)
    if shard is not t:
        t, name = shard, f"{name} (this rank's shard)"
    summary = TensorSummary(name=name, shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                            device=str(t.device), numel=t.numel(), role=role)
    if t.numel() == 0 or t.layout is not torch.strided or t.is_meta or t.is_nested:
        return summary
    with torch.no_grad():
        x = t.detach()
        if x.is_complex():
            x = torch.view_as_real(x.to(torch.complex64) if x.dtype == torch.complex32 else x)
        if x.dtype == torch.bool:
            x = x.to(torch.uint8)
        if x.dtype in FLOATING:
            nan = torch.isnan(x)
            posinf = x == math.inf
            neginf = x == -math.inf
            finite = torch.isfinite(x)
            summary.nan = int(nan.sum())
            summary.posinf = int(posinf.sum())
            summary.neginf = int(neginf.sum())
            summary.zeros = int((x == 0).sum())
            summary.negative = int((finite & (x < 0)).sum())
            if bool(finite.any()):
                vals = x[finite]
                summary.min = float(vals.min())
                summary.max = float(vals.max())
            bad = (~finite).reshape(-1) if not t.is_complex() else (~finite).reshape(*t.shape, 2).any(-1).reshape(-1)
            if bool(bad.any()):
                summary.first_bad = _unravel(int(bad.nonzero()[0, 0]), t.shape)
        else:
            summary.zeros = int((x == 0).sum())
            summary.negative = int((x < 0).sum()) if x.dtype.is_signed else 0
            summary.min = float(x.min())
            summary.max = float(x.max())
    return summary




__all__ = ["TensorSummary", "ScalarArg", "Verdict", "judge", "summarize", "fast_finite", "is_finite", "all_finite",
           "has_nan", "has_inf", "checkable", "iter_scalars"]
