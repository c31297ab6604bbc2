"""Does a gradient reach this value? Two readings of where autograd cannot follow.

`detached`: built only from `.detach()`/`.data`/`.item()` chains and from targets or labels
(which receive no gradient), through the locals holding them. `gradient_free`: every leaf is
outside autograd (a constant, a comparison, a tensor factory or sampler, a shape, a step
counter, a `range()` loop target, a parameter bound to such values at every call). `Analysis`
asks both before it reports a gradient hazard.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from nanguard.lint.scope import _LABEL_NAME, Scope, is_detach_chain, name_key
from nanguard.lint.syntax import bounded_walk, const_value, parameter_default

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis


# An estimator's gradient of its loss with respect to the input (adversarial-robustness-toolbox's
# `loss_gradient`, `class_gradient`: NumPy arrays or detached tensors).
_GRADIENT_METHODS = frozenset({"loss_gradient", "class_gradient"})


def _first_order_gradient(ctx: Analysis, call: ast.Call, name: str) -> bool:
    """A gradient that autograd does not differentiate again: `torch.autograd.grad(...)` without
    `create_graph=True` (with it, a gradient penalty's norm is differentiated), or an estimator's
    `loss_gradient(x, y)` (an attack's step)."""
    if name in _GRADIENT_METHODS:
        return True
    if name != "grad" or ctx.imports.qualname(call.func) != "torch.autograd.grad":
        return False
    return not any(k.arg == "create_graph" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                   for k in call.keywords)


# Tensor factories and samplers: their results are leaves without a gradient (unless
# `requires_grad=True` is passed). Last attribute of the call, any framework.
_NO_GRAD_FACTORIES = frozenset({
    "randn", "rand", "randint", "randperm", "normal", "uniform", "bernoulli", "multinomial",
    "zeros", "ones", "full", "empty", "eye", "arange", "range", "linspace", "logspace",
    "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "randint_like", "tensor", "as_tensor", "argmax", "argmin", "argsort", "nonzero",
    "isnan", "isinf", "isfinite",
    # comparisons and logic spelled as calls (`torch.eq(a, b)`, `tf.greater`): bool results
    "eq", "ne", "lt", "le", "gt", "ge", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_not", "logical_xor", "isclose", "isin",
    # tensors made from data (`torch.FloatTensor(array)`, `torch.from_numpy(a)`): leaves without grad
    "from_numpy", "FloatTensor", "LongTensor", "DoubleTensor", "HalfTensor", "IntTensor", "BoolTensor",
})
_NO_GRAD_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim"})
_PYTHON_NUMBER_METHODS = frozenset({"size", "dim", "numel", "nelement", "item"})
# Ops that only lay a tensor out again: their other arguments are sizes or dimensions.
_LAYOUT_OPS = frozenset({"reshape", "view", "repeat", "expand", "tile", "broadcast_to", "permute",
                         "transpose", "unsqueeze", "squeeze", "flatten", "contiguous", "expand_dims"})


def module_attribute(ctx: Analysis, node: ast.Attribute) -> bool:
    """`torch.nn.functional.relu`, `np.random`: an attribute of an imported module."""
    root = node.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in ctx.imports.aliases


# Names of a training loop's integer counters: learning-rate schedules compute with them, and
# nothing differentiates with respect to a step number.
_STEP_COUNTERS = frozenset({"step", "steps", "global_step", "step_count", "num_steps", "total_steps",
                            "warmup_steps", "decay_steps", "epoch", "epochs", "iteration", "iterations",
                            "count", "progress", "timestep", "timesteps"})


def number_default(fn: ast.AST, name: str) -> bool:
    """Does parameter `name` of `fn` default to a number literal (`timescale=1000`)? A
    hyperparameter, not a tensor that autodiff follows."""
    default = parameter_default(fn, name)
    return isinstance(default, ast.Constant) and type(default.value) in (int, float)


# A parameter named as a mask (`prediction_mask`, `attention_mask`): selection data, not differentiated.
_MASK_PARAMETER = re.compile(r"^(\w+_)?masks?$", re.IGNORECASE)


def _unpacked_every_time(scope: Scope | None, key: str, values: list[ast.expr | None]) -> list[ast.expr]:
    """The calls `key` is unpacked from (`pt1, pt2 = gt_boxes.chunk(2, 1)`) when every binding of
    it is such an unpacking, else []."""
    sources = scope.unpacked.get(key, []) if scope is not None else []
    return sources if values and len(sources) == len(values) else []


# Parameters that hold a batch of input data (`pyg_batch.pos`, `data.edge_attr`, `batch.x`).
_DATA_OBJECTS = frozenset({"data", "batch", "pyg_batch", "graph", "sample"})


def _input_data(ctx: Analysis, node: ast.Attribute | ast.Subscript) -> bool:
    """An attribute or a string-keyed entry of a batch passed in as a parameter (`pyg_batch.pos`,
    `batch["all_atom_positions"]`): input data, outside autograd unless the module asks for a
    gradient with respect to its inputs (`pos.requires_grad_()`, `torch.autograd.grad(energy,
    pos)`: a force field)."""
    base = node.value
    if isinstance(node, ast.Subscript) and not (
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        return False
    if not (isinstance(base, ast.Name) and base.id in _DATA_OBJECTS and ctx.parameter_scope(base) is not None):
        return False
    if "asks_input_gradients" not in ctx.memo:
        ctx.memo["asks_input_gradients"] = any(_asks_for_gradients(n) for n in ast.walk(ctx.tree))
    return not ctx.memo["asks_input_gradients"]


def _asks_for_gradients(n: ast.AST) -> bool:
    """`x.requires_grad_()`, `x.requires_grad = True`, `requires_grad=True`, `torch.autograd.grad`,
    `x.grad`; not a freeze (`requires_grad_(False)`, `requires_grad=False`) or a read of the flag
    (`filter(lambda p: p.requires_grad, params)`)."""
    if isinstance(n, ast.keyword) and n.arg == "requires_grad":
        return not _false(n.value)  # `requires_grad=False` makes a constant
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "requires_grad_":
        return not n.args or not _false(n.args[0])
    if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets):
        return not _false(n.value)
    return isinstance(n, ast.Attribute) and n.attr == "grad"


def _false(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value in (False, 0)


_NUMBER_CASTS = frozenset({"float", "int", "bool", "round"})


def _python_numbers(values: list[ast.expr | None]) -> bool:
    """Is every value a literal or a cast to a Python number (`float(scale_std)`)?"""
    return bool(values) and all(
        v is not None and (const_value(v) is not None or (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in _NUMBER_CASTS))
        for v in values)


def detached(ctx: Analysis, expr: ast.AST, depth: int = 0) -> bool:
    """Is `expr` outside autograd: a `.detach()`/`.data`/`.item()` chain, or built only from
    variables whose last assignment before it is one, or whose names say they are
    targets/labels (which do not receive gradients)? Gradient-only hazards do not matter there.
    """
    if is_detach_chain(expr):
        return True
    line = expr.lineno  # type: ignore[attr-defined]
    keys = []
    saw_detached = False
    stack = [expr]
    seen = 0
    while stack and seen < 100:
        n = stack.pop()
        seen += 1
        key = name_key(n)
        if key is not None:
            if key not in ctx.imports.aliases:
                keys.append(key)
            continue
        if is_detach_chain(n) or (isinstance(n, ast.Call) and getattr(ctx.op(n), "op", "") == "stop_gradient"):
            saw_detached = True
            continue  # this operand is detached; the others decide
        stack.extend(ast.iter_child_nodes(n))
    if not keys:
        return saw_detached
    for key in keys:
        if _LABEL_NAME.search(key.rsplit(".", 1)[-1]):
            continue
        scope, values = ctx.lookup(key)
        prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
        if prior and (is_detach_chain(prior[-1]) or (depth < 2 and detached(ctx, prior[-1], depth + 1))):
            continue  # `edge = target[:, 1] - target[:, 0]`: a local built from targets alone
        sources = _unpacked_every_time(scope, key, values) if not prior and depth < 2 else []
        if not (sources and all(detached(ctx, u, depth + 1) for u in sources)):
            return False  # `pt1, pt2 = gt_boxes.chunk(2, 1)`: unpacked, every time, from targets
    return True


def _buffers(ctx: Analysis) -> frozenset[str]:
    """The names the enclosing class registers as buffers (`self.register_buffer("lats", t)`)."""
    s = ctx.scope
    while s is not None and not isinstance(s.node, ast.ClassDef):
        s = s.parent
    if s is None:
        return frozenset()
    memo_key = f"buffers:{id(s.node)}"
    if memo_key not in ctx.memo:
        ctx.memo[memo_key] = frozenset(
            n.args[0].value for n in bounded_walk(s.node, 6000)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer"
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and n.args
            and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str))
    return ctx.memo[memo_key]  # type: ignore[no-any-return]


def _built_without_gradient(ctx: Analysis, key: str) -> bool:
    """Is every value the class's methods give `self.x` gradient-free where it is assigned? A
    diffusion schedule (`self.betas = torch.tensor(get_betas())`, then `self.alphas_cumprod =
    torch.cumprod(1 - self.betas, 0)` in another method) is a table of constants, not a weight."""
    bound = ctx.attribute_bindings(key, changes=True)
    if not bound:
        return False
    memo_key = f"attribute_free:{id(bound[0][0].parent)}:{key}"
    known = ctx.memo.get(memo_key)
    if known is not None:
        return known  # type: ignore[no-any-return]
    ctx.memo[memo_key] = False  # while it is worked out: `self.x = self.x * 2` reads as unknown
    saved, free = ctx.scope, True
    try:
        for method, value in bound:
            ctx.scope = method
            parts: list[ast.expr | None] = [value]
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and name_key(value.func.value) == key:
                parts = [*value.args, *(k.value for k in value.keywords)]  # `self.x.clamp_(0, 1)`: what it adds
            if not all(p is not None and gradient_free(ctx, p) for p in parts):
                free = False
                break
    finally:
        ctx.scope = saved
    ctx.memo[memo_key] = free
    return free


def gradient_free(ctx: Analysis, expr: ast.AST, depth: int = 0) -> bool:
    """Can no gradient flow through `expr`? True when every leaf is outside autograd: a
    constant, a comparison (a bool tensor: `(x > 0).sum()` counts, it does not
    differentiate), a detach chain, a tensor factory or sampler (`torch.randn`,
    `zeros_like`, `torch.tensor`) without ``requires_grad=True``, a shape, or a local
    name whose last assignment before `expr` is itself gradient-free. A function
    parameter, an attribute or anything unknown may carry a gradient: False."""
    if depth > 4:
        return False
    line = getattr(expr, "lineno", None)
    stack: list[ast.AST] = [expr]
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        if seen > 200:
            return False
        if isinstance(n, (ast.Constant, ast.Compare, ast.operator, ast.unaryop, ast.boolop,
                          ast.expr_context, ast.Slice)):
            continue
        if isinstance(n, ast.Attribute) and n.attr in _NO_GRAD_ATTRIBUTES:
            continue
        if isinstance(n, ast.Attribute) and module_attribute(ctx, n):
            continue  # `math.pi`, `np.e`, `torch.float32`: a constant of an imported module
        if is_detach_chain(n):
            continue
        if isinstance(n, ast.Call):
            func = n.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            wants_grad = any(k.arg == "requires_grad" and const_value(k.value) != 0
                             for k in n.keywords)
            receiver = func.value if isinstance(func, ast.Attribute) else None
            if wants_grad or name in ("requires_grad_", "Parameter", "Variable"):
                return False  # a leaf made to receive gradients
            if name in _NO_GRAD_FACTORIES or _first_order_gradient(ctx, n, name):
                continue
            if (ctx.imports.qualname(func) or "").startswith("numpy."):
                continue  # `np.array(obs["ball"])`: a NumPy array, outside every autodiff system
            if name == "len":
                continue
            if name in _PYTHON_NUMBER_METHODS and receiver is not None and not n.args[1:]:
                continue  # `k.size(-1)`, `x.numel()`, `loss.item()`: Python numbers, outside autograd
            if receiver is not None and name_key(receiver) in ctx.imports.aliases:
                receiver = None  # `torch.sum(...)`: a module, not a tensor
            if name in _LAYOUT_OPS:
                # `g.reshape(1, size_x, 1, 1).repeat([b, 1, size_y, 1])`: only the tensor carries a
                # gradient; the sizes (`size_x` from a config's shape) do not
                laid_out = receiver if receiver is not None else (n.args[0] if n.args else None)
                if laid_out is not None:
                    stack.append(laid_out)
                continue
            stack.extend(n.args)
            stack.extend(k.value for k in n.keywords)
            if receiver is not None:
                stack.append(receiver)
            continue
        if isinstance(n, ast.IfExp):
            stack.extend((n.body, n.orelse))  # the test picks a value, it is not one
            continue
        if isinstance(n, ast.Subscript) and _input_data(ctx, n):
            continue  # `batch["pseudo_beta"]`: a batch's data, as its attributes are
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Subscript, ast.Tuple,
                          ast.List, ast.Starred)):
            stack.extend(ast.iter_child_nodes(n))
            continue
        if isinstance(n, ast.Attribute) and _input_data(ctx, n):
            continue  # `pyg_batch.pos`: a batch's data, not differentiated unless the module asks
        key = name_key(n)
        if key is not None and key.rsplit(".", 1)[-1].lower() in _STEP_COUNTERS:
            continue  # `step`, `self.global_step`, optax's `count`: an integer counter
        if key is not None and _LABEL_NAME.search(key.rsplit(".", 1)[-1]):
            continue  # `labels`, `ideal_sorted_labels`, `y_true`: data, not differentiated (as in `detached`)
        if key is None or line is None:
            return False
        s, values = ctx.lookup(key)
        if not values and key.startswith("self.") and _python_numbers(ctx.attribute_values(key)):
            continue  # `self.scale_std = float(scale_std)` in `__init__`: a hyperparameter
        if not values and key.startswith("self.") and key.count(".") == 1 and _built_without_gradient(ctx, key):
            continue  # `self.alphas_cumprod = torch.cumprod(1 - self.betas, 0)` of `torch.tensor(...)` betas
        if key.startswith("self.") and key.count(".") == 1 and key[5:] in _buffers(ctx):
            continue  # `self.register_buffer("lats", lats)`: a buffer never receives a gradient
        if s is not None and key in ctx.index_names(s):
            continue  # `table[k]`: an index is an integer (or a bool mask), never differentiated
        prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
        if not prior and s is not None and isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and (ctx.autodiff.parameter_gradient_free(s.node, key) or number_default(s.node, key)
                     or _MASK_PARAMETER.search(key)):
            continue  # `cutoff: float`, `timescale=1000`, a `prediction_mask` parameter (data), or bound
            # to gradient-free values at every call
        if not prior and s is not None and values and s.range_bound.get(key, 0) == len(values) \
                and not any(values):
            continue  # `for x in range(w)`: a Python int
        sources = _unpacked_every_time(s, key, values) if not prior else []
        if sources and all(gradient_free(ctx, u, depth + 1) for u in sources):
            continue  # `pt1, pt2 = gt_boxes.chunk(2, 1)`: unpacked, every time, from gradient-free values
        if not prior or not gradient_free(ctx, prior[-1], depth + 1):
            return False
    return True
