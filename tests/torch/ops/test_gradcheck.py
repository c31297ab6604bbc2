"""gradcheck and gradgradcheck in float64, away from singular points."""

from __future__ import annotations

import pytest
import torch

from tests.torch.ops.specs import SPEC_IDS, SPECS, Spec


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_gradcheck(spec: Spec) -> None:
    g = torch.Generator().manual_seed(1)
    inputs = [t.requires_grad_() for t in spec.regular(g)]
    assert torch.autograd.gradcheck(spec.safe, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_gradgradcheck(spec: Spec) -> None:
    g = torch.Generator().manual_seed(2)
    inputs = [t.requires_grad_() for t in spec.regular(g)]
    assert torch.autograd.gradgradcheck(spec.safe, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
def test_regular_inputs_match_textbook_exactly_enough(spec: Spec) -> None:
    """Away from singular points: the same value and gradient as the textbook formula."""
    g = torch.Generator().manual_seed(3)
    inputs = [t.requires_grad_() for t in spec.regular(g)]
    ours = spec.safe(*inputs)
    ref = spec.textbook(*inputs)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    w = torch.linspace(0.5, 2.0, ours.numel(), dtype=torch.float64).reshape(ours.shape)
    g_ours = torch.autograd.grad((ours * w).sum(), inputs)
    g_ref = torch.autograd.grad((ref * w).sum(), inputs)
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
