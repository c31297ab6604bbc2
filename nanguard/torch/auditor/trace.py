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

import re
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from nanguard.core.location import Frame
from nanguard.torch.detector.frames import user_frame
from nanguard.torch.detector.values import fast_finite

aten = torch.ops.aten
_current_node = torch._C._current_autograd_node

PARAM, DATA, RANDOM, EXACT, COMPUTED = "param", "data", "random", "exact", "computed"
FREE_KINDS = (PARAM, DATA, RANDOM)

#: random factories whose output is data: name -> support given the op's args (lo, hi)
_RANDOM_DATA: Dict[str, Callable[[Sequence[Any], Dict[str, Any]], Tuple[float, float]]] = {
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
_RANDOM_EXACT = frozenset({"randint", "randint_like", "randperm", "multinomial", "native_dropout"})
# factories whose value does not depend on their tensor input's values (only its shape)
_SHAPE_ONLY = frozenset({"zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
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
        entry = _Entry(weakref.ref(t), node, _version(t), weakref.ref(base) if base is not None else None, chain)
        self._table[id(t)] = entry
        # an in-place op bumps the version counter after its kernel returns: read it again then
        self._pending.append(entry)

    def settle(self) -> None:
        """Read the version counters of the tensors assigned by the last op (bumped by now)."""
        for entry in self._pending:
            t = entry.ref()
            if t is not None:
                entry.version = _version(t)
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
        if entry.version == _version(t):
            return entry.node
        # written since: through another view of the same base, or behind the trace's back
        if entry.base is not None:
            base = entry.base()
            if base is not None:
                base_entry = self._table.get(id(base))
                if base_entry is not None and base_entry.ref() is base and base_entry.version == _version(base):
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
                       grad_enabled=torch.is_grad_enabled(), chain=chain)
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
        if b in _RANDOM_DATA:
            return self._new_node(RANDOM, t, producer=rec, support=_RANDOM_DATA[b](rec.args, rec.kwargs),
                                  grad_enabled=rec.grad_enabled)
        if b in _SHAPE_ONLY or b == "fill" and not any(isinstance(a, Ref) for a in rec.args[1:]):
            return self._new_node(EXACT, t, producer=rec, value=t.detach().clone(), grad_enabled=rec.grad_enabled)
        if b in _RANDOM_EXACT and b != "native_dropout" or (
                b != "native_dropout" and all(n.kind == EXACT for n in inputs)):
            return self._new_node(EXACT, t, producer=rec, value=t.detach().clone(), grad_enabled=rec.grad_enabled)
        return self._new_node(COMPUTED, t, producer=rec, grad_enabled=rec.grad_enabled)

    def _finish(self, rec: OpRecord, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], out: Any) -> None:
        inputs = rec.input_nodes()
        leaves = pytree.tree_leaves(out)
        written = _written(func, args, kwargs)
        view = _is_view(func)
        for i, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor):
                rec.outputs.append(None)
                continue
            node = self._output_node(rec, leaf, inputs)
            rec.outputs.append(node)
            if view and args and isinstance(args[0], torch.Tensor):
                self._assign_view(leaf, args[0], node, func, args, kwargs, i if len(leaves) > 1 else None)
            elif written and any(leaf is w for w in written):
                self._write(leaf, node)
            else:
                self._assign(leaf, node)
        for w in written:   # written but not returned (out= of a multi-output op, _foreach_)
            if not any(w is leaf for leaf in leaves):
                node = self._output_node(rec, w, inputs)
                rec.outputs.append(node)
                self._write(w, node)
        rec.made_nonfinite = _made_nonfinite(rec, inputs)

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


def inputs_have_free(inputs: Sequence[Node]) -> bool:
    return any(n.kind != EXACT for n in inputs)


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:      # inference tensors have no version counter
        return -1


_VIEW: Dict[Any, bool] = {}


def _is_view(func: Any) -> bool:
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


