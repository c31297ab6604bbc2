"""The trace as data: values (`Node`), ops (`OpRecord`) and their references (`Ref`).

A node's ``kind`` says where its value comes from: ``param`` (an ``nn.Parameter`` or a leaf
that requires grad), ``data`` (a float tensor that arrives from outside), ``random`` (a
random factory's sample, free inside its support), ``exact`` (integers, booleans, constants,
buffers and what is computed from them alone: the observed value is kept) or ``computed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.core.location import Frame

PARAM, DATA, RANDOM, EXACT, COMPUTED = "param", "data", "random", "exact", "computed"
FREE_KINDS = (PARAM, DATA, RANDOM)


def base_name(func: Any) -> str:
    """``aten.add_.Tensor`` -> ``add_``; a safe op -> ``nanguard.<name>``."""
    name = getattr(func, "__name__", str(func))
    return name.split(".")[0]


def functional_name(name: str) -> str:
    """The out-of-place name of an in-place op: ``add_`` -> ``add``."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


class StopTrace(BaseException):
    """Raised at the program's first backward: one forward pass is traced. A BaseException
    so that a program's ``except Exception`` does not swallow it."""


@dataclass(eq=False)
class Node:
    """One value of the trace (a tensor at one version)."""

    id: int
    kind: str
    dtype: torch.dtype
    shape: Tuple[int, ...]
    producer: Optional["OpRecord"] = None
    value: Optional[torch.Tensor] = None       # exact/data: a copy; param: the live tensor
    name: Optional[str] = None
    finite: bool = True                         # every observed element finite
    has_nan: bool = False
    support: Optional[Tuple[float, float]] = None   # random: the factory's support
    grad_enabled: bool = True
    device: Optional[torch.device] = None

    @property
    def is_float(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def free(self) -> bool:
        return self.kind in FREE_KINDS

    def label(self) -> str:
        shape = "x".join(str(s) for s in self.shape) or "scalar"
        dt = str(self.dtype).replace("torch.", "")
        return f"{self.name or self.kind} {dt}[{shape}]"

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.kind}, {self.label()})"


@dataclass(frozen=True)
class Ref:
    """A node in an op's recorded arguments."""

    node: Node


@dataclass(eq=False)
class OpRecord:
    """One op of the trace: its function, arguments (`Ref` for tensors), outputs and line."""

    index: int
    func: Any                      # an OpOverload, a nanguard safe op, or a view helper
    name: str                      # "aten.log.default", "nanguard.softmax", "view_scatter"
    base: str                      # functional base name: "log", "add", "nanguard.softmax"
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    outputs: List[Optional[Node]]  # flattened outputs (None for non-tensor leaves)
    frame: Optional[Frame]
    module: Optional[str]
    grad_enabled: bool
    made_nonfinite: bool = False   # the traced run itself turned finite inputs non-finite here
    autocast: bool = False         # run inside a torch.autocast region
    chain: Tuple[Any, ...] = ()    # view_scatter / view_replay: the view ops from the base

    def input_nodes(self) -> List[Node]:
        out: List[Node] = []
        for leaf in pytree.tree_leaves((self.args, self.kwargs)):
            if isinstance(leaf, Ref):
                out.append(leaf.node)
        return out

    def __repr__(self) -> str:
        where = f"{self.frame.file}:{self.frame.line}" if self.frame else "?"
        return f"OpRecord({self.index}, {self.name}, {where})"


@dataclass
class Trace:
    """The recorded ops, their nodes, and how the trace ended."""

    ops: List[OpRecord] = field(default_factory=list)
    nodes: List[Node] = field(default_factory=list)
    roots: List[Node] = field(default_factory=list)     # what the first backward differentiated
    stopped_at: str = "end"                             # "backward", "limit", "end", "error"
    param_names: Dict[int, str] = field(default_factory=dict)


__all__ = ["COMPUTED", "DATA", "EXACT", "FREE_KINDS", "Node", "OpRecord", "PARAM", "RANDOM", "Ref", "StopTrace",
           "Trace", "base_name", "functional_name"]
