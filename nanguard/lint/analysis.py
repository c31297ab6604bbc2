"""The analysed module: the walk's scopes plus the queries every rule asks of them.

`Analysis` walks the tree once (`nanguard.lint.walk`) and answers: which op is this call,
what value does this name hold, is it patched in place or tested against zero, is this
expression outside autograd. `report` records a finding worded from the hazard catalogue.
"""

from __future__ import annotations

import ast
from typing import Any

from nanguard.core.hazards import HAZARDS, lint_message
from nanguard.lint import dataflow, fix_safety, grad_reach, module_kind, uses
from nanguard.lint.autodiff import Autodiff
from nanguard.lint.autodiff_markers import names_a_metric
from nanguard.lint.fallbacks import defined_as_a_fallback
from nanguard.lint.model import GRADIENT, POSSIBLE, Rule
from nanguard.lint.names import JAX, KERAS, METHOD, NUMPY, TF, OpCall, function_op, instance_op
from nanguard.lint.scope import (
    FixBuilder,
    Raw,
    Scope,
    name_key,
)
from nanguard.lint.syntax import bounded_walk
from nanguard.lint.walk import Walk


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

    def attribute_values(self, key: str) -> list[ast.expr | None]:
        """Every value the methods of the enclosing class assign to `self.x` ([] when a method
        changes it in place)."""
        return [value for _method, value in self.attribute_bindings(key)]

    def attribute_bindings(self, key: str, changes: bool = False) -> list[tuple[Scope, ast.expr | None]]:
        """(method scope, value) for every value the methods of the enclosing class assign to
        `self.x` ([] when a method changes it in place, unless `changes` asks for those too: the
        value written, `self.betas[0] = 1e-5`, or the in-place call, `self.x.clamp_(0, 1)`)."""
        s = self.scope
        while s is not None and not isinstance(s.node, ast.ClassDef):
            s = s.parent
        if s is None:
            return []
        bound: list[tuple[Scope, ast.expr | None]] = []
        for fn in s.node.body:  # type: ignore[attr-defined]
            method = self.scope_of.get(id(fn)) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if method is not None:
                bound.extend((method, v) for v in method.bindings.get(key, ()))
                if key in method.mutations:
                    if not changes:
                        return []
                    bound.extend((method, m) for m in method.mutations[key])  # type: ignore[misc]
        return bound

    def last_value(self, expr: ast.AST, skip_none: bool = False) -> ast.expr | None:
        """The value of the last plain assignment to a name before `expr`'s line, in its scope
        (`x = x - x_max` then `x.exp()`): what the name most likely holds there. Only guards use
        it: it errs towards silence, never towards a finding. With `skip_none`, `name = None` (a
        value dropped in a branch: `if torch.all(mask): mask = None`) is passed over."""
        key = name_key(expr)
        if key is None:
            return None
        _, values = self.lookup(key)
        line = expr.lineno  # type: ignore[attr-defined]
        # ended before this line: not the value `expr` is part of (`m = z.masked_fill(\n ~m, ...)`)
        prior = [v for v in values if v is not None and (v.end_lineno or v.lineno) < line  # type: ignore[attr-defined]
                 and not (skip_none and isinstance(v, ast.Constant) and v.value is None)]
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
        """Is `expr` outside autograd: detached, or built from targets alone (`grad_reach`)?"""
        return grad_reach.detached(self, expr, depth)

    def gradient_free(self, expr: ast.AST, depth: int = 0) -> bool:
        """Can no gradient flow through `expr`: is every leaf outside autograd (`grad_reach`)?"""
        return grad_reach.gradient_free(self, expr, depth)

    def only_reported(self, node: ast.AST) -> bool:
        """Is `node` part of the value of a local name whose every later use only shows or
        compares it? (`nanguard.lint.uses`)"""
        return uses.only_reported(self, node)

    def value_only_reported(self, node: ast.AST) -> bool:
        """The same, for a NaN in the value: `.item()` and `float()` carry it on (`nanguard.lint.uses`)."""
        return uses.value_only_reported(self, node)

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
        elif defined_as_a_fallback(self):
            confidence = POSSIBLE  # `else: def sinc(x)` where torch has no sinc: old versions only (README)
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
