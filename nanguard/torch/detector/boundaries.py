"""The coarse checks of the default mode, at the three boundaries the global hooks see.

* `ModuleBoundary`: the output of each *outermost* module call (its inputs, RNG state and
  autocast state taped for a later backward replay); a non-finite output is localised by
  replaying the call (`replay.replay_module_forward`).
* `BackwardBoundary`: the gradients at the end of each backward pass (and the gradient a
  caller passes in); non-finite ones are localised by replaying the tape behind the loss.
* `OptimizerBoundary`: an optimizer step is one unit the default mode does not look inside;
  it checks the parameters after the step (`persistent.py`) and remembers the step so that
  a parameter it made non-finite is blamed on it.

Each belongs to one `Activation` and reads only its public state.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import torch

from nanguard.core.report import Report
from nanguard.errors import NonFiniteError
from nanguard.torch._compat import functorch_transforms_active, pytree
from nanguard.torch.detector import _state, collectives, compiled, scaled, sharded
from nanguard.torch.detector._state import STATE, capture_rng, no_compile, orig_module_call
from nanguard.torch.detector.build import OptimizerContext, make_report
from nanguard.torch.detector.frames import Frame, user_frame
from nanguard.torch.detector.outcome import NotReproduced, Reproduced, replay_notes
from nanguard.torch.detector.replay import replay_backward, replay_module_forward
from nanguard.torch.detector.tape import Entry, leaves_of
from nanguard.torch.detector.values import all_finite, checkable, has_nan, is_finite, iter_scalars, judge

if TYPE_CHECKING:
    from nanguard.torch.detector.activation import Activation

_Tensor = torch.Tensor


class ModuleBoundary:
    """Outermost module calls: tape them, check their outputs, replay a non-finite one."""

    def __init__(self, act: "Activation") -> None:
        self.act = act
        # Modules whose -inf outputs a replay showed to be deliberate (a -inf mask made inside).
        self.deliberate_inf: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()

    def call(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        act = self.act
        st = STATE
        if st.depth or st.in_backward or st.in_optimizer or act.tripped:
            if st.depth and not (act.exhaustive or st.in_backward or st.in_optimizer or act.tripped):
                return sharded.nested_call(act, module, args, kwargs)   # multi-rank default mode
            with st.nested(module if act.exhaustive else None):
                return orig_module_call(module, *args, **kwargs)
        return self._outermost(module, args, kwargs)

    @no_compile
    def _outermost(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        act = self.act
        exhaustive = act.exhaustive
        with act.suspended(not exhaustive):
            grad = torch.is_grad_enabled()
            rng = capture_rng()
            entry = None
            if grad:
                entry = Entry(act.tape, "module", None, module)
                entry.set_args(args, kwargs)
                entry.rng = rng
                entry.autocast = _state.autocast_state()
            if not exhaustive:
                act.persistent.before_module(module)
            # Default mode: inner module calls need nothing from us; the wrapper lets them
            # straight through. Exhaustive mode keeps watching to know the module path.
            # A multi-rank run checks inner modules too (sharded.nested_call): replaying a whole
            # model would run its collectives on this rank alone.
            with STATE.outermost(module, watch=exhaustive or sharded.multi_rank()), \
                    (contextlib.nullcontext() if exhaustive else compiled.kernels()):
                out = orig_module_call(module, *args, **kwargs)
            if act.tripped:
                return out
            flat = [t for t in pytree.tree_leaves(out) if isinstance(t, _Tensor)]
            if not exhaustive and not all_finite(flat):
                with act.suspended():
                    self._nonfinite(module, args, kwargs, rng, [sharded.local(t) for t in flat])
            if not exhaustive and not act.tripped:
                # buffers the call wrote (running statistics); exhaustive mode saw each write
                act.persistent.after_module(module, args, kwargs, rng)
            if entry is not None and not act.tripped and any(t.requires_grad for t in flat):
                entry.frame = user_frame()
                entry.set_outputs(flat)
                act.tape.add(entry)
            return out

    def _nonfinite(self, module, args, kwargs, rng, flat) -> None:
        act = self.act
        arg_tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, _Tensor)]
        params = list(module.parameters()) + list(module.buffers())
        outs = [t for t in flat if checkable(t)]
        verdict = judge(arg_tensors + params, iter_scalars((args, kwargs)), outs, act.check)
        if verdict is None:
            return
        if verdict.kind == "inf" and module in self.deliberate_inf:
            return
        frame = user_frame()
        result = replay_module_forward(act, module, args, kwargs, rng, frame)
        on_compiled = compiled.forward_notes(module, act.naming.root_name(module), result)
        result = compiled.add_notes(result, on_compiled)
        if isinstance(result, Reproduced):
            act.finish(result.report)
            return
        if verdict.kind == "inf" and isinstance(result, NotReproduced) and not on_compiled:
            # The op-level replay saw only deliberate infinities (a -inf mask made inside the
            # module): remember, so this module's -inf outputs are not replayed again. (Not
            # for compiled code: there the kernels, not the replay, made the value.)
            self.deliberate_inf.add(module)
            return
        report = self._coarse_report(verdict, module, arg_tensors, flat, frame, replay_notes(result) + on_compiled)
        report = sharded.note_replay(report, getattr(result, "error", None), forward=True)
        act.finish(report)

    def _coarse_report(self, verdict, module, arg_tensors, flat, frame, notes) -> Report:
        naming = self.act.naming
        inputs = [(f"arg{i}", t) for i, t in enumerate(arg_tensors)]
        for pname, p in module.named_parameters():
            inputs.append((naming.parameter_name(module, pname), p))
        return make_report(
            phase="input" if verdict.origin == "input" else "forward", kind=verdict.kind,
            op=f"{type(module).__name__}.forward", inputs=inputs,
            outputs=[(f"out[{i}]", t) for i, t in enumerate(flat)], frame=frame,
            module=naming.root_name(module), step=self.act.step(),
            how="checked the module's output (the replay could not localise it further)", notes=notes)


class BackwardBoundary:
    """Backward passes: check the gradients once at the end, replay a non-finite pass."""

    def __init__(self, act: "Activation") -> None:
        self.act = act
        self.calls = 0
        # Exhaustive mode: a finding the live mode made during this backward pass, waiting for
        # the pass to end so that a replay of the tape can add its forward line.
        self.pending: Optional[Report] = None
        self.scaled = False  # the current pass starts from a GradScaler-scaled loss
        self.sent: list = []  # multi-rank: the collectives this pass started (collectives.watching)

    def found_live(self, report: Report) -> None:
        """The live mode found ``report`` inside a backward pass (exhaustive mode)."""
        act = self.act
        # The forward line comes from replaying the tape once the backward call returns
        # (or unwinds); warnings and records wait for it, an exception cannot.
        if act.mode == "raise" or not _state.engine_hooked():
            self.pending = report if _state.engine_hooked() else None
            act.finish(report)
        else:
            self.pending = report
            act.trip()   # stop checking; `run` reports it when the pass is complete

    @no_compile
    def run(self, orig, outputs, args: tuple, kwargs: dict) -> Any:
        act = self.act
        if act.tripped or functorch_transforms_active():
            return orig(outputs, *args, **kwargs)
        grad_tensors = args[0] if len(args) > 0 else ()
        retain_graph = bool(args[1]) if len(args) > 1 else False
        create_graph = bool(args[2]) if len(args) > 2 else False
        inputs = tuple(args[3]) if len(args) > 3 and args[3] is not None else ()
        accumulate = kwargs.get("accumulate_grad", True)
        outputs_seq = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
        roots = [t for t in outputs_seq if isinstance(t, _Tensor)]
        self.calls += 1
        act.session.count_backward()
        entries = act.tape.ancestry(roots)
        grad_entry = None
        if create_graph and not accumulate:
            grad_entry = Entry(act.tape, "grad", torch.autograd.grad)
            grad_entry.set_args((tuple(roots), tuple(t for t in inputs if isinstance(t, _Tensor))),
                                {"grad_outputs": tuple(grad_tensors), "retain_graph": True, "create_graph": True,
                                 "allow_unused": True})
            grad_entry.frame = user_frame(sys._getframe(2))
        with act.suspended():
            bad_grad_in = self._check_grad_tensors(grad_tensors)
        if bad_grad_in is not None:
            act.finish(bad_grad_in)
            return orig(outputs, *args, **kwargs)
        replayable = (entries, roots, grad_tensors, inputs, create_graph)
        # a GradScaler's loss is judged after the pass, in both modes (see scaled.py)
        self.scaled = scaled.any_scaled(roots)
        with act.suspended(not act.exhaustive or self.scaled):
            try:
                with STATE.backward(), collectives.watching(not act.exhaustive and sharded.multi_rank()) as seen:
                    result = orig(outputs, *args, **kwargs)
                self.sent = seen
                if self.pending is not None:
                    report, self.pending = self.pending, None
                    act.finish(self._enrich(report, *replayable))
                elif (self.scaled or not act.exhaustive) and not act.tripped:
                    self._sentinel(result, accumulate, *replayable)
            except NonFiniteError as err:
                if err.report is not None and err.report is self.pending:
                    self.pending = None
                    enriched = self._enrich(err.report, *replayable)
                    if enriched is not err.report:
                        act.session.replace(err.report, enriched)
                        raise NonFiniteError(enriched.format(), enriched) from None
                raise
        if grad_entry is not None and not act.tripped:
            grad_entry.set_outputs([g for g in (result or ()) if isinstance(g, _Tensor)])
            act.tape.add(grad_entry)
        if not retain_graph:
            act.tape.release(entries)
        return result

    def _sentinel(self, result, accumulate, entries, roots, grad_tensors, inputs, create_graph) -> None:
        """Default mode: are the gradients this backward produced finite? If not, replay it."""
        act = self.act
        if accumulate:
            leaves = ([t for t in inputs if isinstance(t, _Tensor)] or leaves_of(entries, act.session.params_of)
                      or _graph_leaves(roots))
            grads = [t.grad for t in leaves if t.grad is not None]
        else:
            grads = [g for g in (result or ()) if isinstance(g, _Tensor)]
        if all_finite(grads):
            return
        call = user_frame()
        result = replay_backward(act, entries, roots, grad_tensors, inputs, create_graph, call)
        modules = [(e.module, act.naming.root_name(e.module)) for e in entries if e.module is not None]
        on_compiled = compiled.backward_notes(roots, modules, result)
        result = compiled.add_notes(result, on_compiled)
        if isinstance(result, Reproduced):
            if self.scaled and scaled.scaler_overflow(result.report):
                return  # the GradScaler skips this step and lowers its scale
            act.finish(result.report)
        else:
            report = self._coarse_report(grads, call, replay_notes(result) + on_compiled)
            report = collectives.note_backward(report, self.sent)   # multi-rank: made here, or received?
            report = sharded.note_unreproduced(report, result, entries)
            act.finish(report)

    def _enrich(self, live: Report, entries, roots, grad_tensors, inputs, create_graph) -> Report:
        """Replay the tape to learn the forward line of a backward finding made live."""
        if not entries:
            return live
        call = Frame(live.call_file, live.call_line or 0, "?") if live.call_file else None
        result = replay_backward(self.act, entries, roots, grad_tensors, inputs, create_graph, call,
                                 how="live op-level check (exhaustive); forward line from a replay of the "
                                     "recorded calls")
        if isinstance(result, Reproduced) and result.report.op == live.op and result.report.node == live.node:
            return result.report
        return live

    def _check_grad_tensors(self, grad_tensors) -> Optional[Report]:
        if "nan" not in self.act.check:
            return None
        for g in grad_tensors or ():
            # backward() of a scalar passes ones_like(loss): finite by construction, not checked.
            if isinstance(g, _Tensor) and g.numel() > 1 and checkable(g) and not is_finite(g) \
                    and bool(torch.isnan(g).any()):
                call = user_frame()
                return make_report(phase="input", kind="nan", op="backward", inputs=[("gradient", g)],
                                   outputs=[], frame=call, step=self.act.step(),
                                   how="checked the gradient passed to backward()")
        return None

    def _coarse_report(self, grads, call, notes) -> Report:
        grads = [sharded.local(g) for g in grads]   # a DTensor gradient: this rank's shard
        bad = [(f"grad[{i}]", g) for i, g in enumerate(grads) if checkable(g) and not is_finite(g)]
        kind = "nan" if any(has_nan(g) for _, g in bad) else "inf"
        return make_report(phase="backward", kind=kind, op="backward", inputs=[], outputs=bad[:6], frame=None,
                           call_frame=call, step=self.act.step(),
                           how="checked the gradients after backward() (the replay could not localise it)",
                           notes=notes)


class OptimizerBoundary:
    """Optimizer steps: out of the default mode's way, remembered for blame.

    Exhaustive mode checks the step's ops one by one. The default mode does not look inside
    the step: it checks the parameters once the step is over (`persistent.PersistentChecks`)
    and reports a non-finite one as this step's doing, at the user's ``step()`` line.
    """

    def __init__(self, act: "Activation") -> None:
        self.act = act
        self.steps = 0                                   # completed steps
        self.running: Optional[torch.optim.Optimizer] = None
        self.step_frame: Optional[Frame] = None          # the user's line of the last step
        self._last: Optional[weakref.ref] = None         # the optimizer of the last step
        self._open: List[tuple] = []                     # (STATE scope, live suspension) per step

    @no_compile
    def pre(self, optimizer: torch.optim.Optimizer) -> None:
        act = self.act
        scope = STATE.optimizer_step().__enter__()
        suspension = act.suspended(not act.exhaustive).__enter__()
        self._open.append((scope, suspension))
        self.running = optimizer

    @no_compile
    def post(self, optimizer: torch.optim.Optimizer) -> None:
        opened = self._open.pop() if self._open else None
        self.running = None
        self.steps += 1
        self._last = weakref.ref(optimizer)
        self.step_frame = user_frame()
        try:
            act = self.act
            if not act.exhaustive and not act.tripped:   # exhaustive mode saw each write of the step
                act.persistent.after_step(optimizer)
        finally:
            if opened is not None:
                _leave(opened)

    def close(self) -> None:
        """Leave the steps whose post hook never ran (the step raised)."""
        self.running = None
        while self._open:
            _leave(self._open.pop())

    def context(self) -> OptimizerContext:
        last = self._last() if self._last is not None else None
        return OptimizerContext(check=self.act.check, steps=self.steps, last=last, step_frame=self.step_frame,
                                running=self.running)


def _leave(opened: tuple) -> None:
    scope, suspension = opened
    try:
        scope.__exit__(None, None, None)
    finally:
        suspension.__exit__(None, None, None)


def _graph_leaves(roots: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Leaves reached from ``roots`` by walking the autograd graph (only when the tape has none)."""
    seen = set()
    out = []
    todo = [r.grad_fn for r in roots if r.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        var = getattr(node, "variable", None)
        if isinstance(var, _Tensor):
            out.append(var)
        todo.extend(fn for fn, _ in node.next_functions)
    return out
