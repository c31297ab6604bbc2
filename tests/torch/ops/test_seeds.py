"""The seed stories' exact examples, replayed against nanguard's ops."""

from __future__ import annotations

import torch

import nanguard as ng
from nanguard.stories.distance_matrix_nan import (
    compute_distance_matrix,  # the seed, written once
)


def test_softplus_seed_where_trick_is_nan_and_nanguard_is_not() -> None:
    x = torch.tensor([0.0, 1.0, 100.0], requires_grad=True)
    exp = x.exp()
    naive = x.where(torch.isinf(exp), exp.log1p())
    naive.sum().backward()
    assert torch.isnan(x.grad[2]), "the seed's bug should reproduce with plain torch"

    x.grad = None
    y = ng.softplus(x)
    y.sum().backward()
    torch.testing.assert_close(y, torch.tensor([0.6931, 1.3133, 100.0]), atol=1e-4, rtol=0)
    torch.testing.assert_close(x.grad, torch.tensor([0.5, 0.7311, 1.0]), atol=1e-4, rtol=0)


def test_entropy_seed_values() -> None:
    p = torch.tensor([0.1, 0.2, 0.0, 0.7], requires_grad=True)
    e = ng.entropy(p)
    e.backward()
    assert abs(e.item() - 0.80181855) < 1e-7
    torch.testing.assert_close(p.grad, torch.tensor([1.30258512, 0.60943794, 0.0, -0.64332503]))


def test_double_where_seed_gradient() -> None:
    x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    naive = torch.where(x != 0, 1 / x, torch.zeros_like(x))
    (g_naive,) = torch.autograd.grad(naive.sum(), x)
    assert torch.isnan(g_naive[1])
    ng.safe_where(x != 0, lambda v: 1 / v, x).sum().backward()
    assert x.grad.tolist() == [-1.0, 0.0, -1.0]


def test_distance_matrix_seed_adam_loop_trains() -> None:
    torch.manual_seed(0)
    pred_start = torch.randn(10, 3)
    true = torch.randn(10, 3)

    pred = pred_start.clone().requires_grad_()
    optimizer = torch.optim.Adam([pred])
    loss = torch.nn.functional.mse_loss(compute_distance_matrix(pred), compute_distance_matrix(true))
    loss.backward()
    optimizer.step()
    assert torch.isnan(pred).any(), "the seed's NaN should reproduce after one step"

    pred = pred_start.clone().requires_grad_()
    optimizer = torch.optim.Adam([pred])
    target = ng.distance_matrix(true)
    losses = []
    for _ in range(500):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ng.distance_matrix(pred), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.5 * losses[0]
    # decreasing: every 50-step window ends lower than it started
    assert all(losses[i + 50] < losses[i] for i in range(0, 450, 50))


def test_cross_entropy_seed_zero_probability() -> None:
    y = torch.tensor([[0.0, 1.0, 0.0]])
    y_conv = torch.tensor([[0.0, 0.8, 0.2]], requires_grad=True)
    naive = -(y * torch.log(y_conv)).sum()
    assert torch.isnan(naive)
    loss = ng.cross_entropy_probs(y, y_conv).sum()
    loss.backward()
    assert abs(loss.item() + torch.log(torch.tensor(0.8)).item()) < 1e-6
    torch.testing.assert_close(y_conv.grad, torch.tensor([[0.0, -1.25, 0.0]]))


def test_mean_pooling_seed_empty_sequence() -> None:
    embedded = torch.randn(2, 4, 3, requires_grad=True)
    tokens = torch.tensor([[5, 6, 0, 0], [0, 0, 0, 0]])  # second sequence is empty (all pad)
    keep = (tokens != 0).unsqueeze(-1)
    naive = embedded.sum(1) / keep.sum(1)
    assert not torch.isfinite(naive[1]).any()
    pooled = ng.masked_mean(embedded, keep, dim=1)
    pooled.sum().backward()
    torch.testing.assert_close(pooled[0], embedded[0, :2].mean(0))
    assert pooled[1].tolist() == [0.0, 0.0, 0.0]
    assert embedded.grad[1].abs().sum() == 0 and embedded.grad[0, 2:].abs().sum() == 0
