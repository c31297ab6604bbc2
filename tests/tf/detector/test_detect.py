"""Real TensorFlow NaN/Inf bugs, found at the exact user line eagerly, in tf.function and under
XLA, forward and backward; their fixed versions and a deliberate -inf mask are quiet."""

from __future__ import annotations

import inspect
import io
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ngt
from nanguard.errors import NonFiniteError
from tests.tf.detector.cases import CASES, HERE, attention_mask, line_of

FLAVOURS = ("eager", "function", "xla")
THIS = os.path.abspath(__file__)


def _marked(marker: str) -> int:
    """The line of this file that carries ``# AT: marker``."""
    with open(THIS, encoding="utf-8") as fh:
        return next(n for n, text in enumerate(fh, 1) if f"# AT: {marker}" in text)


def _compiled(fn, flavour):
    if flavour == "eager":
        return fn
    return tf.function(fn, jit_compile=(flavour == "xla"), reduce_retracing=False)


def _step(fn, flavour):
    """value and gradient of fn at a variable, compiled as ``flavour`` (traced inside detect)."""
    def step(v):
        with tf.GradientTape() as tape:
            loss = fn(v)
        return loss, tape.gradient(loss, v)  # the gradient call
    return _compiled(step, flavour)


def _ids(case):
    return f"{case.name}-{case.check}"


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bug_is_found_at_the_user_line(case, flavour):
    v = tf.Variable(case.value)
    with ngt.detect(check=case.check, mode="record") as det:
        step = _step(case.bug, flavour)
        step(v)
    report = det.report
    assert report is not None, f"{case.name} not found ({flavour})"
    assert report.file == HERE and report.line == line_of(case.name), report.format(color=False)
    assert report.phase == ("backward" if case.backward else "forward")
    assert report.kind in case.check or case.check == "both"
    if case.backward:
        assert report.forward_op == case.op and report.forward_line == line_of(case.name)
        assert report.call_file == __file__ and "the gradient call" in (report.call_code or "")
        # the user called tape.gradient (eagerly or in a tf.function): named so, not "backward()"
        assert report.call_name == "tape.gradient()"
        text = report.format(color=False)
        assert "  tape.gradient() called at " in text and "backward()" not in text
    else:
        assert report.op == case.op
    assert report.inputs and report.explanation and report.suggestion
    assert "torch" not in report.suggestion and "F." not in report.suggestion


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("case", [c for c in CASES if c.fixed is not None], ids=_ids)
def test_fixed_version_is_quiet(case, flavour):
    v = tf.Variable(case.value)
    with ngt.detect(check="both", mode="raise", exhaustive=True):
        loss, grad = _step(case.fixed, flavour)(v)
    assert bool(tf.math.is_finite(loss)) and bool(tf.reduce_all(tf.math.is_finite(grad)))


@pytest.mark.parametrize("exhaustive", (False, True))
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_deliberate_minus_inf_mask_is_quiet(flavour, exhaustive):
    v = tf.Variable([[1.0, 2.0], [0.5, -1.0]])
    with ngt.detect(mode="raise", exhaustive=exhaustive):
        loss, grad = _step(attention_mask, flavour)(v)
    assert bool(tf.math.is_finite(loss)) and bool(tf.reduce_all(tf.math.is_finite(grad)))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_raise_mode_raises_a_floating_point_error_with_the_report(flavour):
    case = next(c for c in CASES if c.name == "log")
    v = tf.Variable(case.value)
    with pytest.raises(FloatingPointError) as info:
        with ngt.detect():
            _step(case.bug, flavour)(v)
    assert isinstance(info.value, NonFiniteError)
    assert info.value.report.line == line_of("log") and "forward of Log" in str(info.value)


def test_exhaustive_graph_mode_checks_ops_the_default_leaves_out():
    @tf.function
    def overflow(x):
        return tf.reduce_sum(x * x)  # BUG-free line: float32 overflow of a product

    with ngt.detect(mode="record") as quiet:
        overflow(tf.constant([3e38]))
    with ngt.detect(mode="record", exhaustive=True) as det:
        tf.function(lambda x: tf.reduce_sum(x * x))(tf.constant([3e38]))
    assert quiet.report is None or quiet.report.notes   # default: at most a boundary finding
    assert det.report is not None and det.report.op == "Mul" and det.report.kind == "inf"


def test_numerics_are_unchanged():
    case = next(c for c in CASES if c.name == "distance")
    v = tf.Variable(case.value + 1.0)
    for flavour in FLAVOURS:
        plain_loss, plain_grad = _step(case.fixed, flavour)(v)
        with ngt.detect():
            loss, grad = _step(case.fixed, flavour)(v)
        assert loss.numpy().tobytes() == plain_loss.numpy().tobytes()
        assert grad.numpy().tobytes() == plain_grad.numpy().tobytes()


def test_eager_ops_named_in_bytes_by_tensorflow_are_checked():
    # TensorFlow hands some eager ops (Fill) to the op callback as bytes; that must not break them
    with ngt.detect(mode="record") as det:
        zeros = tf.fill([2], 0.0)
        tf.math.log(zeros); line = inspect.currentframe().f_lineno  # noqa: E702
    assert (det.report.op, det.report.kind, det.report.line) == ("Log", "inf", line)


