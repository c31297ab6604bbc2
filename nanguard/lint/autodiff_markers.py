"""What marks a function as not differentiated, read from its syntax alone.

The names of custom-derivative decorators and rule-registering calls, the methods of an
`autograd.Function`, an optimizer's update hooks, Python-number annotations, and the shape of
an optax-style update function. `nanguard.lint.autodiff` combines these with how the module
uses each function.
"""

from __future__ import annotations

import ast
import re

# Decorators (last identifier) whose function body autodiff replaces by a rule.
CUSTOM_DERIVATIVE = frozenset({"custom_gradient", "custom_jvp", "custom_vjp", "custom_op", "RegisterGradient"})
# Calls (last identifier) whose function arguments are derivative rules or custom-derivative primals.
RULE_CALLS = CUSTOM_DERIVATIVE | {"defvjp", "defjvp", "defjvps", "register_autograd"}
# Methods of a torch.autograd.Function: forward runs under no-grad, the others compute derivatives.
FUNCTION_BASES = frozenset({"Function", "InplaceFunction", "NestedIOFunction"})
FUNCTION_METHODS = frozenset({"forward", "backward", "jvp", "vjp", "setup_context", "vmap"})
# Update hooks an optimizer framework calls with the gradients, outside any tape.
OPTIMIZER_HOOKS = frozenset({"_resource_apply_dense", "_resource_apply_sparse",
                              "_resource_apply_sparse_duplicate_indices", "_apply_dense", "_apply_sparse",
                              "update_step", "_update_step", "_update_step_xla", "_apply_weight_decay",
                              "apply_gradients", "step"})
# Steps of an iterative solver (jaxopt's `update`/`run`): differentiated implicitly at the
# solution (implicit differentiation), not through the iterations.
SOLVER_STEPS = frozenset({"update", "run", "init_state", "_update", "_run"})
# A class deriving from a dataset (`torch.utils.data.Dataset`, `IterableDataset`, PyG's
# `InMemoryDataset`, `DGLDataset`): its methods prepare inputs in the data loader, before any
# model runs; nothing differentiates them.
DATASET_SUFFIX = "Dataset"
# Parameters of a backward hook or gradient rule (`hook(module, grad_input, grad_output)`).
GRADIENT_RULE_PARAMS = frozenset({"grad_output", "grad_outputs"})
# The variadic parameter of TF-style gradient functions (`def _grad(op, *grads)`, shap's op handlers).
GRADIENT_RULE_VARARGS = frozenset({"grads", "grad_outputs", "out_grads"})
# Python number annotations: such a parameter holds no tensor, so no gradient.
SCALAR_TYPES = frozenset({"int", "float", "bool", "str", "complex"})

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def last_identifier(expr: ast.AST) -> str:
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return ""


def callee(call: ast.Call) -> str:
    """`partial(jax.custom_vjp, ...)` -> 'custom_vjp'; `tf.custom_gradient` -> 'custom_gradient'."""
    name = last_identifier(call.func)
    if name == "partial" and call.args:
        return last_identifier(call.args[0])
    return name


def mark_escape(value: ast.expr | None, roles: dict) -> None:
    """Names and lambdas returned or stored (`return init, update`, `self.fn = partial(f, k)`):
    they run later, wherever the caller takes them."""
    stack = [value] if value is not None else []
    while stack:
        e = stack.pop()
        if isinstance(e, (ast.Name, ast.Attribute, ast.Lambda)):
            roles[id(e)] = ("escape", None)
        elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            stack.extend(e.elts)
        elif isinstance(e, ast.IfExp):
            stack.extend((e.body, e.orelse))
        elif isinstance(e, ast.Dict):
            stack.extend(v for v in e.values if v is not None)
        elif isinstance(e, ast.Call) and last_identifier(e.func) == "partial" and e.args:
            stack.append(e.args[0])


def decorator_name(deco: ast.expr) -> str:
    if isinstance(deco, ast.Call):
        return callee(deco)
    return last_identifier(deco)


def parsed_annotation(ann: ast.expr | None) -> ast.expr | None:
    """An annotation as an expression: a string annotation (`"np.ndarray"`) parsed, None when
    absent or unparsable."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            return ast.parse(ann.value, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return ann


def scalar_annotation(ann: ast.expr | None) -> bool:
    """`int`, `float`, `Optional[float]`, `float | None`, `Union[int, float]`."""
    ann = parsed_annotation(ann)
    if ann is None:
        return False
    if isinstance(ann, ast.Name):
        return ann.id in SCALAR_TYPES
    if isinstance(ann, ast.Constant) and ann.value is None:
        return True
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return scalar_annotation(ann.left) and scalar_annotation(ann.right)
    if isinstance(ann, ast.Subscript) and last_identifier(ann.value) in ("Optional", "Union"):
        inner = ann.slice
        elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return all(scalar_annotation(e) for e in elts)
    return False


# Metrics computed from counts or thresholded predictions, and PSNR (a loss built on it is named
# one: `PSNRLoss`, `psnr_loss`): nothing differentiates them (unlike IoU, Dice, SSIM or an RMSE,
# which are also losses, and so are not listed). A function named for several `metrics`
# (`compute_depth_metrics`) reports them; a `metric` alone may be a metric-learning distance.
# So does a function named for evaluation (`evaluate`, `eval_pose`, `validation_step`).
_METRIC_WORDS = frozenset({"accuracy", "precision", "recall", "f1", "fscore", "auc", "auroc", "psnr", "metrics",
                           "eval", "evaluate", "evaluation", "validate", "validation"})
_NUMERIC_FORMAT = frozenset({"mixed", "half", "full", "single", "double", "fp16", "bf16", "fp32", "amp"})


def names_a_metric(name: str) -> bool:
    """`f1_score`, `accuracy_without_true_negatives`, `event_accuracy`, `precision` (not
    `mixed_precision`; not `acc`, which is as often an accumulator): a count-based metric."""
    words = [t.lower() for t in re.split(r"_+|(?<=[a-z0-9])(?=[A-Z])", name) if t]
    if any(w in _NUMERIC_FORMAT or w == "loss" for w in words):
        return False  # `mixed_precision`; a soft F1 *loss* is differentiated
    return any(w in _METRIC_WORDS for w in words)


def names_passed(value: ast.expr) -> set[str]:
    """`f`, `[f, "mae"]`, `{"out": f}`: the names a keyword's value passes along."""
    items = value.values if isinstance(value, ast.Dict) else \
        value.elts if isinstance(value, (ast.List, ast.Tuple, ast.Set)) else [value]
    return {i.id for i in items if isinstance(i, ast.Name)}


def gradient_transformation_update(fn: ast.AST) -> bool:
    """`def update_fn(updates, state, params=None)`: the update of an optax-style gradient
    transformation. It maps gradients to parameter updates after autodiff has run, and the
    training step never differentiates through it (meta-learning through an optimizer is the
    exception a linter cannot see)."""
    args = getattr(fn, "args", None)
    if args is None:
        return False
    names = [a.arg for a in args.posonlyargs + args.args]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return names[:2] == ["updates", "state"]
