"""Run recorded ops again on other values: the functional form of each op, and a slice of the
trace recomputed from chosen source values (what the witness search differentiates).

In-place ops are replayed out of place (``add_`` as ``add``), writes through views as
``view_scatter`` (copy the base, write through the same view chain, keep the copy), and
re-derived views as ``view_replay``; so a replay can run under autograd with its sources
as leaves that require grad.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import torch
from torch.utils import _pytree as pytree

from nanguard.torch.auditor.graph import EXACT, Node, OpRecord, Ref

aten = torch.ops.aten
_FUNCTIONAL: Dict[Any, Callable[..., Any]] = {}


def _copy(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``self.copy_(src)`` out of place and differentiable (aten.copy has no derivative)."""
    return src.to(dtype=self.dtype, device=self.device).expand(self.shape).clone()


def functional(rec: OpRecord) -> Callable[..., Any]:
    """The out-of-place callable of a recorded op."""
    func = rec.func
    if isinstance(func, str):
        return func  # type: ignore[return-value]
    if rec.base == "copy":
        return _copy
    hit = _FUNCTIONAL.get(func)
    if hit is not None:
        return hit
    name = getattr(func, "__name__", "")
    packet, _, overload = name.partition(".")
    result: Callable[..., Any] = func
    if packet.endswith("_") and not packet.endswith("__") and hasattr(func, "_schema"):
        functional_packet = getattr(aten, packet[:-1], None)
        if functional_packet is not None:
            result = getattr(functional_packet, overload or "default", None) or func
    _FUNCTIONAL[func] = result
    return result


def apply_chain(base: torch.Tensor, chain: Sequence[Any]) -> torch.Tensor:
    """The view of ``base`` reached by the recorded view ops ``chain``."""
    t = base
    for func, args, kwargs, index in chain:
        out = func(t, *args, **kwargs)
        t = out[index] if index is not None else out
    return t


def view_scatter(base: torch.Tensor, value: torch.Tensor, chain: Sequence[Any]) -> torch.Tensor:
    """``base`` with ``value`` written through the view chain (out of place)."""
    out = base.clone()
    with torch.no_grad() if not (out.requires_grad or value.requires_grad) else _nullcontext():
        apply_chain(out, chain).copy_(value)
    return out


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


def run_op(rec: OpRecord, value_of: Callable[[Node], Any]) -> List[Any]:
    """The flattened outputs of ``rec`` on the values ``value_of`` gives its input nodes."""
    if rec.func == "view_scatter":
        base, value = value_of(rec.args[0].node), value_of(rec.args[1].node)
        return [view_scatter(base, value, rec.chain)]
    if rec.func == "view_replay":
        return [apply_chain(value_of(rec.args[0].node), rec.chain)]

    def sub(x: Any) -> Any:
        return value_of(x.node) if isinstance(x, Ref) else x

    args, kwargs = pytree.tree_map(sub, (rec.args, rec.kwargs))
    out = functional(rec)(*args, **kwargs)
    return pytree.tree_leaves(out)


def ancestors(targets: Iterable[Node]) -> Set[int]:
    """Indices of the ops the ``targets`` depend on (their backward slice)."""
    seen: Set[int] = set()
    stack = [n for n in targets]
    visited: Set[int] = set()
    while stack:
        node = stack.pop()
        if node.id in visited:
            continue
        visited.add(node.id)
        rec = node.producer
        if rec is None or node.kind == EXACT:
            continue
        if rec.index not in seen:
            seen.add(rec.index)
            stack.extend(rec.input_nodes())
    return seen


class Slice:
    """The ops that compute ``targets`` from the trace's free sources, ready to rerun."""

    def __init__(self, ops: Sequence[OpRecord], targets: Sequence[Node]) -> None:
        keep = ancestors(targets)
        self.ops = [r for r in ops if r.index in keep]
        produced = {id(n) for r in self.ops for n in r.outputs if n is not None}
        self.sources: List[Node] = []
        seen: Set[int] = set()
        for n in [n for r in self.ops for n in r.input_nodes()] + list(targets):
            if id(n) not in produced and n.kind != EXACT and id(n) not in seen:
                seen.add(id(n))
                self.sources.append(n)
        # random factories inside the slice are sources too (their sample is a free input)
        self.random = [n for r in self.ops for n in r.outputs if n is not None and n.kind == "random"]
        self.targets = list(targets)

    def run(self, values: Dict[int, torch.Tensor], cache: Optional[Dict[int, Any]] = None,
            changed: Optional[Set[int]] = None) -> Dict[int, torch.Tensor]:
        """Recompute the slice; ``values`` maps node ids of sources (and random outputs) to tensors.

        With ``cache`` (an earlier run's values) and ``changed`` (the source ids whose values
        differ from it), only the ops downstream of ``changed`` run again: the rest (the data
        pipeline, when only parameters move) is read from the cache.
        """
        env: Dict[int, Any] = dict(values)
        dirty: Optional[Set[int]] = set(changed) if changed is not None and cache is not None else None

        def value_of(node: Node) -> Any:
            v = env.get(node.id)
            if v is not None:
                return v
            if node.value is not None:
                return node.value
            raise KeyError(f"no value for {node!r}")

        for rec in self.ops:
            if all(n is not None and n.id in env for n in rec.outputs if n is not None) and rec.outputs:
                continue   # random outputs given as values
            if dirty is not None and cache is not None:
                if not any(n.id in dirty for n in rec.input_nodes()) and all(
                        n is None or n.id in cache for n in rec.outputs):
                    for n in rec.outputs:
                        if n is not None:
                            env[n.id] = cache[n.id]
                    continue
                dirty.update(n.id for n in rec.outputs if n is not None)
            outs = run_op(rec, value_of)
            for node, v in zip(rec.outputs, outs):
                if node is not None and isinstance(v, torch.Tensor) and node.id not in env:
                    env[node.id] = v
        return env