def test_under_xla_the_values_are_not_read_and_the_report_says_so():
    # storing a tensor's statistics inside an XLA computation changes how XLA rounds it, so
    # an XLA finding has shapes and the hazard of its op, not counts it could not read
    case = next(c for c in CASES if c.name == "xent")
    v = tf.Variable(case.value)
    with ngt.detect(check=case.check, mode="record") as det:
        _step(case.bug, "xla")(v)
    report = det.report
    assert report is not None and report.line == line_of("xent")
    assert all(not s.counted for s in report.inputs + report.outputs)
    assert report.inputs[0].shape == tuple(case.value.shape)
    assert "values not recorded" in report.format(color=False)
    assert any("jit_compile" in note for note in report.notes)
    assert report.to_dict()["inputs"][0]["nan"] is None
    assert "tf.nn.log_softmax" in report.suggestion          # the producer (Softmax) still says it


def test_a_masked_softmax_fix_names_the_function_that_exists():
    from nanguard.core.summary import TensorSummary
    from nanguard.tf.detector.explain import Evidence, explain
    row = TensorSummary("x", (2, 3), "float32", "", 6, neginf=6)
    for op, name in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax")):
        for counted in (True, False):
            _, fix = explain(Evidence(op, "forward", "nan", [row]), counted=counted)
            assert fix.startswith(f"nanguard.tf.{name}(") and hasattr(ngt, name)


def _norm_step(w, opt):
    """A custom training step whose row norm has a zero row: sqrt's gradient is inf there, and
    the gradient of ``h * h`` multiplies it by 0."""
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            h = tf.matmul(x, w)
            norm = tf.sqrt(tf.reduce_sum(h * h, axis=1))  # AT: row norm
            loss = tf.reduce_mean((norm - y) ** 2)
        grads = tape.gradient(loss, [w])  # AT: gradient call
        opt.apply_gradients(zip(grads, [w]))
        return loss
    return train_step


def test_a_nan_made_by_a_gradient_op_in_a_tf_function_step_is_that_op_at_its_forward_line():
    # check="nan": the inf of sqrt's gradient is not looked for; the NaN it becomes (0 * inf in
    # the gradient of h * h) was found only as the next call's output, the whole function blamed
    w = tf.Variable(np.ones((3, 2), np.float32))
    step = _norm_step(w, keras.optimizers.SGD(0.1))
    x = tf.constant([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    with ngt.detect(check="nan", mode="record") as det:
        for _ in range(2):
            step(x, tf.ones([2]))
    report = det.report
    assert report is not None
    assert (report.phase, report.kind, report.op, report.forward_op) == ("backward", "nan", "Mul", "Mul"), \
        report.format(color=False)
    assert (report.file, report.line, report.forward_line) == (THIS, _marked("row norm"), _marked("row norm"))
    assert (report.call_line, report.call_name) == (_marked("gradient call"), "tape.gradient()")
    assert "0 · ±inf" in report.explanation


def test_check_nan_does_not_check_arithmetic_far_from_any_op_that_can_make_inf():
    from nanguard.tf.detector import graph

    @tf.function
    def plain(x):
        return tf.reduce_sum(tf.matmul(x, x) * 2.0 + x)   # nothing here can make inf from finite values

    before = set(graph.REGISTRY)
    with ngt.detect(check="nan", mode="raise"):
        plain(tf.ones([2, 2]))
    assert not set(graph.REGISTRY) - before


def _csv_batches():
    """A CSV with a missing value, parsed by NumPy (the empty field becomes NaN), batched by tf.data."""
    rows = np.genfromtxt(io.StringIO("1,2,3\n4,,6\n7,8,9\n1,1,1\n"), delimiter=",", dtype=np.float32)
    return tf.data.Dataset.from_tensor_slices((rows, np.ones((4, 1), np.float32))).batch(2)


def test_nan_that_arrives_with_tf_data_batches_is_input_at_the_line_that_fetched_them():
    ds = _csv_batches()
    with ngt.detect(mode="record") as det:
        for x, y in ds:  # AT: fetch
            tf.reduce_sum(x * y)
    report = det.report
    assert report is not None
    assert (report.phase, report.kind, report.op) == ("input", "nan", "IteratorGetNext")
    assert (report.file, report.line) == (THIS, _marked("fetch"))
    assert report.outputs[0].nan == 1 and report.outputs[0].numel == 6
    assert "1 of 6 values of `batch[0]` were NaN in the batch" in report.explanation
    assert "tf.math.is_nan" in report.suggestion


def test_a_pipeline_that_replaces_its_nan_is_quiet():
    ds = _csv_batches().map(lambda x, y: (tf.where(tf.math.is_nan(x), tf.zeros_like(x), x), y))
    with ngt.detect(mode="raise"):
        for x, y in ds:
            tf.reduce_sum(x * y)
