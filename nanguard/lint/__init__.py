"""Lint: find NaN/Inf anti-patterns in PyTorch and TensorFlow source before anything runs.

The linter reads source only (``ast``; it never imports torch or the code it checks) and
reports risky numerical compositions with the nanguard op that removes the risk::

    >>> from nanguard.lint import lint_source
    >>> for f in lint_source("import torch\\ny = torch.log(torch.softmax(x, 1))\\n"):
    ...     print(f.format())
    <string>:2:5: NG101 `log(softmax(x))` is -inf where a probability underflows to 0; use `log_softmax(x, dim)`

The command line is ``nanguard lint PATH...`` (see ``nanguard lint --help``); the rule table
is ``nanguard lint --list-rules`` and each rule's rationale ``nanguard lint --explain CODE``.
"""

from __future__ import annotations

from typing import AbstractSet, List, Optional, Tuple, Union

from nanguard.lint.checker import ALL_CODES, check_source
from nanguard.lint.model import Edit, Finding, Fix, Rule
from nanguard.lint.rules import RULES

__all__ = ["lint_source", "fix_source", "Finding", "Fix", "Edit", "Rule", "RULES", "ALL_CODES"]


def lint_source(source: Union[str, bytes], path: str = "<string>",
                select: Optional[AbstractSet[str]] = None, module: Optional[str] = None) -> List[Finding]:
    """Findings for one source text. `select` is a set of enabled codes (default: all rules)."""
    return check_source(source, path, select, module)


def fix_source(source: str, path: str = "<string>",
               select: Optional[AbstractSet[str]] = None) -> Tuple[str, int, List[Finding]]:
    """Apply every safe fix: (fixed source, number of fixes applied, findings that remain)."""
    from nanguard.lint.runner import fix_text
    return fix_text(source, path, frozenset(ALL_CODES if select is None else select))
