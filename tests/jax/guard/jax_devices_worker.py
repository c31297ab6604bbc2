"""Run by test_jax_guard_devices.py in a fresh process with 2 host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=2 must be set before JAX starts).
Plants a NaN on device 1 only and prints, as JSON, what each device decided."""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, PartitionSpec

import nanguard.jax as nj


def bits(tree):
    return [np.asarray(x).tobytes().hex() for x in jax.tree.leaves(tree)]


def run_pmap(policy: str) -> dict:
    """`policy` "local": skip without axis_name, so each device decides alone (the control)."""
    axis = None if policy == "local" else "batch"
    tx = nj.guarded(optax.adam(1e-2), policy="skip" if policy == "local" else policy, axis_name=axis)
    params = {"w": jnp.array([1.0, -0.0, 2.0]), "b": jnp.array([0.5])}

    def local_step(p, s, g):  # no pmean: each device sees only its own gradients
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    pstep = jax.pmap(local_step, axis_name="batch")
    replicate = lambda t: jax.tree.map(lambda x: jnp.stack([x, x]), t)  # noqa: E731
    p, s = replicate(params), replicate(tx.init(params))
    good = {"w": jnp.ones((2, 3)), "b": jnp.ones((2, 1))}
    p, s = pstep(p, s, good)
    bad = {"w": jnp.array([[1.0, 1.0, 1.0], [1.0, jnp.nan, 1.0]]), "b": jnp.ones((2, 1))}
    p2, s2 = pstep(p, s, bad)
    try:  # pmap runs asynchronously: a raise comes at the first touch of the step's outputs
        jax.block_until_ready((p2, s2))
    except Exception as e:  # policy "raise": from the host, as JAX wraps it
        return {"step_error": str(e)}
    out = {
        "unchanged": [bits(jax.tree.map(lambda x: x[d], p2)) == bits(jax.tree.map(lambda x: x[d], p)) for d in (0, 1)],
        "skipped": np.asarray(s2.skipped).tolist(),
        "applied": np.asarray(s2.applied).tolist(),
        "leaf_nan": np.asarray(s2.leaf_nan).tolist(),
        "devices_agree": bits(jax.tree.map(lambda x: x[0], s2)) == bits(jax.tree.map(lambda x: x[1], s2)),
        "event_devices": np.asarray(s2.event_devices)[:, 0].tolist(),
        "summary": nj.guard_records(s2).summary(),
    }
    try:
        nj.check_guard(s2)
        out["error"] = None
    except nj.NonFiniteError as e:
        out["error"] = str(e)
    return out


def run_shard_map() -> dict:
    from jax import shard_map

    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    tx = nj.guarded(optax.sgd(0.1, momentum=0.9), axis_name="data")
    params = {"w": jnp.array([1.0, 2.0])}
    state = tx.init(params)

    def local(p, s, g):  # g: this device's [1, 2] shard of the per-device gradients
        u, s = tx.update({"w": g[0]}, s, p)
        return optax.apply_updates(p, u), s

    fn = jax.jit(shard_map(local, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec(), PartitionSpec("data")),
                           out_specs=(PartitionSpec(), PartitionSpec()), check_vma=False))
    p1, s1 = fn(params, state, jnp.ones((2, 2)))
    p2, s2 = fn(p1, s1, jnp.array([[1.0, 1.0], [1.0, jnp.inf]]))  # the Inf is in device 1's shard only
    return {"finite_applied": int(s1.applied), "bad_skipped": int(s2.skipped),
            "bad_unchanged": bits(p2) == bits(p1), "bad_events": nj.guard_records(s2).bad_steps,
            "leaf_inf": np.asarray(s2.leaf_inf).tolist(), "devices": int(s2.event_devices[0])}


if __name__ == "__main__":
    assert jax.device_count() == 2, jax.devices()
    which = sys.argv[1]
    result = run_shard_map() if which == "shard_map" else run_pmap(which)
    print("RESULT " + json.dumps(result))
