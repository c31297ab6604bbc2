"""Precise localisation by replay: re-run recorded calls under an op-level check.

The cheap default mode only knows *that* a module's output or a backward pass's gradients went
non-finite. To say *which op* and *which line*, it re-runs that unit here:

* the arguments are copies or detached aliases, and parameters are swapped for aliases with
  ``torch.func.functional_call`` (buffers for clones), so nothing the user owns is written:
  no ``.grad`` accumulates, no running statistic moves, no tensor hook fires;
* the RNG state is set to the one recorded before the call (the same dropout masks) and put
  back afterwards, so the program's random stream is untouched;
* `ReplayMode` checks every aten op in order, forward then backward, and stops at the first
  op that creates a non-finite value; each forward op's user line, module path and inputs are
  attached to the autograd node it creates, which is how a backward finding learns the
  forward line that made it.

A replay answers with a `ReplayResult` (`outcome.py`): `Reproduced` with the report of the
first finding, `NotReproduced`, `NotReplayable` or `ReplayFailed`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import torch

from nanguard.torch._compat import current_autograd_node, pytree
from nanguard.torch.detector import _state, sharded
from nanguard.torch.detector._state import STATE, capture_rng, orig_module_call, restore_rng
from nanguard.torch.detector.aten import written_tensors
from nanguard.torch.detector.build import ForwardInfo, make_report, named_args, output_pairs, split_args
from nanguard.torch.detector.frames import Frame, torch_api, user_frame, user_stack
from nanguard.torch.detector.outcome import NotReplayable, NotReproduced, ReplayFailed, ReplayResult, Reproduced
from nanguard.core.report import Report
from nanguard.torch.detector.tape import Entry, key_of
from nanguard.torch.detector.replay_mode import Found, ReplayMode

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation

_current_node = current_autograd_node


class Replay:
    """One replay session on the calling thread."""

    def __init__(self, act: "Activation", how: str, call_frame: Optional[Frame] = None) -> None:
        self.act = act
        self.check = act.check
        self.how = how
        self.call_frame = call_frame
        self.records: List[ForwardInfo] = []
        self.pending: Optional[tuple] = None
        self.modules: List[torch.nn.Module] = []
        self.names: Dict[int, str] = {}
        self.entry: Optional[Entry] = None
        self.token = object()
        self.notes: List[str] = []
        self.tensor_names: Dict[int, str] = {}   # parameters (or their aliases) -> dotted name
        self.originals: Dict[int, torch.Tensor] = {}   # alias id -> the parameter it stands for

    # ---------------------------------------------------------------- module paths
    def module_call(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        self.modules.append(module)
        try:
            return orig_module_call(module, *args, **kwargs)
        finally:
            self.modules.pop()

    def name_root(self, root: torch.nn.Module) -> None:
        for key, path in self.act.naming.paths_within(root):
            self.names.setdefault(key, path)

    def module_path(self) -> Optional[str]:
        if not self.modules:
            return None
        m = self.modules[-1]
        return self.names.get(id(m), type(m).__name__)

    # ---------------------------------------------------------------- node annotation
    def flush(self) -> None:
        """Attach the previous forward op's info to the autograd node(s) it created.

        A dispatch-level handler runs below autograd, so the node of an op's output exists
        only once the op has returned; the next op (or the end of a call) is when to look.
        """
        p = self.pending
        if p is None:
            return
        self.pending = None
        if len(p) == 2:   # a safe op: its ForwardInfo is made already
            outs, info = p
        else:
            outs, func, args, kwargs, frame = p
            info = None
        index = None
        for t in outs:
            gf = t.grad_fn if isinstance(t, torch.Tensor) else None
            if gf is None:
                continue
            md = gf.metadata
            if "nanguard" in md and md["nanguard"][0] is self.token:
                continue
            if index is None:
                index = len(self.records)
                self.records.append(info if info is not None else self.forward_info(func, args, kwargs, frame))
            md["nanguard"] = (self.token, index)

    def forward_info(self, func, args, kwargs, frame) -> ForwardInfo:
        tensors, scalars, dim = split_args(named_args(func, args, kwargs))
        node = _current_node()
        return ForwardInfo(op=str(func), frame=self.user_frame(frame), module=self.module_path(),
                           api=torch_api(frame, _STOP), inputs=tensors, scalars=scalars, dim=dim,
                           created_in=node.name() if node is not None else None)

    def user_frame(self, frame) -> Optional[Frame]:
        found = user_frame(frame, _STOP)
        if found is None and self.entry is not None:
            return self.entry.frame
        return found

    # ---------------------------------------------------------------- a finding
    def capture(self, func, args, kwargs, out, verdict, frame) -> Report:
        tensors, scalars, dim = split_args(named_args(func, args, kwargs))
        written = {id(t) for t in written_tensors(func, args, kwargs)}
        outputs = output_pairs(out)
        outputs += [(f"{n} (written)", t) for n, t in tensors if id(t) in written and all(t is not o for _, o in outputs)]
        tensors = [(n, t) for n, t in tensors if id(t) not in written]
        return self.capture_values(str(func), verdict, tensors, scalars, dim, outputs, frame,
                                   torch_api(frame, _STOP) if _current_node() is None else None)

    def capture_values(self, op: str, verdict, tensors, scalars, dim, outputs, frame,
                       api: Optional[str]) -> Report:
        node = _current_node()
        tensors = [(self._name_of(t, n), t) for n, t in tensors]
        fwd = None
        if node is not None:
            tag = node.metadata.get("nanguard")
            if tag is not None and tag[0] is self.token:
                fwd = self.records[tag[1]]
        if verdict.origin == "input":
            phase = "input"
        else:
            phase = "backward" if node is not None else "forward"
        location = self.user_frame(frame) if node is None else (self.call_frame if phase == "input" else None)
        notes = list(self.notes)
        if phase == "backward" and fwd is None:
            notes.append("the forward op of this backward node ran outside the replayed calls, so its line is unknown")
        report = make_report(
            phase=phase, kind=verdict.kind, op=op, inputs=tensors, outputs=outputs,
            scalars=scalars, frame=location, module=self.module_path() if node is None else None,
            api=api if node is None else None,
            node=node.name() if node is not None else None, forward=fwd, call_frame=self.call_frame,
            stack=user_stack(frame) if node is None else [], step=self.act.step(), how=self.how, notes=notes, dim=dim,
            optimizer=self.act.optimizer_context(), aliases=self.originals)
        return report

    def _name_of(self, t: torch.Tensor, default: str) -> str:
        """A parameter's dotted name, also for a view of it (``linear`` passes ``weight.t()``)."""
        name = self.tensor_names.get(id(t))
        if name is None and t._base is not None:
            base = self.tensor_names.get(id(t._base))
            if base is not None:
                name = f"{base} (as {default})"
        return name or default

    # ---------------------------------------------------------------- running
    def __enter__(self) -> "Replay":
        """Module calls come here, the RNG state is put back afterwards, the live mode is out
        of the way and `ReplayMode` checks every op; each undone on every way out."""
        scopes = contextlib.ExitStack()
        with scopes:
            scopes.enter_context(STATE.replaying(self))
            scopes.enter_context(_rng_kept())
            scopes.enter_context(self.act.replaying())
            scopes.enter_context(sharded.replay_guard())
            scopes.enter_context(ReplayMode(self))
            self._scopes = scopes.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._scopes.close()
        finally:
            self.pending = None

    def run_entry(self, e: Entry, env: Dict[Any, torch.Tensor], leaves: List[torch.Tensor],
                  grads: bool) -> Any:
        """Re-run one recorded call; its outputs join ``env`` under their recorded keys."""
        self.entry = e
        values: List[Any] = []
        for slot, k in enumerate(e.in_keys):
            t = e.input(slot)
            view = e.views.get(slot)
            if view is not None:
                base = env.get(view.base_key_before)
                if base is None:
                    base = _alias(view.base, False, leaves, copy=True)
                values.append(base.as_strided(view.size, view.stride, base.storage_offset() + view.offset))
                continue
            held = e.weak.get(slot)
            r = env.get(("out", held[1].seq, held[2])) if held is not None else env.get(k)
            if r is None:
                if t is None:   # held weakly, freed, and its producer was not replayed
                    raise RuntimeError("a recorded input was freed before the replay")
                mutated_copy = k[0] != id(t)
                r = _alias(t, e.req[slot] and grads, leaves, copy=(e.kind == "module" or mutated_copy),
                           nonleaf=mutated_copy)
                if not mutated_copy:
                    env[k] = r
            values.append(r)
        args, kwargs = e.arguments(values)
        if e.rng is not None:
            restore_rng(e.rng)
        with torch.enable_grad() if grads else contextlib.nullcontext():
            if e.kind == "module":
                out = self._call_module(e, args, kwargs, leaves, grads)
            else:
                out = e.fn(*args, **kwargs)
        self.flush()
        flat = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
        for i, (k, o) in enumerate(zip(e.out_keys, flat)):
            env[("out", e.seq, i)] = o     # for the inputs held weakly (see `Entry.weak`)
            if e.output_alive(i):
                env[k] = o                 # a freed output's key may name another tensor by now
        for slot, view in e.views.items():
            if view.base_key_after is not None:
                env[view.base_key_after] = values[slot]._base if values[slot]._base is not None else values[slot]
        self.entry = None
        return out

    def _call_module(self, e: Entry, args: tuple, kwargs: dict, leaves: List[torch.Tensor], grads: bool) -> Any:
        module = sharded.replay_target(e.module)   # DDP's wrapped module: no collectives of its own
        assert module is not None
        self.name_root(module)
        naming = self.act.naming
        swap: Dict[str, torch.Tensor] = {}
        for name, b in module.named_buffers():
            swap[name] = b.detach().clone()   # updates (running stats) land on the copy
        for name, p in module.named_parameters():
            if grads:
                a = p.detach().requires_grad_(p.requires_grad)
                if p.requires_grad:
                    leaves.append(a)
                swap[name] = a
                self.originals[id(a)] = p
            else:
                a = p
            self.tensor_names[id(a)] = naming.parameter_name(module, name)
        with _autocast(e):
            return torch.func.functional_call(module, swap, args, kwargs, tie_weights=True, strict=False)


