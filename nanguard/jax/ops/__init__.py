"""Prevent, on JAX: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook ``jnp``/``jax.nn`` counterpart wherever that is finite, returns a
finite value and gradient (first and second order) for every finite input whose true value
is finite, and follows the conventions of ``nanguard.core.vectors`` (the same as
``nanguard.torch`` and ``nanguard.tf``) at each singular point. Each is built on
``jax.custom_jvp``, so ``jax.grad``, ``jacfwd``, ``jacrev``, ``hessian``, ``vmap`` and
``jit`` all work; the ops that take a mask also accept jax.nn's name for it, ``where=``.
"""

from nanguard.jax.ops.distance import distance_matrix
from nanguard.jax.ops.division import div, masked_mean
from nanguard.jax.ops.entropy import cross_entropy_probs, entropy, xlogy
from nanguard.jax.ops.exp_log import logaddexp, logsumexp, softplus
from nanguard.jax.ops.norms import cosine_similarity, norm, normalize
from nanguard.jax.ops.roots import pow, sqrt
from nanguard.jax.ops.softmax import log_softmax, softmax
from nanguard.jax.ops.stats import std, var
from nanguard.jax.ops.trig import acos, asin
from nanguard.jax.ops.where import safe_where

__all__ = [
    "acos", "asin", "cosine_similarity", "cross_entropy_probs", "distance_matrix", "div", "entropy",
    "log_softmax", "logaddexp", "logsumexp", "masked_mean", "norm", "normalize", "pow", "safe_where",
    "softmax", "softplus", "sqrt", "std", "var", "xlogy",
]
