"""Forward + backward time of every nanguard.jax safe op against its unsafe JAX counterpart.

Same run, interleaved rounds (see common.py), 1e6 elements, float32, CPU, one thread,
both sides under ``jax.jit``. Each case computes the op and the vector-Jacobian product of
an upstream cotangent with respect to every floating input. Prints a table of ratios to
native, then the median and the worst.

    python benchmarks/jax_ops.py [--rounds 20] [--only sqrt,softmax] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence

# one CPU thread, as the other op benchmarks: ratios, not throughput
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from common import compare, print_table  # noqa: E402

import nanguard.jax as ng  # noqa: E402

N = 1_000_000
ROWS, COLS = 1000, 1000


def _fwd_bwd(fn: Callable[..., jax.Array], inputs: Sequence[jax.Array]) -> Callable[[], object]:
    """A compiled closure: fn forward and the VJP of an upstream cotangent for every input."""
    upstream = jax.random.normal(jax.random.PRNGKey(1), jax.eval_shape(fn, *inputs).shape, jnp.float32)

    @jax.jit
    def step(*xs):
        out, pullback = jax.vjp(fn, *xs)
        return out, pullback(upstream)

    jax.block_until_ready(step(*inputs))  # compile outside the timing
    return lambda: jax.block_until_ready(step(*inputs))


def _textbook_cosine(a, c):
    return jnp.sum(a * c, -1) / (jnp.linalg.norm(a, axis=-1) * jnp.linalg.norm(c, axis=-1))


def cases() -> Dict[str, Dict[str, object]]:
    rng = np.random.default_rng(0)

    def const(a):
        return jnp.asarray(a, jnp.float32)

    vec = const(rng.standard_normal(N) * 4)
    positive = rng.random(N)
    positive[::100] = 0.0  # 1% exact zeros: the singular points the safe ops exist for
    positive = const(positive)
    mat = const(rng.standard_normal((ROWS, COLS)) * 3)
    keep = rng.random((ROWS, COLS)) > 0.2
    keep[::50] = False  # 2% of rows fully masked
    mask = jnp.asarray(keep)
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

    return {
        "softplus": dict(native=jax.nn.softplus, safe=ng.softplus, inputs=[vec]),
        "logaddexp": dict(native=jnp.logaddexp, safe=ng.logaddexp, inputs=[vec, b]),
        "logsumexp(where)": dict(native=lambda x: jax.nn.logsumexp(x, axis=-1, where=mask),
                                 safe=lambda x: ng.logsumexp(x, axis=-1, where=mask), inputs=[mat]),
        "softmax(where)": dict(native=lambda x: jax.nn.softmax(x, axis=-1, where=mask),
                               safe=lambda x: ng.softmax(x, axis=-1, where=mask), inputs=[mat]),
        "log_softmax": dict(native=lambda x: jax.nn.log_softmax(x, axis=-1),
                            safe=lambda x: ng.log_softmax(x, axis=-1), inputs=[mat]),
        "log_softmax(where)": dict(native=lambda x: jnp.where(mask, jax.nn.log_softmax(x, axis=-1, where=mask), 0.0),
                                   safe=lambda x: ng.log_softmax(x, axis=-1, where=mask), inputs=[mat]),
        "xlogy": dict(native=jax.scipy.special.xlogy, safe=ng.xlogy, inputs=[positive, positive + 0.5]),
        "entropy": dict(native=lambda p: -jnp.sum(p * jnp.log(p), -1), safe=ng.entropy, inputs=[probs]),
        "cross_entropy_probs": dict(native=lambda t, q: -jnp.sum(t * jnp.log(q), -1),
                                    safe=ng.cross_entropy_probs, inputs=[target, probs + 0.01]),
        "sqrt": dict(native=jnp.sqrt, safe=ng.sqrt, inputs=[positive]),
        "pow(1/3)": dict(native=lambda x: jnp.power(x, 1 / 3), safe=lambda x: ng.pow(x, 1 / 3), inputs=[positive]),
        "norm": dict(native=lambda x: jnp.linalg.norm(x, axis=-1), safe=lambda x: ng.norm(x, axis=-1), inputs=[mat]),
        "normalize": dict(native=lambda x: x / jnp.linalg.norm(x, axis=-1, keepdims=True), safe=ng.normalize,
                          inputs=[mat]),
        "cosine_similarity": dict(native=_textbook_cosine, safe=ng.cosine_similarity, inputs=[mat, other]),
        "distance_matrix": dict(native=lambda p: jnp.linalg.norm(p[:, None] - p[None], axis=-1),
                                safe=ng.distance_matrix, inputs=[points]),
        "div": dict(native=jnp.divide, safe=ng.div, inputs=[vec, b + 0.5]),
        "masked_mean": dict(native=lambda x: jnp.mean(x, axis=1, where=mask),
                            safe=lambda x: ng.masked_mean(x, mask, axis=1), inputs=[mat]),
        "var": dict(native=lambda x: jnp.var(x, -1), safe=lambda x: ng.var(x, axis=-1, correction=0), inputs=[mat]),
        "std": dict(native=lambda x: jnp.std(x, -1), safe=lambda x: ng.std(x, axis=-1, correction=0), inputs=[mat]),
        "acos": dict(native=jnp.arccos, safe=ng.acos, inputs=[unit]),
        "asin": dict(native=jnp.arcsin, safe=ng.asin, inputs=[unit]),
        "safe_where(log)": dict(native=lambda x: jnp.where(x > 0, jnp.log(x), 0.0),
                                safe=lambda x: ng.safe_where(x > 0, jnp.log, x), inputs=[positive]),
    }


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    chosen = cases()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    rows, ratios = [], {}
    for name, case in chosen.items():
        timed = compare({"native": _fwd_bwd(case["native"], case["inputs"]),
                         "nanguard": _fwd_bwd(case["safe"], case["inputs"])},
                        baseline="native", rounds=args.rounds, inner=3, warmup=2)
        ratios[name] = timed["nanguard"]["ratio"]
        rows.append([name, f"{timed['native']['seconds'] * 1e3:.2f}", f"{timed['nanguard']['seconds'] * 1e3:.2f}",
                     f"{ratios[name]:.2f}x"])
        print(f"  {name}: {ratios[name]:.2f}x", file=sys.stderr, flush=True)
    print(f"fwd+bwd, 1e6 float32 elements, jax.jit on {jax.default_backend()}, ratio = nanguard / native (same run)")
    print_table(rows, ["op", "native ms", "nanguard ms", "ratio"])
    median, worst = statistics.median(ratios.values()), max(ratios.items(), key=lambda kv: kv[1])
    print(f"median {median:.2f}x, worst {worst[1]:.2f}x ({worst[0]})")
    if args.json:
        Path(args.json).write_text(json.dumps({"mode": "jax.jit", "ratios": ratios, "median": median}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
