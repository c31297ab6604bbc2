"""One pass over a module's AST: scopes, bindings, no-grad regions and candidate nodes.

The walk is iterative (no recursion limit on deeply nested code) and records only what the
rules need, so a 1.2 M-line tree is analysed in about the time `ast.parse` takes:

* per scope (module, class, function, lambda): every binding of every name, with the
  assigned value when it is a plain ``name = value``, so a rule can look through
  ``p = softmax(x); log(p)``; in-place changes (``d[d == 0] = 1``, ``d.clamp_(min=1)``) and
  names compared with zero (``if n == 0: return``), which rules treat as guards;
* whether a node is in code autograd never differentiates (``with torch.no_grad()``,
  ``@torch.inference_mode()``, a custom ``backward(ctx, ...)``): gradient-only hazards are
  not reported there;
* the calls, divisions and powers the rules are triggered by.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Dict, List, Optional, Set, Tuple

from nanguard.lint.model import GRADIENT, Fix, Rule
from nanguard.lint.names import ImportMap, OpCall, function_op
from nanguard.lint.source import SourceText

FixBuilder = Callable[[SourceText], Optional[Fix]]

_ZERO = (0, 0.0)


# Fields that can hold child nodes, per node class. Identifier fields, operators and
# expression contexts are left out: the rules read `node.op` directly and never need to
# visit an `ast.Load`, which makes the walk about twice as fast as `ast.iter_child_nodes`.
_NOT_CHILDREN = frozenset({"ctx", "id", "arg", "attr", "name", "module", "level", "kind", "conversion",
                           "is_async", "type_comment", "op", "ops", "type_ignores", "tag", "kwd_attrs",
                           "names", "asname"})


def _child_fields() -> Dict[type, Tuple[str, ...]]:
    table: Dict[type, Tuple[str, ...]] = {}
    for obj in vars(ast).values():
        if isinstance(obj, type) and issubclass(obj, ast.AST) and obj._fields:
            table[obj] = tuple(f for f in obj._fields if f not in _NOT_CHILDREN)
    table[ast.Constant] = ()
    table[ast.Import] = table[ast.ImportFrom] = table[ast.Global] = table[ast.Nonlocal] = ()
    return table


_CHILD_FIELDS = _child_fields()
_SPECIAL = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.Compare, ast.For,
                      ast.AsyncFor, ast.comprehension, ast.ExceptHandler, ast.With, ast.AsyncWith,
                      ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Import,
                      ast.ImportFrom, ast.Global, ast.Nonlocal})


class Scope:
    """Bindings and guards of one function, lambda, class or module body."""

    __slots__ = ("node", "parent", "bindings", "mutations", "zero_checked")

    def __init__(self, node: ast.AST, parent: Optional["Scope"]) -> None:
        self.node = node
        self.parent = parent
        # name -> assigned values in source order; None stands for a binding whose value
        # is unknown (a parameter, a loop target, an augmented assignment, an import).
        self.bindings: Dict[str, List[Optional[ast.expr]]] = {}
        # name -> in-place changes: the value of `name[...] = value`, or the call `name.op_(...)`.
        self.mutations: Dict[str, List[ast.AST]] = {}
        # names (or `self.x` spellings) compared with 0 or tested with .any()/.all() somewhere.
        self.zero_checked: Set[str] = set()

    def bind(self, name: str, value: Optional[ast.expr]) -> None:
        self.bindings.setdefault(name, []).append(value)


class Raw:
    """A finding before positions and noqa are worked out."""

    __slots__ = ("rule", "node", "message", "fix")

    def __init__(self, rule: Rule, node: ast.AST, message: str, fix: Optional[FixBuilder]) -> None:
        self.rule = rule
        self.node = node
        self.message = message
        self.fix = fix


def _name_key(expr: ast.AST) -> Optional[str]:
    """'x' for a Name, 'self.x' for an attribute of self; None otherwise."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return "self." + expr.attr
    return None


_LABEL_NAME = re.compile(r"(^|_)(targets?|labels?|gt|truth|ground_truth|y_true)(_|$)", re.IGNORECASE)


def _is_detach_chain(expr: ast.AST) -> bool:
    """`x.detach()`, `x.detach().cpu()`, `p.data`, `t.numpy()`: a value outside autograd."""
    for _ in range(12):
        if isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, ast.Attribute):
            if expr.attr in ("detach", "data", "numpy", "detach_", "item", "tolist"):
                return True
            expr = expr.value
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        else:
            return False
    return False


