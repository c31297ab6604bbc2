"""The `nanguard` command: `nanguard demo | run | lint`.

Each pillar owns its subcommand: COMMANDS maps a name to "module:register", where
`register(subparsers)` adds an argparse sub-parser whose `func(args) -> int` runs it.
Modules are imported only when needed so `nanguard lint` never pays for torch start-up twice.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

COMMANDS: dict[str, str] = {
    "demo": "nanguard.demo:register",
    # one line per pillar's command, e.g. "run": "nanguard.detect.cli:register",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nanguard",
        description="Find, explain, prevent and recover from NaN/Inf in PyTorch programs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for target in COMMANDS.values():
        module_name, func_name = target.split(":")
        getattr(importlib.import_module(module_name), func_name)(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
