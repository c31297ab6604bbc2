"""distance_matrix's matmul path (eager CPU, >= 8 features): as accurate as the difference
kernel for every pair, near pairs included, with the same conventions at d = 0."""

from __future__ import annotations

import pytest
import torch

import nanguard as ng
from nanguard.torch.ops import distance

EXACT = "donot_use_mm_for_euclid_dist"


def _reference(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
    """Distances and gradients of sum(D * w) in float64 from the differences."""
    xd = x.detach().double().requires_grad_()
    yd = y.detach().double().requires_grad_()
    d = torch.cdist(xd, yd, compute_mode=EXACT)
    gx, gy = torch.autograd.grad((d * w.double()).sum(), [xd, yd])
    return d, gx, gy


def _close_rows(n: int, features: int, offset: float, dtype: torch.dtype) -> torch.Tensor:
    """Points far from the origin with duplicates and neighbours at 1e-3 and 1e-6 relative."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g, dtype=torch.float64) + offset
    x[1] = x[0]
    x[3] = x[2] + 1e-3 * torch.randn(features, generator=g, dtype=torch.float64)
    x[5] = x[4] + 1e-6 * torch.randn(features, generator=g, dtype=torch.float64)
    return x.to(dtype)


@pytest.mark.parametrize("dtype,ulps", [(torch.float32, 8), (torch.float64, 8)])
@pytest.mark.parametrize("offset", [0.0, 100.0])
@pytest.mark.parametrize("two_sets", [False, True])
def test_matmul_path_is_accurate_for_every_pair(dtype, ulps, offset, two_sets) -> None:
    x = _close_rows(40, 16, offset, dtype).requires_grad_()
    y = _close_rows(40, 16, offset, dtype).flip(0).requires_grad_() if two_sets else x
    assert distance._use_gram(x.detach(), y.detach())
    out = ng.distance_matrix(x, y if two_sets else None)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    grads = torch.autograd.grad((out * w).sum(), [x, y] if two_sets else [x])
    ref, gx, gy = _reference(x, y, w)
    eps = torch.finfo(dtype).eps
    err = (out.double() - ref).abs()
    assert bool((err <= ulps * eps * ref).all()), f"max relative error {(err / ref.clamp_min(1e-300)).max()}"
    assert bool((out[ref == 0] == 0).all())
    expected = [gx, gy] if two_sets else [gx + gy]
    for g, r in zip(grads, expected):
        # a gradient sums many terms: compare against the sum of their magnitudes
        scale = (w.abs().double().sum(-1, keepdim=True) if g is grads[0] else w.abs().double().sum(0).unsqueeze(-1))
        assert bool(((g.double() - r).abs() <= 64 * eps * scale.expand_as(r).clamp_min(1)).all())


def test_duplicates_have_zero_distance_and_zero_gradient_between_them() -> None:
    x = torch.randn(12, 8, dtype=torch.float64)
    x[4] = x[7]
    x.requires_grad_()
    d = ng.distance_matrix(x)
    assert d[4, 7].item() == 0.0 and d[7, 4].item() == 0.0 and bool((torch.diagonal(d) == 0).all())
    # only the pair (4, 7) in the loss: its gradient is the convention's 0, not NaN
    mask = torch.zeros(12, 12, dtype=torch.float64)
    mask[4, 7] = 1.0
    (g,) = torch.autograd.grad((d * mask).sum(), x)
    assert bool((g == 0).all())


def test_all_rows_identical_give_zero_matrix_and_zero_gradient() -> None:
    x = torch.ones(6, 10, requires_grad=True)  # every point at the centre: |x - c|² = 0
    d = ng.distance_matrix(x)
    d.sum().backward()
    assert bool((d == 0).all()) and bool((x.grad == 0).all())


@pytest.mark.parametrize("scale", [1e-25, 1e-40])
def test_tiny_coordinates_fall_back_to_the_exact_difference_path(scale) -> None:
    x = (torch.randn(20, 9, dtype=torch.float64) * scale).float()
    out = ng.distance_matrix(x)
    ref = torch.cdist(x.double(), x.double(), compute_mode=EXACT)
    off = ~torch.eye(20, dtype=torch.bool)
    assert bool((out[off] > 0).all())
    # float32 subnormals are multiples of 2**-149: that is the precision left at 1e-40
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=4 * 2.0**-149)


def test_huge_coordinates_do_not_overflow() -> None:
    x = torch.randn(20, 9) * 1e18
    assert not distance._use_gram(x, x)
    out = ng.distance_matrix(x)
    ref = torch.cdist(x.double(), x.double(), compute_mode=EXACT)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=0.0)


def test_batched_and_broadcast_batches_match_the_exact_kernel() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 30, 9, generator=g, dtype=torch.float64).requires_grad_()
    y = torch.randn(3, 20, 9, generator=g, dtype=torch.float64).requires_grad_()
    out = ng.distance_matrix(x, y)
    ref = torch.cdist(x, y.expand(2, 3, 20, 9), compute_mode=EXACT)
    torch.testing.assert_close(out, ref, rtol=1e-13, atol=0.0)
    w = torch.randn(out.shape, generator=g, dtype=torch.float64)
    ours = torch.autograd.grad((out * w).sum(), [x, y])
    theirs = torch.autograd.grad((ref * w).sum(), [x, y])
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_nan_row_poisons_only_its_distances() -> None:
    x = torch.randn(10, 12)
    x[3, 5] = float("nan")
    out = ng.distance_matrix(x)
    nan = torch.isnan(out)
    assert bool(nan[3].all()) and bool(nan[:, 3].all()) and int(nan.sum()) == 19


@pytest.mark.parametrize("features", [3, 16])
def test_self_distance_gradient_with_an_asymmetric_upstream_gradient(features) -> None:
    # y is x: the gradient through both arguments is computed in one pass; the upstream
    # gradient need not be symmetric
    g = torch.Generator().manual_seed(4)
    x = torch.randn(30, features, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(30, 30, generator=g, dtype=torch.float64)
    (ours,) = torch.autograd.grad((ng.distance_matrix(x) * w).sum(), x)
    (ref,) = torch.autograd.grad((torch.cdist(x, x, compute_mode=EXACT) * w).sum(), x)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(ng.distance_matrix, (x,))


@pytest.mark.parametrize("features", [3, 16])
@pytest.mark.parametrize("two_sets", [False, True])
def test_create_graph_gradient_is_as_accurate_as_the_fast_one(features, two_sets) -> None:
    # the differentiable backward splits far pairs (matmuls) from near ones (differences)
    # as the fast one does: duplicates and neighbours at 1e-6 keep their exact gradient
    x = _close_rows(40, features, 100.0, torch.float64).requires_grad_()
    y = _close_rows(40, features, 100.0, torch.float64).flip(0).requires_grad_() if two_sets else x
    w = torch.randn(40, 40, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    wrt = [x, y] if two_sets else [x]
    fast = torch.autograd.grad((ng.distance_matrix(x, y if two_sets else None) * w).sum(), wrt)
    graph = torch.autograd.grad((ng.distance_matrix(x, y if two_sets else None) * w).sum(), wrt,
                                create_graph=True)
    _, gx, gy = _reference(x, y, w)
    for ours, ref in zip(graph, [gx, gy] if two_sets else [gx + gy]):
        assert ours.requires_grad
        torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)
    for a, b in zip(graph, fast):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    # second order through the split, near pairs included (finite differences need them
    # farther apart than 1e-6, and no duplicates: a kink)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(12, features, generator=g, dtype=torch.float64) + 10.0
    z[1] = z[0] + 0.05 * torch.randn(features, generator=g, dtype=torch.float64)
    near = distance._near_pairs(ng.distance_matrix(z).pow(2).fill_diagonal_(float("inf")),
                                (z - z.mean(0)).pow(2).sum(-1), (z - z.mean(0)).pow(2).sum(-1))
    assert near[0].numel() > 0
    v = w[:12, :12]
    assert torch.autograd.gradgradcheck(lambda a: (ng.distance_matrix(a) * v).sum(), (z.requires_grad_(),))


def test_create_graph_keeps_no_rows_by_pairs_by_features_tensor() -> None:
    # the second backward needs O(n·m) memory, not the n·m·d tensor of explicit differences
    # (at 1024 x 64 that was 528 MiB against cdist's 13 MiB)
    n, d = 64, 32
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(2)).requires_grad_()
    largest = []

    def pack(t):
        largest.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        (g,) = torch.autograd.grad(ng.distance_matrix(x).sum(), x, create_graph=True)
    assert max(largest) < n * n * d / 4, max(largest)
    (h,) = torch.autograd.grad(g.pow(2).sum(), x)
    assert bool(torch.isfinite(h).all())


def test_branch_free_path_stays_in_the_inputs_dtype(monkeypatch) -> None:
    # compile, vmap and accelerators cannot look at values: that path once computed every
    # float32 distance matrix a second time in float64 (slow on most accelerators)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Dtypes(TorchDispatchMode):
        seen = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor):
                    self.seen.add(t.dtype)
            return out

    g = torch.Generator().manual_seed(5)
    x = torch.randn(20, 3, generator=g)
    x[3] = x[2]
    x[5] = 1e25                                    # squares overflow float32: the rescue runs
    eager = ng.distance_matrix(x.double()).float()
    monkeypatch.setattr(distance, "can_branch_on_data", lambda t: False)
    leaf = x.clone().requires_grad_()
    with Dtypes() as spy:
        out = ng.distance_matrix(leaf)
        (grad,) = torch.autograd.grad(out.sum(), leaf)
    assert torch.float64 not in spy.seen
    torch.testing.assert_close(out, eager, rtol=2e-6, atol=0.0)
    assert out[2, 3] == 0 and bool(torch.isfinite(grad).all())
    wide = x.double().requires_grad_()
    monkeypatch.undo()
    (ref,) = torch.autograd.grad(ng.distance_matrix(wide).sum(), wide)
    torch.testing.assert_close(grad, ref.float(), rtol=1e-5, atol=1e-5)
