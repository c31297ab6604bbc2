"""Cost of leaving TensorFlow detection on: one Keras ``fit`` step of a 2-layer transformer (d128).

Same run, interleaved rounds, median of per-round ratios to the plain step: the plain step,
the step inside ``nanguard.tf.detect()`` (default mode), inside ``detect(exhaustive=True)``
(only with ``--exhaustive``: tracing this model with a check next to every op takes over 8
minutes and 7 GB), and with ``tf.debugging.enable_check_numerics()``. Each variant is its own copy of the model
(same weights) whose train step was traced under its own instrumentation; the train step is a
``tf.function`` without XLA (``check_numerics`` does not compile under XLA), then, separately,
plain vs default under XLA (``jit_compile=True``). Goal from the issue: default <= 1.05x plain.

    .venv/bin/python benchmarks/tf_detect.py [--rounds 15] [--steps 10] [--exhaustive]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import nanguard.tf as ngt  # noqa: E402

VOCAB, SEQ, BATCH, D, HEADS, FF, LAYERS = 1000, 64, 16, 128, 4, 256, 2
FIRST_STEP: Dict[tuple, float] = {}  # (variant, jit) -> seconds of the first step (tracing included)


def transformer(jit: bool) -> keras.Model:
    keras.utils.set_random_seed(0)
    tokens = keras.Input((SEQ,), dtype="int32")
    h = keras.layers.Embedding(VOCAB, D)(tokens)
    for _ in range(LAYERS):
        a = keras.layers.MultiHeadAttention(HEADS, D // HEADS)(h, h, use_causal_mask=True)
        h = keras.layers.LayerNormalization()(h + a)
        f = keras.layers.Dense(D)(keras.layers.Dense(FF, activation="gelu")(h))
        h = keras.layers.LayerNormalization()(h + f)
    model = keras.Model(tokens, keras.layers.Dense(VOCAB)(h))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=jit)
    return model


def data():
    rng = np.random.RandomState(0)
    return rng.randint(0, VOCAB, (BATCH, SEQ)).astype("int32"), rng.randint(0, VOCAB, (BATCH, SEQ)).astype("int32")


def variant(kind: str, jit: bool, steps: int) -> Callable[[], None]:
    """A callable running ``steps`` train steps of a fresh model instrumented as ``kind``."""
    model = transformer(jit)
    x, y = data()
    det = ngt.detect() if kind == "default" else ngt.detect(exhaustive=True) if kind == "exhaustive" else None
    if kind == "check_numerics":
        tf.debugging.enable_check_numerics()
    start = time.perf_counter()
    try:
        if det is not None:
            with det:
                model.train_on_batch(x, y)       # traces the train step under detection
        else:
            model.train_on_batch(x, y)
    finally:
        if kind == "check_numerics":
            tf.debugging.disable_check_numerics()
    FIRST_STEP[(kind, jit)] = time.perf_counter() - start

    def run() -> None:
        if det is not None:
            with det:
                for _ in range(steps):
                    model.train_on_batch(x, y)
        else:
            for _ in range(steps):
                model.train_on_batch(x, y)
    return run


def compare(cases: Dict[str, Callable[[], None]], baseline: str, rounds: int) -> Dict[str, Dict[str, float]]:
    names = list(cases)
    for name in names:
        cases[name]()
    samples: Dict[str, List[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            cases[name]()
            samples[name].append(time.perf_counter() - start)
    return {n: {"seconds": statistics.median(samples[n]),
                "ratio": statistics.median(s / b for s, b in zip(samples[n], samples[baseline]))} for n in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--exhaustive", action="store_true",
                        help="also time exhaustive=True (its first trace of this model takes over 8 minutes)")
    args = parser.parse_args()
    kinds = ("plain", "default") + (("exhaustive",) if args.exhaustive else ()) + ("check_numerics",)
    graph = {kind: variant(kind, False, args.steps) for kind in kinds}
    results = compare(graph, "plain", args.rounds)
    xla = compare({kind: variant(kind, True, args.steps) for kind in ("plain", "default")}, "plain", args.rounds)
    print(f"Keras fit step, transformer {LAYERS} layers d{D}, batch {BATCH} x {SEQ} tokens, "
          f"{args.rounds} interleaved rounds of {args.steps} steps (median of per-round ratios)")
    print(f"{'variant':<34} {'ms/step':>9} {'ratio':>7} {'first step s':>13}")
    for label, table, jit in (("tf.function", results, False), ("XLA", xla, True)):
        for name, r in table.items():
            print(f"{label + ' ' + name:<34} {1000 * r['seconds'] / args.steps:>9.2f} {r['ratio']:>6.3f}x "
                  f"{FIRST_STEP[(name, jit)]:>12.1f}")


if __name__ == "__main__":
    main()
