"""torch.func (grad, vmap) and torch.compile(fullgraph=True) for every op.

Under these transforms the ops take their branch-free code paths, so the singular-point
table is replayed through them too, not only regular inputs.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch.func import grad, vmap

from nanguard.core.contract_rows import ALL_VECTORS
from nanguard.core.vectors import DTYPES, SECOND_ORDER_DTYPES, VECTORS, Vector
from tests.contract.backends.torch_backend import TorchBackend, contract_loss, fn, tensors
from tests.contract.checks import check_second_derivative, check_value_and_grads
from tests.torch.ops.helpers import assert_close
from tests.torch.ops.specs import SPEC_IDS, SPECS, Spec, weights_for


FUNC = TorchBackend("func")


def _weighted_loss(spec: Spec, w: torch.Tensor):
    return lambda *xs: (spec.safe(*xs) * w).sum()


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_func_grad_matches_autograd(spec: Spec) -> None:
    inputs = spec.regular(torch.Generator().manual_seed(4))
    w = weights_for(spec.safe(*inputs))
    loss = _weighted_loss(spec, w)
    argnums = tuple(range(len(inputs)))
    ours = grad(loss, argnums=argnums)(*inputs)
    leaves = [t.clone().requires_grad_() for t in inputs]
    expected = torch.autograd.grad(loss(*leaves), leaves)
    for a, b in zip(ours, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_vmap_matches_a_loop(spec: Spec) -> None:
    g = torch.Generator().manual_seed(5)
    samples = [spec.regular(g) for _ in range(3)]
    batched = [torch.stack(parts) for parts in zip(*samples)]
    ours = vmap(spec.safe)(*batched)
    expected = torch.stack([spec.safe(*s) for s in samples])
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_backward_through_vmap_matches_a_loop(spec: Spec) -> None:
    # loss = vmap(op)(x).sum(); loss.backward(): torch's vmap rule keeps one record of what
    # a context saves for backward and for forward mode, which must then agree
    g = torch.Generator().manual_seed(7)
    samples = [spec.regular(g) for _ in range(3)]
    w = weights_for(spec.safe(*samples[0]))
    batched = [torch.stack(parts).requires_grad_() for parts in zip(*samples)]
    ours = torch.autograd.grad((vmap(spec.safe)(*batched) * w).sum(), batched)
    leaves = [[t.clone().requires_grad_() for t in s] for s in samples]
    loss = sum((spec.safe(*xs) * w).sum() for xs in leaves)
    expected = torch.autograd.grad(loss, [t for xs in leaves for t in xs])
    per_input = [torch.stack(expected[i::len(batched)]) for i in range(len(batched))]
    for a, b in zip(ours, per_input):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_vmap_of_grad_matches_a_loop(spec: Spec) -> None:
    g = torch.Generator().manual_seed(6)
    samples = [spec.regular(g) for _ in range(2)]
    w = weights_for(spec.safe(*samples[0]))
    per_sample = grad(_weighted_loss(spec, w))
    ours = vmap(per_sample)(*[torch.stack(parts) for parts in zip(*samples)])
    expected = torch.stack([per_sample(*s) for s in samples])
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("row", ALL_VECTORS, ids=[v.id for v in ALL_VECTORS])
def test_func_grad_and_vmap_keep_the_contract(row: Vector, dtype: str) -> None:
    """The whole contract table through torch.func.grad (derivatives) and vmap (value)."""
    check_value_and_grads(FUNC, row, dtype)


@pytest.mark.parametrize("dtype", SECOND_ORDER_DTYPES)
@pytest.mark.parametrize("row", ALL_VECTORS, ids=[v.id for v in ALL_VECTORS])
def test_func_grad_of_grad_keeps_the_contract(row: Vector, dtype: str) -> None:
    check_second_derivative(FUNC, row, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("row", VECTORS, ids=[v.id for v in VECTORS])
def test_compile_fullgraph_keeps_the_singular_point_conventions(row: Vector) -> None:
    torch._dynamo.reset()
    dtype = torch.float32
    op = fn(row)
    compiled = torch.compile(lambda *xs: contract_loss(op(*xs), row), fullgraph=True,
                             backend="aot_eager")
    inputs = tensors(row, dtype)
    grads = torch.autograd.grad(compiled(*inputs), inputs, allow_unused=True)
    for i, (g, expected) in enumerate(zip(grads, row.grads)):
        g = torch.zeros_like(inputs[i]) if g is None else g
        assert_close(g, expected, dtype, f"{row.id} compiled gradient of input {i}")


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_compile_fullgraph_has_no_graph_break(spec: Spec) -> None:
    torch._dynamo.reset()
    inputs = spec.regular(torch.Generator().manual_seed(7))
    w = weights_for(spec.safe(*inputs))
    loss = _weighted_loss(spec, w)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    leaves = [t.clone().requires_grad_() for t in inputs]
    value = compiled(*leaves)
    grads = torch.autograd.grad(value, leaves)
    ref_leaves = [t.clone().requires_grad_() for t in inputs]
    ref = loss(*ref_leaves)
    ref_grads = torch.autograd.grad(ref, ref_leaves)
    torch.testing.assert_close(value, ref)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_inductor_compiles_every_op_in_one_graph() -> None:
    """The real compiler (inductor), once for all ops together to keep CI time down."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(8)
    all_inputs = [spec.regular(g) for spec in SPECS]
    weights = [weights_for(spec.safe(*xs)) for spec, xs in zip(SPECS, all_inputs)]

    def total(*flat):
        out, i = 0.0, 0
        for spec, xs, w in zip(SPECS, all_inputs, weights):
            n = len(xs)
            out = out + (spec.safe(*flat[i:i + n]) * w).sum()
            i += n
        return out

    flat = [t.clone().requires_grad_() for xs in all_inputs for t in xs]
    compiled = torch.compile(total, fullgraph=True)
    value = compiled(*flat)
    grads = torch.autograd.grad(value, flat)
    ref_flat = [t.clone().requires_grad_() for xs in all_inputs for t in xs]
    ref = total(*ref_flat)
    ref_grads = torch.autograd.grad(ref, ref_flat)
    torch.testing.assert_close(value, ref, rtol=1e-9, atol=1e-9)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9)
