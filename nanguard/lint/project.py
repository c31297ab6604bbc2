"""Facts about the whole tree being linted, gathered in one cheap text pass before any file is.

A rule sees one file at a time; a few of its questions are answered in another file:

* which classes build a causal mask. Informer's `ProbMask` and `TriangularCausalMask` and
  LogTrans' `LocalMask` are defined in a `masking.py` next to the attention code that fills
  `-inf` through them (Time-Series-Library, neuralforecast, PatchTST, FEDformer); every row of
  such a mask keeps its diagonal or a band around it, so a softmax over it never sees a fully
  masked row (NG701). A class counts when its name ends in `Mask`, its body calls `triu` or
  `tril`, and it takes no padding or lengths (which could empty a row).
* which helper functions return a positive value: a one-statement body such as geoopt's
  `def sabs(x, eps=1e-15): return x.abs().add_(eps)` (`positive.positive_helper_return` says
  which returns count). `(1 - eps) / sabs(k) ** 0.5` in another module is then never a division
  by 0. A name counts only when every function of that name in the tree is such a helper.

The parent process gathers both from the files' text (`gather`), workers read them through
`causal_mask_classes()` and `positive_helpers()`; the linted file's own classes and helpers
are found from its syntax tree by the rules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

_CLASS = re.compile(rb"^([ \t]*)class[ \t]+(\w*Mask)\b[^\n]*:[ \t]*\r?\n((?:\1[ \t]+[^\n]*\n|[ \t]*\r?\n)*)", re.M)
_TRIANGLE = re.compile(rb"\b(?:triu|tril)_?\(")
_PADDING = re.compile(rb"pad|length|lens\b", re.IGNORECASE)
_DEF = re.compile(rb"def[ \t]+(\w+)")  # a literal start: 4x faster than `\bdef`
# A def whose first statement is its return, after at most a one-line docstring.
_ONE_RETURN = re.compile(rb"def[ \t]+(\w+)[ \t]*\([^)\n]*\)[^:\n]*:[ \t]*\r?\n"
                         rb"(?:[ \t]+[rRuU]?(?:\"\"\"[^\n]*\"\"\"|'''[^\n]*''')[ \t]*\r?\n)?"
                         rb"[ \t]+return[ \t]+([^\n#]+?)[ \t]*(?:#[^\n]*)?\r?\n")


# What a positive return spells (`positive_helper_return`): anything else is not parsed.
_MAY_BE_POSITIVE = re.compile(rb"abs|clamp|clip|max|square|sqrt|norm|exp|softplus|sigmoid|relu|\*\*")


@dataclass(frozen=True)
class TreeFacts:
    causal_mask_classes: frozenset[str] = frozenset()
    positive_helpers: frozenset[str] = frozenset()


_facts = TreeFacts()


def causal_mask_classes_in(data: bytes) -> set[str]:
    """Names of the causal-mask classes defined in one file's text."""
    if b"Mask" not in data or not (b"triu" in data or b"tril" in data):
        return set()
    found = set()
    for match in _CLASS.finditer(data):
        body = match.group(3)
        if _TRIANGLE.search(body) and not _PADDING.search(body):
            found.add(match.group(2).decode("ascii"))
    return found


def helpers_in(data: bytes) -> tuple[set[str], set[str]]:
    """(positive helpers, every other function name) defined in one file's text."""
    from nanguard.lint.positive import positive_helper_return

    positive: set[str] = set()
    others: set[str] = set()
    for found in _DEF.finditer(data):
        if data[found.start() - 1:found.start()] not in (b"", b" ", b"\t", b"\n"):
            continue  # `undef x`, `_def(`: not the keyword
        name = found.group(1).decode("ascii")
        match = _ONE_RETURN.match(data, found.start())  # the def's first statement, if a return
        value = match.group(2) if match is not None else b""
        if value and _MAY_BE_POSITIVE.search(value):
            try:
                if positive_helper_return(ast.parse(value.decode("utf-8"), mode="eval").body):
                    positive.add(name)
                    continue
            except (SyntaxError, UnicodeDecodeError, ValueError):
                pass  # a return continued on the next line: not read
        others.add(name)
    return positive - others, others


def gather(paths: Iterable[str]) -> TreeFacts:
    """The facts of the files `paths` (unreadable files are skipped: their own read error is
    reported by the run)."""
    masks: set[str] = set()
    positive: set[str] = set()
    others: set[str] = set()
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        masks |= causal_mask_classes_in(data)
        if b"return" in data:
            p, o = helpers_in(data)
            positive |= p
            others |= o
    return TreeFacts(frozenset(masks), frozenset(positive - others))


def set_facts(facts: TreeFacts) -> None:
    global _facts
    _facts = facts


def causal_mask_classes() -> frozenset[str]:
    return _facts.causal_mask_classes


def positive_helpers() -> frozenset[str]:
    return _facts.positive_helpers
