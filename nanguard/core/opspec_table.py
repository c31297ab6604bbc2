"""The safe ops' specification, as data: arguments and singular-point conventions of every op.

One row per public safe op, in the order of the README's table (:data:`SPECS`); read through
:mod:`nanguard.core.opspec`. Text uses a few words that each backend spells its own way, as
``str.format`` fields: ``{tensor}`` (tensor, array), ``{axis}`` (dim, axis), ``{keepdims}``
(keepdim, keepdims), ``{framework}`` (torch, TensorFlow, JAX) and ``{where}`` (its
``where`` function). Argument names use the numpy spelling ``axis``/``keepdims``.

The conventions are those the contract vectors (:mod:`nanguard.core.vectors`) check; each
backend's docstring may add what only holds there (flushed subnormals, dtype promotion).
"""

from __future__ import annotations

from typing import Tuple

from nanguard.core.dtypes import TRIG_ROUNDING_ULPS
from nanguard.core.opspec_types import Arg, OpSpec

_ALL_AXES = "axis or axes to reduce (None: all)"
_KEEP = Arg("keepdims", "flag", "keep the reduced axes with size 1.")
_MASK = Arg("mask", "mask", "optional bool {tensor} broadcastable to ``x``; True keeps an entry.")
_WHERE = Arg("where", "mask", "jax.nn's name for ``mask`` (give one of them).", backends=("jax",))
_DDOF = Arg("ddof", "nonnegative", "numpy's name for ``correction`` (give one of them).", backends=("tf", "jax"))
_X = Arg("x", "tensor", "floating {tensor}.")
_SPREAD = (_X, Arg("axis", "axes", _ALL_AXES + "."),  # std and var
           Arg("correction", "nonnegative", "subtracted from the count (1: Bessel's correction)."), _KEEP, _DDOF)
_ROUNDING = (f"``1 < |x| <= 1 + {TRIG_ROUNDING_ULPS}·eps`` (a rounding error; eps of the input's dtype): treated "
             "as ±1 exactly, gradient 0.")