__all__ = ["Slice", "ancestors", "apply_chain", "functional", "run_op", "view_scatter"]


# ---------------------------------------------------------------------------- saved slices
def _op_name(func: Any) -> str:
    if isinstance(func, str):
        return func
    name = getattr(func, "__name__", "")
    if hasattr(func, "_schema"):
        return "aten." + name
    return f"nanguard.{name}"


def _resolve(name: str) -> Any:
    if name in ("view_scatter", "view_replay"):
        return name
    if name.startswith("aten.copy"):
        return _copy
    if name.startswith("aten."):
        packet, _, overload = name[len("aten."):].partition(".")
        if packet.endswith("_") and not packet.endswith("__") and hasattr(aten, packet[:-1]):
            functional_op = getattr(getattr(aten, packet[:-1]), overload or "default", None)
            if functional_op is not None:
                return functional_op
        return getattr(getattr(aten, packet), overload or "default")
    if name.startswith("nanguard."):
        import nanguard.torch as ng_torch
        return getattr(ng_torch, name.split(".", 1)[1])
    raise ValueError(f"cannot resolve op {name!r}")


@dataclass(frozen=True)
class SavedNode:
    """A node in a saved slice's arguments (a pytree leaf, unlike a tuple)."""

    id: int


def _encode(x: Any) -> Any:
    if isinstance(x, Ref):
        return SavedNode(x.node.id)
    return x


def slice_spec(sl: Slice, values: Dict[int, Any], target: OpRecord) -> Dict[str, Any]:
    """A self-contained description of ``sl`` (ops by name, constants, source values) that
    `replay_spec` reruns without the program: what an emitted test replays."""
    ops = []
    constants: Dict[int, Any] = {}
    for rec in list(sl.ops) + ([target] if target not in sl.ops else []):
        for n in rec.input_nodes():
            if n.kind == EXACT and n.value is not None:
                constants[n.id] = n.value
        chain = [(_op_name(f), tuple(a), dict(k), i) for f, a, k, i in rec.chain]
        ops.append({"op": _op_name(rec.func), "args": pytree.tree_map(_encode, rec.args),
                    "kwargs": pytree.tree_map(_encode, rec.kwargs),
                    "outputs": [n.id if n is not None else None for n in rec.outputs], "chain": chain})
    return {"ops": ops, "constants": constants, "sources": {k: v.detach() for k, v in values.items()}}


def replay_spec(spec: Dict[str, Any]) -> Tuple[List[Any], List[Any]]:
    """Rerun a saved slice; (the inputs, the outputs) of its last op, the flagged one."""
    env: Dict[int, Any] = dict(spec["constants"])
    env.update(spec["sources"])

    def decode(x: Any) -> Any:
        return env[x.id] if isinstance(x, SavedNode) else x

    ins: List[Any] = []
    outs: List[Any] = []
    for op in spec["ops"]:
        if op["outputs"] and all(o is not None and o in env for o in op["outputs"]) and op is not spec["ops"][-1]:
            continue
        func = _resolve(op["op"])
        args = pytree.tree_map(decode, op["args"])
        kwargs = pytree.tree_map(decode, op["kwargs"])
        chain = [(_resolve(f), a, k, i) for f, a, k, i in op["chain"]]
        if func == "view_scatter":
            outs = [view_scatter(args[0], args[1], chain)]
        elif func == "view_replay":
            outs = [apply_chain(args[0], chain)]
        else:
            outs = pytree.tree_leaves(func(*args, **kwargs))
        ins = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        for node_id, v in zip(op["outputs"], outs):
            if node_id is not None and isinstance(v, torch.Tensor):
                env[node_id] = v
    return ins, outs


__all__ += ["SavedNode", "replay_spec", "slice_spec"]
