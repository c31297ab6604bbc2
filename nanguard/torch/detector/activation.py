"""One active detection on one thread: the coarse checks and what happens on a finding.

`Activation` owns the live op-level mode (`live.py`), the tape (`tape.py`) and the counters
of one ``with nanguard.detect():``. The global hooks in `_state.py` call into it at every
outermost module call (`module_call`), backward pass (`run_backward`) and optimizer step
(`optimizer_pre`/`optimizer_post`); a finding is localised by `replay.py` and delivered by
`finish` (raise, warn or record).
"""

from __future__ import annotations

import math
import sys
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import torch
from torch.utils import _pytree as pytree

from nanguard.errors import NonFiniteError
from nanguard.torch.detector import _state
from nanguard.torch.detector._state import STATE, capture_rng, no_compile, orig_module_call
from nanguard.torch.detector.aten import mutated_ids, uses_rng, written_tensors
from nanguard.torch.detector.build import make_report, named_args, output_pairs, split_args
from nanguard.torch.detector.explain import optimizer_explanation
from nanguard.torch.detector.frames import Frame, torch_api, user_frame, user_stack
from nanguard.torch.detector.live import LiveMode
from nanguard.torch.detector.replay import replay_backward, replay_module_forward
from nanguard.core.report import NonFiniteWarning, Report
from nanguard.torch.detector.tape import Entry, Tape, leaves_of
from nanguard.torch.detector.values import checkable, fast_finite, has_nan, is_finite, iter_scalars, judge

if TYPE_CHECKING:
    from nanguard.torch.detector.context import detect

_Tensor = torch.Tensor
_strided = torch.strided
_current_node = torch._C._current_autograd_node
_stack_len = torch._C._len_torch_dispatch_stack
_stack_at = torch._C._get_dispatch_stack_at
_stack_pop = torch._C._pop_torch_dispatch_stack
_stack_push = torch._C._push_on_torch_dispatch_stack


