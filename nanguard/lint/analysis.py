"""The analysed module: the walk's scopes plus the queries every rule asks of them.

`Analysis` walks the tree once (`nanguard.lint.walk`) and answers: which op is this call,
what value does this name hold, is it patched in place or tested against zero, is this
expression outside autograd. `report` records a finding worded from the hazard catalogue.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from nanguard.core.hazards import HAZARDS, lint_message
from nanguard.lint import dataflow, fix_safety, module_kind, uses
from nanguard.lint.autodiff import Autodiff
from nanguard.lint.autodiff_markers import names_a_metric
from nanguard.lint.model import GRADIENT, POSSIBLE, Rule
from nanguard.lint.names import JAX, KERAS, METHOD, NUMPY, TF, OpCall, function_op, instance_op
from nanguard.lint.scope import (
    _LABEL_NAME,
    FixBuilder,
    Raw,
    Scope,
    is_detach_chain,
    name_key,
)
from nanguard.lint.syntax import bounded_walk, const_value
from nanguard.lint.walk import Walk


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


def _module_attribute(ctx: Analysis, node: ast.Attribute) -> bool:
    root = node.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in ctx.imports.aliases


# Names of a training loop's integer counters: learning-rate schedules compute with them, and
# nothing differentiates with respect to a step number.
_STEP_COUNTERS = frozenset({"step", "steps", "global_step", "step_count", "num_steps", "total_steps",
                            "warmup_steps", "decay_steps", "epoch", "epochs", "iteration", "iterations",
                            "count", "progress", "timestep", "timesteps"})


def _number_default(fn: ast.AST, name: str) -> bool:
    """Does parameter `name` of `fn` default to a number literal (`timescale=1000`)? A
    hyperparameter, not a tensor that autodiff follows."""
    args = fn.args  # type: ignore[attr-defined]
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return any(a.arg == name and isinstance(d, ast.Constant) and type(d.value) in (int, float)
               for a, d in pairs)


# A parameter named as a mask (`prediction_mask`, `attention_mask`): selection data, not differentiated.
_MASK_PARAMETER = re.compile(r"^(\w+_)?masks?$", re.IGNORECASE)


class Analysis(Walk):
    """The walked module plus the helpers every rule uses (op recognition, name lookup)."""

    _autodiff: Autodiff | None = None

    @property
    def autodiff(self) -> Autodiff:
        """Which functions and parameters of the module autodiff never differentiates (lazy)."""
        if self._autodiff is None:
            self._autodiff = Autodiff(self)
        return self._autodiff

    def op(self, expr: ast.AST | None) -> OpCall | None:
        """The recognised op of a call expression (memoised), else None."""
        if not isinstance(expr, ast.Call):
            return None
        key = id(expr)
        if key not in self._ops:
            found = function_op(self.imports, expr)
            if found is None and isinstance(expr.func, (ast.Name, ast.Attribute)):
                found = self._instance_call(expr)
            self._ops[key] = found
        return self._ops[key]

    def _instance_call(self, call: ast.Call) -> OpCall | None:
        """`sm(x)` after `sm = nn.Softmax(dim=1)`, `self.crit(x, y)` after `self.crit =
        nn.NLLLoss()`: calling a module instance computes its op."""
        func = call.func
        if isinstance(func, ast.Name):
            constructor = self.value_of(func)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            values = self.self_assigned.get(func.attr, ())
            constructor = values[0] if len(values) == 1 else None
        else:
            return None
        return instance_op(self.imports, constructor, call) if constructor is not None else None

    def parameter_scope(self, expr: ast.AST) -> Scope | None:
        """The scope of the function whose parameter `expr` is, when the body never rebinds or
        changes it in place (its value is the caller's), else None."""
        if not isinstance(expr, ast.Name):
            return None
        scope, values = self.lookup(expr.id)
        fn = scope.node if scope is not None else None
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or values != [None] \
                or expr.id in scope.mutations:  # type: ignore[union-attr]
            return None
        args = fn.args
        if any(a.arg == expr.id for a in args.posonlyargs + args.args + args.kwonlyargs):
            return scope
        return None

    def returned_op(self, call: ast.AST | None) -> OpCall | None:
        """The op a call to this module's own code returns: `policy(s)` after `policy =
        Policy()` whose `forward` returns `torch.softmax(...)`, `self.head(x)` likewise, or
        `probs(x)` of a module-level `def probs(x): return F.softmax(x, -1)`. One level deep,
        and only when every `return` of that function returns the same op."""
        if not isinstance(call, ast.Call):
            return None
        func = call.func
        target: ast.AST | None = None
        if isinstance(func, ast.Name):
            target = self._definitions().get(func.id)
            if target is None:
                target = self.value_of(func)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            values = self.self_assigned.get(func.attr, ())
            target = values[0] if len(values) == 1 else None
        if isinstance(target, ast.Call) and isinstance(target.func, ast.Name):
            target = self._definitions().get(target.func.id)  # an instance of a class of this module
            if isinstance(target, ast.ClassDef):
                target = next((b for b in target.body if isinstance(b, ast.FunctionDef)
                               and b.name in ("forward", "__call__", "call")), None)
        if not isinstance(target, ast.FunctionDef):
            return None
        answers = self.memo.setdefault("returned_op", {})
        if id(target) not in answers:
            returns = [n.value for n in ast.walk(target) if isinstance(n, ast.Return)]
            ops = [self.op(r) for r in returns]
            same = bool(ops) and all(o is not None for o in ops) and len({o.op for o in ops if o is not None}) == 1
            answers[id(target)] = ops[0] if same else None
        return answers[id(target)]

    def _definitions(self) -> dict[str, ast.AST]:
        """The module's top-level functions and classes by name (lazy)."""
        if self._defs is None:
            self._defs = {n.name: n for n in self.tree.body
                          if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        return self._defs

    def lookup(self, key: str, scope: Scope | None = None) -> tuple[Scope | None, list[ast.expr | None]]:
        """The scope that binds `key` (innermost first) and its bindings there."""
        start = s = scope or self.scope
        while s is not None:
            # A class body's names are not visible from its methods (Python scoping).
            if key in s.bindings and (s is start or not isinstance(s.node, ast.ClassDef)):
                return s, s.bindings[key]
            s = s.parent
        return None, []

    def value_of(self, expr: ast.AST, scope: Scope | None = None) -> ast.expr | None:
        """The value of a name assigned exactly once (and never changed in place), else None."""
        key = name_key(expr)
        if key is None:
            return None
        s, values = self.lookup(key, scope)
        if s is None or len(values) != 1 or values[0] is None or key in s.mutations:
            return None
        value = values[0]
        if value.lineno > expr.lineno:  # type: ignore[attr-defined]
            return None  # assigned after this use (a loop-carried value): unknown here
        return value

    def last_value(self, expr: ast.AST) -> ast.expr | None:
        """The value of the last plain assignment to a name before `expr`'s line, in its scope
        (`x = x - x_max` then `x.exp()`): what the name most likely holds there. Only guards use
        it: it errs towards silence, never towards a finding."""
        key = name_key(expr)
        if key is None:
            return None
        _, values = self.lookup(key)
        line = expr.lineno  # type: ignore[attr-defined]
        prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
        return prior[-1] if prior else None

    def resolve(self, expr: ast.expr, scope: Scope | None = None) -> ast.expr:
        """`expr`, or the single value assigned to it when it is such a name."""
        value = self.value_of(expr, scope)
        return value if value is not None else expr

    def zero_checked(self, expr: ast.AST, scope: Scope | None = None) -> bool:
        key = name_key(expr)
        if key is None:
            return False
        s = scope or self.scope
        while s is not None:
            if key in s.zero_checked:
                return True
            if key in s.bindings:
                return False
            s = s.parent
        return False

    def result_fixed_up(self, node: ast.AST) -> bool:
        """The value of `node` is assigned to a name that is later patched in place."""
        key = self.assigned_to.get(id(node))
        return key is not None and key in self.scope.mutations

    def detached(self, expr: ast.AST, depth: int = 0) -> bool:
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
                if key not in self.imports.aliases:
                    keys.append(key)
                continue
            if is_detach_chain(n) or (isinstance(n, ast.Call) and getattr(self.op(n), "op", "") == "stop_gradient"):
                saw_detached = True
                continue  # this operand is detached; the others decide
            stack.extend(ast.iter_child_nodes(n))
        if not keys:
            return saw_detached
        for key in keys:
            if _LABEL_NAME.search(key.rsplit(".", 1)[-1]):
                continue
            scope, values = self.lookup(key)
            prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
            if prior and (is_detach_chain(prior[-1]) or (depth < 2 and self.detached(prior[-1], depth + 1))):
                continue  # `edge = target[:, 1] - target[:, 0]`: a local built from targets alone
            unpacked = scope.unpacked.get(key, []) if scope is not None and not prior else []
            if not (depth < 2 and unpacked and len(unpacked) == len(values)
                    and all(self.detached(u, depth + 1) for u in unpacked)):
                return False  # `pt1, pt2 = gt_boxes.chunk(2, 1)`: unpacked, every time, from targets
        return True

    def gradient_free(self, expr: ast.AST, depth: int = 0) -> bool:
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
            if isinstance(n, ast.Attribute) and _module_attribute(self, n):
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
                if name in _NO_GRAD_FACTORIES:
                    continue
                if name == "len":
                    continue
                if name in _PYTHON_NUMBER_METHODS and receiver is not None and not n.args[1:]:
                    continue  # `k.size(-1)`, `x.numel()`, `loss.item()`: Python numbers, outside autograd
                if receiver is not None and name_key(receiver) in self.imports.aliases:
                    receiver = None  # `torch.sum(...)`: a module, not a tensor
                stack.extend(n.args)
                stack.extend(k.value for k in n.keywords)
                if receiver is not None:
                    stack.append(receiver)
                continue
            if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Subscript, ast.Tuple,
                              ast.List, ast.IfExp, ast.Starred)):
                stack.extend(ast.iter_child_nodes(n))
                continue
            key = name_key(n)
            if key is not None and key.rsplit(".", 1)[-1].lower() in _STEP_COUNTERS:
                continue  # `step`, `self.global_step`, optax's `count`: an integer counter
            if key is not None and _LABEL_NAME.search(key.rsplit(".", 1)[-1]):
                continue  # `labels`, `ideal_sorted_labels`, `y_true`: data, not differentiated (as in `detached`)
            if key is None or line is None:
                return False
            s, values = self.lookup(key)
            if s is not None and key in self.index_names(s):
                continue  # `table[k]`: an index is an integer (or a bool mask), never differentiated
            prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
            if not prior and s is not None and isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and (self.autodiff.parameter_gradient_free(s.node, key) or _number_default(s.node, key)
                         or _MASK_PARAMETER.search(key)):
                continue  # `cutoff: float`, `timescale=1000`, a `prediction_mask` parameter (data), or bound
                # to gradient-free values at every call
            if not prior and s is not None and values and s.range_bound.get(key, 0) == len(values) \
                    and not any(values):
                continue  # `for x in range(w)`: a Python int
            if not prior and s is not None and values and len(s.unpacked.get(key, ())) == len(values) \
                    and all(self.gradient_free(u, depth + 1) for u in s.unpacked[key]):
                continue  # `pt1, pt2 = gt_boxes.chunk(2, 1)`: unpacked, every time, from gradient-free values
            if not prior or not self.gradient_free(prior[-1], depth + 1):
                return False
        return True

    def only_reported(self, node: ast.AST) -> bool:
        """Is `node` part of the value of a local name whose every later use only shows or
        compares it? (`nanguard.lint.uses`)"""
        return uses.only_reported(self, node)

    def index_names(self, scope: Scope) -> frozenset[str]:
        """Names that `scope` uses as a subscript index (`nanguard.lint.uses`)."""
        return uses.index_names(self, scope)

    def framework_at(self, node: ast.AST) -> str:
        """The framework of the code at `node`: that of the outermost recognised function call in
        it (`tf.math.log(...)` is TensorFlow, `keras.ops.log` Keras, `jnp.log` JAX, `np.log`
        NumPy), else the file's (`ImportMap.default_framework`)."""
        for n in bounded_walk(node, 80):
            if isinstance(n, ast.Call):
                oc = self.op(n)
                if oc is not None and oc.framework != METHOD:
                    if oc.framework == KERAS and oc.qualname.startswith("keras.backend.") \
                            and self.imports.default_framework == TF:
                        return TF  # `K = tf.keras.backend`: TensorFlow's Keras
                    return oc.framework
        return self.imports.default_framework

    def report(self, rule: Rule, node: ast.AST, pattern: str, key: str, fix: FixBuilder | None = None,
               hazard: str | None = None, subject: ast.AST | None = None, confidence: str | None = None,
               root: ast.AST | None = None, **fields: Any) -> None:
        """Record a finding at `node`: `pattern` says what was matched, the catalogue entry
        `key` (one of the rule's hazards) why it is a hazard and the fix, filled with
        `fields`. `hazard` (GRADIENT or VALUE) overrides the rule's; `subject` is the
        expression whose gradient is at risk (default `node`): detached subjects are not
        reported for gradient hazards. `confidence` (CERTAIN or POSSIBLE) overrides the rule's.
        `root`, the op that causes the hazard when it is not `node`: a finding of its own at
        `root` (`acos(cosine)` reported by NG303) makes this one a duplicate, dropped."""
        if key not in rule.hazards:
            raise ValueError(f"{rule.code} does not find hazard {key!r} (it finds {rule.hazards})")
        if rule.code not in self.enabled:
            return
        confidence = confidence or rule.confidence
        if fix_safety.in_test_file(self.path):
            confidence = POSSIBLE  # a test file's formula runs on the test's own inputs only (README)
        elif (hazard or rule.hazard) == GRADIENT and module_kind.rarely_differentiated(self):
            confidence = POSSIBLE  # a metric, an RL environment, an optimizer: rarely differentiated (README)
        if confidence == POSSIBLE and rule.code not in self.possible:
            return
        framework = self.framework_at(node)
        if (hazard or rule.hazard) == GRADIENT and (
                self.nograd or framework == NUMPY or id(node) in self.detached_results
                or self.detached(subject or node) or self.autodiff.scope_not_differentiated(self.scope)
                or self.only_reported(node) or names_a_metric(self.assigned_to.get(id(node), ""))
                or self.gradient_free(node)):
            return  # NumPy has no autograd; `.item()`, `.detach()`, stop_gradient end it; custom-gradient
            # bodies and rules, and functions used only there or under no_grad, are not differentiated
        if dataflow.fixed_value(self, node):
            return  # computed from literals alone: the same value on every run, whatever the input
        seen = (rule.code, id(node))
        if seen in self._reported:
            return
        self._reported.add(seen)
        # NumPy code is advised in JAX's words (jax.numpy mirrors it, and gains autograd).
        wording = JAX if framework == NUMPY else framework
        self.raw.append(Raw(rule, node, lint_message(HAZARDS[key], pattern, wording, **fields), fix, key,
                            self.scope, confidence, root))

    def spell(self, qualname: str) -> str | None:
        """How to write module `qualname` at the current scope so that it is that module, or None."""
        return fix_safety.spelling(self, qualname, self.scope)
