"""Catalogue entries, part two: division and means, statistics, trigonometry, softmax and
masks, products, where, clamps, overflow, NaN from outside, the optimizer step.

Part of the hazard catalogue `nanguard.core.hazards`; read the entries there.
"""

from __future__ import annotations

from typing import List

from nanguard.core.hazard import Hazard, make, nanguard_op

_TORCH_CLAMP = {"torch": "torch.clamp", "tf": "tf.clip_by_value", "jax": "jax.numpy.clip"}
# What a finding of overflow states, whichever remedy fits the program (the three overflow hazards)
_OVERFLOW_EVIDENCE = {"forward": "the result exceeds {dtype}'s largest finite value {limit}",
                      "peak": "the result exceeds {dtype}'s largest finite value {limit} (the inputs reach {peak})"}
_FLOAT16_OPS = ("mul", "matmul", "mm", "addmm", "sum", "_to_copy")


def _inverse_trig(fn: str, derivative: str) -> Hazard:
    return make(f"{fn}_domain", f"{fn} at or beyond ±1", (fn, "arc" + fn[1:]),
                value="NaN for |x| > 1", gradient=f"{derivative}: inf at x = ±1",
                why=f"{fn} is defined on [−1, 1] only and its gradient {derivative} is inf at ±1; a cosine "
                    "computed as a·b/(|a||b|) lands just outside [−1, 1] by round-off (1.0000001 for parallel "
                    "vectors)",
                fix=f"nanguard.{fn}(x) treats round-off up to 4 eps beyond ±1 as ±1, with a finite gradient at ±1; "
                    "nanguard.cosine_similarity for the cosine itself",
                fix_in={
                    "tf": f"nanguard.tf.{fn}(x) treats round-off up to 4 eps beyond ±1 as ±1, with a finite gradient at ±1; "
                          "nanguard.tf.cosine_similarity for the cosine itself",
                    "jax": f"nanguard.jax.{fn}(x) treats round-off up to 4 eps beyond ±1 as ±1, with a finite gradient at ±1; "
                           "nanguard.jax.cosine_similarity for the cosine itself",
                    "keras": f"keras.ops.arc{fn[1:]}(keras.ops.clip(x, −1 + eps, 1 − eps)) keeps value and "
                             f"gradient finite; nanguard.tf.{fn}(x) on the TensorFlow backend",
                },
                safe=nanguard_op(fn), lint=("NG303",),
                evidence={"forward": "the inputs reach {peak}", "backward": "the inputs reach {peak}"})


