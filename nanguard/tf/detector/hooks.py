"""The three places nanguard listens to TensorFlow while a ``detect()`` is active.

* the op callback (``tensorflow.python.framework.op_callbacks``, the mechanism behind
  ``tf.debugging.enable_check_numerics``): called after every eager op with its values, and
  once per op while a graph is traced, where `graph.trace_op` adds the in-graph check;
* the eager gradient dispatch (the function TensorFlow's tape calls to differentiate each
  recorded op, eager or traced): wrapped so the ops of a gradient know their forward op;
* ``tf.GradientTape.gradient``: wrapped to know where the user asked for the gradient;
* a Keras optimizer's ``apply``: wrapped so that, in a traced graph, the update is checked
  once at its end (`graph.trace_update`) instead of op by op.

Each is installed on the first ``detect()`` entered and removed when the last one exits.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Dict, Optional, Sequence, Tuple

import tensorflow as tf

from nanguard.tf._compat import gradient_function, op_callbacks, pywrap_tfe
from nanguard.tf.detector import graph
from nanguard.tf.detector.build import batch_summaries, data_report, eager_report, producer_of
from nanguard.tf.detector.frames import gradient_call_name, graph_frame, layer_path, user_frame, user_stack
from nanguard.tf.detector.state import LOCAL, Backward, Session
from nanguard.tf.detector.values import all_finite, float_tensors, judge

_ORIGINAL_GRADIENT_FUNCTION = gradient_function
_ORIGINAL_TAPE_GRADIENT = tf.GradientTape.gradient
# Forward ops whose gradient TensorFlow computes from their inputs only: {(op, input ids): origin}
_BY_INPUTS: Dict[Tuple[str, Tuple[int, ...]], tuple] = {}
_KEEP_INPUTS = frozenset({"Exp", "Expm1"})  # their gradient keeps only the output; the input explains it
_LOCK = threading.Lock()
_USERS = 0


def _is_function_call(op_type: str) -> bool:
    return op_type.startswith("__inference_") or op_type in ("PartitionedCall", "StatefulPartitionedCall")


def _handed_over(op_type: str, inputs: Sequence[Any]) -> Optional[str]:
    """Where an eager op's values come from when it computes none of them itself: ``"data"``, a
    batch from a tf.data iterator (``for x, y in dataset``, ``next(iterator)``); ``"function"``,
    the outputs of a compiled function (Keras' ``fit`` hands its step's results back in an
    optional, read by ``OptionalGetValue``); None for any other op."""
    if _is_function_call(op_type):
        return "function"
    if op_type in ("IteratorGetNext", "IteratorGetNextSync"):
        return "data"
    if op_type == "OptionalGetValue" and inputs:
        producer = producer_of(inputs[0])  # the op that made the optional, tagged by `_tag`
        if producer == "IteratorGetNextAsOptional":
            return "data"
        if producer is not None and _is_function_call(producer):
            return "function"
    return None


def _tape_active() -> bool:
    return not pywrap_tfe.TFE_Py_TapeSetIsEmpty()


def _tag(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any], under_tape: bool) -> None:
    """Remember on each output which op made it (and, under a tape, the user's line)."""
    origin = (op_type, user_frame(3) if under_tape else None, layer_path() if under_tape else None,
              list(inputs) if op_type in _KEEP_INPUTS else None)
    for out in outputs:
        try:
            out._nanguard_origin = origin
        except AttributeError:
            pass
    if under_tape and inputs:
        if len(_BY_INPUTS) > 1_000_000:
            _BY_INPUTS.clear()
        _BY_INPUTS[(op_type, tuple(id(t) for t in inputs))] = origin


def on_op(op_type: str, inputs: Sequence[Any], attrs: Any, outputs: Sequence[Any],
          op_name: Optional[str] = None, graph: Any = None) -> None:
    """The op callback: check an eager op's values, or add the in-graph check of a traced op."""
    if isinstance(op_type, bytes):
        op_type = op_type.decode()  # some eager ops (tf.fill's Fill) are named in bytes
    local = LOCAL
    if local.busy:
        return None
    session = local.session
    if session is None:
        return None
    local.busy = True
    try:
        if graph is not None:
            try:
                _trace(session, op_type, inputs, outputs)
            except Exception:  # noqa: BLE001  (a check that cannot be built must not break the user's graph)
                pass
            return None
        report = _eager(session, op_type, inputs, outputs)
    finally:
        local.busy = False
    if report is not None:
        session.deliver(report)
    return None


def _trace(session: Session, op_type: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
    if LOCAL.backward is None and outputs:
        try:  # the Keras layer path, for a later gradient op of this one (graph name scopes are uniquified)
            outputs[0].op._nanguard_layer = layer_path()
        except AttributeError:
            pass
    graph.trace_op(session, op_type, inputs, outputs, LOCAL.backward)


def _eager(session: Session, op_type: str, inputs: Sequence[Any], outputs: Sequence[Any]):
    if _is_function_call(op_type):
        found = graph.poll()
        if found is not None:
            return found
    backward = LOCAL.backward
    if backward is None:
        _tag(op_type, inputs, outputs, _tape_active())
    outs = float_tensors(outputs)
    if not outs or all(all_finite(o) for o in outs):
        return None
    ins = float_tensors(inputs)
    verdict = judge(ins, outs, session.check)
    if verdict is None or (verdict.origin == "input" and backward is not None):
        return None  # in a gradient, a NaN that flows in was made (and reported) in the forward pass
    frame = user_frame(3)
    handed = _handed_over(op_type, inputs)
    if handed == "data" and verdict.kind == "nan" and not ins:
        return data_report(op_type, batch_summaries(outs), frame, layer_path(), stack=user_stack())
    report = eager_report(op_type, ins, outs, verdict.kind, verdict.origin, frame, layer_path(), backward,
                          stack=user_stack(), gradient_call=LOCAL.gradient_call,
                          gradient_call_name=LOCAL.gradient_call_name)
    if handed == "function":
        report = report.with_notes("found at the output of a compiled function that was traced before detection "
                                   "began (or by an op the default mode does not check inside it); run with "
                                   "exhaustive=True, or enter detect() before the function is first called, to "
                                   "name the op inside")
    return report


def _forward_origin(op_name: str, inputs: Any, outputs: Any, scope: Optional[str]) -> Backward:
    """The forward op a gradient function differentiates: its line, layer and inputs."""
    call = LOCAL.gradient_call
    tensors = [t for t in (outputs or ()) if t is not None] + [t for t in (inputs or ()) if t is not None]
    symbolic = tensors and not hasattr(tensors[0], "numpy")
    if symbolic:
        op = _graph_op(op_name, inputs, outputs)
        frame = graph_frame(op) if op is not None else None
        layer = getattr(op, "_nanguard_layer", None) or scope or None
        return Backward(op_name, frame, layer, [], call, LOCAL.gradient_call_name)
    origin = None
    for out in outputs or ():
        origin = getattr(out, "_nanguard_origin", None) if out is not None else None
        if origin is not None:
            break
    if origin is None and inputs:
        origin = _BY_INPUTS.get((op_name, tuple(id(t) for t in inputs)))
    frame, layer, kept = (origin[1], origin[2], origin[3]) if origin is not None else (None, None, None)
    fwd_inputs = list(inputs) if inputs else list(kept or [])
    return Backward(op_name, frame, layer, fwd_inputs, call, LOCAL.gradient_call_name)


def _graph_op(op_name: str, inputs: Any, outputs: Any) -> Any:
    for out in outputs or ():
        if out is not None:
            return out.op
    if not inputs:
        return None
    wanted = [id(t) for t in inputs]
    for candidate in inputs[0].consumers():
        if candidate.type == op_name and [id(t) for t in candidate.inputs] == wanted:
            return candidate
    for candidate in inputs[0].consumers():
        if candidate.type == op_name:
            return candidate
    return None


def _gradient_function(op_name: str, attr_tuple: Any, num_inputs: int, inputs: Any, outputs: Any,
                       out_grads: Any, skip_input_indices: Any, forward_pass_name_scope: Any) -> Any:
    local = LOCAL
    if local.busy or local.session is None:
        return _ORIGINAL_GRADIENT_FUNCTION(op_name, attr_tuple, num_inputs, inputs, outputs, out_grads,
                                           skip_input_indices, forward_pass_name_scope)
    previous = local.backward
    try:
        local.backward = _forward_origin(op_name, inputs, outputs, forward_pass_name_scope)
    except Exception:  # noqa: BLE001  (without an origin the gradient ops are still checked)
        local.backward = Backward(op_name, None, None, [], local.gradient_call, local.gradient_call_name)
    try:
        return _ORIGINAL_GRADIENT_FUNCTION(op_name, attr_tuple, num_inputs, inputs, outputs, out_grads,
                                           skip_input_indices, forward_pass_name_scope)
    finally:
        local.backward = previous


def _tape_gradient(self: Any, target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
    local = LOCAL
    if local.session is None or local.busy:
        return _ORIGINAL_TAPE_GRADIENT(self, target, sources, *args, **kwargs)
    previous = local.gradient_call, local.gradient_call_name
    local.gradient_call = user_frame(2)
    local.gradient_call_name = gradient_call_name(sys._getframe(1))
    try:
        return _ORIGINAL_TAPE_GRADIENT(self, target, sources, *args, **kwargs)
    finally:
        local.gradient_call, local.gradient_call_name = previous
        if not _tape_active():
            _BY_INPUTS.clear()


_ORIGINAL_APPLY: Any = None  # Keras's BaseOptimizer.apply, once install() has replaced it


def _keras_optimizer_class() -> Any:
    """Keras 3's optimizer base class, if the program has imported Keras (never imported here)."""
    if "keras" not in sys.modules:
        return None  # ops inside an update are then checked one by one, as any others
    try:
        from keras.src.optimizers.base_optimizer import BaseOptimizer
    except Exception:  # noqa: BLE001  (another Keras layout: the same fallback)
        return None
    return BaseOptimizer


def _optimizer_apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
    local = LOCAL
    session = local.session
    if session is None or local.busy or local.optimizer is not None:
        return _ORIGINAL_APPLY(self, grads, trainable_variables)  # an inner (loss-scaled) one too
    local.optimizer = self
    try:
        result = _ORIGINAL_APPLY(self, grads, trainable_variables)
    finally:
        local.optimizer = None
    if tf.inside_function() and not session.exhaustive:
        variables = trainable_variables if trainable_variables is not None else self._trainable_variables
        local.busy = True
        try:
            graph.trace_update(session, self, list(grads), list(variables))
        except Exception:  # noqa: BLE001  (a check that cannot be built must not break the user's graph)
            pass
        finally:
            local.busy = False
    return result


def install() -> None:
    """Listen on this thread (the op callback is per thread; the rest is installed once per process).

    Called when the first ``detect()`` of a thread is entered; `uninstall` when its last exits."""
    global _USERS, _ORIGINAL_APPLY
    op_callbacks.add_op_callback(on_op)
    with _LOCK:
        _USERS += 1
        if _USERS == 1:
            pywrap_tfe.TFE_Py_RegisterGradientFunction(_gradient_function)
            tf.GradientTape.gradient = _tape_gradient
            base = _keras_optimizer_class()
            if base is not None:
                _ORIGINAL_APPLY = _ORIGINAL_APPLY or base.apply
                base.apply = _optimizer_apply


def uninstall() -> None:
    global _USERS
    try:
        op_callbacks.remove_op_callback(on_op)
    except KeyError:
        pass
    with _LOCK:
        _USERS -= 1
        if _USERS == 0:
            pywrap_tfe.TFE_Py_RegisterGradientFunction(_ORIGINAL_GRADIENT_FUNCTION)
            tf.GradientTape.gradient = _ORIGINAL_TAPE_GRADIENT
            base = _keras_optimizer_class()
            if base is not None and _ORIGINAL_APPLY is not None:
                base.apply = _ORIGINAL_APPLY
            _BY_INPUTS.clear()


__all__ = ["install", "on_op", "uninstall"]
