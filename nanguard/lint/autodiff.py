"""Which functions autograd never differentiates, read from how the module uses them.

A gradient-only hazard (a discarded 0·inf in a `where`, an infinite derivative at 0) cannot
happen in code that no autodiff system differentiates. The walk already knows the syntactic
cases (`with torch.no_grad()`, `@torch.no_grad()`, `backward(ctx, ...)`, `__init__`); this
module adds what a reader sees from the module as a whole:

* a custom-gradient primal and its rules: the body of a function decorated with
  `tf.custom_gradient`, `jax.custom_jvp`/`custom_vjp` (also through `functools.partial`),
  `torch.library.custom_op`, `RegisterGradient`; every function passed to a
  `custom_gradient(vjp_fwd=..., vjp_bwd=..., jvp_fn=...)` call, to `.defvjp(fwd, bwd)` or
  `.defjvp(jvp)`: autodiff uses the rule, not the ops of the body, and the rules compute
  gradients rather than being differentiated (as for `backward`, higher orders aside);
* the methods of an `autograd.Function` (`forward` runs under no-grad, `backward`/`jvp`
  compute derivatives) and an optimizer's update hooks (`_resource_apply_dense`,
  `update_step`, ... of a class deriving from an `...Optimizer`), which run on gradients
  outside any tape;
* a function whose every use in the module is in such code (`_temme_series` reached only
  from a custom-gradient Bessel function, `_lamb_trust_ratio` only from a `@torch.no_grad()`
  step, a lazy property read only in a no-grad `sample`). A function the module never uses
  may be called from anywhere and keeps its findings;
* a parameter that cannot carry a gradient: annotated as a Python number (`cutoff: float`),
  or bound at every call in the module to a value without one (`hz_to_mel(torch.tensor(...))`,
  `sinc(t)` with `t = torch.linspace(...)`).

The index is built lazily, on the first question, by one walk of the module; files without a
candidate gradient finding never pay for it.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis
    from nanguard.lint.scope import Scope

# Decorators (last identifier) whose function body autodiff replaces by a rule.
_CUSTOM_DERIVATIVE = frozenset({"custom_gradient", "custom_jvp", "custom_vjp", "custom_op", "RegisterGradient"})
# Calls (last identifier) whose function arguments are derivative rules or custom-derivative primals.
_RULE_CALLS = _CUSTOM_DERIVATIVE | {"defvjp", "defjvp", "defjvps", "register_autograd"}
# Methods of a torch.autograd.Function: forward runs under no-grad, the others compute derivatives.
_FUNCTION_BASES = frozenset({"Function", "InplaceFunction", "NestedIOFunction"})
_FUNCTION_METHODS = frozenset({"forward", "backward", "jvp", "vjp", "setup_context", "vmap"})
# Update hooks an optimizer framework calls with the gradients, outside any tape.
_OPTIMIZER_HOOKS = frozenset({"_resource_apply_dense", "_resource_apply_sparse",
                              "_resource_apply_sparse_duplicate_indices", "_apply_dense", "_apply_sparse",
                              "update_step", "_update_step", "_update_step_xla", "_apply_weight_decay"})
# Python number annotations: such a parameter holds no tensor, so no gradient.
_SCALAR_TYPES = frozenset({"int", "float", "bool", "str", "complex"})

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _last_identifier(expr: ast.AST) -> str:
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return ""


def _callee(call: ast.Call) -> str:
    """`partial(jax.custom_vjp, ...)` -> 'custom_vjp'; `tf.custom_gradient` -> 'custom_gradient'."""
    name = _last_identifier(call.func)
    if name == "partial" and call.args:
        return _last_identifier(call.args[0])
    return name


def _decorator_name(deco: ast.expr) -> str:
    if isinstance(deco, ast.Call):
        return _callee(deco)
    return _last_identifier(deco)


class _Ref:
    """One use of a name: where (the enclosing functions, innermost last), whether that spot is
    syntactically no-grad, and how it is used ('call' with the call, 'rule', or 'value')."""

    __slots__ = ("call", "chain", "nograd", "role")

    def __init__(self, chain: tuple, nograd: bool, role: str, call: ast.Call | None) -> None:
        self.chain, self.nograd, self.role, self.call = chain, nograd, role, call


class Autodiff:
    """Answers "is this code ever differentiated?" for one analysed module."""

    def __init__(self, ctx: Analysis) -> None:
        self.ctx = ctx
        self._built = False
        self.names: dict[str, list[_Ref]] = {}       # Name loads by identifier
        self.attrs: dict[str, list[_Ref]] = {}       # attribute loads by attribute name
        self.rule_lambdas: set[int] = set()          # lambdas passed as derivative rules
        self.owner: dict[int, tuple[str, ast.AST | None]] = {}  # id(def) -> ('module'|'class'|'nested', owner)
        self._memo: dict[int, bool] = {}
        self._param_memo: dict[tuple[int, str], bool] = {}

    # -- the index -----------------------------------------------------------------------------

    def _build(self) -> None:
        self._built = True
        walk = self.ctx
        stack: list[tuple[ast.AST, tuple, bool, str]] = [(walk.tree, (), False, "module")]
        roles: dict[int, tuple[str, ast.Call | None]] = {}
        while stack:
            node, chain, nograd, where = stack.pop()
            kind = node.__class__
            if kind is ast.Name:
                if isinstance(node.ctx, ast.Load):
                    role, call = roles.get(id(node), ("value", None))
                    self.names.setdefault(node.id, []).append(_Ref(chain, nograd, role, call))
                continue
            if kind is ast.Attribute and isinstance(node.ctx, ast.Load):
                role, call = roles.get(id(node), ("value", None))
                self.attrs.setdefault(node.attr, []).append(_Ref(chain, nograd, role, call))
            if kind is ast.Call:
                roles[id(node.func)] = ("call", node)
                if _callee(node) in _RULE_CALLS:
                    for arg in list(node.args) + [k.value for k in node.keywords]:
                        if isinstance(arg, ast.Lambda):
                            self.rule_lambdas.add(id(arg))
                        roles[id(arg)] = ("rule", node)
            if kind in _FUNCS:
                self.owner[id(node)] = (where, chain[-1] if where == "nested" and chain else None)
                for deco in node.decorator_list:
                    stack.append((deco, chain, nograd, where))
                for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                    stack.append((default, chain, nograd, where))
                inner = nograd or walk._nograd_function(node)
                for stmt in node.body:
                    stack.append((stmt, chain + (node,), inner, "nested"))
                continue
            if kind is ast.Lambda:
                for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                    stack.append((default, chain, nograd, where))
                stack.append((node.body, chain + (node,), nograd, "nested"))
                continue
            if kind is ast.ClassDef:
                for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                    stack.append((expr, chain, nograd, where))
                for stmt in node.body:
                    stack.append((stmt, chain, nograd, "class"))
                continue
            if kind is ast.With or kind is ast.AsyncWith:
                inner = nograd or any(walk._disables_grad(item.context_expr) for item in node.items)
                for item in node.items:
                    stack.append((item.context_expr, chain, nograd, where))
                    if item.optional_vars is not None:
                        stack.append((item.optional_vars, chain, nograd, where))
                for stmt in node.body:
                    stack.append((stmt, chain, inner, where))
                continue
            for child in ast.iter_child_nodes(node):
                stack.append((child, chain, nograd, where))

    # -- questions -----------------------------------------------------------------------------

    def scope_not_differentiated(self, scope: Scope | None) -> bool:
        """Is code in `scope` (or a function around it) never differentiated?"""
        s = scope
        while s is not None:
            node = s.node
            if isinstance(node, _FUNCS) and self.function_not_differentiated(node):
                return True
            if isinstance(node, ast.Lambda) and self._rule_lambda(node):
                return True
            s = s.parent
        return False

    def _rule_lambda(self, node: ast.Lambda) -> bool:
        if not self._built:
            self._build()
        return id(node) in self.rule_lambdas

    def function_not_differentiated(self, fn: ast.AST) -> bool:
        key = id(fn)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # a cycle (recursion) proves nothing
        result = self._by_definition(fn) or self._by_uses(fn)
        self._memo[key] = result
        return result

    def _by_definition(self, fn: ast.AST) -> bool:
        if self.ctx._nograd_function(fn):
            return True
        if any(_decorator_name(d) in _CUSTOM_DERIVATIVE for d in fn.decorator_list):  # type: ignore[attr-defined]
            return True
        if not self._built:
            self._build()
        where, _ = self.owner.get(id(fn), ("module", None))
        if where == "class":
            cls = self._class_of(fn)
            bases = {_last_identifier(b) for b in cls.bases} if cls is not None else set()
            name = fn.name  # type: ignore[attr-defined]
            if name in _FUNCTION_METHODS and bases & _FUNCTION_BASES:
                return True
            if name in _OPTIMIZER_HOOKS and any("Optimizer" in b for b in bases):
                return True
        return False

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

    def _site_not_differentiated(self, ref: _Ref) -> bool:
        if ref.nograd or ref.role == "rule":
            return True
        for f in reversed(ref.chain):
            if isinstance(f, _FUNCS) and self.function_not_differentiated(f):
                return True
            if isinstance(f, ast.Lambda) and id(f) in self.rule_lambdas:
                return True
        return False

    def _by_uses(self, fn: ast.AST) -> bool:
        refs = self._uses(fn)
        return bool(refs) and all(self._site_not_differentiated(r) for r in refs)

    def parameter_gradient_free(self, fn: ast.AST, param: str) -> bool:
        """Can parameter `param` of function `fn` never carry a gradient?"""
        key = (id(fn), param)
        if key in self._param_memo:
            return self._param_memo[key]
        self._param_memo[key] = False
        result = self._parameter_gradient_free(fn, param)
        self._param_memo[key] = result
        return result

    def _parameter_gradient_free(self, fn: ast.AST, param: str) -> bool:
        args = fn.args  # type: ignore[attr-defined]
        positional = args.posonlyargs + args.args
        every = positional + args.kwonlyargs
        arg = next((a for a in every if a.arg == param), None)
        if arg is None:
            return False  # *args, **kwargs
        if _scalar_annotation(arg.annotation):
            return True
        if isinstance(fn, ast.Lambda) or not isinstance(fn, _FUNCS):
            return False
        refs = self._uses(fn)
        if not refs:
            return False
        where, _ = self.owner.get(id(fn), ("module", None))
        index = next((i for i, a in enumerate(positional) if a.arg == param), None)
        n_defaults = len(args.defaults)
        default = None
        if index is not None and index >= len(positional) - n_defaults:
            default = args.defaults[index - (len(positional) - n_defaults)]
        elif index is None:
            k = [a.arg for a in args.kwonlyargs].index(param)
            default = args.kw_defaults[k]
        for ref in refs:
            if self._site_not_differentiated(ref):
                continue
            call = ref.call
            if ref.role != "call" or call is None:
                return False
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return False
            bound = None
            kw = next((k.value for k in call.keywords if k.arg == param), None)
            if kw is not None:
                bound = kw
            elif index is not None:
                i = index - (1 if where == "class" and isinstance(call.func, ast.Attribute) else 0)
                if 0 <= i < len(call.args):
                    bound = call.args[i]
            if bound is None:
                bound = default
            if bound is None or not self._gradient_free_at(bound, ref):
                return False
        return True

    def _gradient_free_at(self, expr: ast.expr, ref: _Ref) -> bool:
        """`ctx.gradient_free(expr)` as seen from the scope of the call site."""
        ctx = self.ctx
        scope = ctx.module_scope
        for f in reversed(ref.chain):
            s = ctx.scope_of.get(id(f))
            if s is not None:
                scope = s
                break
        saved = ctx.scope
        ctx.scope = scope
        try:
            return ctx.gradient_free(expr)
        finally:
            ctx.scope = saved


def _scalar_annotation(ann: ast.expr | None) -> bool:
    """`int`, `float`, `Optional[float]`, `float | None`, `Union[int, float]`."""
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(ann, ast.Name):
        return ann.id in _SCALAR_TYPES
    if isinstance(ann, ast.Constant) and ann.value is None:
        return True
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _scalar_annotation(ann.left) and _scalar_annotation(ann.right)
    if isinstance(ann, ast.Subscript) and _last_identifier(ann.value) in ("Optional", "Union"):
        inner = ann.slice
        elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return all(_scalar_annotation(e) for e in elts)
    return False

