"""Checks inside traced graphs (``tf.function``, ``model.fit``'s compiled step, XLA included).

TensorFlow calls the op callback while it *builds* a graph, once per op; nanguard adds, next
to a checked op, one reduction (are the outputs finite?) and a ``tf.cond`` whose rare branch
applies the same rule as in eager mode (NaN from inputs without NaN, Inf from finite inputs)
and, for the first op that breaks it, stores the op's id and the statistics of its tensors in
three small variables. Nothing is added to the op's outputs, so values are unchanged; only
variable assignments are added, which XLA compiles (``check_numerics`` does not). Under XLA
any value a check *stores* changes how XLA compiles the computation itself (which ops it fuses
and contracts), even in a branch that never runs and behind an optimization barrier: a Keras
``fit`` under ``jit_compile=True`` came out 1 ulp off in a few weights. So inside XLA the rare
branch stores only the op's id and its tensors' shapes, not their statistics (the finiteness
tests that decide the branch do not change XLA's output), and the report says the values were
not recorded; eager, graph and XLA runs are bitwise those of the plain program. When the
compiled function returns, `poll` reads the id once and builds the report from what was
recorded at trace time: the op, the user's line from the op's creation traceback, the layer,
and for a gradient op the forward op, its line and where ``tape.gradient`` was called.

Default mode checks the ops that can make NaN/Inf from finite values at a singular point
(`SINGULAR_OPS`), forward and in gradients, and an optimizer's update once, at its end: the
variables it wrote (`trace_update`), not the dozens of ops per variable inside it (a Keras
Adam step has four singular ops per variable: checking them made a transformer's ``fit`` step
1.6x slower and its first trace 95 s long). A float16/bfloat16 op that overflows in practice
(`OVERFLOW_OPS`) is checked in the forward pass too: mixed precision runs matmuls in float16,
and the loss scaler skips every step whose forward overflows, leaving nothing else
non-finite. The batch a ``tf.data`` iterator hands a step (`DATA_OPS`) is checked for NaN:
there it came with the data (phase ``input``), and no op of the step would make it. With
``check="nan"``, the ops that turn an inf into NaN (0·inf, inf − inf) are checked downstream
of an op that can make inf, forward or in a gradient: the inf itself is not looked for, and
the NaN would otherwise first show in the variables, or as the output of the whole function.
``exhaustive=True`` checks every float op.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from nanguard.core.location import Frame
from nanguard.tf._compat import control_flow_util, record
from nanguard.core.nonfinite import Logic, made_masks
from nanguard.core.report import Report
from nanguard.core.report_builder import build_report
from nanguard.tf.detector.build import api_spelling, data_report, input_names, producer_of, update_report
from nanguard.tf.detector.explain import Evidence, explain
from nanguard.tf.detector.frames import graph_frame, layer_path, user_frame
from nanguard.tf.detector.state import LOCAL, Backward, Session
from nanguard.tf.detector.selection import DATA_OPS, LOW_PRECISION, OVERFLOW_OPS, SINGULAR_OPS, after_inf, harmless, wanted
from nanguard.tf.detector.values import summary_from_stats, summary_of_shape

_ROWS, _STATS, _DIMS = 4, 9, 8
NONE = -1


class _Flags:
    """The three variables every checked graph writes to (one set per process, created eagerly)."""

    def __init__(self) -> None:
        with tf.init_scope():
            self.code = tf.Variable(np.int64(NONE), trainable=False, name="nanguard_code")
            self.stats = tf.Variable(np.zeros((_ROWS, _STATS)), dtype=tf.float64, trainable=False,
                                     name="nanguard_stats")
            self.shapes = tf.Variable(np.full((_ROWS, _DIMS), -1, np.int64), trainable=False, name="nanguard_shapes")

    def reset(self) -> None:
        self.code.assign(NONE)


_FLAGS: Optional[_Flags] = None


def flags() -> _Flags:
    global _FLAGS
    if _FLAGS is None:
        _FLAGS = _Flags()
    return _FLAGS


@dataclass
class TracedOp:
    """What is known at trace time about one checked graph op."""

    op: str
    frame: Optional[Frame]
    layer: Optional[str]
    names: List[Tuple[str, str, str]]          # (name, role, dtype) of each stats row
    backward: Optional[Backward] = None
    producer: Optional[str] = None
    stack: List[Frame] = field(default_factory=list)
    optimizer: Any = None          # a weak reference to the optimizer, for an update's check
    variable: Any = None           # a weak reference to the variable it wrote
    xla: bool = False              # compiled by XLA: shapes recorded, not statistics
    data: bool = False             # a tf.data batch: NaN in it came with the data (phase "input")


REGISTRY: Dict[int, TracedOp] = {}
_IDS = itertools.count()


def _float(values: Sequence[Any]) -> List[Any]:
    return [v for v in values if v is not None and getattr(v, "dtype", None) is not None
            and v.dtype.is_floating]


def _stats(t: tf.Tensor) -> tf.Tensor:
    x = tf.reshape(tf.cast(t, tf.float64), [-1])
    finite = tf.math.is_finite(x)
    inf = tf.constant(np.inf, tf.float64)

    def count(mask: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(mask, tf.float64))

    bad = tf.concat([tf.cast(tf.logical_not(finite), tf.int32), tf.ones([1], tf.int32)], 0)
    first = tf.argmax(bad, output_type=tf.int64)
    size = tf.size(x, out_type=tf.int64)
    first = tf.where(first < size, tf.cast(first, tf.float64), tf.constant(-1.0, tf.float64))
    return tf.stack([tf.cast(size, tf.float64), tf.reduce_min(tf.where(finite, x, inf)),
                     tf.reduce_max(tf.where(finite, x, -inf)), count(tf.math.is_nan(x)), count(tf.equal(x, inf)),
                     count(tf.equal(x, -inf)), count(tf.equal(x, 0.0)), count(tf.logical_and(finite, x < 0)), first])


def _shape(t: tf.Tensor) -> tf.Tensor:
    return tf.concat([tf.shape(t, out_type=tf.int64), tf.fill([_DIMS], tf.constant(-1, tf.int64))], 0)[:_DIMS]


# the rule of `nanguard.core.nonfinite`, over the graph's booleans
_LOGIC: Logic[tf.Tensor] = Logic(and_=tf.logical_and, not_=tf.logical_not, false=lambda: tf.constant(False))


def _any(tensors: Sequence[tf.Tensor], test: Any) -> tf.Tensor:
    result = tf.constant(False)
    for t in tensors:
        result = tf.logical_or(result, tf.reduce_any(test(t)))
    return result


def _in_xla() -> bool:
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _insert(check: frozenset, op_id: int, ins: List[tf.Tensor], outs: List[tf.Tensor], xla: bool,
            rows: Optional[List[tf.Tensor]] = None) -> None:
    store = flags()
    rows = rows if rows is not None else (ins[:_ROWS - 1] + outs[:1])

    def record_first() -> tf.Tensor:
        shapes = tf.stack([_shape(t) for t in rows] + [tf.fill([_DIMS], tf.constant(-1, tf.int64))] * (_ROWS - len(rows)))
        writes = [store.shapes.assign(shapes)]
        if not xla:  # see the module docstring: stored statistics change XLA's rounding
            stats = tf.stack([_stats(t) for t in rows] + [tf.zeros([_STATS], tf.float64)] * (_ROWS - len(rows)))
            writes.append(store.stats.assign(stats))
        with tf.control_dependencies(writes):
            return tf.identity(tf.constant(True))

    def judge() -> tf.Tensor:
        inputs_finite = tf.logical_not(_any(ins, lambda t: tf.logical_not(tf.math.is_finite(t))))
        nan_made, inf_made = made_masks(_any(outs, tf.math.is_nan), _any(outs, tf.math.is_inf),
                                        _any(ins, tf.math.is_nan), inputs_finite, _LOGIC, check)
        made = tf.logical_or(nan_made, inf_made)
        first = tf.logical_and(made, tf.equal(store.code, NONE))
        code = tf.where(nan_made, tf.constant(2 * op_id, tf.int64), tf.constant(2 * op_id + 1, tf.int64))

        def write() -> tf.Tensor:
            with tf.control_dependencies([record_first()]):
                with tf.control_dependencies([store.code.assign(code)]):
                    return tf.identity(tf.constant(True))

        return tf.cond(first, write, lambda: tf.constant(False))

    finite = tf.constant(True)
    for t in outs:
        finite = tf.logical_and(finite, tf.reduce_all(tf.math.is_finite(t)))
    tf.cond(finite, lambda: tf.constant(False), judge)


def trace_op(session: Session, op_type: str, inputs: Sequence[Any], outputs: Sequence[Any],
             backward: Optional[Backward]) -> None:
    """Add the check of one op being traced into a graph (called from the op callback)."""
    outs, ins = _float(outputs), _float(inputs)
    if op_type in DATA_OPS and backward is None:
        _trace_data(session, op_type, outs)
        return
    low_precision = bool(outs) and outs[0].dtype.name in LOW_PRECISION
    inf_upstream = after_inf(session, op_type, backward, ins, outs, low_precision)
    if not wanted(session, op_type, backward, LOCAL.optimizer is not None, low_precision, inf_upstream):
        return
    if not outs or not ins:
        return  # a constant or a fill: an infinity it holds is deliberate
    if not session.exhaustive and harmless(op_type, inputs):
        return
    op = outs[0].op
    frame = graph_frame(op) or user_frame()
    layer = layer_path()
    names = [(n, "input", t.dtype.name) for n, t in zip(input_names(op_type, len(ins)), ins[:_ROWS - 1])]
    names.append(("out", "output", outs[0].dtype.name))
    op_id = next(_IDS)
    xla = _in_xla()
    REGISTRY[op_id] = TracedOp(op_type, frame, layer, names, backward, producer_of(ins[0]), xla=xla)
    with record.stop_recording():
        _insert(session.check, op_id, ins, outs, xla)


def _trace_data(session: Session, op_type: str, outs: List[tf.Tensor]) -> None:
    """Check the batch a tf.data iterator hands a traced step: NaN in it came with the data.

    Only NaN: an infinity in the data may be deliberate (a ``-inf`` mask), as a constant's is.
    The line is the one that fetched the batch (``model.fit``, the ``for`` over the dataset),
    not the one that built the dataset: only there is the NaN data the program uses (a
    pipeline's ``filter`` or ``map`` may drop or replace it before).
    """
    if "nan" not in session.check or LOCAL.optimizer is not None or not outs:
        return
    op = outs[0].op
    rows = outs[:_ROWS]
    names = [(f"batch[{i}]" if len(outs) > 1 else "batch", "output", t.dtype.name) for i, t in enumerate(rows)]
    op_id = next(_IDS)
    xla = _in_xla()
    REGISTRY[op_id] = TracedOp(op_type, graph_frame(op) or user_frame(), layer_path(), names, xla=xla, data=True)
    with record.stop_recording():
        _insert(frozenset({"nan"}), op_id, [], rows, xla, rows=rows)


def trace_update(session: Session, optimizer: Any, grads: Sequence[Any], variables: Sequence[Any]) -> None:
    """Check, once, the variables an optimizer's update wrote in a graph being traced (default mode).

    The rule of the other checks: a variable that holds NaN now while its gradient held none (or
    Inf while its gradient was finite) was made non-finite by the update itself (a learning
    rate too large, Adam with ``epsilon=0``). One reduction per variable; the details are
    computed only in the rare branch.
    """
    pairs = [(g, v) for g, v in zip(grads, variables)
             if g is not None and getattr(v, "dtype", None) is not None and tf.as_dtype(v.dtype).is_floating]
    if not pairs:
        return
    frame = user_frame()
    ids = []
    for _, variable in pairs:
        op_id = next(_IDS)
        path = str(getattr(variable, "path", None) or getattr(variable, "name", "variable"))
        REGISTRY[op_id] = TracedOp(type(optimizer).__name__, frame, path, [(path, "output", "")],
                                   optimizer=_weak(optimizer), variable=_weak(variable))
        ids.append(op_id)
    store, check = flags(), session.check
    with record.stop_recording():
        grads = [tf.convert_to_tensor(g) for g, _ in pairs]
        values = [tf.convert_to_tensor(v) for _, v in pairs]  # reads ordered after the update's writes
        all_finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in values]))

        def judge() -> tf.Tensor:
            masks = [made_masks(tf.reduce_any(tf.math.is_nan(v)), tf.reduce_any(tf.math.is_inf(v)),
                                tf.reduce_any(tf.math.is_nan(g)), tf.reduce_all(tf.math.is_finite(g)), _LOGIC, check)
                     for g, v in zip(grads, values)]
            nan_made = tf.stack([nan for nan, _ in masks])
            inf_made = tf.stack([inf for _, inf in masks])
            made = tf.logical_or(nan_made, inf_made)
            index = tf.argmax(tf.cast(made, tf.int32), output_type=tf.int32)
            code = 2 * tf.gather(tf.constant(ids, tf.int64), index) + tf.where(
                tf.gather(nan_made, index), tf.constant(0, tf.int64), tf.constant(1, tf.int64))

            def write() -> tf.Tensor:
                with tf.control_dependencies([store.code.assign(code)]):
                    return tf.identity(tf.constant(True))

            first = tf.logical_and(tf.reduce_any(made), tf.equal(store.code, NONE))
            return tf.cond(first, write, lambda: tf.constant(False))

        tf.cond(all_finite, lambda: tf.constant(False), judge)


def _weak(obj: Any) -> Any:
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def poll() -> Optional[Report]:
    """The report of the first op a compiled graph found (None if none), and reset the flag."""
    if _FLAGS is None:
        return None
    code = int(_FLAGS.code.numpy())
    if code == NONE:
        return None
    stats, shapes = _FLAGS.stats.numpy(), _FLAGS.shapes.numpy()
    _FLAGS.reset()
    traced = REGISTRY.get(code // 2)
    if traced is None:
        return None
    kind = "nan" if code % 2 == 0 else "inf"
    if traced.optimizer is not None:
        return update_report(traced.op, traced.optimizer(), traced.layer, traced.variable(), kind, traced.frame)
    return _report(traced, kind, stats, shapes)


def _report(traced: TracedOp, kind: str, stats: np.ndarray, shapes: np.ndarray) -> Report:
    summaries = []
    for row, (name, role, dtype) in enumerate(traced.names):
        shape = tuple(int(d) for d in shapes[row] if d >= 0)
        summaries.append(summary_of_shape(name, role, dtype, shape) if traced.xla
                         else summary_from_stats(name, role, dtype, shape, stats[row]))
    ins = [s for s in summaries if s.role == "input"]
    outs = [s for s in summaries if s.role == "output"]
    if traced.data:
        return data_report(traced.op, outs, traced.frame, traced.layer, how="graph")
    back = traced.backward
    ev = Evidence(op=back.op if back else traced.op, phase="backward" if back else "forward", kind=kind,
                  inputs=ins, outputs=outs, producer=traced.producer)
    # without counts (XLA) the op's type, phase and producer name the hazard
    why, fix = explain(ev, counted=not traced.xla)
    frame = back.frame if back else traced.frame
    notes = ["compiled by XLA (jit_compile=True): the tensors' values were not recorded, since reading them "
             "inside the compiled step changes how XLA rounds it; run the step without jit_compile to see them"] \
        if traced.xla else []
    call = back.call if back is not None else None
    return build_report(framework="tf", phase=ev.phase, kind=kind, op=traced.op, fn=ev.op,
                        api=api_spelling(ev.op, frame), node=f"{back.op} gradient" if back else None,
                        module=(back.layer if back else traced.layer), where=frame,
                        forward_op=back.op if back else None, call=call,
                        call_name=(back.call_name or "tape.gradient()") if back is not None and call is not None
                        else None, inputs=ins, outputs=outs, explanation=why, suggestion=fix, how="graph",
                        notes=notes)


__all__ = ["DATA_OPS", "LOW_PRECISION", "NONE", "OVERFLOW_OPS", "REGISTRY", "SINGULAR_OPS", "TracedOp", "flags", "poll",
           "trace_op", "trace_update", "wanted"]
