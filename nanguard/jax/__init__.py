"""nanguard for JAX and optax: the safe ops, the detector and the guard, on the user's own JAX.

A JAX install is checked on import, with an error naming the ``jax`` extra; the names below
come from their pillar on first use (``ops``: prevent; ``detector``: detect, locate,
explain; ``guard``: recover), so ``import nanguard.jax`` costs the JAX import alone.
"""

from __future__ import annotations

from nanguard._lazy import backend_names, require
from nanguard.errors import NonFiniteError  # noqa: F401  (public here too)

require("jax", "JAX", "jax", "safe ops, detect, guard")
__all__, __getattr__, __dir__ = backend_names(
    "jax", globals(), detector=("detect", "Report", "TensorSummary", "ScalarArg", "NonFiniteWarning"),
    guard=("guarded", "GuardState", "check_guard", "guard_records", "resume_guard"))
