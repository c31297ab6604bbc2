"""Source text bookkeeping: decoding, ast positions to character offsets, and `# noqa`.

`ast` reports columns as UTF-8 byte offsets and splits lines only at ``\\n``, ``\\r\\n`` and
``\\r`` (not at form feeds or Unicode line separators, which ``str.splitlines`` would), so
positions are converted here, in one place, with the tokenizer's own idea of a line.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize

_LINE_BREAK = re.compile(r"\r\n|\r|\n")

# flake8's own noqa syntax: `# noqa` (everything) or `# noqa: A1, B2` (only those codes).
NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
# File-level exemption, as ruff's `# ruff: noqa`: on a line of its own.
FILE_NOQA = re.compile(
    r"^[ \t]*#\s*nanguard:\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE | re.MULTILINE,
)

ALL: frozenset[str] = frozenset({"*"})


def decode(data: bytes) -> tuple[str, str]:
    """Decode Python source bytes as the interpreter would (PEP 263 cookie, BOM); return (text, encoding)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    text = text.removeprefix("\ufeff")
    return text, encoding


def _codes(match: re.Match[str]) -> frozenset[str]:
    codes = match.group("codes")
    if not codes:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[,\s]+", codes.strip()) if c)


class SourceText:
    """The decoded text of one file with line starts, for offsets, segments and noqa."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        for m in _LINE_BREAK.finditer(text):
            starts.append(m.end())
        self.line_starts = starts
        self._noqa: dict[int, frozenset[str] | None] = {}

    def line_text(self, lineno: int) -> str:
        """Line `lineno` (1-based) without its line break; '' past the end."""
        if not 1 <= lineno <= len(self.line_starts):
            return ""
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def char_col(self, lineno: int, byte_col: int) -> int:
        """0-based character column of an ast (line, UTF-8 byte column) position."""
        line = self.line_text(lineno)
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def offset(self, lineno: int, byte_col: int) -> int:
        """Character offset into the text of an ast position."""
        if lineno > len(self.line_starts):
            return len(self.text)
        return self.line_starts[lineno - 1] + self.char_col(lineno, byte_col)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (row, column) of a character offset."""
        row = bisect.bisect_right(self.line_starts, offset)
        return row, offset - self.line_starts[row - 1] + 1

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Character offsets [start, end) of a located node."""
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),  # type: ignore[attr-defined]
        )

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def noqa_codes(self, lineno: int) -> frozenset[str] | None:
        """Codes a `# noqa` comment on this line suppresses: None (no comment), ALL, or a set."""
        if lineno not in self._noqa:
            line = self.line_text(lineno)
            found: frozenset[str] | None = None
            if "noqa" in line.lower():
                m = NOQA.search(_comment_part(line))
                if m:
                    found = _codes(m)
            self._noqa[lineno] = found
        return self._noqa[lineno]

    def suppressed(self, code: str, lines: tuple[int, ...]) -> bool:
        """True when a noqa comment on any of `lines` covers `code` (exactly or by prefix)."""
        for lineno in lines:
            codes = self.noqa_codes(lineno)
            if codes is None:
                continue
            if codes is ALL or any(code.startswith(c) for c in codes):
                return True
        return False


def file_noqa(text: str) -> frozenset[str] | None:
    """Codes exempted for the whole file by `# nanguard: noqa[: CODES]`; None when absent."""
    if "noqa" not in text:
        return None
    found: list[frozenset[str]] = [_codes(m) for m in FILE_NOQA.finditer(text)]
    if not found:
        return None
    if any(c is ALL for c in found):
        return ALL
    return frozenset().union(*found)


def _comment_part(line: str) -> str:
    """The comment of a physical line, ignoring `#` inside string literals.

    A cheap scan rather than the tokenizer: it tracks quotes on this one line, which is
    all a trailing `# noqa` needs. Lines inside a triple-quoted string are not comments,
    but such a line cannot carry a finding either.
    """
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif ch == "#":
            return line[i:]
        elif ch in "'\"":
            quote = line[i:i + 3] if line[i:i + 3] in ("'''", '"""') else ch
            i += len(quote)
            continue
        i += 1
    return ""
