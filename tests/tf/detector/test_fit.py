"""Keras model.fit (the train step compiled by Keras, with and without XLA): a NaN in a layer's
backward and in a hand-written loss is found at the user's line with the layer path; the fixed
model and a -inf attention mask train quietly and identically with and without detection; under
mixed precision a float16 overflow is found and the loss scaler's own overflows are not; NaN in a
tf.data dataset is input at the fit line."""

from __future__ import annotations

import io
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import nanguard.tf as ngt

HERE = os.path.abspath(__file__)


def _line(marker: str) -> int:
    with open(HERE, encoding="utf-8") as fh:
        return next(n for n, text in enumerate(fh, 1) if f"# BUG: {marker}" in text)


class GramDistances(keras.layers.Layer):
    def __init__(self, fixed: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.fixed = fixed

    def call(self, x):
        if self.fixed:
            d2 = tf.reduce_sum(tf.square(x[:, :, None, :] - x[:, None, :, :]), axis=-1)
            positive = d2 > 0
            return tf.where(positive, tf.sqrt(tf.where(positive, d2, tf.ones_like(d2))), tf.zeros_like(d2))
        sq = tf.reduce_sum(x * x, axis=-1)
        d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * tf.matmul(x, x, transpose_b=True)
        return tf.sqrt(tf.maximum(d2, 0.0))  # BUG: gram


class MaskedAttention(keras.layers.Layer):
    def call(self, x):
        scores = tf.matmul(x, x, transpose_b=True)
        keep = tf.linalg.band_part(tf.ones_like(scores), -1, 0) > 0     # causal: every row keeps a key
        weights = tf.nn.softmax(tf.where(keep, scores, float("-inf")), axis=-1)
        return tf.matmul(weights, x)


def probability_xent(y_true, y_pred):        # seed 003 inside a Keras loss
    probs = tf.nn.softmax(y_pred * 100.0)
    return -tf.reduce_sum(y_true * tf.math.log(probs), axis=-1)  # BUG: loss


def _model(layer, loss, jit):
    keras.utils.set_random_seed(0)
    inp = keras.Input((4, 3))
    h = keras.layers.Dense(3, name="proj")(inp)
    h = layer(h)
    out = keras.layers.Dense(3)(keras.layers.Flatten()(h))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss=loss, jit_compile=jit)
    return model


def _data():
    rng = np.random.RandomState(0)
    x = rng.randn(8, 4, 3).astype("float32")
    y = np.eye(3, dtype="float32")[rng.randint(0, 3, 8)]
    return x, y


@pytest.mark.parametrize("jit", (False, True))
def test_layer_backward_nan_in_fit_is_found_at_the_layer_line(jit):
    model = _model(GramDistances(name="distances"), "mse", jit)
    x, y = _data()
    with ngt.detect(mode="record") as det:
        model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    report = det.report
    assert report is not None
    assert (report.phase, report.forward_op, report.file, report.line) == ("backward", "Sqrt", HERE, _line("gram"))
    assert report.module == "distances"
    # Keras' train_step took the gradient inside the fit the user called: the report says so
    fit_line = next(n for n, text in enumerate(open(HERE, encoding="utf-8"), 1)
                    if "model.fit(x, y, epochs=1, batch_size=4, verbose=0)" in text)
    assert (report.call_file, report.call_line, report.call_name) == (HERE, fit_line, "model.fit()")
    text = report.format(color=False)
    assert any(line.startswith("  model.fit() called at ") and line.endswith(f"test_fit.py:{fit_line}")
               for line in text.splitlines()), text
    assert "backward()" not in text
    assert "distance_matrix" in report.suggestion and "nanguard.tf." in report.suggestion


@pytest.mark.parametrize("jit", (False, True))
def test_loss_log_of_softmax_in_fit_is_found_at_the_loss_line(jit):
    model = _model(keras.layers.Identity(), probability_xent, jit)
    x, y = _data()
    with pytest.raises(FloatingPointError) as info:
        with ngt.detect():
            model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    report = info.value.report
    assert (report.op, report.file, report.line) == ("Log", HERE, _line("loss"))
    assert "tf.nn.log_softmax" in report.suggestion


