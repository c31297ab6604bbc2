"""Which functions autograd never differentiates, read from how the module uses them.

A gradient-only hazard (a discarded 0·inf in a `where`, an infinite derivative at 0) cannot
happen in code that no autodiff system differentiates. The walk already knows the syntactic
cases (`with torch.no_grad()`, `@torch.no_grad()`, `backward(ctx, ...)`, `__init__`); this
module adds what a reader sees from the module as a whole:

* a custom-gradient primal and its rules: the body of a function decorated with
  `tf.custom_gradient`, `jax.custom_jvp`/`custom_vjp` (also through `functools.partial`),
  `torch.library.custom_op`, `RegisterGradient`; every function passed to a
  `custom_gradient(vjp_fwd=..., vjp_bwd=..., jvp_fn=...)` call, to `.defvjp(fwd, bwd)` or
  `.defjvp(jvp)`, and every function decorated `@f.defjvp`: autodiff uses the rule, not the
  ops of the body, and the rules compute gradients rather than being differentiated (as for
  `backward`, higher orders aside);
* the methods of an `autograd.Function` (`forward` runs under no-grad, `backward`/`jvp`
  compute derivatives) and an optimizer's update hooks (`_resource_apply_dense`,
  `update_step`, ... of a class deriving from an `...Optimizer`), which run on gradients
  outside any tape, and the methods of a `...Dataset` class, which prepare inputs;
* a module-level function passed as `metrics=` (Keras' `compile`) and never as `loss=`;
* a function whose every use in the module is in such code (`_temme_series` reached only
  from a custom-gradient Bessel function, `_lamb_trust_ratio` only from a `@torch.no_grad()`
  step, a lazy property read only in a no-grad `sample`). A function the module never uses,
  and a public one (another module may call it with a differentiated tensor), keeps its
  findings;
* a parameter that cannot carry a gradient: annotated as a Python number (`cutoff: float`),
  or, in a private function, bound at every call in the module to a value without one (`hz_to_mel(torch.tensor(...))`,
  `sinc(t)` with `t = torch.linspace(...)`).

The index is built lazily, on the first question, by one walk of the module; files without a
candidate gradient finding never pay for it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from nanguard.lint.autodiff_markers import (
    CUSTOM_DERIVATIVE, DATASET_SUFFIX, FUNCS, FUNCTION_BASES, FUNCTION_METHODS, GRADIENT_RULE_PARAMS,
    GRADIENT_RULE_VARARGS,
    OPTIMIZER_HOOKS, RULE_CALLS, SOLVER_STEPS, callee, decorator_name, gradient_transformation_update,
    last_identifier, mark_escape, names_a_metric, names_passed,
)

from nanguard.lint.call_sites import CallSites

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis
    from nanguard.lint.scope import Scope

# Methods a framework runs for a call of the object (`module(x)`, `layer(x)`): their calls
# in a module do not name them.
_CALLED_BY_THE_FRAMEWORK = frozenset({"forward", "call", "__call__"})

class _Ref:
    """One use of a name: the enclosing functions and lambdas (innermost last), how sure the spot
    itself is outside autodiff (`level`: 2 under a no-grad context or in a custom rule, 1 in an
    `__init__`, which runs once but whose closures run later, 0 otherwise), and how it is used:
    'call' (with the call), 'rule', 'value' (kept or passed along here) or 'escape' (returned
    or stored, to run later who knows where)."""

    __slots__ = ("call", "chain", "level", "role")

    def __init__(self, chain: tuple, level: int, role: str, call: ast.Call | None) -> None:
        self.chain, self.level, self.role, self.call = chain, level, role, call


class Autodiff(CallSites):
    """Answers "is this code ever differentiated?" for one analysed module."""

    def __init__(self, ctx: Analysis) -> None:
        self.ctx = ctx
        self._built = False
        self.names: dict[str, list[_Ref]] = {}       # Name loads by identifier
        self.attrs: dict[str, list[_Ref]] = {}       # attribute loads by attribute name
        self.lambdas: dict[int, tuple[str, int]] = {}  # id(lambda) -> (role, level where it is made)
        self.owner: dict[int, tuple[str, ast.AST | None]] = {}  # id(def) -> ('module'|'class'|'nested', owner)
        self._memo: dict[int, int] = {}
        self._param_memo: dict[tuple[int, str], bool] = {}
        self._stopped: set[int] = set()  # ids of expressions whose gradient is stopped right there
        # names passed as `metrics=` (Keras' compile, Lightning/HF helpers) and as `loss=`
        self._keyword_names: dict[str, set[str]] = {"metrics": set(), "loss": set()}

    # -- the index -----------------------------------------------------------------------------

    def _function_level(self, node: ast.AST) -> int:
        """2 when the walk's syntax says the body is outside autodiff at run time (no-grad
        decorator, `backward(ctx)`), 1 for `__init__` (not differentiated, but what it builds is
        used later), 0 otherwise."""
        if not self.ctx._nograd_function(node):
            return 0
        if node.name == "__init__" and not any(  # type: ignore[attr-defined]
                self.ctx._nograd_decorator(d) for d in node.decorator_list):  # type: ignore[attr-defined]
            return 1
        return 2

    def _build(self) -> None:
        self._built = True
        walk = self.ctx
        stack: list[tuple[ast.AST, tuple, int, str]] = [(walk.tree, (), 0, "module")]
        roles: dict[int, tuple[str, ast.Call | None]] = {}
        while stack:
            node, chain, level, where = stack.pop()
            kind = node.__class__
            if kind is ast.Name:
                if isinstance(node.ctx, ast.Load):
                    role, call = roles.get(id(node), ("value", None))
                    self.names.setdefault(node.id, []).append(_Ref(chain, level, role, call))
                continue
            if kind is ast.Attribute and isinstance(node.ctx, ast.Load):
                role, call = roles.get(id(node), ("value", None))
                self.attrs.setdefault(node.attr, []).append(_Ref(chain, level, role, call))
            if kind is ast.Call:
                name = callee(node)
                if name == "stop_gradient" and node.args:
                    self._stopped.add(id(node.args[0]))  # `lax.stop_gradient(f(x))`
                elif name in ("detach", "stop_gradient") and isinstance(node.func, ast.Attribute):
                    self._stopped.add(id(node.func.value))  # `f(x).detach()`
                rule = name in RULE_CALLS
                for k in node.keywords:
                    if k.arg in self._keyword_names:
                        self._keyword_names[k.arg].update(names_passed(k.value))
                for arg in list(node.args) + [k.value for k in node.keywords]:
                    if rule:
                        roles[id(arg)] = ("rule", node)
                    elif isinstance(arg, ast.Lambda) and id(arg) not in roles:
                        roles[id(arg)] = ("arg", node)
                roles[id(node.func)] = ("call", node)
            elif kind is ast.Return or kind is ast.Yield or kind is ast.YieldFrom:
                mark_escape(node.value, roles)  # type: ignore[attr-defined]
            elif kind is ast.Assign or kind is ast.AnnAssign:
                targets = node.targets if kind is ast.Assign else [node.target]  # type: ignore[attr-defined]
                if any(not isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in targets):
                    mark_escape(node.value, roles)  # type: ignore[attr-defined]
            if kind in FUNCS:
                self.owner[id(node)] = (where, chain[-1] if where == "nested" and chain else None)
                for deco in node.decorator_list:
                    stack.append((deco, chain, level, where))
                for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                    stack.append((default, chain, level, where))
                inner = self._function_level(node)
                for stmt in node.body:
                    stack.append((stmt, chain + (node,), inner, "nested"))
                continue
            if kind is ast.Lambda:
                role = roles.get(id(node), ("escape", None))[0]
                self.lambdas[id(node)] = (role, level)
                for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                    stack.append((default, chain, level, where))
                stack.append((node.body, chain + (node,), 0, "nested"))
                continue
            if kind is ast.ClassDef:
                for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                    stack.append((expr, chain, level, where))
                for stmt in node.body:
                    stack.append((stmt, chain, 0, "class"))
                continue
            if kind is ast.With or kind is ast.AsyncWith:
                inner = 2 if any(walk._disables_grad(item.context_expr) for item in node.items) else level
                for item in node.items:
                    stack.append((item.context_expr, chain, level, where))
                    if item.optional_vars is not None:
                        stack.append((item.optional_vars, chain, level, where))
                for stmt in node.body:
                    stack.append((stmt, chain, inner, where))
                continue
            for child in ast.iter_child_nodes(node):
                stack.append((child, chain, level, where))

    # -- questions -----------------------------------------------------------------------------

    def scope_not_differentiated(self, scope: Scope | None) -> bool:
        """Is code in `scope` never differentiated: in a function (or a lambda passed as a rule)
        that autodiff does not trace, or that runs only from such code?"""
        s = scope
        while s is not None:
            node = s.node
            if isinstance(node, FUNCS):
                return self._status(node) > 0
            if isinstance(node, ast.Lambda):
                if not self._built:
                    self._build()
                role, level = self.lambdas.get(id(node), ("escape", 0))
                if role == "rule" or level == 2:
                    return True
                if role != "arg":
                    return False
            s = s.parent
        return False

    def function_not_differentiated(self, fn: ast.AST) -> bool:
        return self._status(fn) > 0

    def _status(self, fn: ast.AST) -> int:
        """2: never differentiated, and neither is what it builds; 1: only called from
        `__init__`-like code (its body is not differentiated, closures it makes may be);
        0: may be differentiated."""
        key = id(fn)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = 0  # a cycle (recursion) proves nothing
        result = self._by_definition(fn) or self._by_uses(fn)
        self._memo[key] = result
        return result

    def _by_definition(self, fn: ast.AST) -> int:
        level = self._function_level(fn)
        if level:
            return level
        if any(decorator_name(d) in RULE_CALLS for d in fn.decorator_list):  # type: ignore[attr-defined]
            return 2  # a custom-derivative primal, or a rule registered by decorator (`@f.defjvp`)
        if gradient_transformation_update(fn) or names_a_metric(fn.name):  # type: ignore[attr-defined]
            return 2
        if not self._built:
            self._build()
        where, owner = self.owner.get(id(fn), ("module", None))
        if where == "module" and fn.name in self._keyword_names["metrics"] - self._keyword_names["loss"]:  # type: ignore[attr-defined]
            return 2  # `compile(metrics=[rmse])`: Keras evaluates it (a function also passed as `loss=` is a loss)
        if where == "nested" and isinstance(owner, FUNCS) and any(
                decorator_name(d) in CUSTOM_DERIVATIVE for d in owner.decorator_list):
            return 2  # the `grad_fn` a @tf.custom_gradient returns is its rule
        if where == "class":
            cls = self._class_of(fn)
            bases = {last_identifier(b) for b in cls.bases} if cls is not None else set()
            name = fn.name  # type: ignore[attr-defined]
            if name in FUNCTION_METHODS and bases & FUNCTION_BASES:
                return 2
            if name in OPTIMIZER_HOOKS and any("Optimizer" in b for b in bases):
                return 2
            if name in SOLVER_STEPS and any(b.endswith("Solver") for b in bases):
                return 2
            if any(b.endswith(DATASET_SUFFIX) for b in bases):
                return 2
        args = fn.args  # type: ignore[attr-defined]
        if {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} & GRADIENT_RULE_PARAMS \
                or (args.vararg is not None and args.vararg.arg in GRADIENT_RULE_VARARGS):
            return 2  # a backward hook or gradient rule: it computes gradients, nothing differentiates it
        return 0

    def _class_of(self, fn: ast.AST) -> ast.ClassDef | None:
        s = self.ctx.scope_of.get(id(fn))
        parent = s.parent if s is not None else None
        return parent.node if parent is not None and isinstance(parent.node, ast.ClassDef) else None

    def _uses(self, fn: ast.AST) -> list[_Ref]:
        """Every use of `fn` in the module, recursion into itself left out."""
        if not self._built:
            self._build()
        where, owner = self.owner.get(id(fn), ("module", None))
        name = fn.name  # type: ignore[attr-defined]
        if where == "class":
            refs = self.attrs.get(name, []) + self.names.get(name, [])
        elif where == "nested":
            refs = [r for r in self.names.get(name, []) if owner in r.chain]
        else:
            refs = self.names.get(name, [])
        return [r for r in refs if fn not in r.chain]

    def _site(self, ref: _Ref) -> int:
        """How sure the use `ref` is outside autodiff: 2, 1 (a call from `__init__`-like code) or 0.
        A value passed along or kept counts only where the code around it is surely outside (2);
        so does anything inside a lambda that is passed to a call."""
        if ref.role == "rule":
            return 2
        if ref.role == "escape":
            return 0
        if ref.role == "call" and ref.call is not None and self._result_stopped(ref.call, ref.chain):
            return 2
        need = 2 if ref.role != "call" else 1
        if ref.level >= need:
            return ref.level
        for f in reversed(ref.chain):
            if isinstance(f, ast.Lambda):
                role, level = self.lambdas.get(id(f), ("escape", 0))
                if role == "rule" or level == 2:
                    return 2
                if role != "arg":
                    return 0
                need = 2  # run by the call it is passed to, in the extent of the code around it
                continue
            status = self._status(f)
            return status if status >= need else 0
        return 0

    def _result_stopped(self, call: ast.Call, chain: tuple) -> bool:
        """Does the gradient stop at the result of `call`: `stop_gradient(f(x))`, `f(x).detach()`,
        or `dt = f(x)` whose next use is `dt = lax.stop_gradient(dt)`?"""
        if id(call) in self._stopped:
            return True
        key = self.ctx.assigned_to.get(id(call))
        if key is None or "." in key or not chain:
            return False
        later = [n for n in ast.walk(chain[-1]) if isinstance(n, ast.Name) and n.id == key
                 and isinstance(n.ctx, ast.Load) and (n.lineno, n.col_offset) > (call.lineno, call.col_offset)]
        return bool(later) and id(min(later, key=lambda n: (n.lineno, n.col_offset))) in self._stopped

    def _public(self, fn: ast.AST) -> bool:
        """A public module-level function, or a public method of a public class: another
        module may call it with anything, a differentiated tensor included, so how this
        module happens to use it proves nothing."""
        if not self._built:
            self._build()
        where, _ = self.owner.get(id(fn), ("module", None))
        if where == "nested":
            return False
        name = fn.name  # type: ignore[attr-defined]
        if where == "class" and name in _CALLED_BY_THE_FRAMEWORK:
            return True  # `module(x)` runs `forward`: a call that names no method
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            return False
        if where == "class":
            cls = self._class_of(fn)
            return cls is None or not cls.name.startswith("_")
        return True

    def _by_uses(self, fn: ast.AST) -> int:
        if self._public(fn):
            return 0
        refs = self._uses(fn)
        if not refs:
            return 0
        return min(self._site(r) for r in refs)
