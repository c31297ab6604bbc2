"""Jupyter notebooks: lint the code cells together, report each finding at its cell and line.

A notebook's cells share one namespace (the imports of the first cell serve the others), so
the code cells are joined into one module and linted once; each finding is then mapped back
to ``cell N`` (1-based, counting every cell as Jupyter numbers them) and the line inside it,
as ruff reports notebooks. IPython magics (``%matplotlib``, ``!pip``) are read as ``pass``;
a cell that does not parse is one NG001 finding and the other cells are still linted.
Notebooks are checked, never rewritten.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Set as AbstractSet

from nanguard.lint.model import Finding
from nanguard.lint.rules import SYNTAX_ERROR


def code_cells(data: bytes) -> list[tuple[int, str]]:
    """(cell number, source) of every code cell; ValueError for a file that is not a notebook."""
    try:
        nb = json.loads(data.decode("utf-8"))
        cells = nb["cells"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"not a Jupyter notebook ({exc.__class__.__name__})") from None
    out = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        out.append((number, _without_magics(text)))
    return out


# Cell magics whose body is still Python; any other (%%bash, %%writefile, %%html...) makes the
# whole cell another language.
_PYTHON_CELL_MAGICS = frozenset({"capture", "time", "timeit", "prun", "debug"})
# `files = !ls` and `t = %timeit -o f()`: an assignment whose value is an IPython escape
_ASSIGNED_ESCAPE = re.compile(r"^(\s*[A-Za-z_][\w.,\s\[\]]*?=\s*)([%!].*)$")


def _without_magics(text: str) -> str:
    """The cell with IPython escapes replaced by Python of the same shape, line for line.

    An escape line (``!pip``, ``%matplotlib``, also indented inside an ``if``, and the lines
    it continues with a trailing backslash) becomes ``pass`` at its indentation, so a block
    whose body is a magic still parses; ``x = !ls`` becomes ``x = None``. A cell opened by a
    cell magic of another language (``%%bash``) is blanked. Line numbers never move.
    """
    lines = text.splitlines()
    if lines and lines[0].startswith("%%"):
        name = lines[0][2:].split(maxsplit=1)[0] if lines[0][2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return "\n" * len(lines)
        lines[0] = ""
    continued = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if continued:  # the tail of an escape line ending in a backslash
            lines[i] = ""
        elif stripped.startswith(("%", "!")):
            lines[i] = indent + "pass"
        elif (assigned := _ASSIGNED_ESCAPE.match(line)) is not None:
            lines[i] = assigned.group(1) + "None"
        else:
            continue
        continued = line.rstrip().endswith("\\")
    return "\n".join(lines) + "\n"


def check_notebook(data: bytes, path: str, enabled: AbstractSet[str],
                   possible: AbstractSet[str] | None = None) -> list[Finding]:
    """Findings for a notebook's code cells, each with its `cell` and the line inside it."""
    from nanguard.lint.checker import check_source

    findings: list[Finding] = []
    pieces: list[str] = []
    origin: list[tuple[int, int]] = []  # joined line (0-based) -> (cell, line in cell)
    for number, text in code_cells(data):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(text)
        except (SyntaxError, ValueError) as exc:
            if SYNTAX_ERROR.code in enabled:
                line = getattr(exc, "lineno", None) or 1
                col = max(getattr(exc, "offset", None) or 1, 1)
                findings.append(Finding(path, line, col, line, col, SYNTAX_ERROR.code,
                                        f"SyntaxError: {getattr(exc, 'msg', exc)}", cell=number))
            continue
        n = text.count("\n")
        origin.extend((number, i + 1) for i in range(n))
        pieces.append(text)
    for f in check_source("".join(pieces), path, enabled, possible=possible):
        cell, line = origin[f.line - 1] if 0 < f.line <= len(origin) else (None, f.line)
        end_cell, end_line = origin[f.end_line - 1] if 0 < f.end_line <= len(origin) else (cell, f.end_line)
        f.cell, f.line, f.end_line = cell, line, end_line if end_cell == cell else line
        f.fix = None  # notebooks are checked, not rewritten
        findings.append(f)
    findings.sort(key=lambda f: (f.cell or 0, f.line, f.col, f.code))
    return findings
