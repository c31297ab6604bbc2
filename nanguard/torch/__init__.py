"""nanguard for PyTorch: the safe ops, the detector and the guard, on the user's own torch.

``nanguard.softplus`` and the other top-level names are aliases of the names here
(``nanguard.torch.softplus is nanguard.softplus``). Importing this package needs torch;
without it the error names the extra to install.

Subpackages, one pillar each: ``ops`` (prevent), ``detector`` (detect, locate, explain),
``guard`` (recover), ``audit`` (the ops that can produce NaN/Inf, before a run).
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401  (the check; every submodule imports torch itself)
except ImportError as error:  # pragma: no cover - exercised in a subprocess by tests/core
    raise ImportError(
        "nanguard's PyTorch pillars (safe ops, detect, GradGuard) need PyTorch, which is not "
        "installed. Install it with `pip install 'nanguard[torch]'` (or your own torch build), "
        "or use only `nanguard lint`, which needs no framework."
    ) from error

from nanguard.core.opspec import op_names
from nanguard.errors import NonFiniteError
from nanguard.torch.auditor import audit, audit_script
from nanguard.torch.detector import NonFiniteWarning, Report, TensorSummary, detect
from nanguard.torch.guard import GradGuard, GradientGrowthWarning, GradNormMonitor, GrowthAlert
from nanguard.torch import ops

globals().update({name: getattr(ops, name) for name in ops.__all__})

__all__ = [
    *op_names("torch"),
    "detect", "Report", "TensorSummary", "NonFiniteWarning",
    "GradGuard", "GradNormMonitor", "GradientGrowthWarning", "GrowthAlert",
    "audit", "audit_script",
    "NonFiniteError",
]
