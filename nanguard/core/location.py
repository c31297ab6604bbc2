"""A place in the user's source: file, line, function, and the code on that line."""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    """A source location: file, line, enclosing function and the code on that line."""

    file: str
    line: int
    function: str

    @property
    def code(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    @property
    def short_file(self) -> str:
        try:
            rel = os.path.relpath(self.file)
        except ValueError:  # another drive on Windows
            return self.file
        return rel if not rel.startswith("..") else self.file

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}
