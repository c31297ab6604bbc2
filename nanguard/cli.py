"""The `nanguard` command: `nanguard demo | run | lint | audit`.

Each pillar owns its subcommand: COMMANDS maps a name to ("module:register", one-line help),
where `register(subparsers)` adds an argparse sub-parser whose `func(args) -> int` runs it.
Only the module of the command being run is imported, so `nanguard lint` (pure source
reading) starts without importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("nanguard.demo:register", "replay the seed NaN stories and their fixes"),
    "run": ("nanguard.run.cli:register", "run a Python program under NaN/Inf detection"),
    "lint": ("nanguard.lint.cli:register", "find NaN anti-patterns in source code"),
    "audit": ("nanguard.audit_cli:register", "find the ops that can produce NaN/Inf before a run"),
}


def _base_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    from nanguard import __version__

    parser = argparse.ArgumentParser(
        prog="nanguard",
        description="Find, explain, prevent and recover from NaN/Inf in PyTorch programs.",
    )
    parser.add_argument("--version", action="version", version=f"nanguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    return parser, sub


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The full parser of `command`, or an overview listing every command (imports nothing)."""
    parser, sub = _base_parser()
    for name, (target, help_text) in COMMANDS.items():
        if name == command:
            module_name, func_name = target.split(":")
            getattr(importlib.import_module(module_name), func_name)(sub)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(command).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
