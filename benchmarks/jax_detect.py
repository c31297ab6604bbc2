"""Cost of leaving JAX detection on: one jitted training step of a small transformer (optax adam).

Same run, interleaved rounds (see benchmarks/common.py): the plain jitted step, the step inside
``nanguard.jax.detect()`` (with ``--exhaustive`` also ``exhaustive=True``, whose first call on
this model runs for over 5 minutes), the step under ``jax_debug_nans``
and ``jax_debug_infs`` (the same values nanguard checks by default), and the step under
``checkify(float_checks)`` + ``throw``.
Goal from issue 11: nanguard <= 1.05x.

It then checks that detection *localises*: a NaN planted in the forward (log of a negative
number) and one in the backward (sqrt at 0) of one layer must be reported at the exact line
and phase, and it times that one replay against a step.

    PYTHONPATH=. .venv/bin/python benchmarks/jax_detect.py [--rounds 30] [--quick] [--exhaustive]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from jax.experimental import checkify  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nanguard.jax as ngj  # noqa: E402
from benchmarks.common import compare, print_table  # noqa: E402

D_MODEL, HEADS, FF, LAYERS, BATCH, SEQ = 128, 4, 256, 4, 16, 32


def init_params(key):
    def dense(k, n_in, n_out):
        return jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in)
    params = []
    for layer_key in jax.random.split(key, LAYERS):
        k = jax.random.split(layer_key, 4)
        params.append({"qkv": dense(k[0], D_MODEL, 3 * D_MODEL), "out": dense(k[1], D_MODEL, D_MODEL),
                       "ff1": dense(k[2], D_MODEL, FF), "ff2": dense(k[3], FF, D_MODEL),
                       "g1": jnp.ones(D_MODEL), "g2": jnp.ones(D_MODEL)})
    return params


def layer_norm(x, gain):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gain


def block(p, x, fault):
    b, s, _ = x.shape
    q, k, v = jnp.split(layer_norm(x, p["g1"]) @ p["qkv"], 3, axis=-1)
    heads = lambda t: t.reshape(b, s, HEADS, D_MODEL // HEADS).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(D_MODEL // HEADS), axis=-1)
    x = x + (weights @ v).transpose(0, 2, 1, 3).reshape(b, s, D_MODEL) @ p["out"]
    x = x + jax.nn.gelu(layer_norm(x, p["g2"]) @ p["ff1"]) @ p["ff2"]
    if fault == "forward":
        x = x + jnp.log(jax.lax.stop_gradient(x[:1, :1, :1]) * 0 - 1)   # PLANTED-FORWARD
    elif fault == "backward":
        x = x + jnp.sqrt(x[:1, :1, :1] * 0)                               # PLANTED-BACKWARD
    return x


def make_step(fault=None):
    optimizer = optax.adam(1e-4)

    def loss_fn(params, x, y):
        for i, p in enumerate(params):
            x = block(p, x, fault if i == 2 else None)
        return jnp.mean((x.sum(-1, keepdims=True) - y) ** 2)

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    params = init_params(jax.random.PRNGKey(0))
    data = (jax.random.normal(jax.random.PRNGKey(1), (BATCH, SEQ, D_MODEL)),
            jax.random.normal(jax.random.PRNGKey(2), (BATCH, SEQ, 1)))
    return step, params, optimizer.init(params), data


def _cases(exhaustive: bool = False):
    step, params, state, (x, y) = make_step()
    jitted = jax.jit(step)
    checked = jax.jit(checkify.checkify(step, errors=checkify.float_checks))
    det = ngj.detect()
    thorough = ngj.detect(exhaustive=True)

    def plain():
        return jax.block_until_ready(jitted(params, state, x, y))

    def nanguard_detect():
        with det:
            return jax.block_until_ready(jitted(params, state, x, y))

    def nanguard_exhaustive():
        with thorough:
            return jax.block_until_ready(jitted(params, state, x, y))

    def debug_nans():
        with jax.debug_nans(True), jax.debug_infs(True):
            return jax.block_until_ready(jitted(params, state, x, y))

    def with_checkify():
        err, out = checked(params, state, x, y)
        err.throw()
        return jax.block_until_ready(out)

    cases = {"plain jit": plain, "nanguard.jax.detect()": nanguard_detect,
             "jax_debug_nans+infs": debug_nans, "checkify(float_checks)": with_checkify}
    if exhaustive:
        cases["detect(exhaustive=True)"] = nanguard_exhaustive
    return cases


def _localisation() -> list:
    source, first = inspect.getsourcelines(block)
    lines = {tag: first + i for i, text in enumerate(source) for tag in ("FORWARD", "BACKWARD")
             if f"PLANTED-{tag}" in text}
    rows = []
    for fault in ("forward", "backward"):
        step, params, state, (x, y) = make_step(fault)
        jitted = jax.jit(step)
        jax.block_until_ready(jitted(params, state, x, y))          # compiled outside the timing
        start = time.perf_counter()
        jax.block_until_ready(jitted(params, state, x, y))
        step_seconds = time.perf_counter() - start
        start = time.perf_counter()
        with ngj.detect(mode="record") as d:
            jitted(params, state, x, y)
        found_seconds = time.perf_counter() - start
        r = d.report
        ok = r is not None and r.phase == fault and r.line == lines[fault.upper()] and r.file == __file__
        rows.append([fault, f"{r.phase} of {r.forward_op or r.op} @ line {r.line}" if r else "nothing",
                     f"{found_seconds / step_seconds:.0f}x", "ok" if ok else "WRONG"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test, noisy numbers)")
    parser.add_argument("--exhaustive", action="store_true",
                        help="also time exhaustive=True (its first call on this model runs for over 5 minutes)")
    args = parser.parse_args(argv)
    rounds = 4 if args.quick else args.rounds
    results = compare(_cases(args.exhaustive), "plain jit", rounds=rounds, inner=args.inner)
    print(f"Jitted training step of a {LAYERS}-layer transformer (d_model={D_MODEL}, {HEADS} heads, ff={FF}, "
          f"batch {BATCH}x{SEQ}, optax.adam), CPU, jax {jax.__version__}; median of {rounds} interleaved rounds")
    print_table([[name, f"{r['seconds'] * 1e3:.2f}", f"{r['ratio']:.3f}x"] for name, r in results.items()],
                ["case", "ms/step", "vs plain"])
    ratio = results["nanguard.jax.detect()"]["ratio"]
    print(f"\ngoal nanguard.jax.detect(): <= 1.05x  measured {ratio:.3f}x  {'met' if ratio <= 1.05 else 'NOT MET'}\n")
    rows = _localisation()
    print_table(rows, ["planted", "reported", "replay vs step", "check"])
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
