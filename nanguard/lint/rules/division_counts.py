"""Masks and counters that count at least one by construction (NG401's exceptions).

A division by a mask's count is a risk because the mask can select nothing. These shapes
cannot: a row's maximum equals itself, an index matches itself in its transposed copy, a
dataset split holds examples, a block of ones is concatenated in, sparsemax's support holds
the largest entry, a loop counter starts at 1, a game's legal actions, every axis of a
one-hot, a tensor compared with its own distinct values, the steps an episode batch stored,
an identity matrix's diagonal.
And a ratio written only to the entries its count counts lands nowhere when the count is 0.
"""

from __future__ import annotations

import ast
import re

from nanguard.lint.analysis import Analysis
from nanguard.lint.names import OpCall
from nanguard.lint.patterns import held_at, positions_from_zero, source_of, strip_wrappers
from nanguard.lint.scope import name_key
from nanguard.lint.rules.self_matches import counts_row_maxima, matches_itself
from nanguard.lint.syntax import callee_name, bounded_walk, const_value


def counts_at_least_one(ctx: Analysis, mask: ast.expr, split_only: bool = False) -> bool:
    """Does `mask` select at least one entry (per row) by construction?"""
    if split_only:
        return _split_mask(ctx, mask)
    return counts_row_maxima(ctx, mask) or _split_mask(ctx, mask) or matches_itself(ctx, mask) \
        or holds_a_ones_block(ctx, mask) or _sparsemax_support(ctx, mask) or _support_of_a_distribution(ctx, mask) \
        or _legal_actions(ctx, mask) or _positions_up_to_a_count(ctx, mask) or _one_of_its_values(ctx, mask) \
        or _stored_steps(ctx, mask) or _identity(ctx, mask)


def _from_step(index: ast.AST | None, first: int) -> bool:
    """Is `index` `[:, first:...]`: every episode, steps from `first` on?"""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    if len(parts) < 2 or not all(isinstance(p, ast.Slice) for p in parts[:2]):
        return False
    episodes, steps = parts[0], parts[1]
    lower = 0 if steps.lower is None else const_value(steps.lower)  # type: ignore[attr-defined]
    whole = episodes.lower is None and episodes.upper is None and episodes.step is None  # type: ignore[attr-defined]
    return whole and steps.step is None and lower == first  # type: ignore[attr-defined]


def _stored_steps(ctx: Analysis, mask: ast.expr) -> bool:
    """PyMARL's episode batches (`mask = batch["filled"][:, :-1].float()`): the steps each
    episode stored, its first step always, and the termination mask applied from step 1 on
    (`mask[:, 1:] = mask[:, 1:] * (1 - terminated[:, :-1])`) keeps it. Every episode counts at
    least one step. Changed at step 0, or taken from step 1 on, it can count none."""
    e = strip_wrappers(ctx, mask)
    for _ in range(6):
        if isinstance(e, ast.Name):
            scope, _values = ctx.lookup(e.id)
            changes = scope.mutations.get(e.id, ()) if scope is not None else ()
            if not all(_from_step(ctx.mutation_index.get(id(m)), 1) for m in changes):
                return False  # `mask[:, 0] = 0`, `mask.mul_(alive)`: step 0 may be dropped
            inner = held_at(ctx, e)
            if inner is e:
                return False
            e = strip_wrappers(ctx, inner)
        elif isinstance(e, ast.Subscript) and isinstance(e.value, ast.Subscript):
            key = e.value.slice
            return isinstance(key, ast.Constant) and key.value == "filled" and _from_step(e.slice, 0)
        elif isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and e.slice.value == "filled":
            return True  # `batch["filled"].float()`: every step stored
        elif isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and _from_step(e.slice, 0):
            prior = ctx.last_value(e.value)  # `mask = mask[:, :-1]`: the steps kept from step 0 on
            if prior is None or prior is e:
                return False
            e = strip_wrappers(ctx, prior)
        else:
            return False
    return False


