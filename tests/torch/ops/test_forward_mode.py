"""Forward-mode AD: torch.func.jvp, jacfwd, hessian and forward_ad dual numbers, for every op.

The jvp of each op is the transpose of its backward, so it must agree with reverse mode
(jacfwd == jacrev) on regular inputs and at every singular point of the contract, and the
Hessians built from it (forward over reverse) must be finite and match reverse over reverse.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import hessian, jacfwd, jacrev, jvp

from nanguard.core.vectors import VECTORS, Vector
from tests.contract.backends.torch_backend import contract_loss, fn, tensors
from tests.torch.ops.specs import SPEC_IDS, SPECS, Spec

VECTOR_IDS = [v.id for v in VECTORS]


def _argnums(n: int):
    return tuple(range(n))


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_jacfwd_matches_jacrev_on_regular_inputs(spec: Spec) -> None:
    inputs = spec.regular(torch.Generator().manual_seed(11))
    forward = jacfwd(spec.safe, argnums=_argnums(len(inputs)))(*inputs)
    reverse = jacrev(spec.safe, argnums=_argnums(len(inputs)))(*inputs)
    for f, r in zip(forward, reverse):
        torch.testing.assert_close(f, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_jvp_matches_the_textbook_directional_derivative(spec: Spec) -> None:
    """Against the textbook op's own (native) forward mode, where the textbook op is smooth."""
    g = torch.Generator().manual_seed(12)
    inputs = spec.regular(g)
    directions = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in inputs]
    _, ours = jvp(spec.safe, tuple(inputs), tuple(directions))
    try:
        _, textbook = jvp(spec.textbook, tuple(inputs), tuple(directions))
    except NotImplementedError as missing:  # torch.cdist has no forward AD; jacfwd == jacrev covers it
        pytest.skip(f"the textbook op has no forward mode in torch: {str(missing)[:80]}")
    torch.testing.assert_close(ours, textbook, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_forward_ad_dual_numbers_match_jvp(spec: Spec) -> None:
    g = torch.Generator().manual_seed(13)
    inputs = spec.regular(g)
    directions = [torch.randn(x.shape, generator=g, dtype=x.dtype) for x in inputs]
    _, expected = jvp(spec.safe, tuple(inputs), tuple(directions))
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, t) for x, t in zip(inputs, directions)]
        tangent = fwAD.unpack_dual(spec.safe(*duals)).tangent
    torch.testing.assert_close(tangent, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_jacfwd_matches_jacrev_at_singular_points(vector: Vector) -> None:
    op = fn(vector)
    inputs = tensors(vector, torch.float64, requires_grad=False)
    argnums = _argnums(len(inputs))
    forward = jacfwd(op, argnums=argnums)(*inputs)
    reverse = jacrev(op, argnums=argnums)(*inputs)
    for i, (f, r) in enumerate(zip(forward, reverse)):
        assert bool(torch.isfinite(f).all()), f"{vector.id}: non-finite forward-mode derivative of input {i}: {f}"
        torch.testing.assert_close(f, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vector", VECTORS, ids=VECTOR_IDS)
def test_hessian_is_finite_at_singular_points_and_matches_reverse_over_reverse(vector: Vector) -> None:
    inputs = tensors(vector, torch.float64, requires_grad=False)
    op = fn(vector)

    def loss(*xs):
        return contract_loss(op(*xs), vector)

    argnums = _argnums(len(inputs))
    forward_over_reverse = hessian(loss, argnums=argnums)(*inputs)
    reverse_over_reverse = jacrev(jacrev(loss, argnums=argnums), argnums=argnums)(*inputs)
    for row_f, row_r in zip(forward_over_reverse, reverse_over_reverse):
        for f, r in zip(row_f, row_r):
            assert bool(torch.isfinite(f).all()), f"{vector.id}: non-finite Hessian block {f}"
            torch.testing.assert_close(f, r, rtol=1e-12, atol=1e-12)


def test_hessian_of_a_loss_built_from_the_safe_ops() -> None:
    """A small model's loss: Gaussian-kernel distances, a masked softmax, entropy."""
    g = torch.Generator().manual_seed(14)
    points = torch.randn(4, 2, generator=g, dtype=torch.float64)
    mask = torch.tensor([[True, True, False, True]] * 4)
    import nanguard as ng

    def loss(x):
        d = ng.distance_matrix(x)  # zeros on the diagonal: a singular point of sqrt
        p = ng.softmax(-d, dim=-1, mask=mask)
        return ng.entropy(p).sum() + ng.std(ng.norm(x, dim=-1))

    h = hessian(loss)(points)
    assert h.shape == (4, 2, 4, 2) and bool(torch.isfinite(h).all())
    torch.testing.assert_close(h, jacrev(jacrev(loss))(points), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(h.reshape(8, 8), h.reshape(8, 8).T, rtol=1e-10, atol=1e-12)


def test_forward_mode_leaves_reverse_mode_memory_alone() -> None:
    """Keeping the inputs for jvp must not keep a freed intermediate alive in plain backward."""
    import gc
    import weakref

    import nanguard as ng

    x = torch.randn(1000, dtype=torch.float64, requires_grad=True)
    inner = x * 2
    ref = weakref.ref(inner)
    out = ng.sqrt(inner)  # sqrt saves its output for backward, not its input
    del inner
    gc.collect()
    assert ref() is None, "the input of sqrt is kept alive by the autograd graph"
    out.sum().backward()
