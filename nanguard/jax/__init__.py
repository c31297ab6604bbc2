"""nanguard for JAX and optax: the safe ops, the detector and the guard, on the user's own JAX.

Importing this package needs JAX; without it the error names the extra to install. The
names below are looked up in their pillar's subpackage on first use, so importing
``nanguard.jax`` costs only the JAX import.

Subpackages, one pillar each: ``ops`` (prevent), ``detector`` (detect, locate, explain),
``guard`` (recover).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Tuple

try:
    import jax as _framework  # noqa: F401  (the check; every submodule imports JAX itself)
except ImportError as error:  # pragma: no cover - exercised in a subprocess by tests/core
    raise ImportError(
        "nanguard's JAX pillars (safe ops, detect, guard) need JAX, which is not installed. "
        "Install it with `pip install 'nanguard[jax]'` (or your own JAX build), "
        "or use only `nanguard lint`, which needs no framework."
    ) from error

from nanguard.errors import NonFiniteError

# Each pillar lists the public names its subpackage defines.
_OPS: Tuple[str, ...] = ()

_DETECT: Tuple[str, ...] = ("detect", "Report", "TensorSummary", "ScalarArg", "NonFiniteWarning")

_GUARD: Tuple[str, ...] = ()

_WHERE: Dict[str, str] = {
    **{name: "nanguard.jax.ops" for name in _OPS},
    **{name: "nanguard.jax.detector" for name in _DETECT},
    **{name: "nanguard.jax.guard" for name in _GUARD},
}

__all__ = [*_OPS, *_DETECT, *_GUARD, "NonFiniteError"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'nanguard.jax' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
