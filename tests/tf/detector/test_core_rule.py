"""The TensorFlow detector decides through core (issue 29): `check="all"`, the rounded
``finfo.min`` mask of `nanguard.core.nonfinite`, and the one-line message of every backend."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ngt


def test_check_all_is_both():
    with ngt.detect(check="all", mode="record") as det:
        tf.math.log(tf.zeros([2]))
    assert det.report is not None and det.report.kind == "inf" and det.report.op == "Log"
    assert det.check == frozenset({"nan", "inf"}) and "check='both'" in repr(det)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"check": "any"}, ValueError, "'nan', 'inf', 'both' or 'all'"),
    ({"mode": "stop"}, ValueError, "'raise', 'warn' or 'record'"),
])
def test_bad_options_name_every_accepted_one(kwargs, error, words):
    with pytest.raises(error, match="nanguard.tf.detect") as caught:
        ngt.detect(**kwargs)
    assert words in str(caught.value)


def test_a_float16_min_mask_rounded_to_minus_inf_is_deliberate():
    scores = tf.constant([-100.0, 0.0, 2.0], tf.float16)
    with ngt.detect(mode="record") as det:
        masked = scores + tf.float16.min          # -100 + min rounds to -inf: the mask the user meant
    assert np.isneginf(masked.numpy()[0]) and det.report is None


def test_a_real_float16_overflow_is_still_found():
    with ngt.detect(mode="record") as det:
        tf.constant([3e4, 1.0], tf.float16) * tf.constant(4.0, tf.float16)
    assert det.report is not None and det.report.kind == "inf" and det.report.op == "Mul"


def test_the_backward_message_has_the_words_of_every_backend():
    x = tf.Variable([0.0, 4.0])
    with ngt.detect(mode="record") as det:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(tf.sqrt(x))
        tape.gradient(y, x)
    assert det.report is not None and det.report.phase == "backward"
    assert det.report.message.startswith("backward of Sqrt produced Inf from finite values at "), det.report.message
