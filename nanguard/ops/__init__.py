"""Prevent: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook/torch counterpart wherever that is finite, returns a finite
value and gradient (first and second order) for every finite input whose true value is
finite, and documents its convention at each singular point.
"""

from nanguard.ops.distance import distance_matrix
from nanguard.ops.division import div, masked_mean
from nanguard.ops.entropy import cross_entropy_probs, entropy, xlogy
from nanguard.ops.exp_log import logaddexp, logsumexp, softplus
from nanguard.ops.norms import cosine_similarity, norm, normalize
from nanguard.ops.roots import pow, sqrt
from nanguard.ops.softmax import log_softmax, softmax
from nanguard.ops.stats import std, var
from nanguard.ops.trig import acos, asin
from nanguard.ops.where import safe_where

__all__ = [
    "acos",
    "asin",
    "cosine_similarity",
    "cross_entropy_probs",
    "distance_matrix",
    "div",
    "entropy",
    "log_softmax",
    "logaddexp",
    "logsumexp",
    "masked_mean",
    "norm",
    "normalize",
    "pow",
    "safe_where",
    "softmax",
    "softplus",
    "sqrt",
    "std",
    "var",
    "xlogy",
]