def _unique_of(ctx: Analysis, expr: ast.expr) -> ast.expr | None:
    """The tensor whose distinct values `expr` holds (`torch.unique(ids)`, `ids.unique()`,
    `np.unique(ids)`, a name holding one, an element of one in a loop), else None."""
    name = strip_wrappers(ctx, expr)
    # `for i, chain_id in enumerate(np.unique(ids))` where `chain_id` held something else before the loop
    loop = _enclosing_loop_over(ctx, name) if isinstance(name, ast.Name) else None
    src = source_of(ctx, loop if loop is not None else expr)
    if isinstance(src, ast.Name) and ctx.value_of(src) is None:
        loop = _loop_over(ctx, src.id)  # `for batch_id in batch.unique():`
        if loop is None:
            return None
        src = source_of(ctx, loop)
    if not (isinstance(src, ast.Call) and callee_name(src.func) == "unique"):
        return None
    if src.args and isinstance(src.func, ast.Attribute) and ctx.imports.qualname(src.func) is not None:
        return src.args[0]  # `torch.unique(ids, sorted=False)`
    return src.func.value if isinstance(src.func, ast.Attribute) and not src.args else None


def _one_of_its_values(ctx: Analysis, mask: ast.expr) -> bool:
    """`ids == v` for `v in ids.unique()`, or `ids[None] == torch.unique(ids)[:, None]`: every
    distinct value of `ids` occurs in it, so each count is at least 1 (Pointcept's per-batch
    masks, habitat's samples per environment)."""
    m = strip_wrappers(ctx, held_at(ctx, strip_wrappers(ctx, mask)))
    if isinstance(m, ast.BinOp) and isinstance(m.op, ast.BitOr):  # `(gt == c) | (pred == c)`: a union
        return _one_of_its_values(ctx, m.left) or _one_of_its_values(ctx, m.right)
    if not (isinstance(m, ast.Compare) and len(m.ops) == 1 and isinstance(m.ops[0], ast.Eq)):
        return False
    left, right = m.left, m.comparators[0]
    for values, whole in ((right, left), (left, right)):
        tensor = _unique_of(ctx, values)
        if tensor is not None and ast.dump(source_of(ctx, tensor)) == ast.dump(source_of(ctx, whole)):
            return True
    return False


_NONNEGATIVE_INDEX = frozenset({"argmax", "argmin", "len", "count_nonzero", "numel"})


def _positions_up_to_a_count(ctx: Analysis, mask: ast.expr) -> bool:
    """`arange(T) <= length` (`.le(length)`) with `length` an argmax or a count: position 0 is
    always kept (salina's episodes, `length = done.argmax(0)`). `<` can keep nothing."""
    m = strip_wrappers(ctx, held_at(ctx, mask))
    if isinstance(m, ast.Compare) and len(m.ops) == 1 and isinstance(m.ops[0], (ast.LtE, ast.GtE)):
        low, high = (m.left, m.comparators[0]) if isinstance(m.ops[0], ast.LtE) else (m.comparators[0], m.left)
    elif isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and m.func.attr in ("le", "ge") \
            and len(m.args) == 1 and ctx.imports.qualname(m.func) is None:
        low, high = (m.func.value, m.args[0]) if m.func.attr == "le" else (m.args[0], m.func.value)
    else:
        return False
    count = source_of(ctx, high)
    return positions_from_zero(ctx, low) and isinstance(count, ast.Call) \
        and callee_name(count.func) in _NONNEGATIVE_INDEX


_LEGAL = re.compile(r"(?<!il)legal", re.IGNORECASE)  # not `illegal_actions`


def _legal_actions(ctx: Analysis, mask: ast.expr) -> bool:
    """A game's legal-action mask as the game gives it (`state.legal_actions_mask()`,
    `self.legal_actions_mask`, `np.array(state.legal_actions_mask(), dtype=int)`): a state where
    a player decides has at least one legal action. A mask computed here and only named legal
    (acme's `legal_actions_mask = tf.where(values <= threshold, 0., 1.)`) can be empty."""
    m = strip_wrappers(ctx, mask)
    value = ctx.value_of(m) if isinstance(m, ast.Name) else None
    source = value if value is not None else m
    if isinstance(source, ast.Call) and callee_name(source.func) in ("array", "asarray", "tensor", "as_tensor",
                                                                      "from_numpy", "constant") and source.args:
        source = source.args[0]
    if isinstance(source, ast.Call) and not source.args and isinstance(source.func, ast.Attribute):
        source = source.func  # `state.legal_actions_mask()`
    return isinstance(source, (ast.Name, ast.Attribute)) and bool(_LEGAL.search(
        source.id if isinstance(source, ast.Name) else source.attr)) and (value is None or source is not m)


# Calls (by a word of their name) whose result is a probability vector: it sums to 1, so at
# least one entry is positive.
_DISTRIBUTION_WORDS = ("softmax", "sparsemax", "entmax", "simplex")


