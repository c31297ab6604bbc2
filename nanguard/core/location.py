"""A place in the user's source: file, line, function, and the code on that line."""

from __future__ import annotations

import importlib.util
import linecache
import os
import sysconfig
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Optional, Set

# Where installed packages and the standard library live: code there is not the user's own.
_LIBRARY_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for key in ("purelib", "platlib", "stdlib", "platstdlib")
                              if (p := sysconfig.get_paths().get(key))}))
_LIBRARY_PARTS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _module_files(*names: str) -> FrozenSet[str]:
    found: Set[str] = set()
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            found.add(os.path.abspath(spec.origin))
    return frozenset(found)


# Frames that only pass a call through: the interpreter's launcher (``python -m``) and the
# decorators that wrap a library function in Python (torch.distributed's functions are wrapped
# by typing_extensions.deprecated; contextlib's and functools' wrappers). The user's line is
# the caller's, never one of these files. Found without importing anything.
PASS_THROUGH_FILES = _module_files("runpy", "contextlib", "functools", "typing", "typing_extensions", "warnings")


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

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Frame":
        """The inverse of `to_dict` (``code`` is read again from the file, so it is not needed)."""
        return cls(d["file"], d["line"], d["function"])


@dataclass(frozen=True)
class Place:
    """A line a report names, with what it knew there: the user's line of a finding
    (`Report.where`), the forward line of a backward finding (`Report.forward`, with the forward
    ``op``) or the line that started a backward pass (`Report.call`). Unlike a `Frame` its code
    is kept as it was read when the report was made, and every part may be unknown (None): a
    backward finding may know its forward op but not its line.
    """

    file: Optional[str] = None
    line: Optional[int] = None
    function: Optional[str] = None
    code: Optional[str] = None
    op: Optional[str] = None

    @classmethod
    def of(cls, frame: Optional[Frame], code: Optional[str] = None, op: Optional[str] = None) -> Optional["Place"]:
        """``frame``'s place with the code read now (or ``code``); None without a frame or an op."""
        if frame is None:
            return cls(op=op) if op is not None else None
        return cls(frame.file, frame.line, frame.function, frame.code if code is None else code, op)
