"""Facts about the whole tree being linted, gathered in one cheap text pass before any file is.

A rule sees one file at a time; a few of its questions are answered in another file. Today
one: which classes build a causal mask. Informer's `ProbMask` and `TriangularCausalMask` and
LogTrans' `LocalMask` are defined in a `masking.py` next to the attention code that fills
`-inf` through them (Time-Series-Library, neuralforecast, PatchTST, FEDformer); every row of
such a mask keeps its diagonal or a band around it, so a softmax over it never sees a fully
masked row (NG701).

A class counts when its name ends in `Mask`, its body calls `triu` or `tril`, and it takes no
padding or lengths (which could empty a row). The parent process gathers the names from the
files' text (`gather`), workers read them through `causal_mask_classes()`; a class of the
linted file itself is found from its syntax tree by the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CLASS = re.compile(rb"^([ \t]*)class[ \t]+(\w*Mask)\b[^\n]*:[ \t]*\r?\n((?:\1[ \t]+[^\n]*\n|[ \t]*\r?\n)*)", re.M)
_TRIANGLE = re.compile(rb"\b(?:triu|tril)_?\(")
_PADDING = re.compile(rb"pad|length|lens\b", re.IGNORECASE)

_causal_classes: frozenset[str] = frozenset()


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


def gather(paths: Iterable[str]) -> frozenset[str]:
    """Causal-mask classes defined anywhere in `paths` (unreadable files are skipped: their
    own read error is reported by the run)."""
    names: set[str] = set()
    for path in paths:
        try:
            with open(path, "rb") as fh:
                names |= causal_mask_classes_in(fh.read())
        except OSError:
            continue
    return frozenset(names)


def set_causal_mask_classes(names: frozenset[str]) -> None:
    global _causal_classes
    _causal_classes = names


def causal_mask_classes() -> frozenset[str]:
    return _causal_classes