def _support_of_a_distribution(ctx: Analysis, mask: ast.expr) -> bool:
    """`primal_out > 0` where `primal_out = _projection_unit_simplex(x)` (jaxopt's JVP rule),
    `sparsemax(z) != 0`, `probs_sorted > 0`: the support of a probability vector is never empty."""
    m = strip_wrappers(ctx, ctx.resolve(mask))
    if not (isinstance(m, ast.Compare) and len(m.ops) == 1 and isinstance(m.ops[0], (ast.Gt, ast.NotEq))
            and const_value(m.comparators[0]) == 0):
        return False
    source = strip_wrappers(ctx, ctx.resolve(m.left))
    if isinstance(source, (ast.Name, ast.Attribute)) and _PROBABILITIES.search(
            source.id if isinstance(source, ast.Name) else source.attr):
        return True  # `probs_sorted > 0` (gluonts' discrete distribution): a probability vector's support
    return isinstance(source, ast.Call) and any(w in callee_name(source.func).lower() for w in _DISTRIBUTION_WORDS)


# A name made of the word probs/probabilities (`probs`, `probs_sorted`, `self.probs`): a distribution's
# probability vector.
_PROBABILITIES = re.compile(r"(^|_)(probs|probabilities)(_|$)", re.IGNORECASE)


def _identity(ctx: Analysis, mask: ast.expr) -> bool:
    """`mask = torch.eye(N).cuda()` (a contrastive loss's positives): the diagonal holds N ones.
    Its complement `1 - eye(N)` is not one of these: it is empty for a batch of one."""
    m = strip_wrappers(ctx, ctx.resolve(mask))
    return isinstance(m, ast.Call) and callee_name(m.func) in ("eye", "identity")


def holds_a_ones_block(ctx: Analysis, mask: ast.expr) -> bool:
    """`torch.cat([cls_mask, vmasks, torch.ones((b, 1))], dim=1)`: every row keeps the block of
    ones concatenated into it (a [CLS]/[SEP] position), so the count is at least 1."""
    m = source_of(ctx, mask)  # `mask = torch.cat([...], 1).reshape(-1)`, rebound from `mask = seq > 0`
    if not isinstance(m, ast.Call) or callee_name(m.func) not in ("cat", "concat", "concatenate") or not m.args:
        return False
    parts = m.args[0]
    if not isinstance(parts, (ast.List, ast.Tuple)):
        return False
    return any(_ones(strip_wrappers(ctx, ctx.resolve(part))) for part in parts.elts)


def _ones(call: ast.expr) -> bool:
    """`torch.ones(...)`, `m.new_ones(...)`, `m.new(n, 1).fill_(1)`, `m.new_full((n, 1), 1)`: non-zero
    everywhere."""
    if not isinstance(call, ast.Call):
        return False
    name = callee_name(call.func)
    if name in ("ones", "ones_like", "new_ones"):
        return True
    fill = call.args[0] if name == "fill_" and call.args else call.args[1] \
        if name in ("full", "new_full", "full_like") and len(call.args) > 1 else None
    return fill is not None and const_value(fill) not in (None, 0)


_SPLIT = re.compile(r"^(train|training|val|valid|validation|dev|test|trainval)(_mask)?$", re.IGNORECASE)


_SORTS = frozenset({"sort", "top_k", "topk", "approx_max_k"})


def _sparsemax_support(ctx: Analysis, mask: ast.expr) -> bool:
    """Sparsemax's support `z_sorted - (cumsum(z_sorted) - 1) / r > 0` (also `1 + r * z_sorted >
    cumsum(z_sorted)`): its first entry is z_max - (z_max - 1) = 1 > 0, so it counts at least one."""
    m = ctx.resolve(mask)
    while isinstance(m, ast.Call) and callee_name(m.func) in ("cast", "float", "astype", "to") and m.args \
            or isinstance(m, ast.Call) and callee_name(m.func) == "cast":
        m = ctx.resolve(m.args[0] if m.args else m.func.value)  # type: ignore[attr-defined]  # `tf.cast(support, dt)`
    if not isinstance(m, ast.Compare):
        return False
    calls: list[ast.AST] = []
    for node in bounded_walk(m, 80):
        value = ctx.value_of(node) if isinstance(node, ast.Name) else None
        # `cs = jnp.cumsum(z_sorted)`, `cssv = np.cumsum(u, axis=1) - z[:, None]`
        calls.extend(bounded_walk(value, 20) if value is not None else [node])
    for call in calls:
        if isinstance(call, ast.Call) and callee_name(call.func) == "cumsum":
            head = getattr(call.func, "value", None)
            # `torch.cumsum(z, 0)`, `tf.math.cumsum(z)`; but `z.cumsum(dim)` sums z, not dim
            function = head is None or ctx.imports.qualname(call.func) is not None
            source = call.args[0] if call.args and function else head
            if source is None:
                continue
            value = ctx.resolve(source)
            while isinstance(value, ast.Subscript):  # `jnp.sort(x)[::-1]`: the order reversed
                value = ctx.resolve(value.value)
            if isinstance(source, ast.Name) and value is source:
                scope, _ = ctx.lookup(source.id)  # `values, indices = jax.lax.top_k(x, k)`
                value = next(iter(scope.unpacked.get(source.id, [])), value) if scope is not None else value
            if (isinstance(value, ast.Call) and callee_name(value.func) in _SORTS) \
                    or (isinstance(source, ast.Name) and "sort" in source.id):
                return True
    return False


