"""Every transfer rule is sound: outputs computed from points inside the input boxes lie inside
the output box the audit computes (sampled, endpoints included), in float32 and float64."""

from __future__ import annotations

import math
from typing import Callable, Dict, Tuple

import pytest
import torch
import torch.nn.functional as F

from nanguard.torch.auditor.api import output_bounds

R = Dict[str, Tuple[float, float]]

# name -> (fn, {arg: (lo, hi)}, shapes of the args)
CASES: Dict[str, Tuple[Callable[..., torch.Tensor], R, Tuple[Tuple[int, ...], ...]]] = {
    "exp": (lambda x: torch.exp(x), {"x": (-5, 3)}, ((6,),)),
    "log": (lambda x: torch.log(x), {"x": (0.01, 30)}, ((6,),)),
    "log1p": (lambda x: torch.log1p(x), {"x": (-0.5, 30)}, ((6,),)),
    "expm1": (lambda x: torch.expm1(x), {"x": (-4, 4)}, ((6,),)),
    "sqrt": (lambda x: torch.sqrt(x), {"x": (0, 9)}, ((6,),)),
    "rsqrt": (lambda x: torch.rsqrt(x), {"x": (0.1, 9)}, ((6,),)),
    "tanh_sigmoid": (lambda x: torch.tanh(x) + torch.sigmoid(x), {"x": (-4, 4)}, ((6,),)),
    "relu_gelu_silu": (lambda x: F.relu(x) + F.gelu(x) + F.silu(x), {"x": (-4, 4)}, ((6,),)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), {"x": (-3, 1)}, ((6,),)),
    "abs_square": (lambda x: x.abs() * 2 + x.square(), {"x": (-3, 2)}, ((6,),)),
    "x_times_x": (lambda x: x * x, {"x": (-3, 2)}, ((6,),)),
    "mul": (lambda x, y: x * y, {"x": (-3, 2), "y": (-1, 4)}, ((6,), (6,))),
    "div": (lambda x, y: x / y, {"x": (-3, 2), "y": (0.5, 4)}, ((6,), (6,))),
    "div_negative": (lambda x, y: x / y, {"x": (-3, 2), "y": (-4, -0.5)}, ((6,), (6,))),
    "add_sub_rsub": (lambda x, y: (x + 2 * y) - (y - 0.5) + (1 - x), {"x": (-3, 2), "y": (-1, 4)}, ((6,), (6,))),
    "pow": (lambda x: x ** 2 + x ** 3 - (x.abs() + 1) ** 0.5 + (x.abs() + 1) ** -1.5, {"x": (-2, 3)}, ((6,),)),
    "pow_base": (lambda x: 2.0 ** x, {"x": (-3, 5)}, ((6,),)),
    "clamp": (lambda x: x.clamp(-1, 0.5) + x.clamp(min=0.2) + x.clamp_max(0.1), {"x": (-3, 2)}, ((6,),)),
    "max_min": (lambda x, y: torch.maximum(x, y) - torch.minimum(x, y), {"x": (-3, 2), "y": (-1, 4)},
                ((6,), (6,))),
    "where": (lambda x, y: torch.where(x > 0, x, y), {"x": (-3, 2), "y": (-1, 4)}, ((6,), (6,))),
    "masked_fill": (lambda x: x.masked_fill(x < 0, 7.0), {"x": (-3, 2)}, ((6,),)),
    "softmax": (lambda x: torch.softmax(x, -1), {"x": (-3, 2)}, ((3, 5),)),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), {"x": (-3, 2)}, ((3, 5),)),
    "softmax_mixed": (lambda x: torch.softmax(x * torch.tensor([1.0, 2.0, 0.5, 3.0, 1.0]), -1), {"x": (-3, 2)},
                      ((3, 5),)),
    "log_softmax_mixed": (lambda x: torch.log_softmax(x * torch.tensor([1.0, 2.0, 0.5, 3.0, 1.0]), 0),
                          {"x": (-3, 2)}, ((3, 5),)),
    "sum_mean_amax": (lambda x: x.sum(1) + x.mean(0).sum() + x.amax(1) - x.amin(), {"x": (-3, 2)}, ((3, 5),)),
    "cumsum_logsumexp": (lambda x: x.cumsum(1)[:, -1] + torch.logsumexp(x, 1), {"x": (-3, 2)}, ((3, 5),)),
    "max_subtracted": (lambda x: torch.exp(x - x.max(-1, keepdim=True).values), {"x": (-30, 20)}, ((3, 5),)),
    "var_std": (lambda x: x.var(1) + x.std(0).sum() + x.var(1, unbiased=False), {"x": (-3, 2)}, ((3, 5),)),
    "norm": (lambda x: torch.linalg.vector_norm(x, dim=1) + x.norm(), {"x": (-3, 2)}, ((3, 5),)),
    "mm_addmm": (lambda a, b: a @ b + torch.addmm(a[:, :2], a, b, beta=0.5, alpha=-2), {"a": (-2, 1), "b": (-1, 3)},
                 ((3, 4), (4, 2))),
    "bmm": (lambda a, b: torch.bmm(a, b), {"a": (-2, 1), "b": (0.5, 3)}, ((2, 3, 4), (2, 4, 2))),
    "linear": (lambda x, w, b: F.linear(x, w, b), {"x": (-2, 1), "w": (-1, 1), "b": (0, 2)},
               ((3, 4), (5, 4), (5,))),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), {"x": (-2, 1), "w": (-1, 1), "b": (0, 2)},
               ((1, 2, 5, 5), (3, 2, 3, 3), (3,))),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), {"x": (-2, 1), "w": (-1, 2), "b": (0, 2)},
                   ((3, 5), (5,), (5,))),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   {"x": (-2, 1), "w": (-1, 2), "b": (0, 2)}, ((4, 3, 2), (3,), (3,))),
    "batch_norm_eval": (lambda x: F.batch_norm(x, torch.tensor([0.5, -1.0, 0.0], dtype=x.dtype),
                                               torch.tensor([1.0, 2.0, 0.5], dtype=x.dtype)),
                        {"x": (-2, 1)}, ((4, 3, 2),)),
    "group_norm": (lambda x: F.group_norm(x, 2), {"x": (-2, 1)}, ((2, 4, 3),)),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), {"q": (-2, 1), "k": (-1, 1), "v": (-3, 2)},
             ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))),
    "cross_entropy": (lambda x: F.cross_entropy(x, torch.tensor([0, 2, 1])), {"x": (-3, 2)}, ((3, 4),)),
    "mse_l1_huber": (lambda x, y: F.mse_loss(x, y) + F.l1_loss(x, y) + F.smooth_l1_loss(x, y) + F.huber_loss(x, y),
                     {"x": (-3, 2), "y": (-1, 1)}, ((6,), (6,))),
    "bce_logits": (lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 1.0])),
                   {"x": (-3, 2)}, ((6,),)),
    "embedding_gather": (lambda w: F.embedding(torch.tensor([[0, 2], [1, 1]]), w).sum()
                         + w.gather(1, torch.tensor([[0], [1], [0]])).sum() + w[torch.tensor([2, 0])].sum(),
                         {"w": (-3, 2)}, ((3, 4),)),
    "cat_stack_views": (lambda x, y: torch.cat([x, y]).view(2, 6).t().flip(0)[1:] + torch.stack([x, y]).sum(0).max(),
                        {"x": (-3, 2), "y": (-1, 4)}, ((6,), (6,))),
    "sin_cos_atan": (lambda x: torch.sin(x) + torch.cos(x) + torch.atan(x) + torch.atan2(x, x + 5),
                     {"x": (-4, 4)}, ((6,),)),
    "sin_narrow": (lambda x: torch.sin(x) * torch.cos(x), {"x": (0.1, 0.8)}, ((6,),)),
    "acos_asin": (lambda x: torch.acos(x) + torch.asin(x), {"x": (-0.9, 0.7)}, ((6,),)),
    "erf_softplus_lgamma": (lambda x: torch.erf(x) + F.softplus(x) + torch.lgamma(x.abs() + 0.5), {"x": (-3, 4)},
                            ((6,),)),
    "sort_topk_pool": (lambda x: x.sort(1).values[:, 0] + x.topk(2, 1).values[:, 1]
                       + F.max_pool1d(x.unsqueeze(1), 2).sum(-1).squeeze(1) + F.avg_pool1d(x.unsqueeze(1), 2).mean(),
                       {"x": (-3, 2)}, ((3, 6),)),
    "interpolate": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), {"x": (-3, 2)}, ((1, 1, 3, 3),)),
    "lerp_addcmul": (lambda x, y: torch.lerp(x, y, 0.3) + torch.addcmul(x, x, y, value=0.5),
                     {"x": (-3, 2), "y": (-1, 4)}, ((6,), (6,))),
    "casts": (lambda x: x.half().float() + x.to(torch.int32) * 1.0 + x.to(torch.bfloat16).float(), {"x": (-3, 2)},
              ((6,),)),
    "dropout_eval_like": (lambda x: F.dropout(x, 0.0) + F.hardtanh(x) + F.leaky_relu(x, 0.2) + F.elu(x),
                          {"x": (-3, 2)}, ((6,),)),
    "in_place_view": (lambda x: _in_place(x), {"x": (-3, 2)}, ((4,),)),
    "recurrent": (lambda x: _LSTM(x.to(_LSTM.weight_ih_l0.dtype))[0].sum(0) + _GRU(x.to(_GRU.weight_ih_l0.dtype))[0].sum(0)
                  + _RNN(x.to(_RNN.weight_ih_l0.dtype))[0].sum(0), {"x": (-3, 2)}, ((5, 2, 3),)),
    "mod_floordiv": (lambda x, y: torch.remainder(x, y) + torch.fmod(x, y) + torch.floor_divide(x, y),
                     {"x": (-5, 7), "y": (0.5, 3)}, ((6,), (6,))),
    "xlogy_logaddexp": (lambda x, y: torch.xlogy(x, y) + torch.logaddexp(x, y) + torch.special.xlogy(y, y),
                        {"x": (-2, 3), "y": (0.1, 4)}, ((6,), (6,))),
    "threshold_hardswish_mish": (lambda x: F.threshold(x, 0.5, -2.0) + F.hardswish(x) + F.mish(x) + F.softsign(x)
                                 + F.hardsigmoid(x) + F.relu6(x) + F.selu(x) + F.celu(x), {"x": (-5, 4)}, ((6,),)),
    "prod_cumsum": (lambda x: x.prod(1) + x.cumsum(0).sum(1), {"x": (0.5, 1.5)}, ((3, 4),)),
    "nll_variants": (lambda x: F.nll_loss(x, torch.tensor([0, 2, 1]), weight=torch.tensor([1.0, 2.0, 0.5, 1.0]).to(x.dtype))
                     + F.nll_loss(x, torch.tensor([0, 2, 1]), reduction="sum")
                     + F.nll_loss(x, torch.tensor([0, -100, 1]), reduction="none").sum(), {"x": (-3, 1)}, ((3, 4),)),
    "bce": (lambda p: F.binary_cross_entropy(p, torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 1.0]).to(p.dtype)),
            {"p": (0.01, 0.99)}, ((6,),)),
    "scatter_index_put": (lambda x, v: x.scatter(1, torch.tensor([[0], [2], [1]]), v[:, :1])
                          + x.index_put((torch.tensor([0, 2]),), v[:2]) + x.tril() + x.triu(1)
                          + F.pad(x, (1, 0), value=0.5)[:, 1:] + x.masked_scatter(x > 0, v), {"x": (-3, 2), "v": (0, 4)},
                          ((3, 3), (3, 3))),
    "pads_and_shuffles": (lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect")[..., 1:-1, 1:-1]
                          + F.pad(x, (1, 1, 1, 1), mode="replicate")[..., 1:-1, 1:-1]
                          + F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2) + F.interpolate(x, scale_factor=2)[..., ::2, ::2],
                          {"x": (-3, 2)}, ((1, 4, 4, 4),)),
    "logit_atanh_erfinv_digamma": (lambda x: torch.logit(x, eps=1e-3) + torch.atanh(x * 1.8 - 0.9)
                                   + torch.erfinv(x * 1.8 - 0.9) + torch.digamma(x + 0.5), {"x": (0.05, 0.95)}, ((6,),)),
    "reciprocal_int_powers": (lambda x: torch.reciprocal(x) + x ** -2 + x ** 4 + x.sign() + x.round() + x.frac(),
                              {"x": (0.3, 3)}, ((6,),)),
    "loss_reductions": (lambda x, y: F.mse_loss(x, y, reduction="none").sum(0) + F.mse_loss(x, y, reduction="sum")
                        + F.l1_loss(x, y, reduction="none").mean(0), {"x": (-3, 2), "y": (-1, 1)}, ((3, 4), (3, 4))),
    "var_mean_std_mean": (lambda x: sum(torch.var_mean(x, 1)) + sum(torch.std_mean(x, 0, correction=0)).sum(),
                          {"x": (-3, 2)}, ((3, 5),)),
    "distances_norms": (lambda x, y: torch.cdist(x, y).sum() + F.pdist(x).sum() + torch.linalg.vector_norm(x, 1, -1)
                        + torch.linalg.vector_norm(x, float("inf"), -1) + torch.linalg.vector_norm(x, 3, -1),
                        {"x": (-3, 2), "y": (-1, 1)}, ((3, 4), (2, 4))),
    "weight_norm": (lambda v, g: torch._weight_norm(v, g, 0), {"v": (0.5, 2), "g": (-1, 3)}, ((3, 4), (3, 1))),
    "sorting": (lambda x: x.sort(0, descending=True).values + x.median(0, keepdim=True).values
                + x.cummax(0).values + x.kthvalue(2, 0, keepdim=True).values, {"x": (-3, 2)}, ((4, 3),)),
    "products": (lambda a, b, c: torch.mv(a, b) + torch.dot(b, b) + torch.outer(b, b)[0, :3]
                 + torch.einsum("ij,j->i", a, b) + torch.baddbmm(c, a[None], a.t()[None])[0, 0],
                 {"a": (-2, 1), "b": (-1, 3), "c": (0, 1)}, ((3, 3), (3,), (1, 3, 3))),
    "convs": (lambda x, w: F.conv1d(x, w, padding=1).sum(1) + F.conv_transpose1d(x, w.transpose(0, 1)).sum(1)[..., :5],
              {"x": (-2, 1), "w": (-1, 1)}, ((1, 2, 5), (3, 2, 3))),
    "norm_layers": (lambda x, w: F.group_norm(x, 2, w, w) + F.rms_norm(x, (3,), w[:3]).sum()
                    + F.instance_norm(x), {"x": (-2, 1), "w": (0.5, 2)}, ((2, 4, 3), (4,))),
    "embedding_bag": (lambda w: F.embedding_bag(torch.tensor([0, 2, 1, 1]), w, torch.tensor([0, 2]), mode="mean")
                      + F.embedding_bag(torch.tensor([0, 2, 1, 1]), w, torch.tensor([0, 2]), mode="max"),
                      {"w": (-3, 2)}, ((3, 4),)),
    "dropout_train": (lambda x: F.dropout(x, 0.3, training=True), {"x": (-3, 2)}, ((50,),)),
}
torch.manual_seed(0)
_LSTM, _GRU, _RNN = torch.nn.LSTM(3, 4), torch.nn.GRU(3, 4), torch.nn.RNN(3, 4)


