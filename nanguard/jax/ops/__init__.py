"""Prevent, on JAX: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook ``jnp``/``jax.nn`` counterpart wherever that is finite, returns a
finite value and gradient (first and second order) for every finite input whose true value
is finite, and follows the conventions of ``nanguard.core.vectors`` (the same as
``nanguard.torch`` and ``nanguard.tf``) at each singular point. Each is built on
``jax.custom_jvp``, so ``jax.grad``, ``jacfwd``, ``jacrev``, ``hessian``, ``vmap`` and
``jit`` all work; the ops that take a mask also accept jax.nn's name for it, ``where=``.
"""

from nanguard._lazy import load_ops

# the ops and their family modules are listed once, in nanguard.core.opspec_table
__all__ = load_ops(__name__, globals(), "jax")
