"""What torch adds to a finding's summaries for the shared rules of `nanguard.core.why`: the
tensors' autograd history and values, read only when a rule asks (`TorchProbe`), and the
`Facts` of an `Evidence` (`facts`).
"""

from __future__ import annotations

from typing import Any

import torch

from nanguard.core.why import Facts, Probe
from nanguard.torch.detector.evidence import (
    Arg,
    Evidence,
    counts_of_empty_groups,
    diagonal_zeros,
    gram_expansion,
    made_by,
    node_base,
    producer,
    rows_all_neginf,
    sum_of_squares,
    zero_vectors,
)


def _kids(node: Any) -> list:
    return [n for n, _ in getattr(node, "next_functions", ()) if n is not None]


def _made_by_node(node: Any, *names: str) -> bool:
    return node is not None and node_base(node) in names


class TorchProbe(Probe):
    """The answers of `Probe` read off the tensors an `Evidence` still holds."""

    def __init__(self, ev: Evidence) -> None:
        self._ev = ev
        self._args: list[Arg] = ev.forward_inputs if ev.phase == "backward" and ev.forward_inputs else ev.inputs

    def _first(self) -> torch.Tensor | None:
        return self._args[0][1] if self._args else None

    def root(self) -> tuple[str, dict]:
        """A Gram-expansion distance (zeros on a square matrix's diagonal, or a difference that
        takes in a matrix product), a norm (a sum of squares), or the plain root."""
        t = self._first()
        on_diagonal = diagonal_zeros(t)
        if on_diagonal or gram_expansion(t):
            return "distance_matrix", {"diagonal": on_diagonal or 0}
        if sum_of_squares(t):
            return "norm_zero", {}
        return "", {}

    def log_source(self) -> str:
        node = producer(self._first())
        name = node_base(node) if node is not None else ""
        if name == "Softmax":
            return "log_softmax"
        if name == "Sigmoid":
            return "log_sigmoid"
        if name == "Rsub" and any(_made_by_node(k, "Sigmoid") for k in _kids(node)):
            return "log_one_minus_sigmoid"
        if name in ("Sum", "Mean") and any(_made_by_node(k, "Exp") for k in _kids(node)):
            return "logsumexp_overflow"
        return "log_zero"

    def above(self, limit: float) -> int | None:
        t = self._first()
        if t is None:
            return None
        with torch.no_grad():
            return int((t > limit).sum())

    def masked_rows(self) -> tuple[int, int] | None:
        return rows_all_neginf(self._first(), self._ev.dim)

    def zero_vectors(self) -> tuple[int, int] | None:
        return zero_vectors(self._first(), self._ev.dim)

    def empty_groups(self) -> bool:
        return len(self._args) > 1 and counts_of_empty_groups(self._args[0][1], self._args[-1][1])

    def log_factor(self, index: int) -> bool:
        return index < len(self._ev.inputs) and made_by(self._ev.inputs[index][1], "Log", "LogSoftmax")

    def reduced_count(self) -> int | None:
        t = self._first()
        if t is not None and self._ev.dim is not None and t.dim() > 0:
            return int(t.shape[self._ev.dim])
        return None


def facts(ev: Evidence) -> Facts:
    """The framework-free facts of a torch finding."""
    return Facts(phase=ev.phase, kind=ev.kind, names=(ev.base,), framework="torch",
                 inputs=[s for s, _ in ev.inputs], forward_inputs=[s for s, _ in ev.forward_inputs],
                 scalars=[a.value for a in ev.scalars], outputs=ev.outputs,
                 exponent=ev.scalars[0].value if ev.scalars else None, mixed=ev.autocast, probe=TorchProbe(ev),
                 fn=ev.base, node=ev.node or "?", op_name=ev.op)


__all__ = ["TorchProbe", "facts"]
