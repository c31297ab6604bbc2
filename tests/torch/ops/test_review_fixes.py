"""Defects found by the independent review (issue #9): NaN in must give NaN out, legal
layouts must work, torch's dtype promotion is followed, half precision does not overflow
where the true result is small, float64 underflow is not a zero, `dim` edge cases."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import nanguard as ng
import nanguard.torch.ops

NAN = float("nan")
INF = float("inf")


def _grads(fn, *inputs, create_graph: bool):
    xs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) if not isinstance(x, torch.Tensor)
          else x.requires_grad_() for x in inputs]
    out = fn(*xs)
    grads = torch.autograd.grad(out.sum(), xs, create_graph=create_graph)
    return out.detach(), [g.detach() for g in grads]


BOTH_PATHS = pytest.mark.parametrize("create_graph", [False, True], ids=["fast", "differentiable"])


# ---------------------------------------------------------------- NaN in, NaN out
@BOTH_PATHS
def test_cosine_similarity_of_a_nan_vector_is_nan(create_graph):
    out, (ga, gb) = _grads(ng.cosine_similarity, [NAN, 1.0], [1.0, 1.0], create_graph=create_graph)
    assert math.isnan(out.item())
    assert torch.isnan(ga).all() and torch.isnan(gb).all()


@BOTH_PATHS
def test_normalize_of_a_nan_vector_is_nan(create_graph):
    out, (g,) = _grads(ng.normalize, [NAN, 1.0], create_graph=create_graph)
    assert torch.isnan(out).all()  # not [nan, 1.0]: there is no direction to keep
    assert torch.isnan(g).all()


def test_zero_vector_convention_still_holds_next_to_a_nan_vector():
    x = torch.tensor([[NAN, 1.0], [0.0, 0.0], [3.0, 4.0]], requires_grad=True)
    out = ng.normalize(x)
    out.sum().backward()
    assert torch.isnan(out[0]).all()
    assert out[1].tolist() == [0.0, 0.0] and x.grad[1].tolist() == [0.0, 0.0]
    assert torch.allclose(out[2], torch.tensor([0.6, 0.8]))


@pytest.mark.parametrize("fn", [ng.var, ng.std], ids=["var", "std"])
def test_spread_of_a_single_nan_is_nan(fn):
    x = torch.tensor([NAN], requires_grad=True)
    out = fn(x)
    out.backward()
    assert math.isnan(out.item()) and math.isnan(x.grad.item())
    assert fn(torch.tensor([2.0])).item() == 0.0  # the N - c <= 0 convention stands for numbers


@BOTH_PATHS
def test_std_with_a_nan_has_a_nan_gradient(create_graph):
    out, (g,) = _grads(ng.std, [NAN, 1.0, 2.0], create_graph=create_graph)
    assert math.isnan(out.item()) and torch.isnan(g).all()


@BOTH_PATHS
@pytest.mark.parametrize("fn", [ng.acos, ng.asin], ids=["acos", "asin"])
def test_inverse_sine_gradient_is_nan_where_the_value_is(fn, create_graph):
    out, (g,) = _grads(fn, [1.5, NAN, 0.5, 1.0], create_graph=create_graph)
    assert torch.isnan(out[:2]).all() and torch.isnan(g[:2]).all()
    assert torch.isfinite(g[2:]).all() and g[3].item() == 0.0  # |x| = 1: the convention, 0


def test_div_keeps_a_nan_numerator_over_a_zero_denominator():
    a = torch.tensor([NAN, 1.0, 0.0, NAN])
    b = torch.tensor([0.0, 0.0, 0.0, 2.0])
    out = ng.div(a, b, fill=7.0)
    assert math.isnan(out[0]) and out[1:3].tolist() == [7.0, 7.0] and math.isnan(out[3])
    # broadcast numerator (the mask path) and compile-style bool positions agree
    wide = ng.div(torch.tensor([[NAN], [1.0]]), torch.tensor([0.0, 2.0]))
    assert torch.isnan(wide[0]).all() and wide[1].tolist() == [0.0, 0.5]


# ---------------------------------------------------------------- layouts
def _reference_div(a, b):
    return torch.where(b == 0, torch.zeros_like(a / torch.where(b == 0, 1.0, b)), a / torch.where(b == 0, 1.0, b))


@pytest.mark.parametrize("layout", ["transposed", "channels_last", "transposed_b_only", "transposed_upstream"])
def test_div_accepts_every_strided_layout_forward_and_backward(layout):
    g = torch.Generator().manual_seed(0)
    if layout == "channels_last":
        a = torch.randn(2, 3, 4, 5, generator=g).to(memory_format=torch.channels_last)
        b = torch.randn(2, 3, 4, 5, generator=g).to(memory_format=torch.channels_last)
        b[0, 1, 2, 3] = 0.0
    else:
        a = torch.randn(5, 4, generator=g)
        b = torch.randn(5, 4, generator=g)
        b[1, 2] = 0.0
        b = b.T.contiguous().T  # same values, column-major
        if layout == "transposed":
            a = a.T.contiguous().T
    a.requires_grad_()
    b.requires_grad_()
    weights = torch.arange(a.numel(), dtype=a.dtype).reshape(a.shape)
    if layout == "transposed_upstream":  # the gradient arriving in backward is column-major
        weights = weights.T.contiguous().T
    out = ng.div(a, b)
    ga, gb = torch.autograd.grad((out * weights).sum(), (a, b))
    ref = _reference_div(a, b)
    ra, rb = torch.autograd.grad((ref * weights).sum(), (a, b))
    zero = b.detach() == 0
    assert torch.equal(out, ref)
    assert torch.allclose(ga, torch.where(zero, 0.0, ra)) and torch.allclose(gb, torch.where(zero, 0.0, rb))
    assert (ga[zero] == 0).all() and (gb[zero] == 0).all()


# ---------------------------------------------------------------- promotion and half precision
def test_div_by_a_python_number_is_applied_at_op_math_precision_like_torch():
    x = torch.tensor([60000.0, 1.0, -3.0], dtype=torch.float16)
    for number in (1e5, 1e-8, 3.0):
        assert torch.equal(ng.div(x, number), x / number), number
    bf = torch.tensor([3.0e38, 1.0], dtype=torch.bfloat16)
    assert torch.equal(ng.div(bf, 1e3), bf / 1e3)


@pytest.mark.parametrize("a_shape,b_shape", [((3,), ()), ((), (3,)), ((3,), (3,)), ((), ())])
def test_div_dtype_promotion_matches_torch(a_shape, b_shape):
    a = torch.ones(a_shape, dtype=torch.float32)
    b = torch.full(b_shape, 2.0, dtype=torch.float64)
    assert ng.div(a, b).dtype == (a / b).dtype
    assert ng.div(b, a).dtype == (b / a).dtype


def test_float16_normalize_of_a_vector_whose_norm_overflows_float16():
    x = torch.tensor([60000.0, 60000.0], dtype=torch.float16, requires_grad=True)
    out = ng.normalize(x)
    out.sum().backward()
    assert out.dtype == torch.float16
    assert torch.allclose(out.float(), torch.full((2,), 2 ** -0.5), atol=1e-3)
    assert torch.isfinite(x.grad).all()


def test_float64_std_of_entries_whose_squares_underflow():
    x = torch.tensor([1e-200, 0.0, 3e-200], dtype=torch.float64, requires_grad=True)
    out = ng.std(x)
    out.backward()
    unit = torch.tensor([1.0, 0.0, 3.0], dtype=torch.float64, requires_grad=True)
    ref = torch.std(unit)
    ref.backward()
    assert out.item() == pytest.approx(ref.item() * 1e-200, rel=1e-12, abs=0.0)  # not 0
    assert torch.allclose(x.grad, unit.grad, rtol=1e-12)  # std is 1-homogeneous: same gradient


# ---------------------------------------------------------------- dim edge cases
@pytest.mark.parametrize("dim", [[], ()], ids=["list", "tuple"])
def test_an_empty_dim_list_reduces_every_dimension_as_in_torch(dim):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, generator=g, dtype=torch.float64)
    keep = torch.ones(2, 3, dtype=torch.bool)
    assert ng.masked_mean(x, keep, dim=dim).shape == x.mean(dim=dim).shape == ()
    assert torch.allclose(ng.masked_mean(x, keep, dim=dim), x.mean())
    for safe, native in ((ng.var, torch.var), (ng.std, torch.std)):
        assert torch.allclose(safe(x, dim=dim), native(x, dim=dim))
    assert torch.allclose(ng.norm(x, dim=dim), torch.linalg.vector_norm(x, dim=dim))


def test_logsumexp_needs_a_dim_and_says_so():
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match="at least one dimension"):
        ng.logsumexp(x, dim=())
    with pytest.raises(TypeError, match="must be an int or a sequence of ints, got 0.0"):
        ng.logsumexp(x, dim=0.0)
    with pytest.raises(TypeError, match="sequence of ints"):
        ng.masked_mean(x, x > 0, dim="0")


# ---------------------------------------------------------------- one NaN policy for gradients
# (op, inputs, which input holds the NaN). The NaN sits at flat position 0 of that input; every
# op's derivative in that input depends on the input's value there, so its gradient is NaN.
NAN_CASES = {
    "softplus": (ng.softplus, [[NAN, 1.0]], 0),
    "logaddexp/a": (ng.logaddexp, [[NAN, 1.0], [0.0, 0.0]], 0),
    "logaddexp/b": (ng.logaddexp, [[0.0, 0.0], [NAN, 1.0]], 1),
    "logsumexp": (lambda x: ng.logsumexp(x, dim=0), [[NAN, 1.0]], 0),
    "softmax": (lambda x: ng.softmax(x, dim=0) * torch.tensor([1.0, 2.0], dtype=x.dtype), [[NAN, 1.0]], 0),
    "log_softmax": (lambda x: ng.log_softmax(x, dim=0) * torch.tensor([1.0, 2.0], dtype=x.dtype), [[NAN, 1.0]], 0),
    "xlogy/y": (ng.xlogy, [[1.0, 1.0], [NAN, 2.0]], 1),
    "xlogy/y-at-x-0": (ng.xlogy, [[0.0, 1.0], [NAN, 2.0]], 1),
    "entropy": (ng.entropy, [[NAN, 0.5]], 0),
    "cross_entropy_probs/q": (ng.cross_entropy_probs, [[0.5, 0.5], [NAN, 0.5]], 1),
    "cross_entropy_probs/q-at-t-0": (ng.cross_entropy_probs, [[0.0, 1.0], [NAN, 0.5]], 1),
    "sqrt": (ng.sqrt, [[NAN, 1.0]], 0),
    "pow/0.5": (lambda x: ng.pow(x, 0.5), [[NAN, 1.0]], 0),
    "pow/1": (lambda x: ng.pow(x, 1.0), [[NAN, 1.0]], 0),
    "pow/2": (lambda x: ng.pow(x, 2.0), [[NAN, 1.0]], 0),
    "norm": (ng.norm, [[NAN, 1.0]], 0),
    "normalize": (ng.normalize, [[NAN, 1.0]], 0),
    "cosine_similarity": (ng.cosine_similarity, [[NAN, 1.0], [1.0, 1.0]], 0),
    "distance_matrix": (ng.distance_matrix, [[[NAN, 1.0], [0.0, 0.0]]], 0),
    "div/b": (ng.div, [[1.0, 1.0], [NAN, 2.0]], 1),
    "var": (ng.var, [[NAN, 1.0]], 0),
    "std": (ng.std, [[NAN, 1.0]], 0),
    "acos": (ng.acos, [[NAN, 0.5]], 0),
    "asin": (ng.asin, [[NAN, 0.5]], 0),
    "safe_where": (lambda x: ng.safe_where(x != 0, lambda v: 1 / v, x), [[NAN, 1.0]], 0),
}


@BOTH_PATHS
@pytest.mark.parametrize("case", list(NAN_CASES), ids=list(NAN_CASES))
def test_a_nan_input_gives_a_nan_value_and_a_nan_gradient_entry(case, create_graph):
    fn, inputs, which = NAN_CASES[case]
    out, grads = _grads(fn, *inputs, create_graph=create_graph)
    assert torch.isnan(out).any(), "the NaN must reach the value"
    assert math.isnan(grads[which].reshape(-1)[0].item()), grads[which]


def test_nan_policy_covers_every_op():
    covered = {name.split("/")[0] for name in NAN_CASES}
    linear_in_the_nan = {"div", "masked_mean"}  # d(a/b)/da = 1/b and d mean/dx = 1/n: no NaN there
    missing = set(nanguard.torch.ops.__all__) - covered - linear_in_the_nan
    assert not missing, missing


def test_float64_distance_of_rows_whose_difference_squares_underflow():
    x = torch.tensor([[1e-200, 0.0], [0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    out = ng.distance_matrix(x)
    out.sum().backward()
    assert out[0, 1].item() == pytest.approx(1e-200, rel=1e-12, abs=0.0)
    assert out[0, 0].item() == 0.0
    assert x.grad.tolist() == [[2.0, 0.0], [-2.0, 0.0]]  # d|x0 - x1|/dx0 = unit vector, both pairs


# ---------------------------------------------------------------- inductor keeps NaN visible
_IND_X = [[1.0, NAN, 2.0], [1.0, INF, 0.0], [-INF, -INF, -INF], [0.0, 1.0, 2.0]]
_IND_MASK = [[True, True, False]] * 4
_INDUCTOR_CASES = {
    "softmax": lambda x: ng.softmax(x, -1),
    "log_softmax": lambda x: ng.log_softmax(x, -1),
    "softmax_mask": lambda x: ng.softmax(x, -1, mask=torch.tensor(_IND_MASK)),
    "log_softmax_mask": lambda x: ng.log_softmax(x, -1, mask=torch.tensor(_IND_MASK)),
    "acos": lambda x: ng.acos(x / 2.5),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(_INDUCTOR_CASES))
def test_inductor_keeps_nan_rows_nan_in_value_and_gradient(name: str) -> None:
    """inductor folds `x * 0` to 0; the ops must not rely on NaN * 0 to mark NaN rows."""
    fn = _INDUCTOR_CASES[name]
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    w = torch.linspace(0.5, 1.5, 12).reshape(4, 3)
    results = []
    for f in (fn, compiled):
        x = torch.tensor(_IND_X, requires_grad=True)
        out = f(x)
        finite_loss = torch.where(torch.isinf(out), 0.0, out).mul(w).sum()
        (g,) = torch.autograd.grad(finite_loss, x)
        results.append((out.detach(), g))
    (eager, eager_grad), (comp, comp_grad) = results
    assert bool(torch.isnan(eager[:2]).any()), "the eager op must show the NaN rows"
    torch.testing.assert_close(comp, eager, equal_nan=True)
    torch.testing.assert_close(comp_grad, eager_grad, equal_nan=True)


# ---------------------------------------------------------------- accuracy: spread and bf16 logsumexp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("create_graph", [False, True])
def test_std_and_var_of_a_nearly_constant_slice_are_accurate(dtype, create_graph) -> None:
    """torch rounds the mean first: std([1, 1, 1, 1 + eps]) 15% high, gradient [0, 0, 0, 0.58]."""
    eps = torch.finfo(dtype).eps
    values = [[1.0, 1.0, 1.0, 1.0 + eps], [0.0, 1.0, 2.0, 3.0]]
    rows = torch.tensor(values, dtype=torch.float64)
    # the reference in exact rational arithmetic (torch.std in float64 has the same defect)
    means = [sum(map(Fraction, row)) / 4 for row in values]
    centred = torch.tensor([[float(Fraction(v) - m) for v in row] for row, m in zip(values, means)],
                           dtype=torch.float64)
    exact_var = [sum((Fraction(v) - m) ** 2 for v in row) / 3 for row, m in zip(values, means)]
    exact_std = torch.tensor([math.sqrt(float(v)) for v in exact_var], dtype=torch.float64)
    for op, exact, exact_grad in [
        (ng.std, exact_std, centred / (3 * exact_std[:, None])),
        (ng.var, exact_std**2, 2 * centred / 3),
    ]:
        x = rows.to(dtype).requires_grad_()
        out = op(x, dim=1)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=create_graph)
        torch.testing.assert_close(out.double(), exact.to(dtype).double(), rtol=4 * eps, atol=0)
        torch.testing.assert_close(g.double(), exact_grad, rtol=16 * eps, atol=16 * eps * exact_grad.abs().max().item())


def test_logsumexp_gradient_in_bfloat16_is_accurate_to_its_rounding() -> None:
    """The gradient softmax(x) used an lse rounded to bfloat16: up to 6% off per entry."""
    x64 = torch.randn(256, 256, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    x = x64.to(torch.bfloat16).requires_grad_()
    ng.logsumexp(x, dim=1).sum().backward()
    exact = torch.softmax(x.detach().double(), 1)
    relative = ((x.grad.double() - exact).abs() / exact).max().item()
    assert relative <= 2.0**-8, relative  # half an ulp of bfloat16
    assert ng.logsumexp(x, dim=1).dtype == torch.bfloat16


def test_cross_entropy_probs_keeps_nan_for_invalid_probabilities_on_every_path() -> None:
    # the one-pass xlogy path (target without gradient) must not turn 0 * log(-0.5) into 0
    target = torch.tensor([0.0, 1.0, 0.0])
    for needs_target_grad in (False, True):
        t = target.clone().requires_grad_(needs_target_grad)
        probs = torch.tensor([-0.5, 0.9, 0.0], requires_grad=True)
        loss = ng.cross_entropy_probs(t, probs)
        assert torch.isnan(loss), needs_target_grad
        ok = ng.cross_entropy_probs(t, torch.tensor([0.0, 0.9, 0.1], requires_grad=True))
        assert torch.isclose(ok, -torch.log(torch.tensor(0.9)))
        probs_nan = torch.tensor([float("nan"), 0.9, 0.1], requires_grad=True)
        assert torch.isnan(ng.cross_entropy_probs(t, probs_nan))


def _overflowing_cross_entropy_inputs():
    # each term overflows float32 (|3e38 * ±2| > 3.4e38) with opposite signs: inf - inf
    target = torch.tensor([[3e38, 3e38], [0.0, 1.0]])
    probs = torch.tensor([[7.389056, 0.13533528], [0.0, 1.0]], requires_grad=True)
    t64, q64 = target.double(), probs.detach().double()
    expected = -(t64 * torch.log(torch.where(t64 == 0, 1.0, q64))).sum(-1)
    return target, probs, expected


@pytest.mark.parametrize("transform", ["eager", "vmap", "compile"])
def test_cross_entropy_probs_recovers_an_overflowing_sum_without_looking_at_values(transform) -> None:
    target, probs, expected = _overflowing_cross_entropy_inputs()
    if transform == "eager":
        loss = ng.cross_entropy_probs(target, probs)
    elif transform == "vmap":
        loss = torch.func.vmap(ng.cross_entropy_probs)(target, probs)
    else:
        loss = torch.compile(ng.cross_entropy_probs, backend="aot_eager", fullgraph=True)(target, probs)
    assert bool(torch.isfinite(loss).all()), loss
    torch.testing.assert_close(loss.double(), expected, rtol=1e-6, atol=1e32)
    (g,) = torch.autograd.grad(loss.sum(), probs)
    # -t/q: -4.06e37 and -2.2e39, which overflows float32: -inf, not NaN
    assert not bool(torch.isnan(g).any()), g
    torch.testing.assert_close(g[0], (-target[0].double() / probs.detach()[0].double()).float(), rtol=1e-6, atol=0.0)


def _saved_bytes(fn, x):
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x.detach().requires_grad_())
    return sum(sizes)


def test_masked_log_softmax_keeps_no_more_for_backward_than_torch():
    # it kept its output and the -inf log-probabilities: 2x the memory of masked_fill + log_softmax
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 500, generator=g)
    keep = torch.rand(64, 500, generator=g) > 0.3
    native = _saved_bytes(lambda v: torch.log_softmax(v.masked_fill(~keep, -INF), -1), x)
    assert _saved_bytes(lambda v: ng.log_softmax(v, -1, mask=keep), x) <= native


@pytest.mark.parametrize("broadcast_mask", [False, True])
def test_masked_log_softmax_backward_paths_agree_and_ignore_masked_upstream(broadcast_mask):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 7, dtype=torch.float64, generator=g)
    keep = torch.rand(1 if broadcast_mask else 6, 7, generator=g) > 0.4
    keep[..., 0] = True
    keep[-1] = False                                  # a fully masked row (all placeholders)
    upstream = torch.randn(6, 7, dtype=torch.float64, generator=g)
    grads = []
    for create_graph in (False, True):
        leaf = x.clone().requires_grad_()
        (grad,) = torch.autograd.grad(ng.log_softmax(leaf, -1, mask=keep), leaf, upstream, create_graph=create_graph)
        grads.append(grad.detach())
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-13, atol=1e-13)
    kept = keep.expand(6, 7)
    assert bool((grads[0][~kept] == 0).all())
    live = kept.any(-1)                               # the textbook op is NaN on the dead row
    leaf = x[live].clone().requires_grad_()
    textbook = torch.log_softmax(leaf.masked_fill(~kept[live], -INF), -1).masked_fill(~kept[live], 0.0)
    (ref,) = torch.autograd.grad(textbook, leaf, upstream[live])
    torch.testing.assert_close(grads[0][live], ref, rtol=1e-12, atol=1e-12)
    # a NaN upstream gradient at a placeholder does not reach the kept entries (they do not
    # depend on it): the same on both paths
    upstream[0][~kept[0]] = NAN
    leaf = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(ng.log_softmax(leaf, -1, mask=keep), leaf, upstream)
    assert bool(torch.isfinite(grad).all()) and bool((grad[~kept] == 0).all())


def _ulps(values, reference, dtype):
    tiny, eps = torch.finfo(dtype).smallest_normal, torch.finfo(dtype).eps
    ref = torch.tensor([float(r) for r in reference], dtype=torch.float64)
    unit = torch.where(ref.abs() < tiny, tiny * eps, ref.abs() * eps)
    return ((values.double() - ref).abs() / unit).max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("beta", [0.3, 3.7, 1e-3, 2.0 ** -10, 1e-30])
def test_softplus_with_any_beta_is_within_a_few_ulps_down_to_subnormal_results(dtype, beta):
    # the rounding of beta * x (up to |beta x| / 2 ulps, made relative by exp) and, for
    # beta < 1, a subnormal exp(beta x) lifted by 1 / beta: 50 and 1470 ulps in float32 before
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    low = -100.0 if dtype == torch.float32 else -740.0
    bx = torch.cat([torch.linspace(low, -1.0, 120, dtype=torch.float64), torch.linspace(-1, 30, 30, dtype=torch.float64)])
    x = (bx / beta).to(dtype).requires_grad_()
    value = ng.softplus(x, beta=beta)
    (grad,) = torch.autograd.grad(value.sum(), x)
    exact = [mpmath.mpf(beta) * mpmath.mpf(float(v)) for v in x.detach()]
    assert _ulps(value.detach(), [mpmath.log1p(mpmath.exp(e)) / beta for e in exact], dtype) <= 4
    assert _ulps(grad, [1 / (1 + mpmath.exp(-e)) for e in exact], dtype) <= 4


def test_softplus_with_a_rounded_beta_keeps_its_limits_and_derivatives():
    x = torch.tensor([-3e38, 3e38, -1e36, 0.0, NAN, -INF, INF], requires_grad=True)
    value = ng.softplus(x, beta=0.3)
    (grad,) = torch.autograd.grad(value.sum(), x)
    value = value.detach()
    torch.testing.assert_close(value[:4], torch.tensor([0.0, 3e38, 0.0, math.log(2) / 0.3]))
    assert math.isnan(value[4]) and value[5] == 0 and value[6] == INF
    torch.testing.assert_close(grad[[0, 1, 2, 3, 5, 6]], torch.tensor([0.0, 1.0, 0.0, 0.5, 0.0, 1.0]))
    assert math.isnan(grad[4])
    # no overflow in the branch not taken (exp(beta x - log beta) with beta = 1e-38 near x = 0)
    x = torch.tensor([-50.0, 0.0, 50.0], requires_grad=True)
    (grad,) = torch.autograd.grad(ng.softplus(x, beta=1e-38).sum(), x)
    assert bool(torch.isfinite(grad).all())
    z = torch.linspace(-300, 20, 17, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v: ng.softplus(v, beta=0.3), (z,))
    assert torch.autograd.gradgradcheck(lambda v: ng.softplus(v, beta=0.3), (z,))


@pytest.mark.parametrize("dtype,offset", [(torch.float32, 4096.0), (torch.float64, 2.0 ** 32)])
def test_logsumexp_gradient_does_not_carry_the_rounding_of_a_large_result(dtype, offset):
    # exp(x - lse) carries lse's rounding, |lse| / 2 ulps: float32 at 4096 was 1.2e-4 off
    x = torch.tensor([[0.0, 0.0, -5.0, 0.0], [-1.0, -2.0, 0.0, -3.0]], dtype=torch.float64) + offset
    leaf = x.to(dtype).requires_grad_()
    (grad,) = torch.autograd.grad(ng.logsumexp(leaf, dim=1).sum(), leaf)
    exact = torch.softmax(leaf.detach().double() - leaf.detach().double().amax(1, keepdim=True), 1)
    assert ((grad.double() - exact).abs() <= 4 * torch.finfo(dtype).eps * exact).all()