# with exhaustive=True, training takes 110-125 s a run on a loaded 2-core machine (11-22 s without it)
@pytest.mark.parametrize("exhaustive", (False, pytest.param(True, marks=pytest.mark.slow)))
@pytest.mark.parametrize("jit", (False, True))
def test_fixed_model_and_minus_inf_mask_train_quietly_and_identically(jit, exhaustive):
    x, y = _data()
    histories = []
    for detecting in (False, True):
        keras.utils.set_random_seed(0)
        inp = keras.Input((4, 3))
        h = GramDistances(fixed=True)(MaskedAttention()(keras.layers.Dense(3)(inp)))
        model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.Flatten()(h)))
        model.compile(optimizer="adam", loss="categorical_crossentropy", jit_compile=jit)
        if detecting:
            with ngt.detect(exhaustive=exhaustive):
                history = model.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False)
        else:
            history = model.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False)
        histories.append((history.history["loss"], [w.copy() for w in model.get_weights()]))
    (plain_loss, plain_w), (det_loss, det_w) = histories
    assert np.all(np.isfinite(det_loss)) and plain_loss == det_loss
    # bitwise, under XLA too (a check that stored statistics there made weights differ by 1 ulp)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(plain_w, det_w))


def _dead_input_model(epsilon, jit):
    """A Dense layer one of whose inputs is always 0: that kernel row's gradient is always 0."""
    keras.utils.set_random_seed(0)
    inp = keras.Input((3,))
    model = keras.Model(inp, keras.layers.Dense(2, name="head")(inp))
    model.compile(optimizer=keras.optimizers.Adam(epsilon=epsilon), loss="mse", jit_compile=jit)
    x = np.random.RandomState(0).randn(8, 3).astype("float32")
    x[:, 0] = 0.0
    return model, x, np.ones((8, 2), "float32")


@pytest.mark.parametrize("jit", (False, True))
def test_an_update_that_divides_0_by_0_is_blamed_on_the_optimizer_and_names_the_variable(jit):
    model, x, y = _dead_input_model(0.0, jit)      # Adam with epsilon=0: m / (sqrt(v) + 0) = 0/0
    with ngt.detect(mode="record") as det:
        model.fit(x, y, epochs=1, batch_size=4, verbose=0)
    report = det.report
    assert report is not None
    assert (report.phase, report.kind, report.op, report.module) == ("optimizer", "nan", "Adam", "head/kernel")
    assert "epsilon=0" in report.explanation and "0/0" in report.explanation
    assert "epsilon > 0" in report.suggestion and "torch" not in report.suggestion
    assert report.outputs[0].nan == 2 and report.outputs[0].numel == 6  # the two weights of input 0
    assert report.file == HERE


def test_a_healthy_update_is_quiet_and_checked_once_not_op_by_op():
    from nanguard.tf.detector import graph

    counts = {}
    for exhaustive in (False, True):
        model, x, y = _dead_input_model(1e-7, False)
        before = set(graph.REGISTRY)
        with ngt.detect(exhaustive=exhaustive):
            model.fit(x, y, epochs=1, batch_size=4, verbose=0)
        traced = [graph.REGISTRY[i] for i in set(graph.REGISTRY) - before]
        counts[exhaustive] = (sum(t.op == "Sqrt" for t in traced), sum(t.optimizer is not None for t in traced))
    # default: no check inside Adam's update (its Sqrt of the second moment), one per variable at its end
    assert counts[False][0] == 0 and counts[False][1] >= 2
    assert counts[True][0] >= 2 and counts[True][1] == 0


@pytest.fixture
def mixed_float16():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


class Amplifier(keras.Model):
    """A Dense layer whose float16 product of ordinary inputs exceeds 65504."""

    def __init__(self):
        super().__init__()
        self.big = keras.layers.Dense(8, name="big", kernel_initializer=keras.initializers.Constant(10.0))
        self.head = keras.layers.Dense(1, dtype="float32", name="head")

    def call(self, x):
        h = self.big(x)  # BUG: float16 overflow
        return self.head(h)


