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

`nanguard.lint.analysis.Analysis` adds the queries the rules ask of the result.
"""

from __future__ import annotations

import ast
from typing import Any
from collections.abc import Callable

from nanguard.lint.names import QUALNAME_TO_OP, ImportMap, OpCall
from nanguard.lint.scope import CHILD_FIELDS, SPECIAL, ZERO, Raw, Scope, name_key
from nanguard.lint.syntax import NAN_TESTS, spelled_out_call


# Comparisons spelled as calls (TensorFlow's function forms, torch.gt): tested against 0 they
# are a zero check like `n > 0`.
_COMPARISON_CALLS = frozenset({"greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
                               "gt", "ge", "lt", "le", "eq", "ne", "isclose"})
# Reductions whose comparison with 0 tests their one argument: `np.sum(gt_mask) == 0` tests gt_mask.
_COUNTING_CALLS = frozenset({"sum", "count_nonzero", "reduce_sum"})


def _record_whole_test(scope: Scope, subjects: tuple) -> None:
    """Note what an `any`/`all` tests as a whole: the names of a comparison (`torch.all(targets ==
    ignore_index)` tests the mask `targets != ignore_index`), the tensor a NaN test reads
    (`np.isnan(scores).all()` tests `~np.isnan(scores)`), or a name itself (`mask.any()`)."""
    for subject in subjects:
        if isinstance(subject, ast.Compare):
            for part in [subject.left, *subject.comparators]:
                key = name_key(part)
                if key is not None:
                    scope.tested_comparisons.add(key)
            continue
        if isinstance(subject, ast.Call) and subject.args and \
                getattr(subject.func, "attr", getattr(subject.func, "id", "")) in NAN_TESTS:
            key = name_key(subject.args[0])
            if key is not None:
                scope.tested_comparisons.add(key)
            continue
        key = name_key(subject) if subject is not None else None
        if key is not None:
            scope.zero_checked.add(key)


def _zero_threshold(value: object) -> bool:
    """Does comparing a count with `value` tell 0 apart: 0 itself, or a threshold in (0, 1]
    (`if torch.sum(mask) < 0.5: continue`, `if n >= 1:`), which no count between 0 and 1 has."""
    return value in ZERO or (type(value) in (int, float) and 0 < value <= 1)  # type: ignore[operator]


class Walk:
    """The module's scopes and candidate nodes, collected in one walk of the tree."""

    def __init__(self, tree: ast.Module, imports: ImportMap) -> None:
        self.tree = tree
        self.imports = imports
        self.module_scope = Scope(tree, None)
        self.calls: list[tuple[ast.Call, Scope, bool]] = []
        self.divisions: list[tuple[ast.AST, Scope, bool]] = []
        self.powers: list[tuple[ast.BinOp, Scope, bool]] = []
        # id(value) -> the name it is assigned to, for "is this result fixed up later?".
        self.assigned_to: dict[int, str] = {}
        # Set by the pre-pass over where/masked_fill/nan_to_num calls.
        self.in_where: dict[int, tuple[ast.Call, ast.expr]] = {}
        # every select (where/masked_fill) whose branch holds the node, outermost last
        self.selected_by: dict[int, list[tuple[ast.Call, ast.expr]]] = {}
        self.sanitised: set[int] = set()
        # Nodes whose value leaves autograd right away (`(...).item()`, `tf.stop_gradient(...)`).
        self.detached_results: set[int] = set()
        self.mutation_index: dict[int, ast.AST] = {}
        # attribute -> the values `self.<attribute> = ...` assigns anywhere in the module
        self.self_assigned: dict[str, list[ast.expr]] = {}
        # id(function, lambda or class node) -> its Scope.
        self.scope_of: dict[int, Scope] = {}
        self._ops: dict[int, OpCall | None] = {}
        self._defs: dict[str, ast.AST] | None = None
        self.memo: dict[str, Any] = {}  # per-file facts a rule computes once (keyed by the rule)
        self.raw: list[Raw] = []
        self._reported: set[tuple[str, int]] = set()
        # name -> how many module-level imports bind it (fixes write only names bound by imports alone).
        self.import_bindings: dict[str, int] = {}
        self.path = "<string>"
        self.enabled: set[str] = set()
        self.possible: frozenset[str] = frozenset()  # codes whose POSSIBLE findings are reported
        # State of the node being checked (set by the dispatcher).
        self.scope: Scope = self.module_scope
        self.nograd = False
        self._walk()

    def _walk(self) -> None:
        stack: list[tuple[ast.AST, Scope, bool]] = [(self.tree, self.module_scope, False)]
        push = stack.append
        pop = stack.pop
        child_fields = CHILD_FIELDS
        calls_append = self.calls.append
        Call, BinOp, Div, Pow = ast.Call, ast.BinOp, ast.Div, ast.Pow
        special = SPECIAL
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
                        key = name_key(func.value)
                        if key is not None:
                            scope.mutations.setdefault(key, []).append(node)
                    elif attr == "any" or attr == "all" or attr == "reduce_any" or attr == "reduce_all":
                        # `m.any()`, and the function forms `torch.any(m)`, `keras.ops.any(m)`
                        _record_whole_test(scope, (func.value, node.args[0] if node.args else None))
                    elif attr in _COMPARISON_CALLS and len(node.args) == 2:
                        # `tf.Assert(tf.reduce_all(tf.greater(num_matches, 0)), ...)`, `torch.gt(n, 0)`
                        left, right = node.args
                        for subject, other in ((left, right), (right, left)):
                            if isinstance(other, ast.Constant) and other.value in ZERO \
                                    and not isinstance(other.value, bool):
                                self._note_checked(subject, scope)
                elif func.__class__ is ast.Name and (func.id == "any" or func.id == "all") and len(node.args) == 1 \
                        and func.id not in self.imports.aliases:
                    _record_whole_test(scope, (node.args[0],))  # the builtin: `if any(mask_): ...`
            elif kind is BinOp:
                op = node.op.__class__
                if op is Div:
                    self.divisions.append((node, scope, nograd))
                elif op is Pow:
                    self.powers.append((node, scope, nograd))
            elif kind in special and self._special(node, kind, scope, nograd, push):
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
                if target.__class__ is ast.Attribute and target.value.__class__ is ast.Name \
                        and target.value.id == "self":
                    self.self_assigned.setdefault(target.attr, []).append(value)  # `self.sm = nn.Softmax(1)`
                if target.__class__ is ast.Tuple:
                    shape_of = value.value if value.__class__ is ast.Attribute and value.attr == "shape" else None
                    for elt in target.elts:
                        key = name_key(elt)
                        if key is not None:
                            scope.tuple_bound.setdefault(key, []).append(shape_of)
                            if value.__class__ is ast.Call:
                                scope.unpacked.setdefault(key, []).append(value)
            if len(node.targets) == 1:  # type: ignore[attr-defined]
                key = name_key(node.targets[0])  # type: ignore[attr-defined]
                if key is not None:
                    self.assigned_to[id(value)] = key
        elif kind is ast.AugAssign:
            target = node.target  # type: ignore[attr-defined]
            key = name_key(target)
            if key is not None:
                scope.bind(key, None)
                scope.augmented.setdefault(key, []).append(node)  # type: ignore[arg-type]
            elif isinstance(target, ast.Subscript):
                key = name_key(target.value)
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
        elif kind is ast.IfExp or kind is ast.If or kind is ast.While:
            test = node.test  # type: ignore[attr-defined]
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test = test.operand
            key = name_key(test)
            if key is not None:
                scope.zero_checked.add(key)  # `a / n if n else 0.0`: a truth test is a test against 0
        elif kind is ast.For or kind is ast.AsyncFor or kind is ast.comprehension:
            self._bind_target(node.target, None, scope)  # type: ignore[attr-defined]
            loop_iter, target = node.iter, node.target  # type: ignore[attr-defined]
            if target.__class__ is ast.Name and loop_iter.__class__ is ast.Call and loop_iter.func.__class__ is ast.Name \
                    and loop_iter.func.id == "range" and "range" not in self.imports.aliases:
                scope.range_bound[target.id] = scope.range_bound.get(target.id, 0) + 1
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
            self.scope_of[id(node)] = inner_scope
            for stmt in reversed(node.body):  # type: ignore[attr-defined]
                push((stmt, inner_scope, nograd))
            return True
        elif kind is ast.Import or kind is ast.ImportFrom:
            self.imports.add(node, module_level=scope is self.module_scope)
            for alias in node.names:  # type: ignore[attr-defined]
                bound = (alias.asname or alias.name).split(".", 1)[0]
                scope.bind(bound, None)
                if scope is self.module_scope:
                    self.import_bindings[bound] = self.import_bindings.get(bound, 0) + 1
            return True
        elif kind is ast.Global or kind is ast.Nonlocal:
            for name in node.names:  # type: ignore[attr-defined]
                scope.bind(name, None)
            return True
        elif kind is ast.Assert or kind is ast.Raise:
            # an assertion's message and a raised exception are only shown: never differentiated
            shown = [node.msg] if kind is ast.Assert else [node.exc, node.cause]  # type: ignore[attr-defined]
            for part in shown:
                if part is not None:
                    push((part, scope, True))
            if kind is ast.Assert:
                push((node.test, scope, nograd))  # type: ignore[attr-defined]
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
        self.scope_of[id(node)] = inner_scope
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

    def _bind_target(self, target: ast.AST, value: ast.expr | None, scope: Scope) -> None:
        key = name_key(target)
        if key is not None:
            scope.bind(key, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            # `n, m = 0, 0`: literal numbers element by element (a counter's start). Other tuples stay
            # unknown: their branches (`y, z = y.softmax(), z.softmax()` in one `if`, `.exp()` in
            # the other) would read as guards of every use.
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)  # type: ignore[union-attr]
            for i, elt in enumerate(target.elts):
                part = value.elts[i] if pairs else None  # type: ignore[union-attr]
                self._bind_target(elt, part if isinstance(part, ast.Constant) else None, scope)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None, scope)
        elif isinstance(target, ast.Subscript) and value is not None:
            key = name_key(target.value)
            if key is not None:
                scope.mutations.setdefault(key, []).append(value)
                self.mutation_index[id(value)] = target.slice  # `logits[logits < v[:, [-1]]] = -inf`

    def _note_zero_check(self, node: ast.Compare, scope: Scope) -> None:
        operands = [node.left] + list(node.comparators)
        size_check = len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.LtE)) \
            and isinstance(node.comparators[0], ast.Constant) and type(node.comparators[0].value) is int \
            and node.comparators[0].value >= 1  # `if n_members < 2: raise ...`, `if mask.sum() < 2: return`
        if not size_check and not any(isinstance(o, ast.Constant) and not isinstance(o.value, bool)
                                      and _zero_threshold(o.value) for o in operands):
            return
        for o in operands:
            self._note_checked(o, scope)

    def _note_checked(self, o: ast.expr, scope: Scope) -> None:
        """Record that `o`, a count, is compared with 0 (or a threshold that tells 0 apart)."""
        if isinstance(o, ast.Call) and spelled_out_call(o):
            # `if torch.sum(m.view(-1), dim=0) == 0:`, `if (gt_ids == i).sum() == 0:`
            scope.checked_exprs.add(ast.dump(o))
            func = o.func
            if isinstance(func, ast.Attribute) and func.attr in _COUNTING_CALLS and len(o.args) == 1 \
                    and not o.keywords and self.imports.qualname(func) is not None:
                o = o.args[0]  # `np.isclose(np.sum(gt_mask), 0)`: gt_mask's count
        while isinstance(o, ast.Call) and isinstance(o.func, ast.Attribute) and not o.args:
            o = o.func.value  # `n.sum() == 0`, `n.min() > 0`
        key = name_key(o)
        if key is not None:
            scope.zero_checked.add(key)

    def _disables_grad(self, expr: ast.expr) -> bool:
        if not isinstance(expr, ast.Call):
            return False
        qual = self._qual(expr.func)
        if qual is None:
            return False
        op = QUALNAME_TO_OP.get(qual)
        if op == "no_grad":
            return True
        if op == "set_grad_enabled" and expr.args:
            arg = expr.args[0]
            return isinstance(arg, ast.Constant) and arg.value is False
        return False

    def _qual(self, expr: ast.expr) -> str | None:
        # Imports are collected during the same walk, so a decorator may be seen before
        # a function-local import; module-level imports come first in practice.
        return self.imports.qualname(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None

    def _nograd_decorator(self, deco: ast.expr) -> bool:
        """`@torch.no_grad()`, `@torch.inference_mode()`."""
        target = deco.func if isinstance(deco, ast.Call) else deco
        qual = self._qual(target)
        return qual is not None and QUALNAME_TO_OP.get(qual) == "no_grad"

    def _nograd_function(self, node: ast.AST) -> bool:
        if any(self._nograd_decorator(d) for d in node.decorator_list):  # type: ignore[attr-defined]
            return True
        args = node.args.posonlyargs + node.args.args  # type: ignore[attr-defined]
        name = node.name  # type: ignore[attr-defined]
        # `def backward(ctx, grad)` of an autograd.Function, and `*_backward` functions
        # (decompositions of aten's backward ops), compute gradients rather than being
        # differentiated (double backward aside).
        if name == "backward" and bool(args) and args[0].arg == "ctx":
            return True
        # `__init__` builds parameters and constant buffers (`log(posterior_variance.clamp(1e-20))`,
        # computed once): nothing there is differentiated.
        if name == "__init__":
            return True
        return name.endswith("_backward")