ENTRIES: List[Hazard] = [
    # ---------------------------------------------------------------- division and means
    make("div_zero", "division by 0", ("div", "true_divide", "reciprocal", "floor_divide", "addcdiv"),
         value="±inf for x/0, NaN for 0/0", gradient="1/b and −a/b²: inf where b = 0",
         why="x/0 = ±inf and 0/0 = NaN, and the gradients 1/b and −a/b² are inf where b = 0",
         fix="nanguard.div(a, b) returns a finite value and gradient where b = 0 (0 by convention, or fill=)",
         safe=nanguard_op("div"),
         fix_in={
             "tf": "nanguard.tf.div(a, b) returns a finite value and gradient where b = 0 (0 by convention, or "
                   "fill=); tf.math.divide_no_nan also gives 0 but turns NaN data into 0, hiding it",
             "jax": "nanguard.jax.div(a, b) returns a finite value and gradient where b = 0 (0 by convention, or "
                    "fill=)",
         },
         evidence={"x_over_zero": "{zeros} of {numel} denominators are 0 (x/0 = ±inf)",
                   "zero_over_zero": "{zeros} of {numel} denominators are 0 (0/0 = NaN where the numerator is 0 "
                                     "too: {num_zeros} numerator zeros)",
                   "reciprocal": "1/x is inf at x = 0; {zeros} of {numel} inputs are 0",
                   "scalar": "the divisor is the number 0",
                   "addcdiv": "addcdiv computes x + value·a/b; {zeros} of {numel} denominators are 0",
                   "infinite": "the division met ±inf/±inf or 0/0 (see the inputs below)",
                   "backward": "{zeros} of {numel} denominators were 0"}),
    make("mean_empty", "mean over an empty set", ("div", "mean", "nanmean"),
         value="0/0 = NaN for an empty group", gradient="NaN for an empty group",
         why="a mean divides by the number of elements it averages, which is 0 for an empty sequence, a fully "
             "padded row or a batch whose labels are all ignored: 0/0 = NaN",
         fix="nanguard.masked_mean(x, mask, dim) averages over a mask and gives 0 (with a zero gradient) for "
             "empty groups; nanguard.div(a, b, fill=0.0) for other ratios",
         fix_in={
             "tf": "nanguard.tf.masked_mean(x, mask, axis) averages over a mask and gives 0 (with a zero "
                   "gradient) for empty groups; nanguard.tf.div(a, b, fill=0.0) for other ratios",
             "jax": "nanguard.jax.masked_mean(x, mask, axis) averages over a mask and gives 0 (with a zero "
                    "gradient) for empty groups; nanguard.jax.div(a, b, fill=0.0) for other ratios",
             "keras": "divide by keras.ops.maximum(count, 1), which gives 0 with a finite gradient for empty "
                      "groups; nanguard.tf.masked_mean(x, mask, axis) on the TensorFlow backend",
         },
         safe=nanguard_op("masked_mean"), lint=("NG401",),
         evidence={"forward": "{zeros} of {numel} denominators are 0, counts of empty groups whose sum is 0 "
                              "too",
                   "empty": "the tensor averaged is empty (0 elements)",
                   "backward": "{zeros} of {numel} counts were 0"}),
    make("loss_all_ignored", "a mean loss over a batch whose every target is ignored",
         ("nll_loss", "nll_loss_forward", "nll_loss2d_forward", "cross_entropy"),
         value="0/0 = NaN: the mean divides by the total weight of the kept targets, which is 0",
         gradient="NaN for every logit of the batch",
         why="cross_entropy and nll_loss with reduction='mean' divide the summed loss by the number (or total "
             "weight) of targets that are not ignore_index; when every target is ignored (a fully padded "
             "batch, a masked-out sequence, class weights of 0) that is 0 and the loss is 0/0 = NaN",
         fix="skip the step when no target is kept, or compute loss_sum = cross_entropy(..., reduction='sum') and "
             "divide with nanguard.div(loss_sum, (target != ignore_index).sum().float()) (0 with a zero gradient when "
             "nothing is kept)",
         safe=nanguard_op("div"),
         evidence={"forward": "all {numel} targets were ignored or had weight 0: the total weight the mean "
                              "divides by is 0"}),
    # -------------------------------------------------------------------- statistics
    make("std_degenerate", "std/var of one element or a constant", ("std", "var", "std_mean", "var_mean"),
         value="NaN when the reduced size n ≤ correction (one element with Bessel's correction)",
         gradient="NaN with the value; the second derivative is NaN for a constant group",
         why="std and var with Bessel's correction divide by n − 1, which is 0 for a single element (a batch "
             "of one): 0/0 = NaN in the value and the gradient; and std's second derivative is NaN for a "
             "constant group",
         fix="nanguard.std(x, dim) / nanguard.var(x, dim), finite in value and gradient for one element and for "
             "constant groups; or correction=0 when the population statistic is meant",
         fix_in={
             "tf": "nanguard.tf.std(x, axis) / nanguard.tf.var(x, axis), finite in value and gradient for "
                   "one element and for constant groups",
             "jax": "nanguard.jax.std(x, axis) / nanguard.jax.var(x, axis), finite in value and gradient for "
                    "one element and for constant groups; or ddof=0 when the population statistic is meant",
         },
         safe=nanguard_op("std"), lint=("NG801",),
         evidence={"forward": "the input has {n} element{s} along the reduced dims"}),
    # -------------------------------------------------------------------- trigonometry
    _inverse_trig("acos", "−1/sqrt(1 − x²)"),
    _inverse_trig("asin", "1/sqrt(1 − x²)"),
    make("atanh_domain", "atanh at or beyond ±1", ("atanh", "arctanh"),
         value="±inf at ±1, NaN outside [−1, 1]", gradient="1/(1 − x²): inf at ±1",
         why="atanh is ±inf at ±1 and NaN outside [−1, 1], and its gradient 1/(1 − x²) is inf at ±1",
         fix="clamp the argument strictly inside (−1, 1), x.clamp(−1 + eps, 1 − eps), or reparametrise",
         safe=_TORCH_CLAMP,
         evidence={"forward": "the inputs range over [{min}, {max}]"}),
    make("atan2_origin", "atan2 at the origin", ("atan2", "arctan2"),
         value="finite (0 at the origin)", gradient="(x, −y)/(x² + y²): 0/0 at the origin",
         why="atan2's gradient (x, −y)/(x² + y²) is 0/0 = NaN at the origin",
         fix="exclude the origin with nanguard.safe_where, or add the angle only where x² + y² > 0",
         safe=nanguard_op("safe_where")),
    # -------------------------------------------------------------- softmax and masks
    make("softmax_masked_row", "softmax of a fully masked row",
         ("softmax", "log_softmax", "scaled_dot_product_attention", "multi_head_attention_forward"),
         value="NaN for a row whose every entry is −inf", gradient="NaN on such a row",
         why="{op} of a row whose every entry is −inf (fully masked: an empty or fully padded sequence, a query "
             "with no valid key) is exp(−inf − (−inf)) = 0/0 = NaN, in the value and the gradient",
         fix="{fn}(x, dim, mask=mask) gives 0 for fully masked rows (with a zero gradient) instead of NaN; or "
             "keep at least one unmasked position per row",
         fix_in={
             "tf": "nanguard.tf.{op}(x, axis, mask=mask) gives 0 for fully masked rows (with a zero "
                   "gradient) instead of NaN; or keep at least one unmasked position per row",
             "jax": "nanguard.jax.{op}(x, axis, mask=mask) gives 0 for fully masked rows (with a zero "
                    "gradient) instead of NaN; or keep at least one unmasked position per row",
             "keras": "keras.layers.Softmax()(x, mask=mask) handles fully masked rows without NaN; or fill with "
                      "a large finite negative (−1e9) instead of −inf, or keep at least one unmasked position "
                      "per row",
         },
         safe=nanguard_op("softmax"), lint=("NG701",),
         evidence={"forward": "every entry of {rows} of {total} rows is −inf (fully masked)",
                   "neginf": "{neginf} inputs are −inf: rows whose entries are all −inf, or inf − inf",
                   "attention": "a query attends over keys that are all masked",
                   "backward": "on {rows} of {total} rows every entry is −inf"},
         defaults={"op": "softmax", "fn": "nanguard.softmax"}),
    make("logsumexp_masked_row", "logsumexp of a fully masked row", ("logsumexp",),
         value="−inf (not NaN) for a row whose every entry is −inf",
         gradient="exp(x − logsumexp(x)) = exp(−inf − (−inf)) = NaN on such a row",
         why="logsumexp of a row whose every entry is −inf is −inf, and its gradient exp(x − logsumexp(x)) is "
             "exp(−inf − (−inf)) = exp(NaN) there",
         fix="nanguard.logsumexp(x, dim) returns −inf with a zero gradient for all −inf rows (mask= for masks)",
         safe=nanguard_op("logsumexp"),
         fix_in={
             "tf": "nanguard.tf.logsumexp(x, axis) returns −inf with a zero gradient for all −inf rows (mask= for "
                   "masks)",
             "jax": "nanguard.jax.logsumexp(x, axis) returns −inf with a zero gradient for all −inf rows (where= for "
                    "masks)",
         },
         evidence={"forward": "every entry of {rows} of {total} rows is −inf",
                   "backward": "on {rows} of {total} rows every entry is −inf"}),
    make("inf_minus_inf", "inf − inf", ("add", "sub", "rsub", "softmax", "log_softmax", "logsumexp"),
         value="NaN where infinities of opposite sign meet", gradient="NaN with the value",
         why="inf − inf = NaN: the operands hold infinities that cancel at the same position",
         fix="find where the infinities come from (see the inputs); for attention masks pass a mask "
             "(nanguard.softmax(x, dim, mask=mask)) instead of adding −inf to scores that may be −inf too",
         safe=nanguard_op("softmax"),
         fix_in={
             "tf": "find where the infinities come from (see the inputs); for attention masks pass a mask "
                   "(nanguard.tf.softmax(x, axis, mask=mask)) instead of adding −inf to scores that may be −inf too",
             "jax": "find where the infinities come from (see the inputs); for attention masks pass a mask "
                    "(nanguard.jax.softmax(x, axis, where=mask)) instead of adding −inf to scores that may be −inf "
                    "too",
         },
         evidence={"forward": "the inputs hold {posinf} +inf and {neginf} −inf"}),
    # ------------------------------------------------------------------------ products
    make("zero_times_inf", "0 · inf", ("mul",),
         value="NaN where one factor is 0 and the other ±inf", gradient="NaN with the value",
         why="0 · ±inf = NaN: one factor holds ±inf where the other is 0",
         fix="find where the ±inf comes from (see the inputs); nanguard.safe_where keeps masked entries out of "
             "the product",
         safe=nanguard_op("safe_where"),
         fix_in={
             "tf": "find where the ±inf comes from (see the inputs); nanguard.tf.safe_where keeps masked entries out "
                   "of the product",
             "jax": "find where the ±inf comes from (see the inputs); nanguard.jax.safe_where keeps masked entries "
                    "out of the product",
         },
         evidence={"forward": "the factors hold {inf} ±inf and {zeros} zeros"}),
    make("xlogy_zero", "x·log(x) and x·log(y) at 0", ("xlogy", "special_xlogy", "mul", "log", "entropy"),
         value="0·log(0) = NaN where x = y = 0; inf where only y = 0",
         gradient="x/y = 0/0 = NaN where x = y = 0",
         why="x·log(y) is 0·log(0) = 0·(−inf) = NaN where x = y = 0 (a sparse target, a probability that "
             "underflowed) and inf where only y = 0; the gradient with respect to y is x/y, which is 0/0 = NaN "
             "there",
         fix="nanguard.xlogy(x, y) uses 0·log 0 = 0 with gradient 0 where x = 0; nanguard.entropy(p) / "
             "nanguard.cross_entropy_probs(y, p) for the usual sums, F.cross_entropy(logits, y) from logits",
         fix_in={
             "tf": "nanguard.tf.xlogy(x, y) uses 0·log 0 = 0 with gradient 0 where x = 0; "
                   "nanguard.tf.entropy(p) / nanguard.tf.cross_entropy_probs(y, p) for the usual sums, "
                   "tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits) from logits",
             "jax": "nanguard.jax.xlogy(x, y) (or jax.scipy.special.xlogy) uses 0·log 0 = 0 where x = 0; "
                    "nanguard.jax.entropy(p) / nanguard.jax.cross_entropy_probs(y, p) for the usual sums, "
                    "optax.softmax_cross_entropy(logits, y) from logits",
             "keras": "compute the loss from the logits, where nothing underflows: "
                      "keras.losses.categorical_crossentropy(y, logits, from_logits=True) "
                      "(binary_crossentropy(..., from_logits=True) for one probability)",
         },
         safe=nanguard_op("xlogy"), lint=("NG201",),
         evidence={"forward": "one factor is 0 where the other, a log-probability, is −inf ({neginf} −inf)",
                   "backward": "{zeros} of {numel} entries of x are 0"}),
    # ------------------------------------------------------------------- where, clamps
    make("where_gradient", "where() with a singular discarded branch", ("where", "masked_fill"),
         value="finite: the where selects the other branch",
         gradient="0·inf = NaN where the discarded branch's derivative is inf",
         why="where() and masked_fill() still differentiate the branch they discard, and its zero upstream "
             "gradient times an infinite derivative (log, sqrt, 1/x at 0; acos at ±1; an overflowing exp) is "
             "0·inf = NaN",
         fix="nanguard.safe_where(cond, fn, x, other, safe) (the double where) replaces x by a safe value "
             "before fn sees it",
         fix_in={
             "tf": "nanguard.tf.safe_where(cond, fn, x, other, safe) (the double where: fn(tf.where(cond, x, "
                   "safe))) replaces x by a safe value before fn sees it",
             "jax": "nanguard.jax.safe_where(cond, fn, x, other, safe) (the double where: fn(jnp.where(cond, "
                    "x, safe))) replaces x by a safe value before fn sees it",
             "keras": "the double where, keras.ops.where(cond, fn(keras.ops.where(cond, x, safe)), other), "
                      "replaces x by a safe value before fn sees it",
         },
         safe=nanguard_op("safe_where"), lint=("NG501",)),
    make("clamped_log", "log of a clamped probability", ("log", "clamp"),
         value="finite: the clamp keeps log away from 0",
         gradient="0 below the bound: the clamp hides log 0 instead of removing it",
         why="clamping a probability before the log keeps it finite, but the clamp's gradient is exactly 0 below "
             "the bound, so the worst-predicted examples stop contributing and the loss is biased by the bound",
         fix="log-probabilities from the logits (F.log_softmax, F.cross_entropy, "
             "F.binary_cross_entropy_with_logits); nanguard.xlogy(y, p) when only probabilities exist",
         fix_in={
             "tf": "log-probabilities from the logits (tf.nn.log_softmax, "
                   "tf.nn.softmax_cross_entropy_with_logits, tf.nn.sigmoid_cross_entropy_with_logits); "
                   "nanguard.tf.xlogy(y, p) when only probabilities exist",
             "jax": "log-probabilities from the logits (jax.nn.log_softmax, optax.softmax_cross_entropy, "
                    "optax.sigmoid_binary_cross_entropy); nanguard.jax.xlogy(y, p) when only probabilities "
                    "exist",
             "keras": "the loss from the logits (keras.ops.log_softmax, keras.losses.categorical_crossentropy "
                      "or binary_crossentropy with from_logits=True)",
         },
         safe={"torch": "torch.log_softmax", "tf": "tf.nn.log_softmax", "jax": "jax.nn.log_softmax"},
         lint=("NG601",)),
    make("clamped_logits", "clamped logits before softmax", ("softmax", "log_softmax", "clamp"),
         value="finite with or without the clamp", gradient="0 for every logit outside the clamp's range",
         why="softmax and log_softmax subtract the maximum internally, so a clamp of the logits prevents no "
             "overflow; it zeroes the gradient of every logit outside the range, and a NaN it seems to cure "
             "comes from elsewhere (often an exploding gradient upstream)",
         fix="drop the clamp (softmax is already stable) and find the NaN's source with `nanguard run`",
         safe={"torch": "torch.softmax", "tf": "tf.nn.softmax", "jax": "jax.nn.softmax"}, lint=("NG602",)),
    # ------------------------------------------------------------------------ overflow
    make("overflow_low_precision", "float16 overflow", _FLOAT16_OPS,
         value="inf above 65504", gradient="inf, then NaN, with the value",
         why="float16 holds values up to 65504 only, so products, sums and casts of ordinary activations "
             "overflow to inf",
         fix="compute this op in float32 (x.float()), or use torch.autocast, which keeps overflow-prone ops in "
             "float32, with torch.amp.GradScaler for the gradients",
         safe={"torch": "torch.autocast", "tf": "tf.keras.mixed_precision", "jax": "jax.numpy.float32"},
         fix_in={
             "tf": "compute this op in float32 (tf.cast(x, tf.float32)), or use Keras mixed precision "
                   "(keras.mixed_precision.set_global_policy(\"mixed_float16\")), which keeps overflow-prone ops in "
                   "float32 and scales the loss",
             "jax": "compute this op in float32 (x.astype(jnp.float32)), keeping only storage in float16",
         },
         evidence=_OVERFLOW_EVIDENCE),
    # the same overflow in a program already under mixed precision: its remedy must not be "use it"
    make("overflow_mixed_precision", "float16 overflow under mixed precision", _FLOAT16_OPS,
         value="inf above 65504", gradient="inf, then NaN, with the value",
         why="float16 holds values up to 65504 only, and mixed precision runs this op in float16; the loss "
             "scaler cannot help an overflow in the forward pass: it skips every such step and lowers the scale",
         fix="keep mixed precision but run this op in float32 (on x.float(), inside torch.autocast(device_type, "
             "enabled=False)), or keep its inputs smaller (normalise them, a normalisation layer before it, a lower "
             "learning rate)",
         safe={"torch": "torch.float32", "tf": "tf.float32", "jax": "jax.numpy.float32"},
         fix_in={
             "tf": "keep the mixed precision policy but run this layer in float32 (give it dtype=\"float32\") "
                   "or this op on tf.cast(x, tf.float32), or keep its inputs smaller (normalise them, a "
                   "normalisation layer before it, a lower learning rate)",
             "jax": "compute this op in float32 (x.astype(jnp.float32)), or keep its inputs smaller (normalise "
                    "them, a normalisation layer before it, a lower learning rate)",
         },
         evidence=_OVERFLOW_EVIDENCE),
    make("overflow", "overflow of the dtype's range", ("mul", "matmul", "mm", "addmm", "sum", "pow", "exp"),
         value="inf above the dtype's largest finite value", gradient="inf, then NaN, with the value",
         why="a finite result too large for its dtype rounds to inf",
         fix="rescale the values (normalise the inputs, lower the learning rate) or compute in float64",
         safe={"torch": "torch.float64", "tf": "tf.float64", "jax": "jax.numpy.float64"},
         evidence=_OVERFLOW_EVIDENCE),
    make("diverged_scale", "activations or weights grown huge (training diverged)",
         ("layer_norm", "native_layer_norm", "native_batch_norm", "rms_norm", "pow", "mul", "matmul", "mm",
          "addmm", "bmm", "sum", "mean", "var", "exp", "softmax", "_softmax"),
         value="NaN/Inf once squares or products of the values exceed the dtype's range",
         gradient="inf, then NaN, with the value",
         why="values this large are not data: training has diverged, usually because the learning rate is too "
             "large for the model or an optimizer step is unstable, and every step multiplies the weights "
             "further until the squares inside a norm, a variance or a matmul overflow",
         fix="lower the learning rate (add warm-up), clip the gradients (torch.nn.utils.clip_grad_norm_) and "
             "check the optimizer's hyperparameters; run the first steps under nanguard.detect() to see the "
             "step where the scale starts to grow, and nanguard.GradGuard can skip a bad step",
         fix_in={"tf": "lower the learning rate (add warm-up), clip the gradients (tf.clip_by_global_norm, "
                       "or clipnorm= on the Keras optimizer) and check the optimizer's hyperparameters; "
                       "nanguard.tf.GuardedOptimizer can skip a bad step",
                 "jax": "lower the learning rate (add warm-up), clip the gradients (optax.clip_by_global_norm) "
                        "and check the optimizer's hyperparameters; nanguard.jax.guarded(optimizer) can skip a bad step"},
         safe={"torch": "torch.nn.utils.clip_grad_norm_", "tf": "tf.clip_by_global_norm",
               "jax": "optax.clip_by_global_norm"},
         evidence={"forward": "`{name}` reaches {peak}, beyond {limit} (the square root of {dtype}'s largest "
                              "value), so its squares and products overflow",
                   "weights": "`{name}` reaches {peak}, beyond {limit} (the square root of {dtype}'s largest "
                              "value), so its squares and products overflow, and the weights reach {max}"}),
    # ---------------------------------------------------------- from outside, optimizer
    make("nan_input", "NaN from outside the checked code", (),
         value="NaN already in an input", gradient="NaN with the value",
         why="the NaN came from outside the code nanguard checks (the data, loaded weights, or code that ran "
             "before detect() was entered)",
         fix="Check the data where it is loaded (torch.isnan(batch).any()), e.g. a header row or a missing value "
             "parsed as NaN; clean it (drop the rows, or torch.nan_to_num) before the model sees it",
         safe={"torch": "torch.nan_to_num", "tf": "tf.where", "jax": "jax.numpy.nan_to_num"},
         fix_in={
             "tf": "Check the data where it is loaded (tf.reduce_any(tf.math.is_nan(batch))), e.g. a header row or a "
                   "missing value parsed as NaN; clean it (drop the rows, or tf.where(tf.math.is_nan(x), 0.0, x)) "
                   "before the model sees it",
             "jax": "Check the data where it is loaded (jnp.isnan(batch).any()), e.g. a header row or a missing value "
                    "parsed as NaN; clean it (drop the rows, or jnp.nan_to_num) before the model sees it",
         },
         evidence={"forward": "{nan} of {numel} values of `{name}` were already NaN when it reached this op",
                   "data": "{nan} of {numel} values of `{name}` were NaN in the batch the data pipeline returned"}),
    make("optimizer_step", "an optimizer step that makes NaN/Inf", ("step",),
         value="NaN/Inf in the parameters after a step with finite gradients", gradient="-",
         why="an optimizer step can turn finite gradients into non-finite parameters: a learning rate too large "
             "for them, or an update divided by a vanishing second moment",
         fix="Use eps > 0 (Adam's default 1e-8), a smaller learning rate, or clip the gradients "
             "(torch.nn.utils.clip_grad_norm_); nanguard.GradGuard can skip a bad step",
         safe={"torch": "nanguard.GradGuard", "tf": "nanguard.tf.GuardedOptimizer", "jax": "nanguard.jax.guarded"},
         evidence={"forward": "the gradients were finite, but {optimizer}.step ({hp}) made {what} in the "
                              "parameters",
                   "eps0": "with eps=0, Adam-type updates divide 0/0 where a gradient has always been 0"},
         fix_in={"tf": "Use epsilon > 0 (Keras Adam's default 1e-7), a smaller learning rate, or clip the "
                       "gradients (clipnorm= on the Keras optimizer); nanguard.tf.GuardedOptimizer can skip a "
                       "bad step",
                 "jax": "Use eps > 0 (optax.adam's default 1e-8), a smaller learning rate, or clip "
                        "the gradients (optax.clip_by_global_norm); nanguard.jax's optax guard can "
                        "skip a bad step"}),
    make("unexplained", "an op no entry explains", (),
         value="-", gradient="-",
         why="no hazard in nanguard's catalogue matches this op and these inputs",
         fix="look at the input ranges below for zeros, negatives or huge values; nanguard's safe ops "
             "(nanguard.sqrt, nanguard.div, nanguard.xlogy, nanguard.softmax ...) cover the usual cases",
         safe=nanguard_op("sqrt"),
         fix_in={
             "tf": "look at the input ranges below for zeros, negatives or huge values; nanguard's TensorFlow safe "
                   "ops (nanguard.tf.sqrt, nanguard.tf.div, nanguard.tf.xlogy, nanguard.tf.softmax ...) cover the "
                   "usual cases",
             "jax": "look at the input ranges below for zeros, negatives or huge values; nanguard's JAX safe ops "
                    "(nanguard.jax.sqrt, nanguard.jax.div, nanguard.jax.xlogy, nanguard.jax.softmax ...) cover the "
                    "usual cases",
         },
         evidence={"forward": "{fn} produced {what} from finite inputs",
                   "backward": "the backward of {fn} produced {what} from finite values (node {node}, op {op})"}),
]
