"""nanguard for JAX and optax: the safe ops, the detector and the guard, on the user's own JAX.

Importing this package needs JAX; without it the error names the extra to install. The
names below are looked up in their pillar's subpackage on first use, so importing
``nanguard.jax`` costs only the JAX import.

Subpackages, one pillar each: ``ops`` (prevent), ``detector`` (detect, locate, explain),
``guard`` (recover).
"""

from __future__ import annotations

from typing import Tuple

try:
    import jax as _framework  # noqa: F401  (the check; every submodule imports JAX itself)
except ImportError as error:  # pragma: no cover - exercised in a subprocess by tests/core
    raise ImportError(
        "nanguard's JAX pillars (safe ops, detect, guard) need JAX, which is not installed. "
        "Install it with `pip install 'nanguard[jax]'` (or your own JAX build), "
        "or use only `nanguard lint`, which needs no framework."
    ) from error

from nanguard._lazy import lazy_names
from nanguard.errors import NonFiniteError

# Each pillar lists the public names its subpackage defines.
_OPS: Tuple[str, ...] = (
    "acos", "asin", "cosine_similarity", "cross_entropy_probs", "distance_matrix", "div", "entropy",
    "log_softmax", "logaddexp", "logsumexp", "masked_mean", "norm", "normalize", "pow", "safe_where",
    "softmax", "softplus", "sqrt", "std", "var", "xlogy",
)

_DETECT: Tuple[str, ...] = ("detect", "Report", "TensorSummary", "ScalarArg", "NonFiniteWarning")

_GUARD: Tuple[str, ...] = ("guarded", "GuardState", "check_guard", "guard_records", "resume_guard")

__all__ = [*_OPS, *_DETECT, *_GUARD, "NonFiniteError"]
__getattr__, __dir__ = lazy_names("nanguard.jax", globals(), {"ops": _OPS, "detector": _DETECT, "guard": _GUARD})
