"""The data the linter produces: rules, findings and the exact edits of a fix.

Everything here is plain data (no torch, no ast) so findings cross process boundaries
cheaply and serialise to JSON without surprises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

# A rule's hazard decides where it applies: a "gradient" hazard (an infinite or NaN
# derivative behind a finite value) cannot hurt code that autograd never differentiates,
# so such rules stay silent inside `torch.no_grad()` / `inference_mode()` and in custom
# `backward` methods. A "value" hazard (NaN/Inf in the forward result) applies everywhere.
VALUE = "value"
GRADIENT = "gradient"


@dataclass(frozen=True)
class Rule:
    """One lint rule: its code, its one-line summary, and the long form for `--explain`."""

    code: str
    name: str
    summary: str
    fix_hint: str
    explanation: str
    hazard: str = VALUE
    autofix: bool = False


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``text``.

    ``location``/``end_location`` are the same positions as 1-based (row, column), filled in
    when the finding is built, for JSON consumers that think in rows and columns.
    """

    start: int
    end: int
    text: str
    location: Tuple[int, int] = field(default=(0, 0), compare=False)
    end_location: Tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Fix:
    """A semantics-preserving rewrite: what it does, in words, and the edits that do it."""

    description: str
    edits: Tuple[Edit, ...]


@dataclass
class Finding:
    """One reported risk. Lines are 1-based; columns are 1-based character columns (as ruff)."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    message: str
    fix: Optional[Fix] = None
    # Character offsets of the flagged node; the fixer and noqa handling use them.
    span: Tuple[int, int] = field(default=(0, 0), compare=False)

    def format(self) -> str:
        """The flake8/ruff one-line form: ``path:line:col: CODE message``."""
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def sort_key(self) -> Tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)

    def to_dict(self, name: str = "") -> Dict[str, Any]:
        """A ruff-compatible JSON object (``filename``, ``location``, ``fix`` with edits)."""
        fix: Optional[Dict[str, Any]] = None
        if self.fix is not None:
            edits = []
            for e in self.fix.edits:
                edits.append({
                    "content": e.text,
                    "location": {"row": e.location[0], "column": e.location[1]},
                    "end_location": {"row": e.end_location[0], "column": e.end_location[1]},
                    "start_offset": e.start,
                    "end_offset": e.end,
                })
            fix = {"applicability": "safe", "message": self.fix.description, "edits": edits}
        return {
            "filename": self.path,
            "code": self.code,
            "name": name,
            "message": self.message,
            "location": {"row": self.line, "column": self.col},
            "end_location": {"row": self.end_line, "column": self.end_col},
            "fix": fix,
        }

