"""A TensorFlow report is frozen, names the user's spelling as `api`, and its JSON reads back exactly."""

from __future__ import annotations

import tensorflow as tf

import nanguard.tf as ngt
from tests.core.report_checks import assert_settled


def test_an_eager_finding_names_the_spelling_on_the_line() -> None:
    with ngt.detect(mode="record") as d:
        tf.math.log(tf.zeros(3))
    r = d.report
    assert (r.op, r.api, r.phase) == ("Log", "tf.math.log", "forward")
    assert "(from tf.math.log)" in r.format(color=False)
    assert_settled(r, "tf")


def test_a_gradient_finding_names_its_forward_line_and_the_tape_call() -> None:
    x = tf.Variable([0.0, 4.0])
    with ngt.detect(mode="record") as d:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.sqrt(x))
        tape.gradient(y, x)
    r = d.report
    assert (r.phase, r.api, r.forward.op, r.call_name) == ("backward", "tf.sqrt", "Sqrt", "tape.gradient()")
    assert r.forward.line == r.where.line == r.call.line - 1
    assert_settled(r, "tf")


def test_a_graph_finding_reads_back_too() -> None:
    @tf.function
    def f(v):
        return tf.math.log(v) + 1.0

    with ngt.detect(mode="record") as d:
        f(tf.zeros(3))
    r = d.report
    assert (r.op, r.api, r.how) == ("Log", "tf.math.log", "graph")
    assert_settled(r, "tf")
