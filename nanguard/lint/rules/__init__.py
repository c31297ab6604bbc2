"""The rule table: every rule, and which checks run on which calls, divisions and powers.

Codes are grouped by family, like ruff's: NG1xx exp/log, NG2xx cross-entropy,
NG3xx roots and inverse trigonometry, NG4xx division, NG5xx where, NG6xx clipping,
NG7xx masking, NG8xx statistics, NG9xx softmax by hand; NG001 is a file that does not parse.
"""

from __future__ import annotations

from collections.abc import Callable

from nanguard.lint.model import VALUE, Rule
from nanguard.lint.rules import (
    clipping,
    division,
    exp_log,
    exp_overflow,
    inverse_trig,
    log_one_minus_exp,
    masking,
    roots,
    softmax,
    stats,
    where,
    xent,
)

SYNTAX_ERROR = Rule(
    code="NG001",
    name="syntax-error",
    summary="the file does not parse",
    fix="fix the syntax error (nothing else in the file was checked)",
    hazard=VALUE,
    explanation="""\
The file could not be parsed by this Python's `ast` (a syntax error, a null byte, an
undecodable encoding, or nesting too deep), so no rule could look at it. It is reported
as a finding rather than a crash so that one bad file never hides the rest of a run.
Select or ignore it like any other code (`--ignore NG001`).""",
)

_FAMILIES = [exp_log, log_one_minus_exp, exp_overflow, xent, roots, inverse_trig, division, where, clipping, masking,
             stats, softmax]

RULES: dict[str, Rule] = {SYNTAX_ERROR.code: SYNTAX_ERROR}
for _module in _FAMILIES:
    for _rule in _module.RULES:
        assert _rule.code not in RULES, _rule.code
        assert _rule.hazards, f"{_rule.code} names no hazard of the catalogue"
        RULES[_rule.code] = _rule
RULES = dict(sorted(RULES.items()))

BY_NAME: dict[str, Rule] = {r.name: r for r in RULES.values()}

Check = Callable[..., None]
ON_CALL: dict[str, list[Check]] = {}
ON_DIVISION: list[Check] = []
ON_POWER: list[Check] = []
for _module in _FAMILIES:
    for _op, _funcs in getattr(_module, "ON_CALL", {}).items():
        ON_CALL.setdefault(_op, []).extend(_funcs)
    ON_DIVISION.extend(getattr(_module, "ON_DIVISION", []))
    ON_POWER.extend(getattr(_module, "ON_POWER", []))

# Calls the where-branch pre-pass looks at (see where.mark_branches).
PRE_PASS_OPS = frozenset({"where", "masked_fill", "nan_to_num"})
mark_branches = where.mark_branches

__all__ = [
    "BY_NAME",
    "ON_CALL",
    "ON_DIVISION",
    "ON_POWER",
    "PRE_PASS_OPS",
    "RULES",
    "SYNTAX_ERROR",
    "mark_branches",
]
