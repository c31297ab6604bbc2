"""Every private PyTorch API nanguard uses, looked up here once (see ``nanguard._private``).

The rest of ``nanguard.torch`` imports these names instead of reaching into ``torch._C``,
``torch.utils._python_dispatch`` and the like, so that a torch release that renames or drops
one is fixed in this file, and so that a torch without one raises
``nanguard.errors.UnsupportedVersionError`` ("nanguard needs <feature> from torch X+; you
have torch Y") when the feature that needs it is used. Names bound to ``None`` belong to
features that degrade quietly without them (as they did before this module).

Private modules that are slow to import (``torch._dynamo``, ``torch.distributed.tensor``) are
looked up on first use, by the functions at the end.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch
import torch.autograd.graph

from nanguard._private import PrivateAPI

# The oldest torch ``pyproject.toml`` declares (the ``torch`` extra, the version CI tests).
FLOOR = "2.13"

API = PrivateAPI("torch", torch.__version__.split("+")[0])
_C = torch._C

# autograd
current_autograd_node: Callable[[], Any] = API.attr(
    _C, "_current_autograd_node", "the current autograd node (torch._C._current_autograd_node)", FLOOR)
set_grad_enabled: Callable[[bool], None] = API.attr(
    _C, "_set_grad_enabled", "torch._C._set_grad_enabled", FLOOR)
# the one funnel of backward() and autograd.grad; without it the detector sees backward
# passes through their tensors only
engine_run_backward: Optional[Callable[..., Any]] = API.optional(torch.autograd, "_engine_run_backward")
# where backward() and autograd.grad look it up (the audit's trace stops there)
ENGINE_RUN_BACKWARD_SITES = ((torch.autograd, "_engine_run_backward"), (torch.autograd.graph, "_engine_run_backward"))
# C apply of autograd.Function (the fast path of a safe op); None: the public apply
_function_base = API.optional(_C, "_FunctionBase")
function_c_apply: Optional[Callable[..., Any]] = (
    _function_base.__dict__.get("apply") if _function_base is not None else None)

# torch.func (functorch)
functorch_transforms_active: Callable[[], bool] = API.attr(
    _C, "_are_functorch_transforms_active", "torch.func transform detection", FLOOR)
is_functorch_wrapped_tensor: Callable[[torch.Tensor], bool] = API.attr(
    _C, "_functorch.is_functorch_wrapped_tensor", "torch.func tensor detection", FLOOR)

# the Python dispatch-mode stack (nanguard.detect's modes)
_STACK = "the dispatch-mode stack (torch._C._*_torch_dispatch_stack)"
dispatch_stack_len: Callable[[], int] = API.attr(_C, "_len_torch_dispatch_stack", _STACK, FLOOR)
dispatch_stack_at: Callable[[int], Any] = API.attr(_C, "_get_dispatch_stack_at", _STACK, FLOOR)
dispatch_stack_pop: Callable[..., Any] = API.attr(_C, "_pop_torch_dispatch_stack", _STACK, FLOOR)
dispatch_stack_push: Callable[[Any], None] = API.attr(_C, "_push_on_torch_dispatch_stack", _STACK, FLOOR)
_python_dispatch = API.module("torch.utils._python_dispatch", "TorchDispatchMode", FLOOR,
                              needs=("TorchDispatchMode",))
TorchDispatchMode: Any = API.attr(_python_dispatch, "TorchDispatchMode", "TorchDispatchMode", FLOOR)

# pytree over the nested containers of op arguments
pytree: Any = API.module("torch.utils._pytree", "torch.utils._pytree", FLOOR,
                         needs=("tree_flatten", "tree_leaves", "tree_map", "tree_unflatten"))

# kernels the safe ops' and the guard's backward passes and norms call
softmax_backward_data: Callable[..., torch.Tensor] = API.attr(
    torch, "_softmax_backward_data", "torch._softmax_backward_data", FLOOR)
log_softmax_backward_data: Callable[..., torch.Tensor] = API.attr(
    torch, "_log_softmax_backward_data", "torch._log_softmax_backward_data", FLOOR)
cdist_backward: Callable[..., torch.Tensor] = API.attr(
    torch.ops.aten, "_cdist_backward", "aten::_cdist_backward", FLOOR)
foreach_norm: Callable[..., Any] = API.attr(torch, "_foreach_norm", "torch._foreach_norm", FLOOR)
foreach_mul_: Callable[..., Any] = API.attr(torch, "_foreach_mul_", "torch._foreach_mul_", FLOOR)
_foreach_utils = API.module("torch.utils._foreach_utils", "torch.utils._foreach_utils", FLOOR)
group_tensors_by_device_and_dtype: Callable[..., Any] = API.attr(
    _foreach_utils, "_group_tensors_by_device_and_dtype", "grouping tensors by device and dtype", FLOOR)

# every dropout module (a pass-through for the guard's headroom); the public classes where the
# private base is gone
DROPOUT_TYPES: tuple = tuple(filter(None, [API.optional(torch.nn.modules.dropout, "_DropoutNd")])) or (
    torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
    torch.nn.FeatureAlphaDropout)

# the exception DataLoader workers send to the main process; None: worker findings not followed
ExceptionWrapper: Optional[type] = API.optional(API.optional_module("torch._utils"), "ExceptionWrapper")


def dynamo_disable() -> Optional[Callable[..., Any]]:
    """``torch._dynamo.disable``, or None for a torch without dynamo (imported on first use)."""
    return API.lazy("dynamo.disable", lambda: API.optional_module("torch._dynamo").disable)


def dynamo_eval_frame() -> Optional[Any]:
    """``torch._dynamo.eval_frame`` with ``_set_stance`` and ``DynamoStance``, or None for a torch
    without stances (then a detection cannot make compiled code run eagerly)."""
    return API.lazy("dynamo.eval_frame", lambda: API.optional_module(
        "torch._dynamo.eval_frame", needs=("_set_stance", "DynamoStance")))


def functional_collectives() -> Optional[Any]:
    """``torch.distributed._functional_collectives`` if the program imported it (never imported
    here: only its tensors, which exist only once it is imported, need it)."""
    return sys.modules.get("torch.distributed._functional_collectives")


def c10d_functional() -> Any:
    """The ``_c10d_functional`` op namespace (``torch.ops._c10d_functional``)."""
    return API.attr(torch.ops, "_c10d_functional", "functional collectives (torch.ops._c10d_functional)", FLOOR)


def compute_local_shape_and_global_offset() -> Callable[..., Any]:
    """DTensor's ``compute_local_shape_and_global_offset`` (imported on first use)."""
    found = API.lazy("dtensor.offset", lambda: API.optional_module("torch.distributed.tensor._utils").
                     compute_local_shape_and_global_offset)
    if found is None:
        raise API.missing("the global offset of a DTensor shard "
                          "(torch.distributed.tensor._utils.compute_local_shape_and_global_offset)", FLOOR).error()
    return found
