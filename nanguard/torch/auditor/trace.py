"""Record one forward pass of a program, op by op, up to its first backward.

A `Tracer` is a dispatch mode: every aten op the program runs (in the training loop, the
loss, the data pipeline, not only in ``forward()``) becomes an `OpRecord` whose arguments
refer to `Node`s, the values of the trace. Each node says where its value comes from:

* ``param``: an ``nn.Parameter`` or a leaf tensor that requires grad (free in an audit);
* ``data``: a float tensor that arrives from outside (numpy, a list, a dataset) (free);
* ``random``: the output of a random factory (``randn``, ``rand``, ``bernoulli_`` ...), free
  inside the factory's support;
* ``exact``: integers, booleans, constants, buffers and everything computed from exact
  values only: the audit keeps their observed value (a copy);
* ``computed``: anything else, analysed from its inputs.

In-place writes are functionalised: the written tensor gets a new node; a write through a
view gives the base a new node too (``view_scatter``), and other views of that base are
re-derived from it (``view_replay``) when next used, so a base's value stays right.

The trace stops when the program calls ``backward()`` / ``autograd.grad`` for the first
time (`StopTrace`), at ``limit`` ops, or when the program ends. The roots of that backward
are kept: only ops that reach them are on the gradient path.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from nanguard.core.location import Frame
from nanguard.torch._compat import TorchDispatchMode, current_autograd_node, pytree
from nanguard.torch.auditor.graph import (
    COMPUTED, DATA, EXACT, FREE_KINDS, PARAM, RANDOM, Node, OpRecord, Ref, StopTrace, Trace, base_name,
    functional_name,
)
from nanguard.torch.auditor.sources import (
    RANDOM_DATA, RANDOM_EXACT, SHAPE_ONLY, is_literal, is_view, made_nonfinite, version, written,
)
from nanguard.torch.detector._state import in_autocast
from nanguard.torch.detector.frames import user_frame
from nanguard.torch.detector.values import fast_finite

aten = torch.ops.aten
_current_node = current_autograd_node


@dataclass
class _Entry:
    ref: Any
    node: Node
    version: int
    base: Optional[Any]                 # weakref to the base tensor of a view (None: not a view)
    chain: Tuple[Any, ...]              # (func, args_after_self, kwargs, out_index) from the base


def _is_param(t: torch.Tensor) -> bool:
    return isinstance(t, torch.nn.Parameter) or (t.requires_grad and t.grad_fn is None)


class Tracer(TorchDispatchMode):
    """The recording dispatch mode (use `trace_calls`, which also installs the hooks)."""

    def __init__(self, limit: int = 200_000) -> None:
        super().__init__()
        self.trace = Trace()
        self.limit = limit
        self._table: Dict[int, _Entry] = {}
        self._params: Dict[int, Node] = {}
        self._paused = 0
        self._modules: List[str] = []
        self._module_names: Dict[int, str] = {}
        self._buffers: Dict[int, str] = {}
        self.data_names: Dict[int, str] = {}    # id(tensor) -> argument name (audit(fn, x=...))
        # audit(fn, *args): the arguments are the data; any other float tensor that already
        # exists (a closure's mask, a table) is a constant of the function
        self.arguments_are_the_data = False
        self.current_line: Optional[Frame] = None
        self._pending: List[_Entry] = []
        self.internal_errors = 0

    # ------------------------------------------------------------------------ nodes
    def _new_node(self, kind: str, t: torch.Tensor, producer: Optional[OpRecord] = None, **kw: Any) -> Node:
        node = Node(id=len(self.trace.nodes), kind=kind, dtype=t.dtype, shape=tuple(t.shape), producer=producer,
                    device=t.device, **kw)
        if t.dtype.is_floating_point and t.numel() and t.layout == torch.strided:
            with torch.no_grad():
                finite = fast_finite(t)
                node.finite = finite
                node.has_nan = (not finite) and bool(torch.isnan(t).any())
        self.trace.nodes.append(node)
        return node

    def _assign(self, t: torch.Tensor, node: Node, base: Optional[torch.Tensor] = None,
                chain: Tuple[Any, ...] = ()) -> None:
        if _is_param(t):
            return
        entry = _Entry(weakref.ref(t), node, version(t), weakref.ref(base) if base is not None else None, chain)
        self._table[id(t)] = entry
        # an in-place op bumps the version counter after its kernel returns: read it again then
        self._pending.append(entry)

    def settle(self) -> None:
        """Read the version counters of the tensors assigned by the last op (bumped by now)."""
        for entry in self._pending:
            t = entry.ref()
            if t is not None:
                entry.version = version(t)
        self._pending.clear()

    def _source(self, t: torch.Tensor) -> Node:
        """A tensor seen for the first time (or changed behind the trace's back)."""
        if _is_param(t):
            node = self._params.get(id(t))
            if node is None:
                name = self.trace.param_names.get(id(t))
                node = self._new_node(PARAM, t, name=name or f"param#{len(self._params)}", value=t)
                self._params[id(t)] = node
            return node
        if not t.dtype.is_floating_point or t.layout != torch.strided:
            node = self._new_node(EXACT, t, value=t.detach().clone())
        elif id(t) in self._buffers:
            node = self._new_node(EXACT, t, value=t.detach().clone(), name=self._buffers[id(t)])
        elif id(t) in self.data_names:
            node = self._new_node(DATA, t, value=t.detach().clone(), name=self.data_names[id(t)])
        elif t.numel() <= 1 or self._literal_line() or self.arguments_are_the_data:
            node = self._new_node(EXACT, t, value=t.detach().clone())
        else:
            node = self._new_node(DATA, t, value=t.detach().clone(), name="data")
        self._assign(t, node)
        return node

    def _literal_line(self) -> bool:
        frame = self.current_line
        return frame is not None and is_literal(frame.code)

    def node_of(self, t: torch.Tensor) -> Node:
        if _is_param(t):
            return self._source(t)
        entry = self._table.get(id(t))
        if entry is None or entry.ref() is not t:
            return self._source(t)
        if entry.version == version(t):
            return entry.node
        # written since: through another view of the same base, or behind the trace's back
        if entry.base is not None:
            base = entry.base()
            if base is not None:
                base_entry = self._table.get(id(base))
                if base_entry is not None and base_entry.ref() is base and base_entry.version == version(base):
                    return self._replay_view(t, base, base_entry.node, entry.chain)
        # changed behind the trace's back (a write it did not see): a new source, its value now
        return self._source(t)

    # ------------------------------------------------------------------------ recording
    def _record(self, func: Any, name: str, base: str, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                chain: Tuple[Any, ...] = ()) -> OpRecord:
        def to_ref(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return Ref(self.node_of(x))
            return x
        rargs, rkwargs = pytree.tree_map(to_ref, (tuple(args), dict(kwargs)))
        rec = OpRecord(index=len(self.trace.ops), func=func, name=name, base=base, args=rargs, kwargs=rkwargs,
                       outputs=[], frame=self.current_line, module=self._modules[-1] if self._modules else None,
                       grad_enabled=torch.is_grad_enabled(), chain=chain, autocast=in_autocast())
        self.trace.ops.append(rec)
        return rec

    def _replay_view(self, t: torch.Tensor, base: torch.Tensor, base_node: Node, chain: Tuple[Any, ...]) -> Node:
        rec = OpRecord(index=len(self.trace.ops), func="view_replay", name="view_replay", base="view_replay",
                       args=(Ref(base_node),), kwargs={}, outputs=[], frame=self.current_line,
                       module=self._modules[-1] if self._modules else None, grad_enabled=True, chain=chain)
        self.trace.ops.append(rec)
        node = self._output_node(rec, t, [base_node])
        rec.outputs.append(node)
        self._assign(t, node, base, chain)
        return node

    def _output_node(self, rec: OpRecord, t: torch.Tensor, inputs: List[Node]) -> Node:
        b = rec.base
        if b == "bernoulli":   # a dropout mask: a sample the replay keeps
            return self._new_node(RANDOM, t, producer=rec, support=(0.0, 1.0), grad_enabled=rec.grad_enabled,
                                  value=t.detach().clone() if t.numel() <= 1 << 16 else None)
        if b in RANDOM_DATA:
            return self._new_node(RANDOM, t, producer=rec, support=RANDOM_DATA[b](rec.args, rec.kwargs),
                                  grad_enabled=rec.grad_enabled)
        if b in SHAPE_ONLY or b == "fill" and not any(isinstance(a, Ref) for a in rec.args[1:]):
            return self._new_node(EXACT, t, producer=rec, value=t.detach().clone(), grad_enabled=rec.grad_enabled)
        if b in RANDOM_EXACT and b != "native_dropout" or (
                b != "native_dropout" and all(n.kind == EXACT for n in inputs)):
            return self._new_node(EXACT, t, producer=rec, value=t.detach().clone(), grad_enabled=rec.grad_enabled)
        return self._new_node(COMPUTED, t, producer=rec, grad_enabled=rec.grad_enabled)

    def _finish(self, rec: OpRecord, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        inputs = rec.input_nodes()
        leaves = pytree.tree_leaves(out)
        writes = written(func, args, kwargs)
        view = is_view(func)
        for i, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor):
                rec.outputs.append(None)
                continue
            node = self._output_node(rec, leaf, inputs)
            rec.outputs.append(node)
            if view and args and isinstance(args[0], torch.Tensor):
                self._assign_view(leaf, args[0], node, func, args, kwargs, i if len(leaves) > 1 else None)
            elif writes and any(leaf is w for w in writes):
                self._write(leaf, node)
            else:
                self._assign(leaf, node)
        for w in writes:   # written but not returned (out= of a multi-output op, _foreach_)
            if not any(w is leaf for leaf in leaves):
                node = self._output_node(rec, w, inputs)
                rec.outputs.append(node)
                self._write(w, node)
        rec.made_nonfinite = made_nonfinite(rec, inputs, args, out)

    def _assign_view(self, view: torch.Tensor, source: torch.Tensor, node: Node, func: Any, args: Tuple[Any, ...],
                     kwargs: Dict[str, Any], index: Optional[int]) -> None:
        entry = self._table.get(id(source))
        if entry is not None and entry.ref() is source and entry.base is not None:
            base = entry.base()
            chain = entry.chain
        else:
            base, chain = source, ()
        if base is None or _is_param(base):
            self._assign(view, node)
            return
        link = (func, tuple(args[1:]), dict(kwargs), index)
        self._assign(view, node, base, chain + (link,))

    def _write(self, t: torch.Tensor, node: Node) -> None:
        """``t`` was written in place and now holds ``node``; a view's base gets a new node too."""
        entry = self._table.get(id(t))
        base = entry.base() if entry is not None and entry.ref() is t and entry.base is not None else None
        chain = entry.chain if base is not None else ()
        self._assign(t, node, base, chain)
        if base is None or _is_param(base):
            return
        base_entry = self._table.get(id(base))
        base_node = base_entry.node if base_entry is not None and base_entry.ref() is base else self._source(base)
        rec = OpRecord(index=len(self.trace.ops), func="view_scatter", name="view_scatter", base="view_scatter",
                       args=(Ref(base_node), Ref(node)), kwargs={}, outputs=[], frame=self.current_line,
                       module=self._modules[-1] if self._modules else None, grad_enabled=torch.is_grad_enabled(),
                       chain=chain)
        self.trace.ops.append(rec)
        new_base = self._output_node(rec, base, [base_node, node])
        rec.outputs.append(new_base)
        self._assign(base, new_base)

    # ------------------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._paused or _current_node() is not None:
            return func(*args, **kwargs)
        self.settle()
        if len(self.trace.ops) >= self.limit:
            self.trace.stopped_at = "limit"
            raise StopTrace()
        try:
            self.current_line = user_frame(sys._getframe(1))
            rec = self._record(func, str(func), functional_name(base_name(func)), args, kwargs)
        except Exception:   # never break the program: this op is then unknown to the analysis
            self.internal_errors += 1
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        try:
            self._finish(rec, func, args, kwargs, out)
        except Exception:   # its outputs become new, unbounded sources where they are used
            self.internal_errors += 1
        return out

    def watch_safe_op(self, fn: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any],
                      reports_inf: bool) -> Any:
        """A nanguard safe op is one op of the trace (see ``nanguard.torch.ops._core.public_op``)."""
        if self._paused or _current_node() is not None:
            return fn(*args, **kwargs)
        self.settle()
        self.current_line = user_frame(sys._getframe(1))
        # the mode is on the stack here (this is not __torch_dispatch__): pause it so that the
        # tracer's own reads of values (isfinite ...) and the op's insides are not recorded
        self._paused += 1
        try:
            rec = self._record(fn, f"nanguard.{fn.__name__}", f"nanguard.{fn.__name__}", args, kwargs)
            out = fn(*args, **kwargs)
            inputs = rec.input_nodes()
            for leaf in pytree.tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    node = self._output_node(rec, leaf, inputs)
                    rec.outputs.append(node)
                    self._assign(leaf, node)
                else:
                    rec.outputs.append(None)
        finally:
            self._paused -= 1
        return out

    def nodes_of(self, out: Any) -> List[Node]:
        """The nodes of the tensors in ``out`` (what a traced call returned: its roots)."""
        nodes = []
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                entry = self._table.get(id(leaf))
                if entry is not None and entry.ref() is leaf:
                    nodes.append(entry.node)
        return nodes

    # ------------------------------------------------------------------------ modules
    def enter_module(self, module: torch.nn.Module) -> None:
        name = self._module_names.get(id(module))
        if name is None:
            self._register_root(module)
            name = self._module_names.get(id(module), type(module).__name__)
        self._modules.append(name)

    def exit_module(self) -> None:
        if self._modules:
            self._modules.pop()

    def _register_root(self, root: torch.nn.Module) -> None:
        prefix = "" if not self._modules else self._modules[-1] + "."
        for mname, m in root.named_modules():
            self._module_names.setdefault(id(m), (prefix + mname) if mname else (prefix.rstrip(".") or
                                                                                 type(root).__name__))
        for pname, p in root.named_parameters():
            self.trace.param_names.setdefault(id(p), prefix + pname)
            node = self._params.get(id(p))
            if node is not None and node.name and node.name.startswith("param#"):
                node.name = prefix + pname
        for bname, buf in root.named_buffers():
            self._buffers.setdefault(id(buf), prefix + bname)

    def name_parameters(self, module: torch.nn.Module, prefix: str = "") -> None:
        """Name ``module``'s parameters and buffers before anything runs (``audit(model, ...)``)."""
        for pname, p in module.named_parameters():
            self.trace.param_names[id(p)] = prefix + pname
        for bname, buf in module.named_buffers():
            self._buffers[id(buf)] = prefix + bname
        for mname, m in module.named_modules():
            self._module_names.setdefault(id(m), prefix + mname if mname else type(module).__name__)


__all__ = ["COMPUTED", "DATA", "EXACT", "FREE_KINDS", "Node", "OpRecord", "PARAM", "RANDOM", "Ref", "StopTrace",
           "Trace", "Tracer"]
