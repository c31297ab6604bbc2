"""Prevent: numerically safe ops with finite values and gradients, one family per module.

Every op equals its textbook/torch counterpart wherever that is finite, returns a finite
value and gradient (first and second order) for every finite input whose true value is
finite, and documents its convention at each singular point.
"""

from nanguard.torch.ops.distance import distance_matrix
from nanguard.torch.ops.division import div, masked_mean
from nanguard.torch.ops.entropy import cross_entropy_probs, entropy, xlogy
from nanguard.torch.ops.exp_log import logaddexp, logsumexp, softplus
from nanguard.torch.ops.norms import cosine_similarity, norm, normalize
from nanguard.torch.ops.roots import pow, sqrt
from nanguard.torch.ops.softmax import log_softmax, softmax
from nanguard.torch.ops.stats import std, var
from nanguard.torch.ops.trig import acos, asin
from nanguard.torch.ops.where import safe_where

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