def _written(func: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[torch.Tensor]:
    from nanguard.torch.detector.aten import written_tensors
    return written_tensors(func, args, kwargs)


_UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                            "empty_permuted", "resize", "set"})


def _made_nonfinite(rec: OpRecord, inputs: Sequence[Node]) -> bool:
    """The detector's rule: a NaN where no input held NaN, or an infinity where every input was finite
    (uninitialised memory and the workspaces some ops return beside their result do not count)."""
    if rec.base in _UNINITIALISED or isinstance(rec.func, str):
        return False
    from nanguard.torch.detector.aten import result_outputs
    results = result_outputs(rec.func, rec.outputs) if not rec.base.startswith("nanguard.") else rec.outputs
    outs = [n for n in results if n is not None and n.is_float and not n.finite]
    if not outs:
        return False
    if any(n.has_nan for n in outs) and not any(n.has_nan for n in inputs if n.is_float) and \
            not _scalar_nan(rec.args, rec.kwargs):
        return True
    return all(n.finite for n in inputs if n.is_float) and _scalars_finite(rec.args, rec.kwargs)


def _scalar_nan(args: Any, kwargs: Any) -> bool:
    return any(isinstance(leaf, float) and leaf != leaf for leaf in pytree.tree_leaves((args, kwargs)))


def _scalars_finite(args: Any, kwargs: Any) -> bool:
    for leaf in pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, float) and not (leaf == leaf and abs(leaf) != float("inf")):
            return False
        if isinstance(leaf, Ref) and leaf.node.is_float and not leaf.node.finite:
            return False
    return True


# ---------------------------------------------------------------------------- hooks
_ENGINE_ATTRS = ((torch.autograd, "_engine_run_backward"), (torch.autograd.graph, "_engine_run_backward"))


class trace_calls:
    """``with trace_calls() as tracer:`` records what runs inside into ``tracer.trace``.

    Installs the dispatch mode, global module hooks (module paths, parameter names) and a
    stop at the first backward (whose roots become ``trace.roots``). `StopTrace` is
    swallowed at the end of the block.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.tracer = Tracer(limit=limit)
        self._handles: List[Any] = []
        self._saved: List[Tuple[Any, str, Any]] = []

    def __enter__(self) -> Tracer:
        tracer = self.tracer
        from torch.nn.modules import module as module_mod

        def pre(module: torch.nn.Module, inputs: Any) -> None:
            tracer.enter_module(module)

        def post(module: torch.nn.Module, inputs: Any, output: Any) -> None:
            tracer.exit_module()

        self._handles.append(module_mod.register_module_forward_pre_hook(pre))
        self._handles.append(module_mod.register_module_forward_hook(post, always_call=True))

        def stop(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            roots = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
            nodes = []
            for r in roots:
                if isinstance(r, torch.Tensor):
                    entry = tracer._table.get(id(r))
                    if entry is not None and entry.ref() is r:
                        nodes.append(entry.node)
            tracer.trace.roots = nodes
            tracer.trace.stopped_at = "backward"
            raise StopTrace()

        for owner, attr in _ENGINE_ATTRS:
            if hasattr(owner, attr):
                self._saved.append((owner, attr, getattr(owner, attr)))
                setattr(owner, attr, stop)
        tracer.__enter__()
        return tracer

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            self.tracer.__exit__(exc_type, exc, tb)
        finally:
            for owner, attr, value in reversed(self._saved):
                setattr(owner, attr, value)
            self._saved.clear()
            for h in self._handles:
                h.remove()
            self._handles.clear()
        return exc_type is not None and issubclass(exc_type, StopTrace)


__all__ = ["COMPUTED", "DATA", "EXACT", "FREE_KINDS", "Node", "OpRecord", "PARAM", "RANDOM", "Ref", "StopTrace",
           "Trace", "Tracer", "base_name", "functional_name", "trace_calls"]