class Activation:
    """One ``with detect():`` on one thread: its live mode, tape and counters."""

    def __init__(self, det: detect) -> None:
        self.det = det
        self.check = det.check
        self.exhaustive = det.exhaustive
        self.mode = det.mode
        self.tape = Tape()
        self.live = LiveMode(self)
        self.live_on = False            # pushed on the dispatch stack by start()
        self.tripped = False            # a finding was made; stop checking
        self._reported = False
        self.replaying = False
        self.opt_steps = 0
        self.backward_calls = 0
        self.deliberate_inf: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()
        self._opt_suspended: List[bool] = []
        self._last_optimizer: Optional[weakref.ref] = None
        self._current_optimizer: Optional[torch.optim.Optimizer] = None
        self._last_step_frame: Optional[Frame] = None
        self._live_backward: Optional[Report] = None   # exhaustive: awaiting a forward line
        self._roots: Dict[int, tuple] = {}
        self._outer_suspended = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        _state.acquire()
        st = STATE
        if st.stack:
            self._outer_suspended = st.stack[-1].suspend_live()
        st.stack.append(self)
        self._watch_before = st.watch
        st.watch = True
        self.live.__enter__()
        self.live_on = True

    def stop(self) -> None:
        st = STATE
        try:
            self._remove_live()
        finally:
            if self in st.stack:
                st.stack.remove(self)
            if st.stack and self._outer_suspended:
                st.stack[-1].resume_live(True)
            self.tape.clear()
            st.depth = 0
            st.modules = []
            st.watch = self._watch_before if st.stack else st.replay is not None
            _state.release()

    def _remove_live(self) -> None:
        if not self.live_on:
            return
        self.live_on = False
        n = _stack_len()
        idx = next((i for i in range(n - 1, -1, -1) if _stack_at(i) is self.live), None)
        above = []
        if idx is None:
            _stack_push(self.live)   # suspended when the context ended: let __exit__ pop it
        else:
            for _ in range(n - 1 - idx):
                above.append(_stack_pop(None))
        try:
            self.live.__exit__(None, None, None)
        finally:
            for m in reversed(above):
                _stack_push(m)

    def suspend_live(self) -> bool:
        """Take the live mode off the dispatch stack if it is on top; True when it was."""
        if not self.live_on:
            return False
        n = _stack_len()
        if n and _stack_at(n - 1) is self.live:
            _stack_pop(None)
            return True
        return False

    def resume_live(self, suspended: bool) -> None:
        if suspended:
            _stack_push(self.live)

    def quiet(self) -> "_Quiet":
        """Our own checks must not pass through our own live mode (nor be judged by it)."""
        return _Quiet(self)

    def maybe_retire(self) -> None:
        """After a finding in warn/record mode, take the live mode away for good (cheap again).

        Called only from the hooks' outermost level: a permanent pop inside a function that
        TorchDynamo wraps (our `no_compile` hooks) would be undone by its dispatch-key guard.
        """
        st = STATE
        if (self.tripped and self.live_on and st.replay is None and not st.depth and not st.in_backward
                and not st.in_optimizer):
            n = _stack_len()
            if n and _stack_at(n - 1) is self.live:
                self._remove_live()

    # ------------------------------------------------------------------ helpers
    def step(self) -> Optional[int]:
        """1-based training step, when the program looks like a training loop."""
        if self.opt_steps or self.backward_calls or STATE.in_backward:
            return self.opt_steps + 1
        return None

    def root_name(self, root: torch.nn.Module) -> str:
        given = self.det._modules.get(id(root))
        if given is not None and given[0]() is root and given[1]:
            return given[1]
        cached = self._roots.get(id(root))
        if cached is not None and cached[0]() is root:
            return cached[1]
        name = _guess_name(root) or type(root).__name__
        try:
            self._roots[id(root)] = (weakref.ref(root), name)
        except TypeError:
            pass
        return name

    def params_of(self, module: torch.nn.Module) -> List[_Tensor]:
        """``list(module.parameters())``, cached: walking a large model costs ~100 µs per step.

        Refreshed every 64 backward passes so that layers added to a model while detection is
        on are picked up (their gradients are still checked through the replay in between).
        """
        cache = self.det._params
        hit = cache.get(id(module))
        stamp = self.det._backward_count
        if hit is not None and hit[0]() is module and stamp - hit[2] < 64:
            return hit[1]
        params = list(module.parameters())
        try:
            cache[id(module)] = (weakref.ref(module), params, stamp)
        except TypeError:
            pass
        return params

    def _named(self, root: torch.nn.Module, target: torch.nn.Module) -> str:
        prefix = self.root_name(root)
        if target is root:
            return prefix
        for name, m in root.named_modules():
            if m is target:
                name = ".".join(p for p in name.split(".") if p != "_orig_mod")
                return f"{prefix}.{name}" if name else prefix
        return type(target).__name__

    def module_path_live(self) -> Optional[str]:
        mods = STATE.modules
        if not mods:
            return None
        return self._named(mods[0], mods[-1])

    def finish(self, report: Report) -> None:
        """Keep the first report and act on it according to ``mode``; stop checking."""
        self.tripped = True
        if self._reported:
            return
        self._reported = True
        self.det._keep(report)
        if self.mode == "raise":
            raise NonFiniteError(report.format(), report)
        if self.mode == "warn":
            warnings.warn(NonFiniteWarning(report.format(color=False)), stacklevel=_user_stacklevel())

    # ------------------------------------------------------------------ top-level ops (tape)
    def begin_op(self, func, args, kwargs) -> Optional[Entry]:
        if _current_node() is not None:
            return None  # an op run by a backward pass (e.g. in a hook)
        needs = False
        for a in args:
            if type(a) is _Tensor or isinstance(a, _Tensor):
                if a.requires_grad:
                    needs = True
                    break
            elif isinstance(a, (list, tuple)):
                if any(isinstance(t, _Tensor) and t.requires_grad for t in a):
                    needs = True
                    break
        if not needs:
            for v in kwargs.values():
                if isinstance(v, _Tensor) and v.requires_grad:
                    needs = True
                    break
        if not needs:
            return None
        e = Entry(self.tape, "op", func)
        e.set_args(args, kwargs, mutated_ids(func, args, kwargs))
        if uses_rng(func):
            e.rng = capture_rng()
        e.frame = user_frame(sys._getframe(2))
        return e

    def finish_op(self, e: Entry, out: Any) -> None:
        flat = [o for o in pytree.tree_leaves(out) if isinstance(o, _Tensor)]
        # An in-place op on a view returns that view: remember the base it changed.
        mutated_views = [(slot, o) for slot in e.views for o in flat if id(o) == e.in_keys[slot][0]]
        e.set_outputs(flat, mutated_views)
        self.tape.add(e)

    # ------------------------------------------------------------------ live findings
    def live_nonfinite(self, func, args, kwargs, out) -> None:
        pairs = named_args(func, args, kwargs)
        tensors, scalars, dim = split_args(pairs)
        outs = output_pairs(out)
        # An in-place op's target already holds the result: its old value is unknown, so it is
        # not evidence that the NaN came in from outside.
        written_list = written_tensors(func, args, kwargs)
        written = {id(t) for t in written_list}
        outs = outs + [(f"{n} (written)", t) for n, t in tensors
                       if id(t) in written and all(t is not o for _, o in outs)]
        tensors = [(n, t) for n, t in tensors if id(t) not in written]   # their old values are gone
        verdict = judge([t for _, t in tensors], [s.value for s in scalars],
                        [o for _, o in outs if checkable(o)], self.check)
        if verdict is None:
            return
        node = _current_node()
        frame_obj = sys._getframe(2)
        if verdict.origin == "input":
            phase = "input"
        elif node is not None:
            phase = "backward"
        else:
            phase = "optimizer" if STATE.in_optimizer else "forward"
        here = user_frame(frame_obj)
        if node is not None:
            location, call_frame, module = (here if phase == "input" else None), here, None
            notes = ["found by the live op-level check during backward()"]
        else:
            location, call_frame, module = here, None, self.module_path_live()
            notes = []
        report = make_report(
            phase=phase, kind=verdict.kind, op=str(func), inputs=tensors, outputs=outs, scalars=scalars,
            frame=location, module=module, torch_function=torch_api(frame_obj) if node is None else None,
            node=node.name() if node is not None else None, call_frame=call_frame,
            stack=user_stack(frame_obj) if node is None else [], step=self.step(),
            how="live op-level check" + (" (exhaustive)" if self.exhaustive else " of top-level code"),
            notes=notes, dim=dim)
        if phase in ("input", "forward"):
            self.blame_optimizer(report, tensors, {})
        if phase == "optimizer" and self._current_optimizer is not None:
            optimizer = self._current_optimizer
            why, fix = optimizer_explanation(optimizer, verdict.kind)
            report.explanation = f"{report.explanation} {why[0].upper()}{why[1:]}"
            report.suggestion = fix
            report.torch_function = f"torch.optim.{type(optimizer).__name__}.step"
            report.step = self.opt_steps + 1
        if phase == "backward":
            # The forward line comes from replaying the tape once the backward call returns
            # (or unwinds); warnings and records wait for it, an exception cannot.
            if self.mode == "raise" or not _state.engine_hooked():
                self._live_backward = report if _state.engine_hooked() else None
                self.finish(report)
            else:
                self._live_backward = report
                self.tripped = True   # stop checking; run_backward reports it when complete
            return
        self.finish(report)

    # ------------------------------------------------------------------ modules
    def module_call(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        st = STATE
        if st.depth or st.in_backward or st.in_optimizer or self.replaying or self.tripped:
            exhaustive = self.exhaustive
            st.depth += 1
            if exhaustive:
                st.modules.append(module)
            try:
                return orig_module_call(module, *args, **kwargs)
            finally:
                st.depth -= 1
                if exhaustive:
                    st.modules.pop()
        return self._outermost(module, args, kwargs)

    @no_compile
    def _outermost(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        st = STATE
        suspended = False if self.exhaustive else self.suspend_live()
        try:
            grad = torch.is_grad_enabled()
            rng = capture_rng()
            entry = None
            if grad:
                entry = Entry(self.tape, "module", None, module)
                entry.set_args(args, kwargs)
                entry.rng = rng
                entry.autocast = _state.autocast_state()
            st.depth = 1
            st.modules.append(module)
            # Default mode: inner module calls need nothing from us; the wrapper lets them
            # straight through. Exhaustive mode keeps watching to know the module path.
            st.watch = self.exhaustive
            try:
                out = orig_module_call(module, *args, **kwargs)
            finally:
                st.depth = 0
                st.modules.pop()
                st.watch = True
            if self.tripped:
                return out
            flat = [t for t in pytree.tree_leaves(out) if isinstance(t, _Tensor)]
            if not self.exhaustive and not _all_finite(flat):
                with self.quiet():
                    self._module_nonfinite(module, args, kwargs, rng, flat)
            if entry is not None and not self.tripped and any(t.requires_grad for t in flat):
                entry.frame = user_frame()
                entry.set_outputs(flat)
                self.tape.add(entry)
            return out
        finally:
            self.resume_live(suspended)

    def _module_nonfinite(self, module, args, kwargs, rng, flat) -> None:
        arg_tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, _Tensor)]
        params = list(module.parameters()) + list(module.buffers())
        outs = [t for t in flat if checkable(t)]
        verdict = judge(arg_tensors + params, iter_scalars((args, kwargs)), outs, self.check)
        if verdict is None:
            return
        if verdict.kind == "inf" and module in self.deliberate_inf:
            return
        frame = user_frame()
        report, notes = replay_module_forward(self, module, args, kwargs, rng, frame)
        if report is None:
            if verdict.kind == "inf" and notes == ["the replay did not reproduce the non-finite value"]:
                # The op-level replay saw only deliberate infinities (a -inf mask made inside
                # the module): remember, so this module's -inf outputs are not replayed again.
                self.deliberate_inf.add(module)
                return
            report = self._coarse_report(verdict, module, arg_tensors, params, flat, frame, notes)
        self.finish(report)

    def _coarse_report(self, verdict, module, arg_tensors, params, flat, frame, notes) -> Report:
        name = self.root_name(module)
        inputs = [(f"arg{i}", t) for i, t in enumerate(arg_tensors)]
        for pname, p in module.named_parameters():
            inputs.append((f"{name}.{pname}", p))
        return make_report(
            phase="input" if verdict.origin == "input" else "forward", kind=verdict.kind,
            op=f"{type(module).__name__}.forward", inputs=inputs,
            outputs=[(f"out[{i}]", t) for i, t in enumerate(flat)], frame=frame, module=name,
            step=self.step(), how="checked the module's output (the replay could not localise it further)",
            notes=notes)

    # ------------------------------------------------------------------ backward
    @no_compile
    def run_backward(self, orig, outputs, args: tuple, kwargs: dict) -> Any:
        if self.tripped or self.replaying or torch._C._are_functorch_transforms_active():
            return orig(outputs, *args, **kwargs)
        grad_tensors = args[0] if len(args) > 0 else ()
        retain_graph = bool(args[1]) if len(args) > 1 else False
        create_graph = bool(args[2]) if len(args) > 2 else False
        inputs = tuple(args[3]) if len(args) > 3 and args[3] is not None else ()
        accumulate = kwargs.get("accumulate_grad", True)
        outputs_seq = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
        roots = [t for t in outputs_seq if isinstance(t, _Tensor)]
        self.backward_calls += 1
        self.det._backward_count += 1
        st = STATE
        entries = self.tape.ancestry(roots)
        grad_entry = None
        if create_graph and not accumulate:
            grad_entry = Entry(self.tape, "grad", torch.autograd.grad)
            grad_entry.set_args((tuple(roots), tuple(t for t in inputs if isinstance(t, _Tensor))),
                                {"grad_outputs": tuple(grad_tensors), "retain_graph": True, "create_graph": True,
                                 "allow_unused": True})
            grad_entry.frame = user_frame(sys._getframe(2))
        with self.quiet():
            bad_grad_in = self._check_grad_tensors(grad_tensors, roots)
        if bad_grad_in is not None:
            self.finish(bad_grad_in)
            return orig(outputs, *args, **kwargs)
        suspended = False if self.exhaustive else self.suspend_live()
        try:
            st.in_backward += 1
            try:
                result = orig(outputs, *args, **kwargs)
            finally:
                st.in_backward -= 1
            if self._live_backward is not None:
                report, self._live_backward = self._live_backward, None
                self.tripped = False  # let finish() act on it now that it is complete
                self.finish(self._enrich(report, entries, roots, grad_tensors, inputs, create_graph))
            elif not self.exhaustive and not self.tripped:
                self._sentinel(result, accumulate, inputs, entries, roots, grad_tensors, create_graph)
        except NonFiniteError as err:
            if err.report is not None and err.report is self._live_backward:
                self._live_backward = None
                enriched = self._enrich(err.report, entries, roots, grad_tensors, inputs, create_graph)
                if enriched is not err.report:
                    with self.det._lock:
                        self.det.report = enriched
                    raise NonFiniteError(enriched.format(), enriched) from None
            raise
        finally:
            self.resume_live(suspended)
        if grad_entry is not None and not self.tripped:
            grad_entry.set_outputs([g for g in (result or ()) if isinstance(g, _Tensor)])
            self.tape.add(grad_entry)
        if not retain_graph:
            self.tape.release(entries)
        return result

    def _sentinel(self, result, accumulate, inputs, entries, roots, grad_tensors, create_graph) -> None:
        """Default mode: are the gradients this backward produced finite? If not, replay it."""
        if accumulate:
            leaves = ([t for t in inputs if isinstance(t, _Tensor)] or leaves_of(entries, self.params_of)
                      or _graph_leaves(roots))
            grads = [t.grad for t in leaves if t.grad is not None]
        else:
            grads = [g for g in (result or ()) if isinstance(g, _Tensor)]
        if _all_finite(grads):
            return
        call = user_frame()
        report, notes = replay_backward(self, entries, roots, grad_tensors, inputs, create_graph, call)
        if report is None:
            report = self._coarse_backward_report(grads, call, notes)
        self.finish(report)

    def _enrich(self, live: Report, entries, roots, grad_tensors, inputs, create_graph) -> Report:
        """Replay the tape to learn the forward line of a backward finding made live."""
        if not entries:
            return live
        call = Frame(live.call_file, live.call_line or 0, "?") if live.call_file else None
        report, _ = replay_backward(self, entries, roots, grad_tensors, inputs, create_graph, call)
        if report is not None and report.op == live.op and report.node == live.node:
            report.how = "live op-level check (exhaustive); forward line from a replay of the recorded calls"
            return report
        return live

    def _check_grad_tensors(self, grad_tensors, roots) -> Optional[Report]:
        if "nan" not in self.check:
            return None
        for g in grad_tensors or ():
            # backward() of a scalar passes ones_like(loss): finite by construction, not checked.
            if isinstance(g, _Tensor) and g.numel() > 1 and checkable(g) and not is_finite(g) \
                    and bool(torch.isnan(g).any()):
                call = user_frame()
                return make_report(phase="input", kind="nan", op="backward", inputs=[("gradient", g)],
                                   outputs=[], frame=call, step=self.step(),
                                   how="checked the gradient passed to backward()")
        return None

    def _coarse_backward_report(self, grads, call, notes) -> Report:
        bad = [(f"grad[{i}]", g) for i, g in enumerate(grads) if checkable(g) and not is_finite(g)]
        kind = "nan" if any(bool(torch.isnan(g).any()) for _, g in bad) else "inf"
        return make_report(phase="backward", kind=kind, op="backward", inputs=[], outputs=bad[:6], frame=None,
                           call_frame=call, step=self.step(),
                           how="checked the gradients after backward() (the replay could not localise it)",
                           notes=notes)

    # ------------------------------------------------------------------ optimizer
    @no_compile
    def optimizer_pre(self, optimizer: torch.optim.Optimizer) -> None:
        STATE.in_optimizer += 1
        self._current_optimizer = optimizer
        self._opt_suspended.append(False if self.exhaustive else self.suspend_live())

    @no_compile
    def optimizer_post(self, optimizer: torch.optim.Optimizer) -> None:
        """Exhaustive mode checked the step's ops one by one. The default mode does not look
        inside the step: a parameter it made NaN is caught by the next forward (the module's
        output check), and `blame_optimizer` then names this step as the source."""
        st = STATE
        st.in_optimizer = max(0, st.in_optimizer - 1)
        self._current_optimizer = None
        self.opt_steps += 1
        self._last_optimizer = weakref.ref(optimizer)
        self._last_step_frame = user_frame()
        self.resume_live(self._opt_suspended.pop() if self._opt_suspended else False)

    def blame_optimizer(self, report: Report, tensors: Sequence[tuple], originals: Dict[int, _Tensor]) -> None:
        """Name the optimizer step when a finding's input is a non-finite parameter.

        Parameters are leaves: no forward op writes them, so a NaN/Inf in one comes from the
        optimizer step (or code outside the checked program, such as loading weights). The
        default mode does not look inside the step; it learns of it here, at the first op that
        uses the parameter, and reports the step (``phase="optimizer"``) at its line.
        """
        if report.phase not in ("input", "forward") or self._last_optimizer is None:
            return
        optimizer = self._last_optimizer()
        if optimizer is None:
            return
        params = {id(p) for g in optimizer.param_groups for p in g["params"]}
        hits = []
        kinds = set()
        for name, t in tensors:
            base = t._base if t._base is not None else t          # linear passes weight.t()
            p = originals.get(id(base), base)                     # a replay's alias -> the parameter
            if id(p) in params and not is_finite(t):
                hits.append(name)
                kinds.add("nan" if has_nan(t) else "inf")
        if not hits:
            return
        kind = "nan" if "nan" in kinds else "inf"
        opt = type(optimizer).__name__
        if kind not in self.check:
            report.notes.append(f"{', '.join(hits)} held {kind} after {opt}.step (step {self.opt_steps})")
            return
        first = f"{report.op} at {report.file}:{report.line}" if report.file else report.op
        if report.module:
            first += f" (module {report.module})"
        report.module = None
        report.phase = "optimizer"
        report.kind = kind
        report.op = f"{opt}.step"
        report.torch_function = f"torch.optim.{opt}.step"
        report.node = None
        report.explanation, report.suggestion = optimizer_explanation(optimizer, kind)
        report.message = (f"{opt}.step (step {self.opt_steps}) left {'NaN' if kind == 'nan' else 'Inf'} in "
                          f"{', '.join(hits)}; first used by {first}")
        report.notes.append(f"the parameter was first used by {first}")
        report.step = self.opt_steps
        frame = self._last_step_frame
        if frame is not None:
            report.file, report.line, report.function, report.code = frame.file, frame.line, frame.function, frame.code


