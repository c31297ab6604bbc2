"""Facts about aten ops that the checks need, cached per op overload."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Sequence, Set

import torch

aten = torch.ops.aten

# Ops whose outputs hold uninitialised memory or no values at all: never judged.
SKIP: FrozenSet[Any] = frozenset(
    op for op in (
        getattr(aten.empty, "memory_format", None), getattr(aten.empty_like, "default", None),
        getattr(aten.empty_strided, "default", None), getattr(aten.new_empty, "default", None),
        getattr(aten.new_empty_strided, "default", None), getattr(aten.resize_, "default", None),
        getattr(aten.set_, "source_Storage_storage_offset", None), getattr(aten.set_, "source_Tensor", None),
        getattr(aten.set_, "default", None), getattr(aten.empty_permuted, "default", None),
    ) if op is not None
)

_MUTATED: Dict[Any, tuple] = {}
# Schemas that do not mark what they write: batch norm updates running_mean/var in place.
_UNMARKED_WRITES = {"native_batch_norm": (3, 4), "cudnn_batch_norm": (3, 4), "miopen_batch_norm": (3, 4)}
_SEEDED: Dict[Any, bool] = {}


def mutated_args(func: Any) -> tuple:
    """(positions, names) of the arguments an op writes to (``self`` of ``add_``, ``out=``)."""
    info = _MUTATED.get(func)
    if info is None:
        schema = getattr(func, "_schema", None)
        positions = []
        names = []
        if schema is not None:
            for i, a in enumerate(schema.arguments):
                if a.alias_info is not None and a.alias_info.is_write:
                    positions.append(i)
                    names.append(a.name)
        base = getattr(func, "__name__", "").split(".")[0]
        for i in _UNMARKED_WRITES.get(base, ()):
            if i not in positions:
                positions.append(i)
        info = (tuple(positions), tuple(names))
        _MUTATED[func] = info
    return info


def written_tensors(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> list:
    """The tensors an op writes to: ``self`` of ``add_``, ``out=``, batch norm's running
    statistics, every tensor of a ``_foreach_*_`` list (those return nothing)."""
    positions, names = mutated_args(func)
    if not positions and not names:
        return []
    out = []
    values = [args[i] for i in positions if i < len(args)] + [kwargs[n] for n in names if n in kwargs]
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(t for t in v if isinstance(t, torch.Tensor))
    return out


def mutated_ids(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Set[int]:
    return {id(t) for t in written_tensors(func, args, kwargs)}


def uses_rng(func: Any) -> bool:
    hit = _SEEDED.get(func)
    if hit is None:
        tags = getattr(func, "tags", ())
        hit = torch.Tag.nondeterministic_seeded in tags
        _SEEDED[func] = hit
    return hit


# Ops whose outputs only move, select or repeat input values, or write constants the caller
# chose: they cannot turn finite inputs into NaN/Inf, so they are not judged (a NaN from
# outside is then reported at the first op that computes with it).
_NO_NEW_VALUES = frozenset({
    # GradScaler's own check of the gradients: it finds their infs and skips the step
    "_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_",
    "clone", "contiguous", "_unsafe_view", "cat", "stack", "index", "index_select", "gather", "scatter",
    "select_backward", "slice_backward", "select_scatter", "slice_scatter", "diagonal_backward",
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill", "fill_", "new_zeros", "new_ones",
    "new_full", "zero_", "relu", "relu_", "threshold_backward", "where", "masked_fill", "masked_fill_",
    "masked_select", "abs", "neg", "sign", "max", "min", "amax", "amin", "maximum", "minimum", "sort", "topk",
    "repeat", "flip", "roll", "constant_pad_nd", "narrow_copy", "lift_fresh", "lift_fresh_copy", "alias",
    "detach", "_local_scalar_dense", "isnan", "isinf", "isfinite", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_not", "logical_and", "logical_or", "masked_scatter", "index_put", "index_put_", "embedding",
    "embedding_dense_backward", "split_with_sizes_copy", "unbind_copy", "expand_copy", "permute_copy",
    "transpose_copy", "view_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "as_strided_copy",
    "_reshape_copy", "_to_dense", "clamp", "clamp_min", "clamp_max", "hardtanh", "hardtanh_backward",
})
_CHECK: Dict[Any, bool] = {}

# Ops whose trailing outputs are workspaces kept for their backward, not results: CTC's
# log_alpha is -inf wherever an alignment cannot reach (every healthy call), the fused
# attention kernels' logsumexp is -inf for a fully masked row whose output is still right.
# name -> how many leading outputs are results.
_RESULT_OUTPUTS: Dict[str, int] = {
    "_ctc_loss": 1, "_cudnn_ctc_loss": 1, "_use_cudnn_ctc_loss": 1,
    "_scaled_dot_product_flash_attention_for_cpu": 1, "_scaled_dot_product_flash_attention": 1,
    "_scaled_dot_product_efficient_attention": 1, "_scaled_dot_product_cudnn_attention": 1,
}


def result_outputs(func: Any, outputs: Sequence[Any]) -> Sequence[Any]:
    """The outputs of ``func`` that are its results (workspaces left out), for judging values."""
    keep = _RESULT_OUTPUTS.get(getattr(func, "__name__", "").split(".")[0])
    return outputs if keep is None else outputs[:keep]


def checks_values(func: Any) -> bool:
    """Whether an op's outputs are judged: not a view, not uninitialised, can create values."""
    hit = _CHECK.get(func)
    if hit is None:
        name = getattr(func, "__name__", "")      # e.g. "add_.Tensor"
        base = name.split(".")[0]
        hit = not (func in SKIP or getattr(func, "is_view", False) or base in _NO_NEW_VALUES)
        _CHECK[func] = hit
    return hit
