"""Forward-mode AD (``torch.func.jvp``, ``jacfwd``, ``hessian``) for every safe op, from its backward.

Each op writes one gradient formula, its backward: ``grad -> J^T grad``, linear in ``grad``.
The forward-mode rule ``tangent -> J tangent`` is the transpose of that linear map, and the
transpose of a linear map is its vector-Jacobian product: ``J t = vjp(g -> J^T g)(t)``. So
the jvp of every op reuses its (differentiable) backward, with the same conventions at the
singular points, and needs no second formula that could drift from the first.

The forward pass and ``setup_context`` run once more on a stand-in context; forward mode
costs about one forward and two backward passes of the op.
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch


class _StandInContext:
    """Holds what ``setup_context`` saves, so ``backward`` can be called as a plain function."""

    def __init__(self, needs_input_grad: Tuple[bool, ...]):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: Tuple[torch.Tensor, ...] = ()
        self.constant_outputs: Tuple[torch.Tensor, ...] = ()

    def save_for_backward(self, *tensors: torch.Tensor) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors: torch.Tensor) -> None:
        pass

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        self.constant_outputs = tensors

    def set_materialize_grads(self, value: bool) -> None:
        pass


def jvp_from_backward(function: Any, inputs: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """The tangents of ``function``'s outputs, as the transpose of its backward at ``inputs``."""
    moving = [i for i, (x, t) in enumerate(zip(inputs, tangents))
              if isinstance(x, torch.Tensor) and x.is_floating_point() and t is not None]
    context = _StandInContext(tuple(i in moving for i in range(len(inputs))))
    outputs = function.forward(*inputs)
    function.setup_context(context, tuple(inputs), outputs)
    several = isinstance(outputs, tuple)
    outs = outputs if several else (outputs,)
    # integer by-products (indices kept for backward) get no gradient and no tangent
    floating = [j for j, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.is_floating_point()]

    def pullback(*float_grads: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        grads = [None] * len(outs)
        for j, g in zip(floating, float_grads):
            grads[j] = g
        with torch.enable_grad():  # the differentiable backward: linear in grad, no in-place tricks
            result = function.backward(context, *grads)
        result = result if isinstance(result, tuple) else (result,)
        return tuple(torch.zeros_like(inputs[i]) if result[i] is None else result[i] for i in moving)

    _, transpose = torch.func.vjp(pullback, *[torch.zeros_like(outs[j]) for j in floating])
    float_tangents = dict(zip(floating, transpose(tuple(tangents[i] for i in moving))))
    out_tangents = tuple(float_tangents.get(j) for j in range(len(outs)))
    # an output the op marks non-differentiable (a by-product kept for backward) has no tangent
    out_tangents = tuple(None if any(o is c for c in context.constant_outputs) else t
                         for o, t in zip(outs, out_tangents))
    return out_tangents if several else out_tangents[0]
