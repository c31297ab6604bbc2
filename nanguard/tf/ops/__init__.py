"""Prevent, on TensorFlow: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook/TensorFlow counterpart wherever that is finite, returns a finite
value and gradient (first and second order) for every finite input whose true value is
finite, and follows the conventions of ``nanguard.core.vectors`` (the same as
``nanguard.torch``) at each singular point. They work in eager code, inside ``tf.function``
(``jit_compile=True`` included), under ``tf.vectorized_map`` and ``GradientTape.jacobian``,
and in Keras 3 layers and losses on the TensorFlow backend.
"""

from nanguard._lazy import load_ops

# the ops and their family modules are listed once, in nanguard.core.opspec_table
__all__ = load_ops(__name__, globals(), "tf")
