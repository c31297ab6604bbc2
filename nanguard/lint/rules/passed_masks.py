"""Where a mask comes from when the function did not make it: every value a name is given, and
every argument the module's own code passes for a parameter (NG701's exceptions, with
`kept_rows`).

A KV cache slices its causal buffer one way with a cache and another without
(`mask_bool = self.mask.bool()[pos:pos + q, :k]` or `[:q, :k]`): both keep a key in every row.
A decoder's attention takes `mask` as a parameter that its block passes on and the model builds
once (`mask = torch.triu(...)`, then `block(x, mask)` for each block of
`nn.ModuleList([TransformerBlock(cfg) ...])`, whose `forward` calls `self.att(x, mask)`): every
call the module makes passes a causal mask. A call that leaves it at its default None passes no
mask when the fill runs only `if mask is not None:` (EVA-CLIP's ViT never gives its blocks one).
A method other than `forward` is followed through its calls on instances
(`layer.forward_with_attention(x, y, mask)`). A parameter no call of this module fills (a
library layer's `attention_mask`) is the caller's, and stays a finding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from nanguard.lint.analysis import Analysis
from nanguard.lint.blocks import conditions_at
from nanguard.lint.scope import Scope
from nanguard.lint.syntax import bounded_walk, callee_name, parameter_default

KeepsRows = Callable[[Analysis, ast.expr, Scope, int], bool]


def every_value_keeps_rows(ctx: Analysis, name: ast.Name, scope: Scope, keeps: KeepsRows, depth: int = 3,
                           none_is_no_mask: bool = False) -> bool:
    """Does every value `name` can hold keep an entry in every row: each of its assignments in
    its scope, or, for a parameter, each argument this module passes for it? With
    `none_is_no_mask` (the fill runs only `if mask is not None`), a call that leaves a parameter
    at its default None passes no mask, which keeps every row."""
    if depth <= 0:
        return False
    owner, values = ctx.lookup(name.id, scope)
    if owner is None or not values or name.id in owner.mutations or name.id in owner.augmented:
        return False
    if all(v is not None for v in values):
        # `mask = mask[None, None, :, :]` reshapes the values before it, which are checked
        made = [v for v in values if not _reshaped(v, name.id)]  # type: ignore[arg-type]
        return bool(made) and all(keeps(ctx, v, owner, depth - 1) for v in made)
    if all(v is None for v in values) and _image_padding(owner, name.id):
        return True
    made = [v for v in values if v is not None and not _reshaped(v, name.id)]
    if values.count(None) == 1 and made and isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if none_is_no_mask and all(under_none_test(ctx, owner.node, v, name.id, ast.IsNot) for v in made):
            # `if mask is not None: mask = F.pad(...)`: built only from a mask given; none is
            return _passed_for(ctx, owner, name.id, _given_nothing, depth, True)
        if all(under_none_test(ctx, owner.node, v, name.id, ast.Is) for v in made) \
                and all(keeps(ctx, v, owner, depth - 1) for v in made):
            # `if attn_mask is None: attn_mask = TriangularCausalMask(B, L)`: None stands for that mask
            return _passed_for(ctx, owner, name.id, keeps, depth, True)
    # a parameter, perhaps reshaped in place (`attn_mask = attn_mask.bool()`): what callers pass
    if values.count(None) != 1 or not all(v is None or _reshaped(v, name.id) for v in values) \
            or not isinstance(owner.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return _passed_for(ctx, owner, name.id, keeps, depth, none_is_no_mask)


def _image_padding(owner: Scope, name: str) -> bool:
    """`src, mask = features[-1].decompose()` (DETR's NestedTensor): the padding mask of a batch of
    images, True only where an image was padded, so never over a whole image."""
    calls = owner.unpacked.get(name, ())
    return bool(calls) and all(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                               and c.func.attr == "decompose" and not c.args for c in calls)


_RESHAPES = frozenset({"bool", "to", "unsqueeze", "view", "reshape", "expand", "float", "type_as", "contiguous"})


def _reshaped(value: ast.expr, name: str) -> bool:
    """`name[None, None, :, :]`, `name.unsqueeze(0)`, `name.to(device)`: the same rows and
    columns (a column slice from 1 on would drop the key every row keeps: not this)."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == name:
        parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        return all((isinstance(p, ast.Constant) and p.value is None)
                   or (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None)
                   for p in parts)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _RESHAPES:
        inner = value.func.value
        return (isinstance(inner, ast.Name) and inner.id == name) or _reshaped(inner, name)
    return False


def _passed_for(ctx: Analysis, owner: Scope, param: str, keeps: KeepsRows, depth: int, none_is_no_mask: bool) -> bool:
    func = owner.node
    params = [a.arg for a in func.args.posonlyargs + func.args.args]  # type: ignore[attr-defined]
    if param not in params:
        return False  # keyword-only or *args: not followed
    enclosing = owner.parent
    method = enclosing is not None and isinstance(enclosing.node, ast.ClassDef)
    if method:
        params = params[1:]
    if param not in params:
        return False
    index = params.index(param)
    owner_name, method_name = _callee_of(owner)
    passed: list[tuple[ast.expr, Scope]] = []
    omitted = False
    required = params[:len(params) - len(func.args.defaults)]  # type: ignore[attr-defined]
    for call, scope, _nograd in ctx.calls:
        if not _calls(ctx, call, scope, owner_name, method_name):
            continue
        if len(call.args) < len(required) and not any(isinstance(a, ast.Starred) for a in call.args) \
                and not {k.arg for k in call.keywords} >= set(required[len(call.args):]):
            continue  # too few arguments for this function: a call of a module that wraps it
        arg = next((k.value for k in call.keywords if k.arg == param), None)
        if arg is None and len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            arg = call.args[index]
        if none_is_no_mask and isinstance(arg, ast.Constant) and arg.value is None:
            omitted = True  # `attn_mask=None` passed explicitly
            continue
        if arg is None and any(k.arg is None for k in call.keywords):
            if all(k.arg is not None or _forwarded(scope, k.value) for k in call.keywords):
                continue  # a wrapper's `self.fn(x, **kwargs)`: its own callers' arguments, read there
            return False  # `f(x, **options)`: the mask may be in there
        if arg is None:
            if none_is_no_mask and _defaults_to_none(func, param):
                omitted = True  # the default: no mask, and the fill is skipped for None
                continue
            return False
        passed.append((arg, scope))
    if not passed and not omitted:
        return False
    return all(every_value_keeps_rows(ctx, a, s, keeps, depth - 1, none_is_no_mask) if isinstance(a, ast.Name)
               else keeps(ctx, a, s, depth - 1) for a, s in passed)


def under_none_test(ctx: Analysis, root: ast.AST, value: ast.expr, name: str, op: type) -> bool:
    """Is `value` (an assignment's value, a fill's mask) inside `if name is None:` (`op` Is) or
    `if name is not None:` (`op` IsNot), in the body of that `if`?"""
    return any(holds and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
               and len(test.ops) == 1 and isinstance(test.ops[0], op) and isinstance(test.comparators[0], ast.Constant)
               and test.comparators[0].value is None
               for test, holds in conditions_at(ctx, root, value.lineno))  # type: ignore[attr-defined]


def _forwarded(scope: Scope, value: ast.expr) -> bool:
    """Is `value` the `**kwargs` parameter of the function `scope` is (passed on unchanged)?"""
    kwarg = getattr(getattr(scope.node, "args", None), "kwarg", None)
    return kwarg is not None and isinstance(value, ast.Name) and value.id == kwarg.arg \
        and value.id not in scope.mutations and scope.bindings.get(value.id, [None]) == [None]


def _given_nothing(ctx: Analysis, expr: ast.expr, scope: Scope, depth: int) -> bool:
    return False  # any mask actually given may be empty in a row


def _defaults_to_none(func: ast.AST, param: str) -> bool:
    default = parameter_default(func, param)
    return isinstance(default, ast.Constant) and default.value is None


def _callee_of(owner: Scope) -> tuple[str, str | None]:
    """How calls name the function of scope `owner`: (its name, None), or (its class, the method)."""
    func, enclosing = owner.node, owner.parent
    if enclosing is not None and isinstance(enclosing.node, ast.ClassDef):
        return enclosing.node.name, func.name  # type: ignore[attr-defined]
    return func.name, None  # type: ignore[attr-defined]


def called_in_module(ctx: Analysis, owner: Scope) -> bool:
    """Does any code of this module call the function (or method) of scope `owner`?"""
    name, method = _callee_of(owner)
    return any(_calls(ctx, call, scope, name, method) for call, scope, _nograd in ctx.calls)


def _calls(ctx: Analysis, call: ast.Call, scope: Scope, owner: str, method: str | None) -> bool:
    """Is `call` a call of the function `owner`, or of the method `method` of an instance of the
    class `owner` (`att(x)` for `forward`, `layer.forward_with_attention(x)` for another)?"""
    func = call.func
    if method is None:
        return isinstance(func, ast.Name) and func.id == owner
    if method in ("forward", "__call__"):
        return _instance_of(ctx, func, scope, owner, 3)
    return isinstance(func, ast.Attribute) and func.attr == method and _instance_of(ctx, func.value, scope, owner, 3)


def _instance_of(ctx: Analysis, expr: ast.expr, scope: Scope, cls: str, depth: int) -> bool:
    """`self.att` (`self.att = GroupedQueryAttention(...)`), `block` of `for block in self.blocks`
    (`nn.ModuleList([TransformerBlock(cfg) ...])`), `self.layers[i]`: built by `cls(...)`."""
    if depth <= 0:
        return False
    if isinstance(expr, ast.Subscript):
        return _instance_of(ctx, expr.value, scope, cls, depth - 1)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
        values = _assigned_in_class(ctx, scope, expr.attr)
        return any(_builds(v, cls) or (isinstance(v, ast.Name) and _injected(ctx, scope, v.id, cls)) for v in values)
    if isinstance(expr, ast.Name):
        _owner, values = ctx.lookup(expr.id, scope)
        if any(v is not None and (_builds(v, cls) or _instance_of(ctx, v, scope, cls, depth - 1)) for v in values):
            return True
        return any(_instance_of(ctx, iterated, scope, cls, depth - 1)
                   for iterated in _loops_of(ctx, scope).get(expr.id, ()))
    return False


def _injected(ctx: Analysis, scope: Scope, param: str, cls: str) -> bool:
    """`self.attention = attention` in `__init__`, and the module builds the class with a `cls(...)`
    for that parameter (`EncoderLayer(AttentionLayer(FullAttention(...)))`)."""
    s: Scope | None = scope
    while s is not None and not isinstance(s.node, ast.ClassDef):
        s = s.parent
    init = next((f for f in s.node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None) \
        if s is not None else None
    if init is None:
        return False
    params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    for call, _scope, _nograd in ctx.calls:
        if callee_name(call.func) != s.node.name:  # type: ignore[union-attr]
            continue
        bound = next((k.value for k in call.keywords if k.arg == param), None)
        if bound is None and param in params and params.index(param) < len(call.args):
            bound = call.args[params.index(param)]
        if bound is not None and _builds(bound, cls):
            return True
    return False


def _loops_of(ctx: Analysis, scope: Scope) -> dict[str, list[ast.expr]]:
    """name -> what the `for` loops of `scope` run it over (read once per scope)."""
    table = ctx.memo.setdefault("loop_sources_by_scope", {})
    found = table.get(id(scope.node))
    if found is None:
        found = table[id(scope.node)] = {}
        for n in bounded_walk(scope.node, 4000):
            if isinstance(n, (ast.For, ast.AsyncFor)):
                targets = n.target.elts if isinstance(n.target, ast.Tuple) else [n.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        iterated = _loop_source(n.target, n.iter, target.id)
                        if iterated is not None:
                            found.setdefault(target.id, []).append(iterated)
    return found


def _loop_source(target: ast.expr, iterated: ast.expr, name: str) -> ast.expr | None:
    """What `name` runs over: `for block in X` and `for i, block in enumerate(X)` -> X."""
    if isinstance(target, ast.Name) and target.id == name:
        return iterated
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name) \
            and target.elts[1].id == name and isinstance(iterated, ast.Call) \
            and callee_name(iterated.func) == "enumerate" and iterated.args:
        return iterated.args[0]
    if isinstance(target, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in target.elts) \
            and not (isinstance(iterated, ast.Call) and callee_name(iterated.func) in ("enumerate", "zip")):
        return iterated  # `for attn, ff in self.layers`: one of the modules each entry holds
    return None


def _assigned_in_class(ctx: Analysis, scope: Scope, attr: str) -> list[ast.expr]:
    """The values `self.<attr> = ...` assigns in the class whose method `scope` is (another
    class's `self.att` is another attention)."""
    s: Scope | None = scope
    while s is not None and not isinstance(s.node, ast.ClassDef):
        s = s.parent
    if s is None:
        return []
    table = ctx.memo.setdefault("self_assigned_by_class", {})
    found = table.get(id(s.node))
    if found is None:
        found = table[id(s.node)] = {}
        for node in bounded_walk(s.node, 20000):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        found.setdefault(t.attr, []).append(node.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "extend") and node.args:
                owner = node.func.value  # `self.layers.append(nn.ModuleList([Attention(dim), ...]))`
                if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self":
                    found.setdefault(owner.attr, []).append(node.args[0])
                elif isinstance(owner, ast.Name):  # `layers.append(TransformerLayer(...))`, then `nn.ModuleList(layers)`
                    found.setdefault("local:" + owner.id, []).append(node.args[0])
    values = found.get(attr, [])
    return values + [a for v in values for n in bounded_walk(v, 20) if isinstance(n, ast.Name)
                     for a in found.get("local:" + n.id, [])]


def _builds(value: ast.expr, cls: str) -> bool:
    return any(isinstance(n, ast.Call) and callee_name(n.func) == cls for n in bounded_walk(value, 60))
