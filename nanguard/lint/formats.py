"""Machine formats for CI: GitHub workflow annotations, SARIF for code scanning, JUnit XML,
and the per-rule statistics as JSON. Text and ruff-style JSON are in `nanguard.lint.output`.

Each takes the sorted findings and writes one document; a CERTAIN finding is an error, a
POSSIBLE one (NaN depending on data) a warning. GitHub and SARIF place a notebook's finding
on the line of the ``.ipynb`` file (its JSON) that holds the flagged code, since that is the
file they annotate; the message and SARIF's ``properties`` keep the cell and the line inside
it, as the text format prints them.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TextIO
from xml.sax.saxutils import escape, quoteattr

from nanguard.lint.model import CERTAIN, Finding
from nanguard.lint.rules import RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = "https://github.com/nanguard/nanguard"   # pyproject.toml's [project.urls] Homepage


def _level(f: Finding) -> str:
    return "error" if f.confidence == CERTAIN else "warning"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(findings: list[Finding], out: TextIO) -> None:
    """`::error file=...,line=...::message` lines, which GitHub Actions shows on the diff."""
    for f in findings:
        line, col, end_line, end_col = f.file_region()
        props = (f"title={_gh_property(f'nanguard ({f.code})')},file={_gh_property(f.path)},line={line},"
                 f"col={col},endLine={end_line},endColumn={end_col}")
        where = f"cell {f.cell}:" if f.cell is not None else ""
        out.write(f"::{_level(f)} {props}::{_gh_data(f'{f.path}:{where}{f.line}:{f.col}: {f.code} {f.message}')}\n")


def write_sarif(findings: list[Finding], out: TextIO) -> None:
    """A SARIF 2.1.0 log with one run: the rules that fired and one result per finding."""
    from nanguard import __version__
    used = sorted({f.code for f in findings})
    rules = [{
        "id": code,
        "name": RULES[code].name,
        "shortDescription": {"text": RULES[code].summary},
        "fullDescription": {"text": " ".join(RULES[code].why()) or RULES[code].summary},
        "help": {"text": RULES[code].fix_hint},
        "helpUri": f"{TOOL_URI}#{code.lower()}",
    } for code in used if code in RULES]
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in findings:
        line, col, end_line, end_col = f.file_region()
        region = {"startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col}
        result = {
            "ruleId": f.code,
            "ruleIndex": index.get(f.code, 0),
            "level": _level(f),
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.path.replace("\\", "/")},
                                                "region": region}}],
            "properties": {"confidence": f.confidence, "hazard": f.hazard},
        }
        if f.cell is not None:
            result["properties"].update(cell=f.cell, cellLine=f.line, cellColumn=f.col)
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "nanguard", "informationUri": TOOL_URI,
                                      "version": __version__, "rules": rules}},
                  "results": results}],
    }
    json.dump(log, out, indent=2)
    out.write("\n")


def write_junit(findings: list[Finding], out: TextIO) -> None:
    """JUnit XML: a test suite per file, a failed test case per finding."""
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_file[f.path].append(f)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(f'<testsuites name="nanguard" tests="{len(findings)}" failures="{len(findings)}">\n')
    for path, items in by_file.items():
        out.write(f'  <testsuite name={quoteattr(path)} tests="{len(items)}" failures="{len(items)}">\n')
        for f in items:
            where = f"cell {f.cell}, " if f.cell is not None else ""
            name = quoteattr(f"nanguard.{f.code}")
            out.write(f'    <testcase name={name} classname={quoteattr(path)} line="{f.line}">\n'
                      f'      <failure message={quoteattr(f.message)} type={quoteattr(f.code)}>'
                      f'{escape(f"{where}line {f.line}, col {f.col}, {f.message}")}</failure>\n'
                      f'    </testcase>\n')
        out.write("  </testsuite>\n")
    out.write("</testsuites>\n")


def write_statistics_json(findings: list[Finding], out: TextIO) -> None:
    """`--statistics` as JSON: [{"code", "name", "count", "fixable"}], most frequent first."""
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None)
    rows = [{"code": code, "name": RULES[code].name if code in RULES else "", "count": n,
             "fixable": fixable[code] > 0}
            for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    json.dump(rows, out, indent=2)
    out.write("\n")