def _in_place(x: torch.Tensor) -> torch.Tensor:
    buf = torch.ones(2, 4)
    buf[0] = torch.sigmoid(x)
    row = buf[1]
    row.mul_(x.exp())
    return buf.view(8) + 1


def _sample(lo: float, hi: float, shape: Tuple[int, ...], gen: torch.Generator, i: int, dtype: torch.dtype):
    if i == 0:
        return torch.full(shape, lo, dtype=dtype)
    if i == 1:
        return torch.full(shape, hi, dtype=dtype)
    u = torch.rand(shape, generator=gen, dtype=torch.float64)
    if i % 5 == 2:   # corners mixed
        u = (u > 0.5).double()
    return (lo + u * (hi - lo)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_is_sound(name: str, dtype: torch.dtype) -> None:
    fn, ranges, shapes = CASES[name]
    names = list(ranges)
    gen = torch.Generator().manual_seed(hash(name) % 2**31)
    example = [_sample(*ranges[n], s, gen, 3, dtype) for n, s in zip(names, shapes)]
    (lo, hi), = output_bounds(fn, *example, ranges=ranges)
    assert lo.shape == hi.shape
    assert bool((lo <= hi).all())
    # bounded inputs give bounded outputs: a rule that answered "anything" would pass below
    assert bool(torch.isfinite(lo).all() and torch.isfinite(hi).all()), f"{name}: unbounded {lo} {hi}"
    for i in range(120):
        args = [_sample(*ranges[n], s, gen, i, dtype) for n, s in zip(names, shapes)]
        y = fn(*args).double()
        ok = torch.isfinite(y)
        tol = 4 * torch.finfo(dtype).eps * (y.abs() + 1)
        below = (y < lo - tol) & ok
        above = (y > hi + tol) & ok
        assert not bool(below.any() or above.any()), (
            f"{name}: sample {i} outside its bounds: y={y[below | above][:4].tolist()} "
            f"lo={lo.expand_as(y)[below | above][:4].tolist()} hi={hi.expand_as(y)[below | above][:4].tolist()}")


def test_bounds_are_tight_where_they_should_be() -> None:
    (lo, hi), = output_bounds(lambda x: torch.sigmoid(x), torch.zeros(3), ranges={"x": (0.0, 1.0)})
    assert torch.allclose(lo, torch.full((3,), 0.5, dtype=torch.float64))
    assert torch.allclose(hi, torch.full((3,), 1 / (1 + math.exp(-1)), dtype=torch.float64), rtol=1e-6)
    (lo, hi), = output_bounds(lambda x: torch.softmax(x, -1), torch.zeros(4), ranges={"x": (0.0, 0.0)})
    assert torch.allclose(lo, torch.full((4,), 0.25, dtype=torch.float64))
    # structural: unbounded inputs still give softmax's [0, 1] and log_softmax's (-inf, 0]
    (lo, hi), = output_bounds(lambda x: torch.log_softmax(x, -1), torch.zeros(4))
    assert float(lo.max()) == -math.inf and float(hi.max()) == 0.0


def test_rounding_to_the_dtype_is_modelled() -> None:
    # float32: 1 - 1e-8 == 1, so 1 - clamp(p, 1e-8, 1 - 1e-8) reaches exactly 0
    (lo, _), = output_bounds(lambda p: 1 - p.clamp(1e-8, 1 - 1e-8), torch.zeros(2), ranges={"p": (0.0, 1.0)})
    assert float(lo.min()) == 0.0
    (lo, _), = output_bounds(lambda p: 1 - p.clamp(1e-8, 1 - 1e-8), torch.zeros(2, dtype=torch.float64),
                             ranges={"p": (0.0, 1.0)})
    assert float(lo.min()) > 0.0
