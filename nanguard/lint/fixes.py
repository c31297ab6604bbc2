"""Building the exact, semantics-preserving rewrites offered by `--fix`.

A fix is a replacement of the flagged call's character span. Text that survives is copied
verbatim from the source (arguments keep their formatting and inner comments); a fix is
refused, and the finding left for a human, whenever it would delete a comment or needs a
name the file cannot spell (e.g. `torch.nn.functional` when nothing imports torch).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from nanguard.lint.model import Edit, Fix
from nanguard.lint.names import JAX, KERAS, METHOD, TF, TORCH, OpCall
from nanguard.lint.source import SourceText

Speller = Callable[[str], "str | None"]

# Function spellings whose module also has the log-space op under the name on the right.
_LOG_SOFTMAX_MODULES = ("torch.", "torch.nn.functional.", "torch.special.", "tensorflow.nn.", "tensorflow.math.",
                        "keras.ops.", "jax.nn.")


def _has_comment(text: str) -> bool:
    return "#" in text


def _atomic(node: ast.expr) -> bool:
    """Can `-node` be written without parentheses around the node's text?"""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant))


def _renamed(src: SourceText, oc: OpCall, new_attr: str) -> str | None:
    """The call's text with its function attribute renamed (`F.softmax(x, 1)` -> `F.log_softmax(x, 1)`)."""
    func = oc.node.func
    if not isinstance(func, ast.Attribute):
        return None
    start, end = src.span(oc.node)
    attr_end = src.offset(func.end_lineno, func.end_col_offset)  # type: ignore[arg-type]
    attr_start = attr_end - len(func.attr)
    if src.text[attr_start:attr_end] != func.attr:
        return None
    return src.text[start:attr_start] + new_attr + src.text[attr_end:end]


def _single_operand(oc: OpCall) -> bool:
    """`torch.log(x)` / `x.log()`: exactly the input, no `out=`/`name=` or other arguments."""
    if oc.has_star_args() or oc.node.keywords:
        return False
    return len(oc.node.args) == (0 if oc.method else 1)


def _kept_outside_only(src: SourceText, outer: ast.AST, kept: Sequence[ast.AST]) -> bool:
    """No comment in the parts of `outer` that the fix deletes (everything but `kept`)."""
    start, end = src.span(outer)
    pos = start
    for node in sorted(kept, key=lambda n: src.span(n)[0]):
        s, e = src.span(node)
        if _has_comment(src.text[pos:s]):
            return False
        pos = e
    return not _has_comment(src.text[pos:end])


def log_softmax_fix(src: SourceText, outer: OpCall, inner: OpCall) -> Fix | None:
    """`torch.log(torch.softmax(x, 1))` / `x.softmax(1).log()` -> `torch.log_softmax(x, 1)` / `x.log_softmax(1)`."""
    if not _single_operand(outer) or inner.has_star_args():
        return None
    if not inner.method and not any(inner.qualname == m + "softmax" for m in _LOG_SOFTMAX_MODULES):
        return None
    if not _kept_outside_only(src, outer.node, [inner.node]):
        return None
    new = _renamed(src, inner, "log_softmax")
    if new is None:
        return None
    start, end = src.span(outer.node)
    return Fix(f"Replace with `{_head(new)}`", (Edit(start, end, new),))


# Where each framework keeps log(sigmoid(x)): (module, function). Keras code keeps Keras
# (keras.ops runs on every backend; tf.math would lock it to TensorFlow); NumPy has none.
_LOG_SIGMOID = {
    TORCH: [("torch.nn.functional", "logsigmoid")],
    TF: [("tensorflow.math", "log_sigmoid")],
    KERAS: [("keras.ops", "log_sigmoid")],
    JAX: [("jax.nn", "log_sigmoid")],
}


def _functional(spell: Speller, framework: str) -> str | None:
    for module, name in _LOG_SIGMOID.get(framework, ()):
        spelled = spell(module)
        if spelled is not None:
            return f"{spelled}.{name}"
    return None


