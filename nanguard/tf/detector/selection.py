"""Which ops of a traced graph get a check: the policy of `nanguard.tf.detector.graph`.

Default mode checks the ops that can make NaN/Inf from finite values at a singular point
(`SINGULAR_OPS`), a float16/bfloat16 op that overflows in practice in the forward pass
(`OVERFLOW_OPS`), the batch a ``tf.data`` iterator hands a step (`DATA_OPS`) and, with
``check="nan"``, the ops that turn an inf into NaN downstream of one that can make it
(`after_inf`); a singular op whose static inputs keep it off its singular point is left out
(`harmless`). ``exhaustive=True`` checks every float op but the pass-through ones.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from nanguard.tf.detector.state import Backward, Session

# The ops that turn finite inputs into NaN/Inf at a singular point (and the gradient kernels of
# such ops); an op outside this set only passes NaN/Inf on, or overflows (found at the boundary).
SINGULAR_OPS = frozenset({
    "Sqrt", "Rsqrt", "Log", "Log1p", "Exp", "Expm1", "Pow", "RealDiv", "Div", "DivNoNan", "Reciprocal", "Inv",
    "FloorDiv", "Xdivy", "Xlogy", "Xlog1py", "Acos", "Asin", "Atanh", "Acosh", "Softmax", "LogSoftmax", "Mean",
    "Lgamma", "Digamma", "Tan", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad", "InvGrad", "Atan2",
})
# Ops that pass values through and so cannot make NaN/Inf; never checked. A function's outputs
# are Identity ops that tf.function makes wait for every stateful op, the checks included: a
# check of them would be a cycle.
PASS_THROUGH = frozenset({"Identity", "IdentityN", "StopGradient", "Snapshot", "PreventGradient", "ReadVariableOp",
                          "Placeholder", "Const", "Enter", "Exit", "Switch", "Merge", "NextIteration"})
# float16/bfloat16 ops whose finite inputs overflow the dtype in practice (float16 ends at 65504:
# a matmul of ordinary activations passes it). Checked in the forward only: in a gradient, an
# overflow is the loss scaler's to handle (it skips the step and lowers the scale).
OVERFLOW_OPS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D", "Conv3D",
                          "DepthwiseConv2dNative", "Conv2DBackpropInput", "BiasAdd", "Sum", "Square", "Cast"})
LOW_PRECISION = frozenset({"float16", "bfloat16"})
# The ops that hand a traced step its batch from a tf.data iterator (Keras' fit fetches it inside
# its compiled step): NaN in their outputs came with the data.
DATA_OPS = frozenset({"IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue"})
# Ops that make NaN from an inf (0 * inf, inf - inf): only a check of "inf" catches the inf where it
# is made, so with check="nan" these are where the NaN first shows, downstream of an op that can make inf.
_NAN_FROM_INF = frozenset({"Mul", "AddV2", "Add", "AddN", "Sub", "Sum", "Prod", "SquaredDifference", "MatMul",
                           "BatchMatMulV2", "BatchMatMulV3", "Einsum", "BiasAdd", "BiasAddGrad", "Conv2D",
                           "Conv2DBackpropInput", "Conv2DBackpropFilter", "Sin", "Cos"})


def wanted(session: Session, op_type: str, backward: Optional[Backward], in_update: bool = False,
           low_precision: bool = False, after_inf: bool = False) -> bool:
    """Whether the default (or exhaustive) mode checks this op.

    ``low_precision``: its output is float16/bfloat16; ``after_inf``: an input descends from
    an op that can make inf (see `after_inf`).
    """
    if op_type in PASS_THROUGH:
        return False
    if session.exhaustive:
        return True
    if in_update:
        return False  # the update is checked once, at its end (trace_update)
    if op_type in SINGULAR_OPS:
        return True
    if low_precision and backward is None and op_type in OVERFLOW_OPS and "inf" in session.check:
        return True
    return after_inf and "inf" not in session.check and op_type in _NAN_FROM_INF


def after_inf(session: Session, op_type: str, backward: Optional[Backward], ins: List[tf.Tensor],
               outs: List[tf.Tensor], low_precision: bool) -> bool:
    """With ``check="nan"``: whether an input of this op descends from one that can make inf.

    An op that can make inf from finite values (a singular one, a float16 overflow) marks its
    graph op, and so does every op fed by a marked one: an inf can travel that far before a
    ``0 * inf`` turns it into the NaN looked for. Not needed when "inf" is checked (the inf is
    found where it is made), nor in exhaustive mode (every op is checked).
    """
    if "inf" in session.check or session.exhaustive or not outs:
        return False
    after = any(getattr(t.op, "_nanguard_inf", False) for t in ins)
    if after or op_type in SINGULAR_OPS or (low_precision and backward is None and op_type in OVERFLOW_OPS):
        try:
            outs[0].op._nanguard_inf = True
        except AttributeError:
            pass
    return after


def harmless(op_type: str, inputs: Sequence[Any]) -> bool:
    """A singular op that, from its static inputs, cannot reach its singular point.

    A division by a constant with no entry below 1 in magnitude (``reduce_mean``'s gradient
    divides by the count) cannot make 0/0 or overflow; a mean over axes of known non-zero
    length has no empty slice. Such ops are a third of a transformer's checks.
    """
    try:
        if op_type in ("RealDiv", "Div", "DivNoNan") and len(inputs) == 2:
            denominator = tf.get_static_value(inputs[1])
            return denominator is not None and bool(np.all(np.abs(denominator) >= 1))
        if op_type == "Mean" and len(inputs) == 2:
            axes = tf.get_static_value(inputs[1])
            shape = inputs[0].shape
            if axes is None or shape.rank is None:
                return False
            return all(shape[int(a)] is not None and shape[int(a)] > 0 for a in np.atleast_1d(axes))
    except Exception:  # noqa: BLE001  (anything unusual is checked)
        return False
    return False



__all__ = ["DATA_OPS", "LOW_PRECISION", "OVERFLOW_OPS", "PASS_THROUGH", "SINGULAR_OPS", "after_inf", "harmless", "wanted"]