@contextlib.contextmanager
def _rng_kept():
    """The random stream as it was before the replay, whatever the replay drew."""
    state = capture_rng()
    try:
        yield
    finally:
        restore_rng(state)


def _autocast(e: Entry):
    return _state.autocast_context(e.autocast)


def _alias(t: torch.Tensor, requires_grad: bool, leaves: List[torch.Tensor], copy: bool,
           nonleaf: bool = False) -> torch.Tensor:
    """A stand-in for a tensor the replay did not produce: a leaf of the replayed graph."""
    a = t.detach()
    if copy:
        a = a.clone()
    if requires_grad and (a.is_floating_point() or a.is_complex()):
        a.requires_grad_(True)
        leaves.append(a)
        if nonleaf:
            a = a.clone()   # in-place ops are not allowed on a leaf that requires grad
    return a


@_state.no_compile
def replay_module_forward(act: "Activation", module: torch.nn.Module, args: tuple, kwargs: dict,
                          rng: Optional[tuple], frame: Optional[Frame]) -> ReplayResult:
    """Re-run one module call's forward on copies of its inputs, op by op."""
    e = Entry(act.tape, "module", None, module)
    e.set_args(args, kwargs)
    e.rng = rng
    e.frame = frame
    with Replay(act, "replayed this module's forward on its saved inputs under an op-level check") as r:
        try:
            r.run_entry(e, {}, [], grads=torch.is_grad_enabled())
        except Found as found:
            return Reproduced(found.report)
        except Exception as err:  # the original call succeeded; a replay failure is ours to report
            return ReplayFailed("module", err.with_traceback(None))
    return NotReproduced()