def _split_mask(ctx: Analysis, mask: ast.expr) -> bool:
    """A dataset split (`data.train_mask`, `data["test_mask"]`, `data(*splits)` in a loop over
    'train_mask', 'val_mask', ...): a split selects at least one example."""
    todo: list[ast.AST] = [mask]
    seen = 0
    while todo and seen < 8:
        expr = todo.pop(0)  # breadth first: the mask's own value and loop before its container's
        seen += 1
        for node in bounded_walk(expr, 60):
            if isinstance(node, ast.Attribute) and _SPLIT.match(node.attr) and node.attr.endswith("_mask"):
                return True
            if isinstance(node, ast.Name) and _SPLIT.match(node.id) and node.id.endswith("_mask"):
                return True  # `test_mask, tv_mask = model.test_mask, model.tv_mask`
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SPLIT.match(node.value):
                return True
            key = name_key(node)
            if key is None:
                continue
            value = ctx.last_value(node)
            if value is not None:
                todo.append(value)
            loop = _loop_over(ctx, key)
            if loop is not None:
                todo.append(loop)
    return False


def _only_loop_bound(ctx: Analysis, key: str, owning_scope: bool = False) -> ast.expr | None:
    """The iterable of the loop that binds `key`, when nothing else does (no plain assignment);
    with `owning_scope`, looked for in the scope that binds it (the use may sit in a comprehension)."""
    scope, values = ctx.lookup(key)
    if scope is None or any(v is not None for v in values):
        return None
    return _loop_over(ctx, key, scope.node if owning_scope else None)


def counted_in_a_configured_range(ctx: Analysis, key: str) -> bool:
    """Is `key` only bound by `for key in range(*cfg.k_range)` (or bounds read off a settings
    object): where the loop starts is the configuration's choice, as a parameter's value is."""
    loop = _only_loop_bound(ctx, key, owning_scope=True)
    if isinstance(loop, ast.Call) and callee_name(loop.func) == "tqdm" and loop.args:
        loop = loop.args[0]  # `tqdm(range(*C.k_range), desc=...)`: a progress bar around the range
    if not (isinstance(loop, ast.Call) and isinstance(loop.func, ast.Name) and loop.func.id == "range" and loop.args):
        return False
    first = loop.args[0]
    return isinstance(first, ast.Starred) or (len(loop.args) >= 2 and isinstance(first, ast.Attribute))


def counts_from_one(ctx: Analysis, key: str) -> bool:
    """Is `key` only bound as the target of `for key in range(a, ...)` with a literal a >= 1?"""
    loop = _only_loop_bound(ctx, key)
    if not (isinstance(loop, ast.Call) and isinstance(loop.func, ast.Name) and loop.func.id == "range"
            and len(loop.args) >= 2):
        return False
    start = const_value(loop.args[0])
    return start is not None and start >= 1 and (len(loop.args) < 3 or (const_value(loop.args[2]) or 0) > 0)


def _loop_over(ctx: Analysis, key: str, scope_node: ast.AST | None = None) -> ast.expr | None:
    """The iterable of the first `for` in the current scope (or `scope_node`) that binds `key`, if any."""
    scope_node = scope_node or ctx.scope.node
    memo_key = f"loops:{id(scope_node)}"
    if memo_key not in ctx.memo:  # one walk per scope: target name -> iterable
        loops: dict[str, ast.expr] = {}
        for node in bounded_walk(scope_node, 4000):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for t in ast.walk(node.target):
                    if isinstance(t, ast.Name):
                        loops.setdefault(t.id, _element_iterable(node.target, node.iter, t.id) or node.iter)
        ctx.memo[memo_key] = loops
    return ctx.memo[memo_key].get(key)  # type: ignore[no-any-return]


