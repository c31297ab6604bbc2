"""Run by test_tf_guard_mirrored.py in a fresh process: 2 logical CPU devices must be
configured before TensorFlow initialises its devices. Plants a NaN on one replica only and
prints, as JSON, what every replica did."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import nanguard.tf as nt  # noqa: E402

NAN = float("nan")


def replica_bits(variables):
    """[replica][variable] bytes of every component of each mirrored variable."""
    per = [[], []]
    for v in variables:
        tv = v.value if hasattr(v, "value") else v
        for r, component in enumerate(tv.values):
            per[r].append(np.asarray(component.numpy()).tobytes())
    return per


def custom_loop(policy: str, bad_replica: int) -> dict:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="hidden"),
                                  keras.layers.Dense(1, name="head")], name="net")
        opt = nt.GuardedOptimizer(keras.optimizers.Adam(1e-2), policy=policy)

    @tf.function
    def train(dist_x):
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum((model(x) - 1.0) ** 2) / 4.0
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))

        strategy.run(step, args=(dist_x,))

    def batch(bad: int):
        rows = [np.ones((2, 3), np.float32), np.ones((2, 3), np.float32) * 0.5]
        if bad >= 0:
            rows[bad][0, 1] = NAN
        return strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(rows[ctx.replica_id_in_sync_group]))

    train(batch(-1))
    before = replica_bits(model.trainable_variables), replica_bits(opt.inner_optimizer.variables)
    try:
        train(batch(bad_replica))
        error = None
    except tf.errors.InvalidArgumentError as e:  # policy "raise": the graph step fails
        error = str(e)
    after = replica_bits(model.trainable_variables), replica_bits(opt.inner_optimizer.variables)
    records = opt.records
    opt.check()  # nothing is left pending
    return {
        "error": error,
        "unchanged": [before[0][r] == after[0][r] and before[1][r] == after[1][r] for r in (0, 1)],
        "replicas_agree": after[0][0] == after[0][1] and after[1][0] == after[1][1],
        "finite": all(np.isfinite(np.frombuffer(b, np.float32)).all() for b in after[0][0]),
        "iterations": int(opt.iterations.numpy()),
        "counts": [records.applied, records.skipped, records.zeroed],
        "ranks": list(records.events[0].ranks),
        "names": [p.name for p in records.events[0].params],
        "summary": records.summary(),
    }


def fit() -> dict:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, name="head")], name="net")
        opt = nt.GuardedOptimizer(keras.optimizers.SGD(0.1, momentum=0.9))
        model.compile(optimizer=opt, loss="mse")
    x = np.ones((12, 3), np.float32)
    x[7, 2] = NAN  # global batch 4 = 2 rows per replica: batch 1, replica 1
    y = np.ones((12, 1), np.float32)
    model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    records = opt.records
    return {"bad_steps": records.bad_steps, "applied": records.applied, "ranks": list(records.events[0].ranks),
            "finite": all(np.isfinite(v.numpy()).all() for v in model.trainable_variables),
            "iterations": int(opt.iterations.numpy())}


if __name__ == "__main__":
    assert len(tf.config.list_logical_devices("CPU")) == 2
    mode = sys.argv[1]
    result = fit() if mode == "fit" else custom_loop(mode, int(sys.argv[2]))
    print("RESULT " + json.dumps(result))