class _Quiet:
    __slots__ = ("act", "suspended")

    def __init__(self, act: Activation) -> None:
        self.act = act
        self.suspended = False

    def __enter__(self) -> None:
        self.suspended = self.act.suspend_live()

    def __exit__(self, *exc: Any) -> None:
        self.act.resume_live(self.suspended)


_set_grad = torch._C._set_grad_enabled


def _all_finite(tensors: Sequence[torch.Tensor]) -> bool:
    """Every tensor finite? One reduction each; on an accelerator one host sync per device."""
    by_device: Dict[Any, List[torch.Tensor]] = {}
    grad_was = torch.is_grad_enabled()
    _set_grad(False)   # the reductions must not join the graph (cheaper than a no_grad object)
    try:
        for t in tensors:
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


def _guess_name(obj: Any) -> Optional[str]:
    """The user's variable name for ``obj`` (``model``, ``self.encoder``) from the live frames."""
    f = sys._getframe(1)
    from nanguard.torch.detector.frames import is_internal
    depth = 0
    while f is not None and depth < 40:
        depth += 1
        if not is_internal(f.f_code.co_filename):
            for scope in (f.f_locals, f.f_globals):
                for name, value in list(scope.items()):
                    if value is obj and not name.startswith("_") and name not in ("self", "cls"):
                        return name
            me = f.f_locals.get("self")
            if me is not None and me is not obj:
                for name, value in list(getattr(me, "__dict__", {}).items()):
                    if value is obj:
                        return f"self.{name}"
                mods = getattr(me, "_modules", None)
                if isinstance(mods, dict):
                    for name, value in mods.items():
                        if value is obj:
                            return f"self.{name}"
        f = f.f_back
    return None


def _user_stacklevel() -> int:
    """warnings.warn stacklevel that points at the innermost user frame."""
    f = sys._getframe(2)
    from nanguard.torch.detector.frames import is_internal
    level = 2
    while f is not None and is_internal(f.f_code.co_filename):
        f = f.f_back
        level += 1
    return level
