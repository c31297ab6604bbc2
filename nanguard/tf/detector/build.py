"""The report of a TensorFlow finding: the op, the user's line, the layer, the tensors, why and the fix."""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from nanguard.core.dtypes import exp_limit
from nanguard.core.location import Frame
from nanguard.core.report import Report, where
from nanguard.core.report_builder import build_report
from nanguard.core.summary import TensorSummary
from nanguard.tf.detector.explain import Evidence, explain, input_words, update_words
from nanguard.tf.detector.values import as_array, is_float, summarize


def input_names(op_type: str, count: int) -> List[str]:
    """The op's argument names (``x``, ``y`` for RealDiv) from its registered definition."""
    names: List[str] = []
    try:
        from nanguard.tf._compat import op_def_registry
        op_def = op_def_registry.get(op_type)
        names = [arg.name for arg in op_def.input_arg] if op_def is not None else []
    except Exception:  # noqa: BLE001  (a function or an unregistered op: positional names)
        names = []
    names = names[:count]
    return names + [f"input{i}" for i in range(len(names), count)]


def _summaries(op_type: str, tensors: Sequence[Any], role: str) -> List[TensorSummary]:
    names = input_names(op_type, len(tensors)) if role != "output" else \
        (["out"] if len(tensors) == 1 else [f"out{i}" for i in range(len(tensors))])
    return [summarize(t, name, role) for t, name in zip(tensors, names) if t is not None and is_float(t)]


def _diagonal_zeros(t: Any) -> Optional[int]:
    if t is None or not is_float(t):
        return None
    if len(t.shape) < 2 or t.shape[-1] != t.shape[-2]:
        return 0
    return int((np.diagonal(as_array(t), axis1=-2, axis2=-1) == 0).sum())


def producer_of(t: Any) -> Optional[str]:
    """The op type that made ``t``: the origin nanguard tagged on an eager tensor, or a graph tensor's op."""
    origin = getattr(t, "_nanguard_origin", None)
    if origin is not None:
        return origin[0]
    op = getattr(t, "op", None)
    try:
        return op.type if op is not None else None
    except Exception:  # noqa: BLE001  (eager tensors have no op)
        return None


def _exp_over(ev: Evidence, first: Any) -> None:
    if ev.op in ("Exp", "Expm1") and first is not None and is_float(first):
        limit = exp_limit(first.dtype.name)
        ev.over = int((as_array(first) > limit).sum())


_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def api_spelling(op_type: str, frame: Optional[Frame]) -> str:
    """The call on the user's line that made ``op_type``, as written (``tf.math.log`` for Log,
    ``tf.nn.softplus`` for Softplus); ``""`` for an operator (``x / y``) or a spelling that does
    not carry the op's name (``tf.linalg.inv`` for MatrixInverse)."""
    code = frame.code if frame is not None else ""
    want = op_type.lower()
    for name in _CALL.findall(code):
        if name.rsplit(".", 1)[-1].replace("_", "").lower() == want:
            return name
    return ""


