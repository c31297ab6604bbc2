"""nanguard.jax.guarded on one device: skip (bitwise), zero, raise (eager and under jit),
counters, leaf paths, max_consecutive, and clear errors for bad arguments."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

optax = pytest.importorskip("optax")

import nanguard.jax as nj  # noqa: E402
from nanguard.core.guard_policy import decide  # noqa: E402

NAN, INF = float("nan"), float("inf")
INNERS = {
    "sgd_momentum": lambda: optax.sgd(0.1, momentum=0.9),
    "adam": lambda: optax.adam(1e-2),
    "adamw": lambda: optax.adamw(1e-2, weight_decay=0.1),
}


def params0():
    # -0.0 on purpose: a skipped step must not turn it into +0.0
    return {"dense": {"kernel": jnp.array([[1.0, -0.0], [2.0, 3.0]]), "bias": jnp.array([0.5, -1.5])},
            "layers": [jnp.array([1.0, 2.0, 3.0])]}


def grads(value=1.0, bad=None):
    g = jax.tree.map(lambda p: jnp.full_like(p, value), params0())
    if bad is not None:
        g["dense"]["bias"] = jnp.array([bad, 1.0])
    return g


def bits(tree):
    return [np.asarray(x).tobytes() for x in jax.tree.leaves(tree)]


def make_step(tx):
    @jax.jit
    def step(p, s, g):
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    return step


@pytest.mark.parametrize("name", sorted(INNERS))
def test_skip_leaves_params_and_inner_state_bitwise_unchanged_under_jit(name):
    tx = nj.guarded(INNERS[name]())
    step = make_step(tx)
    p, s = step(params0(), tx.init(params0()), grads(1.0))  # one real step first: non-trivial moments
    p_bad, s_bad = step(p, s, grads(0.5, bad=NAN))
    assert bits(p_bad) == bits(p)
    assert bits(s_bad.inner_state) == bits(s.inner_state)
    assert (int(s_bad.steps), int(s_bad.applied), int(s_bad.skipped)) == (2, 1, 1)
    # and the next finite step is exactly the step an unguarded (jitted) optimizer takes from there
    p_ref, s_ref = make_step(INNERS[name]())(p, s.inner_state, grads(0.25))
    p_next, s_next = step(p_bad, s_bad, grads(0.25))
    assert bits(p_next) == bits(p_ref)
    assert bits(s_next.inner_state) == bits(s_ref)


def test_finite_steps_are_the_inner_transformation_bit_for_bit():
    tx, inner = nj.guarded(optax.adam(1e-2)), optax.adam(1e-2)
    p, s = params0(), tx.init(params0())
    p_ref, s_ref = params0(), inner.init(params0())
    step, plain = make_step(tx), make_step(inner)  # both jitted: XLA may fuse differently from eager
    for k in range(3):
        g = grads(0.1 * (k + 1))
        p, s = step(p, s, g)
        p_ref, s_ref = plain(p_ref, s_ref, g)
    assert bits(p) == bits(p_ref) and bits(s.inner_state) == bits(s_ref)
    assert int(s.applied) == 3 and int(s.skipped) == 0 and nj.guard_records(s).bad_steps == []


def test_zero_replaces_only_the_nonfinite_elements():
    tx, inner = nj.guarded(optax.sgd(0.1, momentum=0.9), policy="zero"), optax.sgd(0.1, momentum=0.9)
    bad = grads(0.5, bad=INF)
    p, s = make_step(tx)(params0(), tx.init(params0()), bad)
    clean = jax.tree.map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), bad)
    p_ref, s_ref = make_step(inner)(params0(), inner.init(params0()), clean)
    assert bits(p) == bits(p_ref)
    assert bits(s.inner_state) == bits(s_ref)
    assert float(p["dense"]["bias"][0]) == 0.5  # the Inf element did not move
    records = nj.guard_records(s)
    assert (records.zeroed, records.skipped, records.applied, records.consecutive) == (1, 0, 0, 1)


def test_records_name_leaves_by_key_path_with_counts():
    tx = nj.guarded(optax.sgd(0.1))
    g = grads(1.0, bad=NAN)
    g["layers"][0] = jnp.array([INF, -INF, NAN])
    s = make_step(tx)(params0(), tx.init(params0()), g)[1]
    records = nj.guard_records(s)
    assert set(records.params) == {"dense.bias", "layers.0"}
    assert (records.params["dense.bias"].nan, records.params["dense.bias"].inf) == (1, 0)
    assert (records.params["layers.0"].nan, records.params["layers.0"].inf) == (1, 2)
    (event,) = records.events
    assert event.step == 1 and event.action == "skipped"
    assert {p.name: p.shape for p in event.params} == {"dense.bias": (2,), "layers.0": (3,)}
    assert "dense.bias" in records.summary() and "optax guard" in records.summary()


def test_raise_outside_jit_raises_at_once_with_the_leaf_paths():
    tx = nj.guarded(optax.adam(1e-2), policy="raise")
    s = tx.init(params0())
    with pytest.raises(nj.NonFiniteError, match=r"dense\.bias \[2\]: 1 NaN, 0 Inf"):
        tx.update(grads(1.0, bad=NAN), s, params0())
    u, s2 = tx.update(grads(1.0), s, params0())  # the caller's state is untouched: go on
    assert int(s2.applied) == 1


def test_raise_under_jit_halts_until_check_guard_delivers_it():
    tx = nj.guarded(optax.adam(1e-2), policy="raise")
    step = make_step(tx)
    p, s = step(params0(), tx.init(params0()), grads(1.0))
    nj.check_guard(s)  # nothing pending: no error
    p_bad, s_bad = step(p, s, grads(1.0, bad=INF))
    p_after, s_after = step(p_bad, s_bad, grads(1.0))  # halted: even a finite step does nothing
    assert bits(p_after) == bits(p) and bits(s_after.inner_state) == bits(s.inner_state)
    with pytest.raises(nj.NonFiniteError, match=r"step 2: non-finite gradients in dense\.bias") as info:
        nj.check_guard(s_after)
    assert info.value.report.raised == 1
    resumed = nj.resume_guard(s_after)
    nj.check_guard(resumed)
    p_go, s_go = step(p_after, resumed, grads(1.0))
    assert bits(p_go) != bits(p_after) and int(s_go.applied) == 2


@pytest.mark.parametrize("policy", ["skip", "zero"])
def test_max_consecutive_raises_instead_of_skipping_forever(policy):
    tx = nj.guarded(optax.sgd(0.1), policy=policy, max_consecutive=3)
    step = make_step(tx)
    p, s = params0(), tx.init(params0())
    for _ in range(2):
        p, s = step(p, s, grads(1.0, bad=NAN))
        nj.check_guard(s)
    p, s = step(p, s, grads(1.0))  # a finite step resets the streak
    for _ in range(2):
        p, s = step(p, s, grads(1.0, bad=NAN))
    nj.check_guard(s)
    p, s = step(p, s, grads(1.0, bad=NAN))
    with pytest.raises(nj.NonFiniteError, match="3 bad steps in a row"):
        nj.check_guard(s)
    assert int(s.longest_run) == 3 and int(s.halted) == 6


def test_decision_matches_the_core_policy_on_a_random_sequence():
    rng = np.random.default_rng(0)
    pattern = rng.random(40) < 0.6
    tx = nj.guarded(optax.sgd(0.1), policy="zero", max_consecutive=4)
    step = make_step(tx)
    p, s = params0(), tx.init(params0())
    run, expected = 0, []
    for k, is_bad in enumerate(pattern, start=1):
        p, s = step(p, s, grads(1.0, bad=NAN if is_bad else None))
        if is_bad:
            run += 1
            action, _ = decide("zero", run, 4)
            expected.append((k, action))
            if action == "raised":
                s = nj.resume_guard(s)
        else:
            run = 0
    got = [(e.step, e.action) for e in nj.guard_records(s).events]
    assert got == expected and any(a == "raised" for _, a in got)


def test_found_inside_a_chain_and_with_extra_args():
    tx = optax.chain(nj.guarded(optax.sgd(0.1)), optax.identity())
    s = tx.init(params0())
    _, s = tx.update(grads(1.0, bad=NAN), s, params0())
    assert nj.guard_records(s).skipped == 1
    lookahead = nj.guarded(optax.contrib.reduce_on_plateau() if hasattr(optax, "contrib") else optax.sgd(0.1))
    s2 = lookahead.init(params0())
    lookahead.update(grads(1.0), s2, params0(), value=jnp.asarray(1.0))  # extra args reach the inner


def test_integer_leaves_are_passed_through():
    p = {"w": jnp.array([1.0, 2.0]), "n": jnp.array([3], jnp.int32)}
    tx = nj.guarded(optax.set_to_zero())
    _, s = tx.update({"w": jnp.array([1.0, 1.0]), "n": jnp.array([0], jnp.int32)}, tx.init(p), p)
    assert int(s.applied) == 1


def test_bad_arguments_are_refused_early_and_clearly():
    with pytest.raises(ValueError, match="unknown policy 'ignore'"):
        nj.guarded(optax.sgd(0.1), policy="ignore")
    with pytest.raises(ValueError, match="max_consecutive` must be >= 1"):
        nj.guarded(optax.sgd(0.1), max_consecutive=0)
    with pytest.raises(TypeError, match="max_consecutive` must be an int"):
        nj.guarded(optax.sgd(0.1), max_consecutive="3")
    with pytest.raises(TypeError, match="must be an optax.GradientTransformation"):
        nj.guarded(lambda g: g)
    with pytest.raises(ValueError, match="max_events"):
        nj.guarded(optax.sgd(0.1), max_events=0)
    with pytest.raises(TypeError, match="axis_name"):
        nj.guarded(optax.sgd(0.1), axis_name=["batch", {}])
    tx = nj.guarded(optax.sgd(0.1))
    with pytest.raises(TypeError, match="must be the GuardState"):
        tx.update(grads(), optax.sgd(0.1).init(params0()), params0())
    with pytest.raises(ValueError, match="updates have 1 leaves but the parameters given to init had 3"):
        tx.update({"x": jnp.ones(2)}, tx.init(params0()), params0())
    with pytest.raises(TypeError, match="found 0"):
        nj.guard_records(optax.sgd(0.1).init(params0()))
