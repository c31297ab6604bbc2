"""`nanguard demo`: the seed stories replayed, one section per pillar.

Every section runs real code: it shows the naive program producing NaN/Inf and the
nanguard way producing finite values and the right gradients. SECTIONS lists modules
that each define `run(show: Show) -> None`. A section runs only where its framework is
installed: the PyTorch ones (TORCH_SECTIONS, which import torch) are skipped together with
one line saying how to get it, the TensorFlow and JAX ones skip themselves the same way, and
lint needs no framework, so a bare, TF-only or JAX-only install runs what it can and exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import TextIO

SECTIONS: list[str] = [
    "nanguard.demo.prevent",
    "nanguard.demo.detect",
    "nanguard.demo.recover",
    "nanguard.demo.audit",
    "nanguard.demo.lint",
    # one module per pillar, in the order a user meets them; then the other frameworks'
    # stories, each skipped with a one-line hint when its framework is not installed
    "nanguard.demo.tf_stories",
    "nanguard.demo.jax_stories",
]

# the sections that import torch (at module level): skipped without it, with TORCH_HINT
TORCH_SECTIONS: tuple[str, ...] = ("nanguard.demo.prevent", "nanguard.demo.detect", "nanguard.demo.recover",
                                   "nanguard.demo.audit")
TORCH_HINT = "PyTorch sections ({names}) skipped: PyTorch is not installed; pip install 'nanguard[torch]'"


class Show:
    """Tiny printer for the demo: headings, code lines and results, coloured on a terminal."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        self.stream = stream
        self.colour = hasattr(stream, "isatty") and stream.isatty()

    def _paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    def title(self, text: str) -> None:
        bar = "=" * len(text)
        print(f"\n{self._paint(bar, '1')}\n{self._paint(text, '1')}\n{self._paint(bar, '1')}", file=self.stream)

    def story(self, text: str) -> None:
        print(f"\n{self._paint('▸ ' + text, '1;36')}", file=self.stream)

    def code(self, text: str) -> None:
        for line in text.strip("\n").splitlines():
            print(f"    {self._paint(line, '2')}", file=self.stream)

    def bad(self, label: str, value: object) -> None:
        print(f"  {self._paint('✗', '31')} {label}: {value}", file=self.stream)

    def good(self, label: str, value: object) -> None:
        print(f"  {self._paint('✓', '32')} {label}: {value}", file=self.stream)

    def note(self, text: str) -> None:
        print(f"    {text}", file=self.stream)

    def skip(self, text: str) -> None:
        """One line for a section that cannot run here (its framework is not installed)."""
        print(f"\n{self._paint('○ ' + text, '33')}", file=self.stream)


def installed(module: str) -> bool:
    """Whether `module` (a framework: "tensorflow", "jax") can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a blocked or half-initialised entry in sys.modules
        return False


def _torch_missing() -> str | None:
    """Why the PyTorch sections cannot run here ("is not installed", "does not import (...)"), or None."""
    if not installed("torch"):
        return "is not installed"
    try:
        importlib.import_module("torch")
    except ImportError as error:  # installed but broken: one line, as the other frameworks get
        return f"does not import ({error})"
    return None


def run_demo(sections: list[str] | None = None, stream: TextIO = sys.stdout) -> int:
    show = Show(stream)
    chosen = sections or SECTIONS
    needs_torch = [name for name in chosen if name in TORCH_SECTIONS]
    torch_missing = _torch_missing() if needs_torch else None
    if torch_missing is not None:
        names = ", ".join(name.rsplit(".", 1)[1] for name in needs_torch)
        show.skip(TORCH_HINT.format(names=names).replace("is not installed", torch_missing))
    for name in chosen:
        if torch_missing is not None and name in TORCH_SECTIONS:
            continue
        importlib.import_module(name).run(show)
    print("\nAll demo sections finished.", file=stream)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="replay the seed NaN stories and their fixes")
    parser.add_argument(
        "--section", action="append", choices=[s.rsplit(".", 1)[1] for s in SECTIONS],
        help="run only this section (repeatable)",
    )
    parser.set_defaults(func=lambda args: run_demo(
        [s for s in SECTIONS if args.section is None or s.rsplit(".", 1)[1] in args.section]
    ))
