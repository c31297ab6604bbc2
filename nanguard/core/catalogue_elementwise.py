"""Catalogue entries, part one: elementwise maths (roots, powers, logs, exponentials).

Part of the hazard catalogue `nanguard.core.hazards`; read the entries there.
"""

from __future__ import annotations

from typing import List

from nanguard.core.hazard import Hazard, make, nanguard_op

ENTRIES: List[Hazard] = [
    # ------------------------------------------------------------------ roots and powers
    make("sqrt_negative", "sqrt of a negative number", ("sqrt",),
         value="NaN for x < 0", gradient="NaN for x < 0",
         why="sqrt of a negative number is NaN, and values that should be ≥ 0 (a difference of nearly equal "
             "terms, a variance computed as E[x²] − E[x]²) come out slightly negative from round-off",
         fix="nanguard.sqrt(x) treats round-off negatives as 0 (value 0, gradient 0); or find the subtraction "
             "that cancels",
         safe=nanguard_op("sqrt"),
         fix_in={
             "tf": "nanguard.tf.sqrt(x) treats round-off negatives as 0 (value 0, gradient 0); or find the "
                   "subtraction that cancels",
             "jax": "nanguard.jax.sqrt(x) treats round-off negatives as 0 (value 0, gradient 0); or find the "
                    "subtraction that cancels",
         },
         evidence={"forward": "{negative} of {numel} inputs are negative (min {min})"}),
    make("sqrt_zero", "sqrt at 0", ("sqrt",),
         value="finite: sqrt(0) = 0", gradient="1/(2·sqrt(x)): inf at x = 0, NaN once multiplied by 0",
         why="sqrt's gradient 1/(2·sqrt(x)) is inf at x = 0, and 0·inf = NaN where the incoming gradient is 0",
         fix="nanguard.sqrt(x) has value 0 and gradient 0 at x = 0 (the minimum-norm subgradient)",
         fix_in={
             "tf": "nanguard.tf.sqrt(x) has value 0 and gradient 0 at x = 0 (the minimum-norm subgradient)",
             "jax": "nanguard.jax.sqrt(x) has value 0 and gradient 0 at x = 0 (the minimum-norm subgradient)",
             "keras": "keras.ops.sqrt(x + eps) keeps the gradient finite at 0; nanguard.tf.sqrt(x) (value 0, "
                      "gradient 0 at x = 0) on the TensorFlow backend",
         },
         safe=nanguard_op("sqrt"), lint=("NG304",),
         evidence={"backward": "{zeros} of {numel} inputs were exactly 0"}),
    make("distance_matrix", "distance matrix from the Gram expansion", ("sqrt", "pow", "rsqrt"),
         value="NaN where round-off leaves |a|² + |b|² − 2a·b slightly negative (the diagonal, a = b)",
         gradient="inf, then NaN, where the squared distance is exactly 0 (the diagonal)",
         why="the Gram expansion |a|² + |b|² − 2a·b cancels where a = b (the diagonal of a distance matrix): "
             "it is 0 or a round-off negative such as −1e-7, so sqrt is NaN there and its gradient "
             "1/(2·sqrt(d)) is inf at 0",
         fix="nanguard.distance_matrix(x) (or nanguard.distance_matrix(x, y)) computes pairwise distances "
             "without cancellation, with an exact 0 and a zero gradient on the diagonal",
         fix_in={
             "tf": "nanguard.tf.distance_matrix(x) (or nanguard.tf.distance_matrix(x, y)) computes pairwise "
                   "distances without cancellation, with an exact 0 and a zero gradient on the diagonal",
             "jax": "nanguard.jax.distance_matrix(x) (or nanguard.jax.distance_matrix(x, y)) computes "
                    "pairwise distances without cancellation, with an exact 0 and a zero gradient on the "
                    "diagonal",
             "keras": "keras.ops.sqrt(keras.ops.maximum(d2, eps)) keeps value and gradient finite (biased by "
                      "eps); nanguard.tf.distance_matrix(x) on the TensorFlow backend is exact, with a zero "
                      "gradient on the diagonal",
         },
         safe=nanguard_op("distance_matrix"), lint=("NG301",),
         evidence={"forward": "{negative} of {numel} squared distances are round-off negatives (min {min}, "
                              "max {max})",
                   "backward": "sqrt's gradient is 1/(2·sqrt(x)); {zeros} of {numel} inputs were exactly 0",
                   "diagonal": "sqrt's gradient is 1/(2·sqrt(x)); {zeros} of {numel} inputs were exactly 0 "
                               "({diagonal} on the diagonal)"}),
    make("norm_zero", "norm of the zero vector", ("norm", "linalg_vector_norm", "frobenius_norm", "sqrt", "pow"),
         value="finite: ‖0‖ = 0, but 1/‖x‖ is inf there",
         gradient="x/‖x‖ = 0/0 = NaN at the zero vector",
         why="the gradient of ‖x‖ = sqrt(sum(x²)) is x/‖x‖, which is 0/0 = NaN at the zero vector (a padding "
             "row, identical points, a dead feature), and 1/‖x‖ is inf there",
         fix="nanguard.norm(x, dim) has gradient 0 at the zero vector (as torch.linalg.vector_norm does); "
             "nanguard.normalize(x, dim) for x/‖x‖",
         fix_in={
             "tf": "nanguard.tf.norm(x, axis) has gradient 0 at the zero vector (tf.norm's is NaN there); "
                   "nanguard.tf.normalize(x, axis) for x/‖x‖",
             "jax": "optax.safe_norm(x, 0.0, axis) or nanguard.jax.norm(x, axis) has gradient 0 at the zero "
                    "vector (jnp.linalg.norm's is NaN there); nanguard.jax.normalize(x, axis) for x/‖x‖",
             "keras": "keras.ops.sqrt(keras.ops.maximum(keras.ops.sum(keras.ops.square(x), axis), eps)) keeps "
                      "the gradient finite at the zero vector (keras.ops.norm's is NaN there); "
                      "nanguard.tf.norm(x, axis) on the TensorFlow backend",
         },
         safe=nanguard_op("norm"), lint=("NG302",),
         evidence={"backward": "{zeros} of {numel} squared norms were exactly 0",
                   "vectors": "{zeros} of {numel} vectors are exactly 0"}),
    make("negative_power_zero", "x ** p with p < 0 at 0", ("pow", "float_power", "rsqrt"),
         value="inf at x = 0; NaN for x < 0 with a fractional p", gradient="p·x^(p−1): inf at x = 0",
         why="x ** p with p < 0 (rsqrt(x) = x ** −0.5, deg ** −0.5) is inf at x = 0 and NaN for negative x with "
             "a fractional p, so a count, degree, variance or norm that can be 0 makes it inf",
         fix="keep the base away from 0 (x + eps, as torch.nn.LayerNorm does with rsqrt(var + eps)), or "
             "nanguard.div(1, nanguard.pow(x, -p)), which is 0 with a finite gradient where x = 0",
         fix_in={
             "tf": "keep the base away from 0 (x + eps, as tf.math.rsqrt(variance + epsilon) in "
                   "tf.nn.batch_normalization), or nanguard.tf.div(1, nanguard.tf.pow(x, -p)), which is 0 "
                   "with a finite gradient where x = 0",
             "jax": "keep the base away from 0 (x + eps, as jax.lax.rsqrt(var + eps) in flax's LayerNorm), or "
                    "nanguard.jax.div(1, nanguard.jax.pow(x, -p)), which is 0 with a finite gradient where x "
                    "= 0",
             "keras": "keep the base away from 0 (x + eps, as keras.layers.LayerNormalization does with "
                      "keras.ops.rsqrt(variance + epsilon))",
         },
         safe=nanguard_op("div"), lint=("NG304",),
         evidence={"forward": "{zeros} of {numel} bases are 0 and {negative} negative"}),
    make("fractional_power_zero", "x ** p with 0 < p < 1 at 0", ("pow", "float_power"),
         value="NaN for x < 0 with a fractional p", gradient="p·x^(p−1): inf at x = 0 when 0 < p < 1",
         why="the gradient of x ** p, p·x^(p−1), is inf at x = 0 when 0 < p < 1 (NaN once multiplied by 0), "
             "and x ** p is NaN for negative x with a fractional p",
         fix="nanguard.pow(x, p) computes max(x, 0) ** p with value 0 and gradient 0 at x = 0 "
             "(nanguard.sqrt for p = 0.5)",
         fix_in={
             "tf": "nanguard.tf.pow(x, p) computes max(x, 0) ** p with value 0 and gradient 0 at x = 0 "
                   "(nanguard.tf.sqrt for p = 0.5)",
             "jax": "nanguard.jax.pow(x, p) computes max(x, 0) ** p with value 0 and gradient 0 at x = 0 "
                    "(nanguard.jax.sqrt for p = 0.5)",
             "keras": "keras.ops.power(x + eps, p) keeps the gradient finite at 0; nanguard.tf.pow(x, p) on the "
                      "TensorFlow backend",
         },
         safe=nanguard_op("pow"), lint=("NG304",),
         evidence={"forward": "{negative} of {numel} bases are negative and {zeros} are 0",
                   "backward": "{zeros} of {numel} bases were 0 (p = {p})"}),
    # ------------------------------------------------------------------------------ logs
    make("log_zero", "log of 0", ("log", "log2", "log10"),
         value="−inf at x = 0", gradient="1/x: inf at x = 0",
         why="log 0 = −inf, and log's gradient 1/x is inf there (NaN once multiplied by 0)",
         fix="stay in log space where the 0 comes from (F.log_softmax, nanguard.logsumexp), or "
             "nanguard.xlogy(x, y) for x·log(y), which is 0 where x = 0",
         safe=nanguard_op("xlogy"),
         fix_in={
             "tf": "stay in log space where the 0 comes from (tf.nn.log_softmax, tf.reduce_logsumexp), or "
                   "nanguard.tf.xlogy(x, y) for x·log(y), which is 0 where x = 0",
             "jax": "stay in log space where the 0 comes from (jax.nn.log_softmax, jax.nn.logsumexp), or "
                    "nanguard.jax.xlogy(x, y) for x·log(y), which is 0 where x = 0; behind a where(), the double "
                    "where: jnp.log(jnp.where(x > 0, x, 1.0))",
         },
         evidence={"forward": "{zeros} of {numel} inputs are exactly 0",
                   "backward": "{zeros} of {numel} inputs were 0"}),
    make("log_negative", "log of a negative number", ("log", "log2", "log10"),
         value="NaN for x < 0", gradient="NaN for x < 0",
         why="the log of a negative number is NaN",
         fix="find what makes the argument negative (a subtraction, a sign error), or produce it with a "
             "positive map (torch.exp, nanguard.softplus) and stay in log space",
         safe=nanguard_op("softplus"),
         fix_in={
             "tf": "find what makes the argument negative (a subtraction, a sign error), or produce it with a "
                   "positive map (tf.exp, tf.nn.softplus) and stay in log space",
             "jax": "find what makes the argument negative (a subtraction, a sign error), or produce it with a "
                    "positive map (jnp.exp, jax.nn.softplus) and stay in log space",
         },
         evidence={"forward": "{negative} of {numel} inputs are negative (min {min})"}),
    make("log1p_domain", "log1p at or below −1", ("log1p",),
         value="−inf at x = −1, NaN below", gradient="1/(1 + x): inf at x = −1",
         why="log1p(x) is −inf at x = −1 and NaN below, and its gradient 1/(1 + x) is inf at −1",
         fix="keep x > −1; for log(1 + exp(x)) use nanguard.softplus(x) (or F.softplus), which never overflows",
         safe=nanguard_op("softplus"),
         fix_in={
             "tf": "keep x > −1; for log(1 + exp(x)) use tf.nn.softplus(x) (or nanguard.tf.softplus), which never "
                   "overflows",
             "jax": "keep x > −1; for log(1 + exp(x)) use jax.nn.softplus(x) (or nanguard.jax.softplus), which never "
                    "overflows",
         },
         evidence={"range": "the inputs range from {min} to {max} ({posinf} are +inf)"}),
    make("log_softmax", "log of a softmax", ("log", "softmax"),
         value="−inf where a probability underflows to 0", gradient="1/p: inf where p underflows to 0",
         why="softmax rounds a probability to exactly 0 once its logit is ~104 below the row's largest "
             "(float32), so its log is −inf and the gradient 1/p is inf",
         fix="F.log_softmax(x, dim) (torch.log_softmax, tf.nn.log_softmax) computes log(softmax(x)) in one "
             "stable step, finite for every finite input; nanguard.log_softmax(x, dim, mask=mask) with a mask",
         fix_in={
             "tf": "tf.nn.log_softmax(x, axis) computes log(softmax(x)) in one stable step, finite for every "
                   "finite input; nanguard.tf.log_softmax(x, axis, mask=mask) with a mask",
             "jax": "jax.nn.log_softmax(x, axis) computes log(softmax(x)) in one stable step, finite for "
                    "every finite input; nanguard.jax.log_softmax(x, axis, mask=mask) with a mask",
             "keras": "keras.ops.log_softmax(x, axis) computes log(softmax(x)) in one stable step, finite for "
                      "every finite input",
         },
         safe={"torch": "torch.log_softmax", "tf": "tf.nn.log_softmax", "jax": "jax.nn.log_softmax"},
         lint=("NG101",),
         evidence={"forward": "{zeros} of {numel} probabilities made by softmax are exactly 0"}),
    make("log_sigmoid", "log of a sigmoid", ("log", "sigmoid"),
         value="−inf for x below ~−88 (float32)", gradient="inf where sigmoid(x) underflows to 0",
         why="sigmoid(x) rounds to 0 for x below about −88 (float32; −17 in float16), so log(sigmoid(x)) is "
             "−inf and its gradient inf",
         fix="F.logsigmoid(x) (tf.math.log_sigmoid) = −softplus(−x) is exact and finite for every finite x",
         fix_in={
             "tf": "tf.math.log_sigmoid(x) = −softplus(−x) is exact and finite for every finite x",
             "jax": "jax.nn.log_sigmoid(x) = −softplus(−x) is exact and finite for every finite x",
             "keras": "keras.ops.log_sigmoid(x) = −softplus(−x) is exact and finite for every finite x",
         },
         safe={"torch": "torch.nn.functional.logsigmoid", "tf": "tf.math.log_sigmoid",
               "jax": "jax.nn.log_sigmoid"},
         lint=("NG102",),
         evidence={"forward": "{zeros} of {numel} sigmoid outputs are exactly 0"}),
    make("log_one_minus_tanh_squared", "log of 1 − tanh²", ("log", "log1p", "tanh"),
         value="−inf for |x| above ~9 (float32; ~4.5 in float16)", gradient="inf where 1 − tanh(x)² cancels to 0",
         why="tanh(x) rounds to exactly ±1 once |x| is above ~9 (float32), so 1 − tanh(x)² is 0 and its log "
             "−inf (a squashed Gaussian policy's log-probability correction, SAC)",
         fix="log(1 − tanh(x)²) = 2·(log 2 − x − softplus(−2x)) exactly, finite for every finite x",
         fix_in={
             "tf": "2 * (log(2) − x − tf.nn.softplus(−2 * x)), equal to log(1 − tanh(x)²) and finite",
             "jax": "2 * (log(2) − x − jax.nn.softplus(−2 * x)), equal to log(1 − tanh(x)²) and finite",
         },
         safe={"torch": "2 * (math.log(2) - x - torch.nn.functional.softplus(-2 * x))",
               "tf": "2 * (math.log(2) - x - tf.nn.softplus(-2 * x))",
               "jax": "2 * (math.log(2) - x - jax.nn.softplus(-2 * x))"},
         lint=("NG103",)),
    make("log_one_minus_exp", "log of 1 − exp", ("log", "log1p", "exp"),
         value="−inf once exp(x) rounds to 1 (a log-probability x within ~6e-8 of 0 in float32), NaN for x > 0",
         gradient="inf where 1 − exp(x) cancels to 0",
         why="exp(x) of a log-probability near 0 rounds to exactly 1 (|x| below ~6e-8 in float32: a "
             "probability that rounds to 1), so 1 − exp(x) cancels to 0 and its log is −inf although the "
             "true value, about log(−x), is finite (ORPO's log-odds, log(1 − p) computed from log p)",
         fix="torch.log(-torch.expm1(x)) for x near 0 (expm1 does not cancel); log1mexp(x) = "
             "where(x > −log 2, log(−expm1(x)), log1p(−exp(x))) is accurate for every x < 0",
         fix_in={
             "tf": "tf.math.log(-tf.math.expm1(x)) for x near 0 (expm1 does not cancel); log1mexp(x) = "
                   "where(x > −log 2, log(−expm1(x)), log1p(−exp(x))) is accurate for every x < 0",
             "jax": "jnp.log(-jnp.expm1(x)) for x near 0 (expm1 does not cancel); log1mexp(x) = "
                    "where(x > −log 2, log(−expm1(x)), log1p(−exp(x))) is accurate for every x < 0",
         },
         safe={"torch": "torch.log(-torch.expm1(x))", "tf": "tf.math.log(-tf.math.expm1(x))",
               "jax": "jnp.log(-jnp.expm1(x))"},
         lint=("NG103",)),
    make("log_one_minus_sigmoid", "log of 1 − sigmoid", ("log", "log1p", "sigmoid"),
         value="−inf for x above ~17 (float32)", gradient="inf where 1 − sigmoid(x) cancels to 0",
         why="1 − sigmoid(x) cancels to exactly 0 once sigmoid(x) rounds to 1 (x above ~17 in float32), so "
             "log(1 − sigmoid(x)) is −inf",
         fix="F.logsigmoid(−x), since 1 − sigmoid(x) = sigmoid(−x) exactly; "
             "F.binary_cross_entropy_with_logits(x, y) for the whole binary cross-entropy",
         fix_in={
             "tf": "tf.math.log_sigmoid(−x), since 1 − sigmoid(x) = sigmoid(−x) exactly; "
                   "tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=x) for the whole binary "
                   "cross-entropy",
             "jax": "jax.nn.log_sigmoid(−x), since 1 − sigmoid(x) = sigmoid(−x) exactly; "
                    "optax.sigmoid_binary_cross_entropy(x, y) for the whole binary cross-entropy",
             "keras": "keras.ops.log_sigmoid(−x), since 1 − sigmoid(x) = sigmoid(−x) exactly; "
                      "keras.losses.binary_crossentropy(y, x, from_logits=True) for the whole binary "
                      "cross-entropy",
         },
         safe={"torch": "torch.nn.functional.logsigmoid", "tf": "tf.math.log_sigmoid",
               "jax": "jax.nn.log_sigmoid"},
         lint=("NG103",),
         evidence={"forward": "{zeros} of {numel} values of 1 − sigmoid(x) are exactly 0"}),
    # ------------------------------------------------------------------ exponentials
    make("exp_overflow", "exp overflow", ("exp", "expm1", "exp2"),
         value="inf above ln(max finite): 88.72 in float32, 11.09 in float16",
         gradient="exp(x) itself: inf where the value overflowed, NaN where a mask discards it",
         why="exp(x) overflows to inf above ~88.7 (float32; ~11.1 in float16), and its gradient is exp(x) "
             "itself, so a where() or mask that discards the inf still gives 0·inf = NaN in the backward",
         fix="work in log space: nanguard.softplus(x) for log(1 + exp(x)), nanguard.logsumexp or "
             "nanguard.logaddexp for sums of exponentials, or subtract the maximum first; behind a where(), "
             "nanguard.safe_where keeps the discarded branch out of the gradient",
         safe=nanguard_op("logsumexp"),
         fix_in={
             "tf": "work in log space: tf.nn.softplus(x) for log(1 + exp(x)), tf.reduce_logsumexp or "
                   "nanguard.tf.logaddexp for sums of exponentials, or subtract the maximum first; behind a "
                   "tf.where(), nanguard.tf.safe_where keeps the discarded branch out of the gradient",
             "jax": "work in log space: nanguard.jax.softplus(x) (or jax.nn.softplus) for log(1 + exp(x)), "
                    "jax.nn.logsumexp or nanguard.jax.logaddexp for sums of exponentials, or subtract the maximum "
                    "first; behind a where(), nanguard.jax.safe_where keeps the discarded branch out of the gradient",
         },
         lint=("NG106",),
         evidence={"forward": "{over} of {numel} inputs exceed {limit}, above which exp overflows {dtype} "
                              "(max {max})",
                   "backward": "the forward overflowed to inf (inputs up to {max} > {limit})"}),
    make("softplus", "log(1 + exp(x)) by hand", ("log1p", "log", "exp"),
         value="inf for x above ~88.7 (float32)", gradient="0·inf = NaN behind a where()",
         why="exp(x) overflows to inf above ~88.7 (float32), so log(1 + exp(x)) is inf although its true "
             "value is ≈ x, and replacing the inf with where() still leaves 0·inf = NaN in the gradient",
         fix="nanguard.softplus(x) (or F.softplus) computes log(1 + exp(x)) without overflow, ≈ x for large x",
         fix_in={
             "tf": "tf.math.softplus(x) (or nanguard.tf.softplus(x)) computes log(1 + exp(x)) without "
                   "overflow, ≈ x for large x",
             "jax": "jax.nn.softplus(x) (or nanguard.jax.softplus(x); np.logaddexp(0, x) in NumPy) computes "
                    "log(1 + exp(x)) without overflow, ≈ x for large x",
             "keras": "keras.ops.softplus(x) computes log(1 + exp(x)) without overflow, ≈ x for large x",
         },
         safe=nanguard_op("softplus"), lint=("NG104",),
         evidence={"forward": "the exponentials overflowed to inf"}),
    make("logsumexp_overflow", "log(sum(exp(x))) by hand", ("log", "exp", "sum"),
         value="inf once an entry exceeds ~88 (float32); −inf when all are below ~−103",
         gradient="inf or NaN with the value",
         why="sum(exp(x)) overflows to inf once an entry of x exceeds ~88 (float32) and underflows to 0 "
             "(log 0 = −inf) when every entry is below ~−103, although log-sum-exp is then close to max(x)",
         fix="torch.logsumexp(x, dim) (tf.reduce_logsumexp) subtracts the maximum first; "
             "nanguard.logsumexp(x, dim, mask=mask) with a mask",
         fix_in={
             "tf": "tf.reduce_logsumexp(x, axis) subtracts the maximum first; nanguard.tf.logsumexp(x, axis, "
                   "mask=mask) with a mask",
             "jax": "jax.nn.logsumexp(x, axis) (scipy.special.logsumexp in NumPy) subtracts the maximum "
                    "first; nanguard.jax.logsumexp(x, axis, mask=mask) with a mask",
             "keras": "keras.ops.logsumexp(x, axis) subtracts the maximum first",
         },
         safe={"torch": "torch.logsumexp", "tf": "tf.reduce_logsumexp", "jax": "jax.nn.logsumexp"},
         lint=("NG105",),
         evidence={"forward": "{zeros} of {numel} sums of exponentials underflowed to exactly 0"}),
    make("softmax_overflow", "softmax by hand", ("exp", "div", "sum"),
         value="inf/inf = NaN for a large score; 0/0 = NaN when all scores are below ~−103",
         gradient="NaN with the value",
         why="exp overflows to inf above ~88 (float32; ~11 in float16), so a softmax by hand is inf/inf = NaN "
             "for a row with a large score, and 0/0 = NaN when every score is below ~−103",
         fix="torch.softmax(x, dim) (tf.nn.softmax) subtracts the maximum first; "
             "nanguard.softmax(x, dim, mask=mask) with a mask",
         fix_in={
             "tf": "tf.nn.softmax(x, axis) subtracts the maximum first; nanguard.tf.softmax(x, axis, "
                   "mask=mask) with a mask",
             "jax": "jax.nn.softmax(x, axis) (scipy.special.softmax in NumPy) subtracts the maximum first; "
                    "nanguard.jax.softmax(x, axis, mask=mask) with a mask",
             "keras": "keras.ops.softmax(x, axis) subtracts the maximum first",
         },
         safe={"torch": "torch.softmax", "tf": "tf.nn.softmax", "jax": "jax.nn.softmax"}, lint=("NG901",)),
]
