"""Division by a count that can be zero (NG401)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from nanguard.lint.analysis import Analysis
from nanguard.lint.model import POSSIBLE, VALUE, Rule
from nanguard.lint.names import OpCall
from nanguard.lint.naming import is_count_name, is_mask_like, is_strong_count_name
from nanguard.lint.dataflow import (
    counts_own_finite_entries, incremented_before, nan_handled_next, returned_to_nan_skipping_callers,
)
from nanguard.lint.patterns import strip_wrappers
from nanguard.lint.positive import guarded_positive
from nanguard.lint.rules.base import checks
from nanguard.lint.rules.dice import dice_denominator
from nanguard.lint.rules.division_counts import (
    counted_in_a_configured_range, counts_at_least_one, counts_from_one, stored_only_where_selected, whole_one_hot,
)
from nanguard.lint.rules.division_guards import (
    at_least_a_checked_part, count_checked, inside_a_loop_of, only_compared, selected_where_nonzero,
    union_with_a_tested_part,
)
from nanguard.lint.rules.sequence_totals import total_filled_by_data, total_of_lengths, total_over_batches
from nanguard.lint.scope import name_key
from nanguard.lint.shapes import (
    NUMBER_WRAPPERS, has_tensor_op, python_accumulator, python_number, shape_owner, unpacked_shape_of,
)
from nanguard.lint.syntax import NAN_TESTS, callee_name, const_value, describe, mult_factors, spelled_out_call
from nanguard.lint.uses import shown_in_place

DIV_BY_COUNT = Rule(
    code="NG401",
    name="division-by-count",
    summary="`x / mask.sum()`, `s / lengths`, `/ len(x[mask])`: a count that can be 0",
    hazard=VALUE,
    hazards=("mean_empty",),
    explanation="""\
The NaN then spreads through every later layer and step (the seed story
`tf.reduce_sum(embedded) / tf.reduce_sum(tf.not_equal(input, pad))`).

    mean = (x * mask).sum(1) / mask.sum(1)
->  mean = nanguard.masked_mean(x, mask, dim=1)      # 0 (and zero gradient) for empty rows
    ratio = a / counts
->  ratio = nanguard.div(a, counts, fill=0.0)

