"""Forward + backward time of every nanguard.tf safe op against its unsafe TensorFlow counterpart.

Same run, interleaved rounds (see common.py), 1e6 elements, float32, CPU, one intra-op
thread, everything inside ``tf.function`` (graph mode; ``--jit`` compiles both sides with
XLA). Each case computes the op and the gradient of ``sum(out * upstream)`` with respect to
every floating input. Prints a table of ratios to native, then the median and the worst.

    python benchmarks/tf_ops.py [--rounds 20] [--only sqrt,softmax] [--jit] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from common import compare, print_table  # noqa: E402

import nanguard.tf as ng  # noqa: E402

N = 1_000_000
ROWS, COLS = 1000, 1000
NEG_INF = float("-inf")


def _fwd_bwd(fn: Callable[..., tf.Tensor], inputs: Sequence[tf.Tensor], jit: bool) -> Callable[[], object]:
    """A compiled closure returning fn's value and the gradient of sum(out * upstream) for every input."""
    upstream = tf.random.stateless_normal(fn(*inputs).shape, seed=[1, 2])

    @tf.function(jit_compile=jit, autograph=False)
    def step(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            out = fn(*xs)
        # the value is returned too: a training step uses it, and a graph that returns only the
        # gradients lets grappler prune the forward ops the gradients do not read
        return out, tape.gradient(out, xs, output_gradients=upstream)

    step(*inputs)  # trace outside the timing
    return lambda: step(*inputs)


def cases() -> Dict[str, Dict[str, object]]:
    rng = np.random.default_rng(0)

    def const(a):
        return tf.constant(a, tf.float32)

    vec = const(rng.standard_normal(N) * 4)
    positive = rng.random(N)
    positive[::100] = 0.0  # 1% exact zeros: the singular points the safe ops exist for
    positive = const(positive)
    mat = const(rng.standard_normal((ROWS, COLS)) * 3)
    keep = rng.random((ROWS, COLS)) > 0.2
    keep[::50] = False  # 2% of rows fully masked
    mask = tf.constant(keep)
    logits = rng.standard_normal((ROWS, COLS))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    probs[:, ::10] = 0.0
    target = np.roll(probs, 1, axis=1)
    probs, target = const(probs), const(target)
    unit = const(rng.random(N) * 2 - 1)
    points = const(rng.standard_normal((ROWS, 3)))
    b = rng.standard_normal(N)
    b[::100] = 0.0
    b = const(b)
    other = const(rng.standard_normal((ROWS, COLS)))

    def masked(x):
        return tf.where(mask, x, NEG_INF)

    return {
        "softplus": dict(native=tf.nn.softplus, safe=ng.softplus, inputs=[vec]),
        "logaddexp": dict(native=tf.experimental.numpy.logaddexp, safe=ng.logaddexp, inputs=[vec, b]),
        "logsumexp(mask)": dict(native=lambda x: tf.reduce_logsumexp(masked(x), axis=-1),
                                safe=lambda x: ng.logsumexp(x, axis=-1, mask=mask), inputs=[mat]),
        "softmax(mask)": dict(native=lambda x: tf.nn.softmax(masked(x), axis=-1),
                              safe=lambda x: ng.softmax(x, axis=-1, mask=mask), inputs=[mat]),
        "log_softmax": dict(native=lambda x: tf.nn.log_softmax(x, axis=-1),
                            safe=lambda x: ng.log_softmax(x, axis=-1), inputs=[mat]),
        "log_softmax(mask)": dict(native=lambda x: tf.where(mask, tf.nn.log_softmax(masked(x), axis=-1), 0.0),
                                  safe=lambda x: ng.log_softmax(x, axis=-1, mask=mask), inputs=[mat]),
        "xlogy": dict(native=tf.math.xlogy, safe=ng.xlogy, inputs=[positive, positive + 0.5]),
        "entropy": dict(native=lambda p: -tf.reduce_sum(p * tf.math.log(p), -1), safe=ng.entropy, inputs=[probs]),
        "cross_entropy_probs": dict(native=lambda t, q: -tf.reduce_sum(t * tf.math.log(q), -1),
                                    safe=ng.cross_entropy_probs, inputs=[target, probs + 0.01]),
        "sqrt": dict(native=tf.sqrt, safe=ng.sqrt, inputs=[positive]),
        "pow(1/3)": dict(native=lambda x: tf.pow(x, 1 / 3), safe=lambda x: ng.pow(x, 1 / 3), inputs=[positive]),
        "norm": dict(native=lambda x: tf.norm(x, axis=-1), safe=lambda x: ng.norm(x, axis=-1), inputs=[mat]),
        "normalize": dict(native=lambda x: tf.math.l2_normalize(x, -1), safe=ng.normalize, inputs=[mat]),
        "cosine_similarity": dict(
            native=lambda a, c: tf.reduce_sum(tf.math.l2_normalize(a, -1) * tf.math.l2_normalize(c, -1), -1),
            safe=ng.cosine_similarity, inputs=[mat, other]),
        "distance_matrix": dict(native=lambda p: tf.norm(p[:, None] - p[None], axis=-1),
                                safe=ng.distance_matrix, inputs=[points]),
        "div": dict(native=tf.math.divide, safe=ng.div, inputs=[vec, b + 0.5]),
        "masked_mean": dict(native=lambda x: tf.reduce_sum(x * tf.cast(mask, x.dtype), 1)
                            / tf.reduce_sum(tf.cast(mask, x.dtype), 1),
                            safe=lambda x: ng.masked_mean(x, mask, axis=1), inputs=[mat]),
        "var": dict(native=lambda x: tf.math.reduce_variance(x, -1), safe=lambda x: ng.var(x, axis=-1, correction=0),
                    inputs=[mat]),
        "std": dict(native=lambda x: tf.math.reduce_std(x, -1), safe=lambda x: ng.std(x, axis=-1, correction=0),
                    inputs=[mat]),
        "acos": dict(native=tf.acos, safe=ng.acos, inputs=[unit]),
        "asin": dict(native=tf.asin, safe=ng.asin, inputs=[unit]),
        "safe_where(log)": dict(native=lambda x: tf.where(x > 0, tf.math.log(x), 0.0),
                                safe=lambda x: ng.safe_where(x > 0, tf.math.log, x), inputs=[positive]),
    }


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--jit", action="store_true", help="compile both sides with XLA")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    chosen = cases()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    rows, ratios = [], {}
    for name, case in chosen.items():
        timed = compare({"native": _fwd_bwd(case["native"], case["inputs"], args.jit),
                         "nanguard": _fwd_bwd(case["safe"], case["inputs"], args.jit)},
                        baseline="native", rounds=args.rounds, inner=3, warmup=2)
        ratios[name] = timed["nanguard"]["ratio"]
        rows.append([name, f"{timed['native']['seconds'] * 1e3:.2f}", f"{timed['nanguard']['seconds'] * 1e3:.2f}",
                     f"{ratios[name]:.2f}x"])
        print(f"  {name}: {ratios[name]:.2f}x", file=sys.stderr, flush=True)
    mode = "tf.function(jit_compile=True)" if args.jit else "tf.function (graph)"
    print(f"fwd+bwd, 1e6 float32 elements, {mode}, ratio = nanguard / native (same run)")
    print_table(rows, ["op", "native ms", "nanguard ms", "ratio"])
    median, worst = statistics.median(ratios.values()), max(ratios.items(), key=lambda kv: kv[1])
    print(f"median {median:.2f}x, worst {worst[1]:.2f}x ({worst[0]})")
    if args.json:
        Path(args.json).write_text(json.dumps({"mode": mode, "ratios": ratios, "median": median}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
