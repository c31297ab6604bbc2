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


def test_raise_under_jit_raises_from_the_step_and_the_caller_goes_on_from_its_state():
    tx = nj.guarded(optax.adam(1e-2), policy="raise")
    step = make_step(tx)
    p, s = step(params0(), tx.init(params0()), grads(1.0))
    nj.check_guard(s)  # nothing pending: no error
    with pytest.raises(Exception,
                       match=r"NonFiniteError: nanguard: step 2: non-finite gradients in dense\.bias"):
        step(p, s, grads(1.0, bad=INF))
    p_go, s_go = step(p, s, grads(1.0))  # the state the caller kept: the next step applies
    assert bits(p_go) != bits(p) and int(s_go.applied) == 2 and int(s_go.raised) == 0


@pytest.mark.parametrize("policy", ["skip", "zero"])
def test_max_consecutive_raises_instead_of_skipping_forever(policy):
    tx = nj.guarded(optax.sgd(0.1), policy=policy, max_consecutive=3)
    step = make_step(tx)
    p, s = params0(), tx.init(params0())
    for _ in range(2):
        p, s = step(p, s, grads(1.0, bad=NAN))
    p, s = step(p, s, grads(1.0))  # a finite step resets the streak
    for _ in range(2):
        p, s = step(p, s, grads(1.0, bad=NAN))
    with pytest.raises(Exception, match=r"3 bad steps in a row \(max_consecutive=3\)"):
        step(p, s, grads(1.0, bad=NAN))
    assert int(s.longest_run) == 2 and int(s.halted) == 0
    with pytest.raises(nj.NonFiniteError, match="3 bad steps in a row"):  # eager: at once
        tx.update(grads(1.0, bad=NAN), s, p)


def test_decision_matches_the_core_policy_on_a_random_sequence():
    rng = np.random.default_rng(0)
    pattern = rng.random(40) < 0.6
    tx = nj.guarded(optax.sgd(0.1), policy="zero", max_consecutive=4)
    step = make_step(tx)
    p, s = params0(), tx.init(params0())
    run, steps, expected, raised, expected_raised = 0, 0, [], [], []
    for k, is_bad in enumerate(pattern, start=1):
        try:
            p, s = step(p, s, grads(1.0, bad=NAN if is_bad else None))
        except Exception:
            raised.append(k)  # the caller keeps its state: this update never happened
        if not is_bad:
            run, steps = 0, steps + 1
            continue
        action, _ = decide("zero", run + 1, 4)
        if action == "raised":
            expected_raised.append(k)
            continue
        run, steps = run + 1, steps + 1
        expected.append((steps, action))
    got = [(e.step, e.action) for e in nj.guard_records(s).events]
    assert got == expected and raised == expected_raised != []
    assert int(s.steps) == steps == 40 - len(raised)


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


def test_max_consecutive_under_jit_raises_from_the_step_and_good_steps_apply_again():
    # the README's usage, jitted: 2 good steps, 4 bad, 20 good (issue 31: the parameters
    # stayed frozen with no error, "26 steps, 2 applied, 23 skipped, 1 raised")
    tx = nj.guarded(optax.adam(1e-2), max_consecutive=3)
    step = make_step(tx)
    p, s = params0(), tx.init(params0())
    errors = []
    for k in range(26):
        bad = 2 <= k < 6
        try:
            p, s = step(p, s, grads(1.0, bad=NAN if bad else None))
        except Exception as error:  # raised from the jitted step: the caller keeps its state
            errors.append((k, error))
    assert [k for k, _ in errors] == [4, 5]  # the 3rd bad step in a row, and the 4th
    message = str(errors[0][1])
    assert "3 bad steps in a row (max_consecutive=3)" in message and "dense.bias" in message
    r = nj.guard_records(s)
    assert (r.applied, r.skipped, r.raised, r.consecutive) == (22, 2, 0, 0)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(p))


def test_an_undelivered_raise_does_not_freeze_later_steps():
    # a state that still carries a raise (delivered by check_guard, not by the step) goes on
    # applying finite steps; check_guard still reports it
    tx = nj.guarded(optax.sgd(0.1), policy="raise")
    step = make_step(tx)
    p, s = step(params0(), tx.init(params0()), grads(1.0))
    pending = s.replace(halted=jnp.asarray(1, jnp.int32))
    p2, s2 = step(p, pending, grads(1.0))
    assert bits(p2) != bits(p) and int(s2.applied) == 2
    with pytest.raises(nj.NonFiniteError):
        nj.check_guard(s2)


def test_a_raise_under_vmap_names_the_member_that_raised():
    tx = nj.guarded(optax.sgd(0.1), max_consecutive=1)

    def one(p, s, g):
        u, s = tx.update(g, s, p)
        return optax.apply_updates(p, u), s

    step = jax.jit(jax.vmap(one))
    three = lambda tree: jax.tree.map(lambda x: jnp.stack([x, x, x]), tree)  # noqa: E731
    p, s = step(three(params0()), three(tx.init(params0())), three(grads(1.0)))
    assert np.asarray(s.applied).tolist() == [1, 1, 1]
    g = three(grads(1.0))
    g["layers"][0] = g["layers"][0].at[1, 2].set(NAN)  # member 1 only
    with pytest.raises(Exception, match=r"layers\.0 \[3\]: 1 NaN"):
        jax.block_until_ready(step(p, s, g))