def _element_iterable(target: ast.expr, iterable: ast.expr, key: str) -> ast.expr | None:
    """What the loop variable `key` takes its values from: the iterable, or the argument of
    `enumerate` for its second target (`for i, chain_id in enumerate(chain_ids)`); None when
    `key` is not bound so."""
    if isinstance(target, ast.Name) and target.id == key:
        return iterable
    if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name) \
            and target.elts[1].id == key and isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) \
            and iterable.func.id == "enumerate" and len(iterable.args) == 1:
        return iterable.args[0]
    return None


def _enclosing_loop_over(ctx: Analysis, name: ast.Name) -> ast.expr | None:
    """The iterable of the innermost `for` around `name` that binds it, when the loop's body does
    not assign it again before `name` (the name held something else before the loop)."""
    best: tuple[int, ast.expr] | None = None
    for node in bounded_walk(ctx.scope.node, 4000):
        if isinstance(node, (ast.For, ast.AsyncFor)) and node.lineno < name.lineno <= (node.end_lineno or 0):
            iterable = _element_iterable(node.target, node.iter, name.id)
            if iterable is not None and (best is None or node.lineno > best[0]):
                reassigned = any(isinstance(n, ast.Assign) and n.lineno < name.lineno
                                 and any(isinstance(t, ast.Name) and t.id == name.id for t in n.targets)
                                 for stmt in node.body for n in ast.walk(stmt))
                if not reassigned:
                    best = (node.lineno, iterable)
    return best[1] if best is not None else None


def whole_one_hot(ctx: Analysis, oc: OpCall, mask: ast.expr) -> bool:
    """A sum over every axis of a one-hot encoding (`tf.reduce_sum(dispatch_mask)` with
    `dispatch_mask = tf.one_hot(expert_index, n)`): one per index, so 0 only for an empty index
    array. A sum over some axes (`one_hot(labels, C).sum(0)`, a per-class count) can be 0."""
    if len(oc.node.args) != 1 or oc.node.keywords:
        return False
    source = held_at(ctx, mask)
    return isinstance(source, ast.Call) and callee_name(source.func) == "one_hot"


def stored_only_where_selected(ctx: Analysis, node: ast.AST, den: ast.expr) -> bool:
    """Is the ratio assigned only to the entries its denominator counts (`br[maxima] = 1. /
    maxima.sum()`, open_spiel's best responses; `w = c / np.sum(labels == 1)` then only
    `weights[labels == 1, :] = w`, tf-faster-rcnn's anchor weights)? When the mask selects
    nothing the count is 0, and the NaN/inf is written to no entry."""
    line = getattr(node, "lineno", 0)
    stmt = next((a for a in ast.walk(ctx.scope.node) if isinstance(a, ast.Assign) and len(a.targets) == 1
                 and a.lineno <= line <= (a.end_lineno or 0) and any(n is node for n in ast.walk(a.value))), None)
    if stmt is None:
        return False
    counted = set()
    for call in ast.walk(den):
        oc = ctx.op(call) if isinstance(call, ast.Call) else None
        if oc is not None and oc.op in ("sum", "count_nonzero") and oc.input is not None:
            counted.add(ast.dump(strip_wrappers(ctx, oc.input)))
    target = stmt.targets[0]
    if isinstance(target, ast.Subscript):
        return _selects_counted(target, counted)
    if not isinstance(target, ast.Name):
        return False
    uses = [n for n in ast.walk(ctx.scope.node) if isinstance(n, ast.Name) and n.id == target.id
            and isinstance(n.ctx, ast.Load) and n.lineno > stmt.lineno]
    stores = {id(a.value): a.targets[0] for a in ast.walk(ctx.scope.node) if isinstance(a, ast.Assign)
              and len(a.targets) == 1 and isinstance(a.targets[0], ast.Subscript)}
    return bool(uses) and all(id(u) in stores and _selects_counted(stores[id(u)], counted) for u in uses)


def _selects_counted(target: ast.Subscript, counted: set) -> bool:
    index = target.slice
    selectors = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(ast.dump(sel) in counted for sel in selectors)
