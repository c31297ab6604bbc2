"""Losses scaled by ``torch.amp.GradScaler``: their overflow is the scaler's, not a finding.

Mixed-precision training multiplies the loss by a large scale (65536 by default) so that small
float16 gradients do not underflow. The first steps, and every step after the scale grows,
overflow some gradient to inf on purpose: the scaler sees it in ``unscale_``, skips the step
and halves the scale. A backward pass from a scaled loss is therefore judged after it ends,
and an inf made by an op that can only overflow (a cast, a product, a sum) is left to the
scaler. An inf at a singular point (x/0, log 0, sqrt's gradient at 0) or a NaN the pass
makes before any overflow is a bug the scaler cannot fix (it would skip every step), and is
reported as usual.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Optional, Sequence

import torch

from nanguard.core.report import Report

# ops whose inf marks a singular point rather than an overflow (their base names)
_SINGULAR = frozenset({
    "div", "reciprocal", "log", "log1p", "log2", "log10", "rsqrt", "sqrt", "pow", "acos", "asin", "atanh",
    "xlogy", "special_xlog1py", "digamma", "polygamma", "lgamma", "erfinv", "logit", "tan", "atan2",
    "_softmax_backward_data", "_log_softmax_backward_data", "nll_loss_backward", "nll_loss2d_backward",
})

_SCALED: Dict[int, "weakref.ref[torch.Tensor]"] = {}
_ORIGINAL_SCALE: Optional[Any] = None


def _scale(self: Any, outputs: Any) -> Any:
    scaled = _ORIGINAL_SCALE(self, outputs)
    for t in (scaled if isinstance(scaled, (list, tuple)) else (scaled,)):
        if isinstance(t, torch.Tensor):
            key = id(t)
            _SCALED[key] = weakref.ref(t, lambda _ref, key=key: _SCALED.pop(key, None))
    return scaled


def install() -> None:
    global _ORIGINAL_SCALE
    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler is None or scaler.scale is _scale:
        return
    _ORIGINAL_SCALE = scaler.scale
    scaler.scale = _scale


def uninstall() -> None:
    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler is not None and scaler.scale is _scale and _ORIGINAL_SCALE is not None:
        scaler.scale = _ORIGINAL_SCALE


def any_scaled(roots: Sequence[torch.Tensor]) -> bool:
    """Whether a backward pass starts from a loss returned by ``GradScaler.scale``."""
    for t in roots:
        ref = _SCALED.get(id(t))
        if ref is not None and ref() is t:
            return True
    return False


def scaler_overflow(report: Report) -> bool:
    """A backward finding the scaler handles: an inf made by an op that can only overflow."""
    if report.phase != "backward" or report.kind != "inf":
        return False
    base = report.op.split("aten.", 1)[-1].split(".")[0]
    return base not in _SINGULAR
