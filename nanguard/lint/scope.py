"""The data of the walk: scopes and their bindings, raw findings, and AST shape tables.

`Scope` records what one function, lambda, class or module body binds, changes in place
and compares with zero; `name_key` is how names are spelled as keys (``x``, ``self.x``);
`is_detach_chain` tells a value that autograd never sees.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from nanguard.lint.model import Fix, Rule
from nanguard.lint.source import SourceText

FixBuilder = Callable[[SourceText], Fix | None]

ZERO = (0, 0.0)


# Fields that can hold child nodes, per node class. Identifier fields, operators and
# expression contexts are left out: the rules read `node.op` directly and never need to
# visit an `ast.Load`, which makes the walk about twice as fast as `ast.iter_child_nodes`.
_NOT_CHILDREN = frozenset({"ctx", "id", "arg", "attr", "name", "module", "level", "kind", "conversion",
                           "is_async", "type_comment", "op", "ops", "type_ignores", "tag", "kwd_attrs",
                           "names", "asname"})


def _child_fields() -> dict[type, tuple[str, ...]]:
    table: dict[type, tuple[str, ...]] = {}
    for obj in vars(ast).values():
        if isinstance(obj, type) and issubclass(obj, ast.AST) and obj._fields:
            table[obj] = tuple(f for f in obj._fields if f not in _NOT_CHILDREN)
    table[ast.Constant] = ()
    table[ast.Import] = table[ast.ImportFrom] = table[ast.Global] = table[ast.Nonlocal] = ()
    return table


CHILD_FIELDS = _child_fields()
SPECIAL = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.Compare, ast.For,
                      ast.AsyncFor, ast.comprehension, ast.ExceptHandler, ast.With, ast.AsyncWith,
                      ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Import,
                      ast.ImportFrom, ast.Global, ast.Nonlocal, ast.IfExp, ast.If, ast.While, ast.Assert,
                      ast.Raise})


class Scope:
    """Bindings and guards of one function, lambda, class or module body."""

    __slots__ = ("augmented", "bindings", "checked_exprs", "mutations", "node", "parent", "range_bound",
                 "tested_comparisons", "tuple_bound", "unpacked", "zero_checked")

    def __init__(self, node: ast.AST, parent: Scope | None) -> None:
        self.node = node
        self.parent = parent
        # name -> assigned values in source order; None stands for a binding whose value
        # is unknown (a parameter, a loop target, an augmented assignment, an import).
        self.bindings: dict[str, list[ast.expr | None]] = {}
        # name -> in-place changes: the value of `name[...] = value`, or the call `name.op_(...)`.
        self.mutations: dict[str, list[ast.AST]] = {}
        # names (or `self.x` spellings) compared with 0 or tested with .any()/.all() somewhere.
        self.zero_checked: set[str] = set()
        # `ast.dump` of calls compared with 0 (`if torch.sum(m.view(-1), dim=0) == 0:`).
        self.checked_exprs: set[str] = set()
        # names whose comparison is tested whole with any/all (`torch.all(targets == ignore)`).
        self.tested_comparisons: set[str] = set()
        # name -> its augmented assignments (`n += eps`, `lw -= lw.max()`), in source order.
        self.augmented: dict[str, list[ast.AugAssign]] = {}
        # name -> calls it was unpacked from (`v, _ = torch.topk(logits, k)`).
        self.unpacked: dict[str, list[ast.expr]] = {}
        # name -> for each tuple assignment binding it, the tensor whose `.shape` it unpacks
        # (`n, c = x.shape`: x), or None for any other value.
        self.tuple_bound: dict[str, list[ast.expr | None]] = {}
        # name -> how many times it is the target of `for name in range(...)` (a Python int).
        self.range_bound: dict[str, int] = {}

    def bind(self, name: str, value: ast.expr | None) -> None:
        self.bindings.setdefault(name, []).append(value)


class Raw:
    """A finding before positions and noqa are worked out; ``hazard`` is the catalogue key
    of the hazard its message words."""

    __slots__ = ("confidence", "fix", "hazard", "message", "node", "root", "rule", "scope")

    def __init__(self, rule: Rule, node: ast.AST, message: str, fix: FixBuilder | None,
                 hazard: str | None = None, scope: Scope | None = None, confidence: str = "",
                 root: ast.AST | None = None) -> None:
        self.root = root  # the op that causes it, when that is not `node` (a where's singular branch op)
        self.scope = scope
        self.confidence = confidence
        self.rule = rule
        self.node = node
        self.message = message
        self.fix = fix
        self.hazard = hazard


def name_key(expr: ast.AST) -> str | None:
    """'x' for a Name, 'self.x' for an attribute of self; None otherwise."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        return "self." + expr.attr
    return None


_LABEL_NAME = re.compile(r"(^|_)(targets?|labels?|gt|truth|ground_truth|y_true)(_|$)", re.IGNORECASE)


def is_detach_chain(expr: ast.AST) -> bool:
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
