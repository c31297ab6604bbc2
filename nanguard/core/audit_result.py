"""What ``nanguard audit`` found: `AuditFinding`, `AuditResult`, and their text, JSON, SARIF and
GitHub forms. Framework-free: the torch audit fills these in, the CLI prints them.

A finding says: this op, at this line, *can* make NaN/Inf (its value, or its gradient) for
some finite weights and inputs (``structural`` mode) or inside the stated ranges
(``bounded`` mode); the range its singular argument can reach; a concrete input that
triggers it (the *witness*, saved as a ``.pt`` file) when the search found one; whether the
traced run itself already produced it (``observed``); and the fix, worded by the hazard
catalogue (`nanguard.core.hazards`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, TextIO, Tuple

from nanguard.core.hazards import HAZARDS

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = "https://github.com/nanguard/nanguard"


@dataclass
class AuditFinding:
    """One op that can produce NaN/Inf.

    ``op`` is the aten op (``"aten.log.default"``); ``kind`` the condition of
    `nanguard.core.singular` it can reach (``"nonpositive"``, ``"zero_divisor"`` ...);
    ``phase`` ``"value"`` or ``"gradient"``; ``range`` the bounds of the singular argument
    (``[lo, hi]``, ±inf for unbounded); ``witness`` the path of the saved failing input (or
    None); ``observed`` whether the traced run itself produced the NaN/Inf there.
    """

    file: str
    line: int
    function: str
    code: str
    op: str
    kind: str
    phase: str
    result: str
    hazard: str
    range: Tuple[float, float]
    why: str
    fix: str
    module: Optional[str] = None
    observed: bool = False
    witness: Optional[str] = None
    witness_note: Optional[str] = None
    inputs: List[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return HAZARDS[self.hazard].title if self.hazard in HAZARDS else self.kind

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["range"] = [_json_number(v) for v in self.range]
        return d


@dataclass
class AuditResult:
    """Every finding of one audit, the ops it could not analyse, and what it cost."""

    findings: List[AuditFinding]
    unsupported: Dict[str, int]
    ops_traced: int
    seconds: float
    mode: str = "structural"
    stopped_at: str = "backward"
    peak_memory_mb: Optional[float] = None
    script_error: Optional[str] = None

    @property
    def found(self) -> bool:
        return bool(self.findings)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "unsupported": [{"op": op, "count": n} for op, n in sorted(self.unsupported.items())],
            "ops_traced": self.ops_traced,
            "seconds": round(self.seconds, 3),
            "mode": self.mode,
            "stopped_at": self.stopped_at,
            "peak_memory_mb": None if self.peak_memory_mb is None else round(self.peak_memory_mb, 1),
            "script_error": self.script_error,
        }

    def format(self) -> str:
        return format_text(self)

    def __str__(self) -> str:
        return self.format()


def _json_number(v: float) -> Any:
    """JSON has no infinities: ±inf become the strings "inf"/"-inf"."""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        return "nan"
    return v


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    return f"{v:.4g}"


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def format_finding(f: AuditFinding) -> str:
    where = f"{_short(f.file)}:{f.line}"
    if f.phase == "input":
        head = f"{where}: {f.op} reads data that already holds {f.result}"
    else:
        head = f"{where}: {f.op} can produce {f.result} ({'gradient' if f.phase == 'gradient' else 'value'})"
    lines = [head]
    if f.code:
        lines.append(f"    {f.line} │ {f.code}")
    lo, hi = f.range
    if f.phase == "input":
        lines.append(f"  why  {f.why}")
    else:
        lines.append(f"  why  {f.why}; its input ranges over [{_fmt(lo)}, {_fmt(hi)}]")
    lines.append(f"  fix  {f.fix}")
    if f.module:
        lines.append(f"  in   module {f.module}")
    if f.observed:
        lines.append("  seen in the traced run itself")
    if f.witness:
        lines.append(f"  witness  {f.witness}")
    elif f.witness_note:
        lines.append(f"  witness  none found ({f.witness_note})")
    return "\n".join(lines)


def format_text(result: AuditResult) -> str:
    blocks = [format_finding(f) for f in result.findings]
    count = len(result.findings)
    summary = (f"nanguard audit ({result.mode}): {count} op{'s' if count != 1 else ''} can produce NaN/Inf; "
               f"{result.ops_traced} ops traced up to the {result.stopped_at} in {result.seconds:.1f} s")
    if not count:
        summary = (f"nanguard audit ({result.mode}): no op can produce NaN/Inf for finite inputs on the traced path; "
                   f"{result.ops_traced} ops traced up to the {result.stopped_at} in {result.seconds:.1f} s")
    if result.unsupported:
        names = ", ".join(f"{op} ({n})" for op, n in sorted(result.unsupported.items(), key=lambda kv: -kv[1])[:8])
        more = len(result.unsupported) - 8
        summary += f"\n  not analysed (any value assumed): {names}" + (f" and {more} more" if more > 0 else "")
    if result.script_error:
        summary += f"\n  the script failed before its first backward: {result.script_error}"
    return "\n\n".join(blocks + [summary])


def write_json(result: AuditResult, out: TextIO) -> None:
    json.dump(result.to_dict(), out, indent=2, allow_nan=False)
    out.write("\n")


def _gh(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh(text).replace(":", "%3A").replace(",", "%2C")


def _message(f: AuditFinding) -> str:
    return f"{f.op} can produce {f.result} ({f.phase}): {f.why}. Fix: {f.fix}"


def write_github(result: AuditResult, out: TextIO) -> None:
    """``::error file=...,line=...::message`` lines (GitHub Actions annotations)."""
    for f in result.findings:
        props = f"title={_gh_property('nanguard audit (' + f.hazard + ')')},file={_gh_property(f.file)},line={f.line}"
        out.write(f"::error {props}::{_gh(_message(f))}\n")


def write_sarif(result: AuditResult, out: TextIO) -> None:
    """A SARIF 2.1.0 log: one rule per hazard that fired, one result per finding."""
    used = sorted({f.hazard for f in result.findings})
    rules = []
    for key in used:
        h = HAZARDS.get(key)
        rules.append({"id": key, "name": key, "shortDescription": {"text": h.title if h else key},
                      "help": {"text": h.fix_text() if h else ""}, "helpUri": f"{TOOL_URI}#audit"})
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in result.findings:
        results.append({
            "ruleId": f.hazard, "ruleIndex": index[f.hazard], "level": "error",
            "message": {"text": _message(f)},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _short(f.file).replace("\\", "/")},
                                                "region": {"startLine": f.line}}}],
            "properties": {"op": f.op, "kind": f.kind, "phase": f.phase, "observed": f.observed,
                           "witness": f.witness, "range": [_json_number(v) for v in f.range]},
        })
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "nanguard-audit", "informationUri": TOOL_URI, "rules": rules}},
                     "results": results}]}
    json.dump(log, out, indent=2)
    out.write("\n")


FORMATS = ("text", "json", "sarif", "github")


def write(result: AuditResult, fmt: str, out: TextIO) -> None:
    if fmt == "text":
        out.write(format_text(result) + "\n")
    elif fmt == "json":
        write_json(result, out)
    elif fmt == "sarif":
        write_sarif(result, out)
    elif fmt == "github":
        write_github(result, out)
    else:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")


__all__ = ["FORMATS", "AuditFinding", "AuditResult", "format_finding", "format_text", "write", "write_github",
           "write_json", "write_sarif"]
