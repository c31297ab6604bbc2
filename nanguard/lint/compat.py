"""Reading files the running Python cannot parse as they are: newer syntax and Latin-1 text.

The linter looks for numerical patterns, not for syntax the interpreter would accept, so a
file written for a newer Python is still linted on an older one: PEP 695 generics
(`def f[T](x: T)`, `class C[T]:`, `type V = ...`, Python 3.12) are rewritten to their
3.11 equivalents, and a line the old parser still rejects because of a 3.12 f-string
(`f"{d["a"]}"`) becomes a `pass` (or `if True:` for a block header), so the rest of the
file is checked. Every replacement keeps each line's length, so positions and character
offsets are those of the original text. A file without a coding cookie that is not UTF-8
(Latin-1 from an old editor) is read as Latin-1, which decodes any byte.
"""

from __future__ import annotations

import ast
import re
import sys

from nanguard.lint.source import decode

_TYPE_ALIAS = re.compile(r"^(\s*)type(\s+)([A-Za-z_]\w*)")
_GENERIC_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+[A-Za-z_]\w*\s*\[")
_FSTRING = re.compile(r"""(?<![\w.])(?:[rR]?[fF]|[fF][rR])["']""")
_MAX_REPAIRS = 50


def read(data: bytes) -> tuple[str, str]:
    """(text, encoding): as Python decodes it (PEP 263, BOM), or Latin-1 when there is no
    cookie and the bytes are not UTF-8."""
    try:
        return decode(data)
    except UnicodeDecodeError:
        if b"coding" in data[:400]:
            raise  # an explicit, wrong cookie is the file's error
        return data.decode("latin-1"), "latin-1"


def _strip_brackets(line: str, start: int) -> str | None:
    """`line` with the bracketed list opening at `start` replaced by spaces (nesting respected)."""
    depth = 0
    for i in range(start, len(line)):
        if line[i] == "[":
            depth += 1
        elif line[i] == "]":
            depth -= 1
            if depth == 0:
                return line[:start] + " " * (i + 1 - start) + line[i + 1:]
    return None


def _downlevel_line(line: str) -> str | None:
    """The 3.11 spelling of a line in 3.12 syntax, of the same length; None when it has none."""
    m = _TYPE_ALIAS.match(line)
    if m is not None and "=" in line[m.end():]:
        indent, gap, name = m.groups()
        rest = line[m.end():]
        bracket = rest.lstrip()
        if bracket.startswith("["):
            stripped = _strip_brackets(rest, rest.index("["))
            if stripped is None:
                return None
            rest = stripped
        return indent + name + " " * (4 + len(gap)) + rest  # `type V = x` -> `V      = x`
    m = _GENERIC_DEF.match(line)
    if m is not None:
        return _strip_brackets(line, m.end() - 1)
    return None


def _pep701_fstrings(line: str) -> bool:
    """Does `line` hold f-strings that are well formed by Python 3.12's rules (PEP 701: the same
    quote may be reused inside the braces), so the old parser's complaint is about the syntax
    being new, not about the line being wrong (`f"{a"` is wrong in every version)?"""
    found = False
    for m in _FSTRING.finditer(line):
        quote = line[m.end() - 1]
        if line[m.end():m.end() + 2] == quote * 2:
            return False  # triple-quoted: spans lines, leave it to the error
        if _scan(line, m.end(), quote) is None:
            return False
        found = True
    return found


def _scan(line: str, i: int, quote: str, depth: int = 0) -> int | None:
    """The index after the f-string body starting at `i` closes, or None when it does not."""
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if depth == 0 and ch == quote:
            return i + 1
        if ch == "{":
            if depth == 0 and line[i + 1:i + 2] == "{":
                i += 2
                continue
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
        elif depth > 0 and ch in "'\"":
            end = line.find(ch, i + 1)  # a string nested in a replacement field
            if end < 0:
                return None
            i = end
        i += 1
    return None


def _neutral(line: str) -> str:
    """A statement of the same length that does nothing (keeps a block header a block header)."""
    indent = line[: len(line) - len(line.lstrip())]
    body = line.rstrip("\r\n")
    code = body.split("#", 1)[0].rstrip()
    stmt = "if True:" if code.endswith(":") else "pass"
    width = max(len(body) - len(indent), len(stmt))
    return indent + stmt.ljust(width) + line[len(body):]


def parse(text: str, path: str) -> tuple[ast.Module, bool]:
    """(tree, rewritten?): the module parsed, through the newer-syntax repairs when the running
    Python is older than the syntax. Raises the original SyntaxError when repairs do not help."""
    try:
        return ast.parse(text, filename=path), False
    except SyntaxError as exc:
        if sys.version_info >= (3, 12):
            raise
        first = error = exc
    lines = text.splitlines(keepends=True)
    changed = False
    for i, line in enumerate(lines):
        new = _downlevel_line(line)
        if new is not None and new != line:
            lines[i] = new
            changed = True
    for _ in range(_MAX_REPAIRS):
        if changed:
            try:
                return ast.parse("".join(lines), filename=path), True
            except SyntaxError as exc:
                error = exc
        row = (error.lineno or 0) - 1
        if not (0 <= row < len(lines)) or not _pep701_fstrings(lines[row]):
            raise first  # not newer syntax: the file's own error
        lines[row] = _neutral(lines[row])
        changed = True
    raise first
