"""nanguard for TensorFlow 2 and Keras 3 on the TF backend: the safe ops, the detector and the guard, on the user's own TensorFlow.

Importing it imports TensorFlow (the error names the extra to install when that fails) and
nothing more: each public name is looked up in its pillar's subpackage on first use. The
pillars: ``ops`` (prevent), ``detector`` (detect, locate, explain), ``guard`` (recover).
"""

from __future__ import annotations

from nanguard._lazy import backend_names, require
from nanguard.errors import NonFiniteError  # noqa: F401  (public here too)

require("tensorflow", "TensorFlow", "tf", "safe ops, detect, guard")
__all__, __getattr__, __dir__ = backend_names(
    "tf", globals(), detector=("detect", "Report", "TensorSummary", "NonFiniteWarning"),
    guard=("GuardedOptimizer", "GuardCallback"))
