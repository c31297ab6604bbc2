"""Hypothesis properties over the whole finite range, edge values mixed in.

1. Agreement: wherever the textbook/torch formula gives a finite value (or gradient), the
   safe op gives the same number. float64 is compared with the textbook in float64; float32
   with the textbook evaluated in float64 on the same (exactly representable) inputs, so a
   textbook that is merely inaccurate in float32 (e.g. at subnormals) is not the yardstick.
2. Finiteness: for every finite input whose true value is representable, the safe op's
   value is finite, and so is its gradient wherever the true gradient is representable:
   ±0, subnormals, ±1e4 in float16, ±1e38 in float32/bfloat16 included.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.torch.ops.specs import SPEC_IDS, SPECS, Spec, weights_for

EDGES = {
    torch.float16: [0.0, -0.0, 2.0**-24, -(2.0**-24), 6.1e-5, 1.0, -1.0, 1e4, -1e4, 65504.0, -65504.0],
    torch.bfloat16: [0.0, -0.0, 2.0**-133, 1e-38, -1e-38, 1.0, -1.0, 1e38, -1e38, 3e38, -3e38],
    torch.float32: [0.0, -0.0, 2.0**-149, -(2.0**-149), 1e-38, 1.0, -1.0, 1e38, -1e38, 3.4e38, -3.4e38],
    torch.float64: [0.0, -0.0, 1e-100, -1e-100, 1.0, -1.0, 1e100, -1e100],
}
# float64 has no wider type to compute the true value in: its inputs stay within
# 1e-100 <= |x| <= 1e100 (or 0), where every op's true value and gradient are representable.
MAGNITUDE = {torch.float16: 65504.0, torch.bfloat16: torch.finfo(torch.bfloat16).max,
             torch.float32: torch.finfo(torch.float32).max, torch.float64: 1e100}
# (low, high) or (low, high, "open") for an excluded lower bound; None = any finite value
Bounds = Optional[tuple]


def _element(dtype: torch.dtype, bounds: Bounds):
    top = MAGNITUDE[dtype]
    low, high = (-top, top) if bounds is None else (
        -top if bounds[0] is None else bounds[0], top if bounds[1] is None else bounds[1])
    open_low = bounds is not None and len(bounds) > 2 and bounds[2] == "open"
    width = {torch.float16: 16, torch.float64: 64}.get(dtype, 32)
    floats = st.floats(min_value=low, max_value=high, width=width, allow_nan=False, allow_infinity=False,
                       allow_subnormal=True, exclude_min=open_low)
    if dtype == torch.float64:
        tiny = 1e-100 if open_low else 0.0
        floats = floats.map(lambda v: v if abs(v) >= 1e-100 else tiny)
    edges = [e for e in EDGES[dtype] if low <= e <= high and not (open_low and e == low)]
    return st.one_of(floats, st.sampled_from(edges)) if edges else floats


@st.composite
def spec_inputs(draw, spec: Spec, dtype: torch.dtype, domain: Sequence[Bounds]) -> List[torch.Tensor]:
    tensors = []
    for i, shape in enumerate(spec.shapes):
        bounds = domain[i] if i < len(domain) else None
        n = 1
        for s in shape:
            n *= s
        values = draw(st.lists(_element(dtype, bounds), min_size=n, max_size=n))
        tensors.append(torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype))
    return tensors


def _value_and_grads(fn, inputs: List[torch.Tensor]):
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    if not out.requires_grad:
        return out.detach(), [torch.zeros_like(t) for t in leaves]
    w = weights_for(out).to(out.dtype)
    grads = torch.autograd.grad(out, leaves, grad_outputs=w, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves)]
    return out.detach(), [g.detach() for g in grads]


def _agree_where_finite(ours: torch.Tensor, ref: torch.Tensor, limit: float, rtol: float, atol: float,
                        what: str) -> None:
    comparable = torch.isfinite(ref) & (ref.abs() < limit)
    if not bool(comparable.any()):
        return
    scale = ref[comparable].abs().max().clamp_min(1.0)
    torch.testing.assert_close(ours[comparable].double(), ref[comparable].double(), rtol=rtol, atol=atol * scale,
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("dtype,rtol,atol", [(torch.float64, 1e-8, 1e-10), (torch.float32, 1e-4, 1e-5)],
                         ids=["f64", "f32"])
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_agrees_with_textbook_wherever_textbook_is_finite(spec: Spec, dtype, rtol, atol) -> None:
    limit = 0.5 * torch.finfo(dtype).max

    @given(spec_inputs(spec, dtype, spec.domain))
    def check(inputs):
        out, grads = _value_and_grads(spec.safe, inputs)
        wide = [t.double() for t in inputs]  # exact: the textbook in float64 is the yardstick
        ref_leaves = [t.clone().requires_grad_() for t in wide]
        ref_out = spec.textbook(*ref_leaves)
        _agree_where_finite(out, ref_out.detach(), limit, rtol, atol, f"{spec.name} value")
        if not bool((ref_out.detach().abs() < limit).all()):
            return  # a true value beyond the dtype's range: no gradient is owed
        ref_grads = torch.autograd.grad(ref_out, ref_leaves, grad_outputs=weights_for(ref_out),
                                        allow_unused=True)
        for i, (g, rg) in enumerate(zip(grads, ref_grads)):
            if rg is not None:
                _agree_where_finite(g, rg, limit, rtol, atol, f"{spec.name} gradient of input {i}")

    check()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64],
                         ids=["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_finite_wherever_the_true_value_is_representable(spec: Spec, dtype) -> None:
    limit = 0.5 * torch.finfo(dtype).max
    domain = spec.finite_domain if spec.finite_domain is not None else spec.domain

    @given(spec_inputs(spec, dtype, domain))
    def check(inputs):
        out, grads = _value_and_grads(spec.safe, inputs)
        assert out.dtype == dtype
        if dtype == torch.float64:
            value_ok = torch.ones_like(out, dtype=torch.bool)
            grad_ok = [torch.ones_like(g, dtype=torch.bool) for g in grads]
        else:
            # the true values: the same op in float64 on the same, exactly representable inputs
            true_out, true_grads = _value_and_grads(spec.safe, [t.double() for t in inputs])
            value_ok = true_out.abs() < limit
            all_values_ok = bool(value_ok.all())
            # a gradient is owed wherever it is representable, given representable values
            grad_ok = [(g.abs() < limit) & all_values_ok for g in true_grads]
        assert bool(torch.isfinite(out[value_ok]).all()), f"{spec.name}: non-finite value {out} for {inputs}"
        for i, (g, ok) in enumerate(zip(grads, grad_ok)):
            assert bool(torch.isfinite(g[ok]).all()), f"{spec.name}: non-finite gradient of input {i}: {g}"

    check()
