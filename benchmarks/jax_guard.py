"""nanguard.jax.guarded overhead on a jitted transformer train step (same run, interleaved).

Two jitted train steps over identical parameters and data, timed in interleaved rounds
(ratios within a round, median over rounds):

- plain:   grads = jax.grad(loss)(...); optax.adam(...).update(...)
- guarded: the same with nanguard.jax.guarded(optax.adam(...))   (policy "skip")

Goal (issue 11): guarded <= 1.03x plain.

    .venv/bin/python benchmarks/jax_guard.py [--rounds 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")  # one thread, like the torch benchmarks
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks.common import compare, print_table  # noqa: E402
from nanguard.jax import guard_records, guarded  # noqa: E402
from nanguard.jax.guard._optax import optax_module  # noqa: E402

GOAL = 1.03


def init_params(key, d_model: int = 128, layers: int = 2):
    def dense(k, n_in, n_out):
        return {"w": jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in), "b": jnp.zeros((n_out,))}

    keys = iter(jax.random.split(key, 8 * layers + 1))
    blocks = [{"q": dense(next(keys), d_model, d_model), "k": dense(next(keys), d_model, d_model),
               "v": dense(next(keys), d_model, d_model), "o": dense(next(keys), d_model, d_model),
               "ff1": dense(next(keys), d_model, 4 * d_model), "ff2": dense(next(keys), 4 * d_model, d_model),
               "ln1": {"scale": jnp.ones((d_model,))}, "ln2": {"scale": jnp.ones((d_model,))}}
              for _ in range(layers)]
    return {"blocks": blocks, "head": dense(next(keys), d_model, 1)}


def forward(params, x, heads: int = 4):
    def ln(h, p):
        mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
        return (h - mu) * jax.lax.rsqrt(var + 1e-5) * p["scale"]

    def lin(h, p):
        return h @ p["w"] + p["b"]

    for blk in params["blocks"]:
        b, s, d = x.shape
        split = lambda t: t.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(lin(x, blk["q"])), split(lin(x, blk["k"])), split(lin(x, blk["v"]))
        att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // heads), axis=-1) @ v
        x = ln(x + lin(att.transpose(0, 2, 1, 3).reshape(b, s, d), blk["o"]), blk["ln1"])
        x = ln(x + lin(jax.nn.relu(lin(x, blk["ff1"])), blk["ff2"]), blk["ln2"])
    return lin(x, params["head"])


def train_step(tx, batch: int = 16, seq: int = 32, d_model: int = 128):
    optax = optax_module()
    params = init_params(jax.random.PRNGKey(0), d_model)
    state = tx.init(params)
    x = jax.random.normal(jax.random.PRNGKey(1), (batch, seq, d_model))
    y = jax.random.normal(jax.random.PRNGKey(2), (batch, seq, 1))

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((forward(p, x) - y) ** 2))(params)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    box = {"params": params, "state": state}

    def run():
        box["params"], box["state"], loss = step(box["params"], box["state"])
        loss.block_until_ready()

    return run, box


def update_alone(optax, rounds: int) -> dict:
    """tx.update alone on fixed transformer-sized gradients (no forward/backward), jitted:
    the guard's own milliseconds, less diluted by the model and the machine's noise."""
    params = init_params(jax.random.PRNGKey(0))
    grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
    cases = {}
    for name, tx in (("adam.update", optax.adam(1e-4)), ("guarded(adam).update", guarded(optax.adam(1e-4)))):
        state = tx.init(params)
        fn = jax.jit(tx.update)
        cases[name] = (lambda fn=fn, state=state: jax.block_until_ready(fn(grads, state, params)))
    return compare(cases, baseline="adam.update", rounds=rounds, inner=20)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    optax = optax_module()
    plain, _ = train_step(optax.adam(1e-4))
    guarded_step, box = train_step(guarded(optax.adam(1e-4)))
    results = compare({"plain": plain, "guarded": guarded_step}, baseline="plain", rounds=args.rounds,
                      inner=args.inner)
    records = guard_records(box["state"])
    assert records.applied > 0 and records.skipped == 0, "the benchmark steps must be finite"
    rows = []
    for name, v in results.items():
        goal = "" if name == "plain" else f"<= {GOAL:.2f}"
        verdict = "" if name == "plain" else ("ok" if v["ratio"] <= GOAL else "OVER")
        rows.append([name, f"{v['seconds'] * 1e3:.2f}", f"{v['ratio']:.3f}", goal, verdict])
    print("jitted transformer train step (2 layers, d128, batch 16x32), optax.adam, 1 thread")
    print_table(rows, ["loop", "ms/step", "ratio", "goal", ""])
    alone = update_alone(optax, args.rounds)
    print()
    print("the update alone on the same gradients (no forward/backward)")
    print_table([[k, f"{v['seconds'] * 1e3:.3f}", f"{v['ratio']:.3f}",
                  f"{(v['seconds'] - alone['adam.update']['seconds']) * 1e3:+.3f}"] for k, v in alone.items()],
                ["part", "ms", "ratio", "guard ms"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"train_step": results, "update_alone": alone}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
