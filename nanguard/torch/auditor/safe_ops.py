"""nanguard's own safe ops in an audit: one op each, finite for every finite input by contract
(value and gradient; `tests/contract` holds them to it), with the output range of each.

The trace records a safe op as one call (``nanguard.torch.ops._core.public_op`` is the
seam), so the repairs inside it (the NaN of a dead softmax row set to 0) are not findings,
and a program fixed the way a finding says is clean.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

from nanguard.torch.auditor.interval import INF, Box
from nanguard.torch.auditor.rules import Ctx

# name -> the range of every output element
_RANGES: Dict[str, Tuple[float, float]] = {
    "softmax": (0.0, 1.0),
    "log_softmax": (-INF, 0.0),
    "sqrt": (0.0, INF),
    "pow": (0.0, INF),
    "norm": (0.0, INF),
    "distance_matrix": (0.0, INF),
    "std": (0.0, INF),
    "var": (0.0, INF),
    "entropy": (0.0, INF),
    "softplus": (0.0, INF),
    "normalize": (-1.0, 1.0),
    "cosine_similarity": (-1.0, 1.0),
    "acos": (0.0, math.pi),
    "asin": (-math.pi / 2, math.pi / 2),
}


def safe_op_rule(ctx: Ctx) -> Optional[Box]:
    name = ctx.rec.base.split(".", 1)[1]
    lo, hi = _RANGES.get(name, (-INF, INF))
    node = ctx.rec.outputs[0] if ctx.rec.outputs else None
    if node is None:
        return None
    return Box.of(lo, hi, node.shape, node.dtype)


__all__ = ["safe_op_rule"]