Reported when the denominator is a sum/count of a mask-like tensor (a comparison, `~m`, a
name containing "mask"/"valid"), the totals of a prediction and a target that a Dice ratio
divides by (`2 * (p * t).sum() / (p.sum() + t.sum())`, no smoothing term), `len()` of a masked
selection, or a count-like name
(`lengths`, `seq_lens`, `counts`, `num_valid`, `deg`) dividing a sum. Not reported when the
denominator is guarded: `clamp(min=1)`, `max(n, 1)`, `+ eps`, a `where`, an in-place fix
(`n[n == 0] = 1`), a test of it against 0 in the same function, or when the division sits
in a where branch (that is NG501's double-where). Not reported either where the code shows the
count cannot be 0 or the division cannot give NaN: both sides Python numbers (`a.item() /
mask.sum().item()` raises ZeroDivisionError), a count of the entries equal to their row's
maximum (at least the maximum), a dataset split (`data.test_mask`, a loop over 'train_mask',
'val_mask', ...), `1. / num_tokens` (a reciprocal, not a mean), a ratio written inside an
f-string or a `print`/logger call (`print(f"{masked.sum() / valid.sum():.4f}")`: only shown).

A mask can be all False: the findings are certain, except for a parameter known as a count
only by its name (`def loss_boxes(loss, num_boxes)`), which is whatever the caller passes
(DETR clamps it): possible.""",
)

RULES = [DIV_BY_COUNT]


def _is_sum(ctx: Analysis, expr: ast.expr) -> bool:
    oc = ctx.op(strip_wrappers(ctx, ctx.resolve(expr)))
    return oc is not None and oc.op == "sum"


def _masked_selection(ctx: Analysis, expr: ast.expr) -> bool:
    e = strip_wrappers(ctx, ctx.resolve(expr))
    if isinstance(e, ast.Subscript):
        index = e.slice
        return is_mask_like(ctx, index)
    oc = ctx.op(e)
    return oc is not None and oc.node.func.attr in ("masked_select", "nonzero") \
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) else False


_TO_PYTHON_INT = frozenset({"int", "round", "floor", "ceil", "trunc"})


def _converted_to_int(ctx: Analysis, node: ast.AST) -> bool:
    """Is the division the argument of `int(...)`, `round(...)`, `math.ceil(...)`? Python numbers
    then (a tensor would need `.item()` semantics), so a zero divisor raises ZeroDivisionError."""
    key = "int_wrapped_divisions"
    if key not in ctx.memo:
        wrapped = set()
        for n, _, _ in ctx.calls:  # every call of the module, collected by the walk
            if len(n.args) == 1 and ctx.op(n) is None and \
                    (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")) in _TO_PYTHON_INT:
                wrapped.add(id(n.args[0]))
        ctx.memo[key] = wrapped
    return id(node) in ctx.memo[key]


def _running_total_of_sizes(ctx: Analysis, expr: ast.expr) -> bool:
    """`n = 0` ... `n += y.shape[0] * y.shape[1]` (an evaluation loop's element count): a Python
    total grown only by the sizes of whole tensors is 0 only when no non-empty batch came, an
    empty dataset, as `_sizes_only` is for one tensor. Sizes of a selection (`len(x[mask])`) are not."""
    if not python_accumulator(ctx, expr):
        return False
    scope, _ = ctx.lookup(expr.id)  # type: ignore[attr-defined]
    grown = [n.value for n in scope.augmented.get(expr.id, ())] if scope is not None else []  # type: ignore[attr-defined]
    return bool(grown) and all(_sizes_only(ctx, g, 0, _whole_batch) for g in grown)


def _whole_batch(ctx: Analysis, expr: ast.expr) -> bool:
    """A tensor held by a name, not a masked selection (`actuals = batch[3]`, not `x[mask]`)."""
    return isinstance(expr, ast.Name) and not _masked_selection(ctx, expr)


def _aggregate_of_records(ctx: Analysis, expr: ast.expr) -> bool:
    """`sum(log.get("ntokens", 0) for log in logging_outputs)`: the builtin sum of what other code
    recorded (fairseq's reduce_metrics): whether any record counted something is theirs."""
    # the one value, or (a name reused per task, SpeechT5's criterion) the last one before this use
    value = (ctx.value_of(expr) or ctx.last_value(expr)) if name_key(expr) is not None else expr
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords \
            and isinstance(value.args[0], ast.Call):
        value = value.args[0]  # `utils.item(sum(...))`, `float(sum(...))`
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "sum" \
        and "sum" not in ctx.imports.aliases and len(value.args) >= 1 \
        and isinstance(value.args[0], (ast.GeneratorExp, ast.ListComp))


_NAN_CLEANER = re.compile(r"(^|_)(non_?nan|no_?nan|de_?nan|nan_to_\w+|(replace|remove|zero|mask|fill)_nans?)$",
                          re.IGNORECASE)


def _passed_to_a_nan_cleaner(ctx: Analysis, node: ast.AST) -> bool:
    """`_non_nan(n_correct / n_targets)` (trax's metrics): the ratio goes straight into a function
    whose name says it replaces NaN."""
    cleaned = ctx.memo.get("nan_cleaned")
    if cleaned is None:
        cleaned = ctx.memo["nan_cleaned"] = {id(a) for call, _scope, _ng in ctx.calls
                                             if _NAN_CLEANER.search(callee_name(call.func)) for a in call.args}
    return id(node) in cleaned




def _sizes_only(ctx: Analysis, expr: ast.expr, depth: int = 2,
                whole: Callable[[Analysis, ast.expr], bool] | None = None) -> bool:
    """A product of the sizes of the function's own input (`x.size(1) * x.size(2)`, `x.shape[-1]`,
    `tf.shape(x)[0]`, `x.numel()`, `len(x)`), or a name bound to one: the element count of full dimensions, 0 only
    for an empty input (whose mean is NaN by definition). Sizes of a slice or a selection
    (`len(x[mask])`, `grids[:, :, 1:].shape[2]`) are not: those are empty for some inputs.
    `whole` says which tensors count as whole (default: the function's unchanged parameters)."""
    whole = whole or _unchanged_parameter
    if const_value(expr) is not None:
        return const_value(expr) != 0
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return _sizes_only(ctx, expr.left, depth, whole) and _sizes_only(ctx, expr.right, depth, whole)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
            and expr.func.attr in ("size", "numel", "nelement") and ctx.imports.qualname(expr.func) is None:
        return whole(ctx, expr.func.value)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len" \
            and "len" not in ctx.imports.aliases and len(expr.args) == 1:
        return whole(ctx, expr.args[0])
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":
        return whole(ctx, expr.value.value)
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Call) \
            and callee_name(expr.value.func) == "shape" and len(expr.value.args) == 1:
        return whole(ctx, expr.value.args[0])  # `tf.shape(router_probs)[0]`
    if isinstance(expr, ast.Attribute) and expr.attr == "size":
        return whole(ctx, expr.value)  # NumPy's and JAX's `inputs.size`
    if isinstance(expr, ast.Call) and callee_name(expr.func) in NUMBER_WRAPPERS and expr.args:
        return _sizes_only(ctx, expr.args[0], depth, whole)  # `jnp.array(inputs.size, jnp.float32)`
    if isinstance(expr, ast.Call) and callee_name(expr.func) == "prod" and len(expr.args) == 1:
        shaped = shape_owner(expr.args[0])  # `np.prod(x.shape[1:])`, `torch.prod(torch.Tensor(list(x.shape)))`
        return shaped is not None and (whole(ctx, shaped) or _whole_batch(ctx, shaped))
    if depth > 0 and isinstance(expr, ast.Name):
        value = ctx.value_of(expr)
        if value is None:
            shaped = unpacked_shape_of(ctx, expr.id)  # `len_rir, num_channels = rir.shape`
            return shaped is not None and whole(ctx, shaped)
        return _sizes_only(ctx, value, depth - 1, whole)
    return False


# Objects that hold settings: `args.num_frames` is what the command line or config says.
_SETTINGS = frozenset({"self", "args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "flags", "FLAGS"})


def _held_by_an_owner(expr: ast.expr) -> bool:
    """`self.num_items`, `self.generator.num_targets`: set by the object's other methods;
    `args.num_redundancy_frames`, `cfg.model.num_layers`: set by the command line or config."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
        if isinstance(expr, ast.Name):
            return expr.id in _SETTINGS
    return False


def _checked_expression(ctx: Analysis, d: ast.expr) -> bool:
    """Is the divisor, spelled out, compared with 0 in this function, itself or as the value of a
    name that is (`sum_masks = torch.sum(m, 0)`, `if sum_masks == 0: return`, `... / torch.sum(m, 0)`)?"""
    if not isinstance(d, ast.Call) or not spelled_out_call(d):
        return False  # `m.sum()` alone may be a different `m` by then; `(gt_ids == i).sum()` is spelled out
    spelled = ast.dump(d)
    s = ctx.scope
    while s is not None:
        if spelled in s.checked_exprs:
            return True
        for key in s.zero_checked:
            values = s.bindings.get(key, [])
            if len(values) == 1 and values[0] is not None and ast.dump(values[0]) == spelled:
                return True
        s = s.parent
    return False


def _compared_under_any_all(ctx: Analysis, mask: ast.expr) -> bool:
    """Is the mask a comparison of a name that the function also tests whole, with `any`/`all`
    (`if torch.all(targets == ignore): ... else: loss / (targets != ignore).sum()`)?"""
    if isinstance(mask, ast.UnaryOp) and isinstance(mask.op, (ast.Invert, ast.Not)):
        mask = mask.operand  # `~np.isnan(x)`, tested by `np.isnan(x).all()`
    if isinstance(mask, ast.Call) and mask.args and callee_name(mask.func) in NAN_TESTS:
        keys = {name_key(mask.args[0])} - {None}
    elif isinstance(mask, ast.Compare):
        keys = {name_key(part) for part in [mask.left, *mask.comparators]} - {None}
    else:
        return False
    s = ctx.scope
    while s is not None:
        if keys & s.tested_comparisons:
            return True
        s = s.parent
    return False


_FILLED = frozenset({"ones", "zeros", "full", "empty", "rand", "randn"})


def _sized_by(ctx: Analysis, numerator: ast.expr, denominator: ast.expr) -> bool:
    """Is the numerator a new array whose shape is the divisor itself (`torch.ones(n) / n`,
    `jnp.full((n,), v) / n`)? Where the divisor is 0 the array is empty: no entry is divided."""
    if not isinstance(denominator, (ast.Name, ast.Attribute)):
        return False
    e = strip_wrappers(ctx, ctx.resolve(numerator))
    if not isinstance(e, ast.Call) or callee_name(e.func) not in _FILLED or not e.args:
        return False
    shape = e.args[0]
    parts = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
    spelled = ast.dump(denominator)
    return any(ast.dump(p) == spelled for p in parts)  # `n`, `self.n`, `args.num_words`


def _unchanged_parameter(ctx: Analysis, expr: ast.expr) -> bool:
    """The function's own input, as passed (`x` of `forward(self, x)`), not a slice or a
    selection of it (`grids[:, :, 1:]`, `strip_pad(target)` can be empty for a non-empty input)."""
    if not isinstance(expr, ast.Name):
        return False
    scope, values = ctx.lookup(expr.id)
    fn = scope.node if scope is not None else None
    if scope is not ctx.scope or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = fn.args
    if not any(a.arg == expr.id for a in args.posonlyargs + args.args + args.kwonlyargs):
        return False  # a local of the function, not its input
    return not any(v is not None and v.lineno < expr.lineno for v in values)  # type: ignore[attr-defined]


def _count_reason(ctx: Analysis, numerator: ast.expr, denominator: ast.expr) -> tuple[str, str | None] | None:
    """Why the denominator can be 0, and the finding's confidence (None: the rule's), else None."""
    d = strip_wrappers(ctx, denominator)
    if const_value(d) is not None or guarded_positive(ctx, d):
        return None
    if _sizes_only(ctx, d):
        return None  # `x.sum((1, 2)) / (x.size(1) * x.size(2))`: a mean by hand, 0 only for an empty tensor
    if _sized_by(ctx, numerator, d):
        return None  # `jnp.ones((n,)) / n`: uniform weights, an empty array when n is 0
    python = python_number(ctx, denominator) or python_accumulator(ctx, d)
    if python and (python_number(ctx, numerator) or python_accumulator(ctx, strip_wrappers(ctx, numerator))
                   or not has_tensor_op(ctx, numerator)):
        return None  # `correct.item() / mask.sum().item()`: Python raises ZeroDivisionError, no NaN
    if _checked_expression(ctx, d):
        return None  # `if sum_masks == 0: return ...` then `/ torch.sum(mask.view(-1), dim=0)`
    if _running_total_of_sizes(ctx, d):
        return None  # `num_elements += y.shape[0] * y.shape[1]` over the batches, then `/ num_elements`
    candidates = [d]
    if name_key(d) is not None:
        if ctx.zero_checked(d):
            return None
        value = ctx.value_of(d)
        if value is not None:
            value = strip_wrappers(ctx, value)
            if guarded_positive(ctx, value) or _checked_expression(ctx, value):
                return None  # `if np.sum(gt > 0) > 0:` then `area = np.sum(gt > 0)`, `... / area`
            candidates.append(value)
    for c in candidates:
        oc = ctx.op(c)
        if oc is not None and oc.op in ("sum", "count_nonzero") and oc.input is not None:
            mask = strip_wrappers(ctx, oc.input)
            if incremented_before(ctx, mask, c.lineno):
                continue  # `m = probs * keep; m += probs * 1e-3`: no longer a masked zero
            if ctx.zero_checked(mask) or _compared_under_any_all(ctx, mask) or count_checked(ctx, mask):
                continue
            if whole_one_hot(ctx, oc, mask):
                continue  # `reduce_sum(one_hot(index, depth))`: one per index, 0 only for no index
            if (is_mask_like(ctx, mask) or oc.op == "count_nonzero") and not counts_at_least_one(ctx, mask):
                filled = total_filled_by_data(ctx, oc, mask)  # `/ x_mask.sum()`, MAE's `/ mask.sum()`...
                if filled is not None:
                    return filled, POSSIBLE
                return "counts a mask and is 0 when nothing is selected", None  # count_nonzero(y): 0 for zeros
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "len" \
                and "len" not in ctx.imports.aliases and len(c.args) == 1 \
                and _is_sum(ctx, numerator) and _masked_selection(ctx, c.args[0]) and not counts_at_least_one(ctx, c.args[0], split_only=True):
            return "is the size of a masked selection, 0 when nothing is selected", None
    if dice_denominator(ctx, numerator, d):
        return "totals a prediction and a target (a Dice denominator), 0 when both are empty", None
    for c in (d, ctx.value_of(d) if name_key(d) is not None else None):
        if isinstance(c, (ast.Name, ast.Attribute)) and (c.id if isinstance(c, ast.Name) else c.attr).isupper():
            return None  # `N_PART_LABELS`, `num_frames = cfg.DATA.NUM_FRAMES`: a constant by convention
    if isinstance(d, (ast.Name, ast.Attribute)) and const_value(strip_wrappers(ctx, numerator)) is None and (
            is_strong_count_name(d) or (is_count_name(d) and _is_sum(ctx, numerator))):
        # Known as a count by its name only. Passed in as a parameter, or held by the object
        # (`self.num_items`, set by its other methods), it is whatever that code makes it (DETR clamps
        # `num_boxes` to >= 1 before passing it): possible (README).
        if isinstance(d, ast.Name) and counts_from_one(ctx, d.id):
            return None  # `for deg in range(1, n + 1): ... / deg`
        if _a_length_not_a_count(ctx, d):
            return None  # `coords_len = torch.sqrt(torch.sum(c ** 2, dim=1))`: a Euclidean length
        elsewhere = ctx.parameter_scope(d) is not None or _aggregate_of_records(ctx, d) or _held_by_an_owner(d) \
            or (isinstance(d, ast.Name) and counted_in_a_configured_range(ctx, d.id)) \
            or total_of_lengths(ctx, d) or total_over_batches(ctx, d)  # `num_frames = batch["input_lens"].sum()`
        return "is a count (0 for an empty sequence)", POSSIBLE if elsewhere else None
    return None


def _a_length_not_a_count(ctx: Analysis, d: ast.expr) -> bool:
    """Is the name, called a length, last assigned a norm or a square root (a distance, not a
    number of things)? Whether that can be 0 is another question than a count's."""
    value = ctx.last_value(d) if isinstance(d, ast.Name) else None
    factors = mult_factors(value, (ast.Mult,)) if value is not None else []
    return bool(factors) and all(getattr(ctx.op(strip_wrappers(ctx, f)), "op", "") in ("norm", "sqrt")
                                 for f in factors)  # `norm(v1) * norm(v2)` too


def _operands(ctx: Analysis, target) -> tuple[ast.AST, ast.expr, ast.expr] | None:
    if isinstance(target, OpCall):
        if target.keyword("rounding_mode") is not None:
            return None  # integer-style division: a different story
        num, den = target.operand(0, "input", "x"), target.operand(1, "other", "y")
        if num is None or den is None:
            return None
        return target.node, num, den
    if isinstance(target, ast.BinOp):
        return target, target.left, target.right
    if isinstance(target, ast.AugAssign):
        return target, target.target, target.value
    return None


@checks("NG401")
def check_division(ctx: Analysis, target) -> None:
    found = _operands(ctx, target)
    if found is None:
        return
    node, num, den = found
    if id(node) in ctx.in_where or id(node) in ctx.sanitised or ctx.result_fixed_up(node) \
            or _passed_to_a_nan_cleaner(ctx, node) or shown_in_place(ctx, node):
        return  # `print(f"{a / n:.4f}")`: a NaN there is only printed
    found = _count_reason(ctx, num, den)
    if found is None or counts_own_finite_entries(ctx, den, num) or _converted_to_int(ctx, node) \
            or only_compared(ctx, node) or ctx.value_only_reported(node) or at_least_a_checked_part(ctx, num, den) \
            or union_with_a_tested_part(ctx, den, node):
        return  # a count of the numerator's own non-NaN entries is 0 only where all are NaN already
    if stored_only_where_selected(ctx, node, den) or inside_a_loop_of(ctx, node, den) \
            or selected_where_nonzero(ctx, den):
        return  # `br[maxima] = 1. / maxima.sum()`: nothing written; `for _ in range(n): ... / n`: n >= 1
    if nan_handled_next(ctx, node) or returned_to_nan_skipping_callers(ctx, node):
        return  # `loss_i = s / n` then `if torch.isnan(loss_i): continue` (DomainBed); trl's nanmin
    reason, confidence = found
    ctx.report(DIV_BY_COUNT, node, f"division by `{describe(den, 40)}`, which {reason}", "mean_empty",
               confidence=confidence)


ON_CALL = {"div": [check_division]}
ON_DIVISION = [check_division]
