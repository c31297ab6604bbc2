"""Lint: find NaN/Inf anti-patterns in PyTorch, TensorFlow, Keras, JAX and NumPy source before anything runs.

The linter reads source only (``ast``; it never imports a framework or the code it checks)
and reports risky numerical compositions with the op that removes the risk. A message is
the pattern matched, then the hazard's why and fix in the words of the catalogue
`nanguard.core.hazards` (``f.hazard`` is its key), the same words a runtime report uses,
worded for the framework of the code at the finding (`tf.nn.log_softmax` in TensorFlow,
`keras.ops.log_softmax` in Keras, `jax.nn.log_softmax` in JAX and NumPy code). Each finding
has a ``confidence``: CERTAIN (NaN/Inf for some input the code accepts) or POSSIBLE
(depending on data); the command line reports CERTAIN ones unless asked for all::

    >>> from nanguard.lint import lint_source
    >>> from nanguard.core.hazards import HAZARDS, lint_message
    >>> [f] = lint_source("import torch\\ny = torch.log(torch.softmax(x, 1))\\n")
    >>> f.format()[:37], f.hazard
    ('<string>:2:5: NG101 `log(softmax(x))`', 'log_softmax')
    >>> f.message == lint_message(HAZARDS["log_softmax"], "`log(softmax(x))`")
    True
    >>> f.confidence
    'certain'
    >>> [g] = lint_source("import tensorflow as tf\\ny = tf.math.log(tf.nn.softmax(x))\\n")
    >>> "tf.nn.log_softmax(x, axis)" in g.message and "torch" not in g.message
    True

The command line is ``nanguard lint PATH...`` (see ``nanguard lint --help``); the rule table
is ``nanguard lint --list-rules`` and each rule's rationale ``nanguard lint --explain CODE``.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from nanguard.lint.checker import ALL_CODES, check_source
from nanguard.lint.model import CERTAIN, POSSIBLE, Edit, Finding, Fix, Rule
from nanguard.lint.rules import RULES

__all__ = ["ALL_CODES", "CERTAIN", "POSSIBLE", "RULES", "Edit", "Finding", "Fix", "Rule", "fix_source",
           "lint_source"]


def lint_source(source: str | bytes, path: str = "<string>",
                select: AbstractSet[str] | None = None, module: str | None = None,
                confidence: str = "all") -> list[Finding]:
    """Findings for one source text. `select` is a set of enabled codes (default: all rules);
    `confidence` is "all" (default: CERTAIN and POSSIBLE findings) or "certain" (the command
    line's default set: NaN/Inf for some input the code accepts, whatever the data)."""
    return check_source(source, path, select, module, possible=_possible(confidence))


def _possible(confidence: str) -> frozenset[str] | None:
    if confidence == "all":
        return None
    if confidence == CERTAIN:
        return frozenset()
    raise ValueError(f"confidence must be 'all' or 'certain', got {confidence!r}")


def fix_source(source: str, path: str = "<string>", select: AbstractSet[str] | None = None,
               confidence: str = "all") -> tuple[str, int, list[Finding]]:
    """Apply every safe fix: (fixed source, number of fixes applied, findings that remain)."""
    from nanguard.lint.runner import fix_text
    return fix_text(source, path, frozenset(ALL_CODES if select is None else select),
                    possible=_possible(confidence))
