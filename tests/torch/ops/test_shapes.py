"""Broadcasting like the torch counterpart, and empty tensors."""

from __future__ import annotations

import pytest
import torch

import nanguard as ng

NEG_INF = float("-inf")
g = torch.Generator().manual_seed(11)


def _rand(*shape, low=0.1, high=2.0):
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * (high - low) + low).requires_grad_()


def _same_values_and_grads(ours_fn, ref_fn, inputs):
    ours = ours_fn(*inputs)
    ref = ref_fn(*inputs)
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref)
    w = torch.rand(ours.shape, generator=g, dtype=torch.float64)
    g_ours = torch.autograd.grad((ours * w).sum(), inputs)
    g_ref = torch.autograd.grad((ref * w).sum(), inputs)
    for a, b, t in zip(g_ours, g_ref, inputs):
        assert a.shape == t.shape
        torch.testing.assert_close(a, b)


BROADCAST = [
    ("logaddexp", ng.logaddexp, torch.logaddexp, [(3, 1), (1, 4)]),
    ("xlogy", ng.xlogy, torch.xlogy, [(2, 3, 1), (4,)]),
    ("div", ng.div, torch.div, [(3, 1), (2, 1, 4)]),
    ("cosine_similarity", ng.cosine_similarity,
     lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=0.0), [(3, 1, 4), (2, 4)]),
    ("cross_entropy_probs", ng.cross_entropy_probs, lambda t, p: -(t * torch.log(p)).sum(-1), [(3, 4), (4,)]),
    ("distance_matrix", ng.distance_matrix,
     lambda x, y: torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist"), [(2, 5, 3), (4, 3)]),
]


@pytest.mark.parametrize("name,ours,ref,shapes", BROADCAST, ids=[b[0] for b in BROADCAST])
def test_binary_ops_broadcast_like_torch(name, ours, ref, shapes) -> None:
    _same_values_and_grads(ours, ref, [_rand(*s) for s in shapes])


@pytest.mark.parametrize("mask_shape", [(3, 1), (1, 4), (4,), ()])
def test_masks_broadcast(mask_shape) -> None:
    x = _rand(3, 4)
    mask = torch.rand(mask_shape, generator=g) > 0.3 if mask_shape else torch.tensor(True)
    full = mask.expand(3, 4)
    _same_values_and_grads(lambda v: ng.softmax(v, -1, mask=mask), lambda v: ng.softmax(v, -1, mask=full), [x])
    _same_values_and_grads(lambda v: ng.log_softmax(v, -1, mask=mask),
                           lambda v: ng.log_softmax(v, -1, mask=full), [x])
    _same_values_and_grads(lambda v: ng.logsumexp(v, -1, mask=mask), lambda v: ng.logsumexp(v, -1, mask=full), [x])
    _same_values_and_grads(lambda v: ng.masked_mean(v, mask, -1), lambda v: ng.masked_mean(v, full, -1), [x])
    kept = full.any(-1)
    ref = torch.softmax(x.masked_fill(~full, NEG_INF), -1)[kept]
    torch.testing.assert_close(ng.softmax(x, -1, mask=mask)[kept], ref)


def test_safe_where_condition_broadcasts() -> None:
    x = _rand(3, 4)
    cond = torch.tensor([True, False, True, True])
    _same_values_and_grads(lambda v: ng.safe_where(cond, torch.log, v),
                           lambda v: torch.where(cond, torch.log(v), 0.0), [x])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, (0, 2), None])
def test_reductions_take_dims_like_torch(dim, keepdim) -> None:
    x = _rand(2, 3, 4)
    for ours, ref in [
        (lambda v: ng.norm(v, dim, keepdim), lambda v: torch.linalg.vector_norm(v, dim=dim, keepdim=keepdim)),
        (lambda v: ng.std(v, dim, keepdim=keepdim), lambda v: torch.std(v, dim=dim, keepdim=keepdim)),
        (lambda v: ng.var(v, dim, keepdim=keepdim), lambda v: torch.var(v, dim=dim, keepdim=keepdim)),
        (lambda v: ng.masked_mean(v, torch.ones_like(v, dtype=torch.bool), dim, keepdim),
         lambda v: torch.mean(v, dim=dim, keepdim=keepdim)),
    ]:
        _same_values_and_grads(ours, ref, [x])
    if dim is not None:
        _same_values_and_grads(lambda v: ng.logsumexp(v, dim, keepdim),
                               lambda v: torch.logsumexp(v, dim, keepdim), [x])


