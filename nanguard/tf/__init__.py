"""nanguard for TensorFlow 2 and Keras 3 on the TF backend: the safe ops, the detector and the guard, on the user's own TensorFlow.

Importing this package needs TensorFlow; without it the error names the extra to install. The
names below are looked up in their pillar's subpackage on first use, so importing
``nanguard.tf`` costs only the TensorFlow import.

Subpackages, one pillar each: ``ops`` (prevent), ``detector`` (detect, locate, explain),
``guard`` (recover).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Tuple

try:
    import tensorflow as _framework  # noqa: F401  (the check; every submodule imports TensorFlow itself)
except ImportError as error:  # pragma: no cover - exercised in a subprocess by tests/core
    raise ImportError(
        "nanguard's TensorFlow pillars (safe ops, detect, guard) need TensorFlow, which is not installed. "
        "Install it with `pip install 'nanguard[tf]'` (or your own TensorFlow build), "
        "or use only `nanguard lint`, which needs no framework."
    ) from error

from nanguard.errors import NonFiniteError

# Each pillar lists the public names its subpackage defines.
_OPS: Tuple[str, ...] = ()

_DETECT: Tuple[str, ...] = ("detect", "Report", "TensorSummary", "NonFiniteWarning")

_GUARD: Tuple[str, ...] = ()

_WHERE: Dict[str, str] = {
    **{name: "nanguard.tf.ops" for name in _OPS},
    **{name: "nanguard.tf.detector" for name in _DETECT},
    **{name: "nanguard.tf.guard" for name in _GUARD},
}

__all__ = [*_OPS, *_DETECT, *_GUARD, "NonFiniteError"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'nanguard.tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
