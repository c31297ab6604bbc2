"""nanguard: NaN and Inf in autodiff programs, solved.

Five pillars: prevent (safe ops), detect & locate, explain, recover (guard the step), lint.

Names are imported on first use, so that ``nanguard lint`` (which only reads source) starts
without importing torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any, Dict, List

__version__ = "0.1.0"

_PILLARS: Dict[str, List[str]] = {
    # prevent: the safe ops
    "nanguard.ops": [
        "acos", "asin", "cosine_similarity", "cross_entropy_probs", "distance_matrix", "div", "entropy",
        "log_softmax", "logaddexp", "logsumexp", "masked_mean", "norm", "normalize", "pow", "safe_where",
        "softmax", "softplus", "sqrt", "std", "var", "xlogy",
    ],
    # detect & locate, explain
    "nanguard.detect": ["detect", "Report", "TensorSummary", "NonFiniteWarning"],
    # recover
    "nanguard.guard": ["GradGuard", "GradNormMonitor", "GradientGrowthWarning", "GrowthAlert"],
    "nanguard.errors": ["NonFiniteError"],
}
_HOME = {name: module for module, names in _PILLARS.items() for name in names}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'nanguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """`nanguard.detect` is a function, though `nanguard/detect/` is also a subpackage.

    Importing a submodule binds it as an attribute of its package; this data descriptor
    takes that assignment and keeps answering with the function (the subpackage stays
    reachable through ``import nanguard.detect...`` and ``sys.modules``).
    """

    @property
    def detect(self) -> Any:
        return importlib.import_module("nanguard.detect").detect

    @detect.setter
    def detect(self, _subpackage: Any) -> None:
        pass


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # static analysers and IDEs see the real names
    from nanguard.detect import NonFiniteWarning, Report, TensorSummary, detect  # noqa: F401
    from nanguard.errors import NonFiniteError  # noqa: F401
    from nanguard.guard import GradGuard, GradientGrowthWarning, GradNormMonitor, GrowthAlert  # noqa: F401
    from nanguard.ops import (  # noqa: F401
        acos, asin, cosine_similarity, cross_entropy_probs, distance_matrix, div, entropy, log_softmax, logaddexp,
        logsumexp, masked_mean, norm, normalize, pow, safe_where, softmax, softplus, sqrt, std, var, xlogy,
    )