SPECS: Tuple[OpSpec, ...] = (
    OpSpec("softplus", "exp_log",
           'Softplus ``log(1 + exp(beta * x)) / beta``, finite for every finite input.',
           (r'\operatorname{softplus}(x) = \tfrac{1}{\beta}\log\!\left(1 + e^{\beta x}\right),',
            r'\qquad \frac{d}{dx} = \sigma(\beta x)'),
           (Arg("x", "tensor", "floating {tensor} of any shape."),
            Arg("beta", "positive", "a finite number > 0.")),
           (), heading="Singular points: none. Limits: value -> 0 and gradient -> 0 as x -> -inf; value -> x "
                       "and gradient -> 1 as x -> +inf, reached exactly in every dtype."),
    OpSpec("logaddexp", "exp_log",
           '``log(exp(a) + exp(b))`` with a NaN-free gradient when both inputs are -inf.',
           (r'\operatorname{logaddexp}(a, b) = \log(e^a + e^b), \qquad',
            r'\frac{\partial}{\partial a} = \sigma(a - b)'),
           (Arg("a", "tensor", "floating {tensor}."),
            Arg("b", "operand", "floating {tensor} or number, broadcast with ``a``.")), (
        "``a = b = -inf`` (e.g. two masked scores): value -inf, gradient 0 for both.",
        "``a = b = +inf``: value +inf, gradient 1/2 for both (the limit along ``a = b``; "
        "``torch.logaddexp``'s is NaN).",
        "``a = -inf``, ``b`` finite: value ``b``, gradients 0 and 1.")),
    OpSpec("logsumexp", "exp_log",
           '``log(sum(exp(x)))`` over ``{axis}``, optionally over the kept entries only.',
           (r'\operatorname{logsumexp}(x) = \log \sum_{i:\,m_i} e^{x_i}, \qquad',
            r'\frac{\partial}{\partial x_i} = m_i\, e^{x_i - \operatorname{logsumexp}(x)}'),
           (_X, Arg("axis", "axes", _ALL_AXES + "."), _KEEP, _MASK, _WHERE), (
        "a slice that is all -inf, or all masked out (or empty): value -inf, gradient 0.",
        "masked entries (``mask`` False): no gradient (exactly 0), whatever they hold, NaN and inf included.")),
    OpSpec("softmax", "softmax",
           'Softmax over ``{axis}`` that never returns NaN for a fully masked slice.',
           (r'\operatorname{softmax}(x)_i = \frac{m_i e^{x_i}}{\sum_j m_j e^{x_j}}',),
           (Arg("x", "tensor", "floating {tensor} of scores."),
            Arg("axis", "axis", "the {axis} to normalise over."), _MASK, _WHERE), (
        "masked entries (``mask`` False) or ``-inf`` scores: probability 0, gradient 0, whatever the masked "
        "entry holds (NaN and inf included).",
        "a slice with nothing kept (all masked or all ``-inf``): all zeros, gradient 0.",
        "a slice whose kept scores contain NaN or ``+inf`` stays NaN, as in {framework}.")),
    OpSpec("log_softmax", "softmax",
           'Log-softmax over ``{axis}`` for masked or all ``-inf`` slices, without NaN.',
           (r'\operatorname{log\_softmax}(x)_i = x_i - \log \sum_{j:\,m_j} e^{x_j}',
            r'\quad (m_i \text{ True})'),
           (Arg("x", "tensor", "floating {tensor} of scores."),
            Arg("axis", "axis", "the {axis} to normalise over."), _MASK, _WHERE), (
        "masked entries (``mask`` False) hold **0**, a placeholder rather than ``log 0``, and receive "
        "gradient 0; so ``-sum(target * log_softmax(x, {axis}, mask))`` is finite when ``target`` is 0 there. "
        "Use ``{where}(mask, out, -inf)`` if you need the log-probability ``-inf`` instead.",
        "a fully masked slice (by ``mask``) is all 0 with gradient 0.",
        "without ``mask``, ``-inf`` scores give ``-inf`` (exactly ``log 0``), and a slice that is all "
        "``-inf`` gives ``-inf`` everywhere instead of {framework}'s NaN; the gradient there is the upstream "
        "gradient (``g - softmax * sum(g)`` with softmax 0).",
        "a slice whose kept scores contain NaN or ``+inf`` stays NaN, as in {framework}.")),
    OpSpec("xlogy", "entropy",
           '``x * log(y)`` with ``0 · log 0 = 0`` and finite gradients there.',
           (r'\operatorname{xlogy}(x, y) = \begin{cases} 0 & x = 0 \\ x \log y & x \ne 0',
            r'\end{cases}, \qquad \frac{\partial}{\partial x} = \log y, \quad',
            r'\frac{\partial}{\partial y} = \frac{x}{y} \quad (x \ne 0)'),
           (Arg("x", "tensor", "floating {tensor}."),
            Arg("y", "operand", "floating {tensor} or number, broadcast with ``x``.")), (
        "``x = y = 0``: value 0, both gradients 0 (where ``d/dx = log y = -inf``).",
        "``x = 0, y > 0``: value 0, gradient ``log y`` in ``x`` (the true partial derivative; "
        "``torch.xlogy`` reports 0 here) and 0 in ``y``.",
        "``x != 0, y = 0``: value ``-inf * sign(x)``; it is a real infinity, not hidden.",
        "``y < 0`` or NaN: value NaN.",
        "``x`` or ``y`` NaN: NaN value and NaN gradients for both (``xlogy(0, NaN)`` too).")),
    OpSpec("entropy", "entropy",
           'Shannon entropy ``-sum(p * log p)`` over ``{axis}``, in nats, with ``0 · log 0 = 0``.',
           (r'H(p) = -\sum_i p_i \log p_i, \qquad \frac{\partial H}{\partial p_i} =',
            r'-(\log p_i + 1) \quad (p_i > 0)'),
           (Arg("p", "tensor", "floating {tensor} of probabilities."),
            Arg("axis", "axis", "the {axis} to sum over.")), (
        "``p_i = 0``: contributes 0, gradient 0 (where ``d/dp`` of ``-p log p`` is +inf; the convention "
        "of the double-where recipe).",
        "``p_i < 0`` or NaN: NaN, as in the textbook formula.",
        "``p`` that does not sum to 1: used as it is (no normalisation is applied).")),
    OpSpec("cross_entropy_probs", "entropy",
           'Cross-entropy ``-sum(target * log(probs))`` over ``{axis}`` between two distributions.',
           (r'H(t, q) = -\sum_i t_i \log q_i',),
           (Arg("target", "tensor", "floating {tensor} of target probabilities."),
            Arg("probs", "tensor", "floating {tensor} of predicted probabilities."),
            Arg("axis", "axis", "the {axis} to sum over.")), (
        "``target_i = 0``: term 0 and gradient 0 in ``probs_i`` (also when ``probs_i = 0``); the gradient "
        "in ``target_i`` is ``-log probs_i``, or 0 when ``probs_i = 0`` too.",
        "``target_i > 0, probs_i = 0``: +inf, the true value of the loss.")),
    OpSpec("sqrt", "roots",
           'Square root with a finite gradient at 0.',
           (r'\operatorname{sqrt}(x) = \sqrt{\max(x, 0)}, \qquad',
            r'\frac{d}{dx} = \frac{1}{2\sqrt{x}} \ (x > 0)'),
           (_X,), (
        "``x = 0``: value 0, gradient 0 (the minimum-norm subgradient).",
        "``x < 0`` (e.g. ``-1e-9`` from cancellation in ``a² + b² - 2ab``): treated as 0, value 0, gradient 0.",
        "Second and higher derivatives at 0 are 0 as well.",
        "NaN inputs give NaN.")),
    OpSpec("pow", "roots",
           'Power of the non-negative part, ``max(x, 0) ** p`` for ``p > 0``, finite gradient at 0.',
           (r'\operatorname{pow}(x, p) = \max(x, 0)^p, \qquad',
            r'\frac{d}{dx} = p\,x^{p-1} \ (x > 0)'),
           (_X, Arg("exponent", "positive", "a finite Python number > 0.")), (
        "``x = 0``: value 0, gradient 0 for every ``p > 0`` (minimum-norm subgradient; for ``p = 1`` this "
        "makes ``pow(x, 1)`` a ReLU with ReLU's gradient convention).",
        "``x < 0``: treated as 0 (value 0, gradient 0), as in :func:`sqrt`.",
        "Second and higher derivatives at 0 are 0.",
        "``p <= 0`` is refused (``exponent`` must be a finite number > 0): the value at 0 is infinite and no "
        "finite convention exists (use ``div(1, pow(x, -p))``).")),
    OpSpec("norm", "norms",
           'Euclidean (L2) norm over ``{axis}`` (all {axes} by default), safe at the zero vector.',
           (r'\|x\| = \sqrt{\textstyle\sum_i x_i^2}, \qquad',
            r'\frac{\partial \|x\|}{\partial x_i} = \frac{x_i}{\|x\|} \quad (x \ne 0)'),
           (_X, Arg("axis", "axes", _ALL_AXES + "."), _KEEP), (
        "zero vector: value 0, gradient 0 (minimum-norm subgradient, PyTorch's rule for ``norm``; "
        "``optax.safe_norm(x, 0.0)`` agrees), second derivative 0.",)),
    OpSpec("normalize", "norms",
           'Unit vector ``x / ||x||`` along ``{axis}``; the zero vector maps to 0 with gradient 0.',
           (r'\hat x = \frac{x}{\|x\|}, \qquad',
            r'\frac{\partial \hat x}{\partial x} = \frac{I - \hat x \hat x^\top}{\|x\|}'),
           (_X, Arg("axis", "axis", "the {axis} along which vectors are normalised.")), (
        "zero vector: value 0, gradient 0 (the direction is undefined; the minimum-norm choice), "
        "second derivative finite.",)),
    OpSpec("cosine_similarity", "norms",
           'Cosine of the angle between ``a`` and ``b`` along ``{axis}``; 0 when either is zero.',
           (r'\cos(a, b) = \frac{a \cdot b}{\|a\|\,\|b\|}, \qquad',
            r'\frac{\partial \cos}{\partial a} = \frac{\hat b - \cos(a, b)\,\hat a}{\|a\|}'),
           (Arg("a", "tensor", "floating {tensor}."),
            Arg("b", "tensor", "floating {tensor}, broadcast with ``a``."),
            Arg("axis", "axis", "the {axis} of the vectors.")), (
        "``a = 0`` or ``b = 0``: value 0, gradient 0 for both (no direction to compare); but NaN, with NaN "
        "gradients, when the other vector holds NaN.",
        "a value above 1 by a rounding error (nearly parallel vectors): returned as it is; :func:`acos` "
        "accepts it.")),
    OpSpec("distance_matrix", "distance",
           'Euclidean distances between the rows of ``x`` and ``y`` (or of ``x`` with itself).',
           (r'D_{ij} = \|x_i - y_j\|, \qquad \frac{\partial D_{ij}}{\partial x_i} =',
            r'\frac{x_i - y_j}{D_{ij}} \quad (D_{ij} > 0)'),
           (
        Arg("x", "tensor", "``(..., n, d)`` floating {tensor}."),
        Arg("y", "optional", "``(..., m, d)`` floating {tensor}, or None for ``y = x``; batch dimensions "
                             "broadcast.")), (
        "identical rows (the diagonal of ``distance_matrix(x)``): exactly 0, gradient 0 (minimum-norm "
        "subgradient, as ``torch.cdist``), second derivative finite.",)),
    OpSpec("div", "division",
           'Divide-no-nan: ``a / b`` where ``b != 0`` and ``fill`` where ``b == 0``.',
           (r'\operatorname{div}(a, b) = \begin{cases} a / b & b \ne 0 \\ \text{fill} & b = 0',
            r'\end{cases}, \qquad \frac{\partial}{\partial a} = \frac{1}{b},\quad',
            r'\frac{\partial}{\partial b} = -\frac{a}{b^2} \quad (b \ne 0)'),
           (Arg("a", "operand", "numerator (floating {tensor}, or a number when ``b`` is one)."),
            Arg("b", "operand", "denominator, {tensor} or number."),
            Arg("fill", "number", "finite number returned where ``b == 0``.")), (
        "``b = 0`` (either sign of zero): value ``fill`` for every finite or infinite ``a`` (as TensorFlow's "
        "``divide_no_nan``), gradient 0 for ``a`` and ``b`` (the result does not depend on them there).",
        "``a`` or ``b`` NaN: NaN, also where ``b = 0`` (unlike ``divide_no_nan``: a NaN from the data is "
        "never hidden), and NaN gradients for both.",
        "tiny nonzero ``b``: the exact quotient, which may overflow to inf.")),
    OpSpec("masked_mean", "division",
           'Mean of the kept entries of ``x`` over ``{axis}``; an empty slice gives ``fill``.',
           (r'\operatorname{masked\_mean}(x) = \frac{\sum_i m_i x_i}{\sum_i m_i}, \qquad',
            r'\frac{\partial}{\partial x_i} = \frac{m_i}{\sum_j m_j}'),
           (_X, Arg("mask", "mask", "bool {tensor} broadcastable to ``x``; True keeps an entry."),
            Arg("axis", "axes", "axis or axes to average over (None: all)."), _KEEP,
            Arg("fill", "number", "finite number returned for empty slices."),
            Arg("where", "mask", "``jnp.mean``'s name for ``mask`` (give one of them).", backends=("jax",))), (
        "a slice with no kept entry (empty sequence): value ``fill``, gradient 0.",
        "masked entries (``mask`` False): no gradient (exactly 0) and no influence on the value, whatever "
        "they hold, NaN and inf included.",
        "a kept NaN: NaN value, and NaN gradient for that entry (the others keep ``1 / count``: the mean's "
        "derivative does not read the values).")),
    OpSpec("std", "stats",
           'Standard deviation over ``{axis}``, finite in value and gradient for constant input.',
           (r'\operatorname{std}(x) = \sqrt{\operatorname{var}(x)}, \qquad',
            r'\frac{\partial}{\partial x_i} = \frac{x_i - \bar x}{(N - c)\,\operatorname{std}(x)}'),
           _SPREAD, (
        "constant slice (std = 0): value 0, gradient 0 (minimum-norm subgradient, as for :func:`sqrt` at 0), "
        "second derivative finite.",
        "``N - correction <= 0``: value 0, gradient 0 (see :func:`var`).")),
    OpSpec("var", "stats",
           "Variance over ``{axis}`` with ``correction`` (Bessel's by default), finite for small slices.",
           (r'\operatorname{var}(x) = \frac{1}{N - c} \sum_i (x_i - \bar x)^2,',
            r'\qquad \frac{\partial}{\partial x_i} = \frac{2 (x_i - \bar x)}{N - c}'),
           _SPREAD, (
        "``N - correction <= 0`` (one element with Bessel's correction, or empty): value 0, gradient 0 (no "
        "spread can be measured, and none is reported); NaN if the slice holds NaN.",
        "constant input: value 0, gradient 0 (exact).")),
    OpSpec("acos", "trig",
           'Arccosine with a finite gradient at ±1 and tolerance for rounding just outside.',
           (r'\operatorname{acos}(x), \qquad \frac{d}{dx} = -\frac{1}{\sqrt{1 - x^2}}',
            r'\quad (|x| < 1)'),
           (_X,), (
        "``x = ±1``: value 0 or π, gradient 0 (minimum-norm subgradient), second derivative 0.",
        _ROUNDING,
        f"``|x| > 1 + {TRIG_ROUNDING_ULPS}·eps``: NaN value and gradient; such an input is a bug, not "
        "rounding.")),
    OpSpec("asin", "trig",
           'Arcsine with a finite gradient at ±1 and tolerance for rounding just outside.',
           (r'\operatorname{asin}(x), \qquad \frac{d}{dx} = \frac{1}{\sqrt{1 - x^2}}',
            r'\quad (|x| < 1)'),
           (_X,), (
        "``x = ±1``: value ±π/2, gradient 0 (minimum-norm subgradient; the one-sided derivative is +inf), "
        "second derivative 0.",
        _ROUNDING,
        f"``|x| > 1 + {TRIG_ROUNDING_ULPS}·eps``: NaN value and gradient; such an input is a bug, not "
        "rounding.")),
    OpSpec("safe_where", "where",
           '``fn(x)`` where ``cond``, ``other`` elsewhere, with a gradient that is never NaN.',
           (r'\operatorname{safe\_where}(c, f, x) = \begin{cases} f(x) & c \\',
            r'\text{other} & \neg c \end{cases}'),
           (
        Arg("cond", "bool", "bool {tensor} broadcastable with ``x``."),
        Arg("fn", "callable", "the function with a singularity, applied elementwise-compatible to ``x``."),
        _X,
        Arg("other", "value", "a {tensor}, a number, or a callable of ``x`` giving the value where ``cond`` is "
                              "False."),
        Arg("safe", "value", "the stand-in input for ``fn`` where ``cond`` is False.")), (
        "where ``cond`` is False: value ``other`` and no gradient through ``fn`` (the gradient to ``x`` is "
        "whatever ``other`` contributes: 0 for a constant).",
        "``safe`` must be a point where ``fn`` and its derivatives are finite (the default 1.0 suits log, "
        "sqrt, 1/x, pow)."), heading="Conventions"),
)
