"""The data the linter produces: rules, findings and the exact edits of a fix.

Everything here is plain data (no torch, no ast) so findings cross process boundaries
cheaply and serialise to JSON without surprises. The words of a rule's findings and fix come
from the hazard catalogue, `nanguard.core.hazards`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nanguard.core.hazards import HAZARDS

# A rule's hazard decides where it applies: a "gradient" hazard (an infinite or NaN
# derivative behind a finite value) cannot hurt code that autograd never differentiates,
# so such rules stay silent inside `torch.no_grad()` / `inference_mode()` and in custom
# `backward` methods. A "value" hazard (NaN/Inf in the forward result) applies everywhere.
VALUE = "value"
GRADIENT = "gradient"

# How sure a finding is. CERTAIN: the code as written reaches the op's singular set for some
# input it accepts (a softmax output can be exactly 0 once a logit gap is ~104 in float32, a
# mask can be all False, a cosine computed in floating point can exceed 1 by an ulp).
# POSSIBLE: the risk depends on a value the code does not show (whether a vector is 0, a
# predicted log-variance, a count the caller passes); the README's "Lint" section lists which.
# The command line reports CERTAIN findings by default; `--confidence all`, or naming a code in
# `--select`, adds the POSSIBLE ones.
CERTAIN = "certain"
POSSIBLE = "possible"
CONFIDENCES = (CERTAIN, POSSIBLE)


@dataclass(frozen=True)
class Rule:
    """One lint rule: its code, its one-line summary, and the long form for `--explain`.

    ``hazards`` are the keys of the catalogue entries (`nanguard.core.hazards`) the rule
    finds; their why and fix are the words of its findings and of its ``fix_hint``. Only a
    rule that finds no NaN/Inf hazard (NG001, a file that does not parse) has its own
    ``fix``. ``explanation`` is what `--explain` adds: examples and what is matched.
    """

    code: str
    name: str
    summary: str
    explanation: str
    hazard: str = VALUE
    autofix: bool = False
    hazards: tuple[str, ...] = ()
    fix: str = ""
    confidence: str = CERTAIN  # of its findings, unless a check says otherwise
    # A possible rule some of whose spellings are certain (listed as "both" by --list-rules;
    # its explanation says which): NG601's clip to exactly [eps, 1], NG801 of a parameter.
    certain_when: str = ""

    @property
    def listed_confidence(self) -> str:
        return "both" if self.certain_when and self.confidence != CERTAIN else self.confidence

    @property
    def fix_hint(self) -> str:
        """The fix of the rule's first hazard, in the catalogue's words."""
        if not self.hazards:
            return self.fix
        return HAZARDS[self.hazards[0]].fix_text()

    def why(self) -> list[str]:
        """The catalogue's why of each hazard the rule finds."""
        return [HAZARDS[key].why_text() for key in self.hazards]


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``text``.

    ``location``/``end_location`` are the same positions as 1-based (row, column), filled in
    when the finding is built, for JSON consumers that think in rows and columns.
    """

    start: int
    end: int
    text: str
    location: tuple[int, int] = field(default=(0, 0), compare=False)
    end_location: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Fix:
    """A semantics-preserving rewrite: what it does, in words, and the edits that do it."""

    description: str
    edits: tuple[Edit, ...]


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
    fix: Fix | None = None
    # Character offsets of the flagged node; the fixer and noqa handling use them.
    span: tuple[int, int] = field(default=(0, 0), compare=False)
    # The catalogue key of the hazard the message words (nanguard.core.hazards); None for NG001.
    hazard: str | None = None
    confidence: str = CERTAIN  # CERTAIN or POSSIBLE (see above)
    cell: int | None = None  # a notebook's cell number (lines then count inside the cell)
    # A notebook finding's place in the .ipynb file itself: (line, col, end_line, end_col),
    # for the formats that annotate the file as given (GitHub, SARIF); None elsewhere.
    file_position: tuple[int, int, int, int] | None = field(default=None, compare=False)

    def format(self) -> str:
        """The flake8/ruff one-line form: ``path:line:col: CODE message`` (``path:cell N:line:col:``
        in a notebook)."""
        where = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{where}{self.line}:{self.col}: {self.code} {self.message}"

    def file_region(self) -> tuple[int, int, int, int]:
        """(line, col, end_line, end_col) in the file as stored: a notebook's JSON lines, else ours."""
        return self.file_position or (self.line, self.col, self.end_line, self.end_col)

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    def to_dict(self, name: str = "") -> dict[str, Any]:
        """A ruff-compatible JSON object (``filename``, ``location``, ``fix`` with edits)."""
        fix: dict[str, Any] | None = None
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
            "hazard": self.hazard,
            "confidence": self.confidence,
            "cell": self.cell,
        }

