"""Lint one source text: parse, walk once, run the enabled rules, apply `# noqa`.

`check_source` is the whole linter for a single file and never raises on bad input: a file
that does not parse (syntax error, null byte, bad encoding, absurd nesting) is one NG001
finding.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Set as AbstractSet

from nanguard.lint import compat, fix_safety
from nanguard.lint.analysis import Analysis
from nanguard.lint.model import CERTAIN, Edit, Finding, Fix
from nanguard.lint.names import ImportMap
from nanguard.lint.rules import (
    ON_CALL,
    ON_DIVISION,
    ON_POWER,
    PRE_PASS_OPS,
    RULES,
    SYNTAX_ERROR,
    mark_branches,
)
from nanguard.lint.source import ALL, SourceText, file_noqa
from nanguard.lint.syntax import bounded_walk

ALL_CODES = frozenset(RULES)


def _active(funcs, enabled: AbstractSet[str]):
    return [f for f in funcs if not f.codes.isdisjoint(enabled)]


def _syntax_finding(path: str, exc: BaseException) -> Finding:
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = exc.offset or 1
        msg = f"SyntaxError: {exc.msg}"
    elif isinstance(exc, (RecursionError, MemoryError)):
        line, col, msg = 1, 1, "the file is nested too deeply to be parsed"
    else:
        line, col, msg = 1, 1, f"the file cannot be parsed: {exc}"
    return Finding(path, line, max(col, 1), line, max(col, 1), SYNTAX_ERROR.code, msg)


def check_source(
    source: str | bytes,
    path: str = "<string>",
    enabled: AbstractSet[str] | None = None,
    module: str | None = None,
    is_package: bool = False,
    possible: AbstractSet[str] | None = None,
) -> list[Finding]:
    """All findings for one file, sorted by position.

    `source` may be bytes (decoded as Python does: PEP 263, BOM) or text. `enabled` is the set
    of rule codes to report (default: all). `module` is the file's dotted module name, which
    lets relative imports resolve (`from .. import functional as F`). `possible` is the set of
    codes whose POSSIBLE findings (NaN depending on data) are reported too (default: all codes);
    CERTAIN findings of every enabled code always are.
    """
    enabled = ALL_CODES if enabled is None else frozenset(enabled)
    if possible is not None and not possible & enabled and fix_safety.in_test_file(path):
        # Every finding in a test file is possible (README), and none is asked for: the file
        # is not parsed, so a syntax error there shows only with
        # `--confidence all` or its code selected.
        return []
    try:
        text = source if isinstance(source, str) else compat.read(source)[0]
        if "\0" in text:
            raise ValueError("source code string cannot contain null bytes")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not ours to report
            tree, rewritten = compat.parse(text, path)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, LookupError) as exc:
        return [_syntax_finding(path, exc)] if SYNTAX_ERROR.code in enabled else []
    try:
        ctx = Analysis(tree, ImportMap(module, is_package))
    except RecursionError as exc:  # pragma: no cover - the walk is iterative; guards the helpers
        return [_syntax_finding(path, exc)] if SYNTAX_ERROR.code in enabled else []
    ctx.enabled = set(enabled)
    ctx.possible = ALL_CODES if possible is None else frozenset(possible)
    ctx.path = path
    run_rules(ctx)
    if not ctx.raw:
        return []
    findings = _findings(ctx, text, path)
    if rewritten:  # fixes copy text from the lines as parsed; where those were rewritten, none is offered
        for f in findings:
            f.fix = None
    return findings


def run_rules(ctx: Analysis) -> None:
    enabled = ctx.enabled
    call_checks = {op: fs for op, fs in ((op, _active(fs, enabled)) for op, fs in ON_CALL.items()) if fs}
    division_checks = _active(ON_DIVISION, enabled)
    power_checks = _active(ON_POWER, enabled)
    if not (call_checks or division_checks or power_checks):
        return
    triggered = []
    for call, scope, nograd in ctx.calls:
        func = call.func
        if func.__class__ is ast.Attribute and func.attr in _DETACHING and not call.args:
            _mark_detached(ctx, func.value)  # `torch.sqrt(s).item()`: the result leaves autograd
        oc = ctx.op(call)
        if oc is None:
            continue
        if oc.op in PRE_PASS_OPS:
            ctx.scope = scope
            mark_branches(ctx, oc)
        elif oc.op == "stop_gradient" and oc.input is not None:
            _mark_detached(ctx, oc.input)
        if oc.op in call_checks:
            triggered.append((oc, scope, nograd))
    for oc, scope, nograd in triggered:
        ctx.scope, ctx.nograd = scope, nograd
        for check in call_checks[oc.op]:
            check(ctx, oc)
    for checks_, nodes in ((division_checks, ctx.divisions), (power_checks, ctx.powers)):
        if not checks_:
            continue
        for node, scope, nograd in nodes:
            ctx.scope, ctx.nograd = scope, nograd
            for check in checks_:
                check(ctx, node)


_DETACHING = frozenset({"item", "detach", "tolist", "numpy"})


def _mark_detached(ctx: Analysis, expr: ast.AST) -> None:
    for node in bounded_walk(expr, 200):
        ctx.detached_results.add(id(node))


def _findings(ctx: Analysis, text: str, path: str) -> list[Finding]:
    src = SourceText(text)
    exempt = file_noqa(text)
    out: list[Finding] = []
    reported_at = {id(raw.node) for raw in ctx.raw}
    for raw in ctx.raw:
        code = raw.rule.code
        if raw.root is not None and id(raw.root) in reported_at:
            continue  # its cause has its own finding (NG303's `acos(cosine)` under NG501's where)
        if exempt is not None and (exempt is ALL or any(code.startswith(c) for c in exempt)):
            continue
        node = raw.node
        first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        if src.suppressed(code, (first,) if first == last else (first, last)):
            continue
        start, end = src.span(node)
        fix = None
        if raw.fix is not None:
            ctx.scope = raw.scope or ctx.module_scope  # fixes spell names as seen from the finding
            fix = raw.fix(src)
        if fix is not None and fix_safety.refusal(path, ctx.scope, fix.edits[0].text) is not None:
            fix = None
        if fix is not None:
            fix = Fix(fix.description, tuple(
                Edit(e.start, e.end, e.text, src.position(e.start), src.position(e.end)) for e in fix.edits))
        out.append(Finding(
            path=path,
            line=first,
            col=src.char_col(first, node.col_offset) + 1,  # type: ignore[attr-defined]
            end_line=last,
            end_col=src.char_col(last, node.end_col_offset) + 1,  # type: ignore[attr-defined]
            code=code,
            message=raw.message,
            fix=fix,
            span=(start, end),
            hazard=raw.hazard,
            confidence=raw.confidence or CERTAIN,
        ))
    out.sort(key=Finding.sort_key)
    return out
