"""Every safe op beside its textbook/torch counterpart, with shapes and regular inputs.

A spec says how to call the safe op and the textbook formula on the same tensors, the
input shapes, the domain hypothesis draws from, and how to make inputs that are away from
every singular point (for gradcheck).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import torch

import nanguard as ng

NEG_INF = float("-inf")

# fixed masks: at least one kept entry per row (regular), and one fully masked row (singular)
MASK = torch.tensor([[True, False, True, True], [False, True, True, False], [True, True, False, True]])
MASK_WITH_EMPTY_ROW = torch.tensor([[True, False, True, True], [False, False, False, False], [True, True, False, True]])


def _logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.logsumexp's value, with a gradient as exact as the value: autograd's exp(x - lse)
    carries lse's rounding, |lse| / 2 ulps (float64 at lse = 4.3e9: 2e-7 relative), so the
    yardstick shifts by the detached row maximum instead."""
    top = x.detach().amax(dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return (top + torch.log(torch.exp(x - top).sum(dim, keepdim=True))).squeeze(dim)


@dataclass
class Spec:
    name: str
    safe: Callable[..., torch.Tensor]
    textbook: Callable[..., torch.Tensor]
    shapes: Sequence[Tuple[int, ...]]
    regular: Callable[[torch.Generator], List[torch.Tensor]]
    # hypothesis domain per input: (low, high) bounds in float64 terms; None = any finite value
    domain: Sequence[Optional[Tuple[float, float]]] = field(default_factory=list)
    # where every true value is real (acos is NaN beyond the rounding tolerance); default: domain
    finite_domain: Optional[Sequence[Optional[Tuple[float, float]]]] = None


def _randn(*shape, g, scale=1.0, shift=0.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift


def _rand(*shape, g, low=0.0, high=1.0):
    return torch.rand(*shape, generator=g, dtype=torch.float64) * (high - low) + low


def _textbook_norm(x, dim, keepdim=False):
    return torch.sqrt((x * x).sum(dim, keepdim=keepdim))


SPECS: List[Spec] = [
    Spec("softplus", ng.softplus, lambda x: torch.log1p(torch.exp(x)), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=5)]),
    Spec("softplus_beta", lambda x: ng.softplus(x, beta=2.5), lambda x: torch.log1p(torch.exp(2.5 * x)) / 2.5,
         [(3, 4)], lambda g: [_randn(3, 4, g=g, scale=5)]),
    Spec("logaddexp", ng.logaddexp, torch.logaddexp, [(3, 4), (3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3), _randn(3, 4, g=g, scale=3)]),
    Spec("logsumexp", lambda x: ng.logsumexp(x, dim=1), lambda x: _logsumexp(x, 1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("logsumexp_mask", lambda x: ng.logsumexp(x, dim=1, mask=MASK),
         lambda x: _logsumexp(x.masked_fill(~MASK, NEG_INF), 1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("softmax", lambda x: ng.softmax(x, dim=1), lambda x: torch.softmax(x, 1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("softmax_mask", lambda x: ng.softmax(x, dim=1, mask=MASK),
         lambda x: torch.softmax(x.masked_fill(~MASK, NEG_INF), 1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("log_softmax", lambda x: ng.log_softmax(x, dim=1), lambda x: torch.log_softmax(x, 1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("log_softmax_mask", lambda x: ng.log_softmax(x, dim=1, mask=MASK),
         lambda x: torch.where(MASK, torch.log_softmax(x.masked_fill(~MASK, NEG_INF), 1), 0.0), [(3, 4)],
         lambda g: [_randn(3, 4, g=g, scale=3)]),
    Spec("xlogy", ng.xlogy, torch.xlogy, [(3, 4), (3, 4)],
         lambda g: [_randn(3, 4, g=g), _rand(3, 4, g=g, low=0.1, high=3.0)], domain=[None, (0.0, None)],
         finite_domain=[None, (0.0, None, "open")]),  # x log 0 = -inf for x != 0
    Spec("entropy", ng.entropy, lambda p: -(p * torch.log(p)).sum(-1), [(3, 4)],
         lambda g: [_rand(3, 4, g=g, low=0.05, high=1.0)], domain=[(0.0, None)]),
    Spec("cross_entropy_probs", ng.cross_entropy_probs, lambda t, p: -(t * torch.log(p)).sum(-1), [(3, 4), (3, 4)],
         lambda g: [_rand(3, 4, g=g, low=0.05, high=1.0), _rand(3, 4, g=g, low=0.05, high=1.0)],
         domain=[(0.0, None), (0.0, None)], finite_domain=[(0.0, None), (0.0, None, "open")]),
    Spec("sqrt", ng.sqrt, torch.sqrt, [(3, 4)], lambda g: [_rand(3, 4, g=g, low=0.1, high=4.0)]),
    Spec("pow_0.3", lambda x: ng.pow(x, 0.3), lambda x: torch.pow(x, 0.3), [(3, 4)],
         lambda g: [_rand(3, 4, g=g, low=0.1, high=4.0)]),
    Spec("pow_2.5", lambda x: ng.pow(x, 2.5), lambda x: torch.pow(x, 2.5), [(3, 4)],
         lambda g: [_rand(3, 4, g=g, low=0.1, high=4.0)]),
    Spec("norm", lambda x: ng.norm(x, dim=-1), lambda x: _textbook_norm(x, -1), [(3, 4)],
         lambda g: [_randn(3, 4, g=g)]),
    Spec("norm_all", ng.norm, lambda x: _textbook_norm(x, (0, 1)), [(3, 4)], lambda g: [_randn(3, 4, g=g)]),
    Spec("normalize", ng.normalize, lambda x: x / _textbook_norm(x, -1, keepdim=True), [(3, 4)],
         lambda g: [_randn(3, 4, g=g)]),
    Spec("cosine_similarity", ng.cosine_similarity,
         lambda a, b: (a * b).sum(-1) / (_textbook_norm(a, -1) * _textbook_norm(b, -1)), [(3, 4), (3, 4)],
         lambda g: [_randn(3, 4, g=g), _randn(3, 4, g=g)]),
    # (the sqrt-of-squares formula has a NaN gradient from its diagonal: torch.cdist is the reference)
    Spec("distance_matrix", ng.distance_matrix,
         lambda x: torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist"), [(4, 3)],
         lambda g: [_randn(4, 3, g=g)]),
    Spec("distance_matrix_xy", ng.distance_matrix,
         lambda x, y: torch.sqrt(((x.unsqueeze(-2) - y.unsqueeze(-3)) ** 2).sum(-1)), [(4, 3), (5, 3)],
         lambda g: [_randn(4, 3, g=g), _randn(5, 3, g=g)]),
    Spec("div", ng.div, lambda a, b: torch.where(b == 0, torch.zeros_like(a), a / b), [(3, 4), (3, 4)],
         lambda g: [_randn(3, 4, g=g), _randn(3, 4, g=g, shift=0.0).sign() * _rand(3, 4, g=g, low=0.5, high=2)]),
    Spec("masked_mean", lambda x: ng.masked_mean(x, MASK, dim=1),
         lambda x: torch.where(MASK, x, 0.0).sum(1) / MASK.sum(1), [(3, 4)], lambda g: [_randn(3, 4, g=g)]),
    Spec("std", lambda x: ng.std(x, dim=1), lambda x: torch.std(x, 1), [(3, 4)], lambda g: [_randn(3, 4, g=g)]),
    Spec("var", lambda x: ng.var(x, dim=1), lambda x: torch.var(x, 1), [(3, 4)], lambda g: [_randn(3, 4, g=g)]),
    Spec("var_all", lambda x: ng.var(x, correction=0), lambda x: torch.var(x, correction=0), [(3, 4)],
         lambda g: [_randn(3, 4, g=g)]),
    Spec("acos", ng.acos, torch.acos, [(3, 4)], lambda g: [_rand(3, 4, g=g, low=-0.9, high=0.9)],
         domain=[(-1.5, 1.5)], finite_domain=[(-1.0, 1.0)]),
    Spec("asin", ng.asin, torch.asin, [(3, 4)], lambda g: [_rand(3, 4, g=g, low=-0.9, high=0.9)],
         domain=[(-1.5, 1.5)], finite_domain=[(-1.0, 1.0)]),
    Spec("safe_where", lambda x: ng.safe_where(x > 0, torch.log, x),
         lambda x: torch.where(x > 0, torch.log(x), torch.zeros_like(x)), [(3, 4)],
         lambda g: [_randn(3, 4, g=g).abs() + 0.1]),
]

SPEC_IDS = [s.name for s in SPECS]


def weights_for(out: torch.Tensor) -> torch.Tensor:
    """Fixed, non-uniform upstream weights (a plain sum hides softmax's gradient)."""
    return torch.linspace(0.5, 2.0, max(out.numel(), 1), dtype=torch.float64)[: out.numel()].reshape(out.shape)

