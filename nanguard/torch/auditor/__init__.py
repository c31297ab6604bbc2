"""Audit: find the ops that *can* produce NaN/Inf before a run, with a witness input and the fix.

``nanguard.audit(fn_or_module, *example_args)`` and ``nanguard.audit_script(path, argv)``
trace one forward pass (`trace`), bound every value with interval arithmetic
(`analysis`, `rules`), ask of each op whether its arguments can reach its singular set
(`checks`, over the table of `nanguard.core.singular`), search for a concrete failing input
(`witness`) and word the fix from the hazard catalogue (`fixes`). ``nanguard audit`` is the
command line (`cli`).
"""

from nanguard.torch.auditor.api import MODES, audit, audit_script

__all__ = ["MODES", "audit", "audit_script"]