EMPTY = [
    ("softplus", ng.softplus, (0, 3)),
    ("logaddexp", lambda x: ng.logaddexp(x, x * 2), (0, 3)),
    ("logsumexp-empty-slices", lambda x: ng.logsumexp(x, dim=1), (2, 0)),
    ("logsumexp-no-slices", lambda x: ng.logsumexp(x, dim=1), (0, 3)),
    ("softmax", lambda x: ng.softmax(x, dim=1), (2, 0)),
    ("log_softmax", lambda x: ng.log_softmax(x, dim=0), (0, 3)),
    ("xlogy", lambda x: ng.xlogy(x, x), (0,)),
    ("entropy", ng.entropy, (2, 0)),
    ("cross_entropy_probs", lambda x: ng.cross_entropy_probs(x, x), (3, 0)),
    ("sqrt", ng.sqrt, (0,)),
    ("pow", lambda x: ng.pow(x, 0.5), (0, 2)),
    ("norm", lambda x: ng.norm(x, dim=1), (2, 0)),
    ("normalize", ng.normalize, (0, 3)),
    ("cosine_similarity", lambda x: ng.cosine_similarity(x, x), (0, 3)),
    ("distance_matrix", ng.distance_matrix, (0, 3)),
    ("div", lambda x: ng.div(x, x), (0,)),
    ("masked_mean", lambda x: ng.masked_mean(x, x > 0, dim=1), (2, 0)),
    ("std", lambda x: ng.std(x, dim=1), (2, 0)),
    ("var", lambda x: ng.var(x, dim=0), (0, 3)),
    ("acos", ng.acos, (0,)),
    ("asin", ng.asin, (0,)),
    ("safe_where", lambda x: ng.safe_where(x > 0, torch.log, x), (0,)),
]


@pytest.mark.parametrize("name,fn,shape", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_tensors(name, fn, shape) -> None:
    x = torch.rand(shape, dtype=torch.float32, requires_grad=True)
    out = fn(x)
    assert torch.isfinite(out).all() or name.startswith("logsumexp")  # empty logsumexp is -inf
    (out.sum() if out.numel() else out.sum() * 0).backward()
    assert x.grad is not None and x.grad.shape == x.shape
    assert torch.isfinite(x.grad).all()


def test_empty_reductions_follow_the_conventions() -> None:
    assert ng.logsumexp(torch.empty(2, 0), dim=1).tolist() == [NEG_INF, NEG_INF]
    assert ng.entropy(torch.empty(2, 0)).tolist() == [0.0, 0.0]
    assert ng.norm(torch.empty(2, 0), dim=1).tolist() == [0.0, 0.0]
    assert ng.masked_mean(torch.empty(2, 0), torch.empty(2, 0, dtype=torch.bool), dim=1, fill=3.0).tolist() == [3.0, 3.0]
    assert ng.var(torch.empty(2, 0), dim=1).tolist() == [0.0, 0.0]
    assert ng.std(torch.empty(0, 3), dim=0).tolist() == [0.0, 0.0, 0.0]
    assert ng.distance_matrix(torch.empty(0, 3), torch.rand(4, 3)).shape == (0, 4)


def test_cross_entropy_broadcast_with_zero_times_log_zero() -> None:
    target = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.5, 0.5]], dtype=torch.float64, requires_grad=True)
    probs = torch.tensor([0.0, 0.7, 0.3], dtype=torch.float64, requires_grad=True)
    loss = ng.cross_entropy_probs(target, probs)
    log7, log3 = torch.log(torch.tensor(0.7)).item(), torch.log(torch.tensor(0.3)).item()
    assert loss.tolist() == pytest.approx([-log7, -0.5 * (log7 + log3)])
    loss.sum().backward()
    torch.testing.assert_close(target.grad, torch.tensor([[0.0, -log7, -log3]] * 2, dtype=torch.float64))
    assert probs.grad.tolist() == pytest.approx([0.0, -1.5 / 0.7, -0.5 / 0.3])
    # a target on a probability of exactly 0 is a true +inf, not hidden
    assert ng.cross_entropy_probs(torch.tensor([0.5, 0.5, 0.0]), probs.detach()).item() == float("inf")