_BACKWARD_HOW = "replayed the forward and backward pass on the recorded inputs under an op-level check"


@_state.no_compile
def replay_backward(act: "Activation", entries: Sequence[Entry], roots: Sequence[torch.Tensor],
                    grad_tensors: Sequence[Any], inputs: Sequence[Any], create_graph: bool,
                    call_frame: Optional[Frame], how: str = _BACKWARD_HOW) -> ReplayResult:
    """Re-run the recorded forward calls behind ``roots``, then their backward, op by op.

    ``how`` is what a report of the finding says about how it was found."""
    with Replay(act, how, call_frame) as r:
        try:
            env: Dict[Any, torch.Tensor] = {}
            leaves: List[torch.Tensor] = []
            for e in entries:
                r.run_entry(e, env, leaves, grads=True)
            r_roots = [env.get(key_of(t)) for t in roots]
            if any(x is None for x in r_roots):
                return NotReplayable("the loss was not computed by recorded calls, so the backward could not be "
                                     "replayed")
            r_grads = [g.detach() if isinstance(g, torch.Tensor) else g for g in grad_tensors]
            if inputs:
                targets = [env.get(key_of(t)) if env.get(key_of(t)) is not None
                           else _alias(t, True, leaves, copy=False) for t in inputs if isinstance(t, torch.Tensor)]
            else:
                targets = [t for t in leaves if t.requires_grad]
            if not targets:
                return NotReplayable("no recorded input requires grad, so the backward could not be replayed")
            torch.autograd.grad(r_roots, targets, r_grads, retain_graph=False, create_graph=create_graph,
                                allow_unused=True)
        except Found as found:
            return Reproduced(found.report)
        except Exception as err:
            return ReplayFailed("backward", err.with_traceback(None))
    return NotReproduced()


_STOP = frozenset({Replay.run_entry.__code__, Replay._call_module.__code__,
                   replay_backward.__wrapped__.__code__, replay_module_forward.__wrapped__.__code__})
