"""GuardedOptimizer overhead on a Keras transformer train step (same run, interleaved, 1 thread).

Two ``tf.function`` train steps over identical models and data, timed in interleaved rounds
(ratios within a round, median over rounds):

- plain:   tape.gradient(...); adam.apply_gradients(...)
- guarded: tape.gradient(...); GuardedOptimizer(adam).apply_gradients(...)   (policy "skip")

and the same two under XLA (``jit_compile=True``). Goal (issue 10): guarded <= 1.03x plain.

    .venv/bin/python benchmarks/tf_guard.py [--rounds 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras  # noqa: E402

from benchmarks.common import compare, print_table  # noqa: E402
from nanguard.tf import GuardedOptimizer  # noqa: E402

GOAL = 1.03


def transformer(d_model: int = 128, heads: int = 4, layers: int = 2, seq: int = 32) -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((seq, d_model))
    x = inputs
    for _ in range(layers):
        attn = keras.layers.MultiHeadAttention(heads, d_model // heads)(x, x)
        x = keras.layers.LayerNormalization()(x + attn)
        ff = keras.layers.Dense(4 * d_model, activation="relu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(d_model)(ff))
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def train_step(guarded: bool, jit_compile: bool, batch: int = 16, seq: int = 32, d_model: int = 128):
    model = transformer(d_model=d_model, seq=seq)
    adam = keras.optimizers.Adam(1e-4)
    opt = GuardedOptimizer(adam) if guarded else adam
    x = tf.random.stateless_normal((batch, seq, d_model), seed=(1, 2))
    y = tf.random.stateless_normal((batch, seq, 1), seed=(3, 4))

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return lambda: step().numpy(), opt


def apply_alone(rounds: int) -> dict:
    """apply_gradients alone on fixed transformer-sized gradients (no forward/backward), in a
    tf.function: the guard's own milliseconds, less diluted by the model and the noise."""
    cases = {}
    for name, guarded in (("adam.apply_gradients", False), ("guarded.apply_gradients", True)):
        model = transformer()
        adam = keras.optimizers.Adam(1e-4)
        opt = GuardedOptimizer(adam) if guarded else adam
        grads = [tf.fill(v.shape, 1e-3) for v in model.trainable_variables]

        @tf.function
        def apply(opt=opt, model=model, grads=grads):
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return opt.iterations

        cases[name] = (lambda apply=apply: apply().numpy())
    return compare(cases, baseline="adam.apply_gradients", rounds=rounds, inner=10)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    results = {}
    rows = []
    for label, jit in (("tf.function", False), ("XLA", True)):
        plain, _ = train_step(False, jit)
        guarded, opt = train_step(True, jit)
        r = compare({"plain": plain, "guarded": guarded}, baseline="plain", rounds=args.rounds, inner=args.inner)
        assert opt.records.applied > 0 and opt.records.skipped == 0, "the benchmark steps must be finite"
        results[label] = r
        for name, v in r.items():
            goal = "" if name == "plain" else f"<= {GOAL:.2f}"
            verdict = "" if name == "plain" else ("ok" if v["ratio"] <= GOAL else "OVER")
            rows.append([label, name, f"{v['seconds'] * 1e3:.2f}", f"{v['ratio']:.3f}", goal, verdict])
    print("Keras transformer train step (2 layers, d128, batch 16x32), Adam, 1 thread")
    print_table(rows, ["mode", "loop", "ms/step", "ratio", "goal", ""])
    alone = apply_alone(args.rounds)
    print()
    print("apply_gradients alone on the same gradients (no forward/backward), tf.function")
    base = alone["adam.apply_gradients"]["seconds"]
    print_table([[k, f"{v['seconds'] * 1e3:.3f}", f"{v['ratio']:.3f}", f"{(v['seconds'] - base) * 1e3:+.3f}"]
                 for k, v in alone.items()], ["part", "ms", "ratio", "guard ms"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"train_step": results, "apply_alone": alone}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
