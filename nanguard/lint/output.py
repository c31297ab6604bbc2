"""Printing results: flake8-style text, ruff-style JSON, statistics, diffs, `--explain`."""

from __future__ import annotations

import difflib
import json
import textwrap
from collections import Counter
from typing import TextIO

from nanguard.core.hazards import HAZARDS
from nanguard.lint.model import GRADIENT, Finding, Rule
from nanguard.lint.rules import RULES


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def write_text(findings: list[Finding], out: TextIO, show_fixable: bool = True) -> None:
    for f in findings:
        mark = " [*]" if show_fixable and f.fix is not None else ""
        # `[*]` goes after the message, so `path:line:col: CODE` stays grep- and editor-parsable.
        out.write(f.format() + mark + "\n")


def write_json(findings: list[Finding], out: TextIO) -> None:
    items = [f.to_dict(RULES[f.code].name if f.code in RULES else "") for f in findings]
    json.dump(items, out, indent=2)
    out.write("\n")


def write_statistics(findings: list[Finding], out: TextIO) -> None:
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None)
    width = max((len(str(c)) for c in counts.values()), default=1)
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = "[*]" if fixable[code] else "   "
        out.write(f"{n:>{width}}\t{code}\t{mark} {RULES[code].name}\n")


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff; relative paths get git's a/ b/ prefixes so `git apply` takes it."""
    old, new = (path, path) if path.startswith("/") else (f"a/{path}", f"b/{path}")
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=old, tofile=new))


def explain(rule: Rule) -> str:
    hazard = ("gradient: a finite value with an inf/NaN derivative; not reported inside "
              "torch.no_grad()/inference_mode() or a custom backward()") if rule.hazard == GRADIENT else \
        "value: NaN/Inf in the forward result; reported everywhere"
    lines = [
        f"{rule.code} {rule.name}" + ("  (autofix available: --fix)" if rule.autofix else ""),
        "",
        f"Pattern: {rule.summary}",
    ]
    # The why and the fix are the catalogue's (nanguard.core.hazards): the words of the
    # findings, and of a runtime report of the same hazard.
    for key in rule.hazards:
        entry = HAZARDS[key]
        title = f"({entry.title}) " if len(rule.hazards) > 1 else ""
        lines += _field("Why:", title + entry.why_text())
        lines += _field("Fix:", title + entry.fix_text())
    if not rule.hazards:
        lines += _field("Fix:", rule.fix_hint)
    lines += [f"Hazard:  {hazard}"]
    if rule.certain_when:
        lines += _field("Default:", f"possible (--confidence all); certain for {rule.certain_when}")
    lines += ["", rule.explanation.rstrip()]
    return "\n".join(lines) + "\n"


def _field(label: str, text: str, width: int = 92) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=f"{label:<9}", subsequent_indent=" " * 9) or [label]


def rule_table() -> str:
    width = max(len(r.name) for r in RULES.values())
    # The confidence column: "certain" rules are the default set, "possible" ones need
    # --confidence all or the code named in --select (a check may lower a finding's own),
    # "both": possible rules whose `certain_when` spellings are in the default set.
    rows = [f"{r.code}  {r.name.ljust(width)}  {'[*]' if r.autofix else '   '}  {r.listed_confidence:<8}  {r.summary}"
            for r in RULES.values()]
    return "\n".join(rows) + "\n"
