"""A place in the user's source: file, line, function, and the code on that line."""

from __future__ import annotations

import linecache
import os
import sysconfig
from dataclasses import dataclass
from typing import Any, Dict

# Where installed packages and the standard library live: code there is not the user's own.
_LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for key in ("purelib", "platlib", "stdlib", "platstdlib")
                              if (p := sysconfig.get_paths().get(key))}))
_LIBRARY_PARTS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


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

    @property
    def in_library(self) -> bool:
        """In an installed package or the standard library (transformers, timm...), not the user's code."""
        path = os.path.abspath(self.file) if not self.file.startswith("<") else self.file
        return path.startswith(_LIBRARY_DIRS) or any(part in path for part in _LIBRARY_PARTS)

    def to_dict(self) -> Dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}
