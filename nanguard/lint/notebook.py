"""Jupyter notebooks: lint the code cells together, report each finding at its cell and line.

A notebook's cells share one namespace (the imports of the first cell serve the others), so
the code cells are joined into one module and linted once; each finding is then mapped back
to ``cell N`` (1-based, counting every cell as Jupyter numbers them) and the line inside it,
as ruff reports notebooks. IPython magics (``%matplotlib``, ``!pip``) are read as ``pass``;
a cell that does not parse is one NG001 finding and the other cells are still linted.
Notebooks are checked, never rewritten.

Each finding also records where it lies in the ``.ipynb`` file itself (``file_position``):
GitHub annotations and SARIF (code scanning) place a finding on a line of the file they are
given, the notebook's JSON, where ``cell 3, line 2`` would land on line 2 of the JSON. The
text and JSON formats keep ruff's cell-qualified form. A notebook read from stdin is
recognised by its content (`looks_like_notebook`) or by ``--stdin-filename x.ipynb``.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import warnings
from collections.abc import Set as AbstractSet

from nanguard.lint.model import Finding
from nanguard.lint.rules import SYNTAX_ERROR


def looks_like_notebook(data: bytes) -> bool:
    """Whether ``data`` (stdin, which has no file name) is a Jupyter notebook: a JSON object
    with a list of ``cells``. Python source is never valid JSON of that shape."""
    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return False
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(nb, dict) and isinstance(nb.get("cells"), list)


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


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Positions:
    """Where each character of a cell's source lies in the notebook's JSON text.

    A small JSON reader that follows ``cells[k].source`` (a string or a list of strings) and
    records, for every character of the joined source, its offset in the file, escapes
    (``\\n``, ``\\u00e9``) included; every other value is skipped. A file it cannot follow
    (not JSON) simply has no positions."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.cells: dict[int, tuple[str, list[int]]] = {}   # cell number -> (source, offsets)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        try:
            self._document()
        except (IndexError, ValueError):
            self.cells = {}

    def locate(self, cell: int, line: int, col: int) -> tuple[int, int] | None:
        """The file's (line, column), 1-based, of column ``col`` of line ``line`` of ``cell``."""
        entry = self.cells.get(cell)
        if entry is None:
            return None
        source, offsets = entry
        starts = [0] + [m.end() for m in re.finditer("\n", source)]
        if not offsets or not 0 < line <= len(starts):
            return None
        index = min(starts[line - 1] + max(col, 1) - 1, len(offsets) - 1)
        offset = offsets[index]
        row = bisect.bisect_right(self._line_starts, offset)
        return row, offset - self._line_starts[row - 1] + 1

    # -- the reader
    def _ws(self) -> None:
        while self.text[self.i] in " \t\r\n":
            self.i += 1

    def _expect(self, char: str) -> None:
        self._ws()
        if self.text[self.i] != char:
            raise ValueError(f"expected {char!r} at {self.i}")
        self.i += 1

    def _document(self) -> None:
        self._ws()
        if self.text.startswith("\ufeff", self.i):
            self.i += 1
        for key in self._keys():
            if key == "cells":
                self._cells()
            else:
                self._skip()

    def _keys(self):
        """The keys of the object starting here; the caller reads each key's value."""
        self._expect("{")
        self._ws()
        if self.text[self.i] == "}":
            self.i += 1
            return
        while True:
            self._ws()
            key, _ = self._string()
            self._expect(":")
            yield key
            self._ws()
            if self.text[self.i] == ",":
                self.i += 1
                continue
            self._expect("}")
            return

    def _items(self):
        """Yields once per item of the array starting here; the caller reads the item."""
        self._expect("[")
        self._ws()
        if self.text[self.i] == "]":
            self.i += 1
            return
        while True:
            yield
            self._ws()
            if self.text[self.i] == ",":
                self.i += 1
                continue
            self._expect("]")
            return

    def _cells(self) -> None:
        for number, _ in enumerate(self._items(), start=1):
            self._ws()
            if self.text[self.i] != "{":
                self._skip()
                continue
            for key in self._keys():
                self._ws()
                if key == "source" and self.text[self.i] in '"[':
                    self.cells[number] = self._source()
                else:
                    self._skip()

    def _source(self) -> tuple[str, list[int]]:
        if self.text[self.i] == '"':
            return self._string()
        text, offsets = [], []
        for _ in self._items():
            self._ws()
            if self.text[self.i] != '"':
                self._skip()
                continue
            piece, where = self._string()
            text.append(piece)
            offsets.extend(where)
        return "".join(text), offsets

    def _string(self) -> tuple[str, list[int]]:
        """The string starting here, and the file offset of each of its characters."""
        text = self.text
        if text[self.i] != '"':
            raise ValueError(f"expected a string at {self.i}")
        i, chars, offsets = self.i + 1, [], []
        while text[i] != '"':
            start = i
            if text[i] == "\\":
                kind = text[i + 1]
                if kind == "u":
                    code, i = int(text[i + 2:i + 6], 16), i + 6
                    if 0xD800 <= code < 0xDC00 and text.startswith("\\u", i):
                        low = int(text[i + 2:i + 6], 16)
                        code, i = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), i + 6
                    chars.append(chr(code))
                else:
                    chars.append(_ESCAPES[kind])
                    i += 2
            else:
                chars.append(text[i])
                i += 1
            offsets.append(start)
        self.i = i + 1
        return "".join(chars), offsets

    def _skip(self) -> None:
        """Read past any one value."""
        self._ws()
        char = self.text[self.i]
        if char == '"':
            self._string()
        elif char == "{":
            for _ in self._keys():
                self._skip()
        elif char == "[":
            for _ in self._items():
                self._skip()
        else:
            match = re.compile(r"-?[\w.+-]+").match(self.text, self.i)
            if match is None:
                raise ValueError(f"unexpected {char!r} at {self.i}")
            self.i = match.end()


def check_notebook(data: bytes, path: str, enabled: AbstractSet[str],
                   possible: AbstractSet[str] | None = None) -> list[Finding]:
    """Findings for a notebook's code cells, each with its `cell` and the line inside it, and
    its place in the ``.ipynb`` file (`Finding.file_position`)."""
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
    positions = _Positions(data.decode("utf-8", "replace"))
    for f in findings:
        if f.cell is None:
            continue
        start = positions.locate(f.cell, f.line, f.col)
        end = positions.locate(f.cell, f.end_line, f.end_col)
        if start is not None:
            f.file_position = (*start, *(end if end is not None and end >= start else start))
    findings.sort(key=lambda f: (f.cell or 0, f.line, f.col, f.code))
    return findings
