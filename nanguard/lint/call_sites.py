"""How the module calls a function: the calls, and what each binds to a parameter.

A private or nested function is called only from its module, so its calls say what its
parameters hold (`hz_to_mel(torch.tensor(...))`: no gradient); a method's calls from its own
class (`self.edge_model(x[row], x[col], ...)`: positions gathered along a graph's edges) are
evidence of the same kind for a public one. `Autodiff` builds the index these read.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from nanguard.lint.autodiff_markers import FUNCS, scalar_annotation
from nanguard.lint.syntax import parameter_default

if TYPE_CHECKING:  # pragma: no cover
    from nanguard.lint.analysis import Analysis


class CallSites:
    """The call-site questions of `Autodiff`, a mixin: `Autodiff` provides `ctx`, `owner`, the
    index of uses (`_uses`, `_site`) and `_public`/`_class_of`."""

    ctx: Analysis
    owner: dict[int, tuple[str, ast.AST | None]]
    _param_memo: dict[tuple[int, str], bool]

    def calls_of(self, fn: ast.AST) -> list[tuple[ast.Call, ast.AST | None]]:
        """Every use of the private or nested function `fn` in the module as (call, innermost
        enclosing function or None at module level); [] when it is public (other modules may
        call it), unused, or used other than by a direct call (passed along, returned)."""
        if self._public(fn):
            return []
        out: list[tuple[ast.Call, ast.AST | None]] = []
        for ref in self._uses(fn):
            if ref.role != "call" or ref.call is None or any(isinstance(f, ast.Lambda) for f in ref.chain):
                return []
            out.append((ref.call, ref.chain[-1] if ref.chain else None))
        return out

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
        arg = next((a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg == param), None)
        if arg is None:
            return False  # *args, **kwargs
        if scalar_annotation(arg.annotation):
            return True
        if isinstance(fn, ast.Lambda) or not isinstance(fn, FUNCS) or self._public(fn):
            return False
        refs = self._uses(fn)
        if not refs:
            return False
        for ref in refs:
            if self._site(ref) > 0:
                continue
            if ref.role != "call" or ref.call is None:
                return False
            bound = self.bound_argument(fn, ref.call, param)
            if bound is None or not self._gradient_free_at(bound, ref):
                return False
        return True

    def bound_argument(self, fn: ast.AST, call: ast.Call, param: str) -> ast.expr | None:
        """The expression `call` binds to parameter `param` of `fn` (its default when the call
        leaves it out); None when unknown (`*args`, `**kw`, missing)."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        kw = next((k.value for k in call.keywords if k.arg == param), None)
        if kw is not None:
            return kw
        args = fn.args  # type: ignore[attr-defined]
        positional = args.posonlyargs + args.args
        index = next((i for i, a in enumerate(positional) if a.arg == param), None)
        if index is not None:
            where, _ = self.owner.get(id(fn), ("module", None))
            i = index - (1 if where == "class" and isinstance(call.func, ast.Attribute) else 0)
            if 0 <= i < len(call.args):
                return call.args[i]
        return parameter_default(fn, param)

    def calls_in_module(self, fn: ast.AST) -> list[tuple[ast.Call, ast.AST | None]]:
        """Every use of `fn` in the module as (call, innermost enclosing function), public or
        not ([] when a use is not a direct call): evidence of how the module itself calls it."""
        out: list[tuple[ast.Call, ast.AST | None]] = []
        family = self._class_family(fn)
        for ref in self._uses(fn):
            if family and not (ref.chain and getattr(self._class_of(ref.chain[0]), "name", None) in family):
                continue  # a method: the calls of its class and its bases (`self.edge_model(...)`)
            if ref.role != "call" or ref.call is None or any(isinstance(f, ast.Lambda) for f in ref.chain):
                return []
            out.append((ref.call, ref.chain[-1] if ref.chain else None))
        return out

    def _gradient_free_at(self, expr: ast.expr, ref: Any) -> bool:
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

    def _class_family(self, fn: ast.AST) -> set[str]:
        """The names of `fn`'s class and of its bases defined in this module (a base's
        `forward` calls the subclass's `self.edge_model(...)`); empty for a function."""
        cls = self._class_of(fn)
        if cls is None:
            return set()
        classes = self.ctx.memo.get("classes_by_name")
        if classes is None:
            classes = self.ctx.memo["classes_by_name"] = {
                n.name: n for n in ast.walk(self.ctx.tree) if isinstance(n, ast.ClassDef)}
        family: set[str] = set()
        while cls is not None and cls.name not in family:
            family.add(cls.name)
            cls = next((classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in classes), None)
        return family
