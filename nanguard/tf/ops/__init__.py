"""Prevent, on TensorFlow: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook/TensorFlow counterpart wherever that is finite, returns a finite
value and gradient (first and second order) for every finite input whose true value is
finite, and follows the conventions of ``nanguard.core.vectors`` (the same as
``nanguard.torch``) at each singular point. They work in eager code, inside ``tf.function``
(``jit_compile=True`` included), under ``tf.vectorized_map`` and ``GradientTape.jacobian``,
and in Keras 3 layers and losses on the TensorFlow backend.
"""

from nanguard.tf.ops.distance import distance_matrix
from nanguard.tf.ops.division import div, masked_mean
from nanguard.tf.ops.entropy import cross_entropy_probs, entropy, xlogy
from nanguard.tf.ops.exp_log import logaddexp, logsumexp, softplus
from nanguard.tf.ops.norms import cosine_similarity, norm, normalize
from nanguard.tf.ops.roots import pow, sqrt
from nanguard.tf.ops.softmax import log_softmax, softmax
from nanguard.tf.ops.stats import std, var
from nanguard.tf.ops.trig import acos, asin
from nanguard.tf.ops.where import safe_where

__all__ = [
    "acos", "asin", "cosine_similarity", "cross_entropy_probs", "distance_matrix", "div", "entropy",
    "log_softmax", "logaddexp", "logsumexp", "masked_mean", "norm", "normalize", "pow", "safe_where",
    "softmax", "softplus", "sqrt", "std", "var", "xlogy",
]
