"""What the tracer tells about a value from the op that made it: random factories and their
supports, constants written as literals, views, versions, and the detector's rule for an op
that *made* a NaN/Inf (uninitialised memory and workspaces left out)."""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.core.nonfinite import Flags, created
from nanguard.torch.auditor.graph import EXACT, Node, OpRecord, Ref

#: random factories whose output is data: name -> support given the op's args (lo, hi)
RANDOM_DATA: Dict[str, Callable[[Sequence[Any], Dict[str, Any]], Tuple[float, float]]] = {
    "randn": lambda a, k: (-6.0, 6.0),
    "randn_like": lambda a, k: (-6.0, 6.0),
    "rand": lambda a, k: (0.0, 1.0),
    "rand_like": lambda a, k: (0.0, 1.0),
    "normal": lambda a, k: _normal_support(*_mean_std(a, k)),
    "uniform": lambda a, k: (float(a[1] if len(a) > 1 else k.get("from", 0.0)),
                             float(a[2] if len(a) > 2 else k.get("to", 1.0))),
    "bernoulli": lambda a, k: (0.0, 1.0),
    "exponential": lambda a, k: (0.0, 40.0 / float(a[1] if len(a) > 1 else k.get("lambd", 1.0))),
}
#: random ops whose output holds a concrete sample that the analysis keeps (indices, masks
#: applied by their own transfer rule)
RANDOM_EXACT = frozenset({"randint", "randint_like", "randperm", "multinomial", "native_dropout"})
# factories whose value does not depend on their tensor input's values (only its shape)
SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
                         "scalar_tensor", "zero", "sym_size", "_shape_as_tensor"})
_LITERAL = re.compile(r"tensor\(\s*\[([^\]\[]|\[|\])*\]")
_LITERAL_WORDS = frozenset({"inf", "nan", "INF", "NAN", "NaN", "float", "math", "torch", "np", "numpy", "True",
                            "False", "e", "E"})


def is_literal(code: str) -> bool:
    """``torch.tensor([...])`` of numbers (inf and nan spelled any usual way): a constant, not data."""
    m = _LITERAL.search(code)
    if m is None:
        return False
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", m.group(0))) - {"tensor"}
    return words <= _LITERAL_WORDS


def _mean_std(a: Sequence[Any], k: Dict[str, Any]) -> Tuple[Any, Any]:
    """(mean, std) of normal_(self, mean, std) or normal(mean, std, size)."""
    if a and isinstance(a[0], Ref):
        return (a[1] if len(a) > 1 else k.get("mean", 0.0)), (a[2] if len(a) > 2 else k.get("std", 1.0))
    return (a[0] if a else k.get("mean", 0.0)), (a[1] if len(a) > 1 else k.get("std", 1.0))


def _normal_support(mean: Any, std: Any) -> Tuple[float, float]:
    try:
        m, s = float(mean), float(std)
    except (TypeError, ValueError):
        return (float("-inf"), float("inf"))
    return (m - 6 * abs(s), m + 6 * abs(s))


def inputs_have_free(inputs: Sequence[Node]) -> bool:
    return any(n.kind != EXACT for n in inputs)


def version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:      # inference tensors have no version counter
        return -1


_VIEW: Dict[Any, bool] = {}


def is_view(func: Any) -> bool:
    """Whether ``func`` returns views of its first argument (``view``, ``split``, ``detach`` ...)."""
    hit = _VIEW.get(func)
    if hit is None:
        schema = getattr(func, "_schema", None)
        hit = bool(getattr(func, "is_view", False))
        if not hit and schema is not None and schema.returns:
            alias = schema.returns[0].alias_info
            hit = alias is not None and not alias.is_write
        _VIEW[func] = hit
    return hit


def written(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[torch.Tensor]:
    from nanguard.torch.detector.aten import written_tensors
    return written_tensors(func, args, kwargs)


_UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                            "empty_permuted", "resize", "set"})


def made_nonfinite(rec: OpRecord, inputs: Sequence[Node], args: Sequence[Any] = (), out: Any = None) -> bool:
    """`nanguard.core.nonfinite.created` on a traced op, from its nodes' flags (uninitialised
    memory and the workspaces some ops return beside their result do not count); ``args`` and
    ``out`` (the live values) decide the rounded ``finfo`` extremes of float16 masks."""
    if rec.base in _UNINITIALISED or isinstance(rec.func, str):
        return False
    from nanguard.torch.detector.aten import result_outputs
    results = result_outputs(rec.func, rec.outputs) if not rec.base.startswith("nanguard.") else rec.outputs
    outs = [n for n in results if n is not None and n.is_float and not n.finite]
    if not outs:
        return False
    out_nan = any(n.has_nan for n in outs)
    in_nan = any(n.has_nan for n in inputs if n.is_float) or _scalar_nan(rec.args, rec.kwargs)
    in_finite = all(n.finite for n in inputs if n.is_float) and _scalars_finite(rec.args, rec.kwargs)
    rounded = False
    if not out_nan and in_finite and out is not None:
        from nanguard.torch.detector.values import iter_scalars, rounded_extreme
        tensors = [a for a in pytree.tree_leaves(tuple(args)) if isinstance(a, torch.Tensor)]
        outputs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
        rounded = rounded_extreme(tensors, list(iter_scalars(tuple(args))), outputs)
    return created(Flags(out_nan=out_nan, out_inf=not out_nan, in_nan=in_nan, in_finite=in_finite,
                         rounded_extreme=rounded))


def _scalar_nan(args: Any, kwargs: Any) -> bool:
    return any(isinstance(leaf, float) and leaf != leaf for leaf in pytree.tree_leaves((args, kwargs)))


def _scalars_finite(args: Any, kwargs: Any) -> bool:
    for leaf in pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, float) and not (leaf == leaf and abs(leaf) != float("inf")):
            return False
        if isinstance(leaf, Ref) and leaf.node.is_float and not leaf.node.finite:
            return False
    return True


__all__ = ["RANDOM_DATA", "RANDOM_EXACT", "SHAPE_ONLY", "inputs_have_free", "is_literal", "is_view",
           "made_nonfinite", "version", "written"]
