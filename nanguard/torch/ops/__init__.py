"""Prevent: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook/torch counterpart wherever that is finite, returns a finite
value and gradient (first and second order) for every finite input whose true value is
finite, and documents its convention at each singular point.
"""

from nanguard._lazy import load_ops

# the ops and their family modules are listed once, in nanguard.core.opspec_table
__all__ = load_ops(__name__, globals(), "torch")
