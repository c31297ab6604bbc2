"""nanguard: NaN and Inf in autodiff programs, solved.

Six pillars: prevent (safe ops), detect & locate, explain, recover (guard the step), audit, lint.

The package itself depends on no framework. ``nanguard.core`` (the op contract, the hazard
catalogue, the report) and ``nanguard.lint`` import none; the framework pillars live in
``nanguard.torch`` and are imported on first use, so ``nanguard.softplus`` is
``nanguard.torch.softplus`` and ``nanguard lint`` starts without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

from nanguard.core.opspec import op_names

__version__ = "0.1.0"

# The framework-neutral names; everything else in __all__ comes from the default backend.
_NEUTRAL = {"NonFiniteError": "nanguard.errors"}
_DEFAULT_BACKEND = "nanguard.torch"
_BACKEND_NAMES = (
    *op_names("torch"),  # the safe ops, as the op specification lists them
    "detect", "Report", "TensorSummary", "NonFiniteWarning",
    "GradGuard", "GradNormMonitor", "GradientGrowthWarning", "GrowthAlert",
    "audit", "audit_script",
)

__all__ = [*_BACKEND_NAMES, *_NEUTRAL]


def __getattr__(name: str) -> Any:
    if name in _NEUTRAL:
        module = _NEUTRAL[name]
    elif name in _BACKEND_NAMES:
        module = _DEFAULT_BACKEND
    else:
        raise AttributeError(f"module 'nanguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # static analysers and IDEs see the real names
    from nanguard.errors import NonFiniteError  # noqa: F401
    from nanguard.torch import (  # noqa: F401
        GradGuard, GradientGrowthWarning, GradNormMonitor, GrowthAlert, NonFiniteWarning, Report, TensorSummary,
        acos, audit, audit_script, asin, cosine_similarity, cross_entropy_probs, detect, distance_matrix, div, entropy, log_softmax,
        logaddexp, logsumexp, masked_mean, norm, normalize, pow, safe_where, softmax, softplus, sqrt, std, var,
        xlogy,
    )