@pytest.mark.parametrize("jit", (False, True))
def test_a_float16_overflow_under_mixed_precision_is_found_by_the_default_mode(mixed_float16, jit):
    # the loss scaler skips every step (the weights stay finite) and nothing else goes non-finite
    keras.utils.set_random_seed(0)
    model = Amplifier()
    model.compile(optimizer="adam", loss="mse", jit_compile=jit)
    x = np.full((8, 4), 3e4, "float32")
    with ngt.detect(mode="record") as det:
        history = model.fit(x, np.ones((8, 1), "float32"), epochs=1, batch_size=4, verbose=0)
    assert not np.isfinite(history.history["loss"][0])
    assert all(np.isfinite(w).all() for w in model.get_weights())
    report = det.report
    assert report is not None
    assert (report.phase, report.kind, report.op) == ("forward", "inf", "MatMul")
    assert (report.file, report.line) == (HERE, _line("float16 overflow")) and report.module.endswith("/big")
    assert "65504" in report.explanation and "loss scaler" in report.explanation
    # the program runs under mixed_float16 already: the fix must not be to turn it on
    assert "set_global_policy" not in report.suggestion and 'dtype="float32"' in report.suggestion


def test_a_float16_overflow_without_mixed_precision_still_suggests_it():
    from nanguard.tf.detector.explain import mixed_precision

    with ngt.detect(mode="record") as det:
        tf.matmul(tf.fill([2, 2], tf.constant(300.0, tf.float16)), tf.fill([2, 2], tf.constant(300.0, tf.float16)))
    assert not mixed_precision() and "set_global_policy(\"mixed_float16\")" in det.report.suggestion


@pytest.mark.parametrize("jit", (False, True))
def test_healthy_mixed_precision_training_and_the_loss_scalers_skips_are_quiet(mixed_float16, jit):
    rng = np.random.RandomState(0)
    x, y = rng.randn(16, 6, 8).astype("float32") * 10, rng.randn(16, 3).astype("float32") * 100
    results = []
    for detecting in (False, True):
        keras.utils.set_random_seed(0)
        inp = keras.Input((6, 8))
        h = keras.layers.Dense(16)(inp)
        h = keras.layers.LayerNormalization()(h + keras.layers.MultiHeadAttention(2, 8)(h, h, use_causal_mask=True))
        model = keras.Model(inp, keras.layers.Dense(3, dtype="float32")(keras.layers.Flatten()(h)))
        model.compile(optimizer="adam", loss="mse", jit_compile=jit)
        if detecting:
            with ngt.detect():
                history = model.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False)
        else:
            history = model.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False)
        results.append((history.history["loss"], float(model.optimizer.dynamic_scale.numpy())))
    (plain_loss, plain_scale), (det_loss, det_scale) = results
    assert plain_scale == det_scale < 2.0 ** 15, "the scaler must have skipped steps whose gradients overflowed"
    assert np.all(np.isfinite(det_loss)) and plain_loss == det_loss


@pytest.mark.parametrize("jit", (False, True))
def test_nan_in_a_tf_data_dataset_is_input_at_the_fit_line(jit):
    rows = np.genfromtxt(io.StringIO("1,2,3\n4,,6\n7,8,9\n1,1,1\n"), delimiter=",", dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices((rows, np.ones((4, 1), np.float32))).batch(2)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit)
    with ngt.detect(mode="record") as det:
        model.fit(ds, epochs=1, verbose=0, shuffle=False)  # BUG: dataset
    report = det.report
    assert report is not None
    assert (report.phase, report.kind, report.file, report.line) == ("input", "nan", HERE, _line("dataset"))
    assert report.op in ("IteratorGetNext", "OptionalGetValue")
    assert "NaN in the batch" in report.explanation and "tf.math.is_nan" in report.suggestion


def test_a_fit_whose_step_was_traced_before_detection_says_so_at_its_results():
    # Keras hands the step's results back in an optional: reading the NaN loss out of it is not
    # an op that made NaN, it is the compiled step's output (traced, unchecked, by the first fit)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((4, 3), np.float32), np.ones((4, 1), np.float32)
    model.fit(x, y, epochs=1, verbose=0)
    x[1, 1] = np.nan
    with ngt.detect(mode="record") as det:
        model.fit(x, y, epochs=1, verbose=0)
    assert det.report is not None and det.report.op == "OptionalGetValue"
    assert any("traced before detection began" in note for note in det.report.notes)