def eager_report(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any], kind: str, origin: str,
                 frame: Optional[Frame], layer: Optional[str], backward: Any = None,
                 stack: Optional[List[Frame]] = None, gradient_call: Optional[Frame] = None,
                 gradient_call_name: Optional[str] = None) -> Report:
    """A finding made by eager values still at hand (exact summaries)."""
    ins = _summaries(op_type, inputs, "input")
    outs = _summaries(op_type, outputs, "output")
    if origin == "input":
        bad = next((s for s in ins if s.nan), ins[0] if ins else None)
        why, fix = input_words(bad.name if bad else "?", bad.nan if bad else 0, bad.numel if bad else 0)
        return build_report(framework="tf", phase="input", kind=kind, op=op_type, api=api_spelling(op_type, frame),
                            module=layer, where=frame, inputs=ins, outputs=outs, explanation=why, suggestion=fix,
                            stack=stack or ())
    if backward is None:
        ev = Evidence(op=op_type, phase="forward", kind=kind, inputs=ins, outputs=outs,
                      producer=producer_of(inputs[0]) if inputs else None,
                      diagonal_zeros=_diagonal_zeros(inputs[0]) if inputs else 0)
        _exp_over(ev, inputs[0] if inputs else None)
        why, fix = explain(ev)
        return build_report(framework="tf", phase="forward", kind=kind, op=op_type, api=api_spelling(op_type, frame),
                            module=layer, where=frame, inputs=ins, outputs=outs, explanation=why, suggestion=fix,
                            stack=stack or ())
    fwd_ins = _summaries(backward.op, backward.inputs, "forward input")
    first = backward.inputs[0] if backward.inputs else (inputs[0] if inputs else None)
    # without the forward inputs (TensorFlow keeps only what the gradient needs), the gradient
    # kernel's own inputs (sqrt's output y for SqrtGrad) carry the same zeros
    ev = Evidence(op=backward.op, phase="backward", kind=kind, inputs=fwd_ins or ins, outputs=outs,
                  producer=producer_of(first) if first is not None else None,
                  diagonal_zeros=_diagonal_zeros(first))
    _exp_over(ev, first)
    why, fix = explain(ev)
    call = backward.call or gradient_call
    call_name = ((backward.call_name if backward.call is not None else gradient_call_name) or "tape.gradient()") \
        if call is not None else None
    return build_report(framework="tf", phase="backward", kind=kind, op=op_type, fn=backward.op,
                        api=api_spelling(backward.op, backward.frame), node=f"{backward.op} gradient",
                        module=backward.layer, where=backward.frame, forward_op=backward.op, call=call,
                        call_name=call_name, inputs=ins, outputs=outs, forward_inputs=fwd_ins, explanation=why,
                        suggestion=fix, stack=stack or ())


def data_report(op_type: str, batch: List[TensorSummary], frame: Optional[Frame], layer: Optional[str],
                stack: Optional[List[Frame]] = None, how: str = "") -> Report:
    """NaN in the batch a tf.data iterator returned: it came with the data (phase ``input``),
    at the line that fetched the batch. ``batch`` summarises its floating components."""
    bad = next((s for s in batch if s.nan), batch[0] if batch else None)
    why, fix = input_words(bad.name if bad else "batch", bad.nan if bad else 0, bad.numel if bad else 0,
                           data=True)
    return build_report(framework="tf", phase="input", kind="nan", op=op_type, api="", module=layer, where=frame,
                        outputs=batch, explanation=why, suggestion=fix, stack=stack or (), how=how,
                        message=f"NaN arrived with the data: the batch the tf.data iterator ({op_type}) "
                                f"returned at {where(frame)} held NaN")


def batch_summaries(tensors: Sequence[Any]) -> List[TensorSummary]:
    """Exact summaries of the floating components of an eager batch, named as `data_report` names them."""
    floats = [t for t in tensors if t is not None and is_float(t)]
    return [summarize(t, f"batch[{i}]" if len(floats) > 1 else "batch", "output") for i, t in enumerate(floats)]


def update_report(name: str, optimizer: Any, path: Optional[str], variable: Any, kind: str,
                  frame: Optional[Frame]) -> Report:
    """An optimizer's update made a variable non-finite from finite gradients (a graph's update check).

    The variable is summarised as it is now, after the update that wrote it.
    """
    outs = [summarize(tf.convert_to_tensor(variable), path or "variable", "output")] if variable is not None else []
    why, fix = update_words(name, optimizer, kind)
    return build_report(framework="tf", phase="optimizer", kind=kind, op=name, api="", module=path, where=frame,
                        outputs=outs, explanation=why, suggestion=fix, how="graph")


__all__ = ["api_spelling", "batch_summaries", "data_report", "eager_report", "input_names", "producer_of",
           "update_report"]
