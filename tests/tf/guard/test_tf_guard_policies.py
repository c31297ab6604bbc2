"""GuardedOptimizer in custom training loops: skip (variables, slots and iterations bitwise
unchanged) in eager, tf.function and XLA; zero; raise; counters, names, max_consecutive;
clear errors for bad arguments."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from tf_guard_helpers import BAD, GOOD, INF, INNERS, NAN, bits, gradients, make_model, planted_head_bias

import nanguard.tf as nt
from nanguard.core.guard_policy import decide

MODES = {
    "eager": lambda f: f,
    "function": tf.function,
    "xla": lambda f: tf.function(f, jit_compile=True),
}


def stepper(model, opt, mode):
    def step(x):
        opt.apply_gradients(zip(gradients(model, x), model.trainable_variables))

    return MODES[mode](step)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(INNERS))
def test_skip_leaves_variables_slots_and_iterations_bitwise_unchanged(name, mode):
    model = make_model()
    opt = nt.GuardedOptimizer(INNERS[name]())
    step = stepper(model, opt, mode)
    step(GOOD)  # a real step first: non-zero slots
    before = bits(model.trainable_variables), bits(opt.inner_optimizer.variables)
    step(BAD)
    assert (bits(model.trainable_variables), bits(opt.inner_optimizer.variables)) == before
    assert int(opt.iterations.numpy()) == 1 and int(opt.inner_optimizer.iterations.numpy()) == 1
    records = opt.records
    assert (records.steps, records.applied, records.skipped, records.bad_steps) == (2, 1, 1, [2])
    step(GOOD)
    assert int(opt.iterations.numpy()) == 2


@pytest.mark.parametrize("name", sorted(INNERS))
def test_finite_steps_are_the_inner_optimizer_bit_for_bit(name):
    guarded_model, plain_model = make_model(), make_model()
    guarded = stepper(guarded_model, nt.GuardedOptimizer(INNERS[name]()), "function")
    plain_opt = INNERS[name]()
    plain = stepper(plain_model, plain_opt, "function")
    for x in (GOOD, GOOD * 0.5, GOOD * 2.0):
        guarded(x)
        plain(x)
    assert bits(guarded_model.trainable_variables) == bits(plain_model.trainable_variables)


def test_zero_replaces_only_the_nonfinite_elements():
    model, ref = make_model(), make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9), policy="zero")
    grads = planted_head_bias(model, INF)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    plain = keras.optimizers.SGD(0.1, momentum=0.9)
    clean = [tf.where(tf.math.is_finite(g), g, 0.0) for g in grads]
    plain.apply_gradients(zip(clean, ref.trainable_variables))
    assert bits(model.trainable_variables) == bits(ref.trainable_variables)
    assert bits(opt.inner_optimizer.variables) == bits(plain.variables)
    records = opt.records
    assert (records.zeroed, records.applied, records.consecutive) == (1, 0, 1)
    assert int(opt.iterations.numpy()) == 1


def test_records_name_the_variables_with_counts():
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam())
    opt.apply_gradients(zip(planted_head_bias(model, NAN), model.trainable_variables))
    records = opt.records
    assert list(records.params) == ["net/head/bias"]
    assert (records.params["net/head/bias"].nan, records.params["net/head/bias"].inf) == (1, 0)
    (event,) = records.events
    assert event.params[0].name == "net/head/bias" and event.params[0].shape == (1,)
    assert "net/head/bias" in opt.summary() and "GuardedOptimizer (policy 'skip')" in opt.summary()


def test_raise_in_eager_raises_at_once_and_leaves_everything_untouched():
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(), policy="raise")
    opt.apply_gradients(zip(gradients(model, GOOD), model.trainable_variables))
    before = bits(model.trainable_variables), bits(opt.inner_optimizer.variables)
    with pytest.raises(nt.NonFiniteError, match=r"net/head/bias \[1\]: 1 NaN, 0 Inf of 1 elements"):
        opt.apply_gradients(zip(planted_head_bias(model, NAN), model.trainable_variables))
    assert (bits(model.trainable_variables), bits(opt.inner_optimizer.variables)) == before
    opt.apply_gradients(zip(gradients(model, GOOD), model.trainable_variables))  # delivered: goes on
    assert opt.records.applied == 2


def test_raise_in_a_graph_fails_the_step_naming_the_variables():
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(), policy="raise")
    step = stepper(model, opt, "function")
    step(GOOD)
    before = bits(model.trainable_variables), bits(opt.inner_optimizer.variables)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"nanguard: step 2: non-finite gradients in net/head/bias \(1 NaN, 0 Inf of 1\)"):
        step(BAD)
    assert (bits(model.trainable_variables), bits(opt.inner_optimizer.variables)) == before
    assert opt.records.raised == 1
    opt.check()  # delivered by the step: nothing pending
    step(GOOD)
    assert bits(model.trainable_variables) != before[0]


@pytest.mark.parametrize("policy", ["skip", "zero"])
def test_max_consecutive_raises_instead_of_skipping_forever(policy):
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.SGD(0.1), policy=policy, max_consecutive=3)
    step = stepper(model, opt, "function")
    for x in (BAD, BAD, GOOD, BAD, BAD):
        step(x)
    doing = "skipping" if policy == "skip" else "zeroing"
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"3 bad steps in a row \(max_consecutive=3\); stopping instead of {doing} forever"):
        step(BAD)
    assert opt.records.longest_run == 3


def test_decision_matches_the_core_policy_on_a_random_sequence():
    rng = np.random.default_rng(1)
    pattern = rng.random(30) < 0.6
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.SGD(0.01), policy="zero", max_consecutive=4)
    step = stepper(model, opt, "function")
    run, expected = 0, []
    for k, is_bad in enumerate(pattern, start=1):
        try:
            step(BAD if is_bad else GOOD)
            raised = False
        except tf.errors.InvalidArgumentError:
            raised = True
        if is_bad:
            run += 1
            action, _ = decide("zero", run, 4)
            expected.append((k, action))
            assert raised == (action == "raised")
        else:
            run = 0
    assert [(e.step, e.action) for e in opt.records.events] == expected
    assert any(a == "raised" for _, a in expected)


def test_sparse_embedding_gradients_are_checked_and_zeroed():
    keras.utils.set_random_seed(0)
    table = keras.layers.Embedding(5, 2, name="emb")
    table.build((None,))
    opt = nt.GuardedOptimizer(keras.optimizers.SGD(1.0), policy="zero")
    grad = tf.IndexedSlices(tf.constant([[1.0, NAN]]), tf.constant([3]), tf.constant([5, 2]))
    before = table.embeddings.numpy().copy()
    opt.apply_gradients([(grad, table.embeddings)])
    after = table.embeddings.numpy()
    assert after[3, 0] == before[3, 0] - 1.0 and after[3, 1] == before[3, 1]
    assert opt.records.params["emb/embeddings"].nan == 1


def test_bad_arguments_are_refused_early_and_clearly():
    with pytest.raises(ValueError, match="unknown policy 'ignore'"):
        nt.GuardedOptimizer(keras.optimizers.SGD(), policy="ignore")
    with pytest.raises(ValueError, match="max_consecutive` must be >= 1"):
        nt.GuardedOptimizer(keras.optimizers.SGD(), max_consecutive=0)
    with pytest.raises(TypeError, match="max_consecutive` must be an int"):
        nt.GuardedOptimizer(keras.optimizers.SGD(), max_consecutive=2.5)
    with pytest.raises(TypeError, match="must be a keras.optimizers.Optimizer"):
        nt.GuardedOptimizer(tf.keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9))
    with pytest.raises(ValueError, match="LossScaleOptimizer\\(GuardedOptimizer"):
        nt.GuardedOptimizer(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()))
    with pytest.raises(ValueError, match="clipnorm"):
        nt.GuardedOptimizer(keras.optimizers.SGD(), clipnorm=1.0)
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.SGD())
    with pytest.raises(ValueError, match="has not taken a step"):
        opt.records
    opt.apply_gradients(zip(gradients(model, GOOD), model.trainable_variables))
    with pytest.raises(ValueError, match="not among those the optimizer was built with"):
        opt.apply_gradients([(tf.ones((2,)), tf.Variable(tf.zeros((2,))))])
    with pytest.raises(TypeError, match="GuardCallback: `optimizer` must be a GuardedOptimizer"):
        nt.GuardCallback(keras.optimizers.SGD())


def test_max_consecutive_in_a_tf_function_loop_raises_from_the_step_and_good_steps_apply_again():
    # issue 31: 4 bad steps then 20 good ones left the weights frozen, with no error
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2), max_consecutive=3)
    step = stepper(model, opt, "function")
    errors = []
    for k in range(26):
        if k == 6:
            after_streak = bits(model.trainable_variables)
        try:
            step(BAD if 2 <= k < 6 else GOOD)
        except tf.errors.InvalidArgumentError as error:
            errors.append((k, str(error)))
    assert [k for k, _ in errors] == [4, 5]  # the 3rd bad step in a row, and the 4th
    assert "nanguard: 3 bad steps in a row (max_consecutive=3)" in errors[0][1]
    assert "net/head/bias (1 NaN, 0 Inf of 1)" in errors[0][1]
    assert "4 bad steps in a row" in errors[1][1]
    r = opt.records
    assert (r.steps, r.applied, r.skipped, r.raised, r.consecutive) == (26, 22, 2, 2, 0)
    assert bits(model.trainable_variables) != after_streak
    opt.check()  # delivered by the step: nothing left pending


def test_under_xla_a_raise_waits_for_check_and_good_steps_still_apply():
    # an XLA computation cannot raise; the host check delivers it, and nothing freezes
    model = make_model()
    opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2), policy="raise")
    step = stepper(model, opt, "xla")
    step(GOOD)
    step(BAD)
    before = bits(model.trainable_variables)
    step(GOOD)
    assert bits(model.trainable_variables) != before and opt.records.applied == 2
    with pytest.raises(nt.NonFiniteError, match="step 2: non-finite gradients in net/head/bias"):
        opt.check()
    opt.check()  # cleared once delivered