class Analysis:
    """The walked module plus the helpers every rule uses (op recognition, name lookup)."""

    def __init__(self, tree: ast.Module, imports: ImportMap) -> None:
        self.tree = tree
        self.imports = imports
        self.module_scope = Scope(tree, None)
        self.calls: List[Tuple[ast.Call, Scope, bool]] = []
        self.divisions: List[Tuple[ast.AST, Scope, bool]] = []
        self.powers: List[Tuple[ast.BinOp, Scope, bool]] = []
        # id(value) -> the name it is assigned to, for "is this result fixed up later?".
        self.assigned_to: Dict[int, str] = {}
        # Set by the pre-pass over where/masked_fill/nan_to_num calls.
        self.in_where: Dict[int, Tuple[ast.Call, ast.expr]] = {}
        self.sanitised: Set[int] = set()
        self._ops: Dict[int, Optional[OpCall]] = {}
        self.raw: List[Raw] = []
        self._reported: Set[Tuple[str, int]] = set()
        self.enabled: Set[str] = set()
        # State of the node being checked (set by the dispatcher).
        self.scope: Scope = self.module_scope
        self.nograd = False
        self._walk()

    # ------------------------------------------------------------------ walk
    def _walk(self) -> None:
        stack: List[Tuple[ast.AST, Scope, bool]] = [(self.tree, self.module_scope, False)]
        push = stack.append
        pop = stack.pop
        child_fields = _CHILD_FIELDS
        calls_append = self.calls.append
        Call, BinOp, Div, Pow = ast.Call, ast.BinOp, ast.Div, ast.Pow
        special = _SPECIAL
        while stack:
            node, scope, nograd = pop()
            kind = node.__class__
            if kind is Call:
                calls_append((node, scope, nograd))
                func = node.func
                if func.__class__ is ast.Attribute:
                    attr = func.attr
                    # `d.clamp_(min=1)`, `s.masked_fill_(m, -inf)`: in-place changes of a name.
                    if attr[-1] == "_" and attr[0] != "_":
                        key = _name_key(func.value)
                        if key is not None:
                            scope.mutations.setdefault(key, []).append(node)
                    elif attr == "any" or attr == "all":
                        key = _name_key(func.value)
                        if key is not None:
                            scope.zero_checked.add(key)
            elif kind is BinOp:
                op = node.op.__class__
                if op is Div:
                    self.divisions.append((node, scope, nograd))
                elif op is Pow:
                    self.powers.append((node, scope, nograd))
            elif kind in special:
                if self._special(node, kind, scope, nograd, push):
                    continue
            for name in child_fields.get(kind, ()):
                value = getattr(node, name)
                if value is None:
                    continue
                if value.__class__ is list:
                    for child in reversed(value):
                        if child is not None:
                            push((child, scope, nograd))
                else:
                    push((value, scope, nograd))

    def _special(self, node: ast.AST, kind: type, scope: Scope, nograd: bool, push: Callable) -> bool:
        """Bindings, scopes and no-grad regions. True when the children were pushed here."""
        if kind is ast.Assign:
            value = node.value  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                self._bind_target(target, value, scope)
            if len(node.targets) == 1:  # type: ignore[attr-defined]
                key = _name_key(node.targets[0])  # type: ignore[attr-defined]
                if key is not None:
                    self.assigned_to[id(value)] = key
        elif kind is ast.AugAssign:
            target = node.target  # type: ignore[attr-defined]
            key = _name_key(target)
            if key is not None:
                scope.bind(key, None)
            elif isinstance(target, ast.Subscript):
                key = _name_key(target.value)
                if key is not None:
                    scope.mutations.setdefault(key, []).append(node.value)  # type: ignore[attr-defined]
            if type(node.op) is ast.Div:  # type: ignore[attr-defined]
                self.divisions.append((node, scope, nograd))
        elif kind is ast.AnnAssign:
            self._bind_target(node.target, node.value, scope)  # type: ignore[attr-defined]
        elif kind is ast.NamedExpr:
            scope.bind(node.target.id, node.value)  # type: ignore[attr-defined]
        elif kind is ast.Compare:
            self._note_zero_check(node, scope)  # type: ignore[arg-type]
        elif kind is ast.For or kind is ast.AsyncFor:
            self._bind_target(node.target, None, scope)  # type: ignore[attr-defined]
        elif kind is ast.comprehension:
            self._bind_target(node.target, None, scope)  # type: ignore[attr-defined]
        elif kind is ast.ExceptHandler:
            if node.name:  # type: ignore[attr-defined]
                scope.bind(node.name, None)  # type: ignore[attr-defined]
        elif kind is ast.With or kind is ast.AsyncWith:
            inner = nograd
            for item in node.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, None, scope)
                if self._disables_grad(item.context_expr):
                    inner = True
                push((item.context_expr, scope, nograd))
            for stmt in reversed(node.body):  # type: ignore[attr-defined]
                push((stmt, scope, inner))
            return True
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.Lambda:
            self._function(node, kind, scope, nograd, push)
            return True
        elif kind is ast.ClassDef:
            scope.bind(node.name, None)  # type: ignore[attr-defined]
            for expr in node.decorator_list + node.bases + [k.value for k in node.keywords]:  # type: ignore
                push((expr, scope, nograd))
            inner_scope = Scope(node, scope)
            for stmt in reversed(node.body):  # type: ignore[attr-defined]
                push((stmt, inner_scope, nograd))
            return True
        elif kind is ast.Import or kind is ast.ImportFrom:
            self.imports.add(node, module_level=scope is self.module_scope)
            for alias in node.names:  # type: ignore[attr-defined]
                scope.bind((alias.asname or alias.name).split(".", 1)[0], None)
            return True
        elif kind is ast.Global or kind is ast.Nonlocal:
            for name in node.names:  # type: ignore[attr-defined]
                scope.bind(name, None)
            return True
        return False

    def _function(self, node: ast.AST, kind: type, scope: Scope, nograd: bool, push: Callable) -> None:
        if kind is not ast.Lambda:
            scope.bind(node.name, None)  # type: ignore[attr-defined]
            for deco in node.decorator_list:  # type: ignore[attr-defined]
                push((deco, scope, nograd))
        args = node.args  # type: ignore[attr-defined]
        for default in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            push((default, scope, nograd))
        inner_scope = Scope(node, scope)
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            inner_scope.bind(arg.arg, None)
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                inner_scope.bind(arg.arg, None)
        inner_nograd = nograd or (kind is not ast.Lambda and self._nograd_function(node))
        body = node.body  # type: ignore[attr-defined]
        if kind is ast.Lambda:
            push((body, inner_scope, inner_nograd))
        else:
            for stmt in reversed(body):
                push((stmt, inner_scope, inner_nograd))

    def _bind_target(self, target: ast.AST, value: Optional[ast.expr], scope: Scope) -> None:
        key = _name_key(target)
        if key is not None:
            scope.bind(key, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind_target(elt, None, scope)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None, scope)
        elif isinstance(target, ast.Subscript) and value is not None:
            key = _name_key(target.value)
            if key is not None:
                scope.mutations.setdefault(key, []).append(value)

    def _note_zero_check(self, node: ast.Compare, scope: Scope) -> None:
        operands = [node.left] + list(node.comparators)
        if not any(isinstance(o, ast.Constant) and o.value in _ZERO and not isinstance(o.value, bool)
                   for o in operands):
            return
        for o in operands:
            while isinstance(o, ast.Call) and isinstance(o.func, ast.Attribute) and not o.args:
                o = o.func.value  # `n.sum() == 0`, `n.min() > 0`
            key = _name_key(o)
            if key is not None:
                scope.zero_checked.add(key)

    def _disables_grad(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        qual = self._qual(expr.func)
        if qual is None:
            return False
        from nanguard.lint.names import QUALNAME_TO_OP
        op = QUALNAME_TO_OP.get(qual)
        if op == "no_grad":
            return True
        if op == "set_grad_enabled" and expr.args:
            arg = expr.args[0]
            return isinstance(arg, ast.Constant) and arg.value is False
        return False

    def _qual(self, expr: ast.expr) -> Optional[str]:
        # Imports are collected during the same walk, so a decorator may be seen before
        # a function-local import; module-level imports come first in practice.
        return self.imports.qualname(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None

    def _nograd_function(self, node: ast.AST) -> bool:
        for deco in node.decorator_list:  # type: ignore[attr-defined]
            target = deco.func if isinstance(deco, ast.Call) else deco
            qual = self._qual(target)
            if qual is not None:
                from nanguard.lint.names import QUALNAME_TO_OP
                if QUALNAME_TO_OP.get(qual) == "no_grad":
                    return True
        args = node.args.posonlyargs + node.args.args  # type: ignore[attr-defined]
        name = node.name  # type: ignore[attr-defined]
        # `def backward(ctx, grad)` of an autograd.Function, and `*_backward` functions
        # (decompositions of aten's backward ops), compute gradients rather than being
        # differentiated (double backward aside).
        if name == "backward" and bool(args) and args[0].arg == "ctx":
            return True
        return name.endswith("_backward")

    # ------------------------------------------------------------ helpers
    def op(self, expr: Optional[ast.AST]) -> Optional[OpCall]:
        """The recognised op of a call expression (memoised), else None."""
        if not isinstance(expr, ast.Call):
            return None
        key = id(expr)
        if key not in self._ops:
            self._ops[key] = function_op(self.imports, expr)
        return self._ops[key]

    def lookup(self, key: str, scope: Optional[Scope] = None) -> Tuple[Optional[Scope], List[Optional[ast.expr]]]:
        """The scope that binds `key` (innermost first) and its bindings there."""
        start = s = scope or self.scope
        while s is not None:
            # A class body's names are not visible from its methods (Python scoping).
            if key in s.bindings and (s is start or not isinstance(s.node, ast.ClassDef)):
                return s, s.bindings[key]
            s = s.parent
        return None, []

    def value_of(self, expr: ast.AST, scope: Optional[Scope] = None) -> Optional[ast.expr]:
        """The value of a name assigned exactly once (and never changed in place), else None."""
        key = _name_key(expr)
        if key is None:
            return None
        s, values = self.lookup(key, scope)
        if s is None or len(values) != 1 or values[0] is None or key in s.mutations:
            return None
        value = values[0]
        if value.lineno > expr.lineno:  # type: ignore[attr-defined]
            return None  # assigned after this use (a loop-carried value): unknown here
        return value

    def resolve(self, expr: ast.expr, scope: Optional[Scope] = None) -> ast.expr:
        """`expr`, or the single value assigned to it when it is such a name."""
        value = self.value_of(expr, scope)
        return value if value is not None else expr

    def zero_checked(self, expr: ast.AST, scope: Optional[Scope] = None) -> bool:
        key = _name_key(expr)
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

    def detached(self, expr: ast.AST) -> bool:
        """Is `expr` outside autograd: a `.detach()`/`.data`/`.item()` chain, or built only from
        variables whose last assignment before it is one, or whose names say they are
        targets/labels (which do not receive gradients)? Gradient-only hazards do not matter there.
        """
        if _is_detach_chain(expr):
            return True
        line = expr.lineno  # type: ignore[attr-defined]
        keys = []
        saw_detached = False
        stack = [expr]
        seen = 0
        while stack and seen < 100:
            n = stack.pop()
            seen += 1
            key = _name_key(n)
            if key is not None:
                if key not in self.imports.aliases:
                    keys.append(key)
                continue
            if _is_detach_chain(n):
                saw_detached = True
                continue  # this operand is detached; the others decide
            stack.extend(ast.iter_child_nodes(n))
        if not keys:
            return saw_detached
        for key in keys:
            if _LABEL_NAME.search(key.rsplit(".", 1)[-1]):
                continue
            _, values = self.lookup(key)
            prior = [v for v in values if v is not None and v.lineno < line]  # type: ignore[attr-defined]
            if not (prior and _is_detach_chain(prior[-1])):
                return False
        return True

    def report(self, rule: Rule, node: ast.AST, message: str, fix: Optional[FixBuilder] = None,
               hazard: Optional[str] = None, subject: Optional[ast.AST] = None) -> None:
        """Record a finding at `node`. `subject` is the expression whose gradient is at risk
        (for gradient hazards; default `node`): detached subjects are not reported."""
        if rule.code not in self.enabled:
            return
        if (hazard or rule.hazard) == GRADIENT and (self.nograd or self.detached(subject or node)):
            return
        key = (rule.code, id(node))
        if key in self._reported:
            return
        self._reported.add(key)
        self.raw.append(Raw(rule, node, message, fix))