def log_sigmoid_fix(src: SourceText, spell: Speller, outer: OpCall, sigmoid: OpCall,
                    negate: bool, kept_extra: Sequence[ast.AST] = ()) -> Fix | None:
    """`log(sigmoid(x))` -> `F.logsigmoid(x)`; with `negate`, `log(1 - sigmoid(x))` -> `F.logsigmoid(-x)`.

    `spell(module)` writes a module name that resolves to the module at the finding (or None)."""
    if not _single_operand(outer) or not _single_operand(sigmoid):
        return None
    x = sigmoid.input
    if x is None:
        return None
    if sigmoid.framework == METHOD:
        framework = TORCH if outer.framework in (TORCH, METHOD) else ""
    else:
        framework = sigmoid.framework
    if not framework or (outer.framework not in (METHOD, framework)):
        return None  # `tf.math.log(keras.ops.sigmoid(x))`: which module to write is a guess
    func = _functional(spell, framework)
    if func is None:
        return None
    if not _kept_outside_only(src, outer.node, [x]):
        return None
    text = src.segment(x)
    if negate:
        text = "-" + (text if _atomic(x) else f"({text})")
    new = f"{func}({text})"
    start, end = src.span(outer.node)
    return Fix(f"Replace with `{_head(new)}`", (Edit(start, end, new),))


# log(sum(exp(x), axis)) -> the framework's logsumexp with the same axis arguments: (qualified
# name of the sum, module of the exponential, module that has logsumexp, its name).
_LOGSUMEXP = {
    TF: ("tensorflow.reduce_sum", "tensorflow", "tensorflow", "reduce_logsumexp"),
    KERAS: ("keras.ops.sum", "keras.ops", "keras.ops", "logsumexp"),
    JAX: ("jax.numpy.sum", "jax.numpy", "jax.nn", "logsumexp"),
}


def logsumexp_fix(src: SourceText, spell: Speller, log: OpCall, total: OpCall, exp: OpCall) -> Fix | None:
    """`torch.log(torch.sum(torch.exp(x), dim))` -> `torch.logsumexp(x, dim)` (and the method, TF,
    Keras and JAX forms: `tf.reduce_logsumexp`, `keras.ops.logsumexp`, `jax.nn.logsumexp`)."""
    if not _single_operand(log) or not _single_operand(exp) or total.has_star_args():
        return None
    x = exp.input
    if x is None:
        return None
    rest: list[ast.AST] = list(total.positional[1:])
    keywords = total.node.keywords
    if total.framework in _LOGSUMEXP:
        sum_name, exp_module, lse_module, lse_name = _LOGSUMEXP[total.framework]
        same_sum = total.qualname.rsplit(".", 1)[-1] == sum_name.rsplit(".", 1)[-1]
        # jnp.sum's third positional is dtype, logsumexp's is b: only the axis may be positional.
        if exp.framework != total.framework or not same_sum or not exp.qualname.startswith(exp_module + ".") \
                or len(rest) > (1 if total.framework == JAX else 2) \
                or any(k.arg not in ("axis", "keepdims") for k in keywords):
            return None
        module = spell(lse_module)
        if module is None:
            return None
        head = f"{module}.{lse_name}"
        rest_text = [src.segment(a) for a in rest] + [src.segment(k) for k in keywords]
        pieces = [src.segment(x)] + rest_text
    else:
        # torch.logsumexp(input, dim, keepdim=False): `dim` is required and there is no dtype.
        if exp.framework not in (TORCH, METHOD) or total.framework not in (TORCH, METHOD):
            return None
        if total.framework == TORCH and total.qualname != "torch.sum":
            return None
        if total.framework == METHOD and total.node.func.attr != "sum":  # type: ignore[attr-defined]
            return None
        if any(k.arg not in ("dim", "keepdim") for k in keywords):
            return None
        if not rest and not any(k.arg == "dim" for k in keywords):
            return None
        if len(rest) > 2:
            return None
        rest_text = [src.segment(a) for a in rest] + [src.segment(k) for k in keywords]
        if exp.framework == METHOD:
            receiver = src.segment(x) if _atomic(x) else f"({src.segment(x)})"
            head = receiver + ".logsumexp"
            pieces = rest_text
        else:
            if not isinstance(exp.node.func, ast.Attribute):
                return None
            head = src.segment(exp.node.func.value) + ".logsumexp"
            pieces = [src.segment(x)] + rest_text
    kept = [x] + rest + list(keywords)
    if not _kept_outside_only(src, log.node, kept):
        return None
    new = f"{head}({', '.join(pieces)})"
    start, end = src.span(log.node)
    return Fix(f"Replace with `{_head(new)}`", (Edit(start, end, new),))


def _head(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= 60 else one_line[:57] + "..."


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits (sorted by start) to `text`."""
    out: list[str] = []
    pos = 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(text[pos:e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)
